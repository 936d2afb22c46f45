/*
 * joint_head.c — the joint schema head on the backend op table (see joint_head.h for the math
 * and the memory plan). Loading checks every tensor against joint_head_config.json; the
 * forward reads top to bottom in clef_joint_head_forward, one step per paragraph, with the
 * PyTorch line of the reference JointSchemaHead.forward it computes.
 *
 * The head computes nothing on the host and never dereferences backend memory: span means,
 * the lexical means of lm_head rows, the per-question option summary, dots and cosines and
 * the per-question softmax are ops of the table (backend.h, "head ops"). What the host does
 * is bookkeeping: it builds the index arrays (which rows belong to which span, which question
 * an option belongs to) and the lm_head rows the caller's reader supplies in host staging
 * buffers, uploads them with clef_backend_write, and reads the logits and probabilities back
 * with clef_backend_read after clef_backend_synchronize. Reductions accumulate in double, so
 * our values sit at (or nearer than) the fp32 rounding noise of PyTorch's.
 */
#include "model/joint_head.h"
#include "model/weight_loader.h"

#include "backend/buffer_set.h"
#include "core/error.h"
#include "core/numeric.h"
#include "core/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_LN_EPS 1e-5f     /* torch.nn.LayerNorm default, every norm of the head */
#define HEAD_NORMALIZE_EPS 1e-12 /* torch.nn.functional.normalize */
#define HEAD_COSINE_EPS 1e-8     /* torch.nn.functional.cosine_similarity */

/* ---- weights ------------------------------------------------------------------------------ */

typedef struct head_norm {
    float *w, *b;             /* (dim) gain and bias, fp32 */
} head_norm;

typedef struct head_linear {
    clef_matrix w;            /* (out, in) */
    float *b;                 /* (out) or NULL */
} head_linear;

/* nn.MultiheadAttention: in_proj_weight (3*width, width) packs q, k, v rows; biases fp32. */
typedef struct head_attention {
    clef_matrix q, kv;        /* row views of in_proj_weight: (width, width), (2*width, width) */
    float *q_bias, *kv_bias;  /* (width), (2*width) views of in_proj_bias */
    head_linear out;          /* out_proj (width, width) + bias */
} head_attention;

typedef struct head_routing_layer {    /* EvidenceRoutingLayer */
    head_norm query_norm, memory_norm, feedforward_norm;
    head_attention attention;
    head_linear ff_in, ff_out;         /* feedforward.0 (ff, width), feedforward.3 (width, ff) */
} head_routing_layer;

typedef struct head_decoder_layer {    /* nn.TransformerDecoderLayer, norm_first, GELU */
    head_norm norm1, norm2, norm3;
    head_attention self_attn, cross_attn;  /* self_attn, multihead_attn */
    head_linear ff_in, ff_out;             /* linear1 (ff, width), linear2 (width, ff) */
} head_decoder_layer;

typedef struct head_weights {
    head_norm hidden_norm;                 /* (D) */
    clef_matrix memory_projection;         /* (width, D) each */
    clef_matrix question_projection, option_question_projection, global_projection;
    clef_matrix option_context_projection, option_lexical_projection;
    float *type_embedding;                 /* (3, width) */
    head_routing_layer *routing;           /* [routing_layers] */
    head_norm option_summary_norm;
    head_decoder_layer *decoder;           /* [layers] */
    head_norm field_norm, option_norm;
    head_linear scorer_in, scorer_out;     /* residual_scorer.0 (width, 4 width), .3 (1, width) */
    float prior_logit_scale, joint_logit_scale, residual_gate;
} head_weights;

/* ---- workspace (one allocation, planned at load; shapes for the limits) ------------------- */

typedef struct head_workspace {
    float *memory;        /* (T, W)  M = N W_mem^T */
    float *memory_norm;   /* (T, W)  LN_m(M) of the current routing layer */
    float *memory_kv;     /* (T, 2W) keys | values over the memory */
    float *rows;          /* (R, D)  gathered rows: LayerNorm(hidden) or staged lm_head rows */
    float *global;        /* (D)     g = LayerNorm(hidden)[T-1] */
    float *question_vec;  /* (Q, D)  qv */
    float *anchor;        /* (Q, D)  qv + g (the prior normalises it inside row_dot) */
    float *option_ctx;    /* (C, D)  span means of N, one option chunk */
    float *option_lex;    /* (C, D)  lexical means, one option chunk */
    float *options;       /* (O, W)  routed option vectors x */
    float *options_a;     /* (O, W)  normalised x, then attention output */
    float *options_q;     /* (O, W)  attention queries */
    float *prior;         /* (O)     prior logit term, then the logits */
    float *question_opt;  /* (Q, W)  W_optq qv */
    float *fields;        /* (Q, W)  f */
    float *fields_a;      /* (Q, W)  normalised f, attention output */
    float *fields_qkv;    /* (Q, 3W) self-attention q | k | v */
    float *base_fields;   /* (Q, W)  W_q qv */
    float *summaries;     /* (Q, W)  option summaries */
    float *global_vec;    /* (W)     W_glob g */
    float *ff_hidden;     /* (R, max(F, W)) feed-forward / scorer hidden rows */
    float *features;      /* (R, 4W) scorer input rows */
    float *residual;      /* (R)     scorer output */
    float *scores;        /* (O)     option . field scores, then scaled cosines + residual */
    float *weights;       /* (O)     their per-question softmax, then the probabilities */
    clef_segment *segs;   /* (S)     segments of one segment_sum call, S = max(C, Q) */
    int32_t *row_ids;     /* (R)     token positions of the gathered hidden rows */
    int32_t *opt_question;/* (O)     question of each option */
    int32_t *q_type;      /* (Q)     type of each question (row of type_embedding) */
    int32_t *q_offsets;   /* (Q + 1) first option of each question, cu_seqlens style */
    void *attn_scratch;   /* attention workspace */
} head_workspace;

/* Host staging of what the forward uploads: index arrays built from the record and the
 * lm_head rows the caller's reader writes (host memory, never read by an op). */
typedef struct head_staging {
    clef_segment *segs;   /* (S) */
    int32_t *row_ids;     /* (R) */
    float *lm_rows;       /* (R, D) */
    int32_t *opt_question;/* (O) */
    int32_t *q_type;      /* (Q) */
    int32_t *q_offsets;   /* (Q + 1) */
} head_staging;

struct clef_joint_head {
    clef_backend *be;                /* runs the forward: the weights' backend or a fork */
    int shares_weights;              /* 1: a fork (clef_joint_head_fork); w belongs to another */
    clef_head_config cfg;
    clef_head_limits limits;
    head_weights w;
    head_workspace ws;
    head_staging host;
    clef_buffer_set buffers;         /* every backend allocation, released together */
    size_t weight_bytes, workspace_bytes;
};

/* ---- loading ------------------------------------------------------------------------------ */

/* The shared weight loader (weight_loader.h) over the head's tensors "head.<name>"; shapes
 * come from joint_head_config.json. Matrices keep their stored format, norms, biases, the type
 * embedding and the three scalars become fp32. */
typedef struct head_loader {
    clef_joint_head *head;
    clef_weight_loader wl;
} head_loader;

static void *head_alloc(clef_joint_head *h, size_t bytes) {
    return clef_buffer_set_alloc(&h->buffers, bytes);
}

static int load_matrix(head_loader *L, const char *name, int64_t rows, int64_t cols,
                       clef_matrix *m) {
    return clef_weight_load_matrix(&L->wl, name, rows, cols, m);
}

/* A host fp32 copy of a small tensor (n_dims 0 for a scalar). */
static int read_f32(head_loader *L, const char *name, int n_dims, const int64_t *dims,
                    float *dst) {
    return clef_weight_read_host_f32(&L->wl, name, dims, n_dims, dst);
}

/* A vector of n fp32 values in backend memory. */
static int load_vector(head_loader *L, const char *name, int64_t n, float **out) {
    return clef_weight_load_vector(&L->wl, name, &n, 1, out);
}

static int load_norm(head_loader *L, const char *prefix, int64_t dim, head_norm *n) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int st = load_vector(L, name, dim, &n->w);
    if (st)
        return st;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return load_vector(L, name, dim, &n->b);
}

static int load_linear(head_loader *L, const char *prefix, int64_t out, int64_t in,
                       int with_bias, head_linear *lin) {
    char name[192]; /* prefix (< 160, see load_attention) + ".weight" */
    snprintf(name, sizeof name, "%s.weight", prefix);
    int st = load_matrix(L, name, out, in, &lin->w);
    if (st || !with_bias)
        return st;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return load_vector(L, name, out, &lin->b);
}

static int load_attention(head_loader *L, const char *prefix, int64_t width,
                          head_attention *a) {
    char name[160];
    float *packed_bias = NULL;
    /* torch packs q, k, v as consecutive row blocks of in_proj_weight: q (width rows) and
     * kv (2 width rows) are used as two matrices */
    clef_matrix qkv[2];
    const int64_t part_rows[2] = {width, 2 * width};
    snprintf(name, sizeof name, "%s.in_proj_weight", prefix);
    int st = clef_weight_load_matrix_parts(&L->wl, name, 3 * width, width, 2, part_rows, qkv);
    if (st)
        return st;
    snprintf(name, sizeof name, "%s.in_proj_bias", prefix);
    if ((st = load_vector(L, name, 3 * width, &packed_bias)))
        return st;
    a->q = qkv[0];
    a->kv = qkv[1];
    a->q_bias = packed_bias;
    a->kv_bias = packed_bias + width;
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    return load_linear(L, name, width, width, 1, &a->out);
}

static int load_weights(head_loader *L) {
    clef_joint_head *h = L->head;
    const clef_head_config *c = &h->cfg;
    head_weights *w = &h->w;
    const int64_t D = c->hidden_size, W = c->width, F = c->feedforward;
    char p[128];
    int st;
    if ((st = load_norm(L, "hidden_norm", D, &w->hidden_norm)) ||
        (st = load_matrix(L, "memory_projection.weight", W, D, &w->memory_projection)) ||
        (st = load_matrix(L, "question_projection.weight", W, D, &w->question_projection)) ||
        (st = load_matrix(L, "option_question_projection.weight", W, D,
                          &w->option_question_projection)) ||
        (st = load_matrix(L, "global_projection.weight", W, D, &w->global_projection)) ||
        (st = load_matrix(L, "option_context_projection.weight", W, D,
                          &w->option_context_projection)) ||
        (st = load_matrix(L, "option_lexical_projection.weight", W, D,
                          &w->option_lexical_projection)))
        return st;
    int64_t type_dims[2] = {3, W};
    if ((st = clef_weight_load_vector(&L->wl, "type_embedding.weight", type_dims, 2,
                                      &w->type_embedding)))
        return st;
    for (int64_t i = 0; i < c->routing_layers; i++) {
        head_routing_layer *r = &w->routing[i];
#define RP(s) (snprintf(p, sizeof p, "evidence_layers.%lld." s, (long long)i), p)
        if ((st = load_norm(L, RP("query_norm"), W, &r->query_norm)) ||
            (st = load_norm(L, RP("memory_norm"), W, &r->memory_norm)) ||
            (st = load_attention(L, RP("attention"), W, &r->attention)) ||
            (st = load_norm(L, RP("feedforward_norm"), W, &r->feedforward_norm)) ||
            (st = load_linear(L, RP("feedforward.0"), F, W, 1, &r->ff_in)) ||
            (st = load_linear(L, RP("feedforward.3"), W, F, 1, &r->ff_out)))
            return st;
#undef RP
    }
    if ((st = load_norm(L, "option_summary_norm", W, &w->option_summary_norm)))
        return st;
    for (int64_t i = 0; i < c->layers; i++) {
        head_decoder_layer *d = &w->decoder[i];
#define DP(s) (snprintf(p, sizeof p, "layers.%lld." s, (long long)i), p)
        if ((st = load_norm(L, DP("norm1"), W, &d->norm1)) ||
            (st = load_norm(L, DP("norm2"), W, &d->norm2)) ||
            (st = load_norm(L, DP("norm3"), W, &d->norm3)) ||
            (st = load_attention(L, DP("self_attn"), W, &d->self_attn)) ||
            (st = load_attention(L, DP("multihead_attn"), W, &d->cross_attn)) ||
            (st = load_linear(L, DP("linear1"), F, W, 1, &d->ff_in)) ||
            (st = load_linear(L, DP("linear2"), W, F, 1, &d->ff_out)))
            return st;
#undef DP
    }
    if ((st = load_norm(L, "field_norm", W, &w->field_norm)) ||
        (st = load_norm(L, "option_norm", W, &w->option_norm)) ||
        (st = load_linear(L, "residual_scorer.0", W, 4 * W, 1, &w->scorer_in)) ||
        (st = load_linear(L, "residual_scorer.3", 1, W, 1, &w->scorer_out)) ||
        (st = read_f32(L, "prior_logit_scale", 0, NULL, &w->prior_logit_scale)) ||
        (st = read_f32(L, "joint_logit_scale", 0, NULL, &w->joint_logit_scale)) ||
        (st = read_f32(L, "residual_gate", 0, NULL, &w->residual_gate)))
        return st;
    return CLEF_OK;
}

static int check_config(const clef_head_config *c, const clef_head_limits *lim) {
    if (c->hidden_size <= 0 || c->width <= 0 || c->heads <= 0 || c->feedforward <= 0 ||
        c->routing_layers < 0 || c->layers < 0 || c->routing_layers > 64 || c->layers > 64)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "joint_head_config.json: hidden_size %lld, width %lld, heads %lld, "
                         "feedforward %lld, routing_layers %lld, layers %lld out of range",
                         (long long)c->hidden_size, (long long)c->width, (long long)c->heads,
                         (long long)c->feedforward, (long long)c->routing_layers,
                         (long long)c->layers);
    if (c->width % c->heads)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "joint_head_config.json: width %lld is not divisible by heads %lld",
                         (long long)c->width, (long long)c->heads);
    if (lim && (lim->max_tokens <= 0 || lim->max_questions <= 0 || lim->max_options <= 0))
        return clef_fail(CLEF_ERR_INVALID_ARG, "joint head: limits must be positive (tokens "
                         "%lld, questions %lld, options %lld)", (long long)lim->max_tokens,
                         (long long)lim->max_questions, (long long)lim->max_options);
    return CLEF_OK;
}

/* Scratch of the attentions the head runs: options and fields over the memory, fields over
 * themselves. */
static size_t attention_scratch_bytes(clef_joint_head *h) {
    const int64_t W = h->cfg.width, H = h->cfg.heads;
    const int64_t T = h->limits.max_tokens, O = h->limits.max_options,
                  Q = h->limits.max_questions;
    int64_t shapes[3][2] = {{O, T}, {Q, T}, {Q, Q}};
    size_t most = 0;
    for (int i = 0; i < 3; i++) {
        clef_attention_args a = {.n_q = shapes[i][0], .n_kv = shapes[i][1], .n_q_heads = H,
                                 .n_kv_heads = H, .head_dim = W / H, .ldq = W,
                                 .q_head_stride = W / H, .ldk = 2 * W, .k_head_stride = W / H,
                                 .ldv = 2 * W, .v_head_stride = W / H, .ldo = W,
                                 .o_head_stride = W / H, .scale = 1.0f};
        size_t s = clef_attention_workspace_size(h->be, &a);
        if (s > most)
            most = s;
    }
    return most;
}

/* Entries of the segment array: one call reduces at most one option chunk's spans or one
 * record's questions. */
static int64_t segment_capacity(const clef_joint_head *h) {
    return h->limits.max_questions > CLEF_HEAD_OPTION_CHUNK ? h->limits.max_questions
                                                            : CLEF_HEAD_OPTION_CHUNK;
}

static int plan_staging(clef_joint_head *h) {
    const int64_t D = h->cfg.hidden_size, R = CLEF_HEAD_FF_CHUNK, O = h->limits.max_options,
                  Q = h->limits.max_questions;
    head_staging *s = &h->host;
    s->segs = calloc((size_t)segment_capacity(h), sizeof *s->segs);
    s->row_ids = calloc((size_t)R, sizeof *s->row_ids);
    s->lm_rows = calloc((size_t)(R * D), sizeof *s->lm_rows);
    s->opt_question = calloc((size_t)O, sizeof *s->opt_question);
    s->q_type = calloc((size_t)Q, sizeof *s->q_type);
    s->q_offsets = calloc((size_t)Q + 1, sizeof *s->q_offsets);
    if (!s->segs || !s->row_ids || !s->lm_rows || !s->opt_question || !s->q_type ||
        !s->q_offsets)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory for the host staging "
                         "buffers (max_options %lld)", (long long)O);
    return CLEF_OK;
}

static void free_staging(head_staging *s) {
    free(s->segs);
    free(s->row_ids);
    free(s->lm_rows);
    free(s->opt_question);
    free(s->q_type);
    free(s->q_offsets);
}

static int plan_workspace(clef_joint_head *h) {
    const int64_t D = h->cfg.hidden_size, W = h->cfg.width, F = h->cfg.feedforward;
    const int64_t T = h->limits.max_tokens, O = h->limits.max_options,
                  Q = h->limits.max_questions, C = CLEF_HEAD_OPTION_CHUNK,
                  R = CLEF_HEAD_FF_CHUNK, S = segment_capacity(h);
    head_workspace *ws = &h->ws;
    float *segs_space, *row_ids_space, *opt_question_space, *q_type_space, *q_offsets_space;
    /* sizes in 4-byte elements: every array is fp32 or int32 (a clef_segment is 5 int32) */
    struct {
        float **dst;
        int64_t n;
    } plan[] = {
        {&ws->memory, T * W},       {&ws->memory_norm, T * W},   {&ws->memory_kv, 2 * T * W},
        {&ws->rows, R * D},         {&ws->global, D},
        {&ws->question_vec, Q * D}, {&ws->anchor, Q * D},        {&ws->option_ctx, C * D},
        {&ws->option_lex, C * D},   {&ws->options, O * W},
        {&ws->options_a, O * W},    {&ws->options_q, O * W},     {&ws->prior, O},
        {&ws->question_opt, Q * W}, {&ws->fields, Q * W},        {&ws->fields_a, Q * W},
        {&ws->fields_qkv, 3 * Q * W}, {&ws->base_fields, Q * W}, {&ws->summaries, Q * W},
        {&ws->global_vec, W},       {&ws->ff_hidden, R * (F > W ? F : W)},
        {&ws->features, R * 4 * W}, {&ws->residual, R},          {&ws->scores, O},
        {&ws->weights, O},
        {&segs_space, S * (int64_t)(sizeof(clef_segment) / sizeof(int32_t))},
        {&row_ids_space, R},        {&opt_question_space, O},    {&q_type_space, Q},
        {&q_offsets_space, Q + 1},
    };
    _Static_assert(sizeof(clef_segment) == 5 * sizeof(int32_t), "clef_segment is 5 int32");
    size_t n_plan = sizeof plan / sizeof plan[0];
    /* one allocation, each array 64-byte aligned inside it */
    size_t total = 0;
    for (size_t i = 0; i < n_plan; i++)
        total += ((size_t)plan[i].n * sizeof(float) + 63) & ~(size_t)63;
    size_t scratch = (attention_scratch_bytes(h) + 63) & ~(size_t)63;
    char *base = head_alloc(h, total + scratch);
    if (!base)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY,
                         "joint head: no memory for a %zu-byte workspace (max_tokens %lld, "
                         "max_options %lld)", total + scratch, (long long)T, (long long)O);
    size_t off = 0; /* pointer arithmetic only: the workspace is backend memory */
    for (size_t i = 0; i < n_plan; i++) {
        *plan[i].dst = (float *)(void *)(base + off);
        off += ((size_t)plan[i].n * sizeof(float) + 63) & ~(size_t)63;
    }
    ws->attn_scratch = base + off;
    ws->segs = (clef_segment *)(void *)segs_space;
    ws->row_ids = (int32_t *)(void *)row_ids_space;
    ws->opt_question = (int32_t *)(void *)opt_question_space;
    ws->q_type = (int32_t *)(void *)q_type_space;
    ws->q_offsets = (int32_t *)(void *)q_offsets_space;
    h->workspace_bytes = total + scratch;
    return plan_staging(h);
}

int clef_joint_head_load(clef_backend *be, const clef_head_config *cfg,
                         const clef_tensor_source *src, const clef_head_limits *limits,
                         clef_joint_head **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_joint_head_load: out is NULL");
    *out = NULL;
    if (!be || !cfg || !src)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_joint_head_load: NULL argument");
    int st = check_config(cfg, limits);
    if (st)
        return st;
    clef_joint_head *h = calloc(1, sizeof *h);
    if (!h)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory");
    h->be = be;
    h->buffers = clef_buffer_set_init(be);
    h->cfg = *cfg;
    if (limits)
        h->limits = *limits;
    h->w.routing = calloc((size_t)cfg->routing_layers + 1, sizeof *h->w.routing);
    h->w.decoder = calloc((size_t)cfg->layers + 1, sizeof *h->w.decoder);
    if (!h->w.routing || !h->w.decoder) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory");
        goto err;
    }
    head_loader L = {.head = h, .wl = clef_weight_loader_init(be, src, &h->buffers, "joint head",
                                                              "head.", "joint_head_config.json")};
    st = load_weights(&L);
    h->weight_bytes = L.wl.bytes;
    clef_weight_loader_free(&L.wl);
    if (st || (limits && (st = plan_workspace(h))))
        goto err;
    *out = h;
    return CLEF_OK;
err:
    clef_joint_head_free(h);
    return st;
}

int clef_joint_head_fork(const clef_joint_head *weights, clef_backend *be,
                         const clef_head_limits *limits, clef_joint_head **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_joint_head_fork: out is NULL");
    *out = NULL;
    if (!weights || !be || !limits)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_joint_head_fork: NULL argument");
    int st = check_config(&weights->cfg, limits);
    if (st)
        return st;
    clef_joint_head *h = calloc(1, sizeof *h);
    if (!h)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory");
    h->be = be;
    h->shares_weights = 1;
    h->buffers = clef_buffer_set_init(be);
    h->cfg = weights->cfg;
    h->limits = *limits;
    h->w = weights->w; /* pointers to the weights' buffers and layer arrays, never written */
    if ((st = plan_workspace(h))) {
        clef_joint_head_free(h);
        return st;
    }
    *out = h;
    return CLEF_OK;
}

void clef_joint_head_free(clef_joint_head *h) {
    if (!h)
        return;
    clef_buffer_set_release(&h->buffers);
    free_staging(&h->host);
    if (!h->shares_weights) {
        free(h->w.routing);
        free(h->w.decoder);
    }
    free(h);
}

size_t clef_joint_head_weight_bytes(const clef_joint_head *h) { return h ? h->weight_bytes : 0; }
size_t clef_joint_head_workspace_bytes(const clef_joint_head *h) {
    return h ? h->workspace_bytes : 0;
}

/* ---- forward helpers ---------------------------------------------------------------------- */

static void layernorm(clef_joint_head *h, int64_t rows, int64_t dim, const float *x,
                      int64_t ldx, const head_norm *n, float *y, int64_t ldy) {
    clef_layernorm(h->be, rows, dim, x, ldx, n->w, n->b, HEAD_LN_EPS, y, ldy);
}

/* y (+)= x W^T + b over rows (accumulate: add into y). */
static void linear(clef_joint_head *h, int64_t rows, const float *x, int64_t ldx,
                   const head_linear *lin, float *y, int64_t ldy, int accumulate) {
    clef_matmul(h->be, rows, x, ldx, &lin->w, lin->b, y, ldy, accumulate);
}

/* y = softmax(q K^T / sqrt(hd)) V per head, q [n_q, W] (ld ldq), k and v [n_kv] rows at
 * k, v with leading dimension ldkv; y [n_q, W]. */
static void attention(clef_joint_head *h, int64_t n_q, const float *q, int64_t ldq,
                      int64_t n_kv, const float *k, const float *v, int64_t ldkv, float *y) {
    const int64_t W = h->cfg.width, H = h->cfg.heads, hd = W / H;
    clef_attention_args a = {
        .n_q = n_q, .n_kv = n_kv, .n_q_heads = H, .n_kv_heads = H, .head_dim = hd,
        .q = q, .ldq = ldq, .q_head_stride = hd,
        .k = k, .ldk = ldkv, .k_head_stride = hd,
        .v = v, .ldv = ldkv, .v_head_stride = hd,
        .o = y, .ldo = W, .o_head_stride = hd,
        .scale = (float)(1.0 / sqrt((double)hd)), /* scaled_dot_product_attention's default */
        .causal = 0,
    };
    clef_attention(h->be, &a, h->ws.attn_scratch);
}

/* x += out(attention(q(xn), kv(mem))) — nn.MultiheadAttention(xn, mem, mem) added to x.
 * xn [n, W] holds the normalised queries and is reused for the attention output. */
static void cross_attention(clef_joint_head *h, const head_attention *a, int64_t n, float *xn,
                            float *q_buf, float *x, int64_t n_mem, const float *mem) {
    const int64_t W = h->cfg.width;
    clef_matmul(h->be, n, xn, W, &a->q, a->q_bias, q_buf, W, 0);
    clef_matmul(h->be, n_mem, mem, W, &a->kv, a->kv_bias, h->ws.memory_kv, 2 * W, 0);
    attention(h, n, q_buf, W, n_mem, h->ws.memory_kv, h->ws.memory_kv + W, 2 * W, xn);
    linear(h, n, xn, W, &a->out, x, W, 1);
}

/* x += ff_out(gelu(ff_in(LN(x)))) over n rows, CLEF_HEAD_FF_CHUNK rows at a time; xn [n, W]
 * is scratch for LN(x). */
static void feedforward(clef_joint_head *h, const head_norm *norm, const head_linear *ff_in,
                        const head_linear *ff_out, int64_t n, float *x, float *xn) {
    const int64_t W = h->cfg.width, F = h->cfg.feedforward;
    layernorm(h, n, W, x, W, norm, xn, W);
    for (int64_t r0 = 0; r0 < n; r0 += CLEF_HEAD_FF_CHUNK) {
        int64_t rows = n - r0 < CLEF_HEAD_FF_CHUNK ? n - r0 : CLEF_HEAD_FF_CHUNK;
        linear(h, rows, xn + r0 * W, W, ff_in, h->ws.ff_hidden, F, 0);
        clef_unary(h->be, CLEF_UNARY_GELU_ERF, rows * F, h->ws.ff_hidden, h->ws.ff_hidden);
        linear(h, rows, h->ws.ff_hidden, F, ff_out, x + r0 * W, W, 1);
    }
}

/* Where the rows of a span reduction come from. */
typedef enum span_rows {
    SPAN_ROWS_HIDDEN,  /* LayerNorm_hidden(hidden[t]) for the tokens t of the span */
    SPAN_ROWS_LEXICAL, /* lm_head[ids[t]] for the tokens t of the span (caller's reader) */
} span_rows;

typedef struct span_source {
    span_rows kind;
    const float *hidden;              /* SPAN_ROWS_HIDDEN: [T, D] backend memory */
    int64_t ld_hidden, n_tokens;
    const int32_t *ids;               /* SPAN_ROWS_LEXICAL: host token ids */
    const clef_lm_row_reader *lm;
} span_source;

/* Bring the k gathered rows into ws->rows (backend) and reduce the n_seg staged segments into
 * dst: hidden rows are gathered by position (get_rows on the hidden states) and normalised in
 * place; lm_head rows were written by the reader into host staging and are uploaded. */
static int span_flush(clef_joint_head *h, const span_source *src, int64_t k, int64_t n_seg,
                      float *dst) {
    const int64_t D = h->cfg.hidden_size;
    clef_backend *be = h->be;
    int st;
    if (src->kind == SPAN_ROWS_HIDDEN) {
        if ((st = clef_backend_write(be, h->ws.row_ids, h->host.row_ids,
                                     (size_t)k * sizeof(int32_t))))
            return st;
        const clef_matrix states = {.type = CLEF_WTYPE_F32, .rows = src->n_tokens, .cols = D,
                                    .ld = src->ld_hidden, .data = src->hidden};
        clef_get_rows(be, &states, k, h->ws.row_ids, h->ws.rows, D);
        layernorm(h, k, D, h->ws.rows, D, &h->w.hidden_norm, h->ws.rows, D);
    } else if ((st = clef_backend_write(be, h->ws.rows, h->host.lm_rows,
                                        (size_t)(k * D) * sizeof(float)))) {
        return st;
    }
    if ((st = clef_backend_write(be, h->ws.segs, h->host.segs,
                                 (size_t)n_seg * sizeof(clef_segment))))
        return st;
    clef_segment_sum(be, n_seg, D, h->ws.segs, h->ws.rows, D, NULL, dst, D);
    return CLEF_OK;
}

/* dst[i, :D] = mean over the tokens of spans[i] of the rows src gives, i < n <=
 * CLEF_HEAD_OPTION_CHUNK. The rows of all n spans are gathered CLEF_HEAD_FF_CHUNK at a time
 * and reduced by one segment_sum per gather; a span cut by a gather boundary continues in the
 * next one (accumulate = 1, divisor its whole length). So a record with many short spans
 * costs few op calls, a long span no extra memory, and no [T, D] array ever exists. */
static int span_means(clef_joint_head *h, const span_source *src, const clef_span *spans,
                      int64_t n, float *dst) {
    const int64_t D = h->cfg.hidden_size, R = CLEF_HEAD_FF_CHUNK;
    int64_t k = 0, n_seg = 0;
    int st;
    for (int64_t i = 0; i < n; i++) {
        const int32_t len = spans[i].end - spans[i].begin;
        int first_piece = 1;
        for (int32_t t = spans[i].begin; t < spans[i].end;) {
            int64_t take = spans[i].end - t < R - k ? spans[i].end - t : R - k;
            h->host.segs[n_seg++] = (clef_segment){.dst = (int32_t)i, .begin = (int32_t)k,
                                                   .end = (int32_t)(k + take), .count = len,
                                                   .accumulate = !first_piece};
            for (int64_t j = 0; j < take; j++, k++, t++) {
                if (src->kind == SPAN_ROWS_HIDDEN)
                    h->host.row_ids[k] = t;
                else if ((st = src->lm->read_row(src->lm->ctx, src->ids[t],
                                                 h->host.lm_rows + k * D)))
                    return st;
            }
            first_piece = 0;
            if (k == R) {
                if ((st = span_flush(h, src, k, n_seg, dst)))
                    return st;
                k = n_seg = 0;
            }
        }
    }
    return k ? span_flush(h, src, k, n_seg, dst) : CLEF_OK;
}

/* Stage the record's per-option and per-question index arrays (question of each option,
 * question types, cu_seqlens-style option offsets) in backend memory. */
static int stage_record(clef_joint_head *h, const clef_encoded_record *rec, int64_t O) {
    head_staging *s = &h->host;
    const int64_t Q = rec->n_questions;
    int32_t o = 0;
    for (int32_t q = 0; q < Q; q++) {
        s->q_offsets[q] = o;
        s->q_type[q] = (int32_t)rec->questions[q].type;
        for (int32_t i = 0; i < rec->questions[q].n_options; i++)
            s->opt_question[o++] = q;
    }
    s->q_offsets[Q] = o;
    clef_backend *be = h->be;
    int st;
    if ((st = clef_backend_write(be, h->ws.opt_question, s->opt_question,
                                 (size_t)O * sizeof(int32_t))) ||
        (st = clef_backend_write(be, h->ws.q_type, s->q_type, (size_t)Q * sizeof(int32_t))) ||
        (st = clef_backend_write(be, h->ws.q_offsets, s->q_offsets,
                                 (size_t)(Q + 1) * sizeof(int32_t))))
        return st;
    return CLEF_OK;
}

static int check_record(const clef_joint_head *h, const clef_encoded_record *rec,
                        const clef_lm_row_reader *lm, int64_t *n_options_out) {
    const int64_t T = rec->n_tokens;
    if (T <= 0 || T > h->limits.max_tokens)
        return clef_fail(T <= 0 ? CLEF_ERR_REQUEST_INVALID : CLEF_ERR_REQUEST_TOO_LONG,
                         "joint head: record has %lld tokens, the model is planned for 1..%lld",
                         (long long)T, (long long)h->limits.max_tokens);
    if (rec->n_questions <= 0 || rec->n_questions > h->limits.max_questions)
        return clef_fail(rec->n_questions <= 0 ? CLEF_ERR_REQUEST_INVALID
                                               : CLEF_ERR_REQUEST_TOO_LONG,
                         "joint head: record has %d questions, the model is planned for 1..%lld",
                         rec->n_questions, (long long)h->limits.max_questions);
    int64_t n_options = 0;
    for (int32_t q = 0; q < rec->n_questions; q++) {
        const clef_encoded_question *Q = &rec->questions[q];
        if ((int)Q->type < 0 || Q->type > CLEF_QUESTION_SCORE)
            return clef_fail(CLEF_ERR_REQUEST_INVALID, "joint head: question %d has type %d",
                             q, (int)Q->type);
        if (Q->instruction.begin < 0 || Q->instruction.begin >= Q->instruction.end ||
            Q->instruction.end > T)
            return clef_fail(CLEF_ERR_REQUEST_INVALID,
                             "joint head: question %d instruction span [%d, %d) is not inside "
                             "[0, %lld)", q, Q->instruction.begin, Q->instruction.end,
                             (long long)T);
        if (Q->n_options <= 0)
            return clef_fail(CLEF_ERR_REQUEST_INVALID, "joint head: question %d has no options",
                             q);
        for (int32_t o = 0; o < Q->n_options; o++) {
            clef_span s = Q->options[o];
            if (s.begin < 0 || s.begin >= s.end || s.end > T)
                return clef_fail(CLEF_ERR_REQUEST_INVALID,
                                 "joint head: question %d option %d span [%d, %d) is not "
                                 "inside [0, %lld)", q, o, s.begin, s.end, (long long)T);
            for (int32_t t = s.begin; t < s.end; t++)
                if (rec->ids[t] < 0 || rec->ids[t] >= lm->vocab_size)
                    return clef_fail(CLEF_ERR_REQUEST_INVALID,
                                     "joint head: token %d of question %d option %d has id %d, "
                                     "outside the vocabulary [0, %lld)", t, q, o, rec->ids[t],
                                     (long long)lm->vocab_size);
        }
        n_options += Q->n_options;
    }
    if (n_options > h->limits.max_options)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                         "joint head: record has %lld options in all, the model is planned for "
                         "at most %lld", (long long)n_options, (long long)h->limits.max_options);
    *n_options_out = n_options;
    return CLEF_OK;
}

/* ---- the forward -------------------------------------------------------------------------- */

int clef_joint_head_forward(clef_joint_head *h, const float *hidden, int64_t ld_hidden,
                            const clef_encoded_record *rec, const clef_lm_row_reader *lm,
                            float *logits, float *probs) {
    if (!h || !hidden || !rec || !lm || !lm->read_row)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_joint_head_forward: NULL argument");
    if (!h->workspace_bytes)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_joint_head_forward: the head was loaded "
                         "without limits (weights only): run a clef_joint_head_fork of it");
    int64_t O = 0;
    int st = check_record(h, rec, lm, &O);
    if (st)
        return st;
    clef_backend *be = h->be;
    const head_weights *w = &h->w;
    const head_workspace *ws = &h->ws;
    const int64_t D = h->cfg.hidden_size, W = h->cfg.width, T = rec->n_tokens,
                  Q = rec->n_questions;
    if ((st = stage_record(h, rec, O)))
        return st;

    /* 1. normalized_hidden = self.hidden_norm(hidden_states);
     *    memory = self.memory_projection(sequence_hidden), R rows at a time;
     *    global_vector = sequence_hidden[-1] */
    for (int64_t r0 = 0; r0 < T; r0 += CLEF_HEAD_FF_CHUNK) {
        int64_t rows = T - r0 < CLEF_HEAD_FF_CHUNK ? T - r0 : CLEF_HEAD_FF_CHUNK;
        layernorm(h, rows, D, hidden + r0 * ld_hidden, ld_hidden, &w->hidden_norm, ws->rows, D);
        clef_matmul(be, rows, ws->rows, D, &w->memory_projection, NULL, ws->memory + r0 * W, W,
                    0);
    }
    layernorm(h, 1, D, hidden + (T - 1) * ld_hidden, ld_hidden, &w->hidden_norm, ws->global, D);
    const float *global = ws->global;

    /* 2. question_vectors = mean over each instruction span; the prior's anchor
     *    question_vector + global_vector (normalised where the prior uses it) */
    const span_source hidden_rows = {.kind = SPAN_ROWS_HIDDEN, .hidden = hidden,
                                     .ld_hidden = ld_hidden, .n_tokens = T};
    const span_source lexical_rows = {.kind = SPAN_ROWS_LEXICAL, .ids = rec->ids, .lm = lm};
    clef_span spans[CLEF_HEAD_OPTION_CHUNK];
    for (int64_t q0 = 0; q0 < Q; q0 += CLEF_HEAD_OPTION_CHUNK) {
        int64_t n = Q - q0 < CLEF_HEAD_OPTION_CHUNK ? Q - q0 : CLEF_HEAD_OPTION_CHUNK;
        for (int64_t i = 0; i < n; i++)
            spans[i] = rec->questions[q0 + i].instruction;
        if ((st = span_means(h, &hidden_rows, spans, n, ws->question_vec + q0 * D)))
            return st;
    }
    clef_add_rows(be, Q, D, ws->question_vec, D, global, D, NULL, ws->anchor, D);
    /* option_question_projection(question_vectors[q]) once per question */
    clef_matmul(be, Q, ws->question_vec, D, &w->option_question_projection, NULL,
                ws->question_opt, W, 0);

    /* 3. per option, in chunks: context = mean of N over the span, lexical = mean of the
     *    lm_head rows of its token ids; query = W_ctx context + W_lex lexical + W_optq qv;
     *    prior = prior_scale * normalize(lexical) . normalize(qv + g) */
    const float prior_scale = expf(fminf(w->prior_logit_scale, (float)log(100.0)));
    for (int64_t q = 0, o0 = 0, chunk_n = 0; q < Q; q++) {
        for (int32_t o = 0; o < rec->questions[q].n_options; o++) {
            spans[chunk_n++] = rec->questions[q].options[o];
            if (chunk_n < CLEF_HEAD_OPTION_CHUNK && o0 + chunk_n < O)
                continue;
            if ((st = span_means(h, &hidden_rows, spans, chunk_n, ws->option_ctx)) ||
                (st = span_means(h, &lexical_rows, spans, chunk_n, ws->option_lex)))
                return st;
            clef_row_dot(be, chunk_n, D, ws->option_lex, D, NULL, ws->anchor, D,
                         ws->opt_question + o0, prior_scale, (float)HEAD_NORMALIZE_EPS,
                         ws->prior + o0);
            float *x = ws->options + o0 * W;
            clef_matmul(be, chunk_n, ws->option_ctx, D, &w->option_context_projection, NULL, x,
                        W, 0);
            clef_matmul(be, chunk_n, ws->option_lex, D, &w->option_lexical_projection, NULL, x,
                        W, 1);
            /* + option_question_projection(qv) */
            clef_add_rows(be, chunk_n, W, x, W, ws->question_opt, W, ws->opt_question + o0, x,
                          W);
            o0 += chunk_n;
            chunk_n = 0;
        }
    }

    /* 4. evidence routing over the memory:
     *    x = x + attention(query_norm(x), memory_norm(M), memory_norm(M));
     *    x = x + feedforward(feedforward_norm(x)) */
    for (int64_t i = 0; i < h->cfg.routing_layers; i++) {
        const head_routing_layer *r = &w->routing[i];
        layernorm(h, O, W, ws->options, W, &r->query_norm, ws->options_a, W);
        layernorm(h, T, W, ws->memory, W, &r->memory_norm, ws->memory_norm, W);
        cross_attention(h, &r->attention, O, ws->options_a, ws->options_q, ws->options, T,
                        ws->memory_norm);
        feedforward(h, &r->feedforward_norm, &r->ff_in, &r->ff_out, O, ws->options,
                    ws->options_a);
    }

    /* 5. fields = question_projection(qv) + option_summary_norm(sum_o softmax_o(o . base /
     *    sqrt(W)) o) + global_projection(g) + type_embedding(type) */
    clef_matmul(be, Q, ws->question_vec, D, &w->question_projection, NULL, ws->base_fields, W,
                0);
    clef_matmul(be, 1, global, D, &w->global_projection, NULL, ws->global_vec, W, 0);
    clef_row_dot(be, O, W, ws->options, W, NULL, ws->base_fields, W, ws->opt_question,
                 (float)(1.0 / sqrt((double)W)), 0.0f, ws->scores);
    clef_segment_softmax(be, Q, ws->q_offsets, ws->scores, ws->weights);
    for (int32_t q = 0, o0 = 0; q < Q; o0 += rec->questions[q].n_options, q++)
        h->host.segs[q] = (clef_segment){.dst = q, .begin = o0,
                                         .end = o0 + rec->questions[q].n_options,
                                         .count = rec->questions[q].n_options};
    if ((st = clef_backend_write(be, ws->segs, h->host.segs, (size_t)Q * sizeof(clef_segment))))
        return st;
    clef_segment_sum(be, Q, W, ws->segs, ws->options, W, ws->weights, ws->summaries, W);
    layernorm(h, Q, W, ws->summaries, W, &w->option_summary_norm, ws->summaries, W);
    clef_add(be, Q * W, ws->base_fields, ws->summaries, ws->fields);
    clef_add_rows(be, Q, W, ws->fields, W, ws->global_vec, W, NULL, ws->fields, W);
    clef_add_rows(be, Q, W, ws->fields, W, w->type_embedding, W, ws->q_type, ws->fields, W);

    /* 6. decoder layers (pre-norm): f += self_attn(norm1 f); f += multihead_attn(norm2 f, M);
     *    f += linear2(gelu(linear1(norm3 f))); then fields = field_norm(f) */
    for (int64_t i = 0; i < h->cfg.layers; i++) {
        const head_decoder_layer *d = &w->decoder[i];
        layernorm(h, Q, W, ws->fields, W, &d->norm1, ws->fields_a, W);
        clef_matmul(be, Q, ws->fields_a, W, &d->self_attn.q, d->self_attn.q_bias,
                    ws->fields_qkv, 3 * W, 0);
        clef_matmul(be, Q, ws->fields_a, W, &d->self_attn.kv, d->self_attn.kv_bias,
                    ws->fields_qkv + W, 3 * W, 0);
        attention(h, Q, ws->fields_qkv, 3 * W, Q, ws->fields_qkv + W, ws->fields_qkv + 2 * W,
                  3 * W, ws->fields_a);
        linear(h, Q, ws->fields_a, W, &d->self_attn.out, ws->fields, W, 1);
        layernorm(h, Q, W, ws->fields, W, &d->norm2, ws->fields_a, W);
        cross_attention(h, &d->cross_attn, Q, ws->fields_a, ws->fields_qkv, ws->fields, T,
                        ws->memory);
        feedforward(h, &d->norm3, &d->ff_in, &d->ff_out, Q, ws->fields, ws->fields_a);
    }
    layernorm(h, Q, W, ws->fields, W, &w->field_norm, ws->fields_a, W);
    const float *fields = ws->fields_a;

    /* 7. scores: options = option_norm(routed); joint = joint_scale * cos(f, o) +
     *    residual_scorer([f, o, f*o, |f-o|]); logit = prior + sigmoid(residual_gate) * joint */
    layernorm(h, O, W, ws->options, W, &w->option_norm, ws->options_a, W);
    const float joint_scale = expf(fminf(w->joint_logit_scale, (float)log(100.0)));
    const float gate = 1.0f / (1.0f + expf(-w->residual_gate));
    for (int64_t r0 = 0; r0 < O; r0 += CLEF_HEAD_FF_CHUNK) {
        const int64_t rows = O - r0 < CLEF_HEAD_FF_CHUNK ? O - r0 : CLEF_HEAD_FF_CHUNK;
        const float *opts = ws->options_a + r0 * W;
        const int32_t *q_of = ws->opt_question + r0;
        clef_pair_features(be, rows, W, fields, W, q_of, opts, W, ws->features, 4 * W);
        linear(h, rows, ws->features, 4 * W, &w->scorer_in, ws->ff_hidden, W, 0);
        clef_unary(be, CLEF_UNARY_GELU_ERF, rows * W, ws->ff_hidden, ws->ff_hidden);
        linear(h, rows, ws->ff_hidden, W, &w->scorer_out, ws->residual, 1, 0);
        float *joint = ws->scores + r0;
        clef_row_dot(be, rows, W, fields, W, q_of, opts, W, NULL, joint_scale,
                     (float)HEAD_COSINE_EPS, joint);
        clef_add(be, rows, joint, ws->residual, joint);
        clef_axpy(be, rows, gate, joint, ws->prior + r0); /* the prior becomes the logit */
    }

    /* 8. probabilities = softmax over each question's options; the only reads of the head */
    if (probs)
        clef_segment_softmax(be, Q, ws->q_offsets, ws->prior, ws->weights);
    if ((st = clef_backend_synchronize(be)))
        return st;
    if (logits && (st = clef_backend_read(be, logits, ws->prior, (size_t)O * sizeof(float))))
        return st;
    if (probs && (st = clef_backend_read(be, probs, ws->weights, (size_t)O * sizeof(float))))
        return st;
    return CLEF_OK;
}
