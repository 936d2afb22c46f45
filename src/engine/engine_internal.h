/*
 * engine_internal.h — the objects behind the public handles of include/clef.h, shared by the
 * files of src/engine/: the model (weights once, read-only after load), the context (one
 * workspace and backend fork per concurrent forward), and a prepared record.
 *
 * Invariants:
 *  - After clef_model_load returns, nothing in a clef_model is written except through
 *    default_lock (the lazily created default context the clef_model_decide* calls share).
 *    Contexts only read their model, so they run concurrently without a lock between them.
 *  - A context writes only its own workspace (qwen35_state, head fork) and runs its ops on its
 *    own backend fork.
 */
#ifndef CLEF_ENGINE_INTERNAL_H
#define CLEF_ENGINE_INTERNAL_H

#include "clef.h"

#include "backend/backend.h"
#include "core/io.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "model/joint_head.h"
#include "model/qwen35.h"
#include "release/release.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>

/* Where lm_head rows come from: lm_head.weight (or the tied embedding) [vocab, hidden] in the
 * release, read by row with clef_release_read_range (pread on the file the release opened and
 * contained; safe from any thread). */
typedef struct clef_lm_source {
    const clef_release *rel;
    const clef_tensor_info *tensor;
    int64_t vocab_size, hidden_size;
} clef_lm_source;

struct clef_model {
    char *name;                     /* the release directory's base name */
    clef_model_params params;       /* with defaults filled in */
    clef_release *release;
    tok_tokenizer *tokenizer;
    char device[24];                /* "cpu" or "cuda:N" (clef_model_device) */
    clef_backend *backend;          /* where the weights live; contexts fork it */
    qwen35_model *backbone;         /* weights only */
    clef_joint_head *head;          /* weights only (no workspace) */
    clef_lm_source lm;
    clef_request_limits limits;
    uint64_t load_done, load_total; /* weight bytes read so far / in all, for progress */
    pthread_mutex_t default_lock;   /* guards default_ctx and every use of it */
    int lock_ready;
    clef_context *default_ctx;      /* created by the first clef_model_decide* call */
};

struct clef_context {
    clef_model *model;
    clef_context_params params;     /* with defaults filled in */
    clef_backend *be;               /* a fork of model->backend */
    qwen35_state *state;            /* the backbone's RunState */
    clef_joint_head *head;          /* a fork of model->head: own workspace */
    int32_t *ids;                   /* (max_tokens) host staging of a packed batch */
    int64_t *seq_start;             /* (max_tokens + 1) */
};

struct clef_prepared {
    clef_request *request;
    clef_encoded_record encoded;
    int64_t n_options;
    float *logits, *probs;          /* [n_options], questions in order, presented order */
    double *probs_d;                /* probs widened, as the reference's .tolist() does */
    /* the lm_head rows of the option tokens, read at prepare: row_ids sorted, rows in the
     * stored dtype of lm_head, one row of hidden_size elements each */
    int32_t *row_ids;
    int64_t n_rows;
    void *rows;
    const clef_lm_source *lm;       /* how to widen rows (dtype, hidden size) */
};

/* A context for model (context.c); the default context uses it too. */
int clef_context_make(clef_model *model, const clef_context_params *params, clef_context **out);

#endif /* CLEF_ENGINE_INTERNAL_H */
