/*
 * convert.c — stored scalars to fp32 arrays (see convert.h), over the scalar conversions of
 * numeric.h.
 */
#include "core/convert.h"

#include "core/numeric.h"

#include <string.h>

size_t clef_scalar_size(clef_scalar_kind kind) {
    switch (kind) {
    case CLEF_SCALAR_F32: return 4;
    case CLEF_SCALAR_BF16: return 2;
    case CLEF_SCALAR_F16: return 2;
    case CLEF_SCALAR_FP8_E4M3: return 1;
    }
    return 0;
}

void clef_convert_to_f32(clef_scalar_kind kind, const void *src, size_t n, float *dst) {
    const unsigned char *b = src;
    uint16_t h;
    switch (kind) {
    case CLEF_SCALAR_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case CLEF_SCALAR_BF16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, b + 2 * i, 2);
            dst[i] = clef_bf16_to_f32(h);
        }
        return;
    case CLEF_SCALAR_F16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, b + 2 * i, 2);
            dst[i] = clef_f16_to_f32(h);
        }
        return;
    case CLEF_SCALAR_FP8_E4M3:
        for (size_t i = 0; i < n; i++)
            dst[i] = clef_fp8e4m3_to_f32(b[i]);
        return;
    }
}
