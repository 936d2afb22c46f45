/*
 * test_tokenizer_tf_cases.c — the transformers pipeline (TOK_PIPELINE_TRANSFORMERS) against
 * transformers' AutoTokenizer on tokenizer_config.json variants of the committed demo
 * tokenizer: each tests/tokenizer/data/tf_cases/<case>.config.json is loaded with the demo
 * tokenizer.json and must give, for every line of tf_cases/texts.jsonl, the ids of
 * tf_cases/<case>.ids (written by scripts/tokenizer/make_transformers_fixtures.py, which
 * documents what each case exercises: Qwen2Tokenizer / Qwen3_5Tokenizer / TokenizersBackend,
 * added_tokens_decoder with id gaps, named and extra special tokens, add_prefix_space).
 * Offline: needs only committed files.
 */
#include "ids_check.h"

#include "core/log.h"

#include <dirent.h>

#define CASES "tests/tokenizer/data/tf_cases"

static void quiet_log(clef_log_level level, const char *msg, void *user) {
    (void)level, (void)msg, (void)user; /* the id-gap case warns by design */
}

int main(void) {
    clef_log_set(quiet_log, NULL);
    DIR *d = opendir(CASES);
    CHECK_MSG(d != NULL, "cannot open %s", CASES);
    if (!d) return test_summary();
    size_t cases = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        const char *suffix = ".config.json";
        if (n <= strlen(suffix) || strcmp(e->d_name + n - strlen(suffix), suffix) != 0) continue;
        char name[256], config[512], expected[512];
        snprintf(name, sizeof name, "%.*s", (int)(n - strlen(suffix)), e->d_name);
        snprintf(config, sizeof config, "%s/%s", CASES, e->d_name);
        snprintf(expected, sizeof expected, "%s/%s.ids", CASES, name);
        tok_tokenizer *tok = NULL;
        int rc = tok_load_ex("tests/tokenizer/data/demo/tokenizer.json", config, NULL, &tok);
        CHECK_MSG(rc == CLEF_OK, "%s: %s", name, clef_last_error());
        if (rc != CLEF_OK) continue;
        CHECK_MSG(ids_check_file(name, tok, CASES "/texts.jsonl", expected) == 0, "%s: no %s", name, expected);
        tok_free(tok);
        cases++;
    }
    closedir(d);
    CHECK_MSG(cases >= 4, "only %zu cases in %s", cases, CASES);
    return test_summary();
}
