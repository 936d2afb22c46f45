/*
 * joint_head.c — the joint schema head on the backend op table (see joint_head.h for the math
 * and the memory plan). Loading checks every tensor against joint_head_config.json; the
 * forward reads top to bottom in clef_joint_head_forward, one step per paragraph, with the
 * PyTorch line of the reference JointSchemaHead.forward it computes.
 *
 * Span reductions (means over instruction and option spans, the lexical means of lm_head
 * rows, the per-question option summary, cosines) are short loops over host-visible backend
 * memory; everything that is a matrix product, a norm, an attention or an activation goes
 * through the op table. Reductions accumulate in double, so our values sit at (or nearer
 * than) the fp32 rounding noise of PyTorch's.
 */
#include "model/joint_head.h"

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
    float *rows;          /* (R, D)  LayerNorm(hidden) of up to R rows at a time */
    float *global;        /* (D)     g = LayerNorm(hidden)[T-1] */
    float *question_vec;  /* (Q, D)  qv */
    float *anchor;        /* (Q, D)  normalize(qv + g) */
    float *option_ctx;    /* (C, D)  span means of N, one option chunk */
    float *option_lex;    /* (C, D)  lexical means, one option chunk */
    float *lm_row;        /* (D)     one lm_head row */
    float *options;       /* (O, W)  routed option vectors x */
    float *options_a;     /* (O, W)  normalised x, then attention output */
    float *options_q;     /* (O, W)  attention queries */
    float *prior;         /* (O)     prior logit term */
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
    float *scores;        /* (O)     option . field scores of one question */
    float *weights;       /* (O)     their softmax */
    double *acc;          /* (C, D)  double accumulators of span sums (in acc_space) */
    float *acc_space;     /* (2CD)   */
    int32_t *row_owner;   /* (R)     which span a gathered row of `rows` belongs to */
    float *row_owner_space; /* (R)   */
    void *attn_scratch;   /* attention workspace */
} head_workspace;

struct clef_joint_head {
    clef_backend *be;                /* runs the forward: the weights' backend or a fork */
    int shares_weights;              /* 1: a fork (clef_joint_head_fork); w belongs to another */
    clef_head_config cfg;
    clef_head_limits limits;
    head_weights w;
    head_workspace ws;
    clef_buffer_set buffers;         /* every backend allocation, released together */
    size_t weight_bytes, workspace_bytes;
};

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct head_loader {
    clef_joint_head *head;
    const clef_tensor_source *src;
} head_loader;

static void *head_alloc(clef_joint_head *h, size_t bytes) {
    return clef_buffer_set_alloc(&h->buffers, bytes);
}

/* Find head.<name> and check it has n_dims dims of the given sizes. */
static int find_tensor(head_loader *L, const char *name, int n_dims, const int64_t *dims,
                       const clef_tensor_info **out) {
    char full[256], want[96], got[96];
    snprintf(full, sizeof full, "head.%s", name);
    const clef_tensor_info *t = L->src->find(L->src->ctx, full);
    if (!t)
        return clef_fail(CLEF_ERR_TENSOR_MISSING, "joint head: tensor '%s' is missing", full);
    int ok = t->n_dims == n_dims;
    for (int i = 0; ok && i < n_dims; i++)
        ok = t->shape[i] == dims[i];
    if (!ok) {
        return clef_fail(CLEF_ERR_TENSOR_SHAPE,
                         "joint head: tensor '%s' has shape %s, joint_head_config.json says %s",
                         full, clef_shape_str(t->shape, t->n_dims, got, sizeof got),
                         clef_shape_str(dims, n_dims, want, sizeof want));
    }
    *out = t;
    return CLEF_OK;
}

/* A matrix (rows, cols) kept in its stored type, read straight into backend memory. */
static int load_matrix(head_loader *L, const char *name, int64_t rows, int64_t cols,
                       clef_matrix *m) {
    const clef_tensor_info *t;
    int64_t dims[2] = {rows, cols};
    int st = find_tensor(L, name, 2, dims, &t);
    if (st)
        return st;
    clef_wtype type;
    if (t->dtype == CLEF_DTYPE_BF16)
        type = CLEF_WTYPE_BF16;
    else if (t->dtype == CLEF_DTYPE_F32)
        type = CLEF_WTYPE_F32;
    else
        return clef_fail(CLEF_ERR_TENSOR_DTYPE,
                         "joint head: tensor 'head.%s' is %s, expected BF16 or F32", name,
                         clef_dtype_name(t->dtype));
    void *data = head_alloc(L->head, (size_t)t->n_bytes);
    if (!data)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory for tensor 'head.%s'",
                         name);
    st = L->src->read(L->src->ctx, t, data);
    if (st)
        return clef_fail_prefix(st, "joint head: reading 'head.%s'", name);
    *m = (clef_matrix){.type = type, .rows = rows, .cols = cols, .ld = cols, .data = data};
    L->head->weight_bytes += (size_t)t->n_bytes;
    return CLEF_OK;
}

/* A small tensor of n elements (dims as given; n_dims 0 for a scalar) widened to fp32 into
 * dst (host memory of n floats). */
static int read_f32(head_loader *L, const char *name, int n_dims, const int64_t *dims,
                    size_t n, float *dst) {
    const clef_tensor_info *t;
    int st = find_tensor(L, name, n_dims, dims, &t);
    if (st)
        return st;
    size_t esize = clef_dtype_size(t->dtype);
    if (t->dtype != CLEF_DTYPE_BF16 && t->dtype != CLEF_DTYPE_F16 && t->dtype != CLEF_DTYPE_F32)
        return clef_fail(CLEF_ERR_TENSOR_DTYPE,
                         "joint head: tensor 'head.%s' is %s, expected BF16, F16 or F32", name,
                         clef_dtype_name(t->dtype));
    if (t->n_bytes != n * esize)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "joint head: tensor 'head.%s' holds %llu bytes, "
                         "expected %zu", name, (unsigned long long)t->n_bytes, n * esize);
    void *raw = malloc(n * esize + 1);
    if (!raw)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory for 'head.%s'", name);
    st = L->src->read(L->src->ctx, t, raw);
    if (st) {
        free(raw);
        return clef_fail_prefix(st, "joint head: reading 'head.%s'", name);
    }
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == CLEF_DTYPE_BF16)
            dst[i] = clef_bf16_to_f32(((const uint16_t *)raw)[i]);
        else if (t->dtype == CLEF_DTYPE_F16)
            dst[i] = clef_f16_to_f32(((const uint16_t *)raw)[i]);
        else
            dst[i] = ((const float *)raw)[i];
    }
    free(raw);
    L->head->weight_bytes += n * sizeof(float);
    return CLEF_OK;
}

/* A vector of n fp32 values in backend memory. */
static int load_vector(head_loader *L, const char *name, int64_t n, float **out) {
    float *v = head_alloc(L->head, (size_t)n * sizeof(float));
    if (!v)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory for 'head.%s'", name);
    *out = v;
    return read_f32(L, name, 1, &n, (size_t)n, v);
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
    char name[160];
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
    clef_matrix packed;
    float *packed_bias = NULL;
    snprintf(name, sizeof name, "%s.in_proj_weight", prefix);
    int st = load_matrix(L, name, 3 * width, width, &packed);
    if (st)
        return st;
    snprintf(name, sizeof name, "%s.in_proj_bias", prefix);
    if ((st = load_vector(L, name, 3 * width, &packed_bias)))
        return st;
    /* torch packs q, k, v as consecutive row blocks of in_proj_weight */
    size_t block = (size_t)(width * width) * clef_wtype_size(packed.type);
    a->q = packed;
    a->q.rows = width;
    a->kv = packed;
    a->kv.rows = 2 * width;
    a->kv.data = (const char *)packed.data + block;
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
    if (!(w->type_embedding = head_alloc(h, (size_t)(3 * W) * sizeof(float))))
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "joint head: no memory for type_embedding");
    if ((st = read_f32(L, "type_embedding.weight", 2, type_dims, (size_t)(3 * W),
                       w->type_embedding)))
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
        (st = read_f32(L, "prior_logit_scale", 0, NULL, 1, &w->prior_logit_scale)) ||
        (st = read_f32(L, "joint_logit_scale", 0, NULL, 1, &w->joint_logit_scale)) ||
        (st = read_f32(L, "residual_gate", 0, NULL, 1, &w->residual_gate)))
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

static int plan_workspace(clef_joint_head *h) {
    const int64_t D = h->cfg.hidden_size, W = h->cfg.width, F = h->cfg.feedforward;
    const int64_t T = h->limits.max_tokens, O = h->limits.max_options,
                  Q = h->limits.max_questions, C = CLEF_HEAD_OPTION_CHUNK,
                  R = CLEF_HEAD_FF_CHUNK;
    head_workspace *ws = &h->ws;
    struct {
        float **dst;
        int64_t n;
    } plan[] = {
        {&ws->memory, T * W},       {&ws->memory_norm, T * W},   {&ws->memory_kv, 2 * T * W},
        {&ws->rows, R * D},         {&ws->global, D},
        {&ws->question_vec, Q * D}, {&ws->anchor, Q * D},        {&ws->option_ctx, C * D},
        {&ws->option_lex, C * D},   {&ws->lm_row, D},            {&ws->options, O * W},
        {&ws->options_a, O * W},    {&ws->options_q, O * W},     {&ws->prior, O},
        {&ws->question_opt, Q * W}, {&ws->fields, Q * W},        {&ws->fields_a, Q * W},
        {&ws->fields_qkv, 3 * Q * W}, {&ws->base_fields, Q * W}, {&ws->summaries, Q * W},
        {&ws->global_vec, W},       {&ws->ff_hidden, R * (F > W ? F : W)},
        {&ws->features, R * 4 * W}, {&ws->residual, R},          {&ws->scores, O},
        {&ws->weights, O},          {&ws->acc_space, 2 * C * D},
        {&ws->row_owner_space, R},
    };
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
    size_t off = 0;
    for (size_t i = 0; i < n_plan; i++) {
        *plan[i].dst = (float *)(base + off);
        off += ((size_t)plan[i].n * sizeof(float) + 63) & ~(size_t)63;
    }
    ws->attn_scratch = base + off;
    ws->acc = (double *)(void *)ws->acc_space; /* 64-byte aligned, 2CD floats = CD doubles */
    ws->row_owner = (int32_t *)(void *)ws->row_owner_space; /* only ever used as int32 */
    h->workspace_bytes = total + scratch;
    return CLEF_OK;
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
    if (!be->host_visible)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "joint head: backend '%s' is not host-visible; "
                         "the head's span reductions need host-visible memory",
                         be->ops->name);
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
    head_loader L = {.head = h, .src = src};
    if ((st = load_weights(&L)) || (limits && (st = plan_workspace(h))))
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

/* dst[i, :D] = mean over the rows of spans[i] of LayerNorm_hidden(hidden), i < n <=
 * CLEF_HEAD_OPTION_CHUNK, accumulated in double. The rows of all n spans are gathered
 * CLEF_HEAD_FF_CHUNK at a time into ws->rows and normalised by one layernorm call, so a
 * record with many short spans costs few op calls and no [T, D] copy of the normalised hidden
 * states ever exists. */
static void span_means(clef_joint_head *h, const float *hidden, int64_t ld_hidden,
                       const clef_span *spans, int64_t n, float *dst) {
    const int64_t D = h->cfg.hidden_size;
    double *acc = h->ws.acc;
    float *rows = h->ws.rows;
    int32_t *owner = h->ws.row_owner;
    for (int64_t j = 0; j < n * D; j++)
        acc[j] = 0.0;
    int64_t k = 0;
    for (int64_t i = 0; i <= n; i++) {
        for (int64_t t = i < n ? spans[i].begin : 0; i < n && t < spans[i].end; t++) {
            memcpy(rows + k * D, hidden + t * ld_hidden, (size_t)D * sizeof(float));
            owner[k++] = (int32_t)i;
            if (k < CLEF_HEAD_FF_CHUNK)
                continue;
            layernorm(h, k, D, rows, D, &h->w.hidden_norm, rows, D);
            for (int64_t r = 0; r < k; r++)
                for (int64_t j = 0; j < D; j++)
                    acc[owner[r] * D + j] += rows[r * D + j];
            k = 0;
        }
        if (i == n && k) { /* the last, partial gather */
            layernorm(h, k, D, rows, D, &h->w.hidden_norm, rows, D);
            for (int64_t r = 0; r < k; r++)
                for (int64_t j = 0; j < D; j++)
                    acc[owner[r] * D + j] += rows[r * D + j];
        }
    }
    for (int64_t i = 0; i < n; i++) {
        double inv = 1.0 / (double)(spans[i].end - spans[i].begin);
        for (int64_t j = 0; j < D; j++)
            dst[i * D + j] = (float)(acc[i * D + j] * inv);
    }
}

static double dot_d(const float *a, const float *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static double norm_d(const float *a, int64_t n) { return sqrt(dot_d(a, a, n)); }

static void softmax_d(const float *x, int64_t n, float *y) {
    double m = -INFINITY, s = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++)
        s += exp((double)x[i] - m);
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)(exp((double)x[i] - m) / s);
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
    const head_weights *w = &h->w;
    const head_workspace *ws = &h->ws;
    const int64_t D = h->cfg.hidden_size, W = h->cfg.width, T = rec->n_tokens,
                  Q = rec->n_questions;

    /* 1. normalized_hidden = self.hidden_norm(hidden_states);
     *    memory = self.memory_projection(sequence_hidden), R rows at a time;
     *    global_vector = sequence_hidden[-1] */
    for (int64_t r0 = 0; r0 < T; r0 += CLEF_HEAD_FF_CHUNK) {
        int64_t rows = T - r0 < CLEF_HEAD_FF_CHUNK ? T - r0 : CLEF_HEAD_FF_CHUNK;
        layernorm(h, rows, D, hidden + r0 * ld_hidden, ld_hidden, &w->hidden_norm, ws->rows, D);
        clef_matmul(h->be, rows, ws->rows, D, &w->memory_projection, NULL, ws->memory + r0 * W,
                    W, 0);
    }
    layernorm(h, 1, D, hidden + (T - 1) * ld_hidden, ld_hidden, &w->hidden_norm, ws->global, D);
    const float *global = ws->global;

    /* 2. question_vectors = mean over each instruction span; the prior's anchor
     *    normalize(question_vector + global_vector) */
    clef_span spans[CLEF_HEAD_OPTION_CHUNK];
    for (int64_t q0 = 0; q0 < Q; q0 += CLEF_HEAD_OPTION_CHUNK) {
        int64_t n = Q - q0 < CLEF_HEAD_OPTION_CHUNK ? Q - q0 : CLEF_HEAD_OPTION_CHUNK;
        for (int64_t i = 0; i < n; i++)
            spans[i] = rec->questions[q0 + i].instruction;
        span_means(h, hidden, ld_hidden, spans, n, ws->question_vec + q0 * D);
    }
    for (int64_t q = 0; q < Q; q++) {
        const float *qv = ws->question_vec + q * D;
        float *anchor = ws->anchor + q * D;
        for (int64_t j = 0; j < D; j++)
            anchor[j] = qv[j] + global[j];
        double nrm = norm_d(anchor, D);
        float inv = (float)(1.0 / (nrm > HEAD_NORMALIZE_EPS ? nrm : HEAD_NORMALIZE_EPS));
        for (int64_t j = 0; j < D; j++)
            anchor[j] *= inv;
    }
    /* option_question_projection(question_vectors[q]) once per question */
    clef_matmul(h->be, Q, ws->question_vec, D, &w->option_question_projection, NULL,
                ws->question_opt, W, 0);

    /* 3. per option, in chunks: context = mean of N over the span, lexical = mean of the
     *    lm_head rows of its token ids; query = W_ctx context + W_lex lexical + W_optq qv;
     *    prior = prior_scale * normalize(lexical) . anchor */
    const float prior_scale = expf(fminf(w->prior_logit_scale, (float)log(100.0)));
    int64_t chunk_q[CLEF_HEAD_OPTION_CHUNK];
    int64_t chunk_n = 0, chunk_first = 0, opt = 0;
    double *lex_acc = ws->acc; /* span_means is done with it when the lexical sums start */
    for (int64_t q = 0; q < Q; q++) {
        for (int32_t o = 0; o < rec->questions[q].n_options; o++, opt++) {
            spans[chunk_n] = rec->questions[q].options[o];
            chunk_q[chunk_n++] = q;
            if (chunk_n < CLEF_HEAD_OPTION_CHUNK && opt + 1 < O)
                continue;
            span_means(h, hidden, ld_hidden, spans, chunk_n, ws->option_ctx);
            for (int64_t i = 0; i < chunk_n; i++) {
                clef_span sp = spans[i];
                float *lex = ws->option_lex + i * D;
                for (int64_t j = 0; j < D; j++)
                    lex_acc[j] = 0.0;
                for (int32_t t = sp.begin; t < sp.end; t++) {
                    if ((st = lm->read_row(lm->ctx, rec->ids[t], ws->lm_row)))
                        return st;
                    for (int64_t j = 0; j < D; j++)
                        lex_acc[j] += ws->lm_row[j];
                }
                for (int64_t j = 0; j < D; j++)
                    lex[j] = (float)(lex_acc[j] / (double)(sp.end - sp.begin));
                double ln = norm_d(lex, D);
                ws->prior[chunk_first + i] =
                    prior_scale * (float)(dot_d(lex, ws->anchor + chunk_q[i] * D, D) /
                                          (ln > HEAD_NORMALIZE_EPS ? ln : HEAD_NORMALIZE_EPS));
            }
            float *x = ws->options + chunk_first * W;
            clef_matmul(h->be, chunk_n, ws->option_ctx, D, &w->option_context_projection, NULL,
                        x, W, 0);
            clef_matmul(h->be, chunk_n, ws->option_lex, D, &w->option_lexical_projection, NULL,
                        x, W, 1);
            for (int64_t i = 0; i < chunk_n; i++) /* + option_question_projection(qv) */
                for (int64_t j = 0; j < W; j++)
                    x[i * W + j] += ws->question_opt[chunk_q[i] * W + j];
            chunk_first += chunk_n;
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
    clef_matmul(h->be, Q, ws->question_vec, D, &w->question_projection, NULL, ws->base_fields,
                W, 0);
    clef_matmul(h->be, 1, global, D, &w->global_projection, NULL, ws->global_vec, W, 0);
    for (int64_t q = 0, o0 = 0; q < Q; o0 += rec->questions[q].n_options, q++) {
        const int64_t n = rec->questions[q].n_options;
        const float *base = ws->base_fields + q * W;
        float *summary = ws->summaries + q * W;
        float *scores = ws->scores, *weights = ws->weights;
        const double inv_sqrt_w = 1.0 / sqrt((double)W);
        for (int64_t o = 0; o < n; o++)
            scores[o] = (float)(dot_d(ws->options + (o0 + o) * W, base, W) * inv_sqrt_w);
        softmax_d(scores, n, weights);
        for (int64_t j = 0; j < W; j++) {
            double s = 0.0;
            for (int64_t o = 0; o < n; o++)
                s += (double)weights[o] * ws->options[(o0 + o) * W + j];
            summary[j] = (float)s;
        }
    }
    layernorm(h, Q, W, ws->summaries, W, &w->option_summary_norm, ws->summaries, W);
    for (int64_t q = 0; q < Q; q++) {
        float *f = ws->fields + q * W;
        const float *type = w->type_embedding + (int64_t)rec->questions[q].type * W;
        for (int64_t j = 0; j < W; j++)
            f[j] = ((ws->base_fields[q * W + j] + ws->summaries[q * W + j]) + ws->global_vec[j]) +
                   type[j];
    }

    /* 6. decoder layers (pre-norm): f += self_attn(norm1 f); f += multihead_attn(norm2 f, M);
     *    f += linear2(gelu(linear1(norm3 f))); then fields = field_norm(f) */
    for (int64_t i = 0; i < h->cfg.layers; i++) {
        const head_decoder_layer *d = &w->decoder[i];
        layernorm(h, Q, W, ws->fields, W, &d->norm1, ws->fields_a, W);
        clef_matmul(h->be, Q, ws->fields_a, W, &d->self_attn.q, d->self_attn.q_bias,
                    ws->fields_qkv, 3 * W, 0);
        clef_matmul(h->be, Q, ws->fields_a, W, &d->self_attn.kv, d->self_attn.kv_bias,
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
    int64_t q_of_row = 0, q_end = rec->questions[0].n_options;
    for (int64_t r0 = 0; r0 < O; r0 += CLEF_HEAD_FF_CHUNK) {
        const int64_t rows = O - r0 < CLEF_HEAD_FF_CHUNK ? O - r0 : CLEF_HEAD_FF_CHUNK;
        int64_t q = q_of_row, qe = q_end;
        for (int64_t r = 0; r < rows; r++) {
            while (r0 + r >= qe)
                qe += rec->questions[++q].n_options;
            const float *f = fields + q * W, *o = ws->options_a + (r0 + r) * W;
            float *feat = ws->features + r * 4 * W;
            for (int64_t j = 0; j < W; j++) {
                feat[j] = f[j];
                feat[W + j] = o[j];
                feat[2 * W + j] = f[j] * o[j];
                feat[3 * W + j] = fabsf(f[j] - o[j]);
            }
        }
        linear(h, rows, ws->features, 4 * W, &w->scorer_in, ws->ff_hidden, W, 0);
        clef_unary(h->be, CLEF_UNARY_GELU_ERF, rows * W, ws->ff_hidden, ws->ff_hidden);
        linear(h, rows, ws->ff_hidden, W, &w->scorer_out, ws->residual, 1, 0);
        for (int64_t r = 0; r < rows; r++) {
            while (r0 + r >= q_end)
                q_end += rec->questions[++q_of_row].n_options;
            const float *f = fields + q_of_row * W, *o = ws->options_a + (r0 + r) * W;
            double nf = norm_d(f, W), no = norm_d(o, W);
            double cosine = dot_d(f, o, W) / ((nf > HEAD_COSINE_EPS ? nf : HEAD_COSINE_EPS) *
                                              (no > HEAD_COSINE_EPS ? no : HEAD_COSINE_EPS));
            float joint = joint_scale * (float)cosine + ws->residual[r];
            float logit = ws->prior[r0 + r] + gate * joint;
            if (logits)
                logits[r0 + r] = logit;
            ws->prior[r0 + r] = logit; /* the prior is consumed: keep the logit for softmax */
        }
    }

    /* 8. probabilities = softmax over each question's options */
    if (probs)
        for (int64_t q = 0, o0 = 0; q < Q; o0 += rec->questions[q].n_options, q++)
            softmax_d(ws->prior + o0, rec->questions[q].n_options, probs + o0);
    return CLEF_OK;
}
