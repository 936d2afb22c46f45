/*
 * fuzz_request.c — libFuzzer target for request parsing, validation, encoding and answers.
 *
 * The first input byte picks the API shape (record, SystemOne, Workers AI with or without
 * a route model), the truncation policy and a max_length; the rest is the body. Whatever
 * the bytes, the contract is checked with CLEF_ASSERT (a finding if broken):
 *   - a refused body is a 4xx-style failure (malformed JSON or validation: 422, body over
 *     the cap: 413) with at least one field error, and both error bodies (TypeSafe detail,
 *     Workers AI envelope) are valid JSON;
 *   - an accepted request encodes (with a byte tokenizer) or fails only as too long / media
 *     unsupported, spans lie inside the ids, and the answers body for uniform
 *     probabilities is valid JSON.
 */
#include "clef.h"
#include "core/error.h"
#include "encode/answers.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int byte_tokenize(const void *ctx, const char *text, size_t len, tok_ids *out) {
    (void)ctx;
    for (size_t i = 0; i < len; i++)
        if (tok_ids_push(out, (unsigned char)text[i]) != 0)
            return CLEF_ERR_OUT_OF_MEMORY;
    return CLEF_OK;
}

static void assert_valid_json(const clef_strbuf *b) {
    json_doc *doc = NULL;
    CLEF_ASSERT(b->data && json_parse(b->data, b->len, NULL, &doc, NULL) == 0);
    json_doc_free(doc);
}

static void check_refusal(int status, const clef_request_errors *errors) {
    CLEF_ASSERT(status == CLEF_ERR_REQUEST_JSON || status == CLEF_ERR_REQUEST_INVALID ||
                status == CLEF_ERR_REQUEST_TOO_LONG || status == CLEF_ERR_OUT_OF_MEMORY);
    if (status == CLEF_ERR_OUT_OF_MEMORY)
        return;
    CLEF_ASSERT(errors->count > 0);
    CLEF_ASSERT(errors->http_status == (status == CLEF_ERR_REQUEST_TOO_LONG ? 413 : 422));
    clef_strbuf out = {0};
    CLEF_ASSERT(clef_request_errors_render_detail(errors, &out) == CLEF_OK);
    assert_valid_json(&out);
    clef_strbuf_free(&out);
    CLEF_ASSERT(clef_request_errors_render_workers_ai(errors, &out) == CLEF_OK);
    assert_valid_json(&out);
    clef_strbuf_free(&out);
}

static void check_encode_and_answer(const clef_request *req, int policy, int32_t max_length) {
    clef_encode_params params = clef_encode_default_params();
    params.tokenize = byte_tokenize;
    params.max_length = max_length;
    params.policy = policy ? CLEF_TRUNCATE_REFUSE : CLEF_TRUNCATE_STATE;
    clef_encoded_record enc;
    int status = clef_record_encode(req, &params, &enc);
    if (status != CLEF_OK) {
        CLEF_ASSERT(status == CLEF_ERR_REQUEST_TOO_LONG || status == CLEF_ERR_UNSUPPORTED);
        return;
    }
    CLEF_ASSERT(enc.n_tokens <= max_length && enc.n_questions == req->n_questions);
    size_t n_probs = 0;
    for (int32_t q = 0; q < enc.n_questions; q++) {
        const clef_encoded_question *eq = &enc.questions[q];
        CLEF_ASSERT(eq->instruction.begin < eq->instruction.end && eq->instruction.end <= enc.n_tokens);
        for (int32_t o = 0; o < eq->n_options; o++)
            CLEF_ASSERT(eq->options[o].begin < eq->options[o].end && eq->options[o].end <= enc.n_tokens);
        n_probs += (size_t)eq->n_options;
    }
    double *probs = malloc((n_probs ? n_probs : 1) * sizeof *probs);
    if (probs) {
        size_t k = 0;
        for (int32_t q = 0; q < enc.n_questions; q++)
            for (int32_t o = 0; o < enc.questions[q].n_options; o++)
                probs[k++] = 1.0 / enc.questions[q].n_options;
        clef_strbuf out = {0};
        CLEF_ASSERT(clef_answers_render_workers_ai(req, &enc, probs, n_probs, NULL, &out) == CLEF_OK);
        assert_valid_json(&out);
        clef_strbuf_free(&out);
        free(probs);
    }
    clef_encoded_record_free(&enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t control = data[0];
    clef_request_kind kind = (clef_request_kind)(control % 3);
    const char *path_model = (control & 4) ? ((control & 8) ? "clef-flash" : "clef") : NULL;
    int policy = (control >> 4) & 1;
    int32_t max_length = 64 + 256 * ((control >> 5) & 7);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    clef_request *req = NULL;
    clef_request_errors errors;
    memset(&errors, 0, sizeof errors);
    int status = clef_request_parse(body, len, kind, kind == CLEF_REQUEST_WORKERS_AI ? path_model : NULL,
                                    NULL, &req, &errors);
    if (status != CLEF_OK) {
        CLEF_ASSERT(req == NULL);
        check_refusal(status, &errors);
    } else {
        CLEF_ASSERT(req && errors.count == 0);
        check_encode_and_answer(req, policy, max_length);
        check_encode_and_answer(req, !policy, CLEF_DEFAULT_MAX_LENGTH);
    }
    clef_request_free(req);
    clef_request_errors_free(&errors);
    return 0;
}
