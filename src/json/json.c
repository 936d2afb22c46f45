/*
 * json.c — a recursive-descent JSON parser with Python json.loads semantics (see json.h).
 *
 * Memory: every node, string and member array is carved from one arena owned by the
 * json_doc, so a failed parse or a finished document is freed in one call and nothing can
 * leak. Children of an array/object are first gathered in a malloc'd vector (its size is
 * unknown until the closing bracket), then copied into the arena.
 */
#include "json/json.h"

#include "core/utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_block;

struct json_doc {
    arena_block *blocks;
    json_value *root;
    int merged_duplicates; /* some object repeated a key (merged Python's way) */
};

static void *arena_alloc(json_doc *doc, size_t n) {
    n = (n + 15) & ~(size_t)15;
    arena_block *b = doc->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 64 * 1024 ? n : 64 * 1024;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = doc->blocks;
        doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

void json_doc_free(json_doc *doc) {
    if (!doc)
        return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

int json_doc_merged_duplicates(const json_doc *doc) { return doc ? doc->merged_duplicates : 0; }

const json_value *json_doc_root(const json_doc *doc) { return doc ? doc->root : NULL; }

/* ---- parser state --------------------------------------------------------------------- */

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    int depth, max_depth;
    int allow_nonfinite;
    int reject_duplicate_keys;
    json_doc *doc;
    json_error *err;
    int status;
    /* scratch buffer for decoding strings, reused */
    unsigned char *scratch;
    size_t scratch_cap;
} parser;

static int fail_at(parser *p, size_t at, int status, const char *fmt, ...) {
    if (p->status != 0)
        return p->status; /* keep the first, innermost message */
    p->status = status;
    if (p->err) {
        p->err->offset = at;
        int line = 1, col = 1;
        for (size_t i = 0; i < at && i < p->len; i++) {
            if (p->s[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        p->err->line = line;
        p->err->column = col;
        p->err->depth = p->depth;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
        va_end(ap);
        /* A quoted key cut by %.40s or by the buffer may end inside a UTF-8 sequence;
         * messages travel in JSON error bodies, so keep only the valid prefix. */
        size_t n = strlen(p->err->msg);
        p->err->msg[clef_utf8_check((const unsigned char *)p->err->msg, n)] = '\0';
    }
    return status;
}

static int nomem(parser *p) { return fail_at(p, p->pos, JSON_PARSE_NOMEM, "out of memory"); }

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static json_value *new_value(parser *p, json_type t) {
    json_value *v = arena_alloc(p->doc, sizeof *v);
    if (!v) {
        nomem(p);
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

static int match_literal(parser *p, const char *lit) {
    size_t n = strlen(lit);
    if (p->len - p->pos >= n && memcmp(p->s + p->pos, lit, n) == 0) {
        p->pos += n;
        return 1;
    }
    return 0;
}

/* ---- strings -------------------------------------------------------------------------- */

static int scratch_reserve(parser *p, size_t need) {
    if (need <= p->scratch_cap)
        return 1;
    size_t cap = p->scratch_cap ? p->scratch_cap : 256;
    while (cap < need)
        cap *= 2;
    unsigned char *b = realloc(p->scratch, cap);
    if (!b)
        return 0;
    p->scratch = b;
    p->scratch_cap = cap;
    return 1;
}

static int hex4(parser *p, size_t at, uint32_t *out) {
    if (p->len - at < 4)
        return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[at + i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* Parse a string starting at the opening quote; the decoded bytes go into the arena. */
static int parse_string_raw(parser *p, const char **out, size_t *out_len) {
    size_t start = p->pos;
    p->pos++; /* opening quote */
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len)
            return fail_at(p, start, JSON_PARSE_SYNTAX, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (!scratch_reserve(p, n + 4))
            return nomem(p);
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20)
            return fail_at(p, p->pos, JSON_PARSE_SYNTAX, "control character 0x%02x in string", c);
        if (c == '\\') {
            if (p->pos + 1 >= p->len)
                return fail_at(p, p->pos, JSON_PARSE_SYNTAX, "unterminated escape");
            unsigned char e = p->s[p->pos + 1];
            p->pos += 2;
            switch (e) {
            case '"': p->scratch[n++] = '"'; break;
            case '\\': p->scratch[n++] = '\\'; break;
            case '/': p->scratch[n++] = '/'; break;
            case 'b': p->scratch[n++] = '\b'; break;
            case 'f': p->scratch[n++] = '\f'; break;
            case 'n': p->scratch[n++] = '\n'; break;
            case 'r': p->scratch[n++] = '\r'; break;
            case 't': p->scratch[n++] = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (!hex4(p, p->pos, &cp))
                    return fail_at(p, p->pos - 2, JSON_PARSE_SYNTAX, "invalid \\u escape");
                p->pos += 4;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    uint32_t lo;
                    if (p->len - p->pos >= 6 && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' &&
                        hex4(p, p->pos + 2, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                        p->pos += 6;
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    } else {
                        return fail_at(p, p->pos - 6, JSON_PARSE_SYNTAX,
                                       "lone surrogate \\u%04X in string (not encodable as UTF-8)",
                                       (unsigned)cp);
                    }
                } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                    return fail_at(p, p->pos - 6, JSON_PARSE_SYNTAX,
                                   "lone surrogate \\u%04X in string (not encodable as UTF-8)",
                                   (unsigned)cp);
                }
                n += clef_utf8_encode(cp, p->scratch + n);
                break;
            }
            default:
                return fail_at(p, p->pos - 2, JSON_PARSE_SYNTAX, "invalid escape '\\%c'",
                               e >= 0x20 && e < 0x7f ? e : '?');
            }
            continue;
        }
        if (c < 0x80) {
            p->scratch[n++] = c;
            p->pos++;
            continue;
        }
        uint32_t cp;
        size_t k = clef_utf8_decode(p->s + p->pos, p->len - p->pos, &cp);
        if (k == 0)
            return fail_at(p, p->pos, JSON_PARSE_SYNTAX, "invalid UTF-8 in string");
        memcpy(p->scratch + n, p->s + p->pos, k);
        n += k;
        p->pos += k;
    }
    char *dst = arena_alloc(p->doc, n + 1);
    if (!dst)
        return nomem(p);
    memcpy(dst, p->scratch, n);
    dst[n] = '\0';
    *out = dst;
    *out_len = n;
    return 0;
}

/* ---- numbers -------------------------------------------------------------------------- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static json_value *parse_number(parser *p) {
    size_t start = p->pos;
    size_t i = p->pos;
    json_number_kind kind = JSON_NUMBER_INTEGER;
    if (i < p->len && p->s[i] == '-')
        i++;
    if (p->allow_nonfinite && p->len - i >= 8 && memcmp(p->s + i, "Infinity", 8) == 0) {
        i += 8;
        kind = JSON_NUMBER_NONFINITE;
    } else {
        if (i >= p->len || !is_digit(p->s[i])) {
            fail_at(p, start, JSON_PARSE_SYNTAX, "invalid number");
            return NULL;
        }
        if (p->s[i] == '0') {
            i++;
        } else {
            while (i < p->len && is_digit(p->s[i]))
                i++;
        }
        if (i < p->len && p->s[i] == '.') {
            i++;
            if (i >= p->len || !is_digit(p->s[i])) {
                fail_at(p, start, JSON_PARSE_SYNTAX, "invalid number: digit expected after '.'");
                return NULL;
            }
            while (i < p->len && is_digit(p->s[i]))
                i++;
            kind = JSON_NUMBER_REAL;
        }
        if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
            i++;
            if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
                i++;
            if (i >= p->len || !is_digit(p->s[i])) {
                fail_at(p, start, JSON_PARSE_SYNTAX, "invalid number: digit expected in exponent");
                return NULL;
            }
            while (i < p->len && is_digit(p->s[i]))
                i++;
            kind = JSON_NUMBER_REAL;
        }
    }
    size_t n = i - start;
    size_t digits = n - (p->s[start] == '-');
    if (kind == JSON_NUMBER_INTEGER && digits > JSON_PARSE_INT_MAX_DIGITS) {
        /* Python's json.loads raises ValueError here (int string conversion limit). */
        fail_at(p, start, JSON_PARSE_SYNTAX,
                "integer of %zu digits exceeds Python's limit of %d digits", digits,
                JSON_PARSE_INT_MAX_DIGITS);
        return NULL;
    }
    json_value *v = new_value(p, JSON_NUMBER);
    if (!v)
        return NULL;
    char *text = arena_alloc(p->doc, n + 1);
    if (!text) {
        nomem(p);
        return NULL;
    }
    memcpy(text, p->s + start, n);
    text[n] = '\0';
    v->u.num.text = text;
    v->u.num.len = n;
    v->u.num.kind = kind;
    if (kind == JSON_NUMBER_NONFINITE)
        v->u.num.real = text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    else
        v->u.num.real = strtod(text, NULL);
    p->pos = i;
    return v;
}

/* ---- containers ----------------------------------------------------------------------- */

static json_value *parse_value(parser *p);

typedef struct vec {
    void *items;
    size_t count, cap, elem;
} vec;

static int vec_push(vec *v, const void *item) {
    if (v->count == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        void *n = realloc(v->items, cap * v->elem);
        if (!n)
            return 0;
        v->items = n;
        v->cap = cap;
    }
    memcpy((char *)v->items + v->count * v->elem, item, v->elem);
    v->count++;
    return 1;
}

static json_value *parse_array(parser *p) {
    size_t start = p->pos;
    p->pos++; /* [ */
    vec items = {NULL, 0, 0, sizeof(json_value *)};
    json_value *v = NULL;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            json_value *item = parse_value(p);
            if (!item)
                goto out;
            if (!vec_push(&items, &item)) {
                nomem(p);
                goto out;
            }
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == ']') {
                p->pos++;
                break;
            }
            fail_at(p, p->pos, JSON_PARSE_SYNTAX, "expected ',' or ']' in array opened at offset %zu",
                    start);
            goto out;
        }
    }
    v = new_value(p, JSON_ARRAY);
    if (!v)
        goto out;
    if (items.count) {
        v->u.arr.items = arena_alloc(p->doc, items.count * sizeof(json_value *));
        if (!v->u.arr.items) {
            nomem(p);
            v = NULL;
            goto out;
        }
        memcpy(v->u.arr.items, items.items, items.count * sizeof(json_value *));
    }
    v->u.arr.count = items.count;
out:
    free(items.items);
    return v;
}

static uint64_t hash_key(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Length of the longest prefix of key[0..len) that is at most cap bytes, holds no NUL and
 * ends on a UTF-8 boundary: what a message can quote of it. */
static size_t quotable_len(const char *key, size_t len, size_t cap) {
    size_t n = len < cap ? len : cap;
    const char *nul = memchr(key, '\0', n);
    if (nul)
        n = (size_t)(nul - key);
    return clef_utf8_check((const unsigned char *)key, n);
}

/* reject_duplicate_keys: member i repeats member first. */
static int fail_duplicate(parser *p, const json_member *m, size_t i, size_t first,
                          const size_t *key_at) {
    int quoted = (int)quotable_len(m[i].key, m[i].key_len, 100);
    int rc = fail_at(p, key_at[i], JSON_PARSE_DUPLICATE_KEY,
                     "duplicate key \"%.*s\" (first at offset %zu)", quoted, m[i].key,
                     key_at[first]);
    if (p->err && p->status == JSON_PARSE_DUPLICATE_KEY) {
        size_t n = quotable_len(m[i].key, m[i].key_len, sizeof p->err->key - 1);
        memcpy(p->err->key, m[i].key, n);
        p->err->key[n] = '\0';
    }
    return rc;
}

/* Python dict semantics: a repeated key keeps its first position and takes the last value.
 * With reject_duplicate_keys the first repeat (in document order) is an error instead;
 * key_at[i] is member i's key offset (only gathered in that mode). Returns 0 or a status. */
static int merge_duplicates(parser *p, json_member *m, size_t *count, const size_t *key_at) {
    size_t n = *count;
    if (n < 2)
        return 0;
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    size_t *slots = malloc(cap * sizeof *slots); /* member index + 1; 0 = empty */
    unsigned char *drop = calloc(n, 1);
    if (!slots || !drop) {
        free(slots);
        free(drop);
        return nomem(p);
    }
    memset(slots, 0, cap * sizeof *slots);
    int any = 0, rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t s = (size_t)hash_key(m[i].key, m[i].key_len) & (cap - 1);
        for (;;) {
            if (slots[s] == 0) {
                slots[s] = i + 1;
                break;
            }
            json_member *o = &m[slots[s] - 1];
            if (o->key_len == m[i].key_len && memcmp(o->key, m[i].key, o->key_len) == 0) {
                if (p->reject_duplicate_keys) {
                    rc = fail_duplicate(p, m, i, slots[s] - 1, key_at);
                    break;
                }
                o->value = m[i].value;
                drop[i] = 1;
                any = 1;
                break;
            }
            s = (s + 1) & (cap - 1);
        }
    }
    if (any && rc == 0) {
        p->doc->merged_duplicates = 1;
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (!drop[i])
                m[w++] = m[i];
        *count = w;
    }
    free(slots);
    free(drop);
    return rc;
}

static json_value *parse_object(parser *p) {
    size_t start = p->pos;
    p->pos++; /* { */
    vec members = {NULL, 0, 0, sizeof(json_member)};
    vec key_at = {NULL, 0, 0, sizeof(size_t)}; /* key offsets, for duplicate errors */
    json_value *v = NULL;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                fail_at(p, p->pos, JSON_PARSE_SYNTAX, "expected a string key in object opened at offset %zu",
                        start);
                goto out;
            }
            json_member m;
            size_t key_start = p->pos;
            if (p->reject_duplicate_keys && !vec_push(&key_at, &key_start)) {
                nomem(p);
                goto out;
            }
            if (parse_string_raw(p, &m.key, &m.key_len) != 0)
                goto out;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                fail_at(p, p->pos, JSON_PARSE_SYNTAX, "expected ':' after key \"%.40s\"", m.key);
                goto out;
            }
            p->pos++;
            m.value = parse_value(p);
            if (!m.value)
                goto out;
            if (!vec_push(&members, &m)) {
                nomem(p);
                goto out;
            }
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == '}') {
                p->pos++;
                break;
            }
            fail_at(p, p->pos, JSON_PARSE_SYNTAX, "expected ',' or '}' in object opened at offset %zu",
                    start);
            goto out;
        }
    }
    if (merge_duplicates(p, members.items, &members.count, key_at.items) != 0)
        goto out;
    v = new_value(p, JSON_OBJECT);
    if (!v)
        goto out;
    if (members.count) {
        v->u.obj.members = arena_alloc(p->doc, members.count * sizeof(json_member));
        if (!v->u.obj.members) {
            nomem(p);
            v = NULL;
            goto out;
        }
        memcpy(v->u.obj.members, members.items, members.count * sizeof(json_member));
    }
    v->u.obj.count = members.count;
out:
    free(members.items);
    free(key_at.items);
    return v;
}

static json_value *parse_value(parser *p) {
    skip_ws(p);
    if (p->pos >= p->len) {
        fail_at(p, p->pos, JSON_PARSE_SYNTAX, "unexpected end of input");
        return NULL;
    }
    unsigned char c = p->s[p->pos];
    json_value *v = NULL;
    switch (c) {
    case '{':
    case '[':
        if (++p->depth > p->max_depth) {
            fail_at(p, p->pos, JSON_PARSE_SYNTAX, "nesting deeper than %d", p->max_depth);
            return NULL;
        }
        v = c == '{' ? parse_object(p) : parse_array(p);
        p->depth--;
        return v;
    case '"': {
        const char *s;
        size_t n;
        if (parse_string_raw(p, &s, &n) != 0)
            return NULL;
        v = new_value(p, JSON_STRING);
        if (v) {
            v->u.str.ptr = s;
            v->u.str.len = n;
        }
        return v;
    }
    case 't':
        if (match_literal(p, "true"))
            return new_value(p, JSON_TRUE);
        break;
    case 'f':
        if (match_literal(p, "false"))
            return new_value(p, JSON_FALSE);
        break;
    case 'n':
        if (match_literal(p, "null"))
            return new_value(p, JSON_NULL);
        break;
    case 'N':
        if (p->allow_nonfinite && match_literal(p, "NaN")) {
            v = new_value(p, JSON_NUMBER);
            if (v) {
                v->u.num.text = "NaN";
                v->u.num.len = 3;
                v->u.num.kind = JSON_NUMBER_NONFINITE;
                v->u.num.real = NAN;
            }
            return v;
        }
        break;
    default:
        if (c == '-' || is_digit(c) || (c == 'I' && p->allow_nonfinite))
            return parse_number(p);
        break;
    }
    if (p->pos == 0 && p->len >= 3 && memcmp(p->s, "\xEF\xBB\xBF", 3) == 0)
        fail_at(p, p->pos, JSON_PARSE_SYNTAX,
                "the text starts with a UTF-8 byte order mark (BOM, bytes EF BB BF), which JSON "
                "does not allow: save it without the BOM");
    else if (c >= 0x20 && c < 0x7f)
        fail_at(p, p->pos, JSON_PARSE_SYNTAX, "unexpected character '%c'", (char)c);
    else
        fail_at(p, p->pos, JSON_PARSE_SYNTAX, "unexpected byte 0x%02X", (unsigned)c);
    return NULL;
}

int json_parse(const char *text, size_t len, const json_parse_opts *opts, json_doc **out,
               json_error *err) {
    *out = NULL;
    if (err)
        memset(err, 0, sizeof *err);
    parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.len = len;
    p.max_depth = opts && opts->max_depth > 0 ? opts->max_depth : 256;
    p.allow_nonfinite = opts ? opts->allow_nonfinite : 0;
    p.reject_duplicate_keys = opts ? opts->reject_duplicate_keys : 0;
    p.err = err;
    p.doc = calloc(1, sizeof *p.doc);
    if (!p.doc)
        return JSON_PARSE_NOMEM;
    json_value *root = parse_value(&p);
    if (root) {
        skip_ws(&p);
        if (p.pos != p.len)
            fail_at(&p, p.pos, JSON_PARSE_SYNTAX, "extra data after the JSON value");
    }
    free(p.scratch);
    if (p.status != 0 || !root) {
        json_doc_free(p.doc);
        return p.status ? p.status : JSON_PARSE_SYNTAX;
    }
    p.doc->root = root;
    *out = p.doc;
    return 0;
}

/* ---- lookups -------------------------------------------------------------------------- */

const json_value *json_object_get(const json_value *v, const char *key) {
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < v->u.obj.count; i++) {
        const json_member *m = &v->u.obj.members[i];
        if (m->key_len == n && memcmp(m->key, key, n) == 0)
            return m->value;
    }
    return NULL;
}

const json_value *json_array_at(const json_value *v, size_t i) {
    if (!v || v->type != JSON_ARRAY || i >= v->u.arr.count)
        return NULL;
    return v->u.arr.items[i];
}

int json_get_int64(const json_value *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER || v->u.num.kind != JSON_NUMBER_INTEGER)
        return 0;
    const char *s = v->u.num.text;
    int neg = *s == '-';
    if (neg)
        s++;
    uint64_t acc = 0;
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (acc > (limit - d) / 10)
            return 0;
        acc = acc * 10 + d;
    }
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 1;
}

int json_get_double(const json_value *v, double *out) {
    if (!v || v->type != JSON_NUMBER || v->u.num.kind == JSON_NUMBER_NONFINITE)
        return 0;
    double d = v->u.num.real;
    if (!(d - d == 0)) /* inf from an overflowing literal */
        return 0;
    *out = d;
    return 1;
}

int json_get_bool(const json_value *v, int *out) {
    if (!v || (v->type != JSON_TRUE && v->type != JSON_FALSE))
        return 0;
    *out = v->type == JSON_TRUE;
    return 1;
}

const char *json_get_string(const json_value *v) {
    return v && v->type == JSON_STRING ? v->u.str.ptr : NULL;
}

const char *json_type_name(json_type t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_FALSE:
    case JSON_TRUE: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "?";
}
