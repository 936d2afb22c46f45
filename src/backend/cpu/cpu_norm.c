/*
 * cpu_norm.c — RMSNorm (plain or zero-centred 1 + w), the GDN's gated RMSNorm, and affine
 * LayerNorm, one row per token (or token-head). Reductions are accumulated in double so the
 * result is the correctly rounded fp32 of the exact statistic (torch sums fp32 in a cascade;
 * both agree to well under the parity tolerance).
 */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

static float inv_rms(const float *x, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * (double)x[i];
    float mean_sq = (float)(ss / (double)n);
    return 1.0f / sqrtf(mean_sq + eps);
}

void cpu_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                 const float *w, float eps, int add_one, float *y, int64_t ldy) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (rows * dim > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        float s = inv_rms(xr, dim, eps);
        /* torch: (x * rsqrt(var + eps)) * (1 + w): two roundings, kept in that order */
        for (int64_t i = 0; i < dim; i++) {
            float n = xr[i] * s;
            yr[i] = w ? n * (add_one ? 1.0f + w[i] : w[i]) : n;
        }
    }
}

void cpu_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                       const float *z, int64_t ldz, const float *w, float eps, float *y,
                       int64_t ldy) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (rows * dim > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        const float *zr = z + r * ldz;
        float *yr = y + r * ldy;
        float s = inv_rms(xr, dim, eps);
        /* silu(z) a block at a time with the vectorised SiLU (y may alias x or z) */
        float gate[256];
        for (int64_t i0 = 0; i0 < dim; i0 += 256) {
            int64_t len = dim - i0 < 256 ? dim - i0 : 256;
            cpu_silu_n(len, zr + i0, gate);
            for (int64_t i = 0; i < len; i++)
                yr[i0 + i] = (w[i0 + i] * (xr[i0 + i] * s)) * gate[i];
        }
    }
}

void cpu_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                   const float *w, const float *b, float eps, float *y, int64_t ldy) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (rows * dim > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        double sum = 0.0;
        for (int64_t i = 0; i < dim; i++)
            sum += xr[i];
        double mean = sum / (double)dim;
        double var = 0.0;
        for (int64_t i = 0; i < dim; i++) {
            double d = (double)xr[i] - mean;
            var += d * d;
        }
        float meanf = (float)mean;
        float s = 1.0f / sqrtf((float)(var / (double)dim) + eps);
        for (int64_t i = 0; i < dim; i++) {
            float n = (xr[i] - meanf) * s;
            if (w)
                n *= w[i];
            if (b)
                n += b[i];
            yr[i] = n;
        }
    }
}
