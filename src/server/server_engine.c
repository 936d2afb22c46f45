/*
 * server_engine.c — the engine steps of `clef serve` on the public API (see server_engine.h):
 * one loaded model with n clef_contexts (each its own workspace; they decide concurrently),
 * the release's tokenizer for prepare, and the reply shapes of the two API surfaces.
 */
#include "server/server_engine.h"

#include "core/error.h"
#include "core/strbuf.h"
#include "encode/encode.h"
#include "engine/engine_internal.h"
#include "json/render.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

struct server_engine {
    server_engine_params params;
    char *name;
    tok_tokenizer *tokenizer;      /* prepare's token count (the models hold their own) */
    clef_model *model;             /* weights, once */
    clef_context **contexts;       /* [n_contexts] */
    int32_t n_contexts;
    int32_t max_length;
};

void server_reply_free(server_reply *reply) {
    if (!reply)
        return;
    free(reply->body);
    memset(reply, 0, sizeof *reply);
}

static int reply_take(server_reply *reply, int http_status, clef_strbuf *b) {
    int st = clef_strbuf_status(b);
    if (st) {
        clef_strbuf_free(b);
        return st;
    }
    reply->status = http_status;
    reply->body = clef_strbuf_take(b, &reply->len);
    return CLEF_OK;
}

int server_reply_error(server_reply *reply, clef_request_kind kind, int http_status,
                       const char *type, const char *msg) {
    memset(reply, 0, sizeof *reply);
    clef_strbuf b = {0};
    if (kind == CLEF_REQUEST_WORKERS_AI) {
        /* Cloudflare's codes: 3006 request too large, 10000 authentication, 7000 no route,
         * 3040 capacity, 5006 invalid input. */
        int code = http_status == 413   ? 3006
                   : http_status == 401 ? 10000
                   : http_status == 404 ? 7000
                   : http_status == 405 ? 7001
                   : http_status >= 500 || http_status == 429 ? 3040
                                                              : 5006;
        clef_strbuf_appendf(&b, "{\"success\":false,\"result\":{},\"errors\":[{\"code\":%d,"
                                "\"message\":", code);
        json_render_string(msg, strlen(msg), &b);
        clef_strbuf_append_str(&b, "}],\"messages\":[]}");
    } else {
        clef_strbuf_append_str(&b, http_status == 401 ? "{\"detail\":[{\"loc\":[\"header\",\"authorization\"],\"msg\":"
                                                      : "{\"detail\":[{\"loc\":[\"body\"],\"msg\":");
        json_render_string(msg, strlen(msg), &b);
        clef_strbuf_append_str(&b, ",\"type\":");
        json_render_string(type, strlen(type), &b);
        clef_strbuf_append_str(&b, "}]}");
    }
    return reply_take(reply, http_status, &b);
}

/* ---- load --------------------------------------------------------------------------------- */

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int server_engine_load(const server_engine_params *params, server_engine **out) {
    *out = NULL;
    server_engine *e = calloc(1, sizeof *e);
    if (!e)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory loading the server engine");
    e->params = *params;
    e->n_contexts = params->n_contexts > 0 ? params->n_contexts : 1;
    e->max_length = params->max_length > 0 ? params->max_length : CLEF_DEFAULT_MAX_LENGTH;
    int st = CLEF_OK;
    e->contexts = calloc((size_t)e->n_contexts, sizeof *e->contexts);
    if (!e->contexts) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory loading the server engine");
        goto err;
    }
    clef_model_params mp = clef_model_default_params();
    mp.n_threads = params->n_threads;
    mp.max_length = e->max_length;
    mp.max_questions = params->limits.max_questions;
    mp.truncation = params->truncation;
    mp.device = params->device;
    mp.profile = params->profile;
    if ((st = clef_model_load(params->model_dir, &mp, &e->model)))
        goto err;
    for (int32_t i = 0; i < e->n_contexts; i++)
        if ((st = clef_context_create(e->model, NULL, &e->contexts[i])))
            goto err;
    if ((st = tok_load_dir(params->model_dir, &e->tokenizer))) {
        clef_fail_prefix(st, "release '%s'", params->model_dir);
        goto err;
    }
    e->name = dup_str(params->served_name ? params->served_name : clef_model_name(e->model));
    if (!e->name) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory loading the server engine");
        goto err;
    }
    *out = e;
    return CLEF_OK;
err:
    server_engine_free(e);
    return st;
}

void server_engine_free(server_engine *e) {
    if (!e)
        return;
    for (int32_t i = 0; e->contexts && i < e->n_contexts; i++)
        clef_context_free(e->contexts[i]);
    free(e->contexts);
    clef_model_free(e->model); /* after its contexts */
    tok_free(e->tokenizer);
    free(e->name);
    free(e);
}

const char *server_engine_name(const server_engine *e) { return e->name; }
int32_t server_engine_n_contexts(const server_engine *e) { return e->n_contexts; }
int32_t server_engine_max_length(const server_engine *e) { return e->max_length; }

/* ---- prepare ------------------------------------------------------------------------------ */

/* The reply of a request-level failure status (after validation passed, or from a run). */
static int status_reply(server_reply *reply, clef_request_kind kind, int status, const char *msg) {
    switch (status) {
    case CLEF_ERR_REQUEST_TOO_LONG:
        return server_reply_error(reply, kind, 413, "too_long", msg);
    case CLEF_ERR_REQUEST_JSON:
    case CLEF_ERR_REQUEST_INVALID:
    case CLEF_ERR_INVALID_UTF8:
        return server_reply_error(reply, kind, 422, "value_error", msg);
    case CLEF_ERR_UNSUPPORTED:
        return server_reply_error(reply, kind, 422, "unsupported", msg);
    case CLEF_ERR_OUT_OF_MEMORY: {
        int st = server_reply_error(reply, kind, 503, "unavailable", msg);
        reply->retry_after_s = 1;
        return st;
    }
    default:
        return server_reply_error(reply, kind, 500, "internal", msg);
    }
}

int server_engine_prepare(server_engine *e, const char *body, size_t len, clef_request_kind kind,
                          const char *path_model, int64_t *n_tokens, server_reply *error) {
    memset(error, 0, sizeof *error);
    *n_tokens = 0;
    clef_request *req = NULL;
    clef_request_errors errors = {0};
    int st = clef_request_parse(body ? body : "", len, kind, path_model, &e->params.limits, &req,
                                &errors);
    if (st) {
        if (errors.count && errors.http_status) {
            clef_strbuf b = {0};
            if (kind == CLEF_REQUEST_WORKERS_AI)
                clef_request_errors_render_workers_ai(&errors, &b);
            else
                clef_request_errors_render_detail(&errors, &b);
            if (reply_take(error, errors.http_status, &b))
                status_reply(error, kind, CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        } else {
            status_reply(error, kind, st, clef_last_error());
        }
        clef_request_errors_free(&errors);
        return st;
    }
    if (req->n_images || req->n_videos) {
        /* The prompt's length depends on each image's processed size and each video's frames:
         * the engine's own prepare step decodes them (again at run time: admission only needs
         * the count, and keeping the pixels would hold up to 8 MiB of images per queued
         * request). Its refusals (bad media, no vision tower, over the caps) answer here. */
        clef_prepared *p = NULL;
        clef_request_free(req);
        st = clef_engine_prepare(e->model, kind, path_model, body, len, NULL, &p);
        if (st)
            status_reply(error, kind, st, clef_last_error());
        else
            *n_tokens = p->encoded.n_tokens;
        clef_prepared_free(p);
        return st;
    }
    clef_encode_params ep = clef_encode_default_params();
    ep.max_length = e->max_length;
    ep.policy = e->params.truncation == CLEF_TRUNCATION_REFUSE ? CLEF_TRUNCATE_REFUSE
                                                                : CLEF_TRUNCATE_STATE;
    ep.tokenize = clef_tokenize_tok;
    ep.tokenize_ctx = e->tokenizer;
    clef_encoded_record enc;
    memset(&enc, 0, sizeof enc);
    st = clef_record_encode(req, &ep, &enc);
    if (st)
        status_reply(error, kind, st, clef_last_error());
    else
        *n_tokens = enc.n_tokens;
    clef_encoded_record_free(&enc);
    clef_request_free(req);
    return st;
}

/* ---- run and render ----------------------------------------------------------------------- */

void server_engine_run(server_engine *e, int32_t ctx, size_t n, const char *const *bodies,
                       const size_t *lens, char **responses, int *statuses, char **messages) {
    CLEF_ASSERT(ctx >= 0 && ctx < e->n_contexts);
    clef_context_decide_batch(e->contexts[ctx], n, bodies, lens, responses, statuses, messages);
}

int server_engine_render(clef_request_kind kind, int status, const char *message, char **response,
                         server_reply *reply) {
    memset(reply, 0, sizeof *reply);
    if (status != CLEF_OK || !*response)
        return status_reply(reply, kind, status ? status : CLEF_ERR_INTERNAL,
                            message ? message : "the decision failed");
    if (kind != CLEF_REQUEST_WORKERS_AI) {
        reply->status = 200;
        reply->len = strlen(*response);
        reply->body = *response; /* clef_string_free is free() */
        *response = NULL;
        return CLEF_OK;
    }
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "{\"result\":");
    clef_strbuf_append_str(&b, *response);
    clef_strbuf_append_str(&b, ",\"success\":true,\"errors\":[],\"messages\":[]}");
    clef_string_free(*response);
    *response = NULL;
    return reply_take(reply, 200, &b);
}
