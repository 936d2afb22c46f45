/*
 * server_engine.h — what `clef serve` needs from the engine, in three steps, so that the HTTP
 * layer and the scheduler never touch the model directly:
 *
 *   prepare  validate a body for its route (SystemOne, Workers AI), encode it to count its
 *            prompt tokens, and refuse it (422 / 413, in the route's error shape) before it
 *            is queued
 *   run      decide a batch of prepared bodies on one context (one forward slot)
 *   render   turn one result, or its failure, into the HTTP reply of its route
 *
 * The model is loaded once; each context is a clef_context on it (its own workspace, so the
 * contexts decide concurrently), and run goes through clef_context_decide_batch, which parses
 * and encodes each body again. Handing prepare's encoding to run instead of the body (the
 * engine's prepare/run/render steps, src/engine/engine.h, once they are public) changes this
 * file only.
 *
 * Thread safety: prepare and render may run on any thread at once; run may run concurrently
 * for DIFFERENT contexts, never twice at once for one context.
 */
#ifndef CLEF_SERVER_ENGINE_H
#define CLEF_SERVER_ENGINE_H

#include "clef.h"
#include "encode/request.h"

#include <stddef.h>
#include <stdint.h>

typedef struct server_engine_params {
    const char *model_dir;         /* the release directory */
    const char *served_name;       /* the name the server answers to (GET /v1/models, the
                                      Workers AI route); NULL = the release directory's name */
    int32_t n_contexts;            /* concurrent forwards; 0 = 1 */
    int32_t n_threads;             /* CPU threads per context; 0 = all cores */
    int32_t max_length;            /* tokens per record; 0 = 16384 */
    clef_truncation truncation;    /* over max_length: cut the state or refuse (413) */
    clef_request_limits limits;    /* body cap, question/option/level caps, unknown fields */
    const char *device;            /* clef_model_params.device; NULL = "cpu" */
    clef_profile profile;          /* clef_model_params.profile */
} server_engine_params;

typedef struct server_engine server_engine;

/* An HTTP reply: status, body (malloc'd, owned by the reply) and an optional Retry-After. */
typedef struct server_reply {
    int status;
    char *body;
    size_t len;
    int retry_after_s;             /* > 0: send Retry-After with this many seconds */
} server_reply;

void server_reply_free(server_reply *reply); /* accepts NULL; leaves it zeroed */

/* Build a JSON error reply in the shape of kind's route: {"detail":[{"loc":["body"],...}]}
 * for SystemOne, the Workers AI error envelope for Workers AI. type is pydantic-style
 * ("body_too_large", "too_long", "unavailable", ...). Returns CLEF_OK or OOM. */
int server_reply_error(server_reply *reply, clef_request_kind kind, int http_status,
                       const char *type, const char *msg);

/* Load the release once with n_contexts contexts on it, and its tokenizer. On failure *out
 * is NULL and clef_last_error() says why. */
int server_engine_load(const server_engine_params *params, server_engine **out);
void server_engine_free(server_engine *engine); /* accepts NULL */

const char *server_engine_name(const server_engine *engine);      /* lives with the engine */
int32_t server_engine_n_contexts(const server_engine *engine);
int32_t server_engine_max_length(const server_engine *engine);

/* Validate body[0..len) as a request of kind (path_model: the model a Workers AI route names)
 * and count its prompt tokens. Returns CLEF_OK with *n_tokens set, or a negative status with
 * *error filled: 422 (invalid JSON, a field), 413 (body or prompt over its cap). */
int server_engine_prepare(server_engine *engine, const char *body, size_t len,
                          clef_request_kind kind, const char *path_model, int64_t *n_tokens,
                          server_reply *error);

/* Decide n prepared bodies on context ctx (0 <= ctx < n_contexts). responses[i] (SystemOne
 * body), statuses[i] and messages[i] (the record's error message, NULL when it succeeded) are
 * set for every i; free responses and messages with clef_string_free. */
void server_engine_run(server_engine *engine, int32_t ctx, size_t n, const char *const *bodies,
                       const size_t *lens, char **responses, int *statuses, char **messages);

/* The reply of one run result: on status CLEF_OK, 200 with the SystemOne body (taken over:
 * *response becomes NULL) or its Workers AI envelope; else the error (message) in the route's
 * shape. */
int server_engine_render(clef_request_kind kind, int status, const char *message,
                         char **response, server_reply *reply);

#endif /* CLEF_SERVER_ENGINE_H */
