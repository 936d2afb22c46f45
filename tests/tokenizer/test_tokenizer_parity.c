/*
 * test_tokenizer_parity.c — our ids against HF `tokenizers`' ids on the committed sample.
 *
 * For each tokenizer with a file tests/tokenizer/data/expected/<name>.ids (written by
 * scripts/tokenizer/make_fixtures.py from `tokenizers`, pinned), encodes every line of
 * tests/tokenizer/data/sample.jsonl and compares with that line of the .ids file. The real
 * files (qwen-3.5, ...) come from the cache dir given as argv[1] (fetch_tokenizers.sh);
 * "demo" is committed. Prints records, bytes and tokens compared per tokenizer, and the
 * first differing ids of a failing record.
 */
#include "tokenizer/tokenizer.h"

#include "clef.h"
#include "core/io.h"
#include "json/json.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static const char *names[] = {"qwen-3.5", "qwen-3", "deepseek-v3", "glm-4", "demo"};

static void check_one(const char *name, const char *dir, char *sample, size_t sample_len) {
    char expected_path[512];
    snprintf(expected_path, sizeof expected_path, "tests/tokenizer/data/expected/%s.ids", name);
    char *expected = NULL;
    size_t expected_len = 0;
    if (clef_read_file(expected_path, 64u << 20, &expected, &expected_len) != CLEF_OK) {
        printf("%s: no expected ids (%s), skipped\n", name, expected_path);
        return;
    }
    tok_tokenizer *tok = NULL;
    int rc = tok_load_dir(dir, &tok);
    CHECK_MSG(rc == CLEF_OK, "%s: load %s: %s", name, dir, clef_last_error());
    if (rc != CLEF_OK) {
        free(expected);
        return;
    }
    size_t records = 0, bytes = 0, tokens = 0, identical = 0;
    char *line = sample, *exp_line = expected;
    tok_ids ids = {0};
    while (line < sample + sample_len && exp_line < expected + expected_len) {
        char *nl = memchr(line, '\n', (size_t)(sample + sample_len - line));
        char *enl = memchr(exp_line, '\n', (size_t)(expected + expected_len - exp_line));
        if (!nl || !enl) break;
        json_doc *doc = NULL;
        json_error err;
        CHECK(json_parse(line, (size_t)(nl - line), NULL, &doc, &err) == 0);
        const json_value *v = json_doc_root(doc);
        ids.count = 0;
        rc = tok_encode(tok, v->u.str.ptr, v->u.str.len, &ids);
        int same = rc == CLEF_OK;
        size_t k = 0;
        char *p = exp_line;
        while (same && p < enl) {
            char *end;
            long id = strtol(p, &end, 10);
            if (end == p) break;
            same = k < ids.count && ids.ids[k] == id;
            k++;
            p = end;
        }
        same = same && k == ids.count;
        if (!same && records - identical < 3) {
            printf("%s: record %zu differs (rc %d) near token %zu\n  expected: %.*s\n  got:     ", name, records, rc,
                   k ? k - 1 : 0, (int)(enl - exp_line > 300 ? 300 : enl - exp_line), exp_line);
            for (size_t i = 0; i < ids.count && i < 40; i++) printf(" %d", ids.ids[i]);
            printf("\n");
        }
        records++;
        identical += same;
        bytes += v->u.str.len;
        tokens += ids.count;
        json_doc_free(doc);
        line = nl + 1;
        exp_line = enl + 1;
    }
    printf("%s: %zu records, %zu UTF-8 bytes, %zu tokens compared with tokenizers: %zu/%zu identical\n", name,
           records, bytes, tokens, identical, records);
    CHECK(records > 0);
    CHECK_EQ_INT(identical, records);
    tok_ids_free(&ids);
    tok_free(tok);
    free(expected);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TOKENIZER_CACHE_DIR (from scripts/tokenizer/fetch_tokenizers.sh)\n", argv[0]);
        return 2;
    }
    char *sample = NULL;
    size_t sample_len = 0;
    if (clef_read_file("tests/tokenizer/data/sample.jsonl", 64u << 20, &sample, &sample_len) != CLEF_OK) {
        fprintf(stderr, "%s\n", clef_last_error());
        return 1;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char dir[1024];
        if (strcmp(names[i], "demo") == 0) snprintf(dir, sizeof dir, "tests/tokenizer/data/demo");
        else snprintf(dir, sizeof dir, "%s/%s", argv[1], names[i]);
        check_one(names[i], dir, sample, sample_len);
    }
    free(sample);
    return test_summary();
}
