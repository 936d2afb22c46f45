/*
 * tok_transformers.c — the tokenizer that transformers 5.17's AutoTokenizer builds from a
 * tokenizer.json + tokenizer_config.json (TOK_PIPELINE_TRANSFORMERS), which is what the Clef
 * reference encode_record tokenizes with.
 *
 * transformers does not simply load tokenizer.json: AutoTokenizer instantiates the class
 * named by tokenizer_config.json's "tokenizer_class" ("...Fast" stripped), and
 *   - Qwen2Tokenizer / Qwen3_5Tokenizer (classes with their own __init__) take only
 *     model.vocab and model.merges from the file (TokenizersBackend.convert_to_native_format)
 *     and install their own pipeline: BPE without dropout/unk/prefixes/byte_fallback/
 *     ignore_merges, NFC, Split(their PRETOKENIZE_REGEX, Isolated), ByteLevel(add_prefix_space
 *     = the config's or false, use_regex=false), ByteLevel decoder. The file's normalizer,
 *     pre_tokenizer and added_tokens are ignored.
 *   - TokenizersBackend / PreTrainedTokenizerFast (and no tokenizer_config.json at all) use
 *     the file as is (Tokenizer.from_file).
 * Then TokenizersBackend.__init__ adds, through `tokenizers`' add_tokens (new ids are given
 * in order after the vocabulary, NOT the ids the config declares), the config's
 * added_tokens_decoder entries sorted by id (or, without that key, the file's added_tokens),
 * then the named special tokens (bos, eos, unk, sep, pad, cls, mask, then the model-specific
 * "*_token" keys and extra_special_tokens dict) and the extra special tokens list that are
 * not there yet. Qwen2Tokenizer finally re-adds every special token as
 * AddedToken(special=True). Re-adding a token with identical flags is a no-op in
 * `tokenizers`; re-adding it with other flags changes it in ways this file does not model,
 * so that case is refused by name.
 *
 * References: transformers 5.17 models/auto/tokenization_auto.py (class choice),
 * tokenization_utils_base.py (_from_pretrained: added_tokens_decoder, special tokens),
 * tokenization_utils_tokenizers.py (TokenizersBackend), models/qwen2/tokenization_qwen2.py,
 * models/qwen3_5/tokenization_qwen3_5.py; tokenizers 0.23 AddedVocabulary::add_tokens.
 */
#include "tokenizer/tok_internal.h"

#include "core/error.h"
#include "core/log.h"
#include "json/json.h"

#include <stdlib.h>
#include <string.h>

#define FAIL_FMT(...) clef_fail(CLEF_ERR_TOKENIZER_FORMAT, __VA_ARGS__)
#define FAIL_UNSUP(...) clef_fail(CLEF_ERR_TOKENIZER_UNSUPPORTED, __VA_ARGS__)

/* PRETOKENIZE_REGEX of models/qwen2/tokenization_qwen2.py */
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* PRETOKENIZE_REGEX of models/qwen3_5/tokenization_qwen3_5.py */
static const char qwen3_5_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const struct {
    const char *name; /* tokenizer_class with any "Fast" suffix removed */
    tok_tf_class cls;
} known_classes[] = {
    {"Qwen2Tokenizer", TOK_TF_QWEN2},
    {"Qwen3_5Tokenizer", TOK_TF_QWEN3_5},
    {"TokenizersBackend", TOK_TF_FILE},
    {"PreTrainedTokenizer", TOK_TF_FILE}, /* PreTrainedTokenizerFast = TokenizersBackend */
};

int tok_tf_resolve_class(const json_value *config, const char *config_path, tok_tf_class *out) {
    *out = TOK_TF_FILE;
    const json_value *v = config ? json_object_get(config, "tokenizer_class") : NULL;
    if (!v || v->type == JSON_NULL) return CLEF_OK; /* AutoTokenizer then builds TokenizersBackend */
    const char *name = json_get_string(v);
    if (!name) return FAIL_FMT("file '%s': tokenizer_class must be a string", config_path);
    size_t n = v->u.str.len;
    if (n >= 4 && memcmp(name + n - 4, "Fast", 4) == 0) n -= 4; /* AutoTokenizer strips it */
    for (size_t i = 0; i < sizeof known_classes / sizeof known_classes[0]; i++) {
        if (strlen(known_classes[i].name) == n && memcmp(known_classes[i].name, name, n) == 0) {
            *out = known_classes[i].cls;
            return CLEF_OK;
        }
    }
    return FAIL_UNSUP("file '%s': tokenizer_class '%s' is not implemented for the transformers pipeline "
                      "(Qwen2Tokenizer, Qwen3_5Tokenizer, TokenizersBackend, PreTrainedTokenizerFast are); "
                      "TOK_PIPELINE_FILE uses tokenizer.json as is", config_path, name);
}

int tok_tf_class_pipeline(tok_tokenizer *tok, tok_tf_class cls, int add_prefix_space) {
    CLEF_ASSERT(cls == TOK_TF_QWEN2 || cls == TOK_TF_QWEN3_5);
    const char *regex = cls == TOK_TF_QWEN2 ? qwen2_regex : qwen3_5_regex;
    tok->normalize_nfc = 1;
    tok->pretok.splits = calloc(1, sizeof *tok->pretok.splits);
    if (!tok->pretok.splits) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    tok->pretok.split_count = 1;
    tok->pretok.splits[0].behavior = TOK_SPLIT_ISOLATED;
    tok->pretok.byte_level_prefix_space = add_prefix_space;
    tok->pretok.byte_level_use_regex = 0;
    return tok_pretok_compile_split(&tok->pretok.splits[0], regex, strlen(regex), 0,
                                    cls == TOK_TF_QWEN2 ? "Qwen2Tokenizer" : "Qwen3_5Tokenizer");
}

/* ---- tokenizers' AddedVocabulary::add_tokens -------------------------------------------------- */

typedef struct tf_state {
    tok_tokenizer *tok;
    tok_strmap by_content; /* added token content -> index in tok->added */
    size_t *cap;
    const char *config_path;
} tf_state;

static int same_flags(const tok_added_token *a, const tok_token_spec *s) {
    return a->special == s->special && a->normalized == s->normalized && a->lstrip == s->lstrip &&
           a->rstrip == s->rstrip && a->single_word == s->single_word;
}

static int index_added(tf_state *st, size_t i) {
    const tok_added_token *a = &st->tok->added[i];
    return tok_strmap_put(&st->by_content, a->content, a->content_len, (int32_t)i) < 0
               ? clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory")
               : CLEF_OK;
}

/* One token through add_tokens: identical re-add ignored; a new one gets its vocabulary id
 * or the next id after the vocabulary and the added tokens. */
static int tf_add(tf_state *st, const tok_token_spec *spec, const char *why) {
    tok_tokenizer *tok = st->tok;
    int32_t have = tok_strmap_get(&st->by_content, spec->content, spec->content_len);
    if (have >= 0) {
        const tok_added_token *a = &tok->added[have];
        if (same_flags(a, spec)) return CLEF_OK;
        return FAIL_UNSUP("tokenizer '%s': transformers re-adds added token '%s' (%s) with other flags "
                          "(special %d->%d normalized %d->%d lstrip %d->%d rstrip %d->%d single_word %d->%d); "
                          "not implemented", tok->path, a->content, why, a->special, spec->special, a->normalized,
                          spec->normalized, a->lstrip, spec->lstrip, a->rstrip, spec->rstrip, a->single_word,
                          spec->single_word);
    }
    int32_t id = tok_strmap_get(&tok->token_to_id, spec->content, spec->content_len);
    if (id < 0) {
        size_t next = tok->model_vocab_count;
        if (tok->added_count > 0 && (tok->max_added_id >= next || next == 0)) next = tok->max_added_id + 1;
        if (next > (size_t)INT32_MAX - 1)
            return FAIL_FMT("tokenizer '%s': no id left for added token '%.*s'", tok->path, (int)spec->content_len,
                            spec->content);
        id = (int32_t)next;
    }
    int rc = tok_add_token(tok, spec, id, st->config_path ? st->config_path : tok->path, why, st->cap);
    return rc == CLEF_OK ? index_added(st, tok->added_count - 1) : rc;
}

/* ---- what TokenizersBackend.__init__ adds ------------------------------------------------------- */

/* A declared token: from added_tokens_decoder (or the file's added_tokens). */
typedef struct tf_decl {
    int32_t id;
    tok_token_spec spec;
} tf_decl;

static int cmp_decl(const void *a, const void *b) {
    const tf_decl *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* added_tokens_decoder entries (or, without that key, the file's added_tokens), by id. */
static int collect_decls(const tf_state *st, const json_value *root, const json_value *config, tf_decl **out,
                         size_t *count) {
    const json_value *dec = config ? json_object_get(config, "added_tokens_decoder") : NULL;
    *out = NULL;
    *count = 0;
    size_t n;
    if (dec) {
        if (dec->type != JSON_OBJECT)
            return FAIL_FMT("file '%s': added_tokens_decoder must be an object", st->config_path);
        n = dec->u.obj.count;
    } else {
        const json_value *list = json_object_get(root, "added_tokens");
        if (list && list->type != JSON_NULL && list->type != JSON_ARRAY)
            return FAIL_FMT("file '%s': added_tokens must be an array", st->tok->path);
        n = list && list->type == JSON_ARRAY ? list->u.arr.count : 0;
    }
    tf_decl *v = calloc(n + 1, sizeof *v);
    if (!v) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    int rc = CLEF_OK;
    for (size_t i = 0; i < n && rc == CLEF_OK; i++) {
        char where[64];
        if (dec) {
            const json_member *m = &dec->u.obj.members[i];
            snprintf(where, sizeof where, "added_tokens_decoder['%.20s']", m->key);
            rc = tok_config_token_id(st->config_path, m->key, &v[i].id);
            if (rc == CLEF_OK) rc = tok_token_spec_from_json(st->config_path, m->value, where, &v[i].spec);
        } else {
            const json_value *t = json_object_get(root, "added_tokens")->u.arr.items[i];
            snprintf(where, sizeof where, "added_tokens[%zu]", i);
            int64_t id;
            if (!json_get_int64(json_object_get(t, "id"), &id) || id < 0 || id > INT32_MAX - 1)
                rc = FAIL_FMT("file '%s': %s.id must be an id in [0, 2^31-1)", st->tok->path, where);
            v[i].id = (int32_t)id;
            if (rc == CLEF_OK) rc = tok_token_spec_from_json(st->tok->path, t, where, &v[i].spec);
        }
    }
    if (rc != CLEF_OK) {
        free(v);
        return rc;
    }
    qsort(v, n, sizeof *v, cmp_decl); /* ids are unique (JSON keys / checked when added) */
    *out = v;
    *count = n;
    return CLEF_OK;
}

/* A named special token value: a string (-> AddedToken(special=True)) or an AddedToken dict. */
static int special_value(const tf_state *st, const json_value *v, const char *key, tok_token_spec *out, int *present) {
    *present = 0;
    if (!v || v->type == JSON_NULL) return CLEF_OK;
    if (v->type == JSON_STRING) {
        if (v->u.str.len == 0) return CLEF_OK; /* add_tokens skips empty content */
        memset(out, 0, sizeof *out);
        out->content = v->u.str.ptr;
        out->content_len = v->u.str.len;
        out->special = 1; /* AddedToken(token, special=True): normalized false */
        *present = 1;
        return CLEF_OK;
    }
    if (v->type == JSON_OBJECT) {
        int rc = tok_token_spec_from_json(st->config_path, v, key, out);
        if (rc != CLEF_OK) return rc;
        out->special = 1; /* a named special token is made special (normalized stays) */
        *present = 1;
        return CLEF_OK;
    }
    return FAIL_FMT("file '%s': %s must be a string, an AddedToken object or null", st->config_path, key);
}

static const char *const standard_attrs[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};

static int is_standard_attr(const char *key) {
    for (size_t i = 0; i < sizeof standard_attrs / sizeof standard_attrs[0]; i++)
        if (strcmp(key, standard_attrs[i]) == 0) return 1;
    return 0;
}

static int ends_with_token(const char *key, size_t len) {
    return len >= 6 && memcmp(key + len - 6, "_token", 6) == 0;
}

/* The named special tokens in transformers' _special_tokens_map order: the standard
 * attributes (config value, else the class default), then the model-specific "*_token"
 * keys (AddedToken-valued first, then string-valued, in file order), then the
 * extra_special_tokens dict; then the extra special tokens list. At most `cap` entries. */
typedef struct tf_named {
    const char *key;
    const json_value *value; /* NULL: the class default string below */
    const char *default_content;
} tf_named;

static size_t collect_named(tok_tf_class cls, const json_value *config, tf_named *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < sizeof standard_attrs / sizeof standard_attrs[0] && n < cap; i++) {
        const char *k = standard_attrs[i];
        const json_value *v = config ? json_object_get(config, k) : NULL;
        if (v) {
            out[n++] = (tf_named){k, v, NULL};
        } else if (cls != TOK_TF_FILE &&
                   (strcmp(k, "unk_token") == 0 || strcmp(k, "eos_token") == 0 || strcmp(k, "pad_token") == 0)) {
            out[n++] = (tf_named){k, NULL, "<|endoftext|>"}; /* Qwen2Tokenizer / Qwen3_5Tokenizer defaults */
        }
    }
    if (!config) return n;
    size_t model_start = n;
    for (int pass = 0; pass < 2; pass++) { /* pass 0: AddedToken dicts (auto), 1: strings (explicit) */
        for (size_t i = 0; i < config->u.obj.count && n < cap; i++) {
            const json_member *m = &config->u.obj.members[i];
            if (is_standard_attr(m->key) || !ends_with_token(m->key, m->key_len)) continue;
            const json_value *v = m->value;
            int is_added = v->type == JSON_OBJECT &&
                           json_get_string(json_object_get(v, "__type")) &&
                           strcmp(json_get_string(json_object_get(v, "__type")), "AddedToken") == 0;
            if ((pass == 0 && is_added) || (pass == 1 && v->type == JSON_STRING)) out[n++] = (tf_named){m->key, v, NULL};
        }
    }
    const json_value *extra = json_object_get(config, "extra_special_tokens");
    if (extra && extra->type == JSON_OBJECT) {
        for (size_t i = 0; i < extra->u.obj.count; i++) {
            const json_member *m = &extra->u.obj.members[i];
            size_t k = model_start;
            while (k < n && strcmp(out[k].key, m->key) != 0) k++;
            if (k < n) out[k].value = m->value; /* dict.update keeps the position */
            else if (n < cap) out[n++] = (tf_named){m->key, m->value, NULL};
        }
    }
    return n;
}

/* The extra special tokens list: extra_special_tokens if a list, else (only when that key
 * is absent) additional_special_tokens. */
static const json_value *extra_list(const json_value *config) {
    if (!config) return NULL;
    const json_value *extra = json_object_get(config, "extra_special_tokens");
    if (extra) return extra->type == JSON_ARRAY ? extra : NULL;
    const json_value *add = json_object_get(config, "additional_special_tokens");
    return add && add->type == JSON_ARRAY ? add : NULL;
}

int tok_tf_add_tokens(tok_tokenizer *tok, tok_tf_class cls, const json_value *root, const json_value *config,
                      const char *config_path, size_t *cap) {
    tf_state st = {tok, {0}, cap, config_path};
    tf_decl *decls = NULL;
    size_t ndecl = 0;
    tf_named *named = NULL;
    int rc = CLEF_OK;
    size_t ncap = 16 + (config ? config->u.obj.count : 0);
    const json_value *ev = config ? json_object_get(config, "extra_special_tokens") : NULL;
    if (ev && ev->type == JSON_OBJECT) ncap += ev->u.obj.count;
    named = calloc(ncap, sizeof *named);
    if (!named || tok_strmap_init(&st.by_content, 64) != 0) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    /* TokenizersBackend: the file's own added tokens come with Tokenizer.from_file. */
    if (cls == TOK_TF_FILE) rc = tok_load_file_added(tok, json_object_get(root, "added_tokens"), cap);
    for (size_t i = 0; rc == CLEF_OK && i < tok->added_count; i++) rc = index_added(&st, i);
    if (rc == CLEF_OK) rc = collect_decls(&st, root, config, &decls, &ndecl);
    if (rc != CLEF_OK) goto done;

    /* 1. added_tokens_decoder, by id */
    for (size_t i = 0; i < ndecl && rc == CLEF_OK; i++) {
        char why[64];
        snprintf(why, sizeof why, "added_tokens_decoder['%ld']", (long)decls[i].id);
        size_t before = tok->added_count;
        rc = tf_add(&st, &decls[i].spec, why);
        if (rc == CLEF_OK && tok->added_count > before && tok->added[before].id != decls[i].id)
            CLEF_LOG_W("tokenizer '%s': transformers gives added token '%s' id %d, not the id %d its config "
                       "declares", tok->path, tok->added[before].content, tok->added[before].id, decls[i].id);
    }
    /* 2. the named special tokens and 3. the extra special tokens not there yet (strings
     * become AddedToken(special=True)); the membership test is on the contents present
     * before this step, as there. */
    size_t nnamed = collect_named(cls, config, named, ncap);
    size_t present_before = tok->added_count; /* tokens added below have indices >= this */
    const json_value *extras = extra_list(config);
    size_t nextra = extras ? extras->u.arr.count : 0;
    for (size_t i = 0; i < nnamed + nextra && rc == CLEF_OK; i++) {
        tok_token_spec spec;
        int present = 0;
        char key[96];
        if (i < nnamed && !named[i].value) {
            memset(&spec, 0, sizeof spec);
            spec.content = named[i].default_content;
            spec.content_len = strlen(spec.content);
            spec.special = 1;
            present = 1;
            snprintf(key, sizeof key, "%s (class default)", named[i].key);
        } else {
            const json_value *v = i < nnamed ? named[i].value : extras->u.arr.items[i - nnamed];
            if (i < nnamed) snprintf(key, sizeof key, "%s", named[i].key);
            else snprintf(key, sizeof key, "extra special token [%zu]", i - nnamed);
            rc = special_value(&st, v, key, &spec, &present);
        }
        if (rc != CLEF_OK || !present) continue;
        int32_t had = tok_strmap_get(&st.by_content, spec.content, spec.content_len);
        if (had >= 0 && (size_t)had < present_before) continue;
        rc = tf_add(&st, &spec, key);
    }
    /* 4. Qwen2Tokenizer: add_tokens([AddedToken(t, special=True) for t in all_special_tokens]) */
    if (cls == TOK_TF_QWEN2) {
        for (size_t i = 0; i < nnamed + nextra && rc == CLEF_OK; i++) {
            tok_token_spec spec;
            int present = 0;
            if (i < nnamed && !named[i].value) {
                memset(&spec, 0, sizeof spec);
                spec.content = named[i].default_content;
                spec.content_len = strlen(spec.content);
                present = 1;
            } else {
                const json_value *v = i < nnamed ? named[i].value : extras->u.arr.items[i - nnamed];
                rc = special_value(&st, v, "special token", &spec, &present);
            }
            if (rc != CLEF_OK || !present) continue;
            tok_token_spec plain = {spec.content, spec.content_len, 1, 0, 0, 0, 0};
            rc = tf_add(&st, &plain, "Qwen2Tokenizer all_special_tokens");
        }
    }
done:
    free(decls);
    free(named);
    tok_strmap_free(&st.by_content);
    return rc;
}
