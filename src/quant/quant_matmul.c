/*
 * quant_matmul.c — CPU matmul kernels of NF4 and FP8 over a range of output features; see
 * quant_matmul.h for the arithmetic each one keeps (INT8 ConvRot's: int8_matmul.c).
 *
 * NF4 and FP8 share one shape. A thread's weight rows are decoded QMM_PANEL_ROWS at a time
 * into a row-major fp32 panel (panel[j * K + k] = W[n + j, k]; NF4 decodes 32 codes per
 * vector step). Then register tiles of R weight rows x B token blocks run R x B x TB
 * independent fused multiply-add chains over k: per k, B vector loads of the packed
 * activations (TB tokens each), R broadcasts of a weight, R x B vector FMAs. Every output is
 * still one chain in ascending k starting from 0, so the bits depend neither on the tile, nor
 * the ISA, nor T, nor the thread split. The panel (QMM_PANEL_ROWS x K) and the activations
 * of a tile's token blocks (B x TB x K) stay in the core's L2 cache while the tiles sweep
 * them; the packed activations of all tokens are read once per panel.
 *
 * Tiles: AVX-512 8 rows x 2 blocks (16 zmm accumulators), AVX2 + FMA 6 rows x 1 block (12 ymm
 * accumulators), C one output at a time (fmaf). Rows past the panel's last repeat its last row and
 * tokens past T are the packing's zeros: computed, never stored.
 */
#include "quant/quant_matmul.h"

#include "backend/cpu/cpu_isa.h"
#include "core/numeric.h"
#include "quant/fp8.h"

#include <math.h>

#if CPU_HAVE_X86
#include <immintrin.h>
#endif

#define TB CLEF_QMM_TB
#define QMM_PANEL_ROWS (4 * CLEF_QMM_NR) /* weight rows decoded at a time */
#define TILE_ROWS_MAX 8
#define TILE_TOKENS_MAX (2 * TB)

size_t clef_qmm_panel_floats(int64_t K) { return (size_t)K * QMM_PANEL_ROWS; }
int64_t clef_qmm_token_blocks(int64_t T) { return (T + TB - 1) / TB; }
size_t clef_qmm_xpack_floats(int64_t T, int64_t K) {
    return (size_t)clef_qmm_token_blocks(T) * TB * (size_t)K;
}

/* ---- activations -------------------------------------------------------------------------- */

void clef_qmm_pack_f32(const float *x, int64_t ldx, int64_t T, int64_t K, int64_t b0, int64_t b1,
                       float *xp) {
    for (int64_t b = b0; b < b1; b++) {
        float *dst = xp + b * TB * K;
        for (int i = 0; i < TB; i++) {
            int64_t t = b * TB + i;
            if (t < T) {
                const float *src = x + t * ldx;
                for (int64_t k = 0; k < K; k++)
                    dst[k * TB + i] = src[k];
            } else {
                for (int64_t k = 0; k < K; k++)
                    dst[k * TB + i] = 0.0f;
            }
        }
    }
}

void clef_qmm_pack_fp8(const float *x, int64_t ldx, int64_t T, int64_t K, int qdq, int64_t b0,
                       int64_t b1, float *xp, float *sx, uint8_t *qrow) {
    float table[256];
    for (int i = 0; i < 256; i++)
        table[i] = clef_fp8e4m3_to_f32((uint8_t)i);
    for (int64_t b = b0; b < b1; b++) {
        float *dst = xp + b * TB * K;
        for (int i = 0; i < TB; i++) {
            int64_t t = b * TB + i;
            if (t >= T) {
                for (int64_t k = 0; k < K; k++)
                    dst[k * TB + i] = 0.0f;
                continue;
            }
            clef_fp8_quantize_tokens(x + t * ldx, ldx, 1, K, CLEF_QUANT_ACT_F32, qrow, sx + t);
            /* exact widening (W8A8), or fp32(q * s_t) as compressed-tensors' QDQ */
            const float s = qdq ? sx[t] : 1.0f;
            for (int64_t k = 0; k < K; k++)
                dst[k * TB + i] = table[qrow[k]] * s;
        }
    }
}

/* ---- output ------------------------------------------------------------------------------- */

/* Where a tile's sums go: y (+)= sum * (sx[t] * sw[n] when scaled) + bias[n]. */
typedef struct qmm_out {
    float *y;
    int64_t ldy;
    const float *bias;
    int accumulate;
    const float *sx, *sw; /* W8A8's epilogue scales, else NULL */
} qmm_out;

static void store_tile(const float *tile, int rows, int tokens, int64_t t0, int64_t n0,
                       const qmm_out *o) {
    for (int r = 0; r < rows; r++) {
        const int64_t n = n0 + r;
        for (int i = 0; i < tokens; i++) {
            const int64_t t = t0 + i;
            float v = tile[r * TILE_TOKENS_MAX + i];
            if (o->sw)
                v = v * o->sx[t] * o->sw[n];
            if (o->bias)
                v += o->bias[n];
            float *dst = o->y + t * o->ldy + n;
            *dst = o->accumulate ? *dst + v : v;
        }
    }
}

/* ---- register tiles: tile[r][i] = sum_k w[r][k] * xp_block(i / TB)[k][i % TB] ------------ */

/* rows: the valid rows of w (the vector tiles compute all of theirs anyway) */
typedef void (*tile_fn)(const float *xb, int64_t K, const float *const *w, int rows, int blocks,
                        float *tile);

static void tile_c(const float *xb, int64_t K, const float *const *w, int rows, int blocks,
                   float *tile) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < blocks * TB; i++) {
            const float *xk = xb + (i / TB) * TB * K + i % TB;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc = fmaf(xk[k * TB], w[r][k], acc);
            tile[r * TILE_TOKENS_MAX + i] = acc;
        }
}

#if CPU_HAVE_X86
/* AVX2: 6 rows x one block (two ymm of 8 tokens). */
#define AVX2_ROWS 6
CPU_TARGET_AVX2 static void tile_avx2(const float *xb, int64_t K, const float *const *w,
                                      int rows, int blocks, float *tile) {
    (void)rows, (void)blocks; /* always 1 block */
    /* named accumulators: with an array GCC stored all 12 to the stack on every k */
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
    __m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3], *w4 = w[4], *w5 = w[5];
    for (int64_t k = 0; k < K; k++) {
        const __m256 x0 = _mm256_loadu_ps(xb + k * TB), x1 = _mm256_loadu_ps(xb + k * TB + 8);
        __m256 b;
#define AVX2_ROW(r, wr)                                                                        \
    b = _mm256_broadcast_ss(wr + k);                                                           \
    a##r##0 = _mm256_fmadd_ps(x0, b, a##r##0);                                                 \
    a##r##1 = _mm256_fmadd_ps(x1, b, a##r##1);
        AVX2_ROW(0, w0) AVX2_ROW(1, w1) AVX2_ROW(2, w2)
        AVX2_ROW(3, w3) AVX2_ROW(4, w4) AVX2_ROW(5, w5)
#undef AVX2_ROW
    }
    const __m256 out[AVX2_ROWS][2] = {{a00, a01}, {a10, a11}, {a20, a21},
                                      {a30, a31}, {a40, a41}, {a50, a51}};
    for (int r = 0; r < AVX2_ROWS; r++) {
        _mm256_storeu_ps(tile + r * TILE_TOKENS_MAX, out[r][0]);
        _mm256_storeu_ps(tile + r * TILE_TOKENS_MAX + 8, out[r][1]);
    }
}

/* AVX-512: 8 rows x `blocks` (1 or 2) blocks of one zmm each. */
#define AVX512_ROWS 8
CPU_TARGET_AVX512 static inline __attribute__((always_inline)) void
tile_avx512_n(const float *xb, int64_t K, const float *const *w, float *tile, const int nb) {
    __m512 acc[AVX512_ROWS][2];
    for (int r = 0; r < AVX512_ROWS; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    const float *w4 = w[4], *w5 = w[5], *w6 = w[6], *w7 = w[7];
    const float *xb1 = xb + TB * K;
    for (int64_t k = 0; k < K; k++) {
        const __m512 x0 = _mm512_loadu_ps(xb + k * TB);
        const __m512 x1 = nb > 1 ? _mm512_loadu_ps(xb1 + k * TB) : x0;
        __m512 b;
#define AVX512_ROW(r, wr)                                                                      \
    b = _mm512_set1_ps(wr[k]);                                                                 \
    acc[r][0] = _mm512_fmadd_ps(x0, b, acc[r][0]);                                             \
    if (nb > 1)                                                                                \
        acc[r][1] = _mm512_fmadd_ps(x1, b, acc[r][1]);
        AVX512_ROW(0, w0) AVX512_ROW(1, w1) AVX512_ROW(2, w2) AVX512_ROW(3, w3)
        AVX512_ROW(4, w4) AVX512_ROW(5, w5) AVX512_ROW(6, w6) AVX512_ROW(7, w7)
#undef AVX512_ROW
    }
    for (int r = 0; r < AVX512_ROWS; r++) {
        _mm512_storeu_ps(tile + r * TILE_TOKENS_MAX, acc[r][0]);
        if (nb > 1)
            _mm512_storeu_ps(tile + r * TILE_TOKENS_MAX + TB, acc[r][1]);
    }
}

CPU_TARGET_AVX512 static void tile_avx512(const float *xb, int64_t K, const float *const *w,
                                          int rows, int blocks, float *tile) {
    (void)rows;
    if (blocks > 1)
        tile_avx512_n(xb, K, w, tile, 2);
    else
        tile_avx512_n(xb, K, w, tile, 1);
}
#endif

typedef struct tile_kernel {
    tile_fn fn;
    int rows, blocks; /* weight rows x token blocks per tile */
} tile_kernel;

static tile_kernel tile_for(cpu_isa isa) {
#if CPU_HAVE_X86
    if (isa == CPU_ISA_AVX512)
        return (tile_kernel){tile_avx512, AVX512_ROWS, 2};
    if (isa == CPU_ISA_AVX2)
        return (tile_kernel){tile_avx2, AVX2_ROWS, 1};
#endif
    (void)isa;
    return (tile_kernel){tile_c, TILE_ROWS_MAX, 1};
}

/* y columns [n, n + rows) from the decoded panel rows [0, rows): all tokens, tile by tile. */
static void panel_matmul(const tile_kernel *tk, const float *panel, int rows, int64_t K,
                         const float *xp, int64_t T, int64_t n, const qmm_out *o) {
    float tile[TILE_ROWS_MAX * TILE_TOKENS_MAX];
    const float *w[TILE_ROWS_MAX];
    const int64_t blocks = clef_qmm_token_blocks(T);
    for (int64_t b = 0; b < blocks; b += tk->blocks) {
        const int nb = blocks - b < tk->blocks ? (int)(blocks - b) : tk->blocks;
        const int64_t t0 = b * TB;
        const int tokens = T - t0 < nb * TB ? (int)(T - t0) : nb * TB;
        for (int g = 0; g < rows; g += tk->rows) {
            const int valid = rows - g < tk->rows ? rows - g : tk->rows;
            for (int r = 0; r < TILE_ROWS_MAX; r++) /* past the last row: repeat it, unstored */
                w[r] = panel + (size_t)(g + (r < valid ? r : valid - 1)) * (size_t)K;
            tk->fn(xp + b * TB * K, K, w, valid, nb, tile);
            store_tile(tile, valid, tokens, t0, n + g, o);
        }
    }
}

/* ---- weight decoding ------------------------------------------------------------------------ */

#if CPU_HAVE_X86
/* 32 codes from 16 bytes (element 2j in byte j's high nibble, 2j + 1 in its low one), each
 * quant_map[code] * absmax: the scalar decode's fp32 multiply, 16 / 8 lanes at a time. */
CPU_TARGET_AVX512 static void nf4_decode32_avx512(const uint8_t *bytes, const float *map,
                                                  float absmax, float *out) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)bytes), m = _mm_set1_epi8(0x0f);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m), lo = _mm_and_si128(v, m);
    const __m512 table = _mm512_loadu_ps(map), am = _mm512_set1_ps(absmax);
    const __m128i e0 = _mm_unpacklo_epi8(hi, lo), e1 = _mm_unpackhi_epi8(hi, lo);
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(e0), table), am));
    _mm512_storeu_ps(out + 16,
                     _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(e1), table), am));
}

CPU_TARGET_AVX2 static inline __m256 nf4_lookup8_avx2(__m128i codes8, __m256 lo_tab, __m256 hi_tab) {
    const __m256i idx = _mm256_cvtepu8_epi32(codes8);
    const __m256 sel = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7)));
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo_tab, idx),
                            _mm256_permutevar8x32_ps(hi_tab, idx), sel);
}

CPU_TARGET_AVX2 static void nf4_decode32_avx2(const uint8_t *bytes, const float *map,
                                              float absmax, float *out) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)bytes), m = _mm_set1_epi8(0x0f);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m), lo = _mm_and_si128(v, m);
    const __m256 lo_tab = _mm256_loadu_ps(map), hi_tab = _mm256_loadu_ps(map + 8);
    const __m256 am = _mm256_set1_ps(absmax);
    const __m128i e[2] = {_mm_unpacklo_epi8(hi, lo), _mm_unpackhi_epi8(hi, lo)};
    for (int h = 0; h < 2; h++) {
        _mm256_storeu_ps(out + 16 * h, _mm256_mul_ps(nf4_lookup8_avx2(e[h], lo_tab, hi_tab), am));
        _mm256_storeu_ps(out + 16 * h + 8,
                         _mm256_mul_ps(nf4_lookup8_avx2(_mm_srli_si128(e[h], 8), lo_tab, hi_tab), am));
    }
}
#endif

typedef void (*nf4_decode32_fn)(const uint8_t *bytes, const float *map, float absmax, float *out);

/* Elements [first, first + count) of the stored tensor into out: clef_nf4_dequant_f32_strided
 * (CLEF_QUANT_ACT_F32, stride 1), with whole 32-code runs of a block in vector steps. */
static void nf4_decode_run(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                           int64_t count, float *out, nf4_decode32_fn vec) {
    int64_t i = first;
    const int64_t end = first + count;
    while (i < end) {
        const int64_t blk = i / d->blocksize;
        const int64_t block_end = (blk + 1) * d->blocksize < end ? (blk + 1) * d->blocksize : end;
        const float absmax = clef_nf4_block_absmax(d, blk);
        if (vec && (i & 1) == 0)
            for (; i + 32 <= block_end; i += 32, out += 32)
                vec(packed + (i >> 1), d->quant_map, absmax, out);
        for (; i < block_end; i++) {
            const uint8_t byte = packed[i >> 1];
            *out++ = d->quant_map[(i & 1) ? (byte & 0x0f) : (byte >> 4)] * absmax;
        }
    }
}

static nf4_decode32_fn nf4_decoder(cpu_isa isa) {
#if CPU_HAVE_X86
    if (isa == CPU_ISA_AVX512)
        return nf4_decode32_avx512;
    if (isa == CPU_ISA_AVX2)
        return nf4_decode32_avx2;
#endif
    (void)isa;
    return NULL;
}

/* ---- the kernels ---------------------------------------------------------------------------- */

void clef_nf4_matmul_rows(const clef_nf4_desc *d, const uint8_t *packed, int64_t row0, int64_t K,
                          int64_t n0, int64_t n1, int64_t T, const float *xp, const float *bias,
                          float *y, int64_t ldy, int accumulate, float *panel) {
    const cpu_isa isa = cpu_isa_active();
    const tile_kernel tk = tile_for(isa);
    const nf4_decode32_fn vec = nf4_decoder(isa);
    const qmm_out o = {.y = y, .ldy = ldy, .bias = bias, .accumulate = accumulate};
    for (int64_t nb = n0; nb < n1; nb += QMM_PANEL_ROWS) {
        const int rows = n1 - nb < QMM_PANEL_ROWS ? (int)(n1 - nb) : QMM_PANEL_ROWS;
        /* the panel's rows are consecutive in the stored tensor: one run of elements */
        nf4_decode_run(d, packed, (row0 + nb) * K, (int64_t)rows * K, panel, vec);
        panel_matmul(&tk, panel, rows, K, xp, T, nb, &o);
    }
}

/* The two FP8 kernels share one loop. W8A8 (qdq 0): fp8 x fp8 products accumulated in fp32,
 * both scales in the epilogue. QDQ (qdq 1): the weights and activations as an fp32 model sees
 * them after compressed-tensors' quantize-dequantize, fp32(q * s), and no epilogue scale.
 * Multiplying by the 1.0f stand-in of the unused weight scale is exact. */
static void fp8_matmul_rows(const uint8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                            int64_t T, const float *xp, const float *sx, const float *bias,
                            float *y, int64_t ldy, int accumulate, float *panel, int qdq) {
    float table[256];
    for (int i = 0; i < 256; i++)
        table[i] = clef_fp8e4m3_to_f32((uint8_t)i);
    const tile_kernel tk = tile_for(cpu_isa_active());
    const qmm_out o = {.y = y, .ldy = ldy, .bias = bias, .accumulate = accumulate,
                       .sx = qdq ? NULL : sx, .sw = qdq ? NULL : sw};
    for (int64_t nb = n0; nb < n1; nb += QMM_PANEL_ROWS) {
        const int rows = n1 - nb < QMM_PANEL_ROWS ? (int)(n1 - nb) : QMM_PANEL_ROWS;
        for (int j = 0; j < rows; j++) {
            const uint8_t *q = qw + (nb + j) * K;
            const float s = qdq ? sw[nb + j] : 1.0f;
            float *dst = panel + (size_t)j * (size_t)K;
            for (int64_t k = 0; k < K; k++)
                dst[k] = table[q[k]] * s;
        }
        panel_matmul(&tk, panel, rows, K, xp, T, nb, &o);
    }
}

void clef_fp8_matmul_rows(const uint8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                          int64_t T, const float *xp, const float *sx, const float *bias,
                          float *y, int64_t ldy, int accumulate, float *panel) {
    fp8_matmul_rows(qw, sw, K, n0, n1, T, xp, sx, bias, y, ldy, accumulate, panel, 0);
}

void clef_fp8_matmul_rows_qdq(const uint8_t *qw, const float *sw, int64_t K, int64_t n0,
                              int64_t n1, int64_t T, const float *xp, const float *bias,
                              float *y, int64_t ldy, int accumulate, float *panel) {
    fp8_matmul_rows(qw, sw, K, n0, n1, T, xp, NULL, bias, y, ldy, accumulate, panel, 1);
}
