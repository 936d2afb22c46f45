/*
 * test_request.c — request validation rule by rule (each refusal with its loc, type and
 * HTTP status), both error bodies, and the encoder's policies: truncate vs refuse, schema
 * too long, media without and with a hook. Identity with the reference is shown by
 * test_encode_bytes / test_answers; this file pins our own contract (api.md's limits).
 */
#include "clef.h"
#include "encode/answers.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

/* Parse body as kind; expect status and, when loc is given, a field error with that loc
 * and type among the errors. */
static void expect_refusal(clef_request_kind kind, const char *path_model, const char *body,
                           int want_status, int want_http, const char *loc, const char *type) {
    clef_request *req = NULL;
    clef_request_errors errors = {0};
    int status = clef_request_parse(body, strlen(body), kind, path_model, NULL, &req, &errors);
    CHECK_MSG(status == want_status, "%s: status %d, want %d (%s)", body, status, want_status,
              clef_last_error());
    CHECK_MSG(errors.http_status == want_http, "%s: http %d, want %d", body, errors.http_status, want_http);
    int found = loc == NULL;
    for (size_t i = 0; i < errors.count && !found; i++)
        found = strcmp(errors.items[i].loc, loc) == 0 && strcmp(errors.items[i].type, type) == 0;
    if (!found) {
        fprintf(stderr, "%s: no error %s %s among:\n", body, loc, type);
        for (size_t i = 0; i < errors.count; i++)
            fprintf(stderr, "  %s %s: %s\n", errors.items[i].loc, errors.items[i].type, errors.items[i].msg);
    }
    CHECK(found);
    CHECK(req == NULL);
    clef_request_errors_free(&errors);
}

static clef_request *accept(clef_request_kind kind, const char *body) {
    clef_request *req = NULL;
    clef_request_errors errors = {0};
    int status = clef_request_parse(body, strlen(body), kind, kind == CLEF_REQUEST_WORKERS_AI ? "clef" : NULL,
                                    NULL, &req, &errors);
    CHECK_MSG(status == CLEF_OK, "%s refused: %s", body, clef_last_error());
    clef_request_errors_free(&errors);
    return req;
}

static int byte_tokenize(const void *ctx, const char *text, size_t len, tok_ids *out) {
    (void)ctx;
    int32_t *ids = realloc(out->ids, (out->count + len + 1) * sizeof *ids);
    if (!ids)
        return CLEF_ERR_OUT_OF_MEMORY;
    out->ids = ids;
    out->cap = out->count + len + 1;
    for (size_t i = 0; i < len; i++)
        out->ids[out->count++] = (unsigned char)text[i];
    return CLEF_OK;
}

/* A media hook that reserves 5 placeholder ids (1000..1004) per image. */
static int fake_media(void *ctx, const clef_request *req, tok_ids *out) {
    (void)ctx;
    for (int32_t i = 0; i < 5 * req->n_images; i++)
        byte_tokenize(NULL, "", 0, out), out->ids[out->count++] = 1000 + i;
    return CLEF_OK;
}

static void test_validation(void) {
    const int INVALID = CLEF_ERR_REQUEST_INVALID;
    const clef_request_kind S1 = CLEF_REQUEST_SYSTEMONE, WAI = CLEF_REQUEST_WORKERS_AI, REC = CLEF_REQUEST_RECORD;
    expect_refusal(S1, NULL, "{\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}}", INVALID, 422,
                   "[\"body\",\"model\"]", "missing");
    expect_refusal(S1, NULL, "{\"model\":1,\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}}", INVALID,
                   422, "[\"body\",\"model\"]", "string_type");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"questions\":{\"a\":{\"type\":\"noul\"}}}", INVALID, 422,
                   "[\"body\",\"state\"]", "missing");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{}}", INVALID, 422,
                   "[\"body\",\"questions\"]", "too_short");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":[]}", INVALID, 422,
                   "[\"body\",\"questions\"]", "dict_type");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"yes\"}}}", INVALID,
                   422, "[\"body\",\"questions\",\"a\",\"type\"]", "literal_error");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{}}}", INVALID, 422,
                   "[\"body\",\"questions\",\"a\",\"type\"]", "missing");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"choice\"}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\"]", "missing");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":{\"x\":1}}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\"]", "too_short");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":{\"x\":1,\"y\":\"\"}}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\",\"x\"]", "description_type");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[\"x\",\"y\"]}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\"]", "dict_type");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\"]}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\"]", "too_long");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\",\"criteria\":{\"maybe\":\"x\"}}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\",\"maybe\"]", "extra_forbidden");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{\"\":{\"type\":\"noul\"}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"\"]", "string_too_short");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\",\"criteria\":{\"true\\u0000x\":\"x\"}}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a\",\"criteria\",\"true\\u0000x\"]", "extra_forbidden");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{\"a b\":{\"type\":\"noul\"}}}",
                   INVALID, 422, "[\"body\",\"questions\",\"a b\"]", "string_pattern_mismatch");
    expect_refusal(S1, NULL, "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}},\"temperature\":0}",
                   INVALID, 422, "[\"body\",\"temperature\"]", "extra_forbidden");
    expect_refusal(REC, NULL, "{\"state\":[1,{\"x\":NaN}],\"questions\":{\"a\":{\"type\":\"noul\"}}}", INVALID,
                   422, "[\"body\",\"state\",1,\"x\"]", "finite_number");
    expect_refusal(REC, NULL, "{\"state\":1e400,\"questions\":{\"a\":{\"type\":\"noul\"}}}", INVALID, 422,
                   "[\"body\",\"state\"]", "finite_number");
    expect_refusal(REC, NULL, "{\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}", CLEF_ERR_REQUEST_JSON,
                   422, NULL, NULL);
    expect_refusal(REC, NULL, "{\"state\":\"\\ud800\",\"questions\":{\"a\":{\"type\":\"noul\"}}}",
                   CLEF_ERR_REQUEST_JSON, 422, NULL, NULL);
    expect_refusal(REC, NULL, "[1]", INVALID, 422, "[\"body\"]", "model_attributes_type");
    expect_refusal(WAI, "clef", "{\"model\":\"gpt\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}}",
                   INVALID, 422, "[\"body\",\"model\"]", "literal_error");
    expect_refusal(WAI, "clef", "{\"model\":\"clef-flash\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}}",
                   INVALID, 422, "[\"body\",\"model\"]", "model_mismatch");
    expect_refusal(S1, NULL,
                   "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}},\"images\":[\"https://x/y.png\"]}",
                   INVALID, 422, "[\"body\",\"images\",0]", "url_scheme");

    /* 65 questions: too_long; a body over the cap: 413. */
    char big[8192] = "{\"model\":\"m\",\"state\":1,\"questions\":{";
    for (int i = 0; i < 65; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "%s\"q%d\":{\"type\":\"noul\"}", i ? "," : "", i);
    strcat(big, "}}");
    expect_refusal(S1, NULL, big, INVALID, 422, "[\"body\",\"questions\"]", "too_long");
    clef_request_limits limits = clef_request_default_limits();
    limits.max_body_bytes = 10;
    clef_request *req = NULL;
    clef_request_errors errors = {0};
    CHECK_EQ_INT(clef_request_parse(big, strlen(big), S1, NULL, &limits, &req, &errors),
                 CLEF_ERR_REQUEST_TOO_LONG);
    CHECK_EQ_INT(errors.http_status, 413);
    clef_strbuf out = {0};
    CHECK_EQ_INT(clef_request_errors_render_workers_ai(&errors, &out), CLEF_OK);
    char want[256];
    snprintf(want, sizeof want,
             "{\"success\":false,\"result\":{},\"errors\":[{\"code\":3006,\"message\":"
             "\"body: the body has %zu bytes; the cap is 10\"}],\"messages\":[]}",
             strlen(big));
    CHECK_EQ_STR(out.data, want);
    clef_strbuf_free(&out);
    clef_request_errors_free(&errors);

    /* Every problem is reported at once, in the TypeSafe 422 shape. */
    const char *two = "{\"model\":5,\"questions\":{\"a\":{\"type\":\"x\"}}}";
    CHECK_EQ_INT(clef_request_parse(two, strlen(two), S1, NULL, NULL, &req, &errors), INVALID);
    CHECK_EQ_INT(clef_request_errors_render_detail(&errors, &out), CLEF_OK);
    CHECK_EQ_STR(out.data,
                 "{\"detail\":[{\"loc\":[\"body\",\"model\"],\"msg\":\"Input should be a valid string, got number\","
                 "\"type\":\"string_type\"},{\"loc\":[\"body\",\"state\"],\"msg\":\"Field required\",\"type\":\"missing\"},"
                 "{\"loc\":[\"body\",\"questions\",\"a\",\"type\"],\"msg\":\"Input should be 'noul', 'choice' or 'score'\","
                 "\"type\":\"literal_error\"}]}");
    clef_strbuf_free(&out);
    clef_request_errors_free(&errors);

    /* Accepted shapes: a record with id and no model; Workers AI with its model. */
    clef_request_free(accept(REC, "{\"id\":7,\"state\":null,\"questions\":{\"a\":{\"type\":\"noul\",\"criteria\":null}}}"));
    clef_request_free(accept(WAI, "{\"model\":\"clef\",\"state\":{},\"questions\":{\"a.b-c_1\":{\"type\":\"score\",\"criteria\":[null,{\"k\":1}]}}}"));
}

static void test_policies(void) {
    const char *body = "{\"model\":\"m\",\"state\":\"0123456789\",\"questions\":{\"a\":{\"type\":\"noul\"}}}";
    clef_request *req = accept(CLEF_REQUEST_SYSTEMONE, body);
    if (!req)
        return;
    clef_encode_params p = clef_encode_default_params();
    p.tokenize = byte_tokenize;
    clef_encoded_record full, cut;
    CHECK_EQ_INT(clef_record_encode(req, &p, &full), CLEF_OK);
    CHECK_EQ_INT(full.truncated_tokens, 0);
    CHECK_EQ_INT(full.n_state_tokens, 10);
    p.max_length = full.n_tokens - 4;
    CHECK_EQ_INT(clef_record_encode(req, &p, &cut), CLEF_OK);
    CHECK_EQ_INT(cut.truncated_tokens, 4);
    CHECK_EQ_INT(cut.n_tokens, full.n_tokens - 4);
    CHECK(memcmp(cut.ids + cut.state_offset, "012345", 0) == 0 && cut.ids[cut.state_offset + 5] == '5');
    CHECK_EQ_INT(cut.questions[0].instruction.begin, full.questions[0].instruction.begin - 4);
    p.policy = CLEF_TRUNCATE_REFUSE;
    clef_encoded_record refused;
    CHECK_EQ_INT(clef_record_encode(req, &p, &refused), CLEF_ERR_REQUEST_TOO_LONG);
    CHECK(strstr(clef_last_error(), "state has 10 tokens but only 6 fit") != NULL);
    CHECK(refused.ids == NULL && refused.n_tokens == 0);
    p.max_length = full.n_tokens - 11; /* the schema alone does not fit */
    p.policy = CLEF_TRUNCATE_STATE;
    CHECK_EQ_INT(clef_record_encode(req, &p, &refused), CLEF_ERR_REQUEST_TOO_LONG);
    CHECK(strstr(clef_last_error(), "schema requires") != NULL);
    clef_encoded_record_free(&full);
    clef_encoded_record_free(&cut);
    clef_request_free(req);

    /* Media: refused without a hook; with one, placeholders sit right after the prefix. */
    const char *with_image = "{\"model\":\"m\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}},"
                             "\"images\":[\"data:image/png;base64,AAAA\"]}";
    req = accept(CLEF_REQUEST_SYSTEMONE, with_image);
    if (!req)
        return;
    p = clef_encode_default_params();
    p.tokenize = byte_tokenize;
    clef_encoded_record media;
    CHECK_EQ_INT(clef_record_encode(req, &p, &media), CLEF_ERR_UNSUPPORTED);
    p.media = fake_media;
    CHECK_EQ_INT(clef_record_encode(req, &p, &media), CLEF_OK);
    CHECK_EQ_INT(media.n_media_tokens, 5);
    CHECK_EQ_INT(media.state_offset, media.media_offset + 5);
    CHECK_EQ_INT(media.ids[media.media_offset], 1000);
    CHECK_EQ_INT(media.ids[media.state_offset], '1');
    clef_encoded_record_free(&media);
    clef_request_free(req);
}

/* Repeated keys: accepted as Python's json.loads merges them (the reference systemone() reads
 * plain dicts), with one warning naming the key; a body without repeats logs nothing. */
static char last_warning[512];
static int n_warnings;
static void capture_log(clef_log_level level, const char *text, void *user) {
    (void)user;
    if (level == CLEF_LOG_WARN) {
        snprintf(last_warning, sizeof last_warning, "%s", text);
        n_warnings++;
    }
}

static void test_repeated_keys(void) {
    clef_log_set(capture_log, NULL);
    const char *body = "{\"state\":1,\"questions\":{\"q\":{\"type\":\"noul\"},"
                       "\"q\":{\"type\":\"score\",\"criteria\":[\"a\",\"b\"]}}}";
    clef_request *r = accept(CLEF_REQUEST_RECORD, body);
    CHECK(r && r->n_questions == 1 && r->questions[0].type == CLEF_QUESTION_SCORE);
    clef_request_free(r);
    CHECK_EQ_INT(n_warnings, 1);
    CHECK_EQ_STR(last_warning, "request accepted; note: key \"q\" appears twice in one object "
                               "(line 1 column 45); as in Python's json.loads the last value is kept");
    n_warnings = 0;
    const char *plain = "{\"state\":{\"a\":1,\"b\":2},\"questions\":{\"q\":{\"type\":\"noul\"}}}";
    r = accept(CLEF_REQUEST_RECORD, plain);
    clef_request_free(r);
    CHECK_EQ_INT(n_warnings, 0);
    clef_log_set(NULL, NULL);
}

int main(void) {
    test_validation();
    test_policies();
    test_repeated_keys();
    return test_summary();
}
