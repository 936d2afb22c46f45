/*
 * gpu_test_util.h — what the GPU tests share: the SKIPPED exit code (ctest's
 * SKIP_RETURN_CODE, so a machine without a GPU reports the test as skipped, never passed),
 * random fills, relative L2 error, and copies between the CPU reference backend's buffers
 * (host memory) and the CUDA backend's.
 */
#ifndef CLEF_TESTS_GPU_TEST_UTIL_H
#define CLEF_TESTS_GPU_TEST_UTIL_H

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/numeric.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GPU_TEST_SKIPPED 77

static uint64_t gpu_rng = 0x243f6a8885a308d3ull;

static inline double rnd_uniform(void) { /* [0, 1) */
    gpu_rng ^= gpu_rng << 13, gpu_rng ^= gpu_rng >> 7, gpu_rng ^= gpu_rng << 17;
    return (double)(gpu_rng >> 11) * (1.0 / 9007199254740992.0);
}

static inline float rnd_normal(void) {
    double u1 = rnd_uniform() + 1e-12, u2 = rnd_uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static inline void fill_normal(float *x, size_t n, float std) {
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_normal() * std;
}

/* ||a - b|| / ||b|| over n floats; NaN anywhere gives +inf (never passes a bound) */
static inline double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* A device copy of n floats of host memory (NULL for NULL). */
static inline void *to_gpu(clef_backend *g, const void *host, size_t bytes) {
    if (!host)
        return NULL;
    void *d = clef_backend_alloc(g, bytes);
    if (d)
        clef_backend_write(g, d, host, bytes);
    return d;
}

#endif /* CLEF_TESTS_GPU_TEST_UTIL_H */
