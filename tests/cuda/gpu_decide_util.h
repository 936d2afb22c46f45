/*
 * gpu_decide_util.h — what the GPU decision tests (test_cuda_decide, test_cuda_quant_decide,
 * test_cuda_vision) share for comparing a decision on "cuda" with one on "cpu": the backbone's
 * last hidden rows of a context's last forward, the most probable option of a question, and the
 * gap between its two most probable options (how near a tie the reference's decision was, so a
 * differing decision can be told apart from a broken one).
 */
#ifndef CLEF_TESTS_GPU_DECIDE_UTIL_H
#define CLEF_TESTS_GPU_DECIDE_UTIL_H

#include "clef.h"
#include "engine/engine_internal.h"
#include "model/qwen35.h"

#include <stdint.h>
#include <stdlib.h>

/* The backbone's output rows of the last forward on ctx ([T, D] floats copied to the host;
 * the caller frees them), NULL on failure. */
static inline float *last_hidden(clef_context *ctx, int64_t T) {
    int64_t D = qwen35_hidden_size(ctx->model->backbone);
    float *h = malloc((size_t)(T * D) * sizeof *h);
    if (h && (clef_backend_synchronize(ctx->be) ||
              clef_backend_read(ctx->be, h, qwen35_state_output(ctx->state), (size_t)(T * D) * sizeof *h))) {
        free(h);
        return NULL;
    }
    return h;
}

/* Index of the most probable of n options (the first of equals). */
static inline int prob_argmax(const float *p, int32_t n) {
    int best = 0;
    for (int32_t i = 1; i < n; i++)
        if (p[i] > p[best])
            best = i;
    return best;
}

/* The gap between the best and the second-best probability of n options. */
static inline double prob_margin(const float *p, int32_t n) {
    int b = prob_argmax(p, n);
    double second = -1;
    for (int32_t i = 0; i < n; i++)
        if (i != b && p[i] > second)
            second = p[i];
    return p[b] - second;
}

#endif /* CLEF_TESTS_GPU_DECIDE_UTIL_H */
