/*
 * fp8.c — FP8 W8A8 (compressed-tensors): e4m3 encoding, weight decode, per-token activation
 * quantizer and reference GEMM; see fp8.h for the arithmetic.
 */
#include "quant/fp8.h"

#include "core/numeric.h"

#include <float.h>
#include <math.h>

#define FP8_E4M3_MAX 448.0f

uint8_t clef_f32_to_fp8e4m3(float f) {
    uint32_t u = clef_f32_to_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u || u >= 0x43f00000u) /* NaN, or >= 480: torch gives NaN */
        return (uint8_t)(sign | 0x7fu);
    if (u < 0x3c800000u) {
        /* below 2^-6, the smallest normal: subnormals are multiples of 2^-9; scaling by 2^9
         * is exact and rintf rounds to nearest even (8 lands on the smallest normal, 0x08) */
        float steps = rintf(clef_bits_to_f32(u) * 512.0f);
        return (uint8_t)(sign | (uint8_t)steps);
    }
    /* normal: keep 3 of the 23 mantissa bits, round to nearest even (a carry moves into the
     * exponent), then rebias the exponent from 127 to 7; (464, 480) rounds to 0x7f = NaN */
    uint32_t r = (u + 0x7ffffu + ((u >> 20) & 1u)) >> 20;
    return (uint8_t)(sign | (uint8_t)(r - (120u << 3)));
}

void clef_fp8_dequant_bf16(const uint8_t *q, const float *scale, int64_t K, int64_t first_row,
                           int64_t n_rows, uint16_t *out) {
    for (int64_t n = first_row; n < first_row + n_rows; n++) {
        const uint8_t *row = q + n * K;
        for (int64_t k = 0; k < K; k++)
            *out++ = clef_f32_to_bf16(clef_fp8e4m3_to_f32(row[k]) * scale[n]);
    }
}

void clef_fp8_dequant_f32(const uint8_t *q, const float *scale, int64_t K, int64_t first_row,
                          int64_t n_rows, float *out) {
    for (int64_t n = first_row; n < first_row + n_rows; n++) {
        const uint8_t *row = q + n * K;
        for (int64_t k = 0; k < K; k++)
            *out++ = clef_bf16_to_f32(clef_f32_to_bf16(clef_fp8e4m3_to_f32(row[k]) * scale[n]));
    }
}

/* round an fp32 result to the activation dtype */
static inline float act_round(float v, clef_quant_act act) {
    return act == CLEF_QUANT_ACT_BF16 ? clef_bf16_to_f32(clef_f32_to_bf16(v)) : v;
}

void clef_fp8_quantize_tokens(const float *x, int64_t ldx, int64_t M, int64_t K,
                              clef_quant_act act, uint8_t *q, float *scale) {
    /* compressed-tensors replaces a zero scale by the epsilon of the scale's dtype */
    const float eps = act == CLEF_QUANT_ACT_BF16 ? 0.0078125f : FLT_EPSILON;
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * ldx;
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++)
            amax = fmaxf(amax, fabsf(xm[k]));
        float s = act_round(amax / FP8_E4M3_MAX, act);
        if (s == 0.0f)
            s = eps;
        scale[m] = s;
        for (int64_t k = 0; k < K; k++) {
            float v = act_round(xm[k] / s, act);
            v = fminf(fmaxf(v, -FP8_E4M3_MAX), FP8_E4M3_MAX);
            q[m * K + k] = clef_f32_to_fp8e4m3(v);
        }
    }
}

void clef_fp8_quantize_weight(const uint16_t *w, int64_t N, int64_t K, uint8_t *q, float *scale) {
    for (int64_t n = 0; n < N; n++) {
        const uint16_t *row = w + n * K;
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++)
            amax = fmaxf(amax, fabsf(clef_bf16_to_f32(row[k])));
        float s = act_round(fmaxf(amax / FP8_E4M3_MAX, FLT_EPSILON), CLEF_QUANT_ACT_BF16);
        scale[n] = s;
        for (int64_t k = 0; k < K; k++) {
            float v = act_round(clef_bf16_to_f32(row[k]) / s, CLEF_QUANT_ACT_BF16);
            v = fminf(fmaxf(v, -FP8_E4M3_MAX), FP8_E4M3_MAX);
            q[n * K + k] = clef_f32_to_fp8e4m3(v);
        }
    }
}

void clef_fp8_gemm_ref(const uint8_t *qw, const float *sw, int64_t N, int64_t K,
                       const uint8_t *qx, const float *sx, int64_t M, float *y) {
    float table[256];
    for (int i = 0; i < 256; i++)
        table[i] = clef_fp8e4m3_to_f32((uint8_t)i);
    for (int64_t m = 0; m < M; m++) {
        const uint8_t *xm = qx + m * K;
        for (int64_t n = 0; n < N; n++) {
            const uint8_t *wn = qw + n * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += table[xm[k]] * table[wn[k]]; /* exact product */
            y[m * N + n] = acc * sx[m] * sw[n];
        }
    }
}

void clef_fp8_gemm_qdq_ref(const uint8_t *qw, const float *sw, int64_t N, int64_t K,
                           const uint8_t *qx, const float *sx, int64_t M, clef_quant_act act,
                           float *y) {
    for (int64_t m = 0; m < M; m++) {
        const uint8_t *xm = qx + m * K;
        for (int64_t n = 0; n < N; n++) {
            const uint8_t *wn = qw + n * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float xq = act_round(clef_fp8e4m3_to_f32(xm[k]) * sx[m], act);
                float w = act_round(clef_fp8e4m3_to_f32(wn[k]) * sw[n], act);
                acc = fmaf(xq, w, acc);
            }
            y[m * N + n] = acc;
        }
    }
}
