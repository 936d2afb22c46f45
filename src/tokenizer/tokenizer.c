/*
 * tokenizer.c — the public entry points of the tokenizer module (tokenizer.h): load, free,
 * encode, token lookups. The pipeline itself lives in tok_added.c, tok_pretok.c, tok_bpe.c.
 */
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/io.h"
#include "core/utf8.h"
#include "json/json.h"
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TOK_JSON_CAP ((size_t)1 << 30)

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

int tok_load_ex(const char *path, const char *config_path, const tok_load_opts *opts, tok_tokenizer **out) {
    if (!path || !out) return clef_fail(CLEF_ERR_INVALID_ARG, "tok_load: path and out must not be NULL");
    *out = NULL;
    tok_pipeline pipeline = opts ? opts->pipeline : TOK_PIPELINE_TRANSFORMERS;
    if (pipeline != TOK_PIPELINE_TRANSFORMERS && pipeline != TOK_PIPELINE_FILE)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tok_load: unknown pipeline %d", (int)pipeline);
    char *text = NULL;
    size_t len = 0;
    int rc = clef_read_file(path, TOK_JSON_CAP, &text, &len);
    if (rc != CLEF_OK) return rc;
    json_doc *doc = NULL;
    json_error err;
    int prc = json_parse(text, len, NULL, &doc, &err);
    free(text);
    if (prc != 0) {
        if (prc == -2) return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory parsing JSON", path);
        return clef_fail(CLEF_ERR_TOKENIZER_FORMAT, "file '%s': not valid JSON at line %d column %d: %s", path,
                         err.line, err.column, err.msg);
    }
    tok_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok || !(tok->path = strdup(path))) {
        free(tok);
        json_doc_free(doc);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    rc = tok_load_json(tok, json_doc_root(doc), config_path, pipeline);
    json_doc_free(doc);
    if (rc == CLEF_OK && tok_cache_create(tok) != 0) rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    if (rc != CLEF_OK) {
        tok_free(tok);
        return rc;
    }
    *out = tok;
    return CLEF_OK;
}

int tok_load(const char *path, const char *config_path, tok_tokenizer **out) {
    return tok_load_ex(path, config_path, NULL, out);
}

int tok_load_dir_ex(const char *dir, const tok_load_opts *opts, tok_tokenizer **out) {
    if (!dir || !out) return clef_fail(CLEF_ERR_INVALID_ARG, "tok_load_dir: dir and out must not be NULL");
    char *json = clef_path_join(dir, "tokenizer.json");
    char *config = clef_path_join(dir, "tokenizer_config.json");
    int rc;
    if (!json || !config) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    } else {
        struct stat st;
        rc = tok_load_ex(json, stat(config, &st) == 0 ? config : NULL, opts, out);
    }
    free(json);
    free(config);
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
