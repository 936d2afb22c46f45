/*
 * cuda_profile.cu — per-op GPU time of the CUDA backend, for the bench's profile table:
 * clef_backend_cuda_profile(be, 1) swaps the backend's op table for one whose entries put a
 * CUDA event before and after the real op (matmuls are keyed by their weight's shape, so the
 * table shows which projection costs what); clef_backend_cuda_profile_report() sums the
 * event pairs per key. Off by default: the events cost a little launch time.
 */
#include "backend/cuda/cuda_internal.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROF_MAX_EVENTS 65536
#define PROF_MAX_KEYS 64

typedef struct prof_state {
    const clef_backend_ops *real;
    clef_backend_ops table;
    cudaEvent_t ev[2 * PROF_MAX_EVENTS];
    int key_of[PROF_MAX_EVENTS];
    int n_events;
    char keys[PROF_MAX_KEYS][64];
    int n_keys;
} prof_state;

static prof_state *g_prof; /* one profiled backend at a time (bench use only) */

static int prof_key(const char *name) {
    for (int i = 0; i < g_prof->n_keys; i++)
        if (!strcmp(g_prof->keys[i], name))
            return i;
    if (g_prof->n_keys == PROF_MAX_KEYS)
        return PROF_MAX_KEYS - 1;
    snprintf(g_prof->keys[g_prof->n_keys], 64, "%s", name);
    return g_prof->n_keys++;
}

static int prof_begin(clef_backend *be, const char *name) {
    if (!g_prof || g_prof->n_events >= PROF_MAX_EVENTS)
        return -1;
    int i = g_prof->n_events++;
    g_prof->key_of[i] = prof_key(name);
    cudaEventRecord(g_prof->ev[2 * i], cuda_ctx(be)->stream);
    return i;
}

static void prof_end(clef_backend *be, int i) {
    if (i >= 0)
        cudaEventRecord(g_prof->ev[2 * i + 1], cuda_ctx(be)->stream);
}

#define WRAP(op, params, args)                                  \
    static void p_##op params {                                 \
        int i_ = prof_begin(be, #op);                           \
        g_prof->real->op args;                                  \
        prof_end(be, i_);                                       \
    }

static void p_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w, const float *bias,
                     float *y, int64_t ldy, int accumulate, void *scratch) {
    char key[64];
    snprintf(key, sizeof key, "matmul %lldx%lld", (long long)w->rows, (long long)w->cols);
    int i = prof_begin(be, key);
    g_prof->real->matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
    prof_end(be, i);
}
/* the SwiGLU and the matmul of swiglu_matmul timed apart, under swiglu and the matmul's key */
static void p_swiglu_matmul(clef_backend *be, int64_t T, const float *g, const float *u, float *y, const clef_matrix *w,
                            float *out, int64_t ldo, int accumulate, void *scratch) {
    int i = prof_begin(be, "swiglu");
    const int codes_only = cuda_swiglu_for_matmul(be, T, g, u, y, w);
    prof_end(be, i);
    char key[64];
    snprintf(key, sizeof key, "matmul %lldx%lld", (long long)w->rows, (long long)w->cols);
    i = prof_begin(be, key);
    if (codes_only)
        cuda_matmul_codes_only(be, T, y, w, out, ldo, accumulate, scratch);
    else
        cuda_matmul(be, T, y, w->cols, w, NULL, out, ldo, accumulate, scratch);
    prof_end(be, i);
}
WRAP(get_rows, (clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids, float *y, int64_t ldy),
     (be, e, n, ids, y, ldy))
WRAP(rmsnorm, (clef_backend *be, int64_t r, int64_t d, const float *x, int64_t ldx, const float *w, float eps, int a1, float *y, int64_t ldy),
     (be, r, d, x, ldx, w, eps, a1, y, ldy))
WRAP(rmsnorm_gated, (clef_backend *be, int64_t r, int64_t d, const float *x, int64_t ldx, const float *z, int64_t ldz, const float *w, float eps, float *y, int64_t ldy),
     (be, r, d, x, ldx, z, ldz, w, eps, y, ldy))
WRAP(layernorm, (clef_backend *be, int64_t r, int64_t d, const float *x, int64_t ldx, const float *w, const float *b, float eps, float *y, int64_t ldy),
     (be, r, d, x, ldx, w, b, eps, y, ldy))
WRAP(conv1d_causal_silu, (clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x, int64_t ldx, const float *w, const float *prev, float *y, int64_t ldy, const clef_seqs *sq),
     (be, T, C, K, x, ldx, w, prev, y, ldy, sq))
WRAP(gdn_gates, (clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda, const float *b, int64_t ldb, const float *al, const float *dt, float *g, float *beta),
     (be, T, H, a, lda, b, ldb, al, dt, g, beta))
WRAP(gdn, (clef_backend *be, const clef_gdn_args *a, void *s), (be, a, s))
WRAP(rope_apply, (clef_backend *be, int64_t T, int64_t nh, float *x, int64_t ldx, int64_t hs, int64_t rot, const float *c, const float *s),
     (be, T, nh, x, ldx, hs, rot, c, s))
WRAP(attention, (clef_backend *be, const clef_attention_args *a, void *s), (be, a, s))
WRAP(softmax, (clef_backend *be, int64_t r, int64_t c, float *x, int64_t ldx), (be, r, c, x, ldx))
WRAP(unary, (clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y), (be, op, n, x, y))
WRAP(mul_sigmoid, (clef_backend *be, int64_t r, int64_t c, float *x, int64_t ldx, const float *g, int64_t ldg), (be, r, c, x, ldx, g, ldg))
WRAP(swiglu, (clef_backend *be, int64_t n, const float *g, const float *u, float *y), (be, n, g, u, y))
WRAP(add, (clef_backend *be, int64_t n, const float *a, const float *b, float *y), (be, n, a, b, y))
WRAP(segment_sum, (clef_backend *be, int64_t ns, int64_t d, const clef_segment *sg, const float *x, int64_t ldx, const float *rw, float *y, int64_t ldy),
     (be, ns, d, sg, x, ldx, rw, y, ldy))
WRAP(row_dot, (clef_backend *be, int64_t n, int64_t d, const float *a, int64_t lda, const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib, float sc, float eps, float *o),
     (be, n, d, a, lda, ia, b, ldb, ib, sc, eps, o))
WRAP(segment_softmax, (clef_backend *be, int64_t ns, const int32_t *off, const float *x, float *y), (be, ns, off, x, y))
WRAP(add_rows, (clef_backend *be, int64_t r, int64_t c, const float *x, int64_t ldx, const float *v, int64_t ldv, const int32_t *idx, float *y, int64_t ldy),
     (be, r, c, x, ldx, v, ldv, idx, y, ldy))
WRAP(pair_features, (clef_backend *be, int64_t r, int64_t d, const float *f, int64_t ldf, const int32_t *idx, const float *o, int64_t ldo, float *ft, int64_t ldft),
     (be, r, d, f, ldf, idx, o, ldo, ft, ldft))
WRAP(axpy, (clef_backend *be, int64_t n, float al, const float *x, float *y), (be, n, al, x, y))

extern "C" int clef_backend_cuda_profile(clef_backend *be, int on) {
    if (on && !g_prof) {
        g_prof = (prof_state *)calloc(1, sizeof *g_prof);
        if (!g_prof)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "profile: out of memory");
        for (int i = 0; i < 2 * PROF_MAX_EVENTS; i++)
            cudaEventCreate(&g_prof->ev[i]);
        g_prof->real = be->ops;
        g_prof->table = *be->ops;
        clef_backend_ops *t = &g_prof->table;
        t->matmul = p_matmul, t->get_rows = p_get_rows, t->rmsnorm = p_rmsnorm, t->rmsnorm_gated = p_rmsnorm_gated;
        t->layernorm = p_layernorm, t->conv1d_causal_silu = p_conv1d_causal_silu, t->gdn_gates = p_gdn_gates;
        t->gdn = p_gdn, t->rope_apply = p_rope_apply, t->attention = p_attention, t->softmax = p_softmax;
        t->unary = p_unary, t->mul_sigmoid = p_mul_sigmoid, t->swiglu = p_swiglu, t->add = p_add;
        t->swiglu_matmul = p_swiglu_matmul;
        t->segment_sum = p_segment_sum, t->row_dot = p_row_dot, t->segment_softmax = p_segment_softmax;
        t->add_rows = p_add_rows, t->pair_features = p_pair_features, t->axpy = p_axpy;
        /* profiled forwards run their ops directly (the events time each op); graph_free stays
         * so recordings made before can still be freed */
        t->capture_begin = NULL, t->capture_end = NULL, t->graph_launch = NULL;
        be->ops = t;
    } else if (!on && g_prof) {
        cudaStreamSynchronize(cuda_ctx(be)->stream);
        be->ops = g_prof->real;
        for (int i = 0; i < 2 * PROF_MAX_EVENTS; i++)
            cudaEventDestroy(g_prof->ev[i]);
        free(g_prof);
        g_prof = NULL;
    }
    return CLEF_OK;
}

extern "C" int clef_backend_cuda_profile_report(clef_backend *be, FILE *out, double runs) {
    if (!g_prof)
        return CLEF_OK;
    int st = cuda_record(be, cudaStreamSynchronize(cuda_ctx(be)->stream), "profile");
    double ms[PROF_MAX_KEYS] = {0}, total = 0;
    int calls[PROF_MAX_KEYS] = {0};
    for (int i = 0; i < g_prof->n_events; i++) {
        float t = 0;
        cudaEventElapsedTime(&t, g_prof->ev[2 * i], g_prof->ev[2 * i + 1]);
        ms[g_prof->key_of[i]] += t;
        calls[g_prof->key_of[i]]++;
        total += t;
    }
    fprintf(out, "| op (weight rows x cols) | calls/forward | ms/forward | share |\n|---|---|---|---|\n");
    for (int k = 0; k < g_prof->n_keys; k++)
        fprintf(out, "| %s | %.0f | %.3f | %.1f%% |\n", g_prof->keys[k], calls[k] / runs, ms[k] / runs,
                100.0 * ms[k] / (total > 0 ? total : 1));
    fprintf(out, "| all ops | | %.3f | |\n", total / runs);
    g_prof->n_events = 0;
    g_prof->n_keys = 0;
    return st;
}
