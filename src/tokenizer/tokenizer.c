/*
 * tokenizer.c — the public entry points of the tokenizer module (tokenizer.h): load, free,
 * encode, token lookups. The pipeline itself lives in tok_added.c, tok_pretok.c, tok_bpe.c.
 */
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/io.h"
#include "core/utf8.h"
#include "json/json.h"
#include "release/path.h"
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define TOK_JSON_CAP ((size_t)1 << 30)
#define TOK_CONFIG_CAP ((size_t)64 << 20)

void tok_free(tok_tokenizer *tok) {
    if (!tok) return;
    tok_pretok_free(&tok->pretok);
    tok_added_free(tok);
    tok_strmap_free(&tok->token_to_id);
    tok_strmap_free(&tok->bytes_to_id);
    tok_merges_free(&tok->merges);
    tok_cache_destroy(tok);
    free(tok->id_to_token);
    free(tok->id_to_token_len);
    free(tok->vocab_strings);
    free(tok->byte_strings);
    free(tok->path);
    free(tok);
}

/* Build a tokenizer from the text of tokenizer.json (path names it in messages) and of
 * tokenizer_config.json (config_path NULL: none). */
static int load_texts(const char *path, const char *text, size_t len, const char *config_path,
                      const char *config_text, size_t config_len, const tok_load_opts *opts,
                      tok_tokenizer **out) {
    tok_pipeline pipeline = opts ? opts->pipeline : TOK_PIPELINE_TRANSFORMERS;
    if (pipeline != TOK_PIPELINE_TRANSFORMERS && pipeline != TOK_PIPELINE_FILE)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tok_load: unknown pipeline %d", (int)pipeline);
    json_doc *doc = NULL;
    json_error err;
    int prc = json_parse(text, len, NULL, &doc, &err);
    if (prc != 0) {
        if (prc == -2) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory parsing JSON", path);
        return clef_fail(CLEF_ERR_TOKENIZER_FORMAT, "file '%s': not valid JSON at line %d column %d (byte %zu): %s",
                         path, err.line, err.column, err.offset, err.msg);
    }
    tok_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok || !(tok->path = strdup(path))) {
        free(tok);
        json_doc_free(doc);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int rc = tok_load_json(tok, json_doc_root(doc), config_path, config_text, config_len, pipeline);
    json_doc_free(doc);
    if (rc == CLEF_OK && tok_cache_create(tok) != 0) rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    if (rc != CLEF_OK) {
        tok_free(tok);
        return rc;
    }
    *out = tok;
    return CLEF_OK;
}

int tok_load_ex(const char *path, const char *config_path, const tok_load_opts *opts, tok_tokenizer **out) {
    if (!path || !out) return clef_fail(CLEF_ERR_INVALID_ARG, "tok_load: path and out must not be NULL");
    *out = NULL;
    char *text = NULL, *config_text = NULL;
    size_t len = 0, config_len = 0;
    int rc = clef_read_file(path, TOK_JSON_CAP, &text, &len);
    if (rc == CLEF_OK && config_path) rc = clef_read_file(config_path, TOK_CONFIG_CAP, &config_text, &config_len);
    if (rc == CLEF_OK) rc = load_texts(path, text, len, config_path, config_text, config_len, opts, out);
    free(text);
    free(config_text);
    return rc;
}

int tok_load(const char *path, const char *config_path, tok_tokenizer **out) {
    return tok_load_ex(path, config_path, NULL, out);
}

/* A release's tokenizer files are opened like every other release file (release/path.h):
 * inside the directory (or its Hugging Face blob store), regular files only. */
int tok_load_dir_ex(const char *dir, const tok_load_opts *opts, tok_tokenizer **out) {
    if (!dir || !out) return clef_fail(CLEF_ERR_INVALID_ARG, "tok_load_dir: dir and out must not be NULL");
    *out = NULL;
    char *json_path = clef_path_join(dir, "tokenizer.json");
    char *config_path = clef_path_join(dir, "tokenizer_config.json");
    char *text = NULL, *config_text = NULL;
    size_t len = 0, config_len = 0;
    int rc = CLEF_OK;
    if (!json_path || !config_path) rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    if (rc == CLEF_OK)
        rc = clef_release_read_small(dir, NULL, "tokenizer.json", TOK_JSON_CAP, CLEF_ERR_FILE_MISSING, &text, &len);
    int has_config = rc == CLEF_OK && clef_release_has_file(dir, "tokenizer_config.json");
    if (has_config)
        rc = clef_release_read_small(dir, NULL, "tokenizer_config.json", TOK_CONFIG_CAP, CLEF_ERR_FILE_MISSING,
                                     &config_text, &config_len);
    if (rc == CLEF_OK)
        rc = load_texts(json_path, text, len, has_config ? config_path : NULL, config_text, config_len, opts, out);
    free(text);
    free(config_text);
    free(json_path);
    free(config_path);
    return rc;
}

int tok_load_dir(const char *dir, tok_tokenizer **out) { return tok_load_dir_ex(dir, NULL, out); }

int tok_encode(const tok_tokenizer *tok, const char *text, size_t len, tok_ids *out) {
    if (!tok || !out || (!text && len)) return clef_fail(CLEF_ERR_INVALID_ARG, "tok_encode: NULL argument");
    size_t bad = clef_utf8_check((const unsigned char *)text, len);
    if (bad != len)
        return clef_fail(CLEF_ERR_INVALID_UTF8, "tokenizer input: invalid UTF-8 at byte offset %zu (byte 0x%02X)",
                         bad, (unsigned char)text[bad]);
    tok_scratch s = {0};
    size_t start = out->count;
    int rc = tok_encode_with_added(tok, text, len, &s, out);
    tok_scratch_free(&s);
    if (rc != CLEF_OK) out->count = start;
    return rc;
}

int32_t tok_token_to_id(const tok_tokenizer *tok, const char *token) {
    if (!tok || !token) return -1;
    return tok_strmap_get(&tok->token_to_id, token, strlen(token));
}

size_t tok_vocab_size(const tok_tokenizer *tok) { return tok ? tok->vocab_size : 0; }
