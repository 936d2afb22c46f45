/*
 * test_backend_ops.c — the backend op harness (in the spirit of llama.cpp's test-backend-ops):
 * every op of the op table (backend.h) on random shapes, leading dimensions and row offsets,
 * against a float64 reference written here from backend.h's definitions, with one tolerance
 * table.
 *
 *   test_backend_ops [backend [draws [seed]]]     backend: cpu (default), cpu-guarded
 *
 * The backend under test is a parameter: the harness only allocates through it, uploads with
 * clef_backend_write, and reads results with clef_backend_read after
 * clef_backend_synchronize, so a device backend plugs in by adding one line to BACKENDS (it
 * also runs on the guarded CPU backend, whose memory the host cannot touch).
 *
 * Each case draws its shapes, places every operand view at a random row offset inside a
 * larger buffer with a random leading dimension, fills the output buffer around the view
 * with known values, runs the op once, and checks
 *   - the relative L2 error ||got - ref|| / ||ref|| over the view against TOLERANCES,
 *   - that every element of the output buffer outside the view kept its value.
 *
 * Coverage is enforced: every slot of clef_backend_ops after the memory functions must be
 * named by some case (OPS[].slots); a new op without a case fails the run, naming the slot.
 *
 * Adding a case: write `static void case_<op>(harness *h, case_result *r)` (draw shapes, fill
 * host inputs, compute the reference in double, upload, run, read back, call finish()), add
 * one OPS row with the slot offsets it exercises and one TOLERANCES row with its bound and why.
 * Sequence offsets (cu_seqlens, clef_seqs) are drawn in the conv, GDN and attention cases
 * (1-3 packed sequences half of the time), the reference computed sequence by sequence.
 */
#include "test.h"

#include "clef.h"

#include "backend/backend.h"
#include "core/error.h"
#include "core/numeric.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the backend under test ---------------------------------------------------------------- */

static int create_cpu(int guarded, clef_backend **out) {
    clef_backend_params p = clef_backend_default_params();
    p.n_threads = 2;
    p.guard_host_access = guarded;
    p.guard_arena_bytes = (size_t)1 << 30;
    return clef_backend_cpu_create(&p, out);
}
static int create_plain_cpu(clef_backend **out) { return create_cpu(0, out); }
static int create_guarded_cpu(clef_backend **out) { return create_cpu(1, out); }

static const struct {
    const char *name;
    int (*create)(clef_backend **out);
} BACKENDS[] = {
    {"cpu", create_plain_cpu},
    {"cpu-guarded", create_guarded_cpu},
};

/* ---- the tolerance table ------------------------------------------------------------------ *
 * Metric: relative L2 error over the op's output view. u = 2^-24 (fp32 unit roundoff).
 * Bounds are set from the arithmetic each op does, not from observed errors. */

static const struct {
    const char *op;
    double tol;
    const char *why;
} TOLERANCES[] = {
    {"get_rows", 0.0, "a copy (BF16 -> fp32 widening is exact)"},
    {"matmul", 2e-6, "fp32 dot products of K <= 160 terms: error ~ sqrt(K) u |x||w| per entry"},
    {"rmsnorm", 1e-6, "fp32 sum of dim <= 300 squares, rsqrt, 2 products"},
    {"rmsnorm_gated", 2e-6, "rmsnorm plus silu(z) (exp) and one more product"},
    {"layernorm", 1e-6, "fp32 mean and biased variance over dim <= 300, rsqrt, affine"},
    {"conv1d_causal_silu", 1e-6, "K <= 5 fp32 products summed, then silu (exp, divide)"},
    {"gdn_gates", 1e-6, "sigmoid and exp(A_log) * softplus: a few roundings and exps"},
    {"gdn", 2e-5, "T <= 150 steps of state updates in fp32 (chunked: UT transform, triangular "
                  "solve per 64-token chunk); the state carries rounding across steps"},
    {"rope_table", 1e-6, "phi rounded to fp32 as the definition says (mirrored here), "
                         "then cosf/sinf (<= 1 ulp)"},
    {"rope_apply", 1e-6, "two products and a sum per element"},
    {"attention", 2e-6, "fp32 dots over head_dim, softmax over n_kv <= 100 (exp), weighted "
                        "sum of values"},
    {"softmax", 1e-6, "exp per element (<= 1 ulp), fp32 sum over cols <= 300, one divide"},
    {"unary", 2e-6, "libm / vector exp, erf, tanh, log1p (<= 2 ulp) inside <= 4 roundings; "
                    "gelu_tanh amplifies the tanh argument's rounding by |x| <= 8"},
    {"mul_sigmoid", 1e-6, "sigmoid (exp, divide) and one product"},
    {"swiglu", 1e-6, "silu (exp, divide) and one product"},
    {"swiglu_matmul", 3e-6, "swiglu's silu and product per input (<= 1e-6 each), then fp32 dots "
                            "of K <= 160 terms as matmul"},
    {"add", 1e-7, "one fp32 rounding per element (<= u)"},
    {"segment_sum", 3e-7, "double accumulation, one rounding to fp32, one fp32 add when "
                          "accumulating (<= 2u)"},
    {"row_dot", 2e-7, "double dots and norms, one rounding to fp32 (<= u)"},
    {"segment_softmax", 2e-7, "double exp and sums, one rounding (<= u)"},
    {"add_rows", 1e-7, "one fp32 rounding per element (<= u)"},
    {"pair_features", 1e-7, "copies, one product, one difference (<= u each)"},
    {"axpy", 2e-7, "one fp32 product and one fp32 sum per element (<= 2u)"},
};

static double tolerance_of(const char *op) {
    for (size_t i = 0; i < sizeof TOLERANCES / sizeof TOLERANCES[0]; i++)
        if (!strcmp(TOLERANCES[i].op, op))
            return TOLERANCES[i].tol;
    return -1.0; /* no entry: the case fails */
}

/* ---- harness state: random numbers and backend buffers ---------------------------------- */

typedef struct harness {
    clef_backend *be;
    uint64_t rng;
    void *bufs[64];
    int n_bufs;
} harness;

typedef struct case_result {
    double err;           /* relative L2 error over the output view */
    int64_t outside_bad;  /* elements outside the view that changed */
    char shape[200];      /* the drawn shape, for the report */
} case_result;

static uint64_t next_u64(harness *h) {
    h->rng ^= h->rng << 13;
    h->rng ^= h->rng >> 7;
    h->rng ^= h->rng << 17;
    return h->rng;
}

static int64_t rand_int(harness *h, int64_t lo, int64_t hi) { /* [lo, hi] */
    return lo + (int64_t)(next_u64(h) % (uint64_t)(hi - lo + 1));
}

static float rand_f(harness *h, float amp) { /* uniform in [-amp, amp) */
    return amp * ((float)((next_u64(h) >> 40) * (1.0 / 8388608.0)) - 1.0f);
}

static float *host_rand(harness *h, int64_t n, float amp) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        p[i] = rand_f(h, amp);
    return p;
}

static void *dev_alloc(harness *h, size_t bytes) {
    CLEF_ASSERT(h->n_bufs < 64);
    void *p = clef_backend_alloc(h->be, bytes ? bytes : 1);
    CLEF_ASSERT(p);
    h->bufs[h->n_bufs++] = p;
    return p;
}

/* A backend copy of n bytes of host memory. */
static void *dev_up(harness *h, const void *host, size_t bytes) {
    void *p = dev_alloc(h, bytes);
    CLEF_ASSERT(clef_backend_write(h->be, p, host, bytes) == CLEF_OK);
    return p;
}

static float *dev_upf(harness *h, const float *host, int64_t n) {
    return dev_up(h, host, sizeof(float) * (size_t)n);
}

static void dev_down(harness *h, void *host, const void *dev, size_t bytes) {
    CLEF_ASSERT(clef_backend_synchronize(h->be) == CLEF_OK);
    CLEF_ASSERT(clef_backend_read(h->be, host, dev, bytes) == CLEF_OK);
}

static void dev_free_all(harness *h) {
    for (int i = 0; i < h->n_bufs; i++)
        clef_backend_release(h->be, h->bufs[i]);
    h->n_bufs = 0;
}

/* An output buffer of `total` floats laid out as `rows` rows of `cols` at row offset `off`
 * with leading dimension ld; the host copy `before` holds its initial contents. */
typedef struct out_view {
    int64_t total, rows, cols, ld, off;
    float *before, *after, *dev;
} out_view;

static out_view out_make(harness *h, int64_t rows, int64_t cols, int64_t ld, int64_t off,
                         int64_t extra_rows) {
    out_view v = {.rows = rows, .cols = cols, .ld = ld, .off = off};
    v.total = (off + rows + extra_rows) * ld;
    v.before = host_rand(h, v.total, 3.0f);
    v.after = malloc(sizeof(float) * (size_t)v.total);
    v.dev = dev_upf(h, v.before, v.total);
    return v;
}

static float *out_ptr(const out_view *v) { return v->dev + v->off * v->ld; }
static float out_init(const out_view *v, int64_t r, int64_t c) {
    return v->before[(v->off + r) * v->ld + c];
}

/* Read the output back, compare the view with ref [rows, cols] and the rest with `before`. */
static void finish(harness *h, out_view *v, const double *ref, case_result *r) {
    dev_down(h, v->after, v->dev, sizeof(float) * (size_t)v->total);
    double num = 0, den = 0;
    r->outside_bad = 0;
    for (int64_t i = 0; i < v->total; i++) {
        int64_t row = i / v->ld - v->off, col = i % v->ld;
        if (row >= 0 && row < v->rows && col < v->cols) {
            double d = (double)v->after[i] - ref[row * v->cols + col];
            num += d * d;
            den += ref[row * v->cols + col] * ref[row * v->cols + col];
        } else if (memcmp(&v->after[i], &v->before[i], sizeof(float))) {
            r->outside_bad++;
        }
    }
    r->err = den > 0 ? sqrt(num / den) : sqrt(num);
    free(v->before);
    free(v->after);
}

static int64_t pad(harness *h) { return rand_int(h, 0, 5); }

/* ---- the cases ---------------------------------------------------------------------------- */

/* A random IEEE half of magnitude in [2^-8, 1) or a subnormal, either sign. */
static uint16_t rand_half(harness *h) {
    uint64_t r = next_u64(h);
    uint16_t exp = r % 53 == 0 ? 0 : (uint16_t)(7 + (r >> 8) % 8);
    return (uint16_t)(((r >> 12) & 1u) << 15 | exp << 10 | ((r >> 16) & 0x3ffu));
}

/* Weight formats drawn: F32 and BF16 run as stored, F16 through the backend's prepare step
 * (prepared_size / prepare_matrix) when it has one. */
static void case_matmul(harness *h, case_result *r) {
    static const clef_wtype formats[] = {CLEF_WTYPE_F32, CLEF_WTYPE_BF16, CLEF_WTYPE_F16};
    const int64_t T = rand_int(h, 1, 40), N = rand_int(h, 1, 70), K = rand_int(h, 1, 160);
    const clef_wtype fmt = formats[rand_int(h, 0, 2)];
    const int with_bias = (int)rand_int(h, 0, 1), accumulate = (int)rand_int(h, 0, 1),
              planned = (int)rand_int(h, 0, 1);
    const int64_t ldx = K + pad(h), ldw = K + pad(h), xoff = pad(h);
    snprintf(r->shape, sizeof r->shape, "T=%lld N=%lld K=%lld %s bias=%d acc=%d scratch=%s",
             (long long)T, (long long)N, (long long)K, clef_wtype_name(fmt), with_bias,
             accumulate, planned ? "planned" : "own");
    float *x = host_rand(h, (xoff + T) * ldx, 1.0f), *wf = host_rand(h, N * ldw, 0.5f);
    uint16_t *w16 = malloc(sizeof(uint16_t) * (size_t)(N * ldw));
    for (int64_t i = 0; i < N * ldw; i++) {
        if (fmt == CLEF_WTYPE_F16)
            w16[i] = rand_half(h), wf[i] = clef_f16_to_f32(w16[i]);
        else if (fmt == CLEF_WTYPE_BF16)
            w16[i] = clef_f32_to_bf16(wf[i]), wf[i] = clef_bf16_to_f32(w16[i]);
    }
    float *bias = host_rand(h, N, 1.0f);
    out_view y = out_make(h, T, N, N + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(T * N));
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double acc = accumulate ? out_init(&y, t, n) : 0.0;
            double dot = with_bias ? bias[n] : 0.0;
            for (int64_t k = 0; k < K; k++)
                dot += (double)x[(xoff + t) * ldx + k] * wf[n * ldw + k];
            ref[t * N + n] = acc + dot;
        }
    clef_matrix w = {.type = fmt, .rows = N, .cols = K, .ld = ldw};
    w.data = fmt == CLEF_WTYPE_F32 ? dev_upf(h, wf, N * ldw)
                                   : dev_up(h, w16, sizeof(uint16_t) * (size_t)(N * ldw));
    size_t prep = clef_backend_prepared_size(h->be, &w);
    if (prep) {
        clef_matrix prepared;
        CHECK_EQ_INT(clef_backend_prepare_matrix(h->be, &w, dev_alloc(h, prep), &prepared), CLEF_OK);
        w = prepared;
    }
    const float *dx = dev_upf(h, x, (xoff + T) * ldx) + xoff * ldx;
    /* half the draws with scratch planned for a larger T (matmul_workspace_size), half with
     * the backend's own */
    size_t ws = planned ? clef_matmul_workspace_size(h->be, T + 7, &w) : 0;
    clef_matmul_scratch(h->be, T, dx, ldx, &w, with_bias ? dev_upf(h, bias, N) : NULL,
                        out_ptr(&y), y.ld, accumulate, ws ? dev_alloc(h, ws) : NULL);
    finish(h, &y, ref, r);
    free(x), free(wf), free(w16), free(bias), free(ref);
}

static void case_get_rows(harness *h, case_result *r) {
    const int64_t V = rand_int(h, 1, 50), D = rand_int(h, 1, 70), n = rand_int(h, 1, 30);
    const int bf16 = (int)rand_int(h, 0, 1);
    const int64_t lde = D + pad(h);
    snprintf(r->shape, sizeof r->shape, "vocab=%lld D=%lld n=%lld %s", (long long)V,
             (long long)D, (long long)n, bf16 ? "BF16" : "F32");
    float *ef = host_rand(h, V * lde, 2.0f);
    uint16_t *eb = malloc(sizeof(uint16_t) * (size_t)(V * lde));
    for (int64_t i = 0; i < V * lde; i++) {
        eb[i] = clef_f32_to_bf16(ef[i]);
        if (bf16)
            ef[i] = clef_bf16_to_f32(eb[i]);
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)rand_int(h, 0, V - 1);
    out_view y = out_make(h, n, D, D + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(n * D));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < D; j++)
            ref[i * D + j] = ef[ids[i] * lde + j];
    clef_matrix e = {.type = bf16 ? CLEF_WTYPE_BF16 : CLEF_WTYPE_F32, .rows = V, .cols = D,
                     .ld = lde};
    e.data = bf16 ? dev_up(h, eb, sizeof(uint16_t) * (size_t)(V * lde)) : dev_upf(h, ef, V * lde);
    clef_get_rows(h->be, &e, n, dev_up(h, ids, sizeof(int32_t) * (size_t)n), out_ptr(&y), y.ld);
    finish(h, &y, ref, r);
    free(ef), free(eb), free(ids), free(ref);
}

/* The norms: kind 0 rmsnorm, 1 rmsnorm_gated, 2 layernorm. */
static void norm_case(harness *h, case_result *r, int kind) {
    const int64_t rows = rand_int(h, 1, 40), dim = rand_int(h, 1, 300);
    const int with_w = kind == 1 ? 1 : (int)rand_int(h, 0, 1), with_b = (int)rand_int(h, 0, 1),
              add_one = (int)rand_int(h, 0, 1), in_place = (int)rand_int(h, 0, 1);
    const float eps = kind == 2 ? 1e-5f : 1e-6f;
    snprintf(r->shape, sizeof r->shape, "rows=%lld dim=%lld w=%d b=%d add_one=%d in_place=%d",
             (long long)rows, (long long)dim, with_w, kind == 2 && with_b, add_one, in_place);
    out_view y = out_make(h, rows, dim, dim + pad(h), pad(h), 1);
    const int64_t ldx = in_place ? y.ld : dim + pad(h), xoff = in_place ? y.off : pad(h);
    float *x = in_place ? y.before : host_rand(h, (xoff + rows) * ldx, 2.0f);
    const int64_t ldz = dim + pad(h);
    float *z = host_rand(h, rows * ldz, 3.0f), *w = host_rand(h, dim, 1.0f),
          *b = host_rand(h, dim, 1.0f);
    double *ref = malloc(sizeof(double) * (size_t)(rows * dim));
    for (int64_t t = 0; t < rows; t++) {
        const float *xr = x + (xoff + t) * ldx;
        double mean = 0, ss = 0;
        for (int64_t j = 0; j < dim; j++)
            mean += xr[j];
        mean /= (double)dim;
        for (int64_t j = 0; j < dim; j++)
            ss += kind == 2 ? (xr[j] - mean) * (xr[j] - mean) : (double)xr[j] * xr[j];
        double inv = 1.0 / sqrt(ss / (double)dim + eps);
        for (int64_t j = 0; j < dim; j++) {
            double v;
            if (kind == 2) {
                v = (xr[j] - mean) * inv * (with_w ? w[j] : 1.0) + (with_b ? b[j] : 0.0);
            } else {
                v = xr[j] * inv;
                if (with_w)
                    v *= kind == 0 && add_one ? 1.0 + w[j] : w[j];
                if (kind == 1) {
                    double zz = z[t * ldz + j];
                    v *= zz / (1.0 + exp(-zz));
                }
            }
            ref[t * dim + j] = v;
        }
    }
    const float *dx = in_place ? out_ptr(&y) : dev_upf(h, x, (xoff + rows) * ldx) + xoff * ldx;
    const float *dw = with_w ? dev_upf(h, w, dim) : NULL;
    if (kind == 0)
        clef_rmsnorm(h->be, rows, dim, dx, ldx, dw, eps, add_one, out_ptr(&y), y.ld);
    else if (kind == 1)
        clef_rmsnorm_gated(h->be, rows, dim, dx, ldx, dev_upf(h, z, rows * ldz), ldz, dw, eps,
                           out_ptr(&y), y.ld);
    else
        clef_layernorm(h->be, rows, dim, dx, ldx, dw, with_b ? dev_upf(h, b, dim) : NULL, eps,
                       out_ptr(&y), y.ld);
    if (in_place)
        x = NULL; /* it was y.before, freed by finish */
    finish(h, &y, ref, r);
    free(x), free(z), free(w), free(b), free(ref);
}
static void case_rmsnorm(harness *h, case_result *r) { norm_case(h, r, 0); }
static void case_rmsnorm_gated(harness *h, case_result *r) { norm_case(h, r, 1); }
static void case_layernorm(harness *h, case_result *r) { norm_case(h, r, 2); }

/* Packed sequences over T rows (clef_seqs): 1..3 sequences at random cut points, the host
 * offsets in seq_start[4] and the same offsets uploaded for the device; NULL-able use. */
typedef struct drawn_seqs {
    int64_t start[4];
    clef_seqs seqs;
} drawn_seqs;

static const clef_seqs *draw_seqs(harness *h, int64_t T, drawn_seqs *d) {
    const int64_t n = T >= 3 ? rand_int(h, 1, 3) : 1;
    d->start[0] = 0;
    d->start[n] = T;
    for (int64_t s = 1; s < n; s++) /* strictly increasing cuts: no empty sequence */
        d->start[s] = rand_int(h, d->start[s - 1] + 1, T - (n - s));
    int32_t dev[4];
    int64_t max_len = 0;
    for (int64_t s = 0; s <= n; s++) {
        dev[s] = (int32_t)d->start[s];
        if (s < n && d->start[s + 1] - d->start[s] > max_len)
            max_len = d->start[s + 1] - d->start[s];
    }
    d->seqs = (clef_seqs){.n_seqs = n, .start = d->start,
                          .start_dev = dev_up(h, dev, sizeof(int32_t) * (size_t)(n + 1)),
                          .max_len = max_len};
    return &d->seqs;
}

static int64_t seq_of(const drawn_seqs *d, int64_t t) {
    int64_t s = 0;
    while (t >= d->start[s + 1])
        s++;
    return s;
}

static void case_conv(harness *h, case_result *r) {
    const int64_t T = rand_int(h, 1, 60), C = rand_int(h, 1, 80), K = rand_int(h, 1, 5);
    const int with_prev = (int)rand_int(h, 0, 1);
    const int64_t ldx = C + pad(h), xoff = pad(h);
    drawn_seqs ds;
    const clef_seqs *seqs = rand_int(h, 0, 1) ? draw_seqs(h, T, &ds) : NULL;
    const int64_t n_seqs = seqs ? seqs->n_seqs : 1;
    snprintf(r->shape, sizeof r->shape, "T=%lld C=%lld K=%lld prev=%d seqs=%lld", (long long)T,
             (long long)C, (long long)K, with_prev, (long long)(seqs ? n_seqs : 0));
    float *x = host_rand(h, (xoff + T) * ldx, 2.0f), *w = host_rand(h, C * K, 1.0f);
    float *prev = host_rand(h, n_seqs * (K > 1 ? K - 1 : 1) * C, 2.0f);
    out_view y = out_make(h, T, C, C + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(T * C));
    for (int64_t t = 0; t < T; t++) {
        /* each sequence starts its own window: rows before its first come from its prev */
        const int64_t sq = seqs ? seq_of(&ds, t) : 0, t0 = seqs ? ds.start[sq] : 0;
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t i = 0; i < K; i++) {
                int64_t src = t - t0 - K + 1 + i;
                double v = src >= 0 ? x[(xoff + t0 + src) * ldx + c]
                                    : with_prev ? prev[(sq * (K - 1) + K - 1 + src) * C + c] : 0.0;
                acc += (double)w[c * K + i] * v;
            }
            ref[t * C + c] = acc / (1.0 + exp(-acc));
        }
    }
    clef_conv1d_causal_silu(h->be, T, C, K, dev_upf(h, x, (xoff + T) * ldx) + xoff * ldx, ldx,
                            dev_upf(h, w, C * K),
                            with_prev && K > 1 ? dev_upf(h, prev, n_seqs * (K - 1) * C) : NULL,
                            out_ptr(&y), y.ld, seqs);
    finish(h, &y, ref, r);
    free(x), free(w), free(prev), free(ref);
}

static void case_gdn_gates(harness *h, case_result *r) {
    const int64_t T = rand_int(h, 1, 60), H = rand_int(h, 1, 16);
    const int64_t lda = H + pad(h), ldb = H + pad(h);
    snprintf(r->shape, sizeof r->shape, "T=%lld H=%lld", (long long)T, (long long)H);
    float *a = host_rand(h, T * lda, 25.0f), *b = host_rand(h, T * ldb, 6.0f);
    float *alog = host_rand(h, H, 2.0f), *dtb = host_rand(h, H, 1.0f);
    /* g and beta are contiguous [T, H]: one output buffer holds g then beta */
    out_view y = out_make(h, 2 * T, H, H, 0, 0);
    double *ref = malloc(sizeof(double) * (size_t)(2 * T * H));
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++) {
            double z = (double)a[t * lda + k] + dtb[k];
            double sp = z > 20.0 ? z : log1p(exp(z));
            ref[t * H + k] = -exp((double)alog[k]) * sp;
            ref[(T + t) * H + k] = 1.0 / (1.0 + exp(-(double)b[t * ldb + k]));
        }
    clef_gdn_gates(h->be, T, H, dev_upf(h, a, T * lda), lda, dev_upf(h, b, T * ldb), ldb,
                   dev_upf(h, alog, H), dev_upf(h, dtb, H), out_ptr(&y), out_ptr(&y) + T * H);
    finish(h, &y, ref, r);
    free(a), free(b), free(alog), free(dtb), free(ref);
}

static void case_gdn(harness *h, case_result *r) {
    const int64_t T = rand_int(h, 1, 150), Hk = rand_int(h, 1, 2), Hv = Hk * rand_int(h, 1, 3);
    const int64_t dk = 8 * rand_int(h, 1, 6), dv = 8 * rand_int(h, 1, 6);
    const int with_state = (int)rand_int(h, 0, 1);
    const clef_gdn_mode mode = (clef_gdn_mode)rand_int(h, 0, 1);
    drawn_seqs ds;
    const clef_seqs *seqs = rand_int(h, 0, 1) ? draw_seqs(h, T, &ds) : NULL;
    const int64_t n_seqs = seqs ? seqs->n_seqs : 1;
    snprintf(r->shape, sizeof r->shape,
             "T=%lld Hk=%lld Hv=%lld dk=%lld dv=%lld state=%d %s seqs=%lld",
             (long long)T, (long long)Hk, (long long)Hv, (long long)dk, (long long)dv,
             with_state, mode == CLEF_GDN_CHUNKED ? "chunked" : "recurrent",
             (long long)(seqs ? n_seqs : 0));
    /* q, k, v inside one projection row, as the model lays them out */
    const int64_t ld = 2 * Hk * dk + Hv * dv + pad(h), off = pad(h);
    float *qkv = host_rand(h, (off + T) * ld, 1.0f);
    float *g = malloc(sizeof(float) * (size_t)(T * Hv));
    float *beta = malloc(sizeof(float) * (size_t)(T * Hv));
    for (int64_t i = 0; i < T * Hv; i++) {
        g[i] = -0.3f * (rand_f(h, 1.0f) + 1.0f) - 0.001f;
        beta[i] = 0.5f * (rand_f(h, 1.0f) + 1.0f);
    }
    const int64_t ns = n_seqs * Hv * dk * dv;
    float *S0 = host_rand(h, ns, 0.5f);
    /* output: o [T, Hv*dv] then the final states [n_seqs, Hv, dk, dv], one flat view */
    const int64_t ldo = Hv * dv;
    out_view y = out_make(h, T * ldo + ns, 1, 1, 0, 0);
    double *ref = calloc((size_t)(T * ldo + ns), sizeof(double));
    double *S = malloc(sizeof(double) * (size_t)(dk * dv));
    double *q = malloc(sizeof(double) * (size_t)dk), *k = malloc(sizeof(double) * (size_t)dk);
    double *delta = malloc(sizeof(double) * (size_t)dv);
    for (int64_t hh = 0; hh < Hv; hh++) {
        const int64_t kh = hh / (Hv / Hk);
        for (int64_t sq = 0; sq < n_seqs; sq++) { /* each sequence from its own state */
            const int64_t t0 = seqs ? ds.start[sq] : 0, t1 = seqs ? ds.start[sq + 1] : T;
            const int64_t sbase = (sq * Hv + hh) * dk * dv;
            for (int64_t i = 0; i < dk * dv; i++)
                S[i] = with_state ? S0[sbase + i] : 0.0;
            for (int64_t t = t0; t < t1; t++) {
                const float *row = qkv + (off + t) * ld;
                double qs = 0, ks = 0;
                for (int64_t i = 0; i < dk; i++) {
                    q[i] = row[kh * dk + i];
                    k[i] = row[Hk * dk + kh * dk + i];
                    qs += q[i] * q[i], ks += k[i] * k[i];
                }
                for (int64_t i = 0; i < dk; i++) {
                    q[i] = q[i] / sqrt(qs + 1e-6) / sqrt((double)dk);
                    k[i] = k[i] / sqrt(ks + 1e-6);
                }
                const double decay = exp((double)g[t * Hv + hh]), bt = beta[t * Hv + hh];
                for (int64_t i = 0; i < dk * dv; i++)
                    S[i] *= decay;
                for (int64_t j = 0; j < dv; j++) {
                    double mem = 0;
                    for (int64_t i = 0; i < dk; i++)
                        mem += S[i * dv + j] * k[i];
                    delta[j] = bt * (row[2 * Hk * dk + hh * dv + j] - mem);
                }
                for (int64_t i = 0; i < dk; i++)
                    for (int64_t j = 0; j < dv; j++)
                        S[i * dv + j] += k[i] * delta[j];
                for (int64_t j = 0; j < dv; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < dk; i++)
                        acc += S[i * dv + j] * q[i];
                    ref[t * ldo + hh * dv + j] = acc;
                }
            }
            for (int64_t i = 0; i < dk * dv; i++)
                ref[T * ldo + sbase + i] = with_state ? S[i] : 0.0;
        }
    }
    float *o_dev = out_ptr(&y), *state_dev = o_dev + T * ldo;
    if (with_state)
        CLEF_ASSERT(clef_backend_write(h->be, state_dev, S0, sizeof(float) * (size_t)ns) == 0);
    else /* no state: the op leaves that part alone; expect what was there */
        for (int64_t i = 0; i < ns; i++)
            ref[T * ldo + i] = y.before[T * ldo + i];
    const float *dq = dev_upf(h, qkv, (off + T) * ld) + off * ld;
    clef_gdn_args a = {.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv,
                       .q = dq, .ldq = ld, .k = dq + Hk * dk, .ldk = ld,
                       .v = dq + 2 * Hk * dk, .ldv = ld, .g = dev_upf(h, g, T * Hv),
                       .beta = dev_upf(h, beta, T * Hv), .state = with_state ? state_dev : NULL,
                       .o = o_dev, .ldo = ldo, .l2norm_qk = 1, .mode = mode, .seqs = seqs};
    size_t ws = clef_gdn_workspace_size(h->be, &a);
    clef_gdn(h->be, &a, ws ? dev_alloc(h, ws) : NULL);
    finish(h, &y, ref, r);
    free(qkv), free(g), free(beta), free(S0), free(ref), free(S), free(q), free(k), free(delta);
}

static void case_rope_table(harness *h, case_result *r) {
    const int64_t T = rand_int(h, 1, 40), rot = 2 * rand_int(h, 2, 32), half = rot / 2;
    const int interleaved = (int)rand_int(h, 0, 1);
    int64_t sections[3];
    sections[1] = rand_int(h, 0, half / 3);
    sections[2] = rand_int(h, 0, half / 3);
    sections[0] = half - sections[1] - sections[2];
    const double theta = rand_int(h, 0, 1) ? 10000.0 : 5000000.0;
    snprintf(r->shape, sizeof r->shape, "T=%lld rot=%lld sections=[%lld,%lld,%lld] il=%d",
             (long long)T, (long long)rot, (long long)sections[0], (long long)sections[1],
             (long long)sections[2], interleaved);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(3 * T));
    for (int64_t i = 0; i < 3 * T; i++)
        pos[i] = (int32_t)rand_int(h, 0, 5000);
    out_view y = out_make(h, 2 * T, rot, rot, 0, 0); /* cos rows then sin rows */
    double *ref = malloc(sizeof(double) * (size_t)(2 * T * rot));
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            int axis = 0;
            if (interleaved) {
                if (j % 3 == 1 && j < 3 * sections[1])
                    axis = 1;
                else if (j % 3 == 2 && j < 3 * sections[2])
                    axis = 2;
            } else {
                axis = j < sections[0] ? 0 : j < sections[0] + sections[1] ? 1 : 2;
            }
            /* the definition: inv_freq and phi rounded to fp32 as transformers computes them */
            float inv_freq = 1.0f / (float)pow(theta, (double)((float)(2 * j) / (float)rot));
            float phi = (float)pos[axis * T + t] * inv_freq;
            ref[t * rot + j] = ref[t * rot + half + j] = cos((double)phi);
            ref[(T + t) * rot + j] = ref[(T + t) * rot + half + j] = sin((double)phi);
        }
    clef_rope_table(h->be, T, dev_up(h, pos, sizeof(int32_t) * (size_t)(3 * T)), rot, theta,
                    sections, interleaved, out_ptr(&y), out_ptr(&y) + T * rot);
    finish(h, &y, ref, r);
    free(pos), free(ref);
}

static void case_rope_apply(harness *h, case_result *r) {
    const int64_t T = rand_int(h, 1, 40), nh = rand_int(h, 1, 6), rot = 2 * rand_int(h, 1, 16);
    const int64_t hs = rot + rand_int(h, 0, 12);
    snprintf(r->shape, sizeof r->shape, "T=%lld heads=%lld rot=%lld head_stride=%lld",
             (long long)T, (long long)nh, (long long)rot, (long long)hs);
    out_view y = out_make(h, T, (nh - 1) * hs + rot, (nh - 1) * hs + rot + pad(h), pad(h), 1);
    float *cs = malloc(sizeof(float) * (size_t)(2 * T * rot));
    for (int64_t i = 0; i < T * rot; i++) {
        float phi = rand_f(h, 3.0f);
        cs[i] = cosf(phi);
        cs[T * rot + i] = sinf(phi);
    }
    double *ref = malloc(sizeof(double) * (size_t)(T * y.cols));
    const int64_t half = rot / 2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < y.cols; c++) {
            int64_t hd = c / hs, i = c % hs;
            double v = out_init(&y, t, c);
            if (hd < nh && i < rot) {
                const double cc = cs[t * rot + i], ss = cs[T * rot + t * rot + i];
                double other = i < half ? -(double)out_init(&y, t, hd * hs + i + half)
                                        : (double)out_init(&y, t, hd * hs + i - half);
                v = v * cc + other * ss;
            }
            ref[t * y.cols + c] = v;
        }
    float *dcs = dev_upf(h, cs, 2 * T * rot);
    clef_rope_apply(h->be, T, nh, out_ptr(&y), y.ld, hs, rot, dcs, dcs + T * rot);
    finish(h, &y, ref, r);
    free(cs), free(ref);
}

static void case_attention(harness *h, case_result *r) {
    const int64_t nkv = rand_int(h, 1, 100), causal = rand_int(h, 0, 1);
    /* packed self-attention (n_q == n_kv, sequence offsets) or one sequence / cross */
    drawn_seqs ds;
    const clef_seqs *seqs = rand_int(h, 0, 1) ? draw_seqs(h, nkv, &ds) : NULL;
    const int64_t nq = seqs ? nkv : causal ? rand_int(h, 1, nkv) : rand_int(h, 1, 60);
    const int64_t Hkv = rand_int(h, 1, 3), Hq = Hkv * rand_int(h, 1, 3), d = rand_int(h, 1, 40);
    /* q interleaved with a gate half per head (Qwen3.5's q_proj), k and v in one row */
    const int64_t qhs = d + rand_int(h, 0, d), ldq = Hq * qhs + pad(h);
    const int64_t khs = d + pad(h), ldkv = 2 * Hkv * khs + pad(h);
    const int64_t qoff = pad(h), kvoff = pad(h);
    const float scale = 1.0f / sqrtf((float)d);
    snprintf(r->shape, sizeof r->shape,
             "nq=%lld nkv=%lld Hq=%lld Hkv=%lld d=%lld causal=%d seqs=%lld",
             (long long)nq, (long long)nkv, (long long)Hq, (long long)Hkv, (long long)d,
             (int)causal, (long long)(seqs ? seqs->n_seqs : 0));
    float *q = host_rand(h, (qoff + nq) * ldq, 1.5f);
    float *kv = host_rand(h, (kvoff + nkv) * ldkv, 1.5f);
    const int64_t ohs = d + pad(h);
    out_view y = out_make(h, nq, (Hq - 1) * ohs + d, (Hq - 1) * ohs + d + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(nq * y.cols));
    double *s = malloc(sizeof(double) * (size_t)nkv);
    for (int64_t i = 0; i < nq; i++)
        for (int64_t c = 0; c < y.cols; c++)
            ref[i * y.cols + c] = out_init(&y, i, c); /* gaps between heads keep their values */
    for (int64_t hh = 0; hh < Hq; hh++) {
        const int64_t kvh = hh / (Hq / Hkv);
        for (int64_t i = 0; i < nq; i++) {
            /* keys [j0, vis): the row's own sequence, up to itself when causal */
            const int64_t sq = seqs ? seq_of(&ds, i) : 0;
            const int64_t j0 = seqs ? ds.start[sq] : 0, end = seqs ? ds.start[sq + 1] : nkv;
            const int64_t vis = causal ? i + (nkv - nq) + 1 : end;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = j0; j < vis; j++) {
                double acc = 0;
                for (int64_t e = 0; e < d; e++)
                    acc += (double)q[(qoff + i) * ldq + hh * qhs + e] *
                           kv[(kvoff + j) * ldkv + kvh * khs + e];
                s[j] = acc * scale;
                mx = fmax(mx, s[j]);
            }
            for (int64_t j = j0; j < vis; j++)
                sum += (s[j] = exp(s[j] - mx));
            for (int64_t e = 0; e < d; e++) {
                double acc = 0;
                for (int64_t j = j0; j < vis; j++)
                    acc += s[j] / sum * kv[(kvoff + j) * ldkv + (Hkv + kvh) * khs + e];
                ref[i * y.cols + hh * ohs + e] = acc;
            }
        }
    }
    const float *dq = dev_upf(h, q, (qoff + nq) * ldq) + qoff * ldq;
    const float *dkv = dev_upf(h, kv, (kvoff + nkv) * ldkv) + kvoff * ldkv;
    clef_attention_args a = {.n_q = nq, .n_kv = nkv, .n_q_heads = Hq, .n_kv_heads = Hkv,
                             .head_dim = d, .q = dq, .ldq = ldq, .q_head_stride = qhs,
                             .k = dkv, .ldk = ldkv, .k_head_stride = khs,
                             .v = dkv + Hkv * khs, .ldv = ldkv, .v_head_stride = khs,
                             .o = out_ptr(&y), .ldo = y.ld, .o_head_stride = ohs,
                             .scale = scale, .causal = (int)causal, .seqs = seqs};
    size_t ws = clef_attention_workspace_size(h->be, &a);
    clef_attention(h->be, &a, ws ? dev_alloc(h, ws) : NULL);
    finish(h, &y, ref, r);
    free(q), free(kv), free(ref), free(s);
}

static void case_softmax(harness *h, case_result *r) {
    const int64_t rows = rand_int(h, 1, 30), cols = rand_int(h, 1, 300);
    snprintf(r->shape, sizeof r->shape, "rows=%lld cols=%lld", (long long)rows, (long long)cols);
    out_view y = out_make(h, rows, cols, cols + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(rows * cols));
    for (int64_t t = 0; t < rows; t++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < cols; c++)
            mx = fmax(mx, out_init(&y, t, c));
        for (int64_t c = 0; c < cols; c++)
            sum += exp(out_init(&y, t, c) - mx);
        for (int64_t c = 0; c < cols; c++)
            ref[t * cols + c] = exp(out_init(&y, t, c) - mx) / sum;
    }
    clef_softmax(h->be, rows, cols, out_ptr(&y), y.ld);
    finish(h, &y, ref, r);
    free(ref);
}

static double ref_unary(clef_unary_op op, double x) {
    switch (op) {
    case CLEF_UNARY_SILU: return x / (1.0 + exp(-x));
    case CLEF_UNARY_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case CLEF_UNARY_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case CLEF_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CLEF_UNARY_SOFTPLUS: return x > 20.0 ? x : log1p(exp(x));
    case CLEF_UNARY_EXP: return exp(x);
    default: return NAN;
    }
}

static void case_unary(harness *h, case_result *r) {
    const clef_unary_op op = (clef_unary_op)rand_int(h, 0, CLEF_UNARY_COUNT - 1);
    const int64_t n = rand_int(h, 1, 5000);
    const int in_place = (int)rand_int(h, 0, 1);
    snprintf(r->shape, sizeof r->shape, "op=%d n=%lld in_place=%d", (int)op, (long long)n,
             in_place);
    /* softplus crosses its threshold 20; the others stay where exp is finite */
    float *x = host_rand(h, n, op == CLEF_UNARY_SOFTPLUS ? 30.0f : 8.0f);
    out_view y = out_make(h, n, 1, 1, pad(h), 3);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = ref_unary(op, in_place ? out_init(&y, i, 0) : x[i]);
    clef_unary(h->be, op, n, in_place ? out_ptr(&y) : dev_upf(h, x, n), out_ptr(&y));
    finish(h, &y, ref, r);
    free(x), free(ref);
}

static void case_mul_sigmoid(harness *h, case_result *r) {
    const int64_t rows = rand_int(h, 1, 30), cols = rand_int(h, 1, 200), ldg = cols + pad(h);
    snprintf(r->shape, sizeof r->shape, "rows=%lld cols=%lld", (long long)rows, (long long)cols);
    float *gate = host_rand(h, rows * ldg, 8.0f);
    out_view y = out_make(h, rows, cols, cols + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(rows * cols));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < cols; c++)
            ref[t * cols + c] = out_init(&y, t, c) / (1.0 + exp(-(double)gate[t * ldg + c]));
    clef_mul_sigmoid(h->be, rows, cols, out_ptr(&y), y.ld, dev_upf(h, gate, rows * ldg), ldg);
    finish(h, &y, ref, r);
    free(gate), free(ref);
}

/* swiglu, add, axpy: n contiguous floats, y = f(a, b). kind 0 swiglu, 1 add, 2 axpy. */
static void flat_case(harness *h, case_result *r, int kind) {
    const int64_t n = rand_int(h, 1, 5000);
    const float alpha = rand_f(h, 2.0f);
    snprintf(r->shape, sizeof r->shape, "n=%lld%s", (long long)n,
             kind == 2 ? " (alpha random)" : "");
    float *a = host_rand(h, n, 6.0f), *b = host_rand(h, n, 3.0f);
    out_view y = out_make(h, n, 1, 1, pad(h), 3);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (kind == 0)
            ref[i] = (double)a[i] / (1.0 + exp(-(double)a[i])) * b[i];
        else if (kind == 1)
            ref[i] = (double)a[i] + b[i];
        else
            ref[i] = out_init(&y, i, 0) + (double)alpha * a[i];
    }
    const float *da = dev_upf(h, a, n), *db = dev_upf(h, b, n);
    if (kind == 0)
        clef_swiglu(h->be, n, da, db, out_ptr(&y));
    else if (kind == 1)
        clef_add(h->be, n, da, db, out_ptr(&y));
    else
        clef_axpy(h->be, n, alpha, da, out_ptr(&y));
    finish(h, &y, ref, r);
    free(a), free(b), free(ref);
}
static void case_swiglu(harness *h, case_result *r) { flat_case(h, r, 0); }

/* swiglu_matmul: out (+)= (silu(gate) * up) w^T over T rows of K, F32 weights; half the draws
 * with y over gate (as the model calls it). */
static void case_swiglu_matmul(harness *h, case_result *r) {
    const int64_t T = rand_int(h, 1, 30), N = rand_int(h, 1, 70), K = rand_int(h, 1, 160);
    const int accumulate = (int)rand_int(h, 0, 1), in_place = (int)rand_int(h, 0, 1);
    const int64_t ldw = K + pad(h);
    snprintf(r->shape, sizeof r->shape, "T=%lld N=%lld K=%lld acc=%d%s", (long long)T, (long long)N,
             (long long)K, accumulate, in_place ? " in place" : "");
    float *g = host_rand(h, T * K, 6.0f), *u = host_rand(h, T * K, 3.0f), *wf = host_rand(h, N * ldw, 0.5f);
    out_view y = out_make(h, T, N, N + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(T * N));
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double dot = accumulate ? out_init(&y, t, n) : 0.0;
            for (int64_t k = 0; k < K; k++) {
                const double a = g[t * K + k];
                dot += a / (1.0 + exp(-a)) * u[t * K + k] * wf[n * ldw + k];
            }
            ref[t * N + n] = dot;
        }
    clef_matrix w = {.type = CLEF_WTYPE_F32, .rows = N, .cols = K, .ld = ldw, .data = dev_upf(h, wf, N * ldw)};
    float *dg = dev_upf(h, g, T * K);
    float *dy = in_place ? dg : dev_alloc(h, sizeof(float) * (size_t)(T * K));
    clef_swiglu_matmul(h->be, T, dg, dev_upf(h, u, T * K), dy, &w, out_ptr(&y), y.ld, accumulate, NULL);
    finish(h, &y, ref, r);
    free(g), free(u), free(wf), free(ref);
}
static void case_add(harness *h, case_result *r) { flat_case(h, r, 1); }
static void case_axpy(harness *h, case_result *r) { flat_case(h, r, 2); }

static void case_segment_sum(harness *h, case_result *r) {
    const int64_t n_rows = rand_int(h, 1, 120), dim = rand_int(h, 1, 150);
    const int64_t n_seg = rand_int(h, 1, 20), n_dst = n_seg + rand_int(h, 0, 5);
    const int weighted = (int)rand_int(h, 0, 1);
    const int64_t ldx = dim + pad(h), xoff = pad(h);
    snprintf(r->shape, sizeof r->shape, "rows=%lld dim=%lld segments=%lld weighted=%d",
             (long long)n_rows, (long long)dim, (long long)n_seg, weighted);
    float *x = host_rand(h, (xoff + n_rows) * ldx, 2.0f), *wt = host_rand(h, n_rows, 1.0f);
    /* distinct destinations in random order; ranges anywhere (overlapping, empty allowed) */
    clef_segment *segs = malloc(sizeof(clef_segment) * (size_t)n_seg);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n_dst);
    for (int64_t i = 0; i < n_dst; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = n_dst - 1; i > 0; i--) {
        int64_t j = rand_int(h, 0, i);
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int64_t s = 0; s < n_seg; s++) {
        int32_t b = (int32_t)rand_int(h, 0, n_rows), e = (int32_t)rand_int(h, b, n_rows);
        segs[s] = (clef_segment){.dst = perm[s], .begin = b, .end = e,
                                 .count = (e - b) + (int32_t)rand_int(h, 1, 3),
                                 .accumulate = (int32_t)rand_int(h, 0, 1)};
    }
    out_view y = out_make(h, n_dst, dim, dim + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(n_dst * dim));
    for (int64_t i = 0; i < n_dst; i++)
        for (int64_t j = 0; j < dim; j++)
            ref[i * dim + j] = out_init(&y, i, j);
    for (int64_t s = 0; s < n_seg; s++)
        for (int64_t j = 0; j < dim; j++) {
            double acc = 0;
            for (int64_t t = segs[s].begin; t < segs[s].end; t++)
                acc += (weighted ? (double)wt[t] : 1.0 / segs[s].count) * x[(xoff + t) * ldx + j];
            double *dst = &ref[segs[s].dst * dim + j];
            *dst = segs[s].accumulate ? *dst + acc : acc;
        }
    clef_segment_sum(h->be, n_seg, dim, dev_up(h, segs, sizeof(clef_segment) * (size_t)n_seg),
                     dev_upf(h, x, (xoff + n_rows) * ldx) + xoff * ldx, ldx,
                     weighted ? dev_upf(h, wt, n_rows) : NULL, out_ptr(&y), y.ld);
    finish(h, &y, ref, r);
    free(x), free(wt), free(segs), free(perm), free(ref);
}

static void case_row_dot(harness *h, case_result *r) {
    const int64_t n = rand_int(h, 1, 60), dim = rand_int(h, 1, 200);
    const int64_t na = rand_int(h, 1, 20), nb = rand_int(h, 1, 20);
    const int index_a = (int)rand_int(h, 0, 1), index_b = (int)rand_int(h, 0, 1);
    const int mode = (int)rand_int(h, 0, 2); /* dot, cosine (1e-8), normalize (1e-12) */
    const float eps = mode == 0 ? 0.0f : mode == 1 ? 1e-8f : 1e-12f;
    const float scale = rand_f(h, 4.0f);
    const int64_t lda = dim + pad(h), ldb = dim + pad(h);
    const int64_t ra = index_a ? na : n, rb = index_b ? nb : n;
    snprintf(r->shape, sizeof r->shape, "n=%lld dim=%lld ia=%d ib=%d eps=%g", (long long)n,
             (long long)dim, index_a, index_b, (double)eps);
    float *a = host_rand(h, ra * lda, 2.0f), *b = host_rand(h, rb * ldb, 2.0f);
    if (mode) /* a zero row: the eps clamp decides */
        memset(a, 0, sizeof(float) * (size_t)dim);
    int32_t *ia = malloc(sizeof(int32_t) * (size_t)n), *ib = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        ia[i] = (int32_t)rand_int(h, 0, na - 1);
        ib[i] = (int32_t)rand_int(h, 0, nb - 1);
    }
    out_view y = out_make(h, n, 1, 1, pad(h), 3);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        const float *ar = a + (index_a ? ia[i] : i) * lda, *br = b + (index_b ? ib[i] : i) * ldb;
        double dot = 0, sa = 0, sb = 0;
        for (int64_t j = 0; j < dim; j++) {
            dot += (double)ar[j] * br[j];
            sa += (double)ar[j] * ar[j];
            sb += (double)br[j] * br[j];
        }
        double v = (double)scale * dot;
        if (eps > 0)
            v /= fmax(sqrt(sa), (double)eps) * fmax(sqrt(sb), (double)eps);
        ref[i] = v;
    }
    clef_row_dot(h->be, n, dim, dev_upf(h, a, ra * lda), lda,
                 index_a ? dev_up(h, ia, sizeof(int32_t) * (size_t)n) : NULL,
                 dev_upf(h, b, rb * ldb), ldb,
                 index_b ? dev_up(h, ib, sizeof(int32_t) * (size_t)n) : NULL, scale, eps,
                 out_ptr(&y));
    finish(h, &y, ref, r);
    free(a), free(b), free(ia), free(ib), free(ref);
}

static void case_segment_softmax(harness *h, case_result *r) {
    const int64_t n_seg = rand_int(h, 1, 30);
    int32_t *off = malloc(sizeof(int32_t) * (size_t)(n_seg + 1));
    off[0] = (int32_t)rand_int(h, 0, 3); /* the segments need not start at 0 */
    for (int64_t s = 0; s < n_seg; s++)
        off[s + 1] = off[s] + (int32_t)rand_int(h, 0, 40); /* empty segments allowed */
    const int64_t n = off[n_seg] + 2;
    const int in_place = (int)rand_int(h, 0, 1);
    snprintf(r->shape, sizeof r->shape, "segments=%lld elements=%lld in_place=%d",
             (long long)n_seg, (long long)(off[n_seg] - off[0]), in_place);
    float *x = host_rand(h, n, 30.0f);
    out_view y = out_make(h, n, 1, 1, 0, 0);
    double *ref = malloc(sizeof(double) * (size_t)n);
    const float *src = in_place ? y.before : x;
    for (int64_t i = 0; i < n; i++)
        ref[i] = y.before[i]; /* outside every segment: untouched */
    for (int64_t s = 0; s < n_seg; s++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t i = off[s]; i < off[s + 1]; i++)
            mx = fmax(mx, src[i]);
        for (int64_t i = off[s]; i < off[s + 1]; i++)
            sum += exp(src[i] - mx);
        for (int64_t i = off[s]; i < off[s + 1]; i++)
            ref[i] = exp(src[i] - mx) / sum;
    }
    clef_segment_softmax(h->be, n_seg, dev_up(h, off, sizeof(int32_t) * (size_t)(n_seg + 1)),
                         in_place ? out_ptr(&y) : dev_upf(h, x, n), out_ptr(&y));
    finish(h, &y, ref, r);
    free(off), free(x), free(ref);
}

static void case_add_rows(harness *h, case_result *r) {
    const int64_t rows = rand_int(h, 1, 50), cols = rand_int(h, 1, 150), nv = rand_int(h, 1, 8);
    const int indexed = (int)rand_int(h, 0, 1), in_place = (int)rand_int(h, 0, 1);
    const int64_t ldv = cols + pad(h);
    snprintf(r->shape, sizeof r->shape, "rows=%lld cols=%lld indexed=%d in_place=%d",
             (long long)rows, (long long)cols, indexed, in_place);
    out_view y = out_make(h, rows, cols, cols + pad(h), pad(h), 1);
    const int64_t ldx = in_place ? y.ld : cols + pad(h);
    float *x = host_rand(h, rows * ldx, 2.0f), *v = host_rand(h, nv * ldv, 2.0f);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++)
        idx[i] = (int32_t)rand_int(h, 0, nv - 1);
    double *ref = malloc(sizeof(double) * (size_t)(rows * cols));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < cols; c++)
            ref[t * cols + c] = (double)(in_place ? out_init(&y, t, c) : x[t * ldx + c]) +
                                v[(indexed ? idx[t] : 0) * ldv + c];
    clef_add_rows(h->be, rows, cols, in_place ? out_ptr(&y) : dev_upf(h, x, rows * ldx), ldx,
                  dev_upf(h, v, nv * ldv), ldv,
                  indexed ? dev_up(h, idx, sizeof(int32_t) * (size_t)rows) : NULL, out_ptr(&y),
                  y.ld);
    finish(h, &y, ref, r);
    free(x), free(v), free(idx), free(ref);
}

static void case_pair_features(harness *h, case_result *r) {
    const int64_t rows = rand_int(h, 1, 50), dim = rand_int(h, 1, 100), nf = rand_int(h, 1, 8);
    const int64_t ldf = dim + pad(h), ldo = dim + pad(h), ooff = pad(h);
    snprintf(r->shape, sizeof r->shape, "rows=%lld dim=%lld fields=%lld", (long long)rows,
             (long long)dim, (long long)nf);
    float *f = host_rand(h, nf * ldf, 2.0f), *o = host_rand(h, (ooff + rows) * ldo, 2.0f);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++)
        idx[i] = (int32_t)rand_int(h, 0, nf - 1);
    out_view y = out_make(h, rows, 4 * dim, 4 * dim + pad(h), pad(h), 1);
    double *ref = malloc(sizeof(double) * (size_t)(rows * 4 * dim));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t j = 0; j < dim; j++) {
            double fv = f[idx[t] * ldf + j], ov = o[(ooff + t) * ldo + j];
            double *dst = ref + t * 4 * dim;
            dst[j] = fv, dst[dim + j] = ov, dst[2 * dim + j] = fv * ov;
            dst[3 * dim + j] = fabs(fv - ov);
        }
    clef_pair_features(h->be, rows, dim, dev_upf(h, f, nf * ldf), ldf,
                       dev_up(h, idx, sizeof(int32_t) * (size_t)rows),
                       dev_upf(h, o, (ooff + rows) * ldo) + ooff * ldo, ldo, out_ptr(&y), y.ld);
    finish(h, &y, ref, r);
    free(f), free(o), free(idx), free(ref);
}

/* ---- the case table ----------------------------------------------------------------------- */

#define SLOT(name) offsetof(clef_backend_ops, name)
enum { MAX_SLOTS = 3 };

static const struct {
    const char *op; /* its TOLERANCES row */
    void (*run)(harness *h, case_result *r);
    size_t slots[MAX_SLOTS]; /* op-table slots the case exercises (0 = none) */
} OPS[] = {
    {"matmul", case_matmul, {SLOT(matmul), SLOT(matmul_workspace_size), SLOT(prepare_matrix)}},
    {"get_rows", case_get_rows, {SLOT(get_rows)}},
    {"rmsnorm", case_rmsnorm, {SLOT(rmsnorm)}},
    {"rmsnorm_gated", case_rmsnorm_gated, {SLOT(rmsnorm_gated)}},
    {"layernorm", case_layernorm, {SLOT(layernorm)}},
    {"conv1d_causal_silu", case_conv, {SLOT(conv1d_causal_silu)}},
    {"gdn_gates", case_gdn_gates, {SLOT(gdn_gates)}},
    {"gdn", case_gdn, {SLOT(gdn), SLOT(gdn_workspace_size)}},
    {"rope_table", case_rope_table, {SLOT(rope_table)}},
    {"rope_apply", case_rope_apply, {SLOT(rope_apply)}},
    {"attention", case_attention, {SLOT(attention), SLOT(attention_workspace_size)}},
    {"softmax", case_softmax, {SLOT(softmax)}},
    {"unary", case_unary, {SLOT(unary)}},
    {"mul_sigmoid", case_mul_sigmoid, {SLOT(mul_sigmoid)}},
    {"swiglu", case_swiglu, {SLOT(swiglu)}},
    {"swiglu_matmul", case_swiglu_matmul, {SLOT(swiglu_matmul)}},
    {"add", case_add, {SLOT(add)}},
    {"segment_sum", case_segment_sum, {SLOT(segment_sum)}},
    {"row_dot", case_row_dot, {SLOT(row_dot)}},
    {"segment_softmax", case_segment_softmax, {SLOT(segment_softmax)}},
    {"add_rows", case_add_rows, {SLOT(add_rows)}},
    {"pair_features", case_pair_features, {SLOT(pair_features)}},
    {"axpy", case_axpy, {SLOT(axpy)}},
};
enum { N_OPS = sizeof OPS / sizeof OPS[0] };

/* Slots after matmul that compute nothing (queries, handles), each with why it has no case
 * of its own. */
static const struct {
    size_t slot;
    const char *why;
} SLOTS_WITHOUT_CASE[] = {
    {SLOT(memory), "device byte counts, no computation (NULL on the CPU; clef_model_memory "
                   "in tests/model/test_device.c, printed by tests/cuda/test_cuda_decide.c)"},
    {SLOT(host_alloc), "host staging memory, no computation: every weight load stages "
                       "through it (weight_loader.c), so every model test uses it"},
    {SLOT(host_free), "the release of host_alloc's memory (as host_alloc)"},
    {SLOT(write_async), "a copy, no computation (NULL on the CPU, where write is taken): every "
                        "GPU weight load queues its pieces through it (weight_loader.c), so "
                        "every CUDA model test checks what it copied"},
    {SLOT(capture_begin), "recording queued ops, no computation of its own (NULL on the CPU): "
                          "tests/cuda/test_cuda_graph.c checks a recorded forward equals the "
                          "direct one bit for bit"},
    {SLOT(capture_end), "as capture_begin"},
    {SLOT(graph_launch), "as capture_begin"},
    {SLOT(graph_free), "as capture_begin"},
};

/* Every op slot (after the memory functions, which every case uses) has a case. */
static void check_coverage(void) {
    for (size_t slot = SLOT(matmul); slot < sizeof(clef_backend_ops); slot += sizeof(void *)) {
        int covered = 0;
        for (size_t i = 0; i < sizeof SLOTS_WITHOUT_CASE / sizeof SLOTS_WITHOUT_CASE[0]; i++)
            covered |= SLOTS_WITHOUT_CASE[i].slot == slot;
        for (size_t i = 0; i < N_OPS && !covered; i++)
            for (int k = 0; k < MAX_SLOTS; k++)
                covered |= OPS[i].slots[k] == slot;
        CHECK_MSG(covered, "op-table slot at byte offset %zu (the %zu-th op after matmul) has "
                  "no harness case: add one to OPS", slot,
                  (slot - SLOT(matmul)) / sizeof(void *));
    }
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "cpu";
    const int draws = argc > 2 ? atoi(argv[2]) : 40;
    const uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 0x9e3779b97f4a7c15ull;
    int (*create)(clef_backend **) = NULL;
    for (size_t i = 0; i < sizeof BACKENDS / sizeof BACKENDS[0]; i++)
        if (!strcmp(BACKENDS[i].name, name))
            create = BACKENDS[i].create;
    if (!create || draws <= 0) {
        fprintf(stderr, "usage: test_backend_ops [cpu|cpu-guarded [draws [seed]]]\n");
        return 2;
    }
    harness h = {.rng = seed ? seed : 1};
    if (create(&h.be) != CLEF_OK) {
        fprintf(stderr, "backend %s: %s\n", name, clef_last_error());
        return 1;
    }
    check_coverage();
    printf("backend %s, %d draws per op, seed %#llx\n", name, draws, (unsigned long long)seed);
    printf("%-20s %6s %10s %10s  %s\n", "op", "cases", "worst err", "tolerance", "worst case");
    for (size_t i = 0; i < N_OPS; i++) {
        const double tol = tolerance_of(OPS[i].op);
        CHECK_MSG(tol >= 0, "%s has no TOLERANCES row", OPS[i].op);
        case_result worst = {.err = -1};
        int failed = 0;
        for (int d = 0; d < draws; d++) {
            case_result r = {0};
            OPS[i].run(&h, &r);
            dev_free_all(&h);
            int ok = r.err <= tol && r.outside_bad == 0 && !isnan(r.err);
            CHECK_MSG(ok, "%s [%s]: rel L2 error %.3g (tolerance %.1g), %lld elements outside "
                      "the output view changed", OPS[i].op, r.shape, r.err, tol,
                      (long long)r.outside_bad);
            failed += !ok;
            if (r.err > worst.err || isnan(r.err))
                worst = r;
        }
        printf("%-20s %6d %10.2e %10.1e  %s%s\n", OPS[i].op, draws, worst.err, tol, worst.shape,
               failed ? "  FAILED" : "");
    }
    clef_backend_free(h.be);
    return test_summary();
}
