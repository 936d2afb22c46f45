/*
 * clef_model.c — the public model object of include/clef.h: a release loaded into the
 * backbone and the joint schema head on one backend, with the tokenizer, and the decide
 * functions that tie request -> encoding -> forward -> head -> answers together.
 *
 * The flow of one request (DESIGN.md):
 *   clef_request_parse   validate the body (src/encode/request.h)
 *   clef_record_encode   token ids + question/option spans (src/encode/encode.h)
 *   qwen35_forward       final hidden states [T, D] (src/model/qwen35.h)
 *   clef_joint_head_forward  logits + probabilities per option (src/model/joint_head.h)
 *   clef_answers_render  the SystemOne response body (src/encode/answers.h)
 *
 * Memory: the backbone's RunState and the head's workspace are planned at load for one
 * record of max_length tokens; a batch runs its records one after another through them, each
 * at its true length, so a record's answer is the same alone or in any batch. The lm_head
 * matrix is not loaded: the head reads only the rows of option tokens, with pread, from the
 * release file that holds it.
 *
 * Invariant: `lock` is held for the whole of every forward (backbone + head), so concurrent
 * decide calls on one model take turns on the workspace; parsing, encoding and rendering run
 * outside it.
 */
#include "clef.h"

#include "backend/backend.h"
#include "core/error.h"
#include "core/io.h"
#include "core/log.h"
#include "core/convert.h"
#include "core/strbuf.h"
#include "encode/answers.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "model/joint_head.h"
#include "model/weight_loader.h"
#include "model/qwen35.h"
#include "release/release.h"
#include "release/values.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_DEFAULT_MAX_QUESTIONS 64
#define MODEL_DEFAULT_MAX_OPTIONS (64 * 255)

/* lm_head rows on demand: pread of one row from the release file that holds lm_head.weight. */
typedef struct lm_rows {
    clef_file file;
    const clef_tensor_info *tensor; /* lm_head.weight (or the tied embedding) [V, D] */
    int64_t hidden_size;
    void *row;                      /* one stored row (D elements of tensor->dtype) */
} lm_rows;

struct clef_model {
    char *name;                     /* the release directory's base name */
    clef_model_params params;
    clef_release *release;
    tok_tokenizer *tokenizer;
    clef_backend *backend;
    qwen35_model *backbone;
    clef_joint_head *head;
    lm_rows lm;
    uint64_t load_done, load_total; /* weight bytes read so far / in all, for progress */
    clef_request_limits limits;
    pthread_mutex_t lock;           /* held for every forward (see the file comment) */
    int lock_ready;
};

clef_model_params clef_model_default_params(void) {
    clef_model_params p;
    memset(&p, 0, sizeof p);
    p.truncation = CLEF_TRUNCATION_TRUNCATE;
    return p;
}

/* ---- lm_head rows ------------------------------------------------------------------------- */

static int lm_read_row(void *ctx, int32_t id, float *dst) {
    lm_rows *lm = ctx;
    const int64_t D = lm->hidden_size;
    const size_t esize = clef_dtype_size(lm->tensor->dtype);
    int st = clef_file_pread(&lm->file, lm->row, (size_t)D * esize,
                             lm->tensor->offset + (uint64_t)id * (uint64_t)D * esize);
    if (st)
        return clef_fail_prefix(st, "lm_head row %d", id);
    clef_scalar_kind kind = CLEF_SCALAR_F32;
    clef_scalar_kind_of_dtype(lm->tensor->dtype, &kind); /* lm_open allowed BF16, F16, F32 */
    clef_convert_to_f32(kind, lm->row, (size_t)D, dst);
    return CLEF_OK;
}

static int lm_open(lm_rows *lm, const clef_release *rel) {
    const clef_release_config *cfg = clef_release_get_config(rel);
    const char *name = "lm_head.weight";
    lm->tensor = clef_release_find(rel, name);
    if (!lm->tensor && cfg->text.tie_word_embeddings) {
        name = "text.embed_tokens.weight";
        lm->tensor = clef_release_find(rel, name);
    }
    if (!lm->tensor)
        return clef_fail(CLEF_ERR_TENSOR_MISSING, "release '%s': tensor 'lm_head.weight' is "
                         "missing (the head reads option tokens' rows of it)",
                         clef_release_dir(rel));
    const clef_tensor_info *t = lm->tensor;
    if (t->dtype != CLEF_DTYPE_BF16 && t->dtype != CLEF_DTYPE_F16 && t->dtype != CLEF_DTYPE_F32)
        return clef_fail(CLEF_ERR_TENSOR_DTYPE, "tensor '%s' is %s, expected BF16, F16 or F32",
                         name, clef_dtype_name(t->dtype));
    if (t->n_dims != 2 || t->shape[0] != cfg->text.vocab_size ||
        t->shape[1] != cfg->text.hidden_size)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s' is not [vocab_size %lld, "
                         "hidden_size %lld]", name, (long long)cfg->text.vocab_size,
                         (long long)cfg->text.hidden_size);
    lm->hidden_size = cfg->text.hidden_size;
    lm->row = malloc((size_t)t->shape[1] * clef_dtype_size(t->dtype));
    char *path = clef_path_join(clef_release_dir(rel), clef_release_file_name(rel, (size_t)t->file));
    if (!lm->row || !path) {
        free(path);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "lm_head: out of memory");
    }
    int st = clef_file_open(&lm->file, path);
    free(path);
    return st;
}

static void lm_close(lm_rows *lm) {
    clef_file_close(&lm->file);
    free(lm->row);
    memset(lm, 0, sizeof *lm);
    lm->file.fd = -1;
}

/* ---- loading ------------------------------------------------------------------------------ */

static void progress(const clef_model *m, const char *stage, uint64_t done, uint64_t total) {
    if (m->params.progress)
        m->params.progress(stage, done, total, m->params.progress_user);
}

/* The tensor source of the backbone and the head: the release, counting bytes for progress. */
static const clef_tensor_info *model_find(void *user, const char *name) {
    return clef_release_find(((clef_model *)user)->release, name);
}

static int model_read(void *user, const clef_tensor_info *t, void *dst) {
    clef_model *m = user;
    int st = clef_release_read_threads(m->release, t, dst, m->params.n_threads);
    /* A NaN or Inf weight is refused here, by name, rather than surfacing later as a NaN
     * probability that looks like the record's fault. */
    if (st == CLEF_OK) {
        /* t may be a piece of the tensor (model_read_range): count elements from its start */
        const clef_tensor_info *whole = clef_release_find(m->release, t->name);
        size_t esize = clef_dtype_size(t->dtype);
        uint64_t first = whole && esize && t->offset >= whole->offset
                             ? (t->offset - whole->offset) / esize : 0;
        st = clef_check_weight_finite(t, clef_release_file_name(m->release, (size_t)t->file), dst,
                                      t->n_bytes, first);
    }
    m->load_done += t->n_bytes;
    progress(m, "weights", m->load_done, m->load_total);
    return st;
}

/* A piece of a tensor (the weight loader stages big tensors piece by piece). */
static int model_read_range(void *user, const clef_tensor_info *t, uint64_t offset, uint64_t n,
                            void *dst) {
    return clef_tensor_source_read_range_by_copy(model_read, user, t, offset, n, dst);
}

/* Bytes the backbone and the head will read (text.* and head.* tensors; lm_head is read by
 * rows later, vision.* is not loaded by this text-only build). */
static uint64_t bytes_to_load(const clef_release *rel) {
    uint64_t total = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (!strncmp(t->name, "text.", 5) || !strncmp(t->name, "head.", 5))
            total += t->n_bytes;
    }
    return total;
}

static char *base_name(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    char *s = malloc(n - b + 1);
    if (s) {
        memcpy(s, dir + b, n - b);
        s[n - b] = '\0';
    }
    return s;
}

int clef_model_load(const char *dir, const clef_model_params *params, clef_model **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: out is NULL");
    *out = NULL;
    if (!dir)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: dir is NULL");
    clef_model_params p = params ? *params : clef_model_default_params();
    if (p.n_threads < 0 || p.max_length < 0 || p.max_questions < 0 || p.max_options < 0 ||
        (p.truncation != CLEF_TRUNCATION_TRUNCATE && p.truncation != CLEF_TRUNCATION_REFUSE))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: negative n_threads, "
                         "max_length, max_questions or max_options, or unknown truncation");
    if (!p.max_length)
        p.max_length = CLEF_DEFAULT_MAX_LENGTH;
    if (!p.max_questions)
        p.max_questions = MODEL_DEFAULT_MAX_QUESTIONS;
    if (!p.max_options)
        p.max_options = MODEL_DEFAULT_MAX_OPTIONS;

    clef_model *m = calloc(1, sizeof *m);
    if (!m)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_load: out of memory");
    m->params = p;
    m->lm.file.fd = -1;
    int st = CLEF_OK;
    if (!(m->name = base_name(dir))) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_load: out of memory");
        goto err;
    }
    if (pthread_mutex_init(&m->lock, NULL)) {
        st = clef_fail(CLEF_ERR_INTERNAL, "clef_model_load: pthread_mutex_init failed");
        goto err;
    }
    m->lock_ready = 1;

    /* 1. the release: every file and tensor validated before anything is read */
    progress(m, "validate", 0, 0);
    clef_release_opts ro = {.verify_hashes = p.verify_hashes};
    if ((st = clef_release_open(dir, &ro, &m->release)))
        goto err;
    const clef_release_config *cfg = clef_release_get_config(m->release);
    if (cfg->head.hidden_size != cfg->text.hidden_size) {
        st = clef_fail(CLEF_ERR_CONFIG_INVALID, "joint_head_config.json: hidden_size %lld, "
                       "config.json text_config.hidden_size %lld",
                       (long long)cfg->head.hidden_size, (long long)cfg->text.hidden_size);
        goto err;
    }

    /* Quantized releases are validated by the release reader (and described by clef
     * inspect), but this build has no NF4 / FP8 / INT8 GEMMs yet: say so by name rather than
     * failing later on the first U8/F8/I8 weight. */
    if (cfg->quant.method != CLEF_QUANT_NONE) {
        static const char *const method_names[] = {
            [CLEF_QUANT_BNB_NF4] = "NF4 (bitsandbytes 4-bit)",
            [CLEF_QUANT_FP8_W8A8] = "FP8 W8A8 (compressed-tensors)",
            [CLEF_QUANT_INT8_CONVROT] = "INT8 ConvRot",
        };
        st = clef_fail(CLEF_ERR_UNSUPPORTED,
                       "release '%s' is %s: this build runs BF16, F16 and F32 releases only "
                       "(quantized weights are validated and shown by `clef inspect`, not run yet)",
                       dir, method_names[cfg->quant.method]);
        goto err;
    }

    /* 2. the tokenizer */
    progress(m, "tokenizer", 0, 0);
    if ((st = tok_load_dir(dir, &m->tokenizer)))
        goto err;

    /* 3. the backend, the backbone weights and RunState, the head and its workspace */
    clef_backend_params bp = clef_backend_default_params();
    bp.n_threads = p.n_threads;
    if ((st = clef_backend_cpu_create(&bp, &m->backend)))
        goto err;
    m->load_total = bytes_to_load(m->release);
    /* one source for both loaders: the release's tensors, counted for the progress line */
    clef_tensor_source src = {.ctx = m, .find = model_find, .read = model_read,
                              .read_range = model_read_range};
    qwen35_params qp = qwen35_default_params();
    qp.max_seq_len = p.max_length;
    qp.max_tokens = p.max_length;
    if ((st = qwen35_load(&cfg->text, &src, m->backend, &qp, &m->backbone)))
        goto err;
    clef_head_limits hl = {.max_tokens = p.max_length, .max_questions = p.max_questions,
                           .max_options = p.max_options};
    if ((st = clef_joint_head_load(m->backend, &cfg->head, &src, &hl, &m->head)))
        goto err;
    if ((st = lm_open(&m->lm, m->release)))
        goto err;

    m->limits = clef_request_default_limits();
    m->limits.max_questions = p.max_questions;
    progress(m, "ready", 1, 1);
    CLEF_LOG_I("model '%s': %lld layers, hidden %lld, vocab %lld; weights %zu bytes (backbone) "
               "+ %zu (head); workspace %zu + %zu bytes for %d tokens", m->name,
               (long long)cfg->text.num_hidden_layers, (long long)cfg->text.hidden_size,
               (long long)cfg->text.vocab_size, qwen35_weight_bytes(m->backbone),
               clef_joint_head_weight_bytes(m->head), qwen35_state_bytes(m->backbone),
               clef_joint_head_workspace_bytes(m->head), p.max_length);
    *out = m;
    return CLEF_OK;
err:
    clef_model_free(m);
    return st;
}

void clef_model_free(clef_model *m) {
    if (!m)
        return;
    lm_close(&m->lm);
    clef_joint_head_free(m->head);
    qwen35_free(m->backbone);
    clef_backend_free(m->backend);
    tok_free(m->tokenizer);
    clef_release_free(m->release);
    if (m->lock_ready)
        pthread_mutex_destroy(&m->lock);
    free(m->name);
    free(m);
}

const char *clef_model_name(const clef_model *m) { return m ? m->name : ""; }
int32_t clef_model_max_length(const clef_model *m) { return m ? m->params.max_length : 0; }
uint64_t clef_model_weight_bytes(const clef_model *m) {
    return m ? (uint64_t)qwen35_weight_bytes(m->backbone) + clef_joint_head_weight_bytes(m->head)
             : 0;
}
uint64_t clef_model_workspace_bytes(const clef_model *m) {
    return m ? (uint64_t)qwen35_state_bytes(m->backbone) + clef_joint_head_workspace_bytes(m->head)
             : 0;
}

/* ---- deciding ----------------------------------------------------------------------------- */

/* One request through parse, encode and forward: the pieces both decide variants need. */
typedef struct decision {
    clef_request *request;
    clef_encoded_record encoded;
    int64_t n_options;
    float *logits, *probs;          /* [n_options], questions in order, presented order */
    double *probs_d;                /* probs widened, as the reference's .tolist() does */
} decision;

static void decision_free(decision *d) {
    clef_request_free(d->request);
    clef_encoded_record_free(&d->encoded);
    free(d->logits);
    free(d->probs);
    free(d->probs_d);
    memset(d, 0, sizeof *d);
}

/* Parse and encode one request and size its outputs: everything before the forward. */
static int decision_prepare(clef_model *m, const char *body, size_t len, decision *d) {
    memset(d, 0, sizeof *d);
    if (!m || (!body && len))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide: NULL model or request");
    clef_request_errors errors = {0};
    int st = clef_request_parse(body ? body : "", len, CLEF_REQUEST_RECORD, NULL, &m->limits,
                                &d->request, &errors);
    clef_request_errors_free(&errors); /* clef_last_error() keeps the first as "loc: msg" */
    if (st)
        return st;

    clef_encode_params ep = clef_encode_default_params();
    ep.max_length = m->params.max_length;
    ep.policy = m->params.truncation == CLEF_TRUNCATION_REFUSE ? CLEF_TRUNCATE_REFUSE
                                                               : CLEF_TRUNCATE_STATE;
    ep.tokenize = clef_tokenize_tok;
    ep.tokenize_ctx = m->tokenizer;
    if ((st = clef_record_encode(d->request, &ep, &d->encoded)))
        goto err;

    for (int32_t q = 0; q < d->encoded.n_questions; q++)
        d->n_options += d->encoded.questions[q].n_options;
    d->logits = malloc((size_t)d->n_options * sizeof(float));
    d->probs = malloc((size_t)d->n_options * sizeof(float));
    d->probs_d = malloc((size_t)d->n_options * sizeof(double));
    if (!d->logits || !d->probs || !d->probs_d) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide: out of memory");
        goto err;
    }
    return CLEF_OK;
err:
    decision_free(d);
    return st;
}

/* Run prepared decisions d[0..n) through ONE backbone forward (their tokens side by side,
 * each sequence at its own length: n_tokens of all together <= max_length, so the RunState
 * planned at load holds them) and then the head, record by record, on each one's rows of the
 * output. Rows do not depend on each other (backend.h), so every record gets exactly what it
 * gets alone. ids is caller scratch of max_length entries (unused, may be NULL, when n == 1:
 * the record's own ids are passed as they are); seq_start has n + 1 entries. */
static int decisions_run(clef_model *m, decision *const *d, int64_t n, int32_t *ids,
                         int64_t *seq_start) {
    seq_start[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (n > 1)
            memcpy(ids + seq_start[i], d[i]->encoded.ids,
                   (size_t)d[i]->encoded.n_tokens * sizeof *ids);
        seq_start[i + 1] = seq_start[i] + d[i]->encoded.n_tokens;
    }
    pthread_mutex_lock(&m->lock);
    int st = qwen35_forward(m->backbone, n, seq_start, n > 1 ? ids : d[0]->encoded.ids);
    int64_t D = qwen35_hidden_size(m->backbone);
    clef_lm_row_reader lm = {.ctx = &m->lm, .vocab_size = m->lm.tensor->shape[0],
                             .read_row = lm_read_row};
    for (int64_t i = 0; i < n && !st; i++)
        st = clef_joint_head_forward(m->head, qwen35_output(m->backbone) + seq_start[i] * D, D,
                                     &d[i]->encoded, &lm, d[i]->logits, d[i]->probs);
    pthread_mutex_unlock(&m->lock);
    for (int64_t i = 0; i < n && !st; i++)
        for (int64_t k = 0; k < d[i]->n_options; k++)
            d[i]->probs_d[k] = d[i]->probs[k];
    return st;
}

static int decide_one(clef_model *m, const char *body, size_t len, decision *d) {
    int st = decision_prepare(m, body, len, d);
    if (st)
        return st;
    decision *one = d;
    int64_t seq_start[2];
    if ((st = decisions_run(m, &one, 1, NULL, seq_start)))
        decision_free(d);
    return st;
}

/* The SystemOne answer body of a decided record. */
static int decision_render(const clef_model *m, const decision *d, char **response) {
    clef_strbuf out = {0};
    const char *model = d->request->model ? d->request->model : m->name;
    int st = clef_answers_render(d->request, &d->encoded, d->probs_d, (size_t)d->n_options, model,
                                 &out);
    if (!st)
        st = clef_strbuf_status(&out);
    if (!st)
        *response = clef_strbuf_take(&out, NULL);
    clef_strbuf_free(&out);
    return st;
}

int clef_model_decide(clef_model *m, const char *request_json, size_t len, char **response) {
    if (!response)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide: response is NULL");
    *response = NULL;
    decision d;
    int st = decide_one(m, request_json, len, &d);
    if (st)
        return st;
    st = decision_render(m, &d, response);
    decision_free(&d);
    return st;
}

/* Records are prepared one by one (a refused record fails alone), then the accepted ones are
 * packed in request order into forwards of at most max_length tokens together: short records
 * share one backbone pass instead of one pass each. */
int clef_model_decide_batch(clef_model *m, size_t n, const char *const *requests,
                            const size_t *lens, char **responses, int *statuses) {
    if (!m || (n && (!requests || !lens || !responses || !statuses)))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide_batch: NULL argument");
    if (n == 0)
        return CLEF_OK;
    int64_t max_tokens = m->params.max_length;
    decision *all = calloc(n, sizeof *all);
    decision **group = malloc(n * sizeof *group);
    int32_t *ids = malloc((size_t)max_tokens * sizeof *ids);
    int64_t *seq_start = malloc((n + 1) * sizeof *seq_start);
    if (!all || !group || !ids || !seq_start) {
        free(all);
        free(group);
        free(ids);
        free(seq_start);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide_batch: out of memory");
    }
    int first = CLEF_OK;
    for (size_t i = 0; i < n; i++) {
        responses[i] = NULL;
        statuses[i] = decision_prepare(m, requests[i], lens[i], &all[i]);
    }
    for (size_t i = 0; i < n;) {
        /* the next group: accepted records in order while their tokens fit */
        int64_t n_group = 0, tokens = 0;
        size_t j = i;
        for (; j < n; j++) {
            if (statuses[j])
                continue;
            if (n_group && tokens + all[j].encoded.n_tokens > max_tokens)
                break;
            tokens += all[j].encoded.n_tokens;
            group[n_group++] = &all[j];
        }
        int st = n_group ? decisions_run(m, group, n_group, ids, seq_start) : CLEF_OK;
        for (size_t k = i; k < j; k++) {
            if (statuses[k])
                continue;
            statuses[k] = st ? st : decision_render(m, &all[k], &responses[k]);
        }
        i = j;
    }
    for (size_t i = 0; i < n; i++) {
        if (statuses[i] && !first)
            first = statuses[i];
        decision_free(&all[i]);
    }
    free(all);
    free(group);
    free(ids);
    free(seq_start);
    return first;
}

/* ---- the raw result ----------------------------------------------------------------------- */

/* One allocation holds the result, its questions, option id pointers and numbers; the
 * strings point into a copy kept in `strings`. */
typedef struct result_block {
    clef_result result;
    clef_question_result *questions;
    const char **option_ids;
    float *numbers;                 /* logits then probabilities */
    char *strings;
} result_block;

int clef_model_decide_result(clef_model *m, const char *request_json, size_t len,
                             clef_result **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide_result: out is NULL");
    *out = NULL;
    decision d;
    int st = decide_one(m, request_json, len, &d);
    if (st)
        return st;
    const clef_request *r = d.request;
    size_t text = 0;
    for (int32_t q = 0; q < r->n_questions; q++) {
        text += r->questions[q].id_len + 1 + strlen(r->questions[q].type_name) + 1;
        for (int32_t o = 0; o < r->questions[q].n_options; o++)
            text += r->questions[q].options[o].id_len + 1;
    }
    result_block *b = calloc(1, sizeof *b);
    if (b) {
        b->questions = calloc((size_t)r->n_questions, sizeof *b->questions);
        b->option_ids = calloc((size_t)d.n_options, sizeof *b->option_ids);
        b->numbers = malloc(2 * (size_t)d.n_options * sizeof(float));
        b->strings = malloc(text);
    }
    if (!b || !b->questions || !b->option_ids || !b->numbers || !b->strings) {
        if (b) {
            free(b->questions);
            free(b->option_ids);
            free(b->numbers);
            free(b->strings);
        }
        free(b);
        decision_free(&d);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide_result: out of memory");
    }
    memcpy(b->numbers, d.logits, (size_t)d.n_options * sizeof(float));
    memcpy(b->numbers + d.n_options, d.probs, (size_t)d.n_options * sizeof(float));
    char *s = b->strings;
    int64_t k = 0;
    for (int32_t q = 0; q < r->n_questions; q++) {
        const clef_question *rq = &r->questions[q];
        clef_question_result *qr = &b->questions[q];
        memcpy(s, rq->id, rq->id_len + 1);
        qr->id = s;
        s += rq->id_len + 1;
        size_t tl = strlen(rq->type_name) + 1;
        memcpy(s, rq->type_name, tl);
        qr->type = s;
        s += tl;
        qr->n_options = rq->n_options;
        qr->option_ids = b->option_ids + k;
        qr->logits = b->numbers + k;
        qr->probabilities = b->numbers + d.n_options + k;
        for (int32_t o = 0; o < rq->n_options; o++, k++) {
            memcpy(s, rq->options[o].id, rq->options[o].id_len + 1);
            b->option_ids[k] = s;
            s += rq->options[o].id_len + 1;
        }
    }
    b->result = (clef_result){.n_questions = r->n_questions, .questions = b->questions,
                              .input_tokens = d.encoded.n_tokens,
                              .truncated_tokens = d.encoded.truncated_tokens};
    decision_free(&d);
    *out = &b->result;
    return CLEF_OK;
}

void clef_result_free(clef_result *result) {
    if (!result)
        return;
    result_block *b = (result_block *)result; /* result is the block's first member */
    free(b->questions);
    free(b->option_ids);
    free(b->numbers);
    free(b->strings);
    free(b);
}

void clef_string_free(char *s) { free(s); }
