/*
 * render.c — the last step of a decision (engine.h): a record that ran, as the SystemOne
 * response body (clef_answers_render: Python json.dumps bytes) or as the raw numbers of
 * clef_result. Pure host work on the record; any thread.
 */
#include "engine/engine_internal.h"
#include "engine/engine.h"

#include "core/error.h"
#include "core/strbuf.h"
#include "encode/answers.h"

#include <stdlib.h>
#include <string.h>

int clef_engine_render(const clef_model *m, const clef_prepared *p, char **response) {
    if (!response)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_render: response is NULL");
    *response = NULL;
    if (!m || !p)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_render: NULL argument");
    clef_strbuf out = {0};
    const char *model = p->request->model ? p->request->model : m->name;
    int st = clef_answers_render(p->request, &p->encoded, p->probs_d, (size_t)p->n_options, model,
                                 &out);
    if (!st)
        st = clef_strbuf_status(&out);
    if (!st)
        *response = clef_strbuf_take(&out, NULL);
    clef_strbuf_free(&out);
    return st;
}

/* ---- the raw result ----------------------------------------------------------------------- */

/* One allocation holds the result, its questions, option id pointers and numbers; the
 * strings point into a copy kept in `strings`. */
typedef struct result_block {
    clef_result result;
    clef_question_result *questions;
    const char **option_ids;
    float *numbers;                 /* logits then probabilities */
    char *strings;
} result_block;

int clef_engine_result(const clef_prepared *p, clef_result **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_result: out is NULL");
    *out = NULL;
    if (!p)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_result: record is NULL");
    const clef_prepared d = *p; /* the numbers are copied out; p stays the caller's */
    const clef_request *r = d.request;
    size_t text = 0;
    for (int32_t q = 0; q < r->n_questions; q++) {
        text += r->questions[q].id_len + 1 + strlen(r->questions[q].type_name) + 1;
        for (int32_t o = 0; o < r->questions[q].n_options; o++)
            text += r->questions[q].options[o].id_len + 1;
    }
    result_block *b = calloc(1, sizeof *b);
    if (b) {
        b->questions = calloc((size_t)r->n_questions, sizeof *b->questions);
        b->option_ids = calloc((size_t)d.n_options, sizeof *b->option_ids);
        b->numbers = malloc(2 * (size_t)d.n_options * sizeof(float));
        b->strings = malloc(text);
    }
    if (!b || !b->questions || !b->option_ids || !b->numbers || !b->strings) {
        if (b) {
            free(b->questions);
            free(b->option_ids);
            free(b->numbers);
            free(b->strings);
        }
        free(b);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide_result: out of memory");
    }
    memcpy(b->numbers, d.logits, (size_t)d.n_options * sizeof(float));
    memcpy(b->numbers + d.n_options, d.probs, (size_t)d.n_options * sizeof(float));
    char *s = b->strings;
    int64_t k = 0;
    for (int32_t q = 0; q < r->n_questions; q++) {
        const clef_question *rq = &r->questions[q];
        clef_question_result *qr = &b->questions[q];
        memcpy(s, rq->id, rq->id_len + 1);
        qr->id = s;
        s += rq->id_len + 1;
        size_t tl = strlen(rq->type_name) + 1;
        memcpy(s, rq->type_name, tl);
        qr->type = s;
        s += tl;
        qr->n_options = rq->n_options;
        qr->option_ids = b->option_ids + k;
        qr->logits = b->numbers + k;
        qr->probabilities = b->numbers + d.n_options + k;
        for (int32_t o = 0; o < rq->n_options; o++, k++) {
            memcpy(s, rq->options[o].id, rq->options[o].id_len + 1);
            b->option_ids[k] = s;
            s += rq->options[o].id_len + 1;
        }
    }
    b->result = (clef_result){.n_questions = r->n_questions, .questions = b->questions,
                              .input_tokens = d.encoded.n_tokens,
                              .truncated_tokens = d.encoded.truncated_tokens};
    *out = &b->result;
    return CLEF_OK;
}

void clef_result_free(clef_result *result) {
    if (!result)
        return;
    result_block *b = (result_block *)result; /* result is the block's first member */
    free(b->questions);
    free(b->option_ids);
    free(b->numbers);
    free(b->strings);
    free(b);
}

void clef_string_free(char *s) { free(s); }

