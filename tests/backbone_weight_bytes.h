/*
 * backbone_weight_bytes.h — the backend bytes a release's backbone weights take once loaded
 * (qwen35_load_release, then qwen35_weight_bytes), for the tests that compare a quantized
 * release's resident size with the BF16 one's: tests/quant/test_quant_backbone.c (CPU) and
 * tests/cuda/test_cuda_quant_model.c (GPU).
 */
#ifndef CLEF_TESTS_BACKBONE_WEIGHT_BYTES_H
#define CLEF_TESTS_BACKBONE_WEIGHT_BYTES_H

#include "clef.h"
#include "model/qwen35.h"

#include <stddef.h>

/* backend bytes of the backbone weights of the release in dir on be (0 on failure) */
static inline size_t weight_bytes_of(clef_backend *be, const char *dir) {
    clef_release *rel = NULL;
    qwen35_model *m = NULL;
    size_t bytes = 0;
    if (clef_release_open(dir, NULL, &rel) == CLEF_OK && qwen35_load_release(rel, be, &m) == CLEF_OK)
        bytes = qwen35_weight_bytes(m);
    qwen35_free(m);
    clef_release_free(rel);
    return bytes;
}

#endif /* CLEF_TESTS_BACKBONE_WEIGHT_BYTES_H */
