/*
 * encode_check.h — encode a fixture's record with the engine's own request parser and prompt
 * encoder (the real tokenizer given) and check the token ids against the ids the reference
 * encode_record() produced for the fixture, for the whole-decision tests. Header-only: one
 * static function, one copy per test program; it reports through test.h's CHECK_MSG.
 */
#ifndef CLEF_TESTS_ENCODE_CHECK_H
#define CLEF_TESTS_ENCODE_CHECK_H

#include "test.h"

#include "clef.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Encodes `request` (max_length tokens at most) and checks its ids equal `want` (a JSON array
 * of integers), failing the test with `name` otherwise. Returns the number of tokens when they
 * are equal, else 0; with `ids` non-NULL, *ids then gets a malloc'd copy of them. */
static int32_t encode_check_ids(const tok_tokenizer *tok, const char *name, const char *request,
                                int32_t max_length, const json_value *want, int32_t **ids) {
    clef_request *req = NULL;
    clef_request_errors errors = {0};
    int st = clef_request_parse(request, strlen(request), CLEF_REQUEST_RECORD, NULL, NULL, &req,
                                &errors);
    clef_request_errors_free(&errors);
    CHECK_MSG(st == CLEF_OK, "%s: parse: %s", name, clef_last_error());
    if (st)
        return 0;
    clef_encode_params ep = clef_encode_default_params();
    ep.max_length = max_length;
    ep.tokenize = clef_tokenize_tok;
    ep.tokenize_ctx = tok;
    clef_encoded_record enc = {0};
    st = clef_record_encode(req, &ep, &enc);
    CHECK_MSG(st == CLEF_OK, "%s: encode: %s", name, clef_last_error());
    int same = !st && (size_t)enc.n_tokens == want->u.arr.count;
    for (int32_t i = 0; same && i < enc.n_tokens; i++) {
        int64_t w = -1;
        json_get_int64(json_array_at(want, (size_t)i), &w);
        same = enc.ids[i] == w;
    }
    CHECK_MSG(same, "%s: token ids differ from encode_record's (%d vs %zu tokens)", name,
              enc.n_tokens, want->u.arr.count);
    int32_t n = same ? enc.n_tokens : 0;
    if (n && ids) {
        *ids = malloc(sizeof(int32_t) * (size_t)n);
        if (*ids)
            memcpy(*ids, enc.ids, sizeof(int32_t) * (size_t)n);
        else
            n = 0;
    }
    clef_encoded_record_free(&enc);
    clef_request_free(req);
    return n;
}

#endif /* CLEF_TESTS_ENCODE_CHECK_H */
