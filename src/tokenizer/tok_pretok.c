/*
 * tok_pretok.c — the pre-tokenizer: Split steps (a regex and a delimiter behavior), then
 * ByteLevel, then BPE of every resulting word.
 *
 * Regex matching. `tokenizers` runs Oniguruma with Unicode 16.0 properties. Two matchers:
 *  - TOK_MATCHER_QWEN: the Qwen / Llama-3 family of patterns, recognised by their exact text
 *    (qwen_patterns below) and matched by hand, the alternatives tried in order at each
 *    position exactly as a backtracking engine does, with the Unicode 16 tables of
 *    tok_unicode.h. Exact and fast.
 *  - TOK_MATCHER_PCRE2: any other pattern, compiled by PCRE2 (UTF, UCP, JIT) after
 *    tok_regex.c wrote its \s \S \p{..} \P{..} out as Unicode 16 ranges, so those classify
 *    like `tokenizers`; other Unicode-dependent constructs (\d, \w, scripts, case folding)
 *    still use PCRE2's own tables (docs/tokenizer.md).
 *
 * Match iteration follows the `onig` crate's find_iter: an empty match right after the
 * previous match is skipped by advancing one character. Split behaviors follow
 * `tokenizers`' NormalizedString::split.
 */
#include "tokenizer/tok_internal.h"

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tok_unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

/* ---- the hand-written Qwen-family matcher ------------------------------------------------ */

static const struct {
    const char *regex;
    tok_qwen_pattern params;
} qwen_patterns[] = {
    /* Qwen3.5 / Qwen3.6 */
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     {1, 1}},
    /* Qwen2 / Qwen2.5 / Qwen3 */
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     {0, 1}},
    /* Llama 3, GLM-4 */
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     {0, 3}},
};

/* Character classes the matcher asks about, one byte per code point of the word. */
enum {
    CL_LETTER = 1,   /* \p{L} */
    CL_MARK = 2,     /* \p{M} */
    CL_NUMBER = 4,   /* \p{N} */
    CL_SPACE = 8,    /* \s (White_Space) */
    CL_CRLF = 16,    /* \r or \n */
};

static inline unsigned class_of(uint32_t cp) {
    if (cp < 0x80) {
        /* ASCII fast path (same answers as the table) */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CL_LETTER;
        if (cp >= '0' && cp <= '9') return CL_NUMBER;
        if (cp == '\r' || cp == '\n') return CL_SPACE | CL_CRLF;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CL_SPACE;
        return 0;
    }
    uint8_t p = tok_uprops(cp);
    tok_ucat c = (tok_ucat)(p & TOK_UPROP_CAT_MASK);
    unsigned k = 0;
    if (tok_ucat_is_letter(c)) k |= CL_LETTER;
    else if (tok_ucat_is_mark(c)) k |= CL_MARK;
    else if (tok_ucat_is_number(c)) k |= CL_NUMBER;
    if (p & TOK_UPROP_WHITE_SPACE) k |= CL_SPACE;
    return k;
}

/* The word decoded once: code point classes and byte offsets (offs[n] = byte length). */
typedef struct decoded {
    uint32_t *cp;
    uint8_t *cl;
    uint32_t *off;
    size_t n, cap;
} decoded;

static int decode_word(decoded *d, const char *s, size_t len) {
    if (d->cap < len + 1) {
        size_t cap = len + 1;
        uint32_t *cp = realloc(d->cp, cap * sizeof *cp);
        if (!cp) return -1;
        d->cp = cp;
        uint8_t *cl = realloc(d->cl, cap);
        if (!cl) return -1;
        d->cl = cl;
        uint32_t *off = realloc(d->off, cap * sizeof *off);
        if (!off) return -1;
        d->off = off;
        d->cap = cap;
    }
    size_t n = 0, i = 0;
    while (i < len) {
        uint32_t c;
        size_t k;
        if ((unsigned char)s[i] < 0x80) {
            c = (unsigned char)s[i];
            k = 1;
        } else {
            k = clef_utf8_decode((const unsigned char *)s + i, len - i, &c);
            if (k == 0) { c = 0xFFFD; k = 1; } /* unreachable: input validated */
        }
        d->cp[n] = c;
        d->cl[n] = (uint8_t)class_of(c);
        d->off[n] = (uint32_t)i;
        n++;
        i += k;
    }
    d->off[n] = (uint32_t)len;
    d->n = n;
    return 0;
}

static inline int ascii_fold_eq(uint32_t c, char lower) {
    return c == (uint32_t)lower || c == (uint32_t)(lower - 32);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: returns the end (code point index) or 0. Case-insensitive
 * as Oniguruma folds: 's' also matches U+017F LATIN SMALL LETTER LONG S. */
static size_t match_contraction(const decoded *d, size_t i) {
    if (d->cp[i] != '\'' || i + 1 >= d->n) return 0;
    uint32_t a = d->cp[i + 1];
    uint32_t b = i + 2 < d->n ? d->cp[i + 2] : 0;
    if (ascii_fold_eq(a, 's') || a == 0x17F) return i + 2;
    if (ascii_fold_eq(a, 't')) return i + 2;
    if (ascii_fold_eq(a, 'r') && ascii_fold_eq(b, 'e')) return i + 3;
    if (ascii_fold_eq(a, 'v') && ascii_fold_eq(b, 'e')) return i + 3;
    if (ascii_fold_eq(a, 'm')) return i + 2;
    if (ascii_fold_eq(a, 'l') && ascii_fold_eq(b, 'l')) return i + 3;
    if (ascii_fold_eq(a, 'd')) return i + 2;
    return 0;
}

/* The match starting at code point i (every position matches one alternative; see below).
 * Returns its end, > i. */
static size_t qwen_match_at(const tok_qwen_pattern *q, const decoded *d, size_t i) {
    const uint8_t *cl = d->cl;
    size_t n = d->n;
    unsigned word_cls = CL_LETTER | (q->marks_in_words ? CL_MARK : 0);
    size_t e;
    /* 1: (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if ((e = match_contraction(d, i)) != 0) return e;
    /* 2: [^\r\n\p{L}\p{N}]?<word>+  (greedy optional, backtracks to empty) */
    if (!(cl[i] & (CL_CRLF | CL_LETTER | CL_NUMBER)) && i + 1 < n && (cl[i + 1] & word_cls)) {
        e = i + 2;
        while (e < n && (cl[e] & word_cls)) e++;
        return e;
    }
    if (cl[i] & word_cls) {
        e = i + 1;
        while (e < n && (cl[e] & word_cls)) e++;
        return e;
    }
    /* 3: \p{N} or \p{N}{1,3} */
    if (cl[i] & CL_NUMBER) {
        e = i + 1;
        while (e < n && e - i < (size_t)q->max_digits && (cl[e] & CL_NUMBER)) e++;
        return e;
    }
    /* 4: " ?[^\s\p{L}(\p{M})\p{N}]+[\r\n]*" */
    unsigned other_excl = CL_SPACE | CL_LETTER | CL_NUMBER | (q->marks_in_words ? CL_MARK : 0);
    size_t j = i;
    if (d->cp[j] == ' ' && j + 1 < n && !(cl[j + 1] & other_excl)) j++;
    if (!(cl[j] & other_excl)) {
        e = j + 1;
        while (e < n && !(cl[e] & other_excl)) e++;
        while (e < n && (cl[e] & CL_CRLF)) e++;
        return e;
    }
    /* Now cl[i] is \s (everything else matched above). */
    size_t ws_end = i;
    while (ws_end < n && (cl[ws_end] & CL_SPACE)) ws_end++;
    /* 5: \s*[\r\n]+  -> up to and including the last \r or \n of the whitespace run */
    for (size_t k = ws_end; k > i; k--)
        if (cl[k - 1] & CL_CRLF) return k;
    /* 6: \s+(?!\S) -> the whole run at the end of the text, else all but its last char */
    if (ws_end == n) return ws_end;
    if (ws_end - i >= 2) return ws_end - 1;
    /* 7: \s+ */
    return ws_end;
}

/* ---- compiling a Split ------------------------------------------------------------------- */

int tok_pretok_compile_split(tok_split *s, const char *regex, size_t regex_len, int literal,
                             const char *where) {
    if (!literal) {
        for (size_t k = 0; k < sizeof qwen_patterns / sizeof qwen_patterns[0]; k++) {
            if (strlen(qwen_patterns[k].regex) == regex_len &&
                memcmp(qwen_patterns[k].regex, regex, regex_len) == 0) {
                s->kind = TOK_MATCHER_QWEN;
                s->qwen = qwen_patterns[k].params;
                return CLEF_OK;
            }
        }
    }
    int err = 0;
    PCRE2_SIZE err_off = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    char *expanded = NULL; /* Unicode classes as Unicode 16 ranges (tok_regex.c) */
    size_t expanded_len = 0;
    if (!literal && tok_regex_expand_classes(regex, regex_len, &expanded, &expanded_len) != 0)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: out of memory", where);
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)(expanded ? expanded : regex), expanded ? expanded_len : regex_len,
                                     opts, &err, &err_off, NULL);
    free(expanded);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return clef_fail(CLEF_ERR_TOKENIZER_UNSUPPORTED,
                         "%s: regex '%.*s' does not compile (PCRE2, classes expanded, offset %zu): %s",
                         where, (int)(regex_len > 200 ? 200 : regex_len), regex, (size_t)err_off,
                         (const char *)msg);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* without JIT PCRE2 still matches, slower */
    s->kind = TOK_MATCHER_PCRE2;
    s->regex = code;
    return CLEF_OK;
}

void tok_pretok_free(tok_pretok *p) {
    for (size_t i = 0; i < p->split_count; i++) pcre2_code_free(p->splits[i].regex);
    free(p->splits);
    pcre2_code_free(p->gpt2_split.regex);
    memset(p, 0, sizeof *p);
}

/* ---- piece lists ------------------------------------------------------------------------- */

int tok_pieces_push(tok_pieces *l, const char *p, size_t n) {
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        tok_piece *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->count++] = (tok_piece){p, n};
    return 0;
}

/* Match spans of one piece, as (start, end, is_match) in byte offsets. */
typedef struct span {
    size_t start, end;
    int is_match;
} span;
typedef struct spans {
    span *v;
    size_t count, cap;
} spans;

static int spans_push(spans *l, size_t start, size_t end, int is_match) {
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        span *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->count++] = (span){start, end, is_match};
    return 0;
}

/* Per-call state of the pre-tokenizer (kept here so tok_scratch stays small). */
typedef struct pretok_state {
    decoded dec;
    spans sp, merged;
} pretok_state;

/* Fills st->sp with `tokenizers`' find_matches result for piece[0..len): matches and the
 * gaps between them, in order, covering the piece. */
static int find_matches(const tok_split *sp, const char *piece, size_t len, tok_scratch *s,
                        pretok_state *st) {
    st->sp.count = 0;
    if (len == 0) return spans_push(&st->sp, 0, 0, 0);
    size_t prev = 0;
    if (sp->kind == TOK_MATCHER_QWEN) {
        if (decode_word(&st->dec, piece, len) != 0) return -1;
        const decoded *d = &st->dec;
        for (size_t i = 0; i < d->n;) {
            size_t e = qwen_match_at(&sp->qwen, d, i);
            if (spans_push(&st->sp, d->off[i], d->off[e], 1) != 0) return -1;
            i = e;
        }
        return 0;
    }
    pcre2_code *code = sp->regex;
    if (!s->match_data) {
        s->match_data = pcre2_match_data_create(4, NULL);
        if (!s->match_data) return -1;
    }
    pcre2_match_data *md = s->match_data;
    size_t pos = 0;
    int have_last = 0;
    size_t last_end = 0;
    while (pos <= len) {
        int rc = pcre2_match(code, (PCRE2_SPTR)piece, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break; /* PCRE2_ERROR_NOMATCH, or a resource limit: no further matches */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && have_last && last_end == me) {
            /* onig's find_iter: skip an empty match right after the previous match */
            if (pos >= len) break;
            uint32_t c;
            size_t k = clef_utf8_decode((const unsigned char *)piece + pos, len - pos, &c);
            pos += k ? k : 1;
            continue;
        }
        if (prev != ms && spans_push(&st->sp, prev, ms, 0) != 0) return -1;
        if (spans_push(&st->sp, ms, me, 1) != 0) return -1;
        prev = me;
        pos = me;
        have_last = 1;
        last_end = me;
    }
    if (prev != len && spans_push(&st->sp, prev, len, 0) != 0) return -1;
    return 0;
}

/* Applies a Split step to every piece of in, appending the kept sub-pieces to out. */
static int apply_split(const tok_split *sp, const tok_pieces *in, tok_pieces *out, tok_scratch *s,
                       pretok_state *st) {
    for (size_t p = 0; p < in->count; p++) {
        const char *text = in->v[p].p;
        size_t len = in->v[p].n;
        if (find_matches(sp, text, len, s, st) != 0) return -1;
        span *v = st->sp.v;
        size_t n = st->sp.count;
        if (sp->invert)
            for (size_t i = 0; i < n; i++) v[i].is_match = !v[i].is_match;
        /* behaviors, as NormalizedString::split; is_match on the result means "remove" */
        spans *m = &st->merged;
        m->count = 0;
        int previous_match = 0;
        switch (sp->behavior) {
        case TOK_SPLIT_ISOLATED:
            for (size_t i = 0; i < n; i++)
                if (spans_push(m, v[i].start, v[i].end, 0) != 0) return -1;
            break;
        case TOK_SPLIT_REMOVED:
            for (size_t i = 0; i < n; i++)
                if (spans_push(m, v[i].start, v[i].end, v[i].is_match) != 0) return -1;
            break;
        case TOK_SPLIT_MERGED_WITH_PREVIOUS:
            for (size_t i = 0; i < n; i++) {
                if (v[i].is_match && !previous_match) {
                    if (m->count) m->v[m->count - 1].end = v[i].end;
                    else if (spans_push(m, v[i].start, v[i].end, 0) != 0) return -1;
                } else if (spans_push(m, v[i].start, v[i].end, 0) != 0) {
                    return -1;
                }
                previous_match = v[i].is_match;
            }
            break;
        case TOK_SPLIT_MERGED_WITH_NEXT:
            for (size_t r = n; r-- > 0;) {
                if (v[r].is_match && !previous_match) {
                    if (m->count) m->v[m->count - 1].start = v[r].start;
                    else if (spans_push(m, v[r].start, v[r].end, 0) != 0) return -1;
                } else if (spans_push(m, v[r].start, v[r].end, 0) != 0) {
                    return -1;
                }
                previous_match = v[r].is_match;
            }
            for (size_t a = 0, b = m->count ? m->count - 1 : 0; a < b; a++, b--) {
                span t = m->v[a];
                m->v[a] = m->v[b];
                m->v[b] = t;
            }
            break;
        case TOK_SPLIT_CONTIGUOUS:
            for (size_t i = 0; i < n; i++) {
                if (v[i].is_match == previous_match && m->count) m->v[m->count - 1].end = v[i].end;
                else if (spans_push(m, v[i].start, v[i].end, 0) != 0) return -1;
                previous_match = v[i].is_match;
            }
            break;
        }
        for (size_t i = 0; i < m->count; i++) {
            if (m->v[i].is_match || m->v[i].end == m->v[i].start) continue; /* removed, or empty */
            if (tok_pieces_push(out, text + m->v[i].start, m->v[i].end - m->v[i].start) != 0) return -1;
        }
    }
    return 0;
}

static void pretok_state_free(pretok_state *st) {
    free(st->dec.cp);
    free(st->dec.cl);
    free(st->dec.off);
    free(st->sp.v);
    free(st->merged.v);
}

void tok_scratch_free(tok_scratch *s) {
    free(s->a.v);
    free(s->b.v);
    free(s->prefixed);
    pcre2_match_data_free(s->match_data);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

int tok_pretok_and_encode(const tok_tokenizer *tok, const char *text, size_t len, tok_scratch *s,
                          tok_ids *out) {
    if (len == 0) return CLEF_OK;
    const tok_pretok *pt = &tok->pretok;
    pretok_state st = {0};
    tok_pieces *cur = &s->a, *nxt = &s->b;
    cur->count = 0;
    int rc = CLEF_ERR_OUT_OF_MEMORY;
    if (tok_pieces_push(cur, text, len) != 0) goto done;
    for (size_t k = 0; k < pt->split_count; k++) {
        nxt->count = 0;
        if (apply_split(&pt->splits[k], cur, nxt, s, &st) != 0) goto done;
        tok_pieces *t = cur;
        cur = nxt;
        nxt = t;
    }
    if (pt->byte_level_prefix_space) {
        /* ByteLevel.add_prefix_space: a space before every piece that does not start with one */
        size_t need = 0;
        for (size_t i = 0; i < cur->count; i++) need += cur->v[i].n + 1;
        if (s->prefixed_cap < need) {
            char *b = realloc(s->prefixed, need);
            if (!b) goto done;
            s->prefixed = b;
            s->prefixed_cap = need;
        }
        size_t o = 0;
        for (size_t i = 0; i < cur->count; i++) {
            tok_piece *pc = &cur->v[i];
            if (pc->n > 0 && pc->p[0] == ' ') continue;
            s->prefixed[o] = ' ';
            memcpy(s->prefixed + o + 1, pc->p, pc->n);
            pc->p = s->prefixed + o;
            pc->n += 1;
            o += pc->n;
        }
    }
    if (pt->byte_level_use_regex) {
        nxt->count = 0;
        if (apply_split(&pt->gpt2_split, cur, nxt, s, &st) != 0) goto done;
        tok_pieces *t = cur;
        cur = nxt;
        nxt = t;
    }
    for (size_t i = 0; i < cur->count; i++)
        if (tok_bpe_word(tok, cur->v[i].p, cur->v[i].n, s, out) != 0) goto done;
    rc = CLEF_OK;
done:
    pretok_state_free(&st);
    if (rc != CLEF_OK) return clef_fail(rc, "tokenizer '%s': out of memory while encoding", tok->path);
    return rc;
}
