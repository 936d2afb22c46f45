/*
 * int8_convrot.c — INT8 ConvRot (comfy-kitchen): weight decode with the inverse rotation,
 * per-token rotate-and-quantize, reference int8 GEMM; see int8_convrot.h for the arithmetic.
 *
 * comfy-kitchen rotates with torch.matmul against the dense 256 x 256 matrix, so its numbers
 * carry the rounding of torch's CPU matmul in ITS summation order; the reference functions
 * here rotate with clef_hadamard256_torch_f32 (that order), which is what makes the decoded
 * weights bit-identical to the library's (tests/quant checks every weight of the fixture
 * releases). The engine's hot path may rotate with the butterfly instead (clef_fht256_f32):
 * the same transform up to the last fp32 bit.
 */
#include "quant/int8_convrot.h"

#include "core/numeric.h"

#include <math.h>

/* one 256-group of a weight row rotated back: fp32(q * s), then the library's fp32 product
 * with H */
static void dequant_group(const int8_t *q, float scale, float *rot) {
    float t[CLEF_CONVROT_GROUP];
    for (int k = 0; k < CLEF_CONVROT_GROUP; k++)
        t[k] = (float)q[k] * scale;
    clef_hadamard256_torch_f32(t, rot);
}

void clef_convrot_dequant_bf16(const int8_t *q, const float *scale, int64_t K, int64_t first_row,
                               int64_t n_rows, uint16_t *out) {
    float rot[CLEF_CONVROT_GROUP];
    for (int64_t n = first_row; n < first_row + n_rows; n++) {
        for (int64_t g = 0; g < K; g += CLEF_CONVROT_GROUP) {
            dequant_group(q + n * K + g, scale[n], rot);
            for (int i = 0; i < CLEF_CONVROT_GROUP; i++)
                *out++ = clef_f32_to_bf16(rot[i]);
        }
    }
}

void clef_convrot_dequant_f32(const int8_t *q, const float *scale, int64_t K, int64_t first_row,
                              int64_t n_rows, float *out) {
    float rot[CLEF_CONVROT_GROUP];
    for (int64_t n = first_row; n < first_row + n_rows; n++) {
        for (int64_t g = 0; g < K; g += CLEF_CONVROT_GROUP) {
            dequant_group(q + n * K + g, scale[n], rot);
            for (int i = 0; i < CLEF_CONVROT_GROUP; i++)
                *out++ = clef_bf16_to_f32(clef_f32_to_bf16(rot[i]));
        }
    }
}

static inline float act_round(float v, clef_quant_act act) {
    return act == CLEF_QUANT_ACT_BF16 ? clef_bf16_to_f32(clef_f32_to_bf16(v)) : v;
}

void clef_convrot_quantize_tokens(const float *x, int64_t ldx, int64_t M, int64_t K,
                                  clef_quant_act act, int8_t *q, float *scale, float *rot) {
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * ldx;
        for (int64_t g = 0; g < K; g += CLEF_CONVROT_GROUP)
            clef_hadamard256_torch_f32(xm + g, rot + g);
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            rot[k] = act_round(rot[k], act); /* a bf16 matmul rounds its fp32 sums to bf16 */
            amax = fmaxf(amax, fabsf(rot[k]));
        }
        float s = fmaxf(amax / 127.0f, 1e-30f);
        scale[m] = s;
        /* the divisor is the scale in the activations' dtype; 0 there becomes the smallest
         * normal (comfy-kitchen's _int8_scale_for_math) */
        float divisor = act_round(s, act);
        if (divisor == 0.0f)
            divisor = 1.17549435e-38f;
        for (int64_t k = 0; k < K; k++) {
            float v = rintf(act_round(rot[k] / divisor, act));
            v = fminf(fmaxf(v, -128.0f), 127.0f);
            q[m * K + k] = (int8_t)v;
        }
    }
}

void clef_convrot_quantize_weight(const uint16_t *w, int64_t N, int64_t K, int8_t *q,
                                  float *scale, float *rot) {
    float *row = rot + K; /* the widened row; rot[0, K) is the quantizer's own scratch */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = clef_bf16_to_f32(w[n * K + k]);
        clef_convrot_quantize_tokens(row, K, 1, K, CLEF_QUANT_ACT_BF16, q + n * K, scale + n, rot);
    }
}

void clef_int8_gemm_ref(const int8_t *qw, const float *sw, int64_t N, int64_t K,
                        const int8_t *qx, const float *sx, int64_t M, float *y) {
    for (int64_t m = 0; m < M; m++) {
        const int8_t *xm = qx + m * K;
        for (int64_t n = 0; n < N; n++) {
            const int8_t *wn = qw + n * K;
            int32_t acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (int32_t)xm[k] * (int32_t)wn[k];
            y[m * N + n] = (float)acc * (sx[m] * sw[n]);
        }
    }
}
