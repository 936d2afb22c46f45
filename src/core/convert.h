/*
 * convert.h — the one place where stored scalars of the release formats become fp32 arrays:
 * norms, biases, scales and lm_head rows stored as F32, BF16, F16 or FP8 e4m3fn. Exact (every
 * value of these formats is a float). The element kinds are core's own so that core knows
 * nothing of safetensors; callers map their dtype to a kind (clef_scalar_kind_of_dtype in
 * release.h's terms lives with the caller).
 */
#ifndef CLEF_CORE_CONVERT_H
#define CLEF_CORE_CONVERT_H

#include <stddef.h>

typedef enum clef_scalar_kind {
    CLEF_SCALAR_F32 = 0,
    CLEF_SCALAR_BF16,
    CLEF_SCALAR_F16,
    CLEF_SCALAR_FP8_E4M3,
} clef_scalar_kind;

/* Bytes of one element of kind. */
size_t clef_scalar_size(clef_scalar_kind kind);

/* dst[i] = src[i] as fp32 for i < n; src holds n little-endian elements of kind (any
 * alignment). dst and src must not overlap. */
void clef_convert_to_f32(clef_scalar_kind kind, const void *src, size_t n, float *dst);

#endif /* CLEF_CORE_CONVERT_H */
