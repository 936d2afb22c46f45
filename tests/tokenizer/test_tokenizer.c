/*
 * test_tokenizer.c — tokenizer behaviour that is not parity: refusals with their statuses and
 * messages, invalid UTF-8, token lookups, decode round trips, thread safety of tok_encode.
 * Uses the committed demo tokenizer (trained by HF `tokenizers`, see make_demo_tokenizer.py);
 * parity of ids with `tokenizers` is test_tokenizer_parity's job.
 */
#include "tokenizer/tokenizer.h"

#include "clef.h"
#include "core/io.h"
#include "test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEMO "tests/tokenizer/data/demo/tokenizer.json"

static char tmpdir[] = "/tmp/clef_tok_test_XXXXXX";

/* Writes the demo tokenizer.json with the first occurrence of `from` replaced by `to`. */
static char *write_variant(const char *name, const char *from, const char *to) {
    char *text = NULL;
    size_t len = 0;
    if (clef_read_file(DEMO, 1 << 24, &text, &len) != CLEF_OK) return NULL;
    char *path = clef_path_join(tmpdir, name);
    FILE *f = fopen(path, "wb");
    char *at = from ? strstr(text, from) : NULL;
    if (at) {
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(to, f);
        fputs(at + strlen(from), f);
    } else {
        fputs(from ? "" : to, f);
    }
    fclose(f);
    free(text);
    return path;
}

static void expect_refusal(const char *name, const char *from, const char *to, int status, const char *needle) {
    char *path = write_variant(name, from, to);
    tok_tokenizer *tok = NULL;
    int rc = tok_load(path, NULL, &tok);
    CHECK_MSG(rc == status, "%s: status %d, expected %d (%s)", name, rc, status, clef_last_error());
    CHECK_MSG(strstr(clef_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", name, clef_last_error(),
              needle);
    CHECK(tok == NULL);
    tok_free(tok);
    unlink(path);
    free(path);
}

/* Loads the demo tokenizer.json with a tokenizer_config.json of this text. */
static int load_with_config(const char *name, const char *config_text, tok_pipeline pipeline, tok_tokenizer **tok) {
    char *path = clef_path_join(tmpdir, name);
    FILE *f = fopen(path, "wb");
    fputs(config_text, f);
    fclose(f);
    tok_load_opts opts = {pipeline};
    int rc = tok_load_ex(DEMO, path, &opts, tok);
    unlink(path);
    free(path);
    return rc;
}

static void expect_config_refusal(const char *name, const char *config_text, int status, const char *needle) {
    tok_tokenizer *tok = NULL;
    int rc = load_with_config(name, config_text, TOK_PIPELINE_TRANSFORMERS, &tok);
    CHECK_MSG(rc == status, "%s: status %d, expected %d (%s)", name, rc, status, clef_last_error());
    CHECK_MSG(strstr(clef_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", name, clef_last_error(),
              needle);
    CHECK(tok == NULL);
    tok_free(tok);
}

/* The two pipelines (tokenizer.h): what each refuses or ignores of tokenizer_config.json. */
static void test_pipelines(void) {
    static const char llama[] = "{\"tokenizer_class\": \"LlamaTokenizerFast\"}";
    expect_config_refusal("llama.json", llama, CLEF_ERR_TOKENIZER_UNSUPPORTED, "LlamaTokenizerFast");
    tok_tokenizer *tok = NULL;
    CHECK_EQ_INT(load_with_config("llama_file.json", llama, TOK_PIPELINE_FILE, &tok), CLEF_OK); /* class ignored */
    tok_free(tok);
    expect_config_refusal("class_type.json", "{\"tokenizer_class\": 7}", CLEF_ERR_TOKENIZER_FORMAT,
                          "tokenizer_class must be a string");
    /* Qwen2Tokenizer re-adds every special token with plain flags; a declared lstrip would be
     * changed in ways not modelled: refused by name. */
    expect_config_refusal("flags.json",
                          "{\"tokenizer_class\": \"Qwen2Tokenizer\", \"eos_token\": \"<|im_end|>\", "
                          "\"added_tokens_decoder\": {\"1500\": {\"content\": \"<|im_end|>\", "
                          "\"special\": true, \"lstrip\": true}}}",
                          CLEF_ERR_TOKENIZER_UNSUPPORTED, "other flags");
    expect_config_refusal("split.json", "{\"tokenizer_class\": \"Qwen2Tokenizer\", \"split_special_tokens\": true}",
                          CLEF_ERR_TOKENIZER_UNSUPPORTED, "split_special_tokens");
    /* A class with its own pipeline never reads the file's normalizer / pre_tokenizer. */
    char *lower = write_variant("lower.json", "\"normalizer\":{\"type\":\"NFC\"}",
                                "\"normalizer\":{\"type\":\"Lowercase\"}");
    char *cfg = clef_path_join(tmpdir, "qwen35.json");
    FILE *f = fopen(cfg, "wb");
    fputs("{\"tokenizer_class\": \"Qwen3_5Tokenizer\"}", f);
    fclose(f);
    tok = NULL;
    CHECK_EQ_INT(tok_load_ex(lower, cfg, NULL, &tok), CLEF_OK);
    tok_ids ids = {0};
    CHECK_EQ_INT(tok_encode(tok, "<|endoftext|>", 13, &ids), CLEF_OK); /* class default eos, added */
    CHECK(ids.count == 1 && ids.ids[0] == tok_token_to_id(tok, "<|endoftext|>"));
    tok_ids_free(&ids);
    tok_free(tok);
    tok_load_opts file_opts = {TOK_PIPELINE_FILE};
    tok = NULL;
    CHECK_EQ_INT(tok_load_ex(lower, cfg, &file_opts, &tok), CLEF_ERR_TOKENIZER_UNSUPPORTED); /* reads it */
    tok_load_opts bad = {(tok_pipeline)7};
    CHECK_EQ_INT(tok_load_ex(DEMO, NULL, &bad, &tok), CLEF_ERR_INVALID_ARG);
    unlink(lower);
    unlink(cfg);
    free(lower);
    free(cfg);
}

typedef struct job {
    const tok_tokenizer *tok;
    const char *text;
    tok_ids ids;
    int rc;
} job;

static void *encode_many(void *arg) {
    job *j = arg;
    for (int k = 0; k < 50 && j->rc == CLEF_OK; k++) {
        j->ids.count = 0;
        j->rc = tok_encode(j->tok, j->text, strlen(j->text), &j->ids);
    }
    return NULL;
}

int main(void) {
    CHECK(mkdtemp(tmpdir) != NULL);
    tok_tokenizer *tok = NULL;
    CHECK_EQ_INT(tok_load(DEMO, NULL, &tok), CLEF_OK);

    /* lookups */
    CHECK(tok_token_to_id(tok, "<|im_start|>") >= 0);
    CHECK(tok_token_to_id(tok, "<think>") >= 0);
    CHECK_EQ_INT(tok_token_to_id(tok, "<|no such token|>"), -1);
    CHECK_EQ_INT(tok_vocab_size(tok), 1513); /* tokenizers' get_vocab_size(with_added_tokens=True) */

    /* a special token alone is its id; empty text gives nothing */
    tok_ids ids = {0};
    CHECK_EQ_INT(tok_encode(tok, "<|im_start|>", 12, &ids), CLEF_OK);
    CHECK_EQ_INT(ids.count, 1);
    CHECK_EQ_INT(ids.ids[0], tok_token_to_id(tok, "<|im_start|>"));
    ids.count = 0;
    CHECK_EQ_INT(tok_encode(tok, "", 0, &ids), CLEF_OK);
    CHECK_EQ_INT(ids.count, 0);

    /* invalid UTF-8 is refused, naming the offset, and appends nothing */
    ids.count = 0;
    CHECK_EQ_INT(tok_encode(tok, "abc\xff", 4, &ids), CLEF_ERR_INVALID_UTF8);
    CHECK(strstr(clef_last_error(), "offset 3") != NULL);
    CHECK_EQ_INT(ids.count, 0);
    CHECK_EQ_INT(tok_encode(tok, "\xed\xa0\x80", 3, &ids), CLEF_ERR_INVALID_UTF8); /* surrogate */
    CHECK_EQ_INT(tok_encode(tok, "\xc0\xaf", 2, &ids), CLEF_ERR_INVALID_UTF8);     /* overlong */

    /* decode(encode(x)) == x for NFC text without stripping tokens (byte-level is lossless) */
    const char *round[] = {"Hello, world! 中文 नमस्ते 👩🏽‍🚀 \t\n\n  x", "<|im_start|>user\nSTATE:\n{\"a\":1}<|im_end|>",
                           "\x01\x02\x7f control"};
    for (size_t i = 0; i < 3; i++) {
        ids.count = 0;
        CHECK_EQ_INT(tok_encode(tok, round[i], strlen(round[i]), &ids), CLEF_OK);
        char *out = NULL;
        size_t out_len = 0;
        CHECK_EQ_INT(tok_decode(tok, ids.ids, ids.count, &out, &out_len), CLEF_OK);
        CHECK_EQ_STR(out, round[i]);
        free(out);
    }
    int32_t bad_id = 999999;
    char *out = NULL;
    CHECK_EQ_INT(tok_decode(tok, &bad_id, 1, &out, NULL), CLEF_ERR_INVALID_ARG);

    /* thread safety: 4 threads encoding at once get the single-thread ids */
    const char *text = "The quick brown fox's tail — 1234567 ¿qué? 東京都 <|im_end|> hello world  \n";
    ids.count = 0;
    CHECK_EQ_INT(tok_encode(tok, text, strlen(text), &ids), CLEF_OK);
    job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (job){tok, text, {0}, CLEF_OK};
        pthread_create(&th[t], NULL, encode_many, &jobs[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ_INT(jobs[t].rc, CLEF_OK);
        CHECK(jobs[t].ids.count == ids.count && memcmp(jobs[t].ids.ids, ids.ids, ids.count * 4) == 0);
        tok_ids_free(&jobs[t].ids);
    }
    tok_ids_free(&ids);
    tok_free(tok);
    tok_free(NULL);

    /* refusals: each names what it refuses */
    tok = NULL;
    CHECK_EQ_INT(tok_load("tests/tokenizer/data/no-such-file.json", NULL, &tok), CLEF_ERR_FILE_MISSING);
    expect_refusal("not_json.json", NULL, "{\"model\": ", CLEF_ERR_TOKENIZER_FORMAT, "not valid JSON");
    expect_refusal("normalizer.json", "\"normalizer\":{\"type\":\"NFC\"}",
                   "\"normalizer\":{\"type\":\"Lowercase\"}", CLEF_ERR_TOKENIZER_UNSUPPORTED, "Lowercase");
    expect_refusal("pretok.json", "\"type\":\"Split\"", "\"type\":\"Whitespace\"", CLEF_ERR_TOKENIZER_UNSUPPORTED,
                   "Whitespace");
    expect_refusal("model.json", "\"type\":\"BPE\"", "\"type\":\"WordPiece\"", CLEF_ERR_TOKENIZER_UNSUPPORTED,
                   "WordPiece");
    expect_refusal("dropout.json", "\"dropout\":null", "\"dropout\":0.1", CLEF_ERR_TOKENIZER_UNSUPPORTED, "dropout");
    expect_refusal("trunc.json", "\"truncation\":null", "\"truncation\":{\"max_length\":5}",
                   CLEF_ERR_TOKENIZER_UNSUPPORTED, "truncation");
    expect_refusal("behavior.json", "\"behavior\":\"Isolated\"", "\"behavior\":\"Sideways\"",
                   CLEF_ERR_TOKENIZER_FORMAT, "Sideways");
    expect_refusal("regex.json", "\"Regex\":\"", "\"Regex\":\"(unclosed", CLEF_ERR_TOKENIZER_UNSUPPORTED,
                   "does not compile");
    expect_refusal("merge.json", "\"merges\":[", "\"merges\":[[\"no-such\",\"token\"],", CLEF_ERR_TOKENIZER_FORMAT,
                   "model.merges[0]");
    expect_refusal("decoder.json", "\"decoder\":{\"type\":\"ByteLevel\"", "\"decoder\":{\"type\":\"Metaspace\"",
                   CLEF_ERR_TOKENIZER_UNSUPPORTED, "Metaspace");
    test_pipelines();
    rmdir(tmpdir);
    return test_summary();
}
