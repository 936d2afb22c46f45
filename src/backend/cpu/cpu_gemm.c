/*
 * cpu_gemm.c — packed, register-tiled fp32 GEMM with on-the-fly BF16 -> fp32 conversion of B
 * (see cpu_gemm.h for the contract and the determinism promise).
 *
 * Loop nest (BLIS): for each NC block of columns, for each KC block of the inner dimension:
 * pack B into NR-wide panels [kc][NR]; for each MC block of rows: pack A into MR-tall panels
 * [kc][MR]; run the MR x NR kernel over every (panel of A, panel of B) pair. Panels are padded
 * with zeros so the kernel always computes a full tile; edge tiles are stored partially.
 */
#include "backend/cpu/cpu_gemm.h"

#include "core/numeric.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

enum { MR = CPU_GEMM_MR, NR = CPU_GEMM_NR, MC = CPU_GEMM_MC, KC = CPU_GEMM_KC, NC = CPU_GEMM_NC };

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

cpu_gemm_b cpu_gemm_b_cols(const cpu_gemm_b *B, int64_t n0) {
    cpu_gemm_b r = *B;
    int64_t offset = B->layout == CPU_GEMM_B_NK ? n0 * B->ld : n0;
    r.data = (const char *)B->data + (size_t)offset * clef_wtype_size(B->type);
    return r;
}

/* Bp[p][k][NR] for panels p of the columns [n0, n0 + nc), rows [k0, k0 + kc); zero padding. */
static void pack_b(const cpu_gemm_b *B, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *Bp) {
    for (int64_t p = 0; p * NR < nc; p++) {
        float *dst = Bp + p * kc * NR;
        int64_t nr = min64(NR, nc - p * NR);
        if (nr < NR)
            memset(dst, 0, sizeof(float) * (size_t)(kc * NR));
        for (int64_t j = 0; j < nr; j++) {
            int64_t n = n0 + p * NR + j;
            if (B->layout == CPU_GEMM_B_NK) {
                if (B->type == CLEF_WTYPE_BF16) {
                    const uint16_t *src = (const uint16_t *)B->data + n * B->ld + k0;
                    for (int64_t k = 0; k < kc; k++)
                        dst[k * NR + j] = clef_bf16_to_f32(src[k]);
                } else {
                    const float *src = (const float *)B->data + n * B->ld + k0;
                    for (int64_t k = 0; k < kc; k++)
                        dst[k * NR + j] = src[k];
                }
            } else if (B->type == CLEF_WTYPE_BF16) {
                const uint16_t *src = (const uint16_t *)B->data + k0 * B->ld + n;
                for (int64_t k = 0; k < kc; k++)
                    dst[k * NR + j] = clef_bf16_to_f32(src[k * B->ld]);
            } else {
                const float *src = (const float *)B->data + k0 * B->ld + n;
                for (int64_t k = 0; k < kc; k++)
                    dst[k * NR + j] = src[k * B->ld];
            }
        }
    }
}

/* Ap[p][k][MR] for row panels of rows [m0, m0 + mc), columns [k0, k0 + kc); zero padding. */
static void pack_a(const float *A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                   float *Ap) {
    for (int64_t p = 0; p * MR < mc; p++) {
        float *dst = Ap + p * kc * MR;
        int64_t mr = min64(MR, mc - p * MR);
        for (int64_t i = 0; i < MR; i++) {
            if (i >= mr) {
                for (int64_t k = 0; k < kc; k++)
                    dst[k * MR + i] = 0.0f;
                continue;
            }
            const float *src = A + (m0 + p * MR + i) * lda + k0;
            for (int64_t k = 0; k < kc; k++)
                dst[k * MR + i] = src[k];
        }
    }
}

/* C[mr, nr] (=|+=) Ap^T Bp over kc: the register tile. */
static void kernel_tile(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                        int64_t mr, int64_t nr, int overwrite) {
#if defined(__AVX512F__)
    __m512 acc[MR][2];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(Bp + k * NR);
        __m512 b1 = _mm512_load_ps(Bp + k * NR + 16);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_set1_ps(Ap[k * MR + i]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
        }
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1u);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1u);
    for (int64_t i = 0; i < mr; i++) {
        float *c = C + i * ldc;
        if (overwrite) {
            _mm512_mask_storeu_ps(c, m0, acc[i][0]);
            _mm512_mask_storeu_ps(c + 16, m1, acc[i][1]);
        } else {
            __m512 c0 = _mm512_maskz_loadu_ps(m0, c);
            __m512 c1 = _mm512_maskz_loadu_ps(m1, c + 16);
            _mm512_mask_storeu_ps(c, m0, _mm512_add_ps(c0, acc[i][0]));
            _mm512_mask_storeu_ps(c + 16, m1, _mm512_add_ps(c1, acc[i][1]));
        }
    }
#else
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *b = Bp + k * NR;
        for (int i = 0; i < MR; i++) {
            float a = Ap[k * MR + i];
            for (int j = 0; j < NR; j++)
                acc[i][j] = fmaf(a, b[j], acc[i][j]);
        }
    }
    for (int64_t i = 0; i < mr; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < nr; j++)
            c[j] = overwrite ? acc[i][j] : c[j] + acc[i][j];
    }
#endif
}

void cpu_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const cpu_gemm_b *B,
              const float *bias, float *C, int64_t ldc, int accumulate, float *pack) {
    float *Ap = pack;
    float *Bp = pack + (size_t)MC * KC;
    for (int64_t jc = 0; jc < N; jc += NC) {
        int64_t nc = min64(NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += KC) {
            int64_t kc = min64(KC, K - pc);
            int overwrite = pc == 0 && !accumulate;
            pack_b(B, pc, kc, jc, nc, Bp);
            for (int64_t ic = 0; ic < M; ic += MC) {
                int64_t mc = min64(MC, M - ic);
                pack_a(A, lda, ic, mc, pc, kc, Ap);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        kernel_tile(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * ldc + jc + jr,
                                    ldc, min64(MR, mc - ir), min64(NR, nc - jr), overwrite);
                    }
                }
            }
        }
        if (bias) {
            for (int64_t i = 0; i < M; i++) {
                float *c = C + i * ldc + jc;
                for (int64_t j = 0; j < nc; j++)
                    c[j] += bias[jc + j];
            }
        }
    }
}
