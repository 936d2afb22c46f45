/*
 * metrics.c — counters for GET /metrics (see metrics.h) and their Prometheus text rendering.
 *
 * Histograms keep cumulative-ready per-bucket counts plus sum and count, as the exposition
 * format wants; statuses are counted in a [route][status] table (600 entries per route), so
 * recording a request never allocates.
 */
#include "server/metrics.h"

#include "clef.h"
#include "core/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_STATUS 600

static const double latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                        0.25,  0.5,    1,     2.5,  5,     10,   30};
#define N_LATENCY (sizeof latency_bounds / sizeof latency_bounds[0])
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define N_BATCH (sizeof batch_bounds / sizeof batch_bounds[0])

typedef struct histogram {
    uint64_t buckets[16]; /* per bucket (not cumulative); the last used slot is +Inf */
    uint64_t count;
    double sum;
} histogram;

struct server_metrics {
    pthread_mutex_t lock;
    uint64_t requests[SERVER_ROUTE_COUNT][N_STATUS];
    histogram latency[SERVER_ROUTE_COUNT];
    histogram batch_size;
    uint64_t tokens_total;
    uint64_t batches_total;
    double forward_seconds_total;
    double last_tokens_per_second;
    uint64_t dropped_client_gone, dropped_timeout;
    uint64_t accepted_total;         /* decision requests taken into the queue */
    size_t queue_depth;
};

const char *server_route_label(server_route route) {
    static const char *const labels[SERVER_ROUTE_COUNT] = {
        "systemone", "workers_ai", "models", "health", "metrics", "openapi", "other"};
    return (unsigned)route < SERVER_ROUTE_COUNT ? labels[route] : "other";
}

int server_metrics_create(server_metrics **out) {
    *out = calloc(1, sizeof **out);
    if (!*out)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory creating the server metrics");
    pthread_mutex_init(&(*out)->lock, NULL);
    return CLEF_OK;
}

void server_metrics_free(server_metrics *m) {
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static void histogram_add(histogram *h, const double *bounds, size_t n_bounds, double v) {
    size_t i = 0;
    while (i < n_bounds && v > bounds[i])
        i++;
    h->buckets[i]++; /* i == n_bounds is the +Inf bucket */
    h->count++;
    h->sum += v;
}

void server_metrics_request(server_metrics *m, server_route route, int status, double seconds) {
    if ((unsigned)route >= SERVER_ROUTE_COUNT)
        route = SERVER_ROUTE_OTHER;
    if (status < 100 || status >= N_STATUS)
        status = 500;
    pthread_mutex_lock(&m->lock);
    m->requests[route][status]++;
    histogram_add(&m->latency[route], latency_bounds, N_LATENCY, seconds);
    pthread_mutex_unlock(&m->lock);
}

void server_metrics_batch(server_metrics *m, size_t n_requests, int64_t n_tokens, double seconds) {
    pthread_mutex_lock(&m->lock);
    histogram_add(&m->batch_size, batch_bounds, N_BATCH, (double)n_requests);
    m->tokens_total += (uint64_t)(n_tokens > 0 ? n_tokens : 0);
    m->batches_total++;
    m->forward_seconds_total += seconds;
    if (seconds > 0)
        m->last_tokens_per_second = (double)n_tokens / seconds;
    pthread_mutex_unlock(&m->lock);
}

void server_metrics_dropped(server_metrics *m, const char *reason) {
    pthread_mutex_lock(&m->lock);
    if (strcmp(reason, "timeout") == 0)
        m->dropped_timeout++;
    else
        m->dropped_client_gone++;
    pthread_mutex_unlock(&m->lock);
}

void server_metrics_accepted(server_metrics *m) {
    pthread_mutex_lock(&m->lock);
    m->accepted_total++;
    pthread_mutex_unlock(&m->lock);
}

void server_metrics_queue_depth(server_metrics *m, size_t depth) {
    pthread_mutex_lock(&m->lock);
    m->queue_depth = depth;
    pthread_mutex_unlock(&m->lock);
}

static void render_histogram(clef_strbuf *out, const char *name, const char *labels,
                             const histogram *h, const double *bounds, size_t n_bounds) {
    uint64_t cumulative = 0;
    const char *sep = labels[0] ? "," : "";
    for (size_t i = 0; i <= n_bounds; i++) {
        cumulative += h->buckets[i];
        if (i < n_bounds)
            clef_strbuf_appendf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[i],
                                (unsigned long long)cumulative);
        else
            clef_strbuf_appendf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                                (unsigned long long)cumulative);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    clef_strbuf_appendf(out, "%s_sum%s%s%s %.9g\n", name, open, labels, close, h->sum);
    clef_strbuf_appendf(out, "%s_count%s%s%s %llu\n", name, open, labels, close,
                        (unsigned long long)h->count);
}

/* Resident set size in bytes from /proc/self/statm (0 where it cannot be read). */
static uint64_t resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? resident * (uint64_t)page : 0;
}

int server_metrics_render(server_metrics *m, clef_strbuf *out) {
    pthread_mutex_lock(&m->lock);
    clef_strbuf_append_str(out, "# HELP clef_http_requests_total HTTP requests answered, by route "
                                "and status.\n# TYPE clef_http_requests_total counter\n");
    for (int r = 0; r < SERVER_ROUTE_COUNT; r++)
        for (int s = 100; s < N_STATUS; s++)
            if (m->requests[r][s])
                clef_strbuf_appendf(out, "clef_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                                    server_route_label((server_route)r), s,
                                    (unsigned long long)m->requests[r][s]);
    clef_strbuf_append_str(out, "# HELP clef_http_request_duration_seconds Time from the request's "
                                "first byte to its answer, by route.\n"
                                "# TYPE clef_http_request_duration_seconds histogram\n");
    for (int r = 0; r < SERVER_ROUTE_COUNT; r++) {
        if (!m->latency[r].count)
            continue;
        char labels[64];
        snprintf(labels, sizeof labels, "route=\"%s\"", server_route_label((server_route)r));
        render_histogram(out, "clef_http_request_duration_seconds", labels, &m->latency[r],
                         latency_bounds, N_LATENCY);
    }
    clef_strbuf_append_str(out, "# HELP clef_batch_size Requests decided together in one batch.\n"
                                "# TYPE clef_batch_size histogram\n");
    render_histogram(out, "clef_batch_size", "", &m->batch_size, batch_bounds, N_BATCH);
    clef_strbuf_appendf(out,
                        "# HELP clef_queue_depth Requests waiting for a context.\n"
                        "# TYPE clef_queue_depth gauge\nclef_queue_depth %zu\n"
                        "# HELP clef_tokens_total Prompt tokens decided.\n"
                        "# TYPE clef_tokens_total counter\nclef_tokens_total %llu\n"
                        "# HELP clef_forward_seconds_total Wall time spent in batches.\n"
                        "# TYPE clef_forward_seconds_total counter\nclef_forward_seconds_total %.9g\n"
                        "# HELP clef_tokens_per_second Prompt tokens per second of the last batch.\n"
                        "# TYPE clef_tokens_per_second gauge\nclef_tokens_per_second %.6g\n"
                        "# HELP clef_requests_dropped_total Queued requests dropped before their "
                        "forward, by reason.\n# TYPE clef_requests_dropped_total counter\n"
                        "clef_requests_dropped_total{reason=\"client_gone\"} %llu\n"
                        "clef_requests_dropped_total{reason=\"timeout\"} %llu\n"
                        "# HELP clef_requests_accepted_total Decision requests taken into the "
                        "queue.\n# TYPE clef_requests_accepted_total counter\n"
                        "clef_requests_accepted_total %llu\n",
                        m->queue_depth, (unsigned long long)m->tokens_total,
                        m->forward_seconds_total, m->last_tokens_per_second,
                        (unsigned long long)m->dropped_client_gone,
                        (unsigned long long)m->dropped_timeout,
                        (unsigned long long)m->accepted_total);
    pthread_mutex_unlock(&m->lock);
    clef_strbuf_appendf(out, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                             "# TYPE process_resident_memory_bytes gauge\n"
                             "process_resident_memory_bytes %llu\n",
                        (unsigned long long)resident_bytes());
    return clef_strbuf_status(out);
}
