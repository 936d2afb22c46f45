/*
 * hadamard.c — the 256-wide regular Hadamard transform of ConvRot as four radix-4 butterfly
 * stages; see hadamard.h.
 *
 * One stage applies 0.5 * H4 along one base-4 digit of the index. With a = x[b], b' = x[b+s],
 * c = x[b+2s], d = x[b+3s] (H4's rows):
 *   y0 = 0.5 (a + b' + c - d)    y1 = 0.5 (a + b' - c + d)
 *   y2 = 0.5 (a - b' + c + d)    y3 = 0.5 (-a + b' + c + d)
 * Four stages give (0.5)^4 = 1/16 = 1/sqrt(256), the normalisation of H256.
 * The dense product in torch's order (clef_hadamard256_torch_f32): one output at a time in C,
 * and vector forms per instruction-set level of the CPU backend (backend/cpu/cpu_isa.h) that
 * share partial sums between outputs, same bits.
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

/* The vector forms: 16 (AVX-512) or 8 (AVX2) outputs jl of one 16-column group per vector,
 * with the C form's bits, in 3/8 of its additions. Write k = 16 kh + kl and
 * j = 16 jh + jl, kh = 4 a + b and jh = 4 c + d (base-4 digits). H256[k][j] is LOW[kl][jl]
 * with its sign flipped where NEG1(b, d) ^ NEG1(a, c). Within the first K-block (a = 0, 1) and
 * within the second (a = 2, 3), for fixed a, the flip NEG1(a, c) is the same for every k: over
 * those 64 k the sum of output (c, d) is the sum Q_d with signs NEG1(b, d) only, negated
 * where NEG1(a, c). Exactly, in fp32: negating every term of a sum in order from +0 negates
 * each partial sum except a zero one, which stays +0 — so the value is neg0(Q) = 0 - Q, never
 * -Q (sums from +0 never reach -0, 0 - v maps them to themselves, and neg0(neg0(v)) = v).
 * So per block: 4 sums Q_d over its first 64 k; then for its second 64 k, 8 sums
 * R_{g,d} = neg0^g(Q_d) continued with the same signs NEG1(b, d), g = NEG1(a0, c) ^ NEG1(a1, c)
 * telling which outputs carry neg0; output (c, d) of the block is neg0^NEG1(a1, c)(R_{g,d}).
 * Last, as the C form, the two block sums added. Each partial sum of each output is the C
 * form's (same terms x[k] * LOW[kl][jl], exact, sign flips exact, same order from +0) or its
 * neg0, so every output has the C form's bits (NaN sign and payload aside, from non-finite
 * inputs). Additions per 256 outputs: 2 x (4 + 8) x 64 x 16 instead of 256 x 256. */
#if CPU_HAVE_X86
/* x[k] * LOW[kl], the 16 outputs jl of a 16-group */
#define AVX512_TERM(x, kl) _mm512_mul_ps(_mm512_set1_ps(x), _mm512_loadu_ps(LOW[kl]))
/* acc (+ or -)= t by the sign NEG1(b, d) (b, d compile-time constants once unrolled) */
#define ADD_SIGNED512(acc, t, neg) ((neg) ? _mm512_sub_ps(acc, t) : _mm512_add_ps(acc, t))

CPU_TARGET_AVX512 static void hadamard_torch_avx512(const float *x, float *y) {
    const __m512 zero = _mm512_setzero_ps();
    __m512 q[2][4], r[2][2][4]; /* [block][d], [block][g][d] */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        q[i >> 2][i & 3] = zero;
    /* first 64 k of both blocks (k = 128 B + 16 b + kl), the blocks interleaved: 8 chains */
#pragma GCC unroll 4
    for (int b = 0; b < 4; b++) {
#pragma GCC unroll 1
        for (int kl = 0; kl < 16; kl++) {
            const __m512 t0 = AVX512_TERM(x[16 * b + kl], kl);
            const __m512 t1 = AVX512_TERM(x[128 + 16 * b + kl], kl);
#pragma GCC unroll 4
            for (int d = 0; d < 4; d++) {
                q[0][d] = ADD_SIGNED512(q[0][d], t0, b + d == 3);
                q[1][d] = ADD_SIGNED512(q[1][d], t1, b + d == 3);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        r[i >> 2][0][i & 3] = q[i >> 2][i & 3];
        r[i >> 2][1][i & 3] = _mm512_sub_ps(zero, q[i >> 2][i & 3]);
    }
    /* last 64 k of both blocks (k = 128 B + 64 + 16 b + kl): 16 chains */
#pragma GCC unroll 4
    for (int b = 0; b < 4; b++) {
#pragma GCC unroll 1
        for (int kl = 0; kl < 16; kl++) {
            const __m512 t0 = AVX512_TERM(x[64 + 16 * b + kl], kl);
            const __m512 t1 = AVX512_TERM(x[192 + 16 * b + kl], kl);
#pragma GCC unroll 4
            for (int d = 0; d < 4; d++) {
                r[0][0][d] = ADD_SIGNED512(r[0][0][d], t0, b + d == 3);
                r[0][1][d] = ADD_SIGNED512(r[0][1][d], t0, b + d == 3);
                r[1][0][d] = ADD_SIGNED512(r[1][0][d], t1, b + d == 3);
                r[1][1][d] = ADD_SIGNED512(r[1][1][d], t1, b + d == 3);
            }
        }
    }
    /* output group jh = 4 c + d: block B's sum is neg0^NEG1(2B + 1, c)(R_{g,d}),
     * g = NEG1(2B, c) ^ NEG1(2B + 1, c); then the C form's sum0 + sum1 */
#pragma GCC unroll 16
    for (int jh = 0; jh < 16; jh++) {
        const int c = jh >> 2, d = jh & 3;
        __m512 s[2];
#pragma GCC unroll 2
        for (int B = 0; B < 2; B++) {
            const int g = (2 * B + c == 3) ^ (2 * B + 1 + c == 3);
            s[B] = r[B][g][d];
            if (2 * B + 1 + c == 3)
                s[B] = _mm512_sub_ps(zero, s[B]);
        }
        _mm512_storeu_ps(y + 16 * jh, _mm512_add_ps(s[0], s[1]));
    }
}

/* AVX2: the same per half of the 16 outputs jl (8 lanes), one block at a time (the first
 * block's 8 sums wait in memory for the second's). */
#define AVX2_TERM(x, kl, h) _mm256_mul_ps(_mm256_set1_ps(x), _mm256_loadu_ps(LOW[kl] + 8 * (h)))
#define ADD_SIGNED256(acc, t, neg) ((neg) ? _mm256_sub_ps(acc, t) : _mm256_add_ps(acc, t))

CPU_TARGET_AVX2 static void hadamard_torch_avx2(const float *x, float *y) {
    const __m256 zero = _mm256_setzero_ps();
    for (int h = 0; h < 2; h++) {
        __m256 sums[2][2][4]; /* [block][g][d] */
        for (int B = 0; B < 2; B++) {
            const float *xb = x + 128 * B;
            __m256 q[4] = {zero, zero, zero, zero}, r[2][4];
#pragma GCC unroll 4
            for (int b = 0; b < 4; b++)
#pragma GCC unroll 1
                for (int kl = 0; kl < 16; kl++) {
                    const __m256 t = AVX2_TERM(xb[16 * b + kl], kl, h);
#pragma GCC unroll 4
                    for (int d = 0; d < 4; d++)
                        q[d] = ADD_SIGNED256(q[d], t, b + d == 3);
                }
#pragma GCC unroll 4
            for (int d = 0; d < 4; d++) {
                r[0][d] = q[d];
                r[1][d] = _mm256_sub_ps(zero, q[d]);
            }
#pragma GCC unroll 4
            for (int b = 0; b < 4; b++)
#pragma GCC unroll 1
                for (int kl = 0; kl < 16; kl++) {
                    const __m256 t = AVX2_TERM(xb[64 + 16 * b + kl], kl, h);
#pragma GCC unroll 4
                    for (int d = 0; d < 4; d++) {
                        r[0][d] = ADD_SIGNED256(r[0][d], t, b + d == 3);
                        r[1][d] = ADD_SIGNED256(r[1][d], t, b + d == 3);
                    }
                }
#pragma GCC unroll 4
            for (int d = 0; d < 4; d++)
                sums[B][0][d] = r[0][d], sums[B][1][d] = r[1][d];
        }
#pragma GCC unroll 16
        for (int jh = 0; jh < 16; jh++) {
            const int c = jh >> 2, d = jh & 3;
            __m256 s[2];
#pragma GCC unroll 2
            for (int B = 0; B < 2; B++) {
                const int g = (2 * B + c == 3) ^ (2 * B + 1 + c == 3);
                s[B] = sums[B][g][d];
                if (2 * B + 1 + c == 3)
                    s[B] = _mm256_sub_ps(zero, s[B]);
            }
            _mm256_storeu_ps(y + 16 * jh + 8 * h, _mm256_add_ps(s[0], s[1]));
        }
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
