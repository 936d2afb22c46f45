/*
 * fuzz_st_header.c — libFuzzer target: the safetensors header parser on arbitrary bytes, read
 * as a whole file (8-byte little-endian length, JSON header, data area). Any input must give
 * CLEF_OK or a refusal status — never a crash, hang, leak or sanitizer report — and an
 * accepted header must describe tensors that tile the data area exactly.
 * Corpus: fuzz/corpus/st_header/ (small files written by Python safetensors + edge cases).
 */
#include "core/error.h"
#include "release/safetensors.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_header h;
    int rc = st_parse_bytes(data, size, "fuzz.safetensors", &h);
    if (rc == CLEF_OK) {
        /* What the parser promises: every span inside the data area, sized by shape x dtype. */
        uint64_t total = 0;
        for (size_t i = 0; i < h.n_tensors; i++) {
            const st_tensor *t = &h.tensors[i];
            CLEF_ASSERT(t->begin <= t->end && t->end <= h.data_size);
            int overflow = 0;
            uint64_t n = st_shape_elements(t->shape, t->n_dims, &overflow);
            CLEF_ASSERT(!overflow && n * clef_dtype_size(t->dtype) == t->end - t->begin);
            total += t->end - t->begin;
        }
        CLEF_ASSERT(total == h.data_size);
        CLEF_ASSERT(h.data_start + h.data_size == size);
    }
    st_header_free(&h);
    return 0;
}
