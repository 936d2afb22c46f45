/*
 * test_decide.c — the public decide API end to end against the reference ClefModel.
 *
 * Fixture (argv[1]): tests/model/fixtures/e2e.json (the committed demo release demo/clef-demo)
 * or e2e_sharded.json (tests/model/fixtures/tiny-sharded: BF16 in 4 shards + index, hidden 64),
 * written by scripts/head/make_e2e_fixtures.py from the release's joint_schema_model.py
 * (encode_record + transformers Qwen3.5 backbone + JointSchemaHead, systemone). For every record:
 *   - the token ids our encoder makes with the release's tokenizer equal encode_record's;
 *   - clef_model_decide_result: logits relative L2 error <= 1e-5 and probabilities max abs
 *     diff <= 1e-6 against the oracle evaluated exactly (float64), per record;
 *   - clef_model_decide: the response body equals systemone()'s, byte for byte (compact JSON),
 *     plus usage.truncated_tokens (which spec/api.md asks for and the reference lacks) with
 *     the oracle's count when the state was cut;
 * and clef_model_decide_batch over all records in a mixed order (lengths 215 .. 2048 tokens)
 * returns exactly the responses each record gets alone. Refusals: malformed JSON, a record
 * failing validation, and a record over max_length under the refuse policy.
 */
#include "test.h"
#include "encode_check.h"
#include "json_compact.h"

#include "clef.h"
#include "core/io.h"
#include "core/strbuf.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"
#include "json/render.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Option ids in presented order: noul true, false; choice sorted by id; score "0".."n-1". */
static void check_presented_order(const char *name, const clef_result *r) {
    for (int32_t q = 0; q < r->n_questions; q++) {
        const clef_question_result *qr = &r->questions[q];
        int ok = qr->n_options > 0 && qr->id && qr->type;
        for (int32_t o = 0; ok && o < qr->n_options; o++) {
            char index[16];
            snprintf(index, sizeof index, "%d", o);
            if (!strcmp(qr->type, "noul"))
                ok = qr->n_options == 2 && !strcmp(qr->option_ids[o], o ? "false" : "true");
            else if (!strcmp(qr->type, "choice"))
                ok = o == 0 || strcmp(qr->option_ids[o - 1], qr->option_ids[o]) < 0;
            else
                ok = !strcmp(qr->type, "score") && !strcmp(qr->option_ids[o], index);
        }
        CHECK_MSG(ok, "%s: question %d ('%s') options not in presented order", name, q,
                  qr->id ? qr->id : "?");
    }
}

static void check_numbers(const char *name, const clef_result *r, const json_value *logits,
                          const json_value *probs) {
    CHECK_EQ_INT(r->n_questions, (int64_t)logits->u.arr.count);
    if ((size_t)r->n_questions != logits->u.arr.count)
        return;
    double num = 0, den = 0, max_prob = 0;
    int shape_ok = 1;
    for (int32_t q = 0; q < r->n_questions; q++) {
        const json_value *lq = json_array_at(logits, (size_t)q), *pq = json_array_at(probs, (size_t)q);
        if ((size_t)r->questions[q].n_options != lq->u.arr.count) {
            shape_ok = 0;
            continue;
        }
        for (int32_t o = 0; o < r->questions[q].n_options; o++) {
            double want_l = 0, want_p = 0;
            json_get_double(json_array_at(lq, (size_t)o), &want_l);
            json_get_double(json_array_at(pq, (size_t)o), &want_p);
            double d = r->questions[q].logits[o] - want_l;
            num += d * d;
            den += want_l * want_l;
            max_prob = fmax(max_prob, fabs(r->questions[q].probabilities[o] - want_p));
        }
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    printf("%-16s %5d tokens %2d questions | logits rel L2 %.2e | probs max abs %.2e\n", name,
           r->input_tokens, r->n_questions, rel, max_prob);
    CHECK_MSG(shape_ok, "%s: option counts differ from the oracle's", name);
    CHECK_MSG(rel <= 1e-5, "%s: logits relative error %.3e > 1e-5", name, rel);
    CHECK_MSG(max_prob <= 1e-6, "%s: probabilities max abs diff %.3e > 1e-6", name, max_prob);
}

int main(int argc, char **argv) {
    const char *fixture = argc > 1 ? argv[1] : "tests/model/fixtures/e2e.json";
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    if (clef_read_file(fixture, (size_t)16 << 20, &text, &len) ||
        json_parse(text, len, NULL, &doc, NULL)) {
        fprintf(stderr, "cannot read %s (run scripts/head/make_e2e_fixtures.py)\n", fixture);
        return 1;
    }
    const json_value *root = json_doc_root(doc);
    const char *release = json_get_string(json_object_get(root, "release"));
    int64_t max_length = 0;
    json_get_int64(json_object_get(root, "max_length"), &max_length);
    const json_value *records = json_object_get(root, "records");
    const size_t n = records->u.arr.count;

    clef_model_params mp = clef_model_default_params();
    mp.n_threads = 2;
    mp.max_length = (int32_t)max_length;
    clef_model *model = NULL;
    int st = clef_model_load(release, &mp, &model);
    CHECK_MSG(st == CLEF_OK, "load %s: %s", release, clef_last_error());
    tok_tokenizer *tok = NULL;
    CHECK(tok_load_dir(release, &tok) == CLEF_OK);
    if (st || !tok)
        return test_summary();

    char **requests = calloc(n, sizeof *requests), **alone = calloc(n, sizeof *alone);
    for (size_t i = 0; i < n; i++) {
        const json_value *rec = json_array_at(records, i);
        const char *name = json_get_string(json_object_get(rec, "name"));
        requests[i] = render_compact(json_object_get(rec, "request"));
        encode_check_ids(tok, name, requests[i], (int32_t)max_length, json_object_get(rec, "ids"),
                         NULL);

        clef_result *r = NULL;
        int64_t truncated = 0;
        json_get_int64(json_object_get(rec, "truncated_tokens"), &truncated);
        st = clef_model_decide_result(model, requests[i], strlen(requests[i]), &r);
        CHECK_MSG(st == CLEF_OK, "%s: decide_result: %s", name, clef_last_error());
        if (!st) {
            check_numbers(name, r, json_object_get(rec, "logits"), json_object_get(rec, "probs"));
            check_presented_order(name, r);
            CHECK_EQ_INT(r->truncated_tokens, truncated);
        }
        clef_result_free(r);

        st = clef_model_decide(model, requests[i], strlen(requests[i]), &alone[i]);
        CHECK_MSG(st == CLEF_OK, "%s: decide: %s", name, clef_last_error());
        char *want = render_compact(json_object_get(rec, "answer"));
        const char *tail = "\"output_tokens\":0}}";
        size_t wl = want ? strlen(want) : 0;
        if (truncated && wl > strlen(tail) && !strcmp(want + wl - strlen(tail), tail)) {
            char *with = malloc(wl + 64);
            snprintf(with, wl + 64, "%.*s\"output_tokens\":0,\"truncated_tokens\":%lld}}",
                     (int)(wl - strlen(tail)), want, (long long)truncated);
            free(want);
            want = with;
        }
        CHECK_MSG(alone[i] && want && !strcmp(alone[i], want), "%s: answer differs\n ours:   %s\n oracle: %s",
                  name, alone[i] ? alone[i] : "(none)", want ? want : "(none)");
        free(want);
    }

    /* the same records in one batch, in a mixed order: the same bytes as alone */
    const char **batch = calloc(n, sizeof *batch);
    size_t *lens = calloc(n, sizeof *lens);
    char **responses = calloc(n, sizeof *responses);
    int *statuses = calloc(n, sizeof *statuses);
    for (size_t i = 0; i < n; i++) {
        size_t k = (i * 3 + 1) % n; /* n is not a multiple of 3: a permutation */
        batch[i] = requests[k];
        lens[i] = strlen(requests[k]);
    }
    CHECK_EQ_INT(clef_model_decide_batch(model, n, batch, lens, responses, statuses, NULL), CLEF_OK);
    for (size_t i = 0; i < n; i++) {
        size_t k = (i * 3 + 1) % n;
        CHECK_MSG(statuses[i] == CLEF_OK && responses[i] && alone[k] &&
                      !strcmp(responses[i], alone[k]),
                  "batch position %zu (record %zu) differs from the record alone", i, k);
        clef_string_free(responses[i]);
    }

    /* a refused record inside a batch fails alone; its neighbours (packed into one forward
     * around it) still get exactly their answers */
    {
        const char *no_questions = "{\"state\":1,\"questions\":{}}";
        const char *mixed[4] = {requests[0], "{\"state\":", no_questions, requests[n - 1]};
        size_t mixed_lens[4] = {strlen(requests[0]), 9, strlen(no_questions), strlen(requests[n - 1])};
        char *mixed_out[4] = {NULL, NULL, NULL, NULL}, *mixed_msg[4] = {NULL, NULL, NULL, NULL};
        int mixed_st[4] = {0, 0, 0, 0};
        CHECK_EQ_INT(clef_model_decide_batch(model, 4, mixed, mixed_lens, mixed_out, mixed_st, mixed_msg),
                     CLEF_ERR_REQUEST_JSON);
        CHECK_EQ_INT(mixed_st[0], CLEF_OK);
        CHECK_EQ_INT(mixed_st[1], CLEF_ERR_REQUEST_JSON);
        CHECK_EQ_INT(mixed_st[2], CLEF_ERR_REQUEST_INVALID);
        CHECK_EQ_INT(mixed_st[3], CLEF_OK);
        CHECK(mixed_out[1] == NULL && mixed_out[2] == NULL);
        /* each refused record keeps its own message, not only the last failure's */
        CHECK(mixed_msg[0] == NULL && mixed_msg[3] == NULL);
        CHECK_MSG(mixed_msg[1] && mixed_msg[2] && strcmp(mixed_msg[1], mixed_msg[2]) != 0 &&
                      strstr(mixed_msg[2], "questions") != NULL,
                  "per-record messages: [1] %s | [2] %s", mixed_msg[1] ? mixed_msg[1] : "(none)",
                  mixed_msg[2] ? mixed_msg[2] : "(none)");
        CHECK_MSG(mixed_msg[1] && strcmp(mixed_msg[1], clef_last_error()) != 0,
                  "record 1's message was overwritten by the last failure: %s", mixed_msg[1] ? mixed_msg[1] : "(none)");
        CHECK(mixed_out[0] && alone[0] && !strcmp(mixed_out[0], alone[0]));
        CHECK(mixed_out[3] && alone[n - 1] && !strcmp(mixed_out[3], alone[n - 1]));
        for (int i = 0; i < 4; i++) {
            clef_string_free(mixed_out[i]);
            clef_string_free(mixed_msg[i]);
        }
    }

    /* refusals: the status, and the whole message (field named, what is allowed, where);
     * clef_request_check (no model) gives the same status and message as decide */
    static const struct {
        const char *body;
        int status;
        const char *message;
    } refusals[] = {
        {"{\"state\":", CLEF_ERR_REQUEST_JSON,
         "request body: JSON decode error at line 1 column 10 (byte 9): unexpected end of input (1 problem)"},
        {"\xEF\xBB\xBF{\"state\":1}", CLEF_ERR_REQUEST_JSON,
         "request body: JSON decode error at line 1 column 1 (byte 0): the text starts with a UTF-8 "
         "byte order mark (BOM, bytes EF BB BF), which JSON does not allow: save it without the BOM (1 problem)"},
        {"{\"state\":1,\"questions\":{}}", CLEF_ERR_REQUEST_INVALID,
         "request body.questions: a request needs 1 to 64 questions, got 0 (1 problem)"},
        {"{\"state\":1,\"questions\":{\"q\":{\"type\":\"maybe\"}}}", CLEF_ERR_REQUEST_INVALID,
         "request body.questions.q.type: Input should be 'noul', 'choice' or 'score' (1 problem)"},
        {"{\"state\":1,\"questions\":{\"q\":{\"type\":\"choice\",\"criteria\":{\"a\":\"x\",\"a\":\"y\"}}}}",
         CLEF_ERR_REQUEST_INVALID,
         "request body.questions.q.criteria: a choice question needs 2 to 255 options, got 1 (1 problem); "
         "note: key \"a\" appears twice in one object (line 1 column 66); as in Python's json.loads the "
         "last value is kept"},
    };
    char *out = NULL;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const char *body = refusals[i].body;
        CHECK_EQ_INT(clef_model_decide(model, body, strlen(body), &out), refusals[i].status);
        CHECK(out == NULL);
        CHECK_EQ_STR(clef_last_error(), refusals[i].message);
        CHECK_EQ_INT(clef_request_check(body, strlen(body)), refusals[i].status);
        CHECK_EQ_STR(clef_last_error(), refusals[i].message);
    }
    clef_model_free(model);

    /* the long record under the refuse policy */
    mp.truncation = CLEF_TRUNCATION_REFUSE;
    CHECK_EQ_INT(clef_model_load(release, &mp, &model), CLEF_OK);
    const char *long_request = requests[n - 1]; /* truncated_state */
    CHECK_EQ_INT(clef_model_decide(model, long_request, strlen(long_request), &out),
                 CLEF_ERR_REQUEST_TOO_LONG);
    clef_model_free(model);

    /* bad arguments */
    clef_model_params bad = mp;
    bad.n_threads = -1;
    CHECK_EQ_INT(clef_model_load(release, &bad, &model), CLEF_ERR_INVALID_ARG);
    CHECK(model == NULL);
    CHECK_EQ_INT(clef_model_load(release, &mp, NULL), CLEF_ERR_INVALID_ARG);
    bad = mp;
    bad.backend = "tpu";
    CHECK_EQ_INT(clef_model_load(release, &bad, &model), CLEF_ERR_UNSUPPORTED);
    CHECK(model == NULL);
    CHECK_MSG(strstr(clef_last_error(), "'tpu'") && strstr(clef_last_error(), "known: cpu"),
              "unknown backend message: %s", clef_last_error());
    bad.backend = "cpu";
    CHECK_EQ_INT(clef_model_load(release, &bad, &model), CLEF_OK);
    clef_model_free(model);
    model = NULL;
    CHECK_EQ_INT(clef_model_decide(NULL, "{}", 2, &out), CLEF_ERR_INVALID_ARG);
    clef_model_free(NULL);
    clef_result_free(NULL);
    clef_string_free(NULL);

    /* quantized releases load and decide too: tests/quant/test_quant_decide.c holds them to
     * the libraries (bitsandbytes, compressed-tensors, comfy-kitchen) on 200 records */

    /* a release that is not there */
    CHECK_EQ_INT(clef_model_load("tests/model/no-such-release", &mp, &model) < 0, 1);
    CHECK(model == NULL);

    for (size_t i = 0; i < n; i++) {
        free(requests[i]);
        clef_string_free(alone[i]);
    }
    free(requests);
    free(alone);
    free(batch);
    free(lens);
    free(responses);
    free(statuses);
    tok_free(tok);
    json_doc_free(doc);
    free(text);
    return test_summary();
}
