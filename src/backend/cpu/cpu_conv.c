/*
 * cpu_conv.c — the GDN's causal depthwise conv1d followed by SiLU (torch: F.conv1d with
 * groups = C and K - 1 zeros of left padding, truncated to T, then silu). Rows before the
 * first come from `prev` (a carried conv state) or are zero.
 */
#include "backend/cpu/cpu_internal.h"

void cpu_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x,
                            int64_t ldx, const float *w, const float *prev, float *y,
                            int64_t ldy) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float *yt = y + t * ldy;
        for (int64_t c = 0; c < C; c++)
            yt[c] = 0.0f;
        for (int64_t i = 0; i < K; i++) {
            int64_t src = t - K + 1 + i; /* input row feeding tap i */
            const float *xs;
            if (src >= 0)
                xs = x + src * ldx;
            else if (prev)
                xs = prev + (K - 1 + src) * C;
            else
                continue;
            for (int64_t c = 0; c < C; c++)
                yt[c] += w[c * K + i] * xs[c];
        }
        cpu_silu_n(C, yt, yt);
    }
}
