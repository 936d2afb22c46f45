/*
 * metrics.h — the counters `clef serve` exposes on GET /metrics, in the Prometheus text
 * exposition format (version 0.0.4).
 *
 * What is counted: requests by route and HTTP status, request latency per route (histogram,
 * seconds), scheduler queue depth (gauge), batch sizes (histogram, requests per forward
 * batch), prompt tokens decided (counter) and the rate of the last batch (gauge, tokens/s),
 * requests dropped before their forward (client gone, timed out in the queue), and the
 * process's resident memory (read from /proc/self/statm when rendered).
 *
 * Thread safety: every function may be called from any thread; one mutex guards the numbers
 * (updates are a few additions, far from the hot path of a forward).
 */
#ifndef CLEF_SERVER_METRICS_H
#define CLEF_SERVER_METRICS_H

#include "core/strbuf.h"

#include <stddef.h>
#include <stdint.h>

/* The routes requests are counted by (a fixed set keeps labels bounded whatever the URL). */
typedef enum server_route {
    SERVER_ROUTE_SYSTEMONE = 0, /* POST /v1/systemone */
    SERVER_ROUTE_WORKERS_AI,    /* POST .../ai/run/@cf/cloudflare/<model> */
    SERVER_ROUTE_MODELS,        /* GET /v1/models */
    SERVER_ROUTE_HEALTH,        /* GET /health */
    SERVER_ROUTE_METRICS,       /* GET /metrics */
    SERVER_ROUTE_OPENAPI,       /* GET /openapi.json */
    SERVER_ROUTE_OTHER,         /* anything else (404, 405) */
    SERVER_ROUTE_COUNT
} server_route;

const char *server_route_label(server_route route); /* "systemone", ...; static */

typedef struct server_metrics server_metrics;

int server_metrics_create(server_metrics **out); /* CLEF_OK or CLEF_ERR_OUT_OF_MEMORY */
void server_metrics_free(server_metrics *m);     /* accepts NULL */

/* One finished request: its route, HTTP status (100..599) and latency in seconds. */
void server_metrics_request(server_metrics *m, server_route route, int status, double seconds);
/* One forward batch: n requests, their prompt tokens together, and its wall time. */
void server_metrics_batch(server_metrics *m, size_t n_requests, int64_t n_tokens, double seconds);
/* A queued request dropped before its forward: reason "client_gone" or "timeout". */
void server_metrics_dropped(server_metrics *m, const char *reason);
void server_metrics_queue_depth(server_metrics *m, size_t depth);
/* One decision request accepted into the scheduler's queue (it will be answered). */
void server_metrics_accepted(server_metrics *m);

/* Append the whole exposition text. Returns CLEF_OK or CLEF_ERR_OUT_OF_MEMORY. */
int server_metrics_render(server_metrics *m, clef_strbuf *out);

#endif /* CLEF_SERVER_METRICS_H */
