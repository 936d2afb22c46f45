/*
 * int8_matmul.c — INT8 ConvRot on the CPU over a range of output features: the int32 dot
 * products of the quantized activations with the int8 weights and the epilogue
 * float(acc) * (s_t * s_w[n]) (+ bias), comfy-kitchen's eager int8_linear; and the butterfly
 * quantizer (clef_convrot_quantize_tokens_fast). See quant_matmul.h.
 *
 * An int32 sum of int8 products is exact in any order, so every kernel below gives the bits of
 * the C loop (and of clef_int8_gemm_ref); they differ in speed only:
 *   C             one output at a time;
 *   AVX2          tiles of 2 tokens x 4 rows, codes widened to int16, vpmaddwd (pairs of
 *                 products summed into int32 lanes, |pair| <= 2 * 128 * 128), lanes summed last;
 *   AVX-512       the same with tiles of 4 tokens x 4 rows;
 *   AVX-VNNI,     vpdpbusd: four u8 x s8 products summed into each int32 lane, one instruction
 *   AVX-512 VNNI  (ymm / zmm). It wants one side unsigned: the weight rows get +128 (u8 =
 *                 w + 128) while a thread packs them, 32 rows at a time, into a panel of its
 *                 scratch laid out for it (4 consecutive k of 32 rows per 128 bytes); the
 *                 activations (s8) are broadcast 4 bytes at a time; so a lane sums
 *                 (w + 128) x, and 128 x (sum_k x[t, k]) — per token, once per call — comes
 *                 off in the epilogue. int32 wraps modulo 2^32 and the true dot product fits
 *                 (|dot| <= K * 128 * 128 < 2^31 for K < 131072), so the difference is exact
 *                 whatever the intermediate sums. Register tiles: 32 rows x 12 tokens (zmm,
 *                 24 accumulators) and 16 rows x 6 tokens (ymm, 12); one lane per (row, token),
 *                 so no horizontal sums, and the epilogue runs 16 / 8 outputs per vector with
 *                 the scalar's operations (convert, multiply by the product of the scales, add
 *                 the bias, add to y) lane by lane.
 * Never vpmaddubsw on raw codes: its int16 pair sums saturate (2 * 255 * 127 > 32767).
 * The kernel follows the CPU backend's level (cpu_isa_active) and its VNNI extension
 * (cpu_isa_has_vnni); the VNNI kernels need the scratch (clef_int8_matmul_scratch_bytes) and
 * K a multiple of 4, else the level's other kernel runs.
 */
#include "quant/quant_matmul.h"

#include "backend/cpu/cpu_isa.h"
#include "quant/hadamard.h"

#include <math.h>
#include <string.h>

#if CPU_HAVE_X86
#include <immintrin.h>
#endif

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


/* y[t, n] (+)= float(dot) * (sx[t] * sw[n]) (+ bias[n]): the scalar epilogue, one output, in
 * the order every kernel of this file keeps (the VNNI stores below vectorise the same steps). */
static inline __attribute__((always_inline)) void
int8_store_dot(int32_t dot, int64_t t, int64_t n, const float *sx, const float *sw, const float *bias,
               float *y, int64_t ldy, int accumulate) {
    float v = (float)dot * (sx[t] * sw[n]);
    if (bias)
        v += bias[n];
    float *dst = y + t * ldy + n;
    *dst = accumulate ? *dst + v : v;
}

/* int32 dot products are exact in any order: the C loop below and the AVX2 / AVX-512 tiles
 * give the same bits. */
static inline __attribute__((always_inline)) void
int8_rows(const int8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1, int64_t T,
          const int8_t *qx, const float *sx, const float *bias, float *y, int64_t ldy,
          int accumulate) {
    for (int64_t t = 0; t < T; t++) {
        const int8_t *xt = qx + t * K;
        for (int64_t n = n0; n < n1; n++) {
            const int8_t *wn = qw + n * K;
            int32_t acc = 0; /* exact: |acc| <= K * 128 * 128 */
            for (int64_t k = 0; k < K; k++)
                acc += (int32_t)xt[k] * (int32_t)wn[k];
            int8_store_dot(acc, t, n, sx, sw, bias, y, ldy, accumulate);
        }
    }
}

#define INT8_ROWS_ARGS                                                                         \
    const int8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1, int64_t T,           \
        const int8_t *qx, const float *sx, const float *bias, float *y, int64_t ldy,           \
        int accumulate
#define INT8_ROWS_CALL qw, sw, K, n0, n1, T, qx, sx, bias, y, ldy, accumulate

#if CPU_HAVE_X86
CPU_TARGET_AVX2 static inline int32_t hsum_epi32_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* AVX2: tiles of 2 tokens x 4 rows, 16 k per step, as the AVX-512 tiles below (vpmaddwd on
 * int16-widened codes, exact int32 sums in any order); the rest through the C loop. */
CPU_TARGET_AVX2 static void int8_rows_avx2(INT8_ROWS_ARGS) {
    if (K % 16) {
        int8_rows(INT8_ROWS_CALL);
        return;
    }
    const int64_t t_tiles = T / 2 * 2, n_tiles = n0 + (n1 - n0) / 4 * 4;
    for (int64_t t = 0; t < t_tiles; t += 2) {
        for (int64_t n = n0; n < n_tiles; n += 4) {
            __m256i acc[2][4];
            for (int i = 0; i < 2; i++)
                for (int r = 0; r < 4; r++)
                    acc[i][r] = _mm256_setzero_si256();
            for (int64_t k = 0; k < K; k += 16) {
                __m256i xv[2], wv[4];
                for (int i = 0; i < 2; i++)
                    xv[i] = _mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(const void *)(qx + (t + i) * K + k)));
                for (int r = 0; r < 4; r++)
                    wv[r] = _mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(const void *)(qw + (n + r) * K + k)));
                for (int i = 0; i < 2; i++)
                    for (int r = 0; r < 4; r++)
                        acc[i][r] = _mm256_add_epi32(acc[i][r], _mm256_madd_epi16(xv[i], wv[r]));
            }
            for (int i = 0; i < 2; i++)
                for (int r = 0; r < 4; r++)
                    int8_store_dot(hsum_epi32_avx2(acc[i][r]), t + i, n + r, sx, sw, bias, y, ldy, accumulate);
        }
        if (n_tiles < n1) /* the last rows of these tokens */
            int8_rows(qw, sw, K, n_tiles, n1, 2, qx + t * K, sx + t, bias, y + t * ldy, ldy,
                      accumulate);
    }
    if (t_tiles < T) /* the last token */
        int8_rows(qw, sw, K, n0, n1, T - t_tiles, qx + t_tiles * K, sx + t_tiles, bias,
                  y + t_tiles * ldy, ldy, accumulate);
}

/* AVX-512: tiles of 4 tokens x 4 rows, 32 k per step: codes widened to int16, pairs of
 * products summed into int32 lanes (vpmaddwd: exact, |pair| <= 2 * 128 * 128), lanes summed
 * at the end; then the same epilogue. Tokens and rows past the last whole tile, and K not a
 * multiple of 32, take the C loop. */
CPU_TARGET_AVX512 static void int8_rows_avx512(INT8_ROWS_ARGS) {
    if (K % 32) {
        int8_rows(INT8_ROWS_CALL);
        return;
    }
    const int64_t t_tiles = T / 4 * 4, n_tiles = n0 + (n1 - n0) / 4 * 4;
    for (int64_t t = 0; t < t_tiles; t += 4) {
        for (int64_t n = n0; n < n_tiles; n += 4) {
            __m512i acc[4][4];
            for (int i = 0; i < 4; i++)
                for (int r = 0; r < 4; r++)
                    acc[i][r] = _mm512_setzero_si512();
            for (int64_t k = 0; k < K; k += 32) {
                __m512i xv[4], wv[4];
                for (int i = 0; i < 4; i++)
                    xv[i] = _mm512_cvtepi8_epi16(
                        _mm256_loadu_si256((const __m256i *)(const void *)(qx + (t + i) * K + k)));
                for (int r = 0; r < 4; r++)
                    wv[r] = _mm512_cvtepi8_epi16(
                        _mm256_loadu_si256((const __m256i *)(const void *)(qw + (n + r) * K + k)));
                for (int i = 0; i < 4; i++)
                    for (int r = 0; r < 4; r++)
                        acc[i][r] = _mm512_add_epi32(acc[i][r], _mm512_madd_epi16(xv[i], wv[r]));
            }
            for (int i = 0; i < 4; i++)
                for (int r = 0; r < 4; r++)
                    int8_store_dot(_mm512_reduce_add_epi32(acc[i][r]), t + i, n + r, sx, sw, bias, y, ldy,
                                   accumulate);
        }
        if (n_tiles < n1) /* the last rows of these tokens */
            int8_rows(qw, sw, K, n_tiles, n1, 4, qx + t * K, sx + t, bias, y + t * ldy, ldy,
                      accumulate);
    }
    if (t_tiles < T) /* the last tokens */
        int8_rows(qw, sw, K, n0, n1, T - t_tiles, qx + t_tiles * K, sx + t_tiles, bias,
                  y + t_tiles * ldy, ldy, accumulate);
}
#endif

/* ---- VNNI ----------------------------------------------------------------------------------- */

#define VNNI_PANEL_ROWS 32 /* weight rows packed at a time: 2 zmm / 4 ymm of int32 lanes */
#define VNNI512_TOKENS 12  /* tokens per zmm tile (x 2 row vectors: 24 accumulators) */
#define VNNI256_TOKENS 6   /* tokens per ymm tile (x 2 row vectors: 12 accumulators) */

static size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

size_t clef_int8_matmul_scratch_bytes(int64_t T, int64_t K) {
    return align64((size_t)VNNI_PANEL_ROWS * (size_t)K) + align64(sizeof(int32_t) * (size_t)T) + 64;
}

#if CPU_HAVE_X86
/* The panel of rows [n, n + rows) of qw (rows <= 32): panel[(k4 * 32 + r) * 4 + j] =
 * u8(W[n + r, 4 k4 + j] + 128) (flipping the sign bit adds 128); rows past `rows` get w = 0.
 * A transpose of 4-byte groups: 4 rows x 8 groups at a time in two ymm lanes (unpacks within
 * each 128-bit lane make 4 x 4 transposes), the rest one group at a time. */
CPU_TARGET_AVX2 static void vnni_pack_panel(const int8_t *qw, int64_t K, int64_t n, int rows,
                                            uint8_t *panel) {
    const int64_t K4 = K / 4, K4v = K4 / 8 * 8;
    uint32_t *out = (uint32_t *)(void *)panel;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const int8_t *s0 = qw + (n + r) * K, *s1 = s0 + K, *s2 = s1 + K, *s3 = s2 + K;
        for (int64_t k4 = 0; k4 < K4v; k4 += 8) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s0 + 4 * k4));
            const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s1 + 4 * k4));
            const __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s2 + 4 * k4));
            const __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(s3 + 4 * k4));
            const __m256i ab0 = _mm256_unpacklo_epi32(a, b), ab1 = _mm256_unpackhi_epi32(a, b);
            const __m256i cd0 = _mm256_unpacklo_epi32(c, d), cd1 = _mm256_unpackhi_epi32(c, d);
            /* g[i], lane L: group 4 L + i of rows r..r+3 */
            const __m256i g[4] = {_mm256_unpacklo_epi64(ab0, cd0), _mm256_unpackhi_epi64(ab0, cd0),
                                  _mm256_unpacklo_epi64(ab1, cd1), _mm256_unpackhi_epi64(ab1, cd1)};
            for (int i = 0; i < 4; i++) {
                const __m256i v = _mm256_xor_si256(g[i], flip);
                _mm_storeu_si128((__m128i *)(void *)(out + (k4 + i) * VNNI_PANEL_ROWS + r),
                                 _mm256_castsi256_si128(v));
                _mm_storeu_si128((__m128i *)(void *)(out + (k4 + 4 + i) * VNNI_PANEL_ROWS + r),
                                 _mm256_extracti128_si256(v, 1));
            }
        }
        for (int j = 0; j < 4; j++)
            for (int64_t k4 = K4v; k4 < K4; k4++) {
                uint32_t v;
                memcpy(&v, qw + (n + r + j) * K + 4 * k4, sizeof v);
                out[k4 * VNNI_PANEL_ROWS + r + j] = v ^ 0x80808080u;
            }
    }
    for (; r < VNNI_PANEL_ROWS; r++) {
        uint32_t *dst = out + r;
        if (r < rows) {
            const int8_t *src = qw + (n + r) * K;
            for (int64_t k4 = 0; k4 < K4; k4++) {
                uint32_t v;
                memcpy(&v, src + 4 * k4, sizeof v);
                dst[k4 * VNNI_PANEL_ROWS] = v ^ 0x80808080u;
            }
        } else {
            for (int64_t k4 = 0; k4 < K4; k4++)
                dst[k4 * VNNI_PANEL_ROWS] = 0x80808080u;
        }
    }
}

/* Where a tile's outputs go. */
typedef struct int8_out {
    const float *sx, *sw, *bias;
    const int32_t *off;
    float *y;
    int64_t ldy;
    int accumulate;
} int8_out;

CPU_TARGET_AVX512VNNI static void token_offsets_avx512(const int8_t *qx, int64_t T, int64_t K,
                                                       int32_t *off) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t t = 0; t < T; t++) {
        const int8_t *xt = qx + t * K;
        __m512i acc = _mm512_setzero_si512();
        int64_t k = 0;
        for (; k + 64 <= K; k += 64)
            acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512((const void *)(xt + k)));
        int32_t s = _mm512_reduce_add_epi32(acc);
        for (; k < K; k++)
            s += xt[k];
        off[t] = (int32_t)((uint32_t)s * 128u);
    }
}

/* y[t0 + i, n + 16 h + lane] for the zmm accumulators of a tile: (acc - off[t]) converted,
 * times sx[t] * sw[n], plus the bias, plus y when accumulating — the scalar epilogue's
 * operations in its order, 16 outputs per vector; lanes past `rows` are neither read nor
 * written. */
CPU_TARGET_AVX512VNNI static inline __attribute__((always_inline)) void
vnni512_store(__m512i acc, int64_t t, int64_t n, int rows, const int8_out *o) {
    const __mmask16 m = rows >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rows) - 1);
    const __m512i dot = _mm512_sub_epi32(acc, _mm512_set1_epi32(o->off[t]));
    const __m512 s = _mm512_mul_ps(_mm512_set1_ps(o->sx[t]), _mm512_maskz_loadu_ps(m, o->sw + n));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), s);
    if (o->bias)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, o->bias + n));
    float *dst = o->y + t * o->ldy + n;
    if (o->accumulate)
        v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), v);
    _mm512_mask_storeu_ps(dst, m, v);
}

/* One zmm tile: `nv` (1 or 2) vectors of 16 panel rows x 12 tokens (xt: each token's codes;
 * the pointers past `tokens` repeat the last token, computed and not stored). Named
 * accumulators: with an array GCC kept them on the stack, a store and a load per k step. */
CPU_TARGET_AVX512VNNI static inline __attribute__((always_inline)) void
vnni512_tile(const uint8_t *panel, int64_t K, const int8_t *const *xt, int64_t t0, int tokens,
             int64_t n, int rows, const int8_out *o, const int nv) {
#define V512_TOKENS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define V512_INIT(i)                                                                           \
    __m512i a0_##i = _mm512_setzero_si512(), a1_##i = a0_##i;                                  \
    const int8_t *x_##i = xt[i];
    V512_TOKENS(V512_INIT)
#undef V512_INIT
    const int64_t K4 = K / 4;
    for (int64_t k4 = 0; k4 < K4; k4++) {
        const uint8_t *wk = panel + k4 * 4 * VNNI_PANEL_ROWS;
        const __m512i w0 = _mm512_load_si512((const void *)wk);
        const __m512i w1 = nv > 1 ? _mm512_load_si512((const void *)(wk + 64)) : w0;
#define V512_STEP(i)                                                                           \
    {                                                                                          \
        int32_t x4;                                                                            \
        memcpy(&x4, x_##i + 4 * k4, sizeof x4);                                                \
        const __m512i b = _mm512_set1_epi32(x4);                                               \
        a0_##i = _mm512_dpbusd_epi32(a0_##i, w0, b);                                           \
        if (nv > 1)                                                                            \
            a1_##i = _mm512_dpbusd_epi32(a1_##i, w1, b);                                       \
    }
        V512_TOKENS(V512_STEP)
#undef V512_STEP
    }
#define V512_STORE(i)                                                                          \
    if (i < tokens) {                                                                          \
        vnni512_store(a0_##i, t0 + i, n, rows, o);                                             \
        if (nv > 1)                                                                            \
            vnni512_store(a1_##i, t0 + i, n + 16, rows - 16, o);                               \
    }
    V512_TOKENS(V512_STORE)
#undef V512_STORE
#undef V512_TOKENS
}

CPU_TARGET_AVX512VNNI static void vnni512_panel(const uint8_t *panel, int64_t K,
                                                const int8_t *qx, int64_t T, int64_t n, int rows,
                                                const int8_out *o) {
    const int8_t *xt[VNNI512_TOKENS];
    for (int64_t t0 = 0; t0 < T; t0 += VNNI512_TOKENS) {
        const int tokens = T - t0 < VNNI512_TOKENS ? (int)(T - t0) : VNNI512_TOKENS;
        for (int i = 0; i < VNNI512_TOKENS; i++)
            xt[i] = qx + (t0 + (i < tokens ? i : tokens - 1)) * K;
        if (rows > 16)
            vnni512_tile(panel, K, xt, t0, tokens, n, rows, o, 2);
        else
            vnni512_tile(panel, K, xt, t0, tokens, n, rows, o, 1);
    }
}

CPU_TARGET_AVXVNNI static void token_offsets_avx2vnni(const int8_t *qx, int64_t T, int64_t K,
                                                      int32_t *off) {
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t t = 0; t < T; t++) {
        const int8_t *xt = qx + t * K;
        __m256i acc = _mm256_setzero_si256();
        int64_t k = 0;
        for (; k + 32 <= K; k += 32)
            acc = _mm256_dpbusd_avx_epi32(acc, ones,
                                          _mm256_loadu_si256((const __m256i *)(const void *)(xt + k)));
        int32_t lanes[8], s = 0;
        _mm256_storeu_si256((__m256i *)(void *)lanes, acc);
        for (int i = 0; i < 8; i++)
            s += lanes[i];
        for (; k < K; k++)
            s += xt[k];
        off[t] = (int32_t)((uint32_t)s * 128u);
    }
}

/* The ymm epilogue: as vnni512_store, 8 outputs, lanes past `rows` masked (vmaskmovps). */
CPU_TARGET_AVXVNNI static inline __attribute__((always_inline)) void
vnni256_store(__m256i acc, int64_t t, int64_t n, int rows, const int8_out *o) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i dot = _mm256_sub_epi32(acc, _mm256_set1_epi32(o->off[t]));
    const __m256 s = _mm256_mul_ps(_mm256_set1_ps(o->sx[t]), _mm256_maskload_ps(o->sw + n, m));
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), s);
    if (o->bias)
        v = _mm256_add_ps(v, _mm256_maskload_ps(o->bias + n, m));
    float *dst = o->y + t * o->ldy + n;
    if (o->accumulate)
        v = _mm256_add_ps(_mm256_maskload_ps(dst, m), v);
    _mm256_maskstore_ps(dst, m, v);
}

/* One ymm tile: `nv` (1 or 2) vectors of 8 rows of the panel's half at `half` (its 16 rows
 * [16 h, 16 h + 16), 64 bytes of each 128-byte k step) x 6 tokens; named accumulators as the
 * zmm tile. */
CPU_TARGET_AVXVNNI static inline __attribute__((always_inline)) void
vnni256_tile(const uint8_t *half, int64_t K, const int8_t *const *xt, int64_t t0, int tokens,
             int64_t n, int rows, const int8_out *o, const int nv) {
#define V256_TOKENS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define V256_INIT(i)                                                                           \
    __m256i a0_##i = _mm256_setzero_si256(), a1_##i = a0_##i;                                  \
    const int8_t *x_##i = xt[i];
    V256_TOKENS(V256_INIT)
#undef V256_INIT
    const int64_t K4 = K / 4;
    for (int64_t k4 = 0; k4 < K4; k4++) {
        const uint8_t *wk = half + k4 * 4 * VNNI_PANEL_ROWS;
        const __m256i w0 = _mm256_load_si256((const __m256i *)(const void *)wk);
        const __m256i w1 = nv > 1 ? _mm256_load_si256((const __m256i *)(const void *)(wk + 32)) : w0;
#define V256_STEP(i)                                                                           \
    {                                                                                          \
        int32_t x4;                                                                            \
        memcpy(&x4, x_##i + 4 * k4, sizeof x4);                                                \
        const __m256i b = _mm256_set1_epi32(x4);                                               \
        a0_##i = _mm256_dpbusd_avx_epi32(a0_##i, w0, b);                                       \
        if (nv > 1)                                                                            \
            a1_##i = _mm256_dpbusd_avx_epi32(a1_##i, w1, b);                                   \
    }
        V256_TOKENS(V256_STEP)
#undef V256_STEP
    }
#define V256_STORE(i)                                                                          \
    if (i < tokens) {                                                                          \
        vnni256_store(a0_##i, t0 + i, n, rows, o);                                             \
        if (nv > 1)                                                                            \
            vnni256_store(a1_##i, t0 + i, n + 8, rows - 8, o);                                 \
    }
    V256_TOKENS(V256_STORE)
#undef V256_STORE
#undef V256_TOKENS
}

CPU_TARGET_AVXVNNI static void vnni256_panel(const uint8_t *panel, int64_t K, const int8_t *qx,
                                             int64_t T, int64_t n, int rows, const int8_out *o) {
    const int8_t *xt[VNNI256_TOKENS];
    for (int h = 0; h < 2 && 16 * h < rows; h++) {
        const int hrows = rows - 16 * h < 16 ? rows - 16 * h : 16;
        const uint8_t *half = panel + 64 * h;
        for (int64_t t0 = 0; t0 < T; t0 += VNNI256_TOKENS) {
            const int tokens = T - t0 < VNNI256_TOKENS ? (int)(T - t0) : VNNI256_TOKENS;
            for (int i = 0; i < VNNI256_TOKENS; i++)
                xt[i] = qx + (t0 + (i < tokens ? i : tokens - 1)) * K;
            if (hrows > 8)
                vnni256_tile(half, K, xt, t0, tokens, n + 16 * h, hrows, o, 2);
            else
                vnni256_tile(half, K, xt, t0, tokens, n + 16 * h, hrows, o, 1);
        }
    }
}

/* The VNNI kernels: the token offsets once, then panel by panel, all tokens per panel. */
static void int8_rows_vnni(clef_int8_kernel kernel, INT8_ROWS_ARGS, void *scratch) {
    uint8_t *panel = (uint8_t *)(((uintptr_t)scratch + 63) / 64 * 64);
    int32_t *off = (int32_t *)(void *)(panel + align64((size_t)VNNI_PANEL_ROWS * (size_t)K));
    const int8_out o = {.sx = sx, .sw = sw, .bias = bias, .off = off, .y = y, .ldy = ldy,
                        .accumulate = accumulate};
    if (kernel == CLEF_INT8_KERNEL_AVX512VNNI)
        token_offsets_avx512(qx, T, K, off);
    else
        token_offsets_avx2vnni(qx, T, K, off);
    for (int64_t n = n0; n < n1; n += VNNI_PANEL_ROWS) {
        const int rows = n1 - n < VNNI_PANEL_ROWS ? (int)(n1 - n) : VNNI_PANEL_ROWS;
        vnni_pack_panel(qw, K, n, rows, panel);
        if (kernel == CLEF_INT8_KERNEL_AVX512VNNI)
            vnni512_panel(panel, K, qx, T, n, rows, &o);
        else
            vnni256_panel(panel, K, qx, T, n, rows, &o);
    }
}
#endif

/* ---- dispatch -------------------------------------------------------------------------------- */

const char *clef_int8_kernel_name(clef_int8_kernel k) {
    switch (k) {
    case CLEF_INT8_KERNEL_C: return "c";
    case CLEF_INT8_KERNEL_AVX2: return "avx2";
    case CLEF_INT8_KERNEL_AVXVNNI: return "avx-vnni";
    case CLEF_INT8_KERNEL_AVX512: return "avx512";
    case CLEF_INT8_KERNEL_AVX512VNNI: return "avx512-vnni";
    default: return "?";
    }
}

int clef_int8_kernel_supported(clef_int8_kernel k) {
    const cpu_isa best = cpu_isa_best();
    switch (k) {
    case CLEF_INT8_KERNEL_C: return 1;
    case CLEF_INT8_KERNEL_AVX2: return best >= CPU_ISA_AVX2;
    case CLEF_INT8_KERNEL_AVXVNNI: return cpu_isa_has_vnni(CPU_ISA_AVX2);
    case CLEF_INT8_KERNEL_AVX512: return best >= CPU_ISA_AVX512;
    case CLEF_INT8_KERNEL_AVX512VNNI: return cpu_isa_has_vnni(CPU_ISA_AVX512);
    default: return 0;
    }
}

clef_int8_kernel clef_int8_kernel_active(void) {
    const cpu_isa isa = cpu_isa_active();
    if (isa == CPU_ISA_AVX512)
        return cpu_isa_has_vnni(isa) ? CLEF_INT8_KERNEL_AVX512VNNI : CLEF_INT8_KERNEL_AVX512;
    if (isa == CPU_ISA_AVX2)
        return cpu_isa_has_vnni(isa) ? CLEF_INT8_KERNEL_AVXVNNI : CLEF_INT8_KERNEL_AVX2;
    return CLEF_INT8_KERNEL_C;
}

void clef_int8_matmul_rows_kernel(clef_int8_kernel kernel, INT8_ROWS_ARGS, void *scratch) {
    if (!clef_int8_kernel_supported(kernel))
        kernel = CLEF_INT8_KERNEL_C;
    /* the VNNI kernels need their scratch and whole 4-byte groups of k; else the level's other */
    if ((kernel == CLEF_INT8_KERNEL_AVX512VNNI || kernel == CLEF_INT8_KERNEL_AVXVNNI) &&
        (!scratch || K % 4))
        kernel = kernel == CLEF_INT8_KERNEL_AVX512VNNI ? CLEF_INT8_KERNEL_AVX512 : CLEF_INT8_KERNEL_AVX2;
    switch (kernel) {
#if CPU_HAVE_X86
    case CLEF_INT8_KERNEL_AVX512VNNI:
    case CLEF_INT8_KERNEL_AVXVNNI:
        int8_rows_vnni(kernel, INT8_ROWS_CALL, scratch);
        return;
    case CLEF_INT8_KERNEL_AVX512:
        int8_rows_avx512(INT8_ROWS_CALL);
        return;
    case CLEF_INT8_KERNEL_AVX2:
        int8_rows_avx2(INT8_ROWS_CALL);
        return;
#endif
    default:
        int8_rows(INT8_ROWS_CALL);
    }
}

void clef_int8_matmul_rows_ws(INT8_ROWS_ARGS, void *scratch) {
    clef_int8_matmul_rows_kernel(clef_int8_kernel_active(), INT8_ROWS_CALL, scratch);
}

void clef_int8_matmul_rows(INT8_ROWS_ARGS) {
    clef_int8_matmul_rows_kernel(clef_int8_kernel_active(), INT8_ROWS_CALL, NULL);
}
