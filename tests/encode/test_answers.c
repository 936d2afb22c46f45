/*
 * test_answers.c — answers against the reference systemone_answer() on the committed
 * probability vectors (scripts/encode/gen_answer_cases.py; pass another file to check a
 * larger generated set, as scripts/encode/check_answers.sh does). Each answer must be the
 * bytes of Python's json.dumps of the reference answer; whole response bodies are checked
 * too. Then clef_python_round against named cases, and the refusals (NaN, wrong count).
 */
#include "clef.h"
#include "core/io.h"
#include "encode/answers.h"
#include "encode/request.h"
#include "json/json.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int shown;

static size_t read_probs(const json_value *list, double *out, size_t cap) {
    size_t n = list && list->type == JSON_ARRAY ? list->u.arr.count : 0;
    for (size_t i = 0; i < n && i < cap; i++)
        json_get_double(list->u.arr.items[i], &out[i]);
    return n;
}

static void compare(const char *what, const clef_strbuf *got, const json_value *want, int *ok) {
    const char *w = json_get_string(want);
    if (got->data && w && got->len == want->u.str.len && memcmp(got->data, w, got->len) == 0)
        return;
    *ok = 0;
    if (shown++ < 10)
        fprintf(stderr, "%s differs:\n  got:  %s\n  want: %s\n", what, got->data ? got->data : "(error)",
                w ? w : "(none)");
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/encode/fixtures/answers.jsonl";
    char *data = NULL;
    size_t size = 0;
    CHECK_MSG(clef_read_file(path, (size_t)1 << 30, &data, &size) == CLEF_OK, "%s", clef_last_error());
    size_t vectors = 0, vectors_ok = 0, responses = 0, responses_ok = 0;
    size_t lines = 0, lines_used = 0; /* every fixture line must be compared, none skipped */
    double probs[2048];
    for (char *line = data; data && line < data + size;) {
        char *end = memchr(line, '\n', (size_t)(data + size - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(data + size - line);
        json_doc *doc = NULL;
        if (len == 0 || json_parse(line, len, NULL, &doc, NULL) != 0) {
            CHECK_MSG(len == 0, "%s: a line does not parse", path);
            line += len + 1;
            continue;
        }
        lines++;
        const json_value *root = json_doc_root(doc);
        const json_value *body = json_object_get(root, "body");
        clef_request *req = NULL;
        int status = clef_request_parse(body->u.str.ptr, body->u.str.len, CLEF_REQUEST_RECORD, NULL,
                                        NULL, &req, NULL);
        CHECK_MSG(status == CLEF_OK, "fixture request refused: %s", clef_last_error());
        const json_value *response = json_object_get(root, "response");
        if (status == CLEF_OK && response) {
            size_t n = read_probs(json_object_get(response, "probs"), probs, 2048);
            clef_encoded_record enc;
            memset(&enc, 0, sizeof enc);
            int64_t tokens = 0;
            json_get_int64(json_object_get(response, "input_tokens"), &tokens);
            enc.n_tokens = (int32_t)tokens;
            clef_strbuf out = {0};
            int ok = clef_answers_render(req, &enc, probs, n, NULL, &out) == CLEF_OK;
            compare("response", &out, json_object_get(response, "text"), &ok);
            responses++;
            responses_ok += ok;
            lines_used++;
            clef_strbuf_free(&out);
        } else if (status == CLEF_OK) {
            const json_value *vecs = json_object_get(root, "vectors");
            const json_value *answers = json_object_get(root, "answers");
            lines_used += vecs && answers && vecs->u.arr.count > 0 &&
                          vecs->u.arr.count == answers->u.arr.count;
            for (size_t i = 0; i < vecs->u.arr.count; i++) {
                read_probs(vecs->u.arr.items[i], probs, 2048);
                clef_strbuf out = {0};
                int ok = clef_answer_render(&req->questions[0], probs, &out) == CLEF_OK;
                compare("answer", &out, answers->u.arr.items[i], &ok);
                vectors++;
                vectors_ok += ok;
                clef_strbuf_free(&out);
            }
        }
        clef_request_free(req);
        json_doc_free(doc);
        line += len + 1;
    }
    free(data);
    printf("answers: %zu of %zu probability vectors and %zu of %zu whole responses identical to "
           "the reference\n",
           vectors_ok, vectors, responses_ok, responses);
    CHECK(vectors > 0);
    CHECK(responses > 0);
    CHECK_MSG(lines_used == lines, "%zu of %zu fixture lines were compared", lines_used, lines);
    CHECK_EQ_INT(vectors_ok, vectors);
    CHECK_EQ_INT(responses_ok, responses);

    /* Python: round(0.03125, 4) == 0.0312 (tie, even), round(0.09375, 4) == 0.0938,
     * round(2.675, 2) == 2.67 (2.675 is below the tie in binary), round(-0.0, 4) is -0.0. */
    CHECK(clef_python_round(0.03125, 4) == 0.0312);
    CHECK(clef_python_round(0.09375, 4) == 0.0938);
    CHECK(clef_python_round(2.675, 2) == 2.67);
    CHECK(signbit(clef_python_round(-0.0, 4)));
    CHECK(clef_python_round(0.99995, 4) == 1.0); /* 0.99995 is just above the tie in binary */

    /* Refusals: a NaN probability, and a count that does not match the options. */
    const char *body = "{\"model\":\"clef\",\"state\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}}";
    clef_request *req = NULL;
    CHECK(clef_request_parse(body, strlen(body), CLEF_REQUEST_SYSTEMONE, NULL, NULL, &req, NULL) == CLEF_OK);
    if (req) {
        clef_encoded_record enc;
        memset(&enc, 0, sizeof enc);
        double bad[2] = {NAN, 0.5};
        clef_strbuf out = {0};
        /* A NaN comes from the model, not the record: the message must not blame the record. */
        CHECK_EQ_INT(clef_answers_render(req, &enc, bad, 2, NULL, &out), CLEF_ERR_INTERNAL);
        CHECK_MSG(strstr(clef_last_error(), "not a problem of the record") != NULL, "%s",
                  clef_last_error());
        clef_strbuf_free(&out);
        double good[2] = {0.25, 0.75};
        CHECK_EQ_INT(clef_answers_render(req, &enc, good, 1, NULL, &out), CLEF_ERR_INVALID_ARG);
        clef_strbuf_free(&out);
        enc.n_tokens = 7;
        enc.truncated_tokens = 3;
        CHECK_EQ_INT(clef_answers_render_workers_ai(req, &enc, good, 2, NULL, &out), CLEF_OK);
        CHECK_EQ_STR(out.data, "{\"result\":{\"model\":\"clef\",\"answers\":{\"a\":{\"type\":\"noul\","
                               "\"noul\":0.25}},\"usage\":{\"input_tokens\":7,\"output_tokens\":0,"
                               "\"truncated_tokens\":3}},\"success\":true,\"errors\":[],\"messages\":[]}");
        clef_strbuf_free(&out);
    }
    clef_request_free(req);
    return test_summary();
}
