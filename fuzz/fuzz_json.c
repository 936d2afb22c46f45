/*
 * fuzz_json.c — libFuzzer target for the JSON parser and Python-identical render.
 *
 * Any byte string goes through json_parse (with and without the non-finite literals); a
 * parsed document is rendered both with sorted and document-order keys, and the sorted
 * text must parse again and render to itself (render's output is canonical JSON). Failures
 * must be statuses with a non-empty, valid UTF-8 message, never crashes, leaks or
 * sanitizer reports.
 */
#include "clef.h"
#include "core/error.h"
#include "core/utf8.h"
#include "json/json.h"
#include "json/render.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_round_trip(const json_value *root) {
    json_render_opts sorted = {.sort_keys = 1, .allow_nonfinite = 1};
    clef_strbuf first = {0};
    if (json_render(root, &sorted, &first) != CLEF_OK) {
        clef_strbuf_free(&first);
        return;
    }
    json_parse_opts popts = {.allow_nonfinite = 1, .max_depth = 0};
    json_doc *again = NULL;
    int parsed = json_parse(first.data, first.len, &popts, &again, NULL);
    CLEF_ASSERT(parsed == 0); /* our own output must be valid JSON */
    clef_strbuf second = {0};
    int status = json_render(json_doc_root(again), &sorted, &second);
    CLEF_ASSERT(status == CLEF_OK);
    CLEF_ASSERT(second.len == first.len && memcmp(second.data, first.data, first.len) == 0);
    clef_strbuf_free(&second);
    clef_strbuf_free(&first);
    json_doc_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int allow_nonfinite = 0; allow_nonfinite <= 1; allow_nonfinite++) {
        json_parse_opts opts = {.allow_nonfinite = allow_nonfinite, .max_depth = 64};
        json_doc *doc = NULL;
        json_error err;
        if (json_parse((const char *)data, size, &opts, &doc, &err) != 0) {
            /* messages end up in JSON error bodies: they must be valid UTF-8 */
            size_t n = strlen(err.msg);
            CLEF_ASSERT(n > 0 && clef_utf8_check((const unsigned char *)err.msg, n) == n);
            continue;
        }
        const json_value *root = json_doc_root(doc);
        clef_strbuf out = {0};
        json_render_opts unsorted = {.sort_keys = 0, .allow_nonfinite = 0};
        (void)json_render(root, &unsorted, &out);
        clef_strbuf_free(&out);
        (void)json_render_prompt(root, &out);
        clef_strbuf_free(&out);
        check_round_trip(root);
        json_doc_free(doc);
    }
    return 0;
}
