/*
 * scheduler.h — the queue between HTTP requests and the engine's contexts of `clef serve`.
 *
 * Requests that passed prepare (server_engine.h) are submitted as jobs. One worker thread per
 * context takes jobs first come, first served, and packs them into one batch while their
 * prompt tokens together stay within max_batch_tokens and their count within
 * max_batch_requests (a job larger than the budget runs alone); the batch is decided in one
 * server_engine_run call (records side by side in the backbone's forwards), and each job gets
 * its reply. While every context is busy, newcomers wait; that wait is what lets batches form.
 *
 * States of a job: QUEUED (submitted, in the FIFO) -> RUNNING (taken into a batch) -> DONE
 * (reply set, done() called exactly once). A queued job may also go straight to DONE:
 *   - its client hung up (its socket reads EOF): dropped with status 499, metrics count it;
 *   - its deadline passed: 503 with Retry-After ("timed out in the queue");
 *   - the scheduler stopped before reaching it: 503 with Retry-After ("shutting down").
 * A running job always finishes; its reply is sent even if its deadline passed meanwhile.
 *
 * Backpressure: submit refuses a job when max_queue jobs are already waiting (the caller
 * answers 429 with Retry-After) or when the scheduler is stopping (503).
 *
 * Thread safety: submit may be called from any thread; done() runs on a scheduler thread and
 * must not call back into the scheduler.
 */
#ifndef CLEF_SERVER_SCHEDULER_H
#define CLEF_SERVER_SCHEDULER_H

#include "server/metrics.h"
#include "server/server_engine.h"

#include <stddef.h>
#include <stdint.h>

typedef struct server_job server_job;
struct server_job {
    /* set by the submitter; read-only while the job is queued or running */
    const char *body;              /* the request body (owned by the submitter) */
    size_t len;
    clef_request_kind kind;
    int64_t n_tokens;              /* from server_engine_prepare */
    double deadline;               /* server_now() seconds after which a queued job is failed;
                                      0 = none */
    int fd;                        /* the client's socket, watched for a hang-up; -1 = none */
    void (*done)(server_job *job); /* called once when reply is set */
    void *user;                    /* for done() */
    /* set by the scheduler before done() */
    server_reply reply;            /* status 499 (not sent) when the client hung up */
    /* private */
    server_job *next;
};

typedef struct server_scheduler_params {
    int32_t max_queue;             /* waiting jobs; 0 = 256 */
    int64_t max_batch_tokens;      /* prompt tokens per batch; 0 = the engine's max_length */
    int32_t max_batch_requests;    /* jobs per batch; 0 = 64; 1 = one at a time */
} server_scheduler_params;

typedef enum server_submit_result {
    SERVER_SUBMIT_OK = 0,
    SERVER_SUBMIT_QUEUE_FULL = 1,  /* answer 429 */
    SERVER_SUBMIT_STOPPING = 2,    /* answer 503 */
} server_submit_result;

typedef struct server_scheduler server_scheduler;

/* Monotonic seconds (CLOCK_MONOTONIC). */
double server_now(void);

/* Start one worker per engine context and the housekeeping thread. */
int server_scheduler_start(server_engine *engine, server_metrics *metrics,
                           const server_scheduler_params *params, server_scheduler **out);

server_submit_result server_scheduler_submit(server_scheduler *s, server_job *job);

size_t server_scheduler_queue_depth(server_scheduler *s);

/* Stop taking jobs; let the workers finish what is queued for up to drain_s seconds, fail
 * the rest with 503, and join every thread. Every submitted job has had done() on return. */
void server_scheduler_stop(server_scheduler *s, double drain_s);
void server_scheduler_free(server_scheduler *s); /* stops first if needed; accepts NULL */

#endif /* CLEF_SERVER_SCHEDULER_H */
