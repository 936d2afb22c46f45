/*
 * tok_load.c — reading tokenizer.json (and tokenizer_config.json) into a tok_tokenizer.
 *
 * Validation happens in the order of the file's sections; every refusal names the file and
 * the JSON path of the field ("model.merges[17]"). Features `tokenizers` has but this engine
 * does not implement are refused with CLEF_ERR_TOKENIZER_UNSUPPORTED naming them, so a
 * release can never be tokenized silently differently.
 *
 * Implemented: normalizer null | NFC | Sequence of NFC; pre_tokenizer ByteLevel | Sequence of
 * Split(Regex|String, any behavior, invert) then one final ByteLevel; model BPE (vocab,
 * merges as "a b" or ["a", "b"], ignore_merges; no dropout, no prefixes/suffixes);
 * added_tokens with all their flags; decoder null | ByteLevel; post_processor ignored
 * (encode never adds special tokens); truncation and padding must be null.
 *
 * Which sections are read depends on the pipeline (tokenizer.h): TOK_PIPELINE_FILE reads
 * them all; TOK_PIPELINE_TRANSFORMERS asks tok_transformers.c which tokenizer_class
 * transformers would build, and for a class with its own pipeline reads only the model's
 * vocab and merges here.
 */
#include "tokenizer/tok_internal.h"

#include "core/error.h"
#include "core/io.h"
#include "core/utf8.h"
#include "json/json.h"
#include "tokenizer/tok_unicode.h"

#include <stdlib.h>
#include <string.h>

#define TOK_FILE_CAP ((size_t)1 << 30) /* 1 GiB: far above any real tokenizer.json */

#define FAIL_FMT(...) clef_fail(CLEF_ERR_TOKENIZER_FORMAT, __VA_ARGS__)
#define FAIL_UNSUP(...) clef_fail(CLEF_ERR_TOKENIZER_UNSUPPORTED, __VA_ARGS__)

static const char *type_of(const json_value *obj) { return json_get_string(json_object_get(obj, "type")); }

/* Reads an optional boolean field; absent or null keeps *out. */
static int get_bool_field(const char *path, const json_value *obj, const char *where, const char *key,
                          int *out) {
    const json_value *v = json_object_get(obj, key);
    if (!v || v->type == JSON_NULL) return CLEF_OK;
    if (!json_get_bool(v, out))
        return FAIL_FMT("file '%s': %s.%s must be a boolean, got %s", path, where, key, json_type_name(v->type));
    return CLEF_OK;
}

/* null or "" (the only values this engine implements for BPE prefix/suffix options) */
static int require_empty_string(const char *path, const json_value *model, const char *key) {
    const json_value *v = json_object_get(model, key);
    if (!v || v->type == JSON_NULL) return CLEF_OK;
    const char *s = json_get_string(v);
    if (s && v->u.str.len == 0) return CLEF_OK;
    return FAIL_UNSUP("file '%s': model.%s is set (%s); only null or \"\" is implemented", path, key,
                      s ? s : json_type_name(v->type));
}

/* ---- normalizer ---------------------------------------------------------------------------- */

static int load_normalizer(tok_tokenizer *tok, const json_value *n, const char *where) {
    if (!n || n->type == JSON_NULL) return CLEF_OK;
    const char *type = type_of(n);
    if (!type) return FAIL_FMT("file '%s': %s has no \"type\"", tok->path, where);
    if (strcmp(type, "NFC") == 0) {
        tok->normalize_nfc = 1;
        return CLEF_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        const json_value *list = json_object_get(n, "normalizers");
        if (!list || list->type != JSON_ARRAY)
            return FAIL_FMT("file '%s': %s.normalizers must be an array", tok->path, where);
        for (size_t i = 0; i < list->u.arr.count; i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.normalizers[%zu]", where, i);
            int rc = load_normalizer(tok, list->u.arr.items[i], sub);
            if (rc != CLEF_OK) return rc;
        }
        return CLEF_OK;
    }
    return FAIL_UNSUP("file '%s': %s type '%s' is not implemented (NFC and Sequence are)", tok->path,
                      where, type);
}

/* ---- pre-tokenizer ------------------------------------------------------------------------- */

static int load_byte_level(tok_tokenizer *tok, const json_value *b, const char *where) {
    int prefix = 1, use_regex = 1; /* tokenizers' defaults */
    int rc = get_bool_field(tok->path, b, where, "add_prefix_space", &prefix);
    if (rc == CLEF_OK) rc = get_bool_field(tok->path, b, where, "use_regex", &use_regex);
    if (rc != CLEF_OK) return rc;
    tok->pretok.byte_level_prefix_space = prefix;
    tok->pretok.byte_level_use_regex = use_regex;
    if (use_regex) {
        static const char gpt2[] =
            "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
        tok->pretok.gpt2_split.behavior = TOK_SPLIT_ISOLATED;
        return tok_pretok_compile_split(&tok->pretok.gpt2_split, gpt2, sizeof gpt2 - 1, 0, where);
    }
    return CLEF_OK;
}

static int load_split(tok_tokenizer *tok, const json_value *sp, tok_split *out, const char *where) {
    const json_value *pattern = json_object_get(sp, "pattern");
    const json_value *regex = json_object_get(pattern, "Regex");
    const json_value *literal = json_object_get(pattern, "String");
    const json_value *src = regex ? regex : literal;
    if (!src || !json_get_string(src))
        return FAIL_FMT("file '%s': %s.pattern must be {\"Regex\": string} or {\"String\": string}", tok->path,
                        where);
    const char *behavior = json_get_string(json_object_get(sp, "behavior"));
    static const struct {
        const char *name;
        tok_split_behavior b;
    } behaviors[] = {{"Removed", TOK_SPLIT_REMOVED},
                     {"Isolated", TOK_SPLIT_ISOLATED},
                     {"MergedWithPrevious", TOK_SPLIT_MERGED_WITH_PREVIOUS},
                     {"MergedWithNext", TOK_SPLIT_MERGED_WITH_NEXT},
                     {"Contiguous", TOK_SPLIT_CONTIGUOUS}};
    size_t k = 0;
    for (; behavior && k < sizeof behaviors / sizeof behaviors[0]; k++)
        if (strcmp(behavior, behaviors[k].name) == 0) break;
    if (!behavior || k == sizeof behaviors / sizeof behaviors[0])
        return FAIL_FMT("file '%s': %s.behavior must be one of Removed, Isolated, MergedWithPrevious, "
                        "MergedWithNext, Contiguous; got %s", tok->path, where, behavior ? behavior : "(none)");
    out->behavior = behaviors[k].b;
    int rc = get_bool_field(tok->path, sp, where, "invert", &out->invert);
    if (rc != CLEF_OK) return rc;
    if (literal && src->u.str.len == 0)
        return FAIL_UNSUP("file '%s': %s.pattern.String is empty", tok->path, where);
    return tok_pretok_compile_split(out, src->u.str.ptr, src->u.str.len, literal != NULL, where);
}

static int load_pretokenizer(tok_tokenizer *tok, const json_value *p) {
    if (!p || p->type == JSON_NULL)
        return FAIL_UNSUP("file '%s': pre_tokenizer is null; a byte-level BPE needs ByteLevel", tok->path);
    const char *type = type_of(p);
    if (!type) return FAIL_FMT("file '%s': pre_tokenizer has no \"type\"", tok->path);
    if (strcmp(type, "ByteLevel") == 0) return load_byte_level(tok, p, "pre_tokenizer");
    if (strcmp(type, "Sequence") != 0)
        return FAIL_UNSUP("file '%s': pre_tokenizer type '%s' is not implemented (ByteLevel and Sequence of "
                          "Split + ByteLevel are)", tok->path, type);
    const json_value *list = json_object_get(p, "pretokenizers");
    if (!list || list->type != JSON_ARRAY || list->u.arr.count == 0)
        return FAIL_FMT("file '%s': pre_tokenizer.pretokenizers must be a non-empty array", tok->path);
    size_t n = list->u.arr.count;
    tok->pretok.splits = calloc(n, sizeof *tok->pretok.splits);
    if (!tok->pretok.splits) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_value *step = list->u.arr.items[i];
        const char *st = type_of(step);
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
        if (!st) return FAIL_FMT("file '%s': %s has no \"type\"", tok->path, where);
        if (strcmp(st, "ByteLevel") == 0) {
            if (i != n - 1)
                return FAIL_UNSUP("file '%s': %s: ByteLevel must be the last pre-tokenizer", tok->path, where);
            return load_byte_level(tok, step, where);
        }
        if (strcmp(st, "Split") != 0)
            return FAIL_UNSUP("file '%s': %s type '%s' is not implemented (Split and ByteLevel are)", tok->path,
                              where, st);
        int rc = load_split(tok, step, &tok->pretok.splits[tok->pretok.split_count], where);
        tok->pretok.split_count++; /* counted even on failure so tok_pretok_free sees it */
        if (rc != CLEF_OK) return rc;
    }
    return FAIL_UNSUP("file '%s': pre_tokenizer has no final ByteLevel; only byte-level BPE is implemented",
                      tok->path);
}

/* ---- model --------------------------------------------------------------------------------- */

/* Decodes a byte-level token string to raw bytes into dst; returns the length, or -1 if a
 * character is not in the byte-level alphabet. */
static long byte_level_to_bytes(const char *s, size_t len, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = clef_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        int b = k ? tok_char_to_byte(cp) : -1;
        if (b < 0) return -1;
        dst[o++] = (char)b;
        i += k;
    }
    return (long)o;
}

static int set_token(tok_tokenizer *tok, int32_t id, const char *s, size_t len) {
    if ((size_t)id >= tok->id_cap) { /* grow geometrically: ids mostly arrive in order */
        size_t n = (size_t)id + 1 > tok->id_cap * 2 ? (size_t)id + 1 : tok->id_cap * 2;
        char **t = realloc(tok->id_to_token, n * sizeof *t);
        if (!t) return -1;
        tok->id_to_token = t;
        uint32_t *l = realloc(tok->id_to_token_len, n * sizeof *l);
        if (!l) return -1;
        tok->id_to_token_len = l;
        for (size_t i = tok->id_cap; i < n; i++) {
            t[i] = NULL;
            l[i] = 0;
        }
        tok->id_cap = n;
    }
    if ((size_t)id >= tok->vocab_size) tok->vocab_size = (size_t)id + 1;
    tok->id_to_token[id] = (char *)s;
    tok->id_to_token_len[id] = (uint32_t)len;
    return 0;
}

/* vocab_and_merges_only: a transformers tokenizer class that builds its own BPE from the
 * file's vocab and merges (dropout, unk_token, prefixes, byte_fallback, ignore_merges all
 * off, whatever the file says). */
static int load_model(tok_tokenizer *tok, const json_value *m, int vocab_and_merges_only) {
    const char *path = tok->path;
    if (!m || m->type != JSON_OBJECT) return FAIL_FMT("file '%s': model must be an object", path);
    const char *type = type_of(m);
    if (type && strcmp(type, "BPE") != 0)
        return FAIL_UNSUP("file '%s': model type '%s' is not implemented (BPE is)", path, type);
    int rc;
    if (!vocab_and_merges_only) {
        const json_value *dropout = json_object_get(m, "dropout");
        double d = 0;
        if (dropout && dropout->type != JSON_NULL && !(json_get_double(dropout, &d) && d == 0.0))
            return FAIL_UNSUP("file '%s': model.dropout is set; BPE dropout is not implemented", path);
        if ((rc = require_empty_string(path, m, "continuing_subword_prefix")) != CLEF_OK) return rc;
        if ((rc = require_empty_string(path, m, "end_of_word_suffix")) != CLEF_OK) return rc;
        int byte_fallback = 0;
        if ((rc = get_bool_field(path, m, "model", "byte_fallback", &byte_fallback)) != CLEF_OK) return rc;
        if (byte_fallback) return FAIL_UNSUP("file '%s': model.byte_fallback is true; not implemented", path);
        if ((rc = get_bool_field(path, m, "model", "ignore_merges", &tok->ignore_merges)) != CLEF_OK) return rc;
    }

    const json_value *vocab = json_object_get(m, "vocab");
    if (!vocab || vocab->type != JSON_OBJECT) return FAIL_FMT("file '%s': model.vocab must be an object", path);
    size_t nv = vocab->u.obj.count;
    tok->model_vocab_count = nv;
    if (tok_strmap_init(&tok->token_to_id, nv + 1024) != 0) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    if (tok->ignore_merges && tok_strmap_init(&tok->bytes_to_id, nv) != 0)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    size_t total = 0;
    for (size_t i = 0; i < nv; i++) total += vocab->u.obj.members[i].key_len + 1;
    tok->vocab_strings = malloc(total + 1);
    tok->byte_strings = malloc(total + 1);
    if (!tok->vocab_strings || !tok->byte_strings) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    size_t used = 0, vused = 0;
    for (int b = 0; b < 256; b++) tok->byte_to_id[b] = -1;
    for (size_t i = 0; i < nv; i++) {
        const json_member *mem = &vocab->u.obj.members[i];
        int64_t id;
        if (!json_get_int64(mem->value, &id) || id < 0 || id > INT32_MAX - 1)
            return FAIL_FMT("file '%s': model.vocab['%.100s'] must be an id in [0, 2^31-1), got %s", path,
                            mem->key, mem->value->type == JSON_NUMBER ? mem->value->u.num.text
                                                                      : json_type_name(mem->value->type));
        char *key = tok->vocab_strings + vused;
        memcpy(key, mem->key, mem->key_len);
        key[mem->key_len] = 0;
        vused += mem->key_len + 1;
        if (tok_strmap_put(&tok->token_to_id, key, mem->key_len, (int32_t)id) < 0 ||
            set_token(tok, (int32_t)id, key, mem->key_len) != 0)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        long nb = byte_level_to_bytes(key, mem->key_len, tok->byte_strings + used);
        if (nb == 1) tok->byte_to_id[(unsigned char)tok->byte_strings[used]] = (int32_t)id;
        if (nb > 0 && tok->ignore_merges) {
            if (tok_strmap_put(&tok->bytes_to_id, tok->byte_strings + used, (size_t)nb, (int32_t)id) < 0)
                return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
            used += (size_t)nb;
        }
    }
    const json_value *unk = vocab_and_merges_only ? NULL : json_object_get(m, "unk_token");
    if (unk && unk->type != JSON_NULL) {
        for (int b = 0; b < 256; b++)
            if (tok->byte_to_id[b] < 0)
                return FAIL_UNSUP("file '%s': model.unk_token is set and byte 0x%02X has no token; unk "
                                  "replacement is not implemented", path, b);
    }

    const json_value *merges = json_object_get(m, "merges");
    if (!merges || merges->type != JSON_ARRAY) return FAIL_FMT("file '%s': model.merges must be an array", path);
    size_t nm = merges->u.arr.count;
    if (tok_merges_init(&tok->merges, nm) != 0) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    char *joined = NULL;
    size_t joined_cap = 0;
    rc = CLEF_OK;
    for (size_t r = 0; r < nm && rc == CLEF_OK; r++) {
        const json_value *e = merges->u.arr.items[r];
        const char *a, *b;
        size_t al, bl;
        if (e->type == JSON_STRING) {
            const char *sp = memchr(e->u.str.ptr, ' ', e->u.str.len);
            if (!sp || memchr(sp + 1, ' ', e->u.str.len - (size_t)(sp + 1 - e->u.str.ptr))) {
                rc = FAIL_FMT("file '%s': model.merges[%zu] '%.100s' is not two tokens separated by one space",
                              path, r, e->u.str.ptr);
                break;
            }
            a = e->u.str.ptr;
            al = (size_t)(sp - a);
            b = sp + 1;
            bl = e->u.str.len - al - 1;
        } else if (e->type == JSON_ARRAY && e->u.arr.count == 2 && json_get_string(e->u.arr.items[0]) &&
                   json_get_string(e->u.arr.items[1])) {
            a = e->u.arr.items[0]->u.str.ptr;
            al = e->u.arr.items[0]->u.str.len;
            b = e->u.arr.items[1]->u.str.ptr;
            bl = e->u.arr.items[1]->u.str.len;
        } else {
            rc = FAIL_FMT("file '%s': model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", path, r);
            break;
        }
        int32_t ia = tok_strmap_get(&tok->token_to_id, a, al), ib = tok_strmap_get(&tok->token_to_id, b, bl);
        if (ia < 0 || ib < 0) {
            rc = FAIL_FMT("file '%s': model.merges[%zu]: token '%.*s' is not in model.vocab", path, r,
                          (int)(ia < 0 ? al : bl), ia < 0 ? a : b);
            break;
        }
        if (joined_cap < al + bl) {
            joined_cap = (al + bl) * 2;
            char *j = realloc(joined, joined_cap);
            if (!j) {
                rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            joined = j;
        }
        memcpy(joined, a, al);
        memcpy(joined + al, b, bl);
        int32_t im = tok_strmap_get(&tok->token_to_id, joined, al + bl);
        if (im < 0) {
            rc = FAIL_FMT("file '%s': model.merges[%zu]: merged token '%.*s' is not in model.vocab", path, r,
                          (int)(al + bl), joined);
            break;
        }
        tok_merges_put(&tok->merges, ia, ib, (uint32_t)r, im);
    }
    free(joined);
    return rc;
}

/* ---- added tokens ---------------------------------------------------------------------------- */

int tok_token_spec_from_json(const char *file, const json_value *t, const char *where, tok_token_spec *out) {
    const json_value *content = json_object_get(t, "content");
    if (!json_get_string(content) || content->u.str.len == 0)
        return FAIL_FMT("file '%s': %s.content must be a non-empty string", file, where);
    memset(out, 0, sizeof *out);
    out->content = content->u.str.ptr;
    out->content_len = content->u.str.len;
    int rc;
    if ((rc = get_bool_field(file, t, where, "special", &out->special)) != CLEF_OK) return rc;
    out->normalized = !out->special; /* the default of an AddedToken without the field */
    if ((rc = get_bool_field(file, t, where, "normalized", &out->normalized)) != CLEF_OK ||
        (rc = get_bool_field(file, t, where, "lstrip", &out->lstrip)) != CLEF_OK ||
        (rc = get_bool_field(file, t, where, "rstrip", &out->rstrip)) != CLEF_OK ||
        (rc = get_bool_field(file, t, where, "single_word", &out->single_word)) != CLEF_OK)
        return rc;
    return CLEF_OK;
}

int tok_add_token(tok_tokenizer *tok, const tok_token_spec *spec, int32_t id, const char *file, const char *where,
                  size_t *cap) {
    if (tok->added_count == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        tok_added_token *v = realloc(tok->added, nc * sizeof *v);
        if (!v) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        tok->added = v;
        *cap = nc;
    }
    tok_added_token *a = &tok->added[tok->added_count];
    memset(a, 0, sizeof *a);
    a->id = id;
    a->special = spec->special;
    a->normalized = spec->normalized;
    a->lstrip = spec->lstrip;
    a->rstrip = spec->rstrip;
    a->single_word = spec->single_word;
    a->content = malloc(spec->content_len + 1);
    if (!a->content) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(a->content, spec->content, spec->content_len);
    a->content[spec->content_len] = 0;
    a->content_len = spec->content_len;
    a->match = a->content;
    a->match_len = a->content_len;
    tok->added_count++;
    if (a->normalized && tok->normalize_nfc &&
        !tok_nfc_quick_check((const unsigned char *)a->content, a->content_len)) {
        unsigned char *m;
        size_t ml;
        if (tok_nfc((const unsigned char *)a->content, a->content_len, &m, &ml) != 0)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        a->match = (char *)m;
        a->match_len = ml;
    }
    if ((size_t)id > tok->max_added_id || tok->added_count == 1) tok->max_added_id = (size_t)id;
    /* An added token already in the model vocab keeps that id in `tokenizers`. */
    int32_t in_vocab = tok_strmap_get(&tok->token_to_id, a->content, a->content_len);
    if (in_vocab >= 0 && in_vocab != id)
        return FAIL_FMT("file '%s': %s '%s' has id %d but the vocabulary gives it id %d", file, where, a->content,
                        id, in_vocab);
    if (in_vocab < 0 && (size_t)id < tok->vocab_size && tok->id_to_token[id])
        return FAIL_FMT("file '%s': %s '%s' has id %d, already the id of '%s'", file, where, a->content, id,
                        tok->id_to_token[id]);
    if (tok_strmap_put(&tok->token_to_id, a->content, a->content_len, id) < 0 ||
        set_token(tok, id, a->content, a->content_len) != 0)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    return CLEF_OK;
}

static int add_token_json(tok_tokenizer *tok, const char *file, const json_value *t, int32_t id, const char *where,
                          size_t *cap) {
    tok_token_spec spec;
    int rc = tok_token_spec_from_json(file, t, where, &spec);
    return rc == CLEF_OK ? tok_add_token(tok, &spec, id, file, where, cap) : rc;
}

int tok_load_file_added(tok_tokenizer *tok, const json_value *list, size_t *cap) {
    if (!list || list->type == JSON_NULL) return CLEF_OK;
    if (list->type != JSON_ARRAY) return FAIL_FMT("file '%s': added_tokens must be an array", tok->path);
    for (size_t i = 0; i < list->u.arr.count; i++) {
        const json_value *t = list->u.arr.items[i];
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        int64_t id;
        if (!json_get_int64(json_object_get(t, "id"), &id) || id < 0 || id > INT32_MAX - 1)
            return FAIL_FMT("file '%s': %s.id must be an id in [0, 2^31-1)", tok->path, where);
        int rc = add_token_json(tok, tok->path, t, (int32_t)id, where, cap);
        if (rc != CLEF_OK) return rc;
    }
    return CLEF_OK;
}

/* TOK_PIPELINE_FILE: the tokens of tokenizer_config.json's added_tokens_decoder that the
 * tokenizer.json lacks, at their declared ids (Qwen3.5 declares 7 of its 33 special tokens
 * only there). */
static int load_config_added(tok_tokenizer *tok, const json_value *root, const char *config_path, size_t *cap) {
    const json_value *dec = json_object_get(root, "added_tokens_decoder");
    if (dec && dec->type != JSON_OBJECT)
        return FAIL_FMT("file '%s': added_tokens_decoder must be an object", config_path);
    int rc = CLEF_OK;
    for (size_t i = 0; dec && rc == CLEF_OK && i < dec->u.obj.count; i++) {
        const json_member *mem = &dec->u.obj.members[i];
        int32_t id = -1; /* set by tok_config_token_id on success */
        if ((rc = tok_config_token_id(config_path, mem->key, &id)) != CLEF_OK) break;
        const char *content = json_get_string(json_object_get(mem->value, "content"));
        if (!content) {
            rc = FAIL_FMT("file '%s': added_tokens_decoder['%s'].content must be a string", config_path, mem->key);
            break;
        }
        if ((size_t)id < tok->vocab_size && tok->id_to_token[id]) {
            if (strcmp(tok->id_to_token[id], content) != 0)
                rc = FAIL_FMT("file '%s': added_tokens_decoder['%s'] is '%s' but tokenizer.json gives id %ld to '%s'",
                              config_path, mem->key, content, (long)id, tok->id_to_token[id]);
            continue; /* already known */
        }
        char where[64];
        snprintf(where, sizeof where, "added_tokens_decoder['%ld']", (long)id);
        rc = add_token_json(tok, config_path, mem->value, id, where, cap);
    }
    return rc;
}

int tok_config_token_id(const char *config_path, const char *key, int32_t *id) {
    char *endp;
    long v = strtol(key, &endp, 10);
    if (*key == 0 || *endp || v < 0 || v > INT32_MAX - 1)
        return FAIL_FMT("file '%s': added_tokens_decoder key '%s' is not an id", config_path, key);
    *id = (int32_t)v;
    return CLEF_OK;
}

/* ---- entry point ------------------------------------------------------------------------------ */

static int parse_config(const char *config_path, const char *text, size_t len, json_doc **doc) {
    json_error err;
    int prc = json_parse(text, len, NULL, doc, &err);
    if (prc == -2) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory parsing JSON", config_path);
    if (prc != 0)
        return FAIL_FMT("file '%s': not valid JSON at line %d column %d (byte %zu): %s", config_path, err.line,
                        err.column, err.offset, err.msg);
    if (json_doc_root(*doc)->type != JSON_OBJECT) return FAIL_FMT("file '%s': must be a JSON object", config_path);
    return CLEF_OK;
}

static int load_decoder(tok_tokenizer *tok, const json_value *v) {
    if (!v || v->type == JSON_NULL) return CLEF_OK;
    const char *type = type_of(v);
    if (!type || strcmp(type, "ByteLevel") != 0)
        return FAIL_UNSUP("file '%s': decoder type '%s' is not implemented (ByteLevel is)", tok->path,
                          type ? type : "(none)");
    return CLEF_OK;
}

static int load_with_config(tok_tokenizer *tok, const json_value *root, const json_value *config,
                            const char *config_path, tok_pipeline pipeline) {
    const char *path = tok->path;
    if (!root || root->type != JSON_OBJECT) return FAIL_FMT("file '%s': must be a JSON object", path);
    const json_value *v;
    if ((v = json_object_get(root, "truncation")) && v->type != JSON_NULL)
        return FAIL_UNSUP("file '%s': truncation is set; encode-time truncation is not implemented", path);
    if ((v = json_object_get(root, "padding")) && v->type != JSON_NULL)
        return FAIL_UNSUP("file '%s': padding is set; not implemented", path);
    int rc = CLEF_OK, split_special = 0, prefix = 0;
    if (config) {
        rc = get_bool_field(config_path, config, "config", "split_special_tokens", &split_special);
        if (rc == CLEF_OK && split_special)
            rc = FAIL_UNSUP("file '%s': split_special_tokens=true is not implemented", config_path);
        if (rc == CLEF_OK) rc = get_bool_field(config_path, config, "config", "add_prefix_space", &prefix);
        if (rc != CLEF_OK) return rc;
    }
    tok_tf_class cls = TOK_TF_FILE;
    if (pipeline == TOK_PIPELINE_TRANSFORMERS && (rc = tok_tf_resolve_class(config, config_path, &cls)) != CLEF_OK)
        return rc;
    int class_builds = cls == TOK_TF_QWEN2 || cls == TOK_TF_QWEN3_5;
    if (class_builds) {
        rc = tok_tf_class_pipeline(tok, cls, prefix);
    } else {
        rc = load_normalizer(tok, json_object_get(root, "normalizer"), "normalizer");
        if (rc == CLEF_OK) rc = load_pretokenizer(tok, json_object_get(root, "pre_tokenizer"));
        /* transformers' TokenizersBackend keeps the file's ByteLevel whatever add_prefix_space
         * the config says; `tokenizers` ignores the config. Only a real conflict is refused. */
        if (rc == CLEF_OK && pipeline == TOK_PIPELINE_FILE && prefix && !tok->pretok.byte_level_prefix_space)
            rc = FAIL_UNSUP("file '%s': add_prefix_space=true overrides tokenizer.json; not implemented",
                            config_path);
    }
    if (rc == CLEF_OK) rc = load_model(tok, json_object_get(root, "model"), class_builds);
    if (rc == CLEF_OK && !class_builds) rc = load_decoder(tok, json_object_get(root, "decoder"));
    size_t cap = 0;
    if (pipeline == TOK_PIPELINE_FILE) {
        if (rc == CLEF_OK) rc = tok_load_file_added(tok, json_object_get(root, "added_tokens"), &cap);
        if (rc == CLEF_OK && config) rc = load_config_added(tok, config, config_path, &cap);
    } else if (rc == CLEF_OK) {
        rc = tok_tf_add_tokens(tok, cls, root, config, config_path, &cap);
    }
    if (rc == CLEF_OK) rc = tok_added_build(tok);
    return rc;
}

int tok_load_json(tok_tokenizer *tok, const json_value *root, const char *config_path, const char *config_text,
                  size_t config_len, tok_pipeline pipeline) {
    json_doc *config = NULL;
    int rc = config_path ? parse_config(config_path, config_text, config_len, &config) : CLEF_OK;
    if (rc == CLEF_OK) rc = load_with_config(tok, root, config ? json_doc_root(config) : NULL, config_path, pipeline);
    json_doc_free(config);
    return rc;
}
