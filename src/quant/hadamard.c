/*
 * hadamard.c — the 256-wide regular Hadamard transform of ConvRot as four radix-4 butterfly
 * stages; see hadamard.h.
 *
 * One stage applies 0.5 * H4 along one base-4 digit of the index. With a = x[b], b' = x[b+s],
 * c = x[b+2s], d = x[b+3s] (H4's rows):
 *   y0 = 0.5 (a + b' + c - d)    y1 = 0.5 (a + b' - c + d)
 *   y2 = 0.5 (a - b' + c + d)    y3 = 0.5 (-a + b' + c + d)
 * Four stages give (0.5)^4 = 1/16 = 1/sqrt(256), the normalisation of H256.
 */
#include "quant/hadamard.h"

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
 * parity of the base-4 digit pairs of (k, j) that sum to 3. */
static float hadamard256_entry(int k, int j) {
    int negative = 0;
    for (int d = 0; d < 4; d++, k >>= 2, j >>= 2)
        negative ^= ((k & 3) + (j & 3)) == 3;
    return negative ? -0.0625f : 0.0625f;
}

void clef_hadamard256_torch_f32(const float *x, float *y) {
    enum { KC = 128 }; /* torch's MKL sgemm K-block for this shape */
    for (int j = 0; j < CLEF_CONVROT_GROUP; j++) {
        float sum = 0.0f;
        for (int k0 = 0; k0 < CLEF_CONVROT_GROUP; k0 += KC) {
            float block = 0.0f;
            for (int k = k0; k < k0 + KC; k++)
                block += x[k] * hadamard256_entry(k, j); /* exact product: +-x / 16 */
            sum += block;
        }
        y[j] = sum;
    }
}
