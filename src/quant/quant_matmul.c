/*
 * quant_matmul.c — CPU matmul kernels of the quantized formats over a range of output
 * features; see quant_matmul.h for the arithmetic each one keeps.
 *
 * NF4 and FP8 share one shape: CLEF_QMM_NR weight rows are decoded into a k-major fp32 panel
 * (panel[k * NR + j] = W[n + j, k]), then CLEF_QMM_MR activation rows at a time run
 * MR x NR independent fused multiply-add chains over k, which the compiler vectorizes across
 * the NR lanes. Every output is still one chain in ascending k, so the bits do not depend on
 * the blocking, T, or the thread split.
 */
#include "quant/quant_matmul.h"

#include "core/numeric.h"
#include "quant/fp8.h"
#include "quant/hadamard.h"
#include "quant/int8_convrot.h"

#include <math.h>
#include <string.h>

size_t clef_qmm_panel_floats(int64_t K) { return (size_t)K * CLEF_QMM_NR; }

static inline void store(float *y, float v, const float *bias, int64_t n, int accumulate) {
    if (bias)
        v += bias[n];
    *y = accumulate ? *y + v : v;
}

/* acc[i][j] = sum_k xrow[i][k] * panel[k][j] for i < mr, one fmaf chain per output */
static void panel_block(const float *const xrow[CLEF_QMM_MR], int mr, const float *panel,
                        int64_t K, float acc[CLEF_QMM_MR][CLEF_QMM_NR]) {
    memset(acc, 0, sizeof(float) * CLEF_QMM_MR * CLEF_QMM_NR);
    if (mr == CLEF_QMM_MR) {
        for (int64_t k = 0; k < K; k++) {
            const float *w = panel + k * CLEF_QMM_NR;
            for (int i = 0; i < CLEF_QMM_MR; i++) {
                float xv = xrow[i][k];
                for (int j = 0; j < CLEF_QMM_NR; j++)
                    acc[i][j] = fmaf(xv, w[j], acc[i][j]);
            }
        }
        return;
    }
    for (int64_t k = 0; k < K; k++) {
        const float *w = panel + k * CLEF_QMM_NR;
        for (int i = 0; i < mr; i++) {
            float xv = xrow[i][k];
            for (int j = 0; j < CLEF_QMM_NR; j++)
                acc[i][j] = fmaf(xv, w[j], acc[i][j]);
        }
    }
}

void clef_nf4_matmul_rows(const clef_nf4_desc *d, const uint8_t *packed, int64_t row0, int64_t K,
                          int64_t n0, int64_t n1, int64_t T, const float *x, int64_t ldx,
                          const float *bias, float *y, int64_t ldy, int accumulate, float *panel) {
    float acc[CLEF_QMM_MR][CLEF_QMM_NR];
    for (int64_t nb = n0; nb < n1; nb += CLEF_QMM_NR) {
        int nr = n1 - nb < CLEF_QMM_NR ? (int)(n1 - nb) : CLEF_QMM_NR;
        for (int j = 0; j < nr; j++)
            clef_nf4_dequant_f32_strided(d, packed, (row0 + nb + j) * K, K, panel + j,
                                         CLEF_QMM_NR, CLEF_QUANT_ACT_F32);
        for (int j = nr; j < CLEF_QMM_NR; j++) /* idle lanes: computed, never stored */
            for (int64_t k = 0; k < K; k++)
                panel[k * CLEF_QMM_NR + j] = 0.0f;
        for (int64_t t = 0; t < T; t += CLEF_QMM_MR) {
            int mr = T - t < CLEF_QMM_MR ? (int)(T - t) : CLEF_QMM_MR;
            const float *xrow[CLEF_QMM_MR];
            for (int i = 0; i < CLEF_QMM_MR; i++)
                xrow[i] = x + (t + (i < mr ? i : 0)) * ldx;
            panel_block(xrow, mr, panel, K, acc);
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < nr; j++)
                    store(y + (t + i) * ldy + nb + j, acc[i][j], bias, nb + j, accumulate);
        }
    }
}

/* The two FP8 kernels share one loop. W8A8 (qdq 0): fp8 x fp8 products accumulated in fp32,
 * both scales in the epilogue. QDQ (qdq 1): the weights and activations as an fp32 model sees
 * them after compressed-tensors' quantize-dequantize, fp32(q * s), and no epilogue scale.
 * Multiplying by the 1.0f stand-ins of the unused scales is exact, so each form gives the bits
 * it gave as a separate kernel. */
static void fp8_matmul_rows(const uint8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                            int64_t T, const uint8_t *qx, const float *sx, const float *bias,
                            float *y, int64_t ldy, int accumulate, float *panel, int qdq) {
    float table[256];
    for (int i = 0; i < 256; i++)
        table[i] = clef_fp8e4m3_to_f32((uint8_t)i);
    float acc[CLEF_QMM_MR][CLEF_QMM_NR];
    for (int64_t nb = n0; nb < n1; nb += CLEF_QMM_NR) {
        int nr = n1 - nb < CLEF_QMM_NR ? (int)(n1 - nb) : CLEF_QMM_NR;
        /* weights widened from fp8 are exact (W8A8), or fp32(q * s) (QDQ) */
        for (int64_t k = 0; k < K; k++)
            for (int j = 0; j < CLEF_QMM_NR; j++)
                panel[k * CLEF_QMM_NR + j] =
                    j < nr ? table[qw[(nb + j) * K + k]] * (qdq ? sw[nb + j] : 1.0f) : 0.0f;
        for (int64_t t = 0; t < T; t += CLEF_QMM_MR) {
            int mr = T - t < CLEF_QMM_MR ? (int)(T - t) : CLEF_QMM_MR;
            memset(acc, 0, sizeof acc);
            for (int64_t k = 0; k < K; k++) {
                const float *w = panel + k * CLEF_QMM_NR;
                for (int i = 0; i < mr; i++) {
                    float xv = table[qx[(t + i) * K + k]] * (qdq ? sx[t + i] : 1.0f);
                    for (int j = 0; j < CLEF_QMM_NR; j++)
                        acc[i][j] = fmaf(xv, w[j], acc[i][j]);
                }
            }
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < nr; j++)
                    store(y + (t + i) * ldy + nb + j,
                          qdq ? acc[i][j] : acc[i][j] * sx[t + i] * sw[nb + j], bias, nb + j,
                          accumulate);
        }
    }
}

void clef_fp8_matmul_rows(const uint8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                          int64_t T, const uint8_t *qx, const float *sx, const float *bias,
                          float *y, int64_t ldy, int accumulate, float *panel) {
    fp8_matmul_rows(qw, sw, K, n0, n1, T, qx, sx, bias, y, ldy, accumulate, panel, 0);
}

void clef_fp8_matmul_rows_qdq(const uint8_t *qw, const float *sw, int64_t K, int64_t n0,
                              int64_t n1, int64_t T, const uint8_t *qx, const float *sx,
                              const float *bias, float *y, int64_t ldy, int accumulate,
                              float *panel) {
    fp8_matmul_rows(qw, sw, K, n0, n1, T, qx, sx, bias, y, ldy, accumulate, panel, 1);
}

void clef_convrot_quantize_tokens_fast(const float *x, int64_t ldx, int64_t T, int64_t K,
                                       int8_t *qx, float *sx, float *rot) {
    for (int64_t t = 0; t < T; t++) {
        memcpy(rot, x + t * ldx, (size_t)K * sizeof *rot);
        clef_fht256_groups_f32(rot, K);
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++)
            amax = fmaxf(amax, fabsf(rot[k]));
        float s = fmaxf(amax / 127.0f, 1e-30f);
        sx[t] = s;
        for (int64_t k = 0; k < K; k++) {
            float v = fminf(fmaxf(rintf(rot[k] / s), -128.0f), 127.0f);
            qx[t * K + k] = (int8_t)v;
        }
    }
}

void clef_int8_matmul_rows(const int8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                           int64_t T, const int8_t *qx, const float *sx, const float *bias,
                           float *y, int64_t ldy, int accumulate) {
    for (int64_t t = 0; t < T; t++) {
        const int8_t *xt = qx + t * K;
        for (int64_t n = n0; n < n1; n++) {
            const int8_t *wn = qw + n * K;
            int32_t acc = 0; /* exact: |acc| <= K * 128 * 128 */
            for (int64_t k = 0; k < K; k++)
                acc += (int32_t)xt[k] * (int32_t)wn[k];
            store(y + t * ldy + n, (float)acc * (sx[t] * sw[n]), bias, n, accumulate);
        }
    }
}
