/*
 * dtype.c — the safetensors dtypes the engine knows: their spelling in headers and their
 * element sizes. One table, so adding a dtype is one line here plus one enum value.
 */
#include "release/release.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_table[CLEF_DTYPE_COUNT] = {
    [CLEF_DTYPE_BF16] = {"BF16", 2},   [CLEF_DTYPE_F16] = {"F16", 2},
    [CLEF_DTYPE_F32] = {"F32", 4},     [CLEF_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [CLEF_DTYPE_I8] = {"I8", 1},       [CLEF_DTYPE_U8] = {"U8", 1},
    [CLEF_DTYPE_I32] = {"I32", 4},     [CLEF_DTYPE_I64] = {"I64", 8},
    [CLEF_DTYPE_BOOL] = {"BOOL", 1},
};

size_t clef_dtype_size(clef_dtype t) {
    return (unsigned)t < CLEF_DTYPE_COUNT ? dtype_table[t].size : 0;
}

const char *clef_dtype_name(clef_dtype t) {
    return (unsigned)t < CLEF_DTYPE_COUNT ? dtype_table[t].name : "?";
}

int clef_dtype_parse(const char *name, clef_dtype *out) {
    for (int t = 0; t < CLEF_DTYPE_COUNT; t++)
        if (strcmp(name, dtype_table[t].name) == 0) {
            *out = (clef_dtype)t;
            return 1;
        }
    return 0;
}
