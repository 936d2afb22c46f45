/*
 * engine.h — the engine facade in steps: what clef_model_decide does, cut where a scheduler
 * (the HTTP server, a batching client) needs to cut it.
 *
 *   clef_engine_prepare   parse + validate + encode one request, and read the lm_head rows
 *                         its options need (file reads happen here, on the caller's thread,
 *                         outside any lock). Needs only the model: any thread, any time.
 *   clef_engine_run       ONE packed backbone forward over several prepared records, then
 *                         the head for each, on a context (its workspace and backend fork).
 *                         One call at a time per context; contexts run concurrently.
 *   clef_engine_render    the SystemOne answer body of a record that ran (or
 *                         clef_engine_result for the raw numbers). Any thread.
 *
 * A record gets the same bits alone or packed with any others (backend.h: row-wise ops, and
 * token-mixing ops that respect sequence offsets).
 */
#ifndef CLEF_ENGINE_ENGINE_H
#define CLEF_ENGINE_ENGINE_H

#include "clef.h"
#include "encode/request.h"

#include <stddef.h>
#include <stdint.h>

typedef struct clef_prepared clef_prepared;

/* Parse, validate and encode body[0..len) as a request of the given kind (path_model: the
 * model named by a Workers AI route, else NULL), and read the lm_head rows of its option
 * tokens. errors (may be NULL) receives every field error of a refused body (free with
 * clef_request_errors_free). On success *out is owned by the caller (clef_prepared_free).
 * Failure: the statuses of clef_model_decide; *out NULL, clef_last_error() says why. */
int clef_engine_prepare(const clef_model *model, clef_request_kind kind, const char *path_model,
                        const char *body, size_t len, clef_request_errors *errors,
                        clef_prepared **out);
void clef_prepared_free(clef_prepared *p); /* accepts NULL */

/* Prompt tokens of a prepared record: what it takes of a run's clef_context_max_tokens. */
int64_t clef_prepared_tokens(const clef_prepared *p);

/* Run recs[0..n) (prepared on ctx's model; tokens together <= clef_context_max_tokens) in one
 * packed forward, then the head per record. statuses[i] is set for every record: the forward's
 * status for all when it fails, else the head's for each; messages (may be NULL) gets a copy
 * of each failed record's message (clef_string_free; NULL where it succeeded). Returns
 * CLEF_OK or the first failure. */
int clef_engine_run(clef_context *ctx, clef_prepared *const *recs, size_t n, int *statuses,
                    char **messages);

/* A copy of this thread's clef_last_error() (NULL when out of memory): how a batch keeps
 * every record's message. Free with clef_string_free. */
char *clef_engine_error_copy(void);

/* The SystemOne response body of a record that ran (owned by the caller: clef_string_free),
 * or its raw result (clef_result_free). The model names the answer when the request did not. */
int clef_engine_render(const clef_model *model, const clef_prepared *p, char **response_json);
int clef_engine_result(const clef_prepared *p, clef_result **out);

#endif /* CLEF_ENGINE_ENGINE_H */
