/*
 * decide.c — the decide functions of include/clef.h, each the three steps of engine.h in a
 * row: prepare (no lock), run (on a context), render. The clef_context_* functions run on the
 * caller's context; the clef_model_* functions are the one-call path and run on the model's
 * default context, created at the first call and shared under default_lock (held for the run
 * step only: parsing, encoding, row reads and rendering happen outside it).
 *
 * A batch is prepared record by record (a refused record fails alone, with its own message),
 * then its accepted records are packed in request order into forwards of at most the
 * context's max_tokens: short records share one backbone pass instead of one pass each.
 */
#include "engine/engine_internal.h"
#include "engine/engine.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* Run records on ctx, or on the model's default context (ctx NULL) under its lock. */
static int run_on(clef_model *m, clef_context *ctx, clef_prepared *const *recs, size_t n,
                  int *statuses, char **messages) {
    if (ctx)
        return clef_engine_run(ctx, recs, n, statuses, messages);
    pthread_mutex_lock(&m->default_lock);
    int st = CLEF_OK;
    if (!m->default_ctx)
        st = clef_context_make(m, NULL, &m->default_ctx);
    if (st) {
        for (size_t i = 0; i < n; i++) {
            statuses[i] = st;
            if (messages)
                messages[i] = clef_engine_error_copy();
        }
    } else {
        st = clef_engine_run(m->default_ctx, recs, n, statuses, messages);
    }
    pthread_mutex_unlock(&m->default_lock);
    return st;
}

/* Prepare and run one record. */
static int decide_one(clef_model *m, clef_context *ctx, const char *body, size_t len,
                      clef_prepared **out) {
    int st = clef_engine_prepare(m, CLEF_REQUEST_RECORD, NULL, body, len, NULL, out);
    if (st)
        return st;
    int run_status = CLEF_OK;
    if ((st = run_on(m, ctx, out, 1, &run_status, NULL))) {
        clef_prepared_free(*out);
        *out = NULL;
    }
    return st;
}

static int decide(clef_model *m, clef_context *ctx, const char *body, size_t len, char **response) {
    if (!response)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide: response is NULL");
    *response = NULL;
    if (!m)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide: NULL model or context");
    clef_prepared *p = NULL;
    int st = decide_one(m, ctx, body, len, &p);
    if (!st)
        st = clef_engine_render(m, p, response);
    clef_prepared_free(p);
    return st;
}

static int decide_result(clef_model *m, clef_context *ctx, const char *body, size_t len,
                         clef_result **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide_result: out is NULL");
    *out = NULL;
    if (!m)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide_result: NULL model or context");
    clef_prepared *p = NULL;
    int st = decide_one(m, ctx, body, len, &p);
    if (!st)
        st = clef_engine_result(p, out);
    clef_prepared_free(p);
    return st;
}

static int decide_batch(clef_model *m, clef_context *ctx, size_t n, const char *const *requests,
                        const size_t *lens, char **responses, int *statuses, char **messages) {
    if (!m || (n && (!requests || !lens || !responses || !statuses)))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide_batch: NULL argument");
    if (n == 0)
        return CLEF_OK;
    /* the forward size: the context's, or the default context's (the model's max_length) */
    const int64_t max_tokens = ctx ? ctx->params.max_tokens : m->params.max_length;
    clef_prepared **all = calloc(n, sizeof *all);
    clef_prepared **group = malloc(n * sizeof *group);
    int *group_st = malloc(n * sizeof *group_st);
    char **group_msg = messages ? malloc(n * sizeof *group_msg) : NULL;
    if (!all || !group || !group_st || (messages && !group_msg)) {
        free(all);
        free(group);
        free(group_st);
        free(group_msg);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide_batch: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        responses[i] = NULL;
        if (messages)
            messages[i] = NULL;
        statuses[i] = clef_engine_prepare(m, CLEF_REQUEST_RECORD, NULL, requests[i], lens[i], NULL,
                                          &all[i]);
        if (statuses[i] && messages)
            messages[i] = clef_engine_error_copy();
    }
    for (size_t i = 0; i < n;) {
        /* the next group: accepted records in order while their tokens fit */
        size_t n_group = 0, j = i;
        int64_t tokens = 0;
        for (; j < n; j++) {
            if (statuses[j])
                continue;
            if (n_group && tokens + all[j]->encoded.n_tokens > max_tokens)
                break;
            tokens += all[j]->encoded.n_tokens;
            group[n_group++] = all[j];
        }
        if (n_group)
            run_on(m, ctx, group, n_group, group_st, group_msg);
        for (size_t k = i, g = 0; k < j; k++) {
            if (statuses[k])
                continue;
            statuses[k] = group_st[g];
            if (messages)
                messages[k] = group_msg[g];
            g++;
            if (!statuses[k]) {
                statuses[k] = clef_engine_render(m, all[k], &responses[k]);
                if (statuses[k] && messages)
                    messages[k] = clef_engine_error_copy();
            }
        }
        i = j;
    }
    int first = CLEF_OK;
    for (size_t i = 0; i < n; i++) {
        if (statuses[i] && !first)
            first = statuses[i];
        clef_prepared_free(all[i]);
    }
    free(all);
    free(group);
    free(group_st);
    free(group_msg);
    return first;
}

int clef_context_decide(clef_context *ctx, const char *request_json, size_t len, char **response) {
    return decide(ctx ? ctx->model : NULL, ctx, request_json, len, response);
}

int clef_context_decide_result(clef_context *ctx, const char *request_json, size_t len,
                               clef_result **out) {
    return decide_result(ctx ? ctx->model : NULL, ctx, request_json, len, out);
}

int clef_context_decide_batch(clef_context *ctx, size_t n, const char *const *requests,
                              const size_t *lens, char **responses, int *statuses,
                              char **messages) {
    return decide_batch(ctx ? ctx->model : NULL, ctx, n, requests, lens, responses, statuses,
                        messages);
}

int clef_model_decide(clef_model *m, const char *request_json, size_t len, char **response) {
    return decide(m, NULL, request_json, len, response);
}

int clef_model_decide_result(clef_model *m, const char *request_json, size_t len,
                             clef_result **out) {
    return decide_result(m, NULL, request_json, len, out);
}

int clef_model_decide_batch(clef_model *m, size_t n, const char *const *requests,
                            const size_t *lens, char **responses, int *statuses,
                            char **messages) {
    return decide_batch(m, NULL, n, requests, lens, responses, statuses, messages);
}
