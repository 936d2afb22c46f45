/*
 * cpu_elementwise.c — the elementwise functions, softmax, the attention output gate, SwiGLU
 * and add. Each function follows torch's fp32 definition (softplus threshold 20, GELU exact
 * via erf, GELU tanh form).
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_vexp.h"

#include <math.h>

float cpu_sigmoid(float x) { return 1.0f / (1.0f + cpu_exp1(-x)); }
float cpu_silu(float x) { return x / (1.0f + cpu_exp1(-x)); }
float cpu_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* y = silu(x) (times mul when mul is not NULL), or sigmoid(x), or exp(x), over n floats:
 * 16 (AVX-512) or 8 (AVX2) at a time with the vector exp, or one at a time; the same
 * arithmetic as the scalar functions above in every path (cpu_vexp.h), so the same bits. */
typedef enum vec_fn { VEC_SILU, VEC_SIGMOID, VEC_EXP } vec_fn;

static float scalar_fn(vec_fn fn, float x) {
    return fn == VEC_EXP ? cpu_exp1(x) : fn == VEC_SILU ? cpu_silu(x) : cpu_sigmoid(x);
}

#if CPU_HAVE_X86
CPU_TARGET_AVX512 static int64_t vec_apply_avx512(vec_fn fn, int64_t n, const float *x,
                                                  const float *mul, float *y) {
    const __m512 one = _mm512_set1_ps(1.0f);
    int64_t i = 0;
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), r;
        if (fn == VEC_EXP) {
            r = cpu_exp16_avx512(v);
        } else {
            __m512 den = _mm512_add_ps(one, cpu_exp16_avx512(_mm512_sub_ps(_mm512_setzero_ps(), v)));
            r = _mm512_div_ps(fn == VEC_SILU ? v : one, den);
        }
        if (mul)
            r = _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, mul + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
    return n;
}

CPU_TARGET_AVX2 static int64_t vec_apply_avx2(vec_fn fn, int64_t n, const float *x,
                                              const float *mul, float *y) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), r;
        if (fn == VEC_EXP) {
            r = cpu_exp8_avx2(v);
        } else {
            __m256 den = _mm256_add_ps(one, cpu_exp8_avx2(_mm256_sub_ps(_mm256_setzero_ps(), v)));
            r = _mm256_div_ps(fn == VEC_SILU ? v : one, den);
        }
        if (mul)
            r = _mm256_mul_ps(r, _mm256_loadu_ps(mul + i));
        _mm256_storeu_ps(y + i, r);
    }
    return i; /* the tail goes through the scalar path */
}
#endif

static void vec_apply(vec_fn fn, int64_t n, const float *x, const float *mul, float *y) {
    int64_t i = 0;
#if CPU_HAVE_X86
    cpu_isa isa = cpu_isa_active();
    if (isa == CPU_ISA_AVX512)
        i = vec_apply_avx512(fn, n, x, mul, y);
    else if (isa == CPU_ISA_AVX2)
        i = vec_apply_avx2(fn, n, x, mul, y);
#endif
    for (; i < n; i++) {
        float r = scalar_fn(fn, x[i]);
        y[i] = mul ? r * mul[i] : r;
    }
}

void cpu_silu_n(int64_t n, const float *x, float *y) { vec_apply(VEC_SILU, n, x, NULL, y); }
void cpu_exp_n(int64_t n, const float *x, float *y) { vec_apply(VEC_EXP, n, x, NULL, y); }

static float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); }

static float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    float inner = k * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

#define PARALLEL_IF(n) if ((n) > 65536)

/* Elements per task of the vectorised ops (a multiple of 16). */
enum { VEC_BLOCK = 4096 };

void cpu_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y) {
    if (op == CLEF_UNARY_SILU || op == CLEF_UNARY_SIGMOID || op == CLEF_UNARY_EXP) {
        vec_fn fn = op == CLEF_UNARY_SILU ? VEC_SILU : op == CLEF_UNARY_SIGMOID ? VEC_SIGMOID : VEC_EXP;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
        for (int64_t b = 0; b < n; b += VEC_BLOCK)
            vec_apply(fn, n - b < VEC_BLOCK ? n - b : VEC_BLOCK, x + b, NULL, y + b);
        return;
    }
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        switch (op) {
        case CLEF_UNARY_GELU_ERF: v = gelu_erf(v); break;
        case CLEF_UNARY_GELU_TANH: v = gelu_tanh(v); break;
        case CLEF_UNARY_SOFTPLUS: v = cpu_softplus(v); break;
        default: break;
        }
        y[i] = v;
    }
}

/* exp(x - max) through the vector exp (the same bits at every instruction-set level), the sum
 * in double in index order, one scaling. */
void cpu_softmax_row(float *x, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    for (int64_t i = 0; i < n; i++)
        x[i] -= max;
    vec_apply(VEC_EXP, n, x, NULL, x);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void cpu_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(rows * cols)
    for (int64_t r = 0; r < rows; r++)
        cpu_softmax_row(x + r * ldx, cols);
}

void cpu_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                     const float *gate, int64_t ldgate) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * ldx;
        const float *gr = gate + r * ldgate;
        vec_apply(VEC_SIGMOID, cols, gr, xr, xr); /* xr[c] = sigmoid(gr[c]) * xr[c] */
    }
}

void cpu_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
    for (int64_t b = 0; b < n; b += VEC_BLOCK)
        vec_apply(VEC_SILU, n - b < VEC_BLOCK ? n - b : VEC_BLOCK, gate + b, up + b, y + b);
}

void cpu_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}
