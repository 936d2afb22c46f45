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

#endif /* CLEF_RELEASE_VALUES_H */
