/*
 * scheduler.c — FIFO of prepared requests, one worker per context packing batches under a
 * token budget, and a housekeeping thread that drops queued jobs whose client hung up or
 * whose deadline passed (see scheduler.h for the states and the invariants).
 *
 * Invariant: a job is in exactly one place — the FIFO (QUEUED), a worker's local batch
 * (RUNNING) or handed back through done() (DONE) — and moves between them only under
 * `lock`; done() is always called with the lock released.
 */
#include "server/scheduler.h"

#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SCHEDULER_DEFAULT_QUEUE 256
#define SCHEDULER_DEFAULT_BATCH 64
#define HOUSEKEEPING_PERIOD_S 0.05

struct server_scheduler {
    server_engine *engine;
    server_metrics *metrics;
    server_scheduler_params params;
    pthread_mutex_t lock;
    pthread_cond_t wake;           /* a job arrived, or stopping changed */
    server_job *head, *tail;       /* the FIFO */
    size_t depth;
    int stopping;                  /* no more submits; workers drain until drain_deadline */
    double drain_deadline;
    int stopped;                   /* threads joined */
    pthread_t *workers;            /* [n_workers] */
    int32_t n_workers, n_started;
    pthread_t housekeeper;
    int housekeeper_started;
};

typedef struct worker_arg {
    server_scheduler *s;
    int32_t ctx;
} worker_arg;

double server_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether the peer of fd has closed its end (EOF or a reset); data waiting means alive. */
static int client_gone(int fd) {
    if (fd < 0)
        return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return 1;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void finish_error(server_job *job, int http_status, const char *type, const char *msg) {
    server_reply_free(&job->reply);
    if (server_reply_error(&job->reply, job->kind, http_status, type, msg) != CLEF_OK)
        job->reply.status = http_status; /* out of memory: status without a body */
    if (http_status == 503 || http_status == 429)
        job->reply.retry_after_s = 1;
    job->done(job);
}

/* Unlink job (whose predecessor is prev, NULL for the head) from the FIFO. Lock held. */
static void fifo_unlink(server_scheduler *s, server_job *prev, server_job *job) {
    if (prev)
        prev->next = job->next;
    else
        s->head = job->next;
    if (s->tail == job)
        s->tail = prev;
    job->next = NULL;
    s->depth--;
}

/* ---- workers -------------------------------------------------------------------------- */

/* Take the next batch off the FIFO (lock held): FCFS while tokens and count fit. */
static size_t take_batch(server_scheduler *s, server_job **batch, size_t cap) {
    size_t n = 0;
    int64_t tokens = 0;
    while (s->head && n < cap) {
        server_job *job = s->head;
        if (n && tokens + job->n_tokens > s->params.max_batch_tokens)
            break;
        tokens += job->n_tokens;
        fifo_unlink(s, NULL, job);
        batch[n++] = job;
    }
    server_metrics_queue_depth(s->metrics, s->depth);
    return n;
}

static void run_batch(server_scheduler *s, int32_t ctx, server_job **batch, size_t n,
                      const char **bodies, size_t *lens, char **responses, int *statuses,
                      char **messages) {
    /* a client that hung up while queued frees its place before the forward */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (client_gone(batch[i]->fd)) {
            server_metrics_dropped(s->metrics, "client_gone");
            batch[i]->reply.status = 499;
            batch[i]->done(batch[i]);
        } else {
            batch[kept++] = batch[i];
        }
    }
    if (!kept)
        return;
    int64_t tokens = 0;
    for (size_t i = 0; i < kept; i++) {
        bodies[i] = batch[i]->body;
        lens[i] = batch[i]->len;
        tokens += batch[i]->n_tokens;
    }
    double t0 = server_now();
    server_engine_run(s->engine, ctx, kept, bodies, lens, responses, statuses, messages);
    server_metrics_batch(s->metrics, kept, tokens, server_now() - t0);
    for (size_t i = 0; i < kept; i++) {
        server_job *job = batch[i];
        if (server_engine_render(job->kind, statuses[i], messages[i], &responses[i],
                                 &job->reply) != CLEF_OK)
            job->reply.status = 503;
        clef_string_free(responses[i]);
        clef_string_free(messages[i]);
        responses[i] = NULL;
        messages[i] = NULL;
        job->done(job);
    }
}

static void *worker_main(void *p) {
    worker_arg *arg = p;
    server_scheduler *s = arg->s;
    int32_t ctx = arg->ctx;
    free(arg);
    size_t cap = (size_t)s->params.max_batch_requests;
    server_job **batch = calloc(cap, sizeof *batch);
    const char **bodies = calloc(cap, sizeof *bodies);
    size_t *lens = calloc(cap, sizeof *lens);
    char **responses = calloc(cap, sizeof *responses);
    int *statuses = calloc(cap, sizeof *statuses);
    char **messages = calloc(cap, sizeof *messages);
    if (!batch || !bodies || !lens || !responses || !statuses || !messages) {
        CLEF_LOG_E("clef serve: context %d: out of memory; this context serves nothing", ctx);
        goto out;
    }
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->wake, &s->lock);
        if (!s->head || (s->stopping && server_now() > s->drain_deadline)) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        size_t n = take_batch(s, batch, cap);
        pthread_mutex_unlock(&s->lock);
        run_batch(s, ctx, batch, n, bodies, lens, responses, statuses, messages);
    }
out:
    free(batch);
    free(bodies);
    free(lens);
    free(responses);
    free(statuses);
    free(messages);
    return NULL;
}

/* ---- housekeeping --------------------------------------------------------------------- */

/* Every HOUSEKEEPING_PERIOD_S: queued jobs whose client hung up or whose deadline passed
 * leave the FIFO (their done() is called after the lock is released). */
static void *housekeeper_main(void *p) {
    server_scheduler *s = p;
    struct timespec period = {0, (long)(HOUSEKEEPING_PERIOD_S * 1e9)};
    for (;;) {
        nanosleep(&period, NULL);
        server_job *gone = NULL, *expired = NULL;
        pthread_mutex_lock(&s->lock);
        if (s->stopped) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        double now = server_now();
        server_job *prev = NULL, *job = s->head;
        while (job) {
            server_job *next = job->next;
            int timed_out = job->deadline > 0 && now > job->deadline;
            int hung_up = !timed_out && client_gone(job->fd);
            if (timed_out || hung_up) {
                fifo_unlink(s, prev, job);
                server_job **list = timed_out ? &expired : &gone;
                job->next = *list;
                *list = job;
            } else {
                prev = job;
            }
            job = next;
        }
        server_metrics_queue_depth(s->metrics, s->depth);
        pthread_mutex_unlock(&s->lock);
        while (gone) {
            server_job *next = gone->next;
            gone->next = NULL;
            server_metrics_dropped(s->metrics, "client_gone");
            gone->reply.status = 499;
            gone->done(gone);
            gone = next;
        }
        while (expired) {
            server_job *next = expired->next;
            expired->next = NULL;
            server_metrics_dropped(s->metrics, "timeout");
            finish_error(expired, 503, "timeout",
                         "the request timed out waiting for a free context; retry later");
            expired = next;
        }
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

int server_scheduler_start(server_engine *engine, server_metrics *metrics,
                           const server_scheduler_params *params, server_scheduler **out) {
    *out = NULL;
    server_scheduler *s = calloc(1, sizeof *s);
    if (!s)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory starting the scheduler");
    s->engine = engine;
    s->metrics = metrics;
    s->params = *params;
    if (s->params.max_queue <= 0)
        s->params.max_queue = SCHEDULER_DEFAULT_QUEUE;
    if (s->params.max_batch_tokens <= 0)
        s->params.max_batch_tokens = server_engine_max_length(engine);
    if (s->params.max_batch_requests <= 0)
        s->params.max_batch_requests = SCHEDULER_DEFAULT_BATCH;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->n_workers = server_engine_n_contexts(engine);
    s->workers = calloc((size_t)s->n_workers, sizeof *s->workers);
    if (!s->workers) {
        server_scheduler_free(s);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory starting the scheduler");
    }
    for (int32_t i = 0; i < s->n_workers; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (arg) {
            arg->s = s;
            arg->ctx = i;
        }
        if (!arg || pthread_create(&s->workers[i], NULL, worker_main, arg) != 0) {
            free(arg);
            server_scheduler_free(s);
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "could not start scheduler thread %d", i);
        }
        s->n_started++;
    }
    if (pthread_create(&s->housekeeper, NULL, housekeeper_main, s) != 0) {
        server_scheduler_free(s);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "could not start the scheduler's housekeeper");
    }
    s->housekeeper_started = 1;
    *out = s;
    return CLEF_OK;
}

server_submit_result server_scheduler_submit(server_scheduler *s, server_job *job) {
    job->next = NULL;
    memset(&job->reply, 0, sizeof job->reply);
    pthread_mutex_lock(&s->lock);
    server_submit_result r = SERVER_SUBMIT_OK;
    if (s->stopping)
        r = SERVER_SUBMIT_STOPPING;
    else if (s->depth >= (size_t)s->params.max_queue)
        r = SERVER_SUBMIT_QUEUE_FULL;
    else {
        if (s->tail)
            s->tail->next = job;
        else
            s->head = job;
        s->tail = job;
        s->depth++;
        server_metrics_queue_depth(s->metrics, s->depth);
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}

size_t server_scheduler_queue_depth(server_scheduler *s) {
    pthread_mutex_lock(&s->lock);
    size_t d = s->depth;
    pthread_mutex_unlock(&s->lock);
    return d;
}

void server_scheduler_stop(server_scheduler *s, double drain_s) {
    pthread_mutex_lock(&s->lock);
    if (s->stopped) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->stopping = 1;
    s->drain_deadline = server_now() + (drain_s > 0 ? drain_s : 0);
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    for (int32_t i = 0; i < s->n_started; i++)
        pthread_join(s->workers[i], NULL);
    pthread_mutex_lock(&s->lock);
    s->stopped = 1;
    server_job *rest = s->head;
    s->head = s->tail = NULL;
    s->depth = 0;
    pthread_mutex_unlock(&s->lock);
    if (s->housekeeper_started)
        pthread_join(s->housekeeper, NULL);
    s->housekeeper_started = 0;
    while (rest) {
        server_job *next = rest->next;
        rest->next = NULL;
        finish_error(rest, 503, "shutting_down", "the server is shutting down; retry elsewhere");
        rest = next;
    }
}

void server_scheduler_free(server_scheduler *s) {
    if (!s)
        return;
    server_scheduler_stop(s, 0);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->workers);
    free(s);
}
