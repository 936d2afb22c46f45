/*
 * clef_server.h — the public header of clef_server (src/server/, its own library beside
 * libclef, linked with libmicrohttpd) — `clef serve`: the SystemOne and Workers AI APIs over HTTP (libmicrohttpd), with
 * bearer-token auth, api.md's limits, a batching scheduler over a pool of contexts, metrics,
 * an OpenAPI description and graceful shutdown. tools/clef/cmd_serve.c is its command line;
 * docs/server.md describes the routes, flags and behaviour for users.
 *
 * Lifecycle: clef_server_start binds the address and answers at once (GET /health is 503
 * and the decision routes 503 with Retry-After until the model is loaded, which happens on a
 * background thread); clef_server_state tells when loading finished or failed;
 * clef_server_shutdown stops accepting connections, finishes the queued requests (for up to
 * the request timeout; the rest get 503), sends every reply and stops. Nothing is dropped
 * without an answer except to a client that hung up.
 *
 * Thread safety: start, state, shutdown and free are called from one controlling thread.
 * Log lines (the access log at INFO, problems at WARN) go through clef_log_set()'s callback.
 */
#ifndef CLEF_SERVER_H
#define CLEF_SERVER_H

#include "clef.h"

#include <stddef.h>
#include <stdint.h>

typedef struct clef_server_params {
    const char *model_dir;       /* release directory (required) */
    const char *served_name;     /* model name to answer to; NULL = the directory's name */
    const char *host;            /* address to bind; NULL = "127.0.0.1" */
    uint16_t port;               /* 0 = any free port (see clef_server_port) */
    const char *token;           /* bearer token; NULL = no auth (loopback only unless
                                    allow_insecure) */
    int allow_insecure;          /* 1: allow a non-loopback host without a token */
    int32_t n_contexts;          /* concurrent forwards; 0 = 1 */
    int32_t n_threads;           /* CPU threads per context; 0 = all cores */
    int32_t max_length;          /* tokens per record; 0 = 16384 */
    clef_truncation truncation;  /* over max_length: truncate (the default) or refuse (413) */
    int64_t max_batch_tokens;    /* prompt tokens per batch; 0 = max_length */
    int32_t max_batch_requests;  /* requests per batch; 0 = 64 */
    int32_t max_queue;           /* queued requests before 429; 0 = 256 */
    size_t max_body_bytes;       /* body cap; 0 = 13 MiB (api.md) */
    double timeout_s;            /* a request's whole life (queue included); 0 = 60 */
    double client_timeout_s;     /* idle or slow client: connection closed after this; 0 = 30 */
    int32_t max_connections;     /* open connections; 0 = 4096 */
    int32_t http_threads;        /* threads reading requests and validating them; 0 = 4 */
    int access_log;              /* 1: one INFO log line per request (clef_log) */
    const char *device;          /* where the model runs (clef_model_params.device: "cpu",
                                    "cuda", "cuda:N"); NULL = "cpu". Each context is its own
                                    fork of the device's backend (its own CUDA stream) */
    clef_profile profile;        /* weight placement (clef_model_params.profile) */
} clef_server_params;

clef_server_params clef_server_default_params(void);

typedef struct clef_server clef_server;

typedef enum clef_server_state {
    CLEF_SERVER_LOADING = 0,
    CLEF_SERVER_READY = 1,
    CLEF_SERVER_FAILED = 2,      /* loading failed: clef_server_error() says why */
} clef_server_state;

/* Check params, bind, start answering and start loading the model. On failure (bad params,
 * address in use, refusing a public address without a token) *out is NULL, the status is
 * negative and clef_last_error() says why. */
int clef_server_start(const clef_server_params *params, clef_server **out);

uint16_t clef_server_port(const clef_server *server);      /* the bound port */
clef_server_state clef_server_get_state(clef_server *server);
const char *clef_server_error(clef_server *server);        /* the load failure, or "" */

/* Graceful stop (see the file comment); returns when every reply is sent. */
void clef_server_shutdown(clef_server *server);
void clef_server_free(clef_server *server);                 /* shuts down first; accepts NULL */

#endif /* CLEF_SERVER_H */
