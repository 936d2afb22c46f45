/*
 * answers.c — SystemOne answers from per-option probabilities (see answers.h).
 *
 * Python's round(x, 4) is dtoa mode 3 (correctly rounded to 4 decimals, half-even on the
 * exact binary value) followed by strtod. glibc's printf("%.4f") is exact in the same
 * sense (it rounds the exact binary expansion in the current rounding mode, which is
 * to-nearest-even), and strtod is correctly rounded, so round = strtod(printf("%.*f")).
 */
#include "encode/answers.h"

#include "core/error.h"
#include "json/render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double clef_python_round(double x, int ndigits) {
    CLEF_ASSERT(ndigits >= 0 && ndigits <= 17);
    if (!isfinite(x) || x == 0)
        return x;
    char buf[400]; /* "%.17f" of the largest double: 309 digits + 18 */
    snprintf(buf, sizeof buf, "%.*f", ndigits, x);
    return strtod(buf, NULL);
}

/* Append repr(round(x, 4)). For |x| < 1e11 the shortest repr of the rounded double is the
 * "%.4f" text itself without trailing zeros (keeping one decimal): that text reads back to
 * it by construction, and any shorter decimal is at least 1e-4 away, far beyond an ulp. So
 * one printf replaces the round-then-shortest-search; larger values take the general path. */
static void append_rounded(clef_strbuf *out, double x) {
    char buf[400];
    if (isfinite(x) && fabs(x) < 1e11) {
        int n = snprintf(buf, sizeof buf, "%.4f", x);
        while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.')
            n--;
        clef_strbuf_append(out, buf, (size_t)n);
        return;
    }
    json_format_double(clef_python_round(x, 4), buf);
    clef_strbuf_append_str(out, buf);
}

static int check_probabilities(const clef_question *q, const double *probs) {
    for (int32_t i = 0; i < q->n_options; i++)
        if (!isfinite(probs[i]))
            return clef_fail(CLEF_ERR_INTERNAL,
                             "the model computed a non-finite probability (%g) for option '%s' of "
                             "question '%s': not a problem of the record (weights or numerics; "
                             "`clef inspect --verify` scans the weights)",
                             probs[i], q->options[i].id, q->id);
    return CLEF_OK;
}

/* Probability of the option at request position k. */
static double request_prob(const clef_question *q, const double *probs, int32_t k) {
    return probs[q->request_to_presented[k]];
}

static void render_choice(const clef_question *q, const double *probs, clef_strbuf *out) {
    /* max(options, key=p): the first option of the request with the largest p. */
    int32_t best = 0;
    for (int32_t k = 1; k < q->n_options; k++)
        if (request_prob(q, probs, k) > request_prob(q, probs, best))
            best = k;
    const clef_option *chosen = &q->options[q->request_to_presented[best]];
    clef_strbuf_append_str(out, "{\"type\":\"choice\",\"choice\":");
    json_render_string(chosen->id, chosen->id_len, out);
    clef_strbuf_append_str(out, ",\"confidence\":");
    append_rounded(out, request_prob(q, probs, best));
    clef_strbuf_append_str(out, ",\"probabilities\":{");
    for (int32_t k = 0; k < q->n_options; k++) {
        const clef_option *o = &q->options[q->request_to_presented[k]];
        if (k)
            clef_strbuf_append_char(out, ',');
        json_render_string(o->id, o->id_len, out);
        clef_strbuf_append_char(out, ':');
        append_rounded(out, request_prob(q, probs, k));
    }
    clef_strbuf_append_str(out, "}}");
}

static int render_score(const clef_question *q, const double *probs, clef_strbuf *out) {
    /* Python 3.11: sum() starts from int 0, 0 + 0*p0 is the float 0.0, then plain adds. */
    double expectation = 0.0 + 0.0 * probs[0];
    double confidence = probs[0];
    for (int32_t i = 1; i < q->n_options; i++) {
        expectation += (double)i * probs[i];
        if (probs[i] > confidence)
            confidence = probs[i];
    }
    clef_strbuf_append_str(out, "{\"type\":\"score\",\"score\":");
    append_rounded(out, expectation);
    clef_strbuf_append_str(out, ",\"confidence\":");
    append_rounded(out, confidence);
    clef_strbuf_append_str(out, ",\"legend\":{");
    const json_render_opts as_sent = {.sort_keys = 0, .allow_nonfinite = 0};
    for (int32_t i = 0; i < q->n_options; i++) {
        if (i)
            clef_strbuf_append_char(out, ',');
        clef_strbuf_appendf(out, "\"%d\":", (int)i);
        /* the level as sent (null stays null), like dict(zip(levels, criteria)) */
        const json_value *level = q->criteria->u.arr.items[i];
        int status = json_render(level, &as_sent, out);
        if (status != CLEF_OK)
            return status;
    }
    clef_strbuf_append_str(out, "},\"probabilities\":{");
    for (int32_t i = 0; i < q->n_options; i++) {
        if (i)
            clef_strbuf_append_char(out, ',');
        clef_strbuf_appendf(out, "\"%d\":", (int)i);
        append_rounded(out, probs[i]);
    }
    clef_strbuf_append_str(out, "}}");
    return CLEF_OK;
}

int clef_answer_render(const clef_question *q, const double *probs, clef_strbuf *out) {
    CLEF_ASSERT(q && probs && out);
    int status = check_probabilities(q, probs);
    if (status != CLEF_OK)
        return status;
    switch (q->type) {
    case CLEF_QUESTION_NOUL:
        clef_strbuf_append_str(out, "{\"type\":\"noul\",\"noul\":");
        append_rounded(out, probs[0]); /* options are presented as true, false */
        clef_strbuf_append_char(out, '}');
        break;
    case CLEF_QUESTION_CHOICE: render_choice(q, probs, out); break;
    case CLEF_QUESTION_SCORE:
        status = render_score(q, probs, out);
        if (status != CLEF_OK)
            return status;
        break;
    }
    return clef_strbuf_status(out);
}

int clef_answers_render(const clef_request *request, const clef_encoded_record *encoded,
                        const double *probs, size_t n_probs, const char *model_echo,
                        clef_strbuf *out) {
    CLEF_ASSERT(request && encoded && out && (probs || n_probs == 0));
    size_t expected = 0;
    for (int32_t i = 0; i < request->n_questions; i++)
        expected += (size_t)request->questions[i].n_options;
    if (n_probs != expected)
        return clef_fail(CLEF_ERR_INVALID_ARG,
                         "answers: got %zu probabilities for %d questions with %zu options in all",
                         n_probs, (int)request->n_questions, expected);
    if (!model_echo)
        model_echo = request->model;
    clef_strbuf_append_str(out, "{\"model\":");
    if (model_echo)
        json_render_string(model_echo, strlen(model_echo), out);
    else
        clef_strbuf_append_str(out, "null");
    clef_strbuf_append_str(out, ",\"answers\":{");
    size_t offset = 0;
    for (int32_t i = 0; i < request->n_questions; i++) {
        const clef_question *q = &request->questions[i];
        if (i)
            clef_strbuf_append_char(out, ',');
        json_render_string(q->id, q->id_len, out);
        clef_strbuf_append_char(out, ':');
        int status = clef_answer_render(q, probs + offset, out);
        if (status != CLEF_OK)
            return status;
        offset += (size_t)q->n_options;
    }
    clef_strbuf_appendf(out, "},\"usage\":{\"input_tokens\":%d,\"output_tokens\":0",
                        (int)encoded->n_tokens);
    if (encoded->truncated_tokens > 0)
        clef_strbuf_appendf(out, ",\"truncated_tokens\":%d", (int)encoded->truncated_tokens);
    /* the processed size of each image / video and the placeholder tokens it became */
    int64_t vision_tokens = 0;
    if (encoded->n_images > 0 && encoded->image_usage) {
        clef_strbuf_append_str(out, ",\"images\":[");
        for (int32_t i = 0; i < encoded->n_images; i++) {
            const int32_t *u = encoded->image_usage + 3 * i;
            clef_strbuf_appendf(out, "%s{\"width\":%d,\"height\":%d,\"vision_tokens\":%d}",
                                i ? "," : "", (int)u[0], (int)u[1], (int)u[2]);
            vision_tokens += u[2];
        }
        clef_strbuf_append_char(out, ']');
    }
    if (encoded->n_videos > 0 && encoded->video_usage) {
        clef_strbuf_append_str(out, ",\"videos\":[");
        for (int32_t i = 0; i < encoded->n_videos; i++) {
            const int32_t *u = encoded->video_usage + 4 * i;
            clef_strbuf_appendf(out, "%s{\"width\":%d,\"height\":%d,\"frames\":%d,"
                                "\"vision_tokens\":%d}", i ? "," : "", (int)u[0], (int)u[1],
                                (int)u[2], (int)u[3]);
            vision_tokens += u[3];
        }
        clef_strbuf_append_char(out, ']');
    }
    if ((encoded->n_images > 0 && encoded->image_usage) ||
        (encoded->n_videos > 0 && encoded->video_usage))
        clef_strbuf_appendf(out, ",\"vision_tokens\":%lld", (long long)vision_tokens);
    clef_strbuf_append_str(out, "}}");
    return clef_strbuf_status(out);
}

int clef_answers_render_workers_ai(const clef_request *request, const clef_encoded_record *encoded,
                                   const double *probs, size_t n_probs, const char *model_echo,
                                   clef_strbuf *out) {
    clef_strbuf_append_str(out, "{\"result\":");
    int status = clef_answers_render(request, encoded, probs, n_probs, model_echo, out);
    if (status != CLEF_OK)
        return status;
    clef_strbuf_append_str(out, ",\"success\":true,\"errors\":[],\"messages\":[]}");
    return clef_strbuf_status(out);
}
