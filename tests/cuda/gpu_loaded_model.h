/*
 * gpu_loaded_model.h — what the GPU backbone tests share: a model with one RunState on one
 * backend (the CPU reference or the CUDA one), its forward with the output copied to host, and
 * its release.
 */
#ifndef CLEF_TESTS_GPU_LOADED_MODEL_H
#define CLEF_TESTS_GPU_LOADED_MODEL_H

#include "backend/backend.h"
#include "model/qwen35.h"

/* A loaded model and one RunState on the same backend. */
typedef struct loaded {
    qwen35_model *m;
    qwen35_state *s;
    clef_backend *be;
} loaded;

static inline void loaded_free(loaded *l) {
    qwen35_state_free(l->s);
    qwen35_free(l->m);
}

/* Forward n_seqs sequences; the [seq[n_seqs], D] output copied to host. */
static inline int run(const loaded *l, int64_t n_seqs, const int64_t *seq, const int32_t *ids, float *out) {
    int st = qwen35_forward(l->m, l->s, n_seqs, seq, ids, NULL);
    if (st == CLEF_OK)
        st = clef_backend_synchronize(l->be);
    if (st != CLEF_OK)
        return st;
    return clef_backend_read(l->be, out, qwen35_state_output(l->s),
                             sizeof(float) * (size_t)(seq[n_seqs] * qwen35_hidden_size(l->m)));
}

#endif
