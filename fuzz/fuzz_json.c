/*
 * fuzz_json.c — libFuzzer target for the JSON parser and Python-identical render.
 *
 * Any byte string goes through json_parse (with and without the non-finite literals); a
 * parsed document is rendered both with sorted and document-order keys, and the sorted
 * text must parse again and render to itself (render's output is canonical JSON). Failures
 * must be statuses with a non-empty, valid UTF-8 message, never crashes, leaks or
 * sanitizer reports.
 *
 * Both duplicate-key modes parse every input, and must agree on everything but duplicates:
 * when rejecting succeeds, merging gives the identical tree; when rejecting fails for
 * another reason, merging fails with the same status, offset and message; when rejecting
 * finds a repeated key, merging either succeeds or fails later in the text (after that
 * object closed), and the reported key is the one at the reported offset.
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

/* Same tree: types, number texts, string bytes, members in order. */
static int same_tree(const json_value *a, const json_value *b) {
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case JSON_NUMBER:
        return a->u.num.kind == b->u.num.kind && a->u.num.len == b->u.num.len &&
               memcmp(a->u.num.text, b->u.num.text, a->u.num.len) == 0;
    case JSON_STRING:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0;
    case JSON_ARRAY:
        if (a->u.arr.count != b->u.arr.count)
            return 0;
        for (size_t i = 0; i < a->u.arr.count; i++)
            if (!same_tree(a->u.arr.items[i], b->u.arr.items[i]))
                return 0;
        return 1;
    case JSON_OBJECT:
        if (a->u.obj.count != b->u.obj.count)
            return 0;
        for (size_t i = 0; i < a->u.obj.count; i++) {
            const json_member *x = &a->u.obj.members[i], *y = &b->u.obj.members[i];
            if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) != 0 ||
                !same_tree(x->value, y->value))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}

static void check_duplicate_modes(const uint8_t *data, size_t size) {
    json_parse_opts merge = {.allow_nonfinite = 1, .max_depth = 64};
    json_parse_opts reject = merge;
    reject.reject_duplicate_keys = 1;
    json_doc *merged = NULL, *strict = NULL;
    json_error merge_err, reject_err;
    int merge_rc = json_parse((const char *)data, size, &merge, &merged, &merge_err);
    int reject_rc = json_parse((const char *)data, size, &reject, &strict, &reject_err);
    CLEF_ASSERT(merge_rc != JSON_PARSE_DUPLICATE_KEY);
    if (merge_rc == JSON_PARSE_NOMEM || reject_rc == JSON_PARSE_NOMEM) {
        /* nothing to compare */
    } else if (reject_rc == 0) {
        CLEF_ASSERT(merge_rc == 0);
        CLEF_ASSERT(same_tree(json_doc_root(strict), json_doc_root(merged)));
    } else if (reject_rc == JSON_PARSE_DUPLICATE_KEY) {
        CLEF_ASSERT(merge_rc == 0 || merge_err.offset > reject_err.offset);
        /* The offset is the repeated key's opening quote; a key written without escapes,
         * short enough to fit, reads back verbatim in err.key. */
        CLEF_ASSERT(reject_err.offset < size && data[reject_err.offset] == '"');
        const uint8_t *raw = data + reject_err.offset + 1;
        const uint8_t *close = memchr(raw, '"', size - reject_err.offset - 1);
        CLEF_ASSERT(close != NULL);
        size_t raw_len = (size_t)(close - raw);
        if (!memchr(raw, '\\', raw_len) && raw_len < sizeof reject_err.key)
            CLEF_ASSERT(strlen(reject_err.key) == raw_len && memcmp(reject_err.key, raw, raw_len) == 0);
        CLEF_ASSERT(strstr(reject_err.msg, "duplicate key") != NULL);
    } else {
        CLEF_ASSERT(merge_rc == reject_rc);
        CLEF_ASSERT(merge_err.offset == reject_err.offset);
        CLEF_ASSERT(strcmp(merge_err.msg, reject_err.msg) == 0);
    }
    json_doc_free(merged);
    json_doc_free(strict);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_duplicate_modes(data, size);
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
