/*
 * server.c — the HTTP side of `clef serve` on libmicrohttpd: routing, bearer auth, request
 * ids, body collection under the cap, handing prepared requests to the scheduler, replies,
 * the access log, and start/shutdown (see include/clef_server.h).
 *
 * libmicrohttpd runs an epoll loop on a small pool of threads (http_threads); a connection
 * costs no thread, so idle or slow clients cost a socket and a few KiB. A decision request is
 * read and validated on those threads, then its connection is SUSPENDED while it waits in the
 * scheduler, and RESUMED by the job's done() callback, after which libmicrohttpd calls the
 * handler again and the reply is queued.
 *
 * States of one request (request_ctx.phase):
 *   READING   collecting the body (decision routes) or about to answer (others)
 *   WAITING   suspended, its job queued or running; only done() touches it now
 *   REPLY     done() has set job.reply and resumed the connection
 * The connection is always suspended BEFORE the job is submitted, so a job finishing at once
 * can never resume a connection that is not yet suspended.
 */
#include "clef_server.h"

#include "core/error.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "encode/request.h"
#include "json/render.h"
#include "server/metrics.h"
#include "server/openapi.h"
#include "server/scheduler.h"
#include "server/server_engine.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 60.0
#define DEFAULT_CLIENT_TIMEOUT_S 30.0
#define DEFAULT_MAX_CONNECTIONS 4096
#define DEFAULT_HTTP_THREADS 4
#define LOADING_RETRY_AFTER_S 5
#define SHUTDOWN_REPLY_GRACE_S 5.0
#define MAX_REQUEST_ID 64

struct clef_server {
    clef_server_params params;
    char *served_name;             /* params.served_name copied (NULL: the engine's) */
    struct MHD_Daemon *daemon;
    uint16_t port;
    server_metrics *metrics;
    server_engine *engine;         /* set once loading succeeded */
    server_scheduler *scheduler;
    pthread_t loader;
    int loader_started;
    atomic_int state;              /* clef_server_state */
    atomic_int shutting_down;
    atomic_long active;            /* requests between their first byte and their completion */
    atomic_ullong next_id;
    unsigned long long id_seed;
    char load_error[512];
    int shut_down;
};

typedef enum request_phase { PHASE_READING = 0, PHASE_WAITING, PHASE_REPLY } request_phase;

typedef struct request_ctx {
    clef_server *srv;
    struct MHD_Connection *conn;
    double t_start;
    server_route route;
    clef_request_kind kind;
    char path_model[16];           /* "clef" | "clef-flash" of a Workers AI route */
    char request_id[MAX_REQUEST_ID + 1];
    char method[8];
    char path[128];                /* for the access log (cut, non-printables replaced) */
    clef_strbuf body;
    int body_too_large;
    int replied;                   /* a reply was queued */
    int status;                    /* the status replied (for metrics and the log) */
    size_t reply_bytes;
    atomic_int phase;
    server_job job;
} request_ctx;

clef_server_params clef_server_default_params(void) {
    clef_server_params p;
    memset(&p, 0, sizeof p);
    p.truncation = CLEF_TRUNCATION_TRUNCATE;
    p.access_log = 1;
    return p;
}

/* ---- small helpers ------------------------------------------------------------------ */

static int is_loopback_host(const char *host) {
    if (strcmp(host, "localhost") == 0)
        return 1;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* Constant-time comparison of the presented token with ours: the time depends on our token's
 * length only, never on where the first difference is. */
static int token_equal(const char *given, size_t given_len, const char *ours) {
    size_t n = strlen(ours);
    unsigned diff = (unsigned)(given_len != n);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)ours[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
    return diff == 0;
}

static int request_id_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MAX_REQUEST_ID)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == ':'))
            return 0;
    }
    return 1;
}

static void copy_printable(char *dst, size_t cap, const char *src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = (src[i] >= 0x21 && src[i] < 0x7f) ? src[i] : '?';
    dst[i] = 0;
}

/* ---- routing ------------------------------------------------------------------------ */

/* Workers AI: /client/v4/accounts/{account}/ai/run/{model id} or /accounts/{account}/ai/run/...
 * Returns 1 with *model_id pointing into url when it is such a path. */
static int match_workers_ai(const char *url, const char **model_id) {
    const char *p = url;
    if (strncmp(p, "/client/v4", 10) == 0)
        p += 10;
    if (strncmp(p, "/accounts/", 10) != 0)
        return 0;
    p += 10;
    const char *slash = strchr(p, '/');
    if (!slash || slash == p)
        return 0;
    if (strncmp(slash, "/ai/run/", 8) != 0)
        return 0;
    *model_id = slash + 8;
    return 1;
}

/* ---- replies ------------------------------------------------------------------------ */

static enum MHD_Result send_reply(request_ctx *rc, int status, const char *content_type,
                                  char *body, size_t len, int retry_after_s, const char *allow) {
    struct MHD_Response *resp =
        body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", content_type);
    MHD_add_response_header(resp, "x-request-id", rc->request_id);
    if (retry_after_s > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after_s);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (allow)
        MHD_add_response_header(resp, "Allow", allow);
    if (atomic_load(&rc->srv->shutting_down) || rc->body_too_large)
        MHD_add_response_header(resp, "Connection", "close");
    rc->status = status;
    rc->reply_bytes = len;
    rc->replied = 1;
    enum MHD_Result r = MHD_queue_response(rc->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result send_server_reply(request_ctx *rc, server_reply *reply) {
    char *body = reply->body;
    size_t len = reply->len;
    int status = reply->status ? reply->status : 500;
    int retry = reply->retry_after_s;
    reply->body = NULL;
    server_reply_free(reply);
    return send_reply(rc, status, "application/json", body, len, retry, NULL);
}

/* An error in the shape of the request's route (FastAPI detail for SystemOne and the plain
 * routes, the Workers AI envelope for Workers AI). */
static enum MHD_Result send_error(request_ctx *rc, int status, const char *type, const char *msg,
                                  int retry_after_s, const char *allow) {
    server_reply reply;
    if (rc->kind == CLEF_REQUEST_WORKERS_AI || rc->route == SERVER_ROUTE_SYSTEMONE) {
        if (server_reply_error(&reply, rc->kind, status, type, msg) != CLEF_OK)
            return send_reply(rc, status, "application/json", NULL, 0, retry_after_s, allow);
    } else {
        /* plain routes: FastAPI's HTTPException shape {"detail": "..."} */
        clef_strbuf b = {0};
        clef_strbuf_append_str(&b, "{\"detail\":");
        json_render_string(msg, strlen(msg), &b);
        clef_strbuf_append_char(&b, '}');
        memset(&reply, 0, sizeof reply);
        if (clef_strbuf_status(&b) != CLEF_OK) {
            clef_strbuf_free(&b);
            return send_reply(rc, status, "application/json", NULL, 0, retry_after_s, allow);
        }
        reply.status = status;
        reply.body = clef_strbuf_take(&b, &reply.len);
    }
    char *body = reply.body;
    return send_reply(rc, status, "application/json", body, reply.len, retry_after_s, allow);
}

static enum MHD_Result send_text(request_ctx *rc, int status, const char *content_type,
                                 clef_strbuf *b) {
    if (clef_strbuf_status(b) != CLEF_OK) {
        clef_strbuf_free(b);
        return send_error(rc, 503, "unavailable", "out of memory", 1, NULL);
    }
    size_t len;
    char *body = clef_strbuf_take(b, &len);
    return send_reply(rc, status, content_type, body, len, 0, NULL);
}

/* ---- the plain routes --------------------------------------------------------------- */

static enum MHD_Result answer_health(request_ctx *rc) {
    clef_server *srv = rc->srv;
    int state = atomic_load(&srv->state);
    clef_strbuf b = {0};
    if (atomic_load(&srv->shutting_down)) {
        clef_strbuf_append_str(&b, "{\"status\":\"shutting_down\"}");
        return send_text(rc, 503, "application/json", &b);
    }
    if (state == CLEF_SERVER_READY) {
        clef_strbuf_append_str(&b, "{\"status\":\"ok\",\"model\":");
        const char *name = server_engine_name(srv->engine);
        json_render_string(name, strlen(name), &b);
        clef_strbuf_append_char(&b, '}');
        return send_text(rc, 200, "application/json", &b);
    }
    clef_strbuf_append_str(&b, state == CLEF_SERVER_FAILED ? "{\"status\":\"failed\"}"
                                                           : "{\"status\":\"loading\"}");
    return send_text(rc, 503, "application/json", &b);
}

static enum MHD_Result answer_models(request_ctx *rc) {
    clef_server *srv = rc->srv;
    if (atomic_load(&srv->state) != CLEF_SERVER_READY)
        return send_error(rc, 503, "unavailable", "the model is not loaded yet",
                          LOADING_RETRY_AFTER_S, NULL);
    const char *name = server_engine_name(srv->engine);
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "{\"models\":[{\"name\":");
    json_render_string(name, strlen(name), &b);
    clef_strbuf_appendf(&b, ",\"description\":\"Clef decision model served by clef %s "
                            "(contexts: %d, max_length: %d)\",\"release_date\":null}]}",
                        clef_version(), server_engine_n_contexts(srv->engine),
                        server_engine_max_length(srv->engine));
    return send_text(rc, 200, "application/json", &b);
}

static enum MHD_Result answer_metrics(request_ctx *rc) {
    clef_strbuf b = {0};
    if (atomic_load(&rc->srv->state) == CLEF_SERVER_READY) /* scheduler published */
        server_metrics_queue_depth(rc->srv->metrics,
                                   server_scheduler_queue_depth(rc->srv->scheduler));
    server_metrics_render(rc->srv->metrics, &b);
    return send_text(rc, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static enum MHD_Result answer_openapi(request_ctx *rc) {
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, server_openapi_json());
    return send_text(rc, 200, "application/json", &b);
}

/* ---- decision routes ---------------------------------------------------------------- */

static void job_done(server_job *job) {
    request_ctx *rc = job->user;
    atomic_store(&rc->phase, PHASE_REPLY);
    MHD_resume_connection(rc->conn);
}

/* The whole body is here: validate, then queue (connection suspended) or answer now. */
static enum MHD_Result submit_decision(request_ctx *rc) {
    clef_server *srv = rc->srv;
    if (rc->body_too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the body is larger than the cap of %zu bytes",
                 srv->params.max_body_bytes);
        return send_error(rc, 413, "body_too_large", msg, 0, NULL);
    }
    int64_t n_tokens = 0;
    server_reply error;
    const char *body = rc->body.data ? rc->body.data : "";
    if (server_engine_prepare(srv->engine, body, rc->body.len, rc->kind,
                              rc->kind == CLEF_REQUEST_WORKERS_AI ? rc->path_model : NULL,
                              &n_tokens, &error) != CLEF_OK)
        return send_server_reply(rc, &error);
    server_job *job = &rc->job;
    memset(job, 0, sizeof *job);
    job->body = body;
    job->len = rc->body.len;
    job->kind = rc->kind;
    job->n_tokens = n_tokens;
    job->deadline = rc->t_start + srv->params.timeout_s;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rc->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    job->fd = ci ? ci->connect_fd : -1;
    job->done = job_done;
    job->user = rc;
    atomic_store(&rc->phase, PHASE_WAITING);
    MHD_suspend_connection(rc->conn);
    server_submit_result r = server_scheduler_submit(srv->scheduler, job);
    if (r == SERVER_SUBMIT_OK) {
        server_metrics_accepted(srv->metrics);
        return MHD_YES;
    }
    /* refused: answer from the resumed handler like any finished job */
    server_reply_error(&job->reply, rc->kind, r == SERVER_SUBMIT_QUEUE_FULL ? 429 : 503,
                       r == SERVER_SUBMIT_QUEUE_FULL ? "queue_full" : "shutting_down",
                       r == SERVER_SUBMIT_QUEUE_FULL
                           ? "too many requests are waiting; retry after the Retry-After delay"
                           : "the server is shutting down; retry elsewhere");
    job->reply.retry_after_s = 1;
    job_done(job);
    return MHD_YES;
}

/* ---- the access handler ------------------------------------------------------------- */

static request_ctx *request_begin(clef_server *srv, struct MHD_Connection *conn, const char *url,
                                  const char *method) {
    request_ctx *rc = calloc(1, sizeof *rc);
    if (!rc)
        return NULL;
    rc->srv = srv;
    rc->conn = conn;
    rc->t_start = server_now();
    rc->kind = CLEF_REQUEST_SYSTEMONE;
    rc->route = SERVER_ROUTE_OTHER;
    copy_printable(rc->method, sizeof rc->method, method);
    copy_printable(rc->path, sizeof rc->path, url);
    const char *given = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-request-id");
    if (given && request_id_ok(given))
        snprintf(rc->request_id, sizeof rc->request_id, "%s", given);
    else
        snprintf(rc->request_id, sizeof rc->request_id, "%016llx%08llx", srv->id_seed,
                 (unsigned long long)atomic_fetch_add(&srv->next_id, 1));
    atomic_fetch_add(&srv->active, 1);
    return rc;
}

/* Whether the request carries our bearer token (always true without a token). */
static int authorized(clef_server *srv, struct MHD_Connection *conn) {
    if (!srv->params.token)
        return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    while (*h == ' ')
        h++;
    return token_equal(h, strlen(h), srv->params.token);
}

/* First call of a request: route it and answer everything that needs no body. Returns
 * MHD_YES with rc->replied 0 when the body should be collected. */
static enum MHD_Result request_route(request_ctx *rc, const char *url, const char *method) {
    clef_server *srv = rc->srv;
    int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    int is_post = strcmp(method, "POST") == 0;
    const char *model_id = NULL;
    int decision = 0;
    if (strcmp(url, "/v1/systemone") == 0) {
        rc->route = SERVER_ROUTE_SYSTEMONE;
        decision = 1;
    } else if (match_workers_ai(url, &model_id)) {
        rc->route = SERVER_ROUTE_WORKERS_AI;
        rc->kind = CLEF_REQUEST_WORKERS_AI;
        decision = 1;
    } else if (strcmp(url, "/health") == 0) {
        rc->route = SERVER_ROUTE_HEALTH;
    } else if (strcmp(url, "/v1/models") == 0) {
        rc->route = SERVER_ROUTE_MODELS;
    } else if (strcmp(url, "/metrics") == 0) {
        rc->route = SERVER_ROUTE_METRICS;
    } else if (strcmp(url, "/openapi.json") == 0) {
        rc->route = SERVER_ROUTE_OPENAPI;
    } else {
        return send_error(rc, 404, "not_found", "Not Found", 0, NULL);
    }
    if (atomic_load(&srv->shutting_down) && rc->route != SERVER_ROUTE_HEALTH)
        return send_error(rc, 503, "shutting_down", "the server is shutting down; retry elsewhere",
                          1, NULL);
    if (decision ? !is_post : !is_get)
        return send_error(rc, 405, "method_not_allowed", "Method Not Allowed", 0,
                          decision ? "POST" : "GET, HEAD");
    if (rc->route != SERVER_ROUTE_HEALTH && rc->route != SERVER_ROUTE_OPENAPI &&
        !authorized(srv, rc->conn))
        return send_error(rc, 401, "unauthorized",
                          "missing or wrong bearer token (Authorization: Bearer <token>)", 0, NULL);
    switch (rc->route) {
    case SERVER_ROUTE_HEALTH: return answer_health(rc);
    case SERVER_ROUTE_MODELS: return answer_models(rc);
    case SERVER_ROUTE_METRICS: return answer_metrics(rc);
    case SERVER_ROUTE_OPENAPI: return answer_openapi(rc);
    default: break;
    }
    if (atomic_load(&srv->state) != CLEF_SERVER_READY)
        return send_error(rc, 503, "unavailable",
                          atomic_load(&srv->state) == CLEF_SERVER_FAILED
                              ? "the model failed to load"
                              : "the model is still loading; retry after the Retry-After delay",
                          LOADING_RETRY_AFTER_S, NULL);
    if (rc->route == SERVER_ROUTE_WORKERS_AI) {
        const char *prefix = "@cf/cloudflare/";
        const char *name = server_engine_name(srv->engine);
        if (strncmp(model_id, prefix, strlen(prefix)) != 0 ||
            strcmp(model_id + strlen(prefix), name) != 0) {
            /* the path is untrusted bytes: quote it as printable ASCII only (a cut or invalid
             * UTF-8 sequence would make the JSON error body invalid; fuzz_http found it) */
            char shown[65], msg[256];
            copy_printable(shown, sizeof shown, model_id);
            snprintf(msg, sizeof msg, "no such model '%s': this server runs '@cf/cloudflare/%.64s'",
                     shown, name);
            return send_error(rc, 404, "not_found", msg, 0, NULL);
        }
        snprintf(rc->path_model, sizeof rc->path_model, "%s", name);
    }
    /* a declared length over the cap is refused before reading a byte of it */
    const char *cl = MHD_lookup_connection_value(rc->conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && srv->params.max_body_bytes) {
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end != cl && n > srv->params.max_body_bytes) {
            rc->body_too_large = 1;
            return submit_decision(rc);
        }
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    clef_server *srv = cls;
    request_ctx *rc = *con_cls;
    if (!rc) {
        rc = request_begin(srv, conn, url, method);
        if (!rc)
            return MHD_NO;
        *con_cls = rc;
        return request_route(rc, url, method);
    }
    if (rc->replied) {
        /* an early reply was queued: discard the rest of the body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (atomic_load(&rc->phase) == PHASE_REPLY) {
        if (rc->job.reply.status == 499)
            return MHD_NO; /* the client hung up: close without a reply */
        return send_server_reply(rc, &rc->job.reply);
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (server_now() - rc->t_start > srv->params.client_timeout_s) {
            CLEF_LOG_W("clef serve: %s: body not received within %.0f s; closing", rc->request_id,
                       srv->params.client_timeout_s);
            return MHD_NO;
        }
        if (rc->body_too_large || rc->body.len + n > srv->params.max_body_bytes) {
            rc->body_too_large = 1; /* keep reading (discarding) so the 413 can be sent */
            clef_strbuf_free(&rc->body);
            return MHD_YES;
        }
        clef_strbuf_append(&rc->body, upload_data, n);
        if (rc->body.oom) {
            clef_strbuf_free(&rc->body);
            return send_error(rc, 503, "unavailable", "out of memory reading the body", 1, NULL);
        }
        return MHD_YES;
    }
    return submit_decision(rc);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    clef_server *srv = cls;
    request_ctx *rc = *con_cls;
    if (!rc)
        return;
    *con_cls = NULL;
    int status = rc->replied ? rc->status : 499; /* 499: the client went away first */
    double seconds = server_now() - rc->t_start;
    server_metrics_request(srv->metrics, rc->route, status, seconds);
    if (srv->params.access_log)
        clef_log(CLEF_LOG_INFO, "access id=%s %s %s status=%d bytes=%zu ms=%.1f%s", rc->request_id,
                 rc->method, rc->path, status, rc->reply_bytes, seconds * 1e3,
                 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    clef_strbuf_free(&rc->body);
    server_reply_free(&rc->job.reply);
    free(rc);
    atomic_fetch_sub(&srv->active, 1);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap) {
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    clef_log(CLEF_LOG_WARN, "clef serve: http: %s", line);
}

/* ---- lifecycle ---------------------------------------------------------------------- */

static void *loader_main(void *p) {
    clef_server *srv = p;
    server_engine_params ep;
    memset(&ep, 0, sizeof ep);
    ep.model_dir = srv->params.model_dir;
    ep.served_name = srv->served_name;
    ep.n_contexts = srv->params.n_contexts;
    ep.n_threads = srv->params.n_threads;
    ep.max_length = srv->params.max_length;
    ep.truncation = srv->params.truncation;
    ep.device = srv->params.device;
    ep.profile = srv->params.profile;
    ep.limits = clef_request_default_limits();
    ep.limits.max_body_bytes = srv->params.max_body_bytes;
    server_engine *engine = NULL;
    server_scheduler *scheduler = NULL;
    int st = server_engine_load(&ep, &engine);
    if (st == CLEF_OK) {
        server_scheduler_params sp = {.max_queue = srv->params.max_queue,
                                      .max_batch_tokens = srv->params.max_batch_tokens,
                                      .max_batch_requests = srv->params.max_batch_requests};
        st = server_scheduler_start(engine, srv->metrics, &sp, &scheduler);
    }
    if (st != CLEF_OK) {
        snprintf(srv->load_error, sizeof srv->load_error, "%s", clef_last_error());
        server_engine_free(engine);
        atomic_store(&srv->state, CLEF_SERVER_FAILED);
        return NULL;
    }
    srv->engine = engine;
    srv->scheduler = scheduler;
    atomic_store(&srv->state, CLEF_SERVER_READY); /* publishes engine and scheduler */
    return NULL;
}

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, int *ipv6) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res)
        return clef_fail(CLEF_ERR_INVALID_ARG, "cannot resolve host '%s': %s", host,
                         gai_strerror(rc));
    memset(ss, 0, sizeof *ss);
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return CLEF_OK;
}

int clef_server_start(const clef_server_params *params, clef_server **out) {
    *out = NULL;
    if (!params || !params->model_dir)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef serve: a model directory is required");
    clef_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory starting the server");
    srv->params = *params;
    clef_server_params *p = &srv->params;
    if (!p->host)
        p->host = "127.0.0.1";
    if (p->token && !p->token[0])
        p->token = NULL;
    if (p->timeout_s <= 0)
        p->timeout_s = DEFAULT_TIMEOUT_S;
    if (p->client_timeout_s <= 0)
        p->client_timeout_s = DEFAULT_CLIENT_TIMEOUT_S;
    if (!p->max_body_bytes)
        p->max_body_bytes = clef_request_default_limits().max_body_bytes;
    if (p->max_connections <= 0)
        p->max_connections = DEFAULT_MAX_CONNECTIONS;
    if (p->http_threads <= 0)
        p->http_threads = DEFAULT_HTTP_THREADS;
    int st = CLEF_OK;
    if (!p->token && !p->allow_insecure && !is_loopback_host(p->host)) {
        st = clef_fail(CLEF_ERR_INVALID_ARG,
                       "refusing to listen on '%s' without a token: give --token/--token-file, "
                       "or --insecure-no-token to serve a non-loopback address unauthenticated",
                       p->host);
        goto err;
    }
    if (p->served_name && !(srv->served_name = strdup(p->served_name))) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory starting the server");
        goto err;
    }
    if ((st = server_metrics_create(&srv->metrics)))
        goto err;
    srv->id_seed = ((unsigned long long)time(NULL) << 20) ^ (unsigned long long)getpid();
    struct sockaddr_storage ss;
    int ipv6 = 0;
    if ((st = resolve(p->host, p->port, &ss, &ipv6)))
        goto err;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    srv->daemon = MHD_start_daemon(
        flags, p->port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, srv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)(p->client_timeout_s + 0.5), MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)p->max_connections, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned int)p->http_threads, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
    if (!srv->daemon) {
        st = clef_fail(CLEF_ERR_IO, "cannot listen on %s port %u (in use, or not an address of "
                                    "this machine?)", p->host, (unsigned)p->port);
        goto err;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = di ? di->port : p->port;
    atomic_store(&srv->state, CLEF_SERVER_LOADING);
    if (pthread_create(&srv->loader, NULL, loader_main, srv) != 0) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "could not start the loading thread");
        goto err;
    }
    srv->loader_started = 1;
    *out = srv;
    return CLEF_OK;
err:
    clef_server_free(srv);
    return st;
}

uint16_t clef_server_port(const clef_server *srv) { return srv->port; }

clef_server_state clef_server_get_state(clef_server *srv) {
    return (clef_server_state)atomic_load(&srv->state);
}

const char *clef_server_error(clef_server *srv) {
    return atomic_load(&srv->state) == CLEF_SERVER_FAILED ? srv->load_error : "";
}

void clef_server_shutdown(clef_server *srv) {
    if (!srv || srv->shut_down)
        return;
    srv->shut_down = 1;
    atomic_store(&srv->shutting_down, 1);
    if (srv->daemon) {
        MHD_socket fd = MHD_quiesce_daemon(srv->daemon); /* stop accepting connections */
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
    if (srv->loader_started) {
        pthread_join(srv->loader, NULL); /* a load in progress cannot be interrupted */
        srv->loader_started = 0;
    }
    if (srv->scheduler)
        server_scheduler_stop(srv->scheduler, srv->params.timeout_s);
    /* every job has its reply now; give the resumed connections time to send them */
    double until = server_now() + SHUTDOWN_REPLY_GRACE_S;
    while (atomic_load(&srv->active) > 0 && server_now() < until) {
        struct timespec ms10 = {0, 10 * 1000 * 1000};
        nanosleep(&ms10, NULL);
    }
    if (srv->daemon) {
        MHD_stop_daemon(srv->daemon);
        srv->daemon = NULL;
    }
}

void clef_server_free(clef_server *srv) {
    if (!srv)
        return;
    clef_server_shutdown(srv);
    server_scheduler_free(srv->scheduler);
    server_engine_free(srv->engine);
    server_metrics_free(srv->metrics);
    free(srv->served_name);
    free(srv);
}
