/*
 * test_cpu_ops.c — every op of the CPU backend against a straightforward double-precision
 * reference written here (the definitions of backend.h, loop by loop), plus the properties
 * the model relies on: a row's matmul result does not depend on the batch around it or the
 * thread count, and the chunked gated delta rule equals the recurrent one. Everything runs
 * once per instruction-set level the machine and build have (AVX-512, AVX2, portable C;
 * src/backend/cpu/cpu_isa.h), and the levels must give the same bits: the GEMM element by
 * element equals an fmaf chain in the order cpu_gemm.h promises, and every op's output at each
 * level is compared byte for byte with the portable level's.
 */
#include "backend/backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_isa.h"
#include "clef.h"
#include "core/numeric.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *rand_buf(size_t n, float amp) {
    float *p = malloc(n * sizeof(float) + 64);
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * amp;
    return p;
}

/* relative L2 error of got against a double reference */
static double rel_err(const float *got, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static clef_backend *make_backend(int threads) {
    clef_backend_params p = clef_backend_default_params();
    p.n_threads = threads;
    clef_backend *be = NULL;
    CHECK_EQ_INT(clef_backend_cpu_create(&p, &be), CLEF_OK);
    return be;
}

/* ---- matmul ---- */

static void test_matmul_case(clef_backend *be, int64_t M, int64_t N, int64_t K, clef_wtype wt,
                             int with_bias, int accumulate) {
    int64_t ldx = K + 3, ldy = N + 5, ldw = K + (wt == CLEF_WTYPE_BF16 ? 2 : 1);
    float *x = rand_buf((size_t)(M * ldx), 1.0f);
    float *wf = rand_buf((size_t)(N * ldw), 0.5f);
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)(N * ldw));
    for (int64_t i = 0; i < N * ldw; i++) {
        wb[i] = clef_f32_to_bf16(wf[i]);
        if (wt == CLEF_WTYPE_BF16)
            wf[i] = clef_bf16_to_f32(wb[i]);
    }
    float *bias = with_bias ? rand_buf((size_t)N, 1.0f) : NULL;
    float *y = rand_buf((size_t)(M * ldy), 1.0f);
    double *ref = malloc(sizeof(double) * (size_t)(M * N));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = accumulate ? y[m * ldy + n] : 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)x[m * ldx + k] * wf[n * ldw + k];
            ref[m * N + n] = acc + (bias ? bias[n] : 0.0);
        }
    clef_matrix w = {.type = wt, .rows = N, .cols = K, .ld = ldw,
                     .data = wt == CLEF_WTYPE_BF16 ? (const void *)wb : (const void *)wf};
    float sentinel = y[N]; /* first padding element of row 0 must stay untouched */
    clef_matmul(be, M, x, ldx, &w, bias, y, ldy, accumulate);
    float *got = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t m = 0; m < M; m++)
        memcpy(got + m * N, y + m * ldy, sizeof(float) * (size_t)N);
    double err = rel_err(got, ref, (size_t)(M * N));
    CHECK_MSG(err < 2e-6, "matmul M=%lld N=%lld K=%lld %s bias=%d acc=%d: rel err %.3g",
              (long long)M, (long long)N, (long long)K, clef_wtype_name(wt), with_bias,
              accumulate, err);
    CHECK(y[N] == sentinel);
    /* each row alone gives bit-identical results (batch independence) */
    if (!accumulate) {
        int same = 1;
        for (int64_t m = 0; m < M; m += (M > 9 ? M / 5 : 1)) {
            float *row = malloc(sizeof(float) * (size_t)ldy);
            clef_matmul(be, 1, x + m * ldx, ldx, &w, bias, row, ldy, 0);
            same &= memcmp(row, got + m * N, sizeof(float) * (size_t)N) == 0;
            free(row);
        }
        CHECK_MSG(same, "matmul row alone != row in batch (M=%lld N=%lld K=%lld)", (long long)M,
                  (long long)N, (long long)K);
    }
    free(x), free(wf), free(wb), free(bias), free(y), free(ref), free(got);
}

static void test_matmul(clef_backend *be) {
    const int64_t shapes[][3] = {{1, 1, 1},    {1, 33, 17},   {7, 100, 300}, {9, 1030, 513},
                                 {300, 64, 1}, {300, 5, 260}, {130, 70, 257}, {64, 2100, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int wt = 0; wt < 2; wt++)
            test_matmul_case(be, shapes[s][0], shapes[s][1], shapes[s][2], (clef_wtype)wt, s % 2,
                             s % 3 == 1);
}

static void test_matmul_threads(void) {
    clef_backend *b1 = make_backend(1), *b3 = make_backend(3);
    int64_t M = 77, N = 300, K = 600;
    float *x = rand_buf((size_t)(M * K), 1.0f), *w = rand_buf((size_t)(N * K), 1.0f);
    float *y1 = malloc(sizeof(float) * (size_t)(M * N)), *y3 = malloc(sizeof(float) * (size_t)(M * N));
    clef_matrix wm = {.type = CLEF_WTYPE_F32, .rows = N, .cols = K, .ld = K, .data = w};
    clef_matmul(b1, M, x, K, &wm, NULL, y1, N, 0);
    clef_matmul(b3, M, x, K, &wm, NULL, y3, N, 0);
    CHECK_MSG(memcmp(y1, y3, sizeof(float) * (size_t)(M * N)) == 0, "1 vs 3 threads differ");
    clef_matrix wsmall = {.type = CLEF_WTYPE_F32, .rows = 5, .cols = K, .ld = K, .data = w}; /* M-split path */
    clef_matmul(b1, M, x, K, &wsmall, NULL, y1, 5, 0);
    clef_matmul(b3, M, x, K, &wsmall, NULL, y3, 5, 0);
    CHECK_MSG(memcmp(y1, y3, sizeof(float) * (size_t)(M * 5)) == 0, "1 vs 3 threads differ (M split)");
    free(x), free(w), free(y1), free(y3);
    clef_backend_free(b1);
    clef_backend_free(b3);
}

/* ---- norms, elementwise ---- */

static void test_norms(clef_backend *be) {
    int64_t rows = 37, dim = 200, ld = 210;
    float *x = rand_buf((size_t)(rows * ld), 3.0f), *w = rand_buf((size_t)dim, 1.0f);
    float *z = rand_buf((size_t)(rows * ld), 4.0f), *b = rand_buf((size_t)dim, 1.0f);
    float *y = malloc(sizeof(float) * (size_t)(rows * ld));
    float *got = malloc(sizeof(float) * (size_t)(rows * dim));
    double *ref = malloc(sizeof(double) * (size_t)(rows * dim));
    const float eps = 1e-6f;
    for (int kind = 0; kind < 4; kind++) {
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * ld;
            double mean = 0, ss = 0, var = 0;
            for (int64_t i = 0; i < dim; i++)
                mean += xr[i], ss += (double)xr[i] * xr[i];
            mean /= dim;
            for (int64_t i = 0; i < dim; i++)
                var += (xr[i] - mean) * (xr[i] - mean);
            var /= dim;
            double inv_rms = 1.0 / sqrt(ss / dim + eps), inv_std = 1.0 / sqrt(var + 1e-5);
            for (int64_t i = 0; i < dim; i++) {
                double v;
                if (kind == 0)
                    v = xr[i] * inv_rms * (1.0 + w[i]);
                else if (kind == 1)
                    v = xr[i] * inv_rms * w[i];
                else if (kind == 2) {
                    double zz = z[r * ld + i];
                    v = xr[i] * inv_rms * w[i] * zz / (1.0 + exp(-zz));
                } else
                    v = (xr[i] - mean) * inv_std * w[i] + b[i];
                ref[r * dim + i] = v;
            }
        }
        if (kind <= 1)
            clef_rmsnorm(be, rows, dim, x, ld, w, eps, kind == 0, y, ld);
        else if (kind == 2)
            clef_rmsnorm_gated(be, rows, dim, x, ld, z, ld, w, eps, y, ld);
        else
            clef_layernorm(be, rows, dim, x, ld, w, b, 1e-5f, y, ld);
        for (int64_t r = 0; r < rows; r++)
            memcpy(got + r * dim, y + r * ld, sizeof(float) * (size_t)dim);
        double err = rel_err(got, ref, (size_t)(rows * dim));
        CHECK_MSG(err < 1e-6, "norm kind %d: rel err %.3g", kind, err);
    }
    /* in place */
    memcpy(y, x, sizeof(float) * (size_t)(rows * ld));
    clef_rmsnorm(be, rows, dim, y, ld, w, eps, 1, y, ld);
    float *y2 = malloc(sizeof(float) * (size_t)(rows * ld));
    clef_rmsnorm(be, rows, dim, x, ld, w, eps, 1, y2, ld);
    CHECK(memcmp(y, y2, sizeof(float) * (size_t)dim) == 0);
    free(x), free(w), free(z), free(b), free(y), free(y2), free(got), free(ref);
}

static double ref_unary(clef_unary_op op, double x) {
    switch (op) {
    case CLEF_UNARY_SILU: return x / (1 + exp(-x));
    case CLEF_UNARY_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case CLEF_UNARY_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case CLEF_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case CLEF_UNARY_SOFTPLUS: return x > 20 ? x : log1p(exp(x));
    case CLEF_UNARY_EXP: return exp(x);
    default: return 0;
    }
}

static void test_elementwise(clef_backend *be) {
    int64_t n = 1000;
    float *x = rand_buf((size_t)n, 30.0f), *y = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int op = 0; op < CLEF_UNARY_COUNT; op++) {
        float amp = op == CLEF_UNARY_EXP ? 0.1f : 1.0f;
        float *xs = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            xs[i] = x[i] * amp;
            ref[i] = ref_unary((clef_unary_op)op, xs[i]);
        }
        clef_unary(be, (clef_unary_op)op, n, xs, y);
        double max_rel = 0;
        for (int64_t i = 0; i < n; i++) {
            /* relative, plus the cancellation torch's own fp32 formulas have where the result
             * is far below |x| (gelu of negative x: x * (1 + erf) with erf near -1) */
            double d = fabs(y[i] - ref[i]) / (fabs(ref[i]) + 1e-1 * fabs(xs[i]) + 1e-30);
            if (d > max_rel)
                max_rel = d;
        }
        CHECK_MSG(max_rel < 1e-5, "unary op %d: max rel err %.3g", op, max_rel);
        free(xs);
    }
    /* softmax rows, swiglu, mul_sigmoid, add */
    int64_t rows = 10, cols = 100;
    clef_softmax(be, rows, cols, x, cols);
    int ok = 1;
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++)
            s += x[r * cols + c];
        ok &= fabs(s - 1) < 1e-6;
    }
    CHECK(ok);
    float *a = rand_buf(64, 5.0f), *b = rand_buf(64, 5.0f), *o = malloc(64 * sizeof(float));
    clef_swiglu(be, 64, a, b, o);
    double max_err = 0;
    for (int i = 0; i < 64; i++)
        max_err = fmax(max_err, fabs(o[i] - ref_unary(CLEF_UNARY_SILU, a[i]) * b[i]));
    clef_add(be, 64, a, b, o);
    for (int i = 0; i < 64; i++)
        max_err = fmax(max_err, fabs(o[i] - ((double)a[i] + b[i])));
    memcpy(o, a, 64 * sizeof(float));
    clef_mul_sigmoid(be, 4, 16, o, 16, b, 16);
    for (int i = 0; i < 64; i++)
        max_err = fmax(max_err, fabs(o[i] - a[i] * ref_unary(CLEF_UNARY_SIGMOID, b[i])));
    CHECK_MSG(max_err < 1e-5, "swiglu/add/mul_sigmoid max err %.3g", max_err);
    free(x), free(y), free(ref), free(a), free(b), free(o);
}

/* The elementwise exp (vectorised, cpu_vexp.h) over the whole float range against double
 * exp: the correctly rounded value (<= 0.5 ulp), subnormal results included; overflow, underflow,
 * infinities and NaN as IEEE says. */
static void test_exp_range(clef_backend *be) {
    const int64_t n = 1 << 21;
    float *x = malloc(sizeof(float) * (size_t)(n + 6)), *y = malloc(sizeof(float) * (size_t)(n + 6));
    for (int64_t i = 0; i < n; i++)
        x[i] = -110.0f + 205.0f * (float)i / (float)n; /* [-110, 95): zero, subnormal, normal, inf */
    const float special[6] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 88.72283f};
    memcpy(x + n, special, sizeof special);
    clef_unary(be, CLEF_UNARY_EXP, n + 6, x, y);
    double worst = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref = exp((double)x[i]);
        if (ref > FLT_MAX) {
            bad += !(y[i] >= FLT_MAX);
            continue;
        }
        float rf = (float)ref;
        double ulp = (double)nextafterf(rf, INFINITY) - (double)rf;
        double e = fabs((double)y[i] - ref) / ulp;
        worst = e > worst ? e : worst;
    }
    CHECK_MSG(bad == 0 && worst <= 0.5001, "exp: %lld overflow misses, worst error %.4f ulp (correctly rounded: <= 0.5)", (long long)bad, worst);
    CHECK(y[n] == INFINITY && y[n + 1] == 0.0f && isnan(y[n + 2]) && y[n + 3] == 1.0f && y[n + 4] == 1.0f);
    CHECK(isfinite(y[n + 5]));
    free(x), free(y);
}

/* ---- conv ---- */

static void test_conv(clef_backend *be) {
    int64_t T = 50, C = 40, K = 4, ld = 45;
    float *x = rand_buf((size_t)(T * ld), 1.0f), *w = rand_buf((size_t)(C * K), 1.0f);
    float *prev = rand_buf((size_t)((K - 1) * C), 1.0f);
    float *y = malloc(sizeof(float) * (size_t)(T * C));
    double *ref = malloc(sizeof(double) * (size_t)(T * C));
    for (int with_prev = 0; with_prev < 2; with_prev++) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) {
                double acc = 0;
                for (int64_t i = 0; i < K; i++) {
                    int64_t s = t - K + 1 + i;
                    double xv = s >= 0 ? x[s * ld + c] : with_prev ? prev[(K - 1 + s) * C + c] : 0;
                    acc += w[c * K + i] * xv;
                }
                ref[t * C + c] = acc / (1 + exp(-acc));
            }
        clef_conv1d_causal_silu(be, T, C, K, x, ld, w, with_prev ? prev : NULL, y, C, NULL);
        double err = rel_err(y, ref, (size_t)(T * C));
        CHECK_MSG(err < 1e-6, "conv (prev=%d): rel err %.3g", with_prev, err);
    }
    free(x), free(w), free(prev), free(y), free(ref);
}

/* ---- gated delta rule ---- */

/* double-precision recurrent reference for one config; o [T, Hv*dv], state [Hv, dk, dv] */
static void ref_gdn(const clef_gdn_args *a, const double *S0, double *o, double *S_out) {
    int64_t dk = a->dk, dv = a->dv, ratio = a->n_v_heads / a->n_k_heads;
    double *S = malloc(sizeof(double) * (size_t)(dk * dv)), *q = malloc(sizeof(double) * (size_t)dk),
           *k = malloc(sizeof(double) * (size_t)dk), *delta = malloc(sizeof(double) * (size_t)dv);
    for (int64_t h = 0; h < a->n_v_heads; h++) {
        int64_t kh = h / ratio;
        for (int64_t i = 0; i < dk * dv; i++)
            S[i] = S0 ? S0[h * dk * dv + i] : 0;
        for (int64_t t = 0; t < a->T; t++) {
            double qs = 0, ks = 0;
            for (int64_t i = 0; i < dk; i++) {
                q[i] = a->q[t * a->ldq + kh * dk + i];
                k[i] = a->k[t * a->ldk + kh * dk + i];
                qs += q[i] * q[i], ks += k[i] * k[i];
            }
            for (int64_t i = 0; i < dk; i++) {
                q[i] = q[i] / sqrt(qs + 1e-6) / sqrt((double)dk);
                k[i] = k[i] / sqrt(ks + 1e-6);
            }
            double decay = exp(a->g[t * a->n_v_heads + h]), beta = a->beta[t * a->n_v_heads + h];
            for (int64_t i = 0; i < dk * dv; i++)
                S[i] *= decay;
            for (int64_t j = 0; j < dv; j++) {
                double mem = 0;
                for (int64_t i = 0; i < dk; i++)
                    mem += S[i * dv + j] * k[i];
                delta[j] = beta * (a->v[t * a->ldv + h * dv + j] - mem);
            }
            for (int64_t i = 0; i < dk; i++)
                for (int64_t j = 0; j < dv; j++)
                    S[i * dv + j] += k[i] * delta[j];
            for (int64_t j = 0; j < dv; j++) {
                double acc = 0;
                for (int64_t i = 0; i < dk; i++)
                    acc += S[i * dv + j] * q[i];
                o[t * a->n_v_heads * dv + h * dv + j] = acc;
            }
        }
        memcpy(S_out + h * dk * dv, S, sizeof(double) * (size_t)(dk * dv));
    }
    free(S), free(q), free(k), free(delta);
}

/* g_scale: log decays g in (-2 g_scale, 0); 0.3 keeps decays in (e^-0.6, 1), 20 makes the
 * fast-decaying heads of real releases whose state goes subnormal within a few tokens. */
static void test_gdn_case(clef_backend *be, int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv,
                          int with_state, float g_scale) {
    int64_t ldqkv = 2 * Hk * dk + Hv * dv + 7; /* q, k, v inside one projection row */
    float *qkv = rand_buf((size_t)(T * ldqkv), 1.0f);
    float *g = malloc(sizeof(float) * (size_t)(T * Hv)), *beta = malloc(sizeof(float) * (size_t)(T * Hv));
    for (int64_t i = 0; i < T * Hv; i++) {
        g[i] = -g_scale * (frand() + 1.0f) - 0.001f;
        beta[i] = 0.5f * (frand() + 1.0f);
    }
    size_t ns = (size_t)(Hv * dk * dv);
    float *state0 = rand_buf(ns, 0.5f);
    double *S0 = malloc(sizeof(double) * ns);
    for (size_t i = 0; i < ns; i++)
        S0[i] = state0[i];
    clef_gdn_args a = {T, Hk, Hv, dk, dv, qkv, ldqkv, qkv + Hk * dk, ldqkv, qkv + 2 * Hk * dk, ldqkv,
                       g, beta, NULL, NULL, Hv * dv, 1, CLEF_GDN_RECURRENT, NULL};
    double *ref_o = malloc(sizeof(double) * (size_t)(T * Hv * dv)), *ref_S = malloc(sizeof(double) * ns);
    ref_gdn(&a, with_state ? S0 : NULL, ref_o, ref_S);
    float *o = malloc(sizeof(float) * (size_t)(T * Hv * dv)), *st = malloc(sizeof(float) * ns);
    void *scratch = malloc(clef_gdn_workspace_size(be, &a));
    for (int mode = 0; mode < 2; mode++) {
        a.mode = (clef_gdn_mode)mode;
        a.o = o;
        memcpy(st, state0, sizeof(float) * ns);
        if (!with_state)
            memset(st, 0, sizeof(float) * ns);
        a.state = st;
#if defined(__SSE2__)
        unsigned csr = _mm_getcsr();
        clef_gdn(be, &a, scratch);
        CHECK_MSG(_mm_getcsr() == csr, "gdn changed the caller's MXCSR: %#x -> %#x", csr, _mm_getcsr());
#else
        clef_gdn(be, &a, scratch);
#endif
        double eo = rel_err(o, ref_o, (size_t)(T * Hv * dv)), es = rel_err(st, ref_S, ns);
        CHECK_MSG(eo < 1e-5 && es < 1e-5,
                  "gdn %s T=%lld Hk=%lld Hv=%lld dk=%lld dv=%lld state=%d g_scale=%g: rel err o %.3g, S %.3g",
                  mode ? "recurrent" : "chunked", (long long)T, (long long)Hk, (long long)Hv,
                  (long long)dk, (long long)dv, with_state, g_scale, eo, es);
    }
    /* no state kept: same outputs */
    if (!with_state) {
        float *o2 = malloc(sizeof(float) * (size_t)(T * Hv * dv));
        a.state = NULL, a.o = o2, a.mode = CLEF_GDN_CHUNKED;
        clef_gdn(be, &a, scratch);
        double eo = rel_err(o2, ref_o, (size_t)(T * Hv * dv));
        CHECK_MSG(eo < 1e-5, "gdn chunked without state: rel err %.3g", eo);
        free(o2);
    }
    free(qkv), free(g), free(beta), free(state0), free(S0), free(ref_o), free(ref_S), free(o), free(st),
        free(scratch);
}

static void test_gdn(clef_backend *be) {
    test_gdn_case(be, 1, 1, 1, 8, 8, 0, 0.3f);
    test_gdn_case(be, 63, 2, 4, 16, 24, 0, 0.3f);
    test_gdn_case(be, 64, 1, 3, 32, 32, 1, 0.3f);
    test_gdn_case(be, 65, 2, 2, 16, 16, 1, 0.3f);
    test_gdn_case(be, 200, 2, 6, 128, 128, 0, 0.3f);
    /* subnormal territory (the op flushes them; the double reference does not) */
    test_gdn_case(be, 150, 1, 2, 64, 64, 1, 20.0f);
}

/* ---- attention ---- */

static void test_attention_case(clef_backend *be, int64_t nq, int64_t nkv, int64_t Hq, int64_t Hkv,
                                int64_t d, int causal) {
    /* q interleaved with a gate half per head, like Qwen3.5's q_proj output */
    int64_t qhs = 2 * d, ldq = Hq * qhs, ldk = Hkv * d + 3, ldo = Hq * d;
    float *q = rand_buf((size_t)(nq * ldq), 1.0f), *k = rand_buf((size_t)(nkv * ldk), 1.0f);
    float *v = rand_buf((size_t)(nkv * ldk), 1.0f), *o = malloc(sizeof(float) * (size_t)(nq * ldo));
    double *ref = malloc(sizeof(double) * (size_t)(nq * ldo)), *s = malloc(sizeof(double) * (size_t)nkv);
    float scale = 1.0f / sqrtf((float)d);
    for (int64_t h = 0; h < Hq; h++) {
        int64_t kvh = h / (Hq / Hkv);
        for (int64_t i = 0; i < nq; i++) {
            int64_t vis = causal ? i + (nkv - nq) + 1 : nkv;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < vis; j++) {
                double acc = 0;
                for (int64_t e = 0; e < d; e++)
                    acc += (double)q[i * ldq + h * qhs + e] * k[j * ldk + kvh * d + e];
                s[j] = acc * scale;
                mx = fmax(mx, s[j]);
            }
            for (int64_t j = 0; j < vis; j++)
                sum += (s[j] = exp(s[j] - mx));
            for (int64_t e = 0; e < d; e++) {
                double acc = 0;
                for (int64_t j = 0; j < vis; j++)
                    acc += s[j] / sum * v[j * ldk + kvh * d + e];
                ref[i * ldo + h * d + e] = acc;
            }
        }
    }
    clef_attention_args a = {nq, nkv, Hq, Hkv, d, q, ldq, qhs, k, ldk, d, v, ldk, d, o, ldo, d, scale, causal, NULL};
    void *scratch = malloc(clef_attention_workspace_size(be, &a));
    clef_attention(be, &a, scratch);
    double err = rel_err(o, ref, (size_t)(nq * ldo));
    CHECK_MSG(err < 1e-6, "attention nq=%lld nkv=%lld Hq=%lld Hkv=%lld d=%lld causal=%d: rel err %.3g",
              (long long)nq, (long long)nkv, (long long)Hq, (long long)Hkv, (long long)d, causal, err);
    free(q), free(k), free(v), free(o), free(ref), free(s), free(scratch);
}

static void test_attention(clef_backend *be) {
    test_attention_case(be, 1, 1, 2, 1, 16, 1);
    test_attention_case(be, 130, 130, 6, 1, 64, 1);
    test_attention_case(be, 65, 65, 4, 2, 256, 1);
    test_attention_case(be, 40, 100, 4, 4, 32, 1);  /* queries are the last 40 of 100 */
    test_attention_case(be, 33, 300, 4, 4, 64, 0);  /* cross-attention */
    /* several key blocks of the online softmax (256 keys each), ragged last block */
    test_attention_case(be, 600, 600, 2, 1, 32, 1);
    test_attention_case(be, 70, 777, 2, 2, 16, 1);  /* queries are the last 70 of 777 */
    test_attention_case(be, 5, 1000, 2, 1, 32, 0);
}

/* ---- rope ---- */

static void test_rope(clef_backend *be) {
    int64_t T = 300, H = 3, d = 32, rot = 16;
    const int64_t sections[3] = {3, 3, 2};
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(3 * T));
    for (int64_t t = 0; t < T; t++) /* distinct axes, to see the interleaving */
        pos[t] = (int32_t)t, pos[T + t] = (int32_t)(2 * t), pos[2 * T + t] = (int32_t)(3 * t + 1);
    float *c = malloc(sizeof(float) * (size_t)(T * rot)), *s = malloc(sizeof(float) * (size_t)(T * rot));
    float *x = rand_buf((size_t)(T * H * d), 1.0f), *x0 = malloc(sizeof(float) * (size_t)(T * H * d));
    memcpy(x0, x, sizeof(float) * (size_t)(T * H * d));
    clef_rope_table(be, T, pos, rot, 10000.0, sections, 1, c, s);
    clef_rope_apply(be, T, H, x, H * d, d, rot, c, s);
    double *ref = malloc(sizeof(double) * (size_t)(T * H * d));
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < d; i++) {
                const float *xv = x0 + t * H * d + h * d;
                if (i >= rot) {
                    ref[t * H * d + h * d + i] = xv[i];
                    continue;
                }
                int64_t j = i % (rot / 2);
                int axis = (j % 3 == 1 && j < 3 * sections[1]) ? 1 : (j % 3 == 2 && j < 3 * sections[2]) ? 2 : 0;
                double phi = pos[axis * T + t] * pow(10000.0, -2.0 * j / rot);
                double other = i < rot / 2 ? -xv[i + rot / 2] : xv[i - rot / 2];
                ref[t * H * d + h * d + i] = xv[i] * cos(phi) + other * sin(phi);
            }
    double err = rel_err(x, ref, (size_t)(T * H * d));
    CHECK_MSG(err < 1e-5, "rope: rel err %.3g", err); /* fp32 phase at positions ~900 */
    free(pos), free(c), free(s), free(x), free(x0), free(ref);
}

static void test_get_rows(clef_backend *be) {
    uint16_t e[12];
    for (int i = 0; i < 12; i++)
        e[i] = clef_f32_to_bf16((float)i * 0.5f);
    clef_matrix em = {.type = CLEF_WTYPE_BF16, .rows = 4, .cols = 3, .ld = 3, .data = e};
    int32_t ids[2] = {3, 1};
    float y[6];
    clef_get_rows(be, &em, 2, ids, y, 3);
    CHECK(y[0] == 4.5f && y[2] == 5.5f && y[3] == 1.5f && y[5] == 2.5f);
}

/* ---- the same bits at every instruction-set level ---- */

/* cpu_gemm.h's promise, checked from outside: each element is acc = fmaf chain over k inside a
 * KC block (from 0), C = acc for the first block (C += acc when accumulating), C += acc for the
 * others, then + bias. The tile shape, packing and ISA must not show in a single bit. */
static void test_matmul_fma_order(clef_backend *be, int64_t M, int64_t N, int64_t K, clef_wtype wt,
                                  int with_bias, int accumulate) {
    float *x = rand_buf((size_t)(M * K), 1.0f), *wf = rand_buf((size_t)(N * K), 0.5f);
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++) {
        wb[i] = clef_f32_to_bf16(wf[i]);
        if (wt == CLEF_WTYPE_BF16)
            wf[i] = clef_bf16_to_f32(wb[i]);
    }
    float *bias = with_bias ? rand_buf((size_t)N, 1.0f) : NULL;
    float *y = rand_buf((size_t)(M * N), 1.0f), *ref = malloc(sizeof(float) * (size_t)(M * N));
    memcpy(ref, y, sizeof(float) * (size_t)(M * N));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float c = ref[m * N + n];
            for (int64_t k0 = 0; k0 < K; k0 += CPU_GEMM_KC) {
                float acc = 0.0f;
                for (int64_t k = k0; k < K && k < k0 + CPU_GEMM_KC; k++)
                    acc = fmaf(x[m * K + k], wf[n * K + k], acc);
                c = (k0 == 0 && !accumulate) ? acc : c + acc;
            }
            ref[m * N + n] = bias ? c + bias[n] : c;
        }
    clef_matrix w = {.type = wt, .rows = N, .cols = K, .ld = K,
                     .data = wt == CLEF_WTYPE_BF16 ? (const void *)wb : (const void *)wf};
    /* the weight as stored, then pre-packed as the loader prepares it (the panels are built
     * at this level and must give the same bits at every level: tests run all of them) */
    void *panels = clef_backend_alloc(be, clef_backend_prepared_size(be, &w));
    clef_matrix prepared;
    CHECK_EQ_INT(clef_backend_prepare_matrix(be, &w, panels, &prepared), CLEF_OK);
    float *y0 = malloc(sizeof(float) * (size_t)(M * N));
    memcpy(y0, y, sizeof(float) * (size_t)(M * N));
    for (int form = 0; form < 2; form++) {
        memcpy(y, y0, sizeof(float) * (size_t)(M * N));
        clef_matmul(be, M, x, K, form ? &prepared : &w, bias, y, N, accumulate);
        int64_t diff = 0;
        for (int64_t i = 0; i < M * N; i++)
            diff += memcmp(&y[i], &ref[i], sizeof(float)) != 0;
        CHECK_MSG(diff == 0, "matmul %s (%s) M=%lld N=%lld K=%lld at %s: %lld elements differ from "
                  "the fmaf chain", clef_wtype_name(wt), form ? "pre-packed" : "stored",
                  (long long)M, (long long)N, (long long)K, cpu_isa_name(cpu_isa_active()),
                  (long long)diff);
    }
    clef_backend_release(be, panels);
    free(x), free(wf), free(wb), free(bias), free(y), free(y0), free(ref);
}

/* Outputs of the ops with vector paths (and of the ops built on the GEMM) at the active level,
 * appended to out (n floats each; the caller compares levels byte for byte). */
static size_t isa_outputs(clef_backend *be, float *out) {
    size_t at = 0;
    const uint64_t saved_rng = rng_state;
    rng_state = 0x1234567ull; /* the same inputs at every level */
    const int64_t n = 1 << 16;
    float *x = malloc(sizeof(float) * (size_t)n), *u = rand_buf((size_t)n, 3.0f);
    for (int64_t i = 0; i < n; i++)
        x[i] = -110.0f + 205.0f * (float)i / (float)n;
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -0.0f;
    const clef_unary_op ops[3] = {CLEF_UNARY_EXP, CLEF_UNARY_SILU, CLEF_UNARY_SIGMOID};
    for (int o = 0; o < 3; o++, at += (size_t)(n - 3)) /* odd length: vector tails too */
        clef_unary(be, ops[o], n - 3, x + 3, out + at);
    clef_swiglu(be, n - 5, u, x, out + at), at += (size_t)(n - 5);
    memcpy(out + at, u, sizeof(float) * 999);
    clef_mul_sigmoid(be, 27, 37, out + at, 37, x + 7, 37), at += 999;
    int64_t T = 70, C = 96, K = 4;
    float *cx = rand_buf((size_t)(T * C), 2.0f), *cw = rand_buf((size_t)(C * K), 1.0f);
    clef_conv1d_causal_silu(be, T, C, K, cx, C, cw, NULL, out + at, C, NULL), at += (size_t)(T * C);
    float *z = rand_buf((size_t)(T * C), 3.0f);
    clef_rmsnorm_gated(be, T, C, cx, C, z, C, cw, 1e-6f, out + at, C), at += (size_t)(T * C);
    /* attention and the chunked delta rule: GEMMs, softmax, exp */
    int64_t nq = 90, Hq = 4, Hkv = 2, d = 32;
    float *q = rand_buf((size_t)(nq * Hq * d), 1.0f), *k = rand_buf((size_t)(nq * Hkv * d), 1.0f);
    float *v = rand_buf((size_t)(nq * Hkv * d), 1.0f);
    clef_attention_args a = {nq, nq, Hq, Hkv, d, q, Hq * d, d, k, Hkv * d, d, v, Hkv * d, d,
                             out + at, Hq * d, d, 0.17f, 1, NULL};
    void *ws = malloc(clef_attention_workspace_size(be, &a));
    clef_attention(be, &a, ws), at += (size_t)(nq * Hq * d);
    free(ws);
    int64_t Hv = 4, dv = 32, ldqkv = 2 * Hkv * d + Hv * dv;
    float *qkv = rand_buf((size_t)(nq * ldqkv), 1.0f), *g = malloc(sizeof(float) * (size_t)(nq * Hv));
    float *beta = malloc(sizeof(float) * (size_t)(nq * Hv));
    for (int64_t i = 0; i < nq * Hv; i++)
        g[i] = -0.3f * (frand() + 1.0f), beta[i] = 0.5f * (frand() + 1.0f);
    clef_gdn_args ga = {nq, Hkv, Hv, d, dv, qkv, ldqkv, qkv + Hkv * d, ldqkv, qkv + 2 * Hkv * d, ldqkv,
                        g, beta, NULL, out + at, Hv * dv, 1, CLEF_GDN_CHUNKED, NULL};
    ws = malloc(clef_gdn_workspace_size(be, &ga));
    clef_gdn(be, &ga, ws), at += (size_t)(nq * Hv * dv);
    free(ws);
    /* matmul, both weight types, several tile edges */
    int64_t M = 13, N = 70, Kd = 300;
    float *mx = rand_buf((size_t)(M * Kd), 1.0f), *mw = rand_buf((size_t)(N * Kd), 1.0f);
    uint16_t *mb = malloc(sizeof(uint16_t) * (size_t)(N * Kd));
    for (int64_t i = 0; i < N * Kd; i++)
        mb[i] = clef_f32_to_bf16(mw[i]);
    clef_matrix wf = {.type = CLEF_WTYPE_F32, .rows = N, .cols = Kd, .ld = Kd, .data = mw};
    clef_matrix wbm = {.type = CLEF_WTYPE_BF16, .rows = N, .cols = Kd, .ld = Kd, .data = mb};
    clef_matmul(be, M, mx, Kd, &wf, NULL, out + at, N, 0), at += (size_t)(M * N);
    clef_matmul(be, M, mx, Kd, &wbm, cw, out + at, N, 0), at += (size_t)(M * N);
    free(x), free(u), free(cx), free(cw), free(z), free(q), free(k), free(v), free(qkv), free(g),
        free(beta), free(mx), free(mw), free(mb);
    rng_state = saved_rng;
    return at;
}

enum { ISA_OUT_FLOATS = 1 << 19 };

static void test_isa_levels_agree(clef_backend *be, const float *portable, size_t n_portable) {
    float *got = malloc(sizeof(float) * ISA_OUT_FLOATS);
    size_t n = isa_outputs(be, got);
    CHECK(n == n_portable && n <= ISA_OUT_FLOATS);
    size_t diff = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &portable[i], sizeof(float)) != 0) {
            diff++;
            first = first < i ? first : i;
        }
    CHECK_MSG(diff == 0, "%s vs portable C: %zu of %zu output floats differ (first at %zu)",
              cpu_isa_name(cpu_isa_active()), diff, n, first);
    free(got);
}

int main(void) {
    clef_backend *be = make_backend(2);
    /* the portable level's outputs, the reference every vector level must equal bit for bit */
    const cpu_isa best = cpu_isa_best();
    printf("instruction-set levels tested: portable C up to %s\n", cpu_isa_name(best));
    /* CLEF_CPU_ISA (scripts/test.sh runs the suite capped at avx2): the cap must hold */
    const char *cap = getenv("CLEF_CPU_ISA");
    if (cap && strcmp(cap, "avx2") == 0)
        CHECK_MSG(best <= CPU_ISA_AVX2, "CLEF_CPU_ISA=avx2 but %s is used", cpu_isa_name(best));
    if (cap && (strcmp(cap, "c") == 0 || strcmp(cap, "scalar") == 0))
        CHECK_MSG(best == CPU_ISA_SCALAR, "CLEF_CPU_ISA=%s but %s is used", cap, cpu_isa_name(best));
    float *portable = malloc(sizeof(float) * ISA_OUT_FLOATS);
    cpu_isa_set_limit(CPU_ISA_SCALAR);
    size_t n_portable = isa_outputs(be, portable);
    for (int level = (int)best; level >= (int)CPU_ISA_SCALAR; level--) {
        cpu_isa_set_limit((cpu_isa)level);
        CHECK(cpu_isa_active() == (cpu_isa)level);
        test_isa_levels_agree(be, portable, n_portable);
        const int64_t shapes[][3] = {{1, 1, 1}, {7, 45, 300}, {13, 100, 513}, {260, 33, 40}, {5, 1100, 70}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int wt = 0; wt < 2; wt++)
                test_matmul_fma_order(be, shapes[s][0], shapes[s][1], shapes[s][2], (clef_wtype)wt,
                                      (int)s % 2, (int)s == 2);
        test_matmul(be);
        test_matmul_threads();
        test_norms(be);
        test_elementwise(be);
        test_exp_range(be);
        test_conv(be);
        test_gdn(be);
        test_attention(be);
        test_rope(be);
        test_get_rows(be);
    }
    free(portable);
    clef_backend_free(be);
    return test_summary();
}
