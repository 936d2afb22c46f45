/*
 * ids_check.h — shared by the tokenizer parity tests: encode every line of a JSON-string
 * lines file with a loaded tokenizer and compare with an oracle's ids file (one line of
 * space-separated ids per text, written by scripts/tokenizer/make_*fixtures.py).
 * Prints records, bytes and tokens compared and the first differing records.
 */
#ifndef CLEF_TESTS_TOKENIZER_IDS_CHECK_H
#define CLEF_TESTS_TOKENIZER_IDS_CHECK_H

#include "tokenizer/tokenizer.h"

#include "clef.h"
#include "core/io.h"
#include "json/json.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

/* Compares tok's ids on texts_path's lines with expected_path's lines; label names the run
 * in the output. Returns 1 if expected_path is missing (nothing checked), else 0. */
static int ids_check_file(const char *label, const tok_tokenizer *tok, const char *texts_path,
                          const char *expected_path) {
    char *texts = NULL, *expected = NULL;
    size_t texts_len = 0, expected_len = 0;
    if (clef_read_file(expected_path, 64u << 20, &expected, &expected_len) != CLEF_OK) return 1;
    int rc = clef_read_file(texts_path, 64u << 20, &texts, &texts_len);
    CHECK_MSG(rc == CLEF_OK, "%s: %s", label, clef_last_error());
    if (rc != CLEF_OK) {
        free(expected);
        return 0;
    }
    size_t records = 0, bytes = 0, tokens = 0, identical = 0;
    char *line = texts, *exp_line = expected;
    tok_ids ids = {0};
    while (line < texts + texts_len && exp_line < expected + expected_len) {
        char *nl = memchr(line, '\n', (size_t)(texts + texts_len - line));
        char *enl = memchr(exp_line, '\n', (size_t)(expected + expected_len - exp_line));
        if (!nl || !enl) break;
        json_doc *doc = NULL;
        json_error err;
        const json_value *v = NULL;
        if (json_parse(line, (size_t)(nl - line), NULL, &doc, &err) == 0) v = json_doc_root(doc);
        CHECK_MSG(v && v->type == JSON_STRING, "%s: %s line %zu is not a JSON string", label, texts_path,
                  records + 1);
        if (!v || v->type != JSON_STRING) {
            json_doc_free(doc);
            break;
        }
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
            printf("%s: record %zu differs (rc %d) near token %zu\n  expected: %.*s\n  got:     ", label, records, rc,
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
    printf("%s: %zu records, %zu UTF-8 bytes, %zu tokens: %zu/%zu identical\n", label, records, bytes, tokens,
           identical, records);
    CHECK(records > 0);
    CHECK_EQ_INT(identical, records);
    tok_ids_free(&ids);
    free(texts);
    free(expected);
    return 0;
}

#endif /* CLEF_TESTS_TOKENIZER_IDS_CHECK_H */
