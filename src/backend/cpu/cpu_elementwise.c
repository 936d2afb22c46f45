/*
 * cpu_elementwise.c — the elementwise functions, softmax, the attention output gate, SwiGLU
 * and add. Each function follows torch's fp32 definition (softplus threshold 20, GELU exact
 * via erf, GELU tanh form).
 */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

float cpu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
float cpu_silu(float x) { return x / (1.0f + expf(-x)); }
float cpu_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); }

static float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    float inner = k * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

#define PARALLEL_IF(n) if ((n) > 65536)

void cpu_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        switch (op) {
        case CLEF_UNARY_SILU: v = cpu_silu(v); break;
        case CLEF_UNARY_GELU_ERF: v = gelu_erf(v); break;
        case CLEF_UNARY_GELU_TANH: v = gelu_tanh(v); break;
        case CLEF_UNARY_SIGMOID: v = cpu_sigmoid(v); break;
        case CLEF_UNARY_SOFTPLUS: v = cpu_softplus(v); break;
        case CLEF_UNARY_EXP: v = expf(v); break;
        default: break;
        }
        y[i] = v;
    }
}

void cpu_softmax_row(float *x, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
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
        for (int64_t c = 0; c < cols; c++)
            xr[c] *= cpu_sigmoid(gr[c]);
    }
}

void cpu_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
    for (int64_t i = 0; i < n; i++)
        y[i] = cpu_silu(gate[i]) * up[i];
}

void cpu_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) PARALLEL_IF(n)
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}
