/*
 * cpu_gemm.c — packed, register-tiled fp32 GEMM with on-the-fly BF16 -> fp32 conversion of B
 * (see cpu_gemm.h for the contract and the determinism promise), and the pre-packing of
 * weights at load.
 *
 * Loop nest (BLIS): for each NC block of columns, for each KC block of the inner dimension:
 * pack B into PANEL-wide panels [kc][PANEL] (pre-packed F32 weights: none, the kernel reads
 * the weight's own panels; pre-packed BF16: a contiguous widening, no transpose); for each
 * MC block of rows: pack A into MR-tall panels [kc][MR]; run the MR x NR kernel over every
 * (panel of A, NR columns of a B panel) pair, B's rows PANEL floats apart. Panels are padded
 * with zeros so the kernel always computes a full tile; edge tiles are stored partially.
 *
 * Register tiles per instruction set (cpu_isa.h, chosen per call): AVX-512 8 x 32 (16 zmm
 * accumulators), AVX2 6 x 16 (12 ymm accumulators + 2 of B + 1 broadcast of A = 15 of the 16
 * registers), portable C 8 x 32 with fmaf. The tile shape only decides which elements are
 * computed together: each element is still acc = 0; acc = fma(a_k, b_k, acc) for k ascending
 * in its KC block; C = acc (first block) or C += acc; so every path gives the same bits.
 */
#include "backend/cpu/cpu_gemm.h"

#include "backend/cpu/cpu_isa.h"
#include "core/error.h"
#include "core/numeric.h"

#include <math.h>
#include <string.h>

#if CPU_HAVE_X86
#include <immintrin.h>
#endif

enum { MC_MAX = CPU_GEMM_MC, KC = CPU_GEMM_KC, NC = CPU_GEMM_NC };

/* Tile and row-block shape of one instruction set. mc is a multiple of mr and <= MC_MAX (the
 * size of the A packing area); NC is a multiple of every nr. */
typedef struct gemm_shape {
    int64_t mr, nr, mc;
} gemm_shape;

static const gemm_shape SHAPES[3] = {
    [CPU_ISA_SCALAR] = {8, 32, 256},
    [CPU_ISA_AVX2] = {6, 16, 252},
    [CPU_ISA_AVX512] = {8, 32, 256},
};

enum { PANEL = CPU_GEMM_PANEL };
_Static_assert(CPU_GEMM_MC >= 256 && NC % PANEL == 0 && PANEL % 32 == 0 && PANEL % 16 == 0 &&
                   CPU_GEMM_NR == PANEL,
               "shapes fit the packing areas; every tile's NR divides a panel; threads split "
               "N by whole panels");

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

cpu_gemm_b cpu_gemm_b_cols(const cpu_gemm_b *B, int64_t n0) {
    cpu_gemm_b r = *B;
    int64_t offset = B->layout == CPU_GEMM_B_NK ? n0 * B->ld : n0;
    if (B->layout == CPU_GEMM_B_PANELS) {
        CLEF_ASSERT(n0 % PANEL == 0);
        offset = n0 / PANEL * B->ld * PANEL;
    }
    r.data = (const char *)B->data + (size_t)offset * clef_wtype_size(B->type);
    return r;
}

size_t cpu_gemm_panels_bytes(int64_t N, int64_t K, size_t elem_bytes) {
    return (size_t)((N + PANEL - 1) / PANEL) * PANEL * (size_t)K * elem_bytes;
}

void cpu_gemm_pack_panels(const void *W, int64_t ldw, clef_wtype src_type, int64_t N, int64_t K,
                          clef_wtype out_type, int64_t p0, int64_t p1, void *dst) {
    CLEF_ASSERT((out_type == CLEF_WTYPE_BF16) == (src_type == CLEF_WTYPE_BF16) &&
                (out_type == CLEF_WTYPE_BF16 || out_type == CLEF_WTYPE_F32));
    for (int64_t p = p0; p < p1; p++) {
        int64_t nr = min64(PANEL, N - p * PANEL);
        /* k outer, the panel's columns inner: the writes are sequential, the reads PANEL
         * streams along the rows of W */
        for (int64_t k = 0; k < K; k++) {
            size_t at = ((size_t)p * (size_t)K + (size_t)k) * PANEL;
            if (out_type == CLEF_WTYPE_BF16) {
                uint16_t *d = (uint16_t *)dst + at;
                const uint16_t *src = (const uint16_t *)W + p * PANEL * ldw + k;
                for (int64_t j = 0; j < PANEL; j++)
                    d[j] = j < nr ? src[j * ldw] : 0;
                continue;
            }
            float *d = (float *)dst + at;
            for (int64_t j = 0; j < PANEL; j++) {
                int64_t i = (p * PANEL + j) * ldw + k;
                d[j] = j >= nr                        ? 0.0f
                       : src_type == CLEF_WTYPE_F16   ? clef_f16_to_f32(((const uint16_t *)W)[i])
                                                      : ((const float *)W)[i];
            }
        }
    }
}

void cpu_gemm_panels_row(const void *panels, clef_wtype type, int64_t K, int64_t n, float *out) {
    size_t at = (size_t)(n / PANEL) * (size_t)K * PANEL + (size_t)(n % PANEL);
    if (type == CLEF_WTYPE_BF16) {
        const uint16_t *src = (const uint16_t *)panels + at;
        for (int64_t k = 0; k < K; k++)
            out[k] = clef_bf16_to_f32(src[k * PANEL]);
    } else {
        const float *src = (const float *)panels + at;
        for (int64_t k = 0; k < K; k++)
            out[k] = src[k * PANEL];
    }
}

#if CPU_HAVE_X86
/* r[k] <- column k of the 8 x 8 block whose rows are r[0..7] (the usual unpack / shuffle /
 * permute transpose: pure data movement, so packing stays exact). */
CPU_TARGET_AVX2 static inline void transpose_8x8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* 8 BF16 -> 8 fp32, exactly (the BF16 bits become the high half of the fp32 bits). */
CPU_TARGET_AVX2 static inline __m256 load_bf16x8(const uint16_t *src) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)src));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* dst[k * ld_dst + i] = row_i[k] for 8 rows (row i at src + i * ld_src, fp32 or BF16) and
 * k in [0, kc8), kc8 a multiple of 8: 8 x 8 blocks through registers. */
CPU_TARGET_AVX2 static void transpose_rows8(const void *src, int64_t ld_src, int bf16, int64_t kc8, float *dst,
                            int64_t ld_dst) {
    for (int64_t k = 0; k < kc8; k += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++)
            r[i] = bf16 ? load_bf16x8((const uint16_t *)src + i * ld_src + k)
                        : _mm256_loadu_ps((const float *)src + i * ld_src + k);
        transpose_8x8(r);
        for (int i = 0; i < 8; i++)
            _mm256_storeu_ps(dst + (k + i) * ld_dst, r[i]);
    }
}
#endif

/* Bp[p][k][NR] for panels p of the columns [n0, n0 + nc), rows [k0, k0 + kc); zero padding.
 * NK (a weight, rows of k contiguous): 8 x 8 register transposes (AVX2 and up) for whole
 * groups of 8 columns and 8 k, scalar for the rest. KN (rows of n contiguous): row segments
 * copied. Pure data movement (BF16 -> fp32 is exact), so every path packs the same floats. */
static void pack_b(const cpu_gemm_b *B, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int64_t NR,
                   int vector, float *Bp) {
    const int bf16 = B->type == CLEF_WTYPE_BF16;
    for (int64_t p = 0; p * NR < nc; p++) {
        float *dst = Bp + p * kc * NR;
        int64_t nr = min64(NR, nc - p * NR);
        if (nr < NR)
            memset(dst, 0, sizeof(float) * (size_t)(kc * NR));
        if (B->layout == CPU_GEMM_B_KN) {
            for (int64_t k = 0; k < kc; k++) {
                int64_t at = (k0 + k) * B->ld + n0 + p * NR;
                if (bf16) {
                    const uint16_t *src = (const uint16_t *)B->data + at;
                    for (int64_t j = 0; j < nr; j++)
                        dst[k * NR + j] = clef_bf16_to_f32(src[j]);
                } else {
                    memcpy(dst + k * NR, (const float *)B->data + at, sizeof(float) * (size_t)nr);
                }
            }
            continue;
        }
        int64_t j0 = 0, kv = 0;
#if CPU_HAVE_X86
        if (vector) {
            kv = kc / 8 * 8;
            for (; j0 + 8 <= nr; j0 += 8) {
                int64_t at = (n0 + p * NR + j0) * B->ld + k0;
                const void *src = bf16 ? (const void *)((const uint16_t *)B->data + at)
                                       : (const void *)((const float *)B->data + at);
                transpose_rows8(src, B->ld, bf16, kv, dst + j0, NR);
            }
        }
#endif
        for (int64_t j = 0; j < nr; j++) {
            int64_t n = n0 + p * NR + j;
            for (int64_t k = j < j0 ? kv : 0; k < kc; k++)
                dst[k * NR + j] = bf16 ? clef_bf16_to_f32(((const uint16_t *)B->data)[n * B->ld + k0 + k])
                                       : ((const float *)B->data)[n * B->ld + k0 + k];
        }
    }
}

/* Ap[p][k][MR] for row panels of rows [m0, m0 + mc), columns [k0, k0 + kc); zero padding.
 * Whole panels go through 8 x 8 register transposes when MR is a multiple of 8. */
static void pack_a(const float *A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                   int64_t MR, int vector, float *Ap) {
    for (int64_t p = 0; p * MR < mc; p++) {
        float *dst = Ap + p * kc * MR;
        int64_t mr = min64(MR, mc - p * MR);
        int64_t kv = 0;
#if CPU_HAVE_X86
        if (vector && mr == MR && MR % 8 == 0) {
            kv = kc / 8 * 8;
            for (int64_t i0 = 0; i0 < MR; i0 += 8)
                transpose_rows8(A + (m0 + p * MR + i0) * lda + k0, lda, 0, kv, dst + i0, MR);
        }
#endif
        for (int64_t i = 0; i < MR; i++) {
            if (i >= mr) {
                for (int64_t k = 0; k < kc; k++)
                    dst[k * MR + i] = 0.0f;
                continue;
            }
            const float *src = A + (m0 + p * MR + i) * lda + k0;
            for (int64_t k = kv; k < kc; k++)
                dst[k * MR + i] = src[k];
        }
    }
}

/* The tile's accumulators into C: C = acc or C += acc for the mr x nr corner. */
static void store_tile(const float *acc, int64_t ld_acc, float *C, int64_t ldc, int64_t mr,
                       int64_t nr, int overwrite) {
    for (int64_t i = 0; i < mr; i++) {
        float *c = C + i * ldc;
        const float *a = acc + i * ld_acc;
        for (int64_t j = 0; j < nr; j++)
            c[j] = overwrite ? a[j] : c[j] + a[j];
    }
}

/* C[mr, nr] (=|+=) Ap^T Bp over kc (row k of B at Bp + k * ldb), portable: the 8 x 32 tile
 * with fmaf. */
static void kernel_scalar(int64_t kc, const float *Ap, const float *Bp, int64_t ldb, float *C,
                          int64_t ldc, int64_t mr, int64_t nr, int overwrite) {
    enum { TM = 8, TN = 32 };
    float acc[TM][TN];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *b = Bp + k * ldb;
        for (int i = 0; i < TM; i++) {
            float a = Ap[k * TM + i];
            for (int j = 0; j < TN; j++)
                acc[i][j] = fmaf(a, b[j], acc[i][j]);
        }
    }
    store_tile(&acc[0][0], TN, C, ldc, mr, nr, overwrite);
}

#if CPU_HAVE_X86
/* The 6 x 16 AVX2 tile. The twelve accumulators are named variables, not an array: GCC keeps
 * an array of vectors in memory and stores it back on every k step (measured: half the
 * kernel's time went to those stores). */
CPU_TARGET_AVX2 static void kernel_avx2(int64_t kc, const float *Ap, const float *Bp, int64_t ldb,
                                        float *C, int64_t ldc, int64_t mr, int64_t nr,
                                        int overwrite) {
    enum { TM = 6, TN = 16 };
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++) {
        const float *a = Ap + k * TM;
        __m256 b0 = _mm256_load_ps(Bp + k * ldb), b1 = _mm256_load_ps(Bp + k * ldb + 8), x;
#define ROW(i)                                                                                \
    x = _mm256_broadcast_ss(a + i);                                                           \
    c##i##0 = _mm256_fmadd_ps(x, b0, c##i##0);                                                \
    c##i##1 = _mm256_fmadd_ps(x, b1, c##i##1);
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
    float tile[TM][TN];
    float *dst = tile[0];
    int64_t ld = TN;
    if (mr == TM && nr == TN && overwrite) { /* a full tile stores straight into C */
        dst = C;
        ld = ldc;
    }
    _mm256_storeu_ps(dst + 0 * ld, c00), _mm256_storeu_ps(dst + 0 * ld + 8, c01);
    _mm256_storeu_ps(dst + 1 * ld, c10), _mm256_storeu_ps(dst + 1 * ld + 8, c11);
    _mm256_storeu_ps(dst + 2 * ld, c20), _mm256_storeu_ps(dst + 2 * ld + 8, c21);
    _mm256_storeu_ps(dst + 3 * ld, c30), _mm256_storeu_ps(dst + 3 * ld + 8, c31);
    _mm256_storeu_ps(dst + 4 * ld, c40), _mm256_storeu_ps(dst + 4 * ld + 8, c41);
    _mm256_storeu_ps(dst + 5 * ld, c50), _mm256_storeu_ps(dst + 5 * ld + 8, c51);
    if (dst == C)
        return;
    if (mr == TM && nr == TN) { /* C += tile, 8 at a time (the same additions as store_tile) */
        for (int i = 0; i < TM; i++) {
            float *c = C + i * ldc;
            _mm256_storeu_ps(c, _mm256_add_ps(_mm256_loadu_ps(c), _mm256_loadu_ps(tile[i])));
            _mm256_storeu_ps(c + 8, _mm256_add_ps(_mm256_loadu_ps(c + 8), _mm256_loadu_ps(tile[i] + 8)));
        }
        return;
    }
    store_tile(&tile[0][0], TN, C, ldc, mr, nr, overwrite);
}

/* The 8 x 32 AVX-512 tile. */
CPU_TARGET_AVX512 static void kernel_avx512(int64_t kc, const float *Ap, const float *Bp,
                                            int64_t ldb, float *C, int64_t ldc, int64_t mr,
                                            int64_t nr, int overwrite) {
    enum { TM = 8, TN = 32 };
    /* The C tile is read (accumulate) or written after the k loop: fetch its lines now so
     * the misses overlap the arithmetic (C of a large matmul lives beyond L2). */
    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(C + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + i * ldc + TN - 1), _MM_HINT_T0);
    }
    __m512 acc[TM][2];
#pragma GCC unroll 8
    for (int i = 0; i < TM; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(Bp + k * ldb);
        __m512 b1 = _mm512_load_ps(Bp + k * ldb + 16);
#pragma GCC unroll 8
        for (int i = 0; i < TM; i++) {
            __m512 a = _mm512_set1_ps(Ap[k * TM + i]);
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
}
#endif

typedef void (*kernel_fn)(int64_t kc, const float *Ap, const float *Bp, int64_t ldb, float *C,
                          int64_t ldc, int64_t mr, int64_t nr, int overwrite);

/* Pre-packed BF16 panels [p0, p1) rows [k0, k0 + kc) widened to fp32 panels [p][kc][PANEL]
 * (each panel's rows are contiguous in both: a straight conversion, exact). */
static void widen_panels(const uint16_t *panels, int64_t K, int64_t p0, int64_t p1, int64_t k0,
                         int64_t kc, float *Bp) {
    for (int64_t p = p0; p < p1; p++) {
        const uint16_t *src = panels + ((size_t)p * (size_t)K + (size_t)k0) * PANEL;
        float *dst = Bp + (p - p0) * kc * PANEL;
        for (int64_t i = 0; i < kc * PANEL; i++)
            dst[i] = clef_bf16_to_f32(src[i]);
    }
}

void cpu_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const cpu_gemm_b *B,
              const float *bias, float *C, int64_t ldc, int accumulate, float *pack) {
    const cpu_isa isa = cpu_isa_active();
    const gemm_shape sh = SHAPES[isa];
    kernel_fn kernel = kernel_scalar;
#if CPU_HAVE_X86
    if (isa == CPU_ISA_AVX512)
        kernel = kernel_avx512;
    else if (isa == CPU_ISA_AVX2)
        kernel = kernel_avx2;
#endif
    const int vector = isa != CPU_ISA_SCALAR;
    float *Ap = pack;
    float *Bp = pack + (size_t)MC_MAX * KC;
    for (int64_t jc = 0; jc < N; jc += NC) {
        int64_t nc = min64(NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += KC) {
            int64_t kc = min64(KC, K - pc);
            int overwrite = pc == 0 && !accumulate;
            /* the block's B panels: panel q (columns jc + q * PANEL ...) at Bb + q * panel_step,
             * rows k of the block PANEL floats apart */
            const float *Bb = Bp;
            int64_t panel_step = kc * PANEL;
            if (B->layout == CPU_GEMM_B_PANELS && B->type == CLEF_WTYPE_F32) {
                Bb = (const float *)B->data + ((size_t)(jc / PANEL) * (size_t)B->ld + (size_t)pc) * PANEL;
                panel_step = B->ld * PANEL;
            } else if (B->layout == CPU_GEMM_B_PANELS) {
                widen_panels(B->data, B->ld, jc / PANEL, (jc + nc + PANEL - 1) / PANEL, pc, kc, Bp);
            } else {
                pack_b(B, pc, kc, jc, nc, PANEL, vector, Bp);
            }
            for (int64_t ic = 0; ic < M; ic += sh.mc) {
                int64_t mc = min64(sh.mc, M - ic);
                pack_a(A, lda, ic, mc, pc, kc, sh.mr, vector, Ap);
                for (int64_t jr = 0; jr < nc; jr += sh.nr) {
                    const float *Bt = Bb + jr / PANEL * panel_step + jr % PANEL;
                    for (int64_t ir = 0; ir < mc; ir += sh.mr) {
                        kernel(kc, Ap + ir * kc, Bt, PANEL, C + (ic + ir) * ldc + jc + jr, ldc,
                               min64(sh.mr, mc - ir), min64(sh.nr, nc - jr), overwrite);
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
