/*
 * test_tokenizer_parity.c — our ids against the Hugging Face oracles' ids on the committed
 * sample (tests/tokenizer/data/sample.jsonl), for both pipelines of tokenizer.h:
 *   TOK_PIPELINE_FILE          vs expected/<name>.ids              (HF `tokenizers`,
 *                                 scripts/tokenizer/make_fixtures.py)
 *   TOK_PIPELINE_TRANSFORMERS  vs expected-transformers/<name>.ids (transformers AutoTokenizer,
 *                                 scripts/tokenizer/make_transformers_fixtures.py)
 * A tokenizer without an ids file for a pipeline is skipped for it (deepseek-v3 names
 * LlamaTokenizerFast, which the transformers pipeline refuses). The real files (qwen-3.5, ...)
 * come from the cache dir given as argv[1] (fetch_tokenizers.sh); "demo" is committed.
 */
#include "ids_check.h"

static const char *names[] = {"qwen-3.5", "qwen-3", "deepseek-v3", "glm-4", "demo"};

static void check_one(const char *name, const char *dir, tok_pipeline pipeline) {
    const char *mode = pipeline == TOK_PIPELINE_FILE ? "file" : "transformers";
    char expected_path[512], label[128];
    snprintf(expected_path, sizeof expected_path, "tests/tokenizer/data/%s/%s.ids",
             pipeline == TOK_PIPELINE_FILE ? "expected" : "expected-transformers", name);
    snprintf(label, sizeof label, "%s [%s pipeline]", name, mode);
    FILE *f = fopen(expected_path, "r");
    if (!f) {
        printf("%s: no expected ids (%s), skipped\n", label, expected_path);
        return;
    }
    fclose(f);
    tok_load_opts opts = {pipeline};
    tok_tokenizer *tok = NULL;
    int rc = tok_load_dir_ex(dir, &opts, &tok);
    CHECK_MSG(rc == CLEF_OK, "%s: load %s: %s", label, dir, clef_last_error());
    if (rc != CLEF_OK) return;
    ids_check_file(label, tok, "tests/tokenizer/data/sample.jsonl", expected_path);
    tok_free(tok);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TOKENIZER_CACHE_DIR (from scripts/tokenizer/fetch_tokenizers.sh)\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char dir[1024];
        if (strcmp(names[i], "demo") == 0) snprintf(dir, sizeof dir, "tests/tokenizer/data/demo");
        else snprintf(dir, sizeof dir, "%s/%s", argv[1], names[i]);
        check_one(names[i], dir, TOK_PIPELINE_FILE);
        check_one(names[i], dir, TOK_PIPELINE_TRANSFORMERS);
    }
    return test_summary();
}
