/*
 * values.h — checks on the values of the few small tensors whose contents a release must get
 * right before anything runs: quantization scales (finite and > 0), the NF4 code table and
 * the NF4 quant_state JSON. The caller reads the tensor's bytes; these functions judge them.
 */
#ifndef CLEF_RELEASE_VALUES_H
#define CLEF_RELEASE_VALUES_H

#include "release/expected.h"
#include "release/release.h"

/* Judge data (t->n_bytes bytes of tensor t, from file) against e->check. Failures:
 * CLEF_ERR_SCALE_INVALID (a scale), CLEF_ERR_QUANT_CONFIG (NF4 table or state). */
int clef_check_tensor_values(const clef_tensor_info *t, const void *data,
                             const clef_expected_tensor *e, const char *file);

/* Non-finite values among n elements of dtype at data: NaN and Inf of BF16, F16, F32, and the
 * NaN codes of F8_E4M3 (0x7F, 0xFF); integer dtypes have none. Returns how many; when there
 * is one, *first is the index of the first and *first_nan says whether it is a NaN (else
 * +-Inf). Used on every weight at load and by `clef inspect --verify`. */
uint64_t clef_count_nonfinite(clef_dtype dtype, const void *data, uint64_t n, uint64_t *first,
                              int *first_nan);

/* CLEF_OK, or CLEF_ERR_TENSOR_VALUES naming the weight (stored name, file), the first bad
 * element, for the n_bytes of tensor t at data (offset_elems: index of data[0]
 * within the tensor, when t is checked in pieces). */
int clef_check_weight_finite(const clef_tensor_info *t, const char *file, const void *data,
                             uint64_t n_bytes, uint64_t offset_elems);

#endif /* CLEF_RELEASE_VALUES_H */
