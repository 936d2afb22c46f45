/*
 * hadamard.c — the 256-wide regular Hadamard transform of ConvRot as four radix-4 butterfly
 * stages; see hadamard.h.
 *
 * One stage applies 0.5 * H4 along one base-4 digit of the index. With a = x[b], b' = x[b+s],
 * c = x[b+2s], d = x[b+3s] (H4's rows):
 *   y0 = 0.5 (a + b' + c - d)    y1 = 0.5 (a + b' - c + d)
 *   y2 = 0.5 (a - b' + c + d)    y3 = 0.5 (-a + b' + c + d)
 * Four stages give (0.5)^4 = 1/16 = 1/sqrt(256), the normalisation of H256.
 * The dense product in torch's order (clef_hadamard256_torch_f32) is vectorized over its
 * outputs, per instruction-set level of the CPU backend (backend/cpu/cpu_isa.h), same bits.
 */
#include "quant/hadamard.h"

#include "backend/cpu/cpu_isa.h"

#if CPU_HAVE_X86
#include <immintrin.h>
#endif

#define FHT_STAGE(T, x, s)                                                      \
    do {                                                                        \
        for (int base = 0; base < CLEF_CONVROT_GROUP; base += 4 * (s)) {        \
            for (int j = base; j < base + (s); j++) {                           \
                T a = (x)[j], b = (x)[j + (s)], c = (x)[j + 2 * (s)];           \
                T d = (x)[j + 3 * (s)];                                         \
                T ab = a + b, a_b = a - b, cd = c + d, c_d = c - d;             \
                (x)[j] = (T)0.5 * (ab + c_d);                                   \
                (x)[j + (s)] = (T)0.5 * (ab - c_d);                             \
                (x)[j + 2 * (s)] = (T)0.5 * (a_b + cd);                         \
                (x)[j + 3 * (s)] = (T)0.5 * (cd - a_b);                         \
            }                                                                   \
        }                                                                       \
    } while (0)

void clef_fht256_f32(float *x) {
    FHT_STAGE(float, x, 1);
    FHT_STAGE(float, x, 4);
    FHT_STAGE(float, x, 16);
    FHT_STAGE(float, x, 64);
}

void clef_fht256_groups_f32(float *x, int64_t n) {
    for (int64_t g = 0; g + CLEF_CONVROT_GROUP <= n; g += CLEF_CONVROT_GROUP)
        clef_fht256_f32(x + g);
}

/* H256[k][j] is +1/16 or -1/16: H4[a][b] is -1 exactly where a + b == 3, so the sign is the
 * parity of the base-4 digit pairs of (k, j) that sum to 3. Split by digits: H256[k][j] =
 * LOW[k & 15][j & 15] (+-1/16, the two low digit pairs) with its sign flipped where
 * HIGH[k >> 4][j >> 4] (the two high pairs) — tables built by the compiler. */
#define NEG1(a, b) ((((a) & 3) + ((b) & 3)) == 3)
#define NEG2(a, b) (NEG1(a, b) ^ NEG1((a) >> 2, (b) >> 2))
#define ROW16(E, a)                                                                          \
    {E(a, 0),  E(a, 1),  E(a, 2),  E(a, 3),  E(a, 4),  E(a, 5),  E(a, 6),  E(a, 7),             \
     E(a, 8),  E(a, 9),  E(a, 10), E(a, 11), E(a, 12), E(a, 13), E(a, 14), E(a, 15)}
#define TABLE16(E)                                                                           \
    {ROW16(E, 0),  ROW16(E, 1),  ROW16(E, 2),  ROW16(E, 3),  ROW16(E, 4),  ROW16(E, 5),          \
     ROW16(E, 6),  ROW16(E, 7),  ROW16(E, 8),  ROW16(E, 9),  ROW16(E, 10), ROW16(E, 11),         \
     ROW16(E, 12), ROW16(E, 13), ROW16(E, 14), ROW16(E, 15)}
#define LOW_ENTRY(a, b) (NEG2(a, b) ? -0.0625f : 0.0625f)
#define HIGH_ENTRY(a, b) (NEG2(a, b) ? 0x80000000u : 0u) /* the fp32 sign bit to flip */
static const float LOW[16][16] = TABLE16(LOW_ENTRY);
static const uint32_t HIGH[16][16] = TABLE16(HIGH_ENTRY);

enum { TORCH_KC = 128 }; /* torch's MKL sgemm K-block for this shape */

/* The dense product in torch's order (see hadamard.h), one output at a time. */
static void hadamard_torch_c(const float *x, float *y) {
    for (int j = 0; j < CLEF_CONVROT_GROUP; j++) {
        float sum = 0.0f;
        for (int k0 = 0; k0 < CLEF_CONVROT_GROUP; k0 += TORCH_KC) {
            float block = 0.0f;
            for (int k = k0; k < k0 + TORCH_KC; k++) {
                float h = HIGH[k >> 4][j >> 4] ? -LOW[k & 15][j & 15] : LOW[k & 15][j & 15];
                block += x[k] * h; /* exact product: +-x / 16 */
            }
            sum += block;
        }
        y[j] = sum;
    }
}

/* The same, 16 (AVX-512) or 8 (AVX2) outputs per vector: each lane is still its own sum in
 * ascending k from zero of the same exact products (x[k] LOW, its sign flipped by HIGH: -(x h)
 * = x (-h) exactly), so the vector forms give the C form's bits. */
#if CPU_HAVE_X86
CPU_TARGET_AVX512 static void hadamard_torch_avx512(const float *x, float *y) {
    __m512 sum[16], acc[16];
    for (int jb = 0; jb < 16; jb++)
        sum[jb] = _mm512_setzero_ps();
    for (int k0 = 0; k0 < CLEF_CONVROT_GROUP; k0 += TORCH_KC) {
        for (int jb = 0; jb < 16; jb++)
            acc[jb] = _mm512_setzero_ps();
        for (int k = k0; k < k0 + TORCH_KC; k++) {
            const __m512i p =
                _mm512_castps_si512(_mm512_mul_ps(_mm512_set1_ps(x[k]), _mm512_loadu_ps(LOW[k & 15])));
            const uint32_t *high = HIGH[k >> 4];
            for (int jb = 0; jb < 16; jb++)
                acc[jb] = _mm512_add_ps(
                    acc[jb], _mm512_castsi512_ps(_mm512_xor_si512(p, _mm512_set1_epi32((int)high[jb]))));
        }
        for (int jb = 0; jb < 16; jb++)
            sum[jb] = _mm512_add_ps(sum[jb], acc[jb]);
    }
    for (int jb = 0; jb < 16; jb++)
        _mm512_storeu_ps(y + 16 * jb, sum[jb]);
}

/* AVX2: four passes over k, each for 64 outputs (8 ymm sums). */
CPU_TARGET_AVX2 static void hadamard_torch_avx2(const float *x, float *y) {
    for (int pass = 0; pass < 4; pass++) {
        __m256 sum[8], acc[8];
        for (int i = 0; i < 8; i++)
            sum[i] = _mm256_setzero_ps();
        for (int k0 = 0; k0 < CLEF_CONVROT_GROUP; k0 += TORCH_KC) {
            for (int i = 0; i < 8; i++)
                acc[i] = _mm256_setzero_ps();
            for (int k = k0; k < k0 + TORCH_KC; k++) {
                const __m256 xk = _mm256_set1_ps(x[k]);
                const __m256i p[2] = {
                    _mm256_castps_si256(_mm256_mul_ps(xk, _mm256_loadu_ps(LOW[k & 15]))),
                    _mm256_castps_si256(_mm256_mul_ps(xk, _mm256_loadu_ps(LOW[k & 15] + 8)))};
                const uint32_t *high = HIGH[k >> 4] + 4 * pass;
                for (int i = 0; i < 8; i++)
                    acc[i] = _mm256_add_ps(acc[i], _mm256_castsi256_ps(_mm256_xor_si256(
                                                       p[i & 1], _mm256_set1_epi32((int)high[i >> 1]))));
            }
            for (int i = 0; i < 8; i++)
                sum[i] = _mm256_add_ps(sum[i], acc[i]);
        }
        for (int i = 0; i < 8; i++)
            _mm256_storeu_ps(y + 64 * pass + 8 * i, sum[i]);
    }
}
#endif

void clef_hadamard256_torch_f32(const float *x, float *y) {
#if CPU_HAVE_X86
    const cpu_isa isa = cpu_isa_active();
    if (isa == CPU_ISA_AVX512) {
        hadamard_torch_avx512(x, y);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        hadamard_torch_avx2(x, y);
        return;
    }
#endif
    hadamard_torch_c(x, y);
}
