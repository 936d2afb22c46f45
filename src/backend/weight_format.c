/*
 * weight_format.c — the table of weight-format traits and the slicing of typed matrices (see
 * weight_format.h). Adding a format is one row of the table plus its descriptor member.
 */
#include "backend/weight_format.h"

#include "core/error.h"

static const clef_wtype_traits traits[CLEF_WTYPE_COUNT] = {
    [CLEF_WTYPE_F32] = {.name = "F32", .block_size = 1, .block_bytes = 4, .is_quantized = 0},
    [CLEF_WTYPE_BF16] = {.name = "BF16", .block_size = 1, .block_bytes = 2, .is_quantized = 0},
    [CLEF_WTYPE_F16] = {.name = "F16", .block_size = 1, .block_bytes = 2, .is_quantized = 0},
    /* 64 elements in 32 bytes of nibbles; absmax and tables live in clef_quant_nf4 */
    [CLEF_WTYPE_NF4] = {.name = "NF4", .block_size = 64, .block_bytes = 32, .is_quantized = 1},
    [CLEF_WTYPE_FP8_E4M3] = {.name = "FP8_E4M3", .block_size = 1, .block_bytes = 1, .is_quantized = 1},
    [CLEF_WTYPE_INT8_CONVROT] = {.name = "INT8_CONVROT", .block_size = 1, .block_bytes = 1,
                                 .is_quantized = 1},
};

const clef_wtype_traits *clef_wtype_get_traits(clef_wtype t) {
    if ((int)t < 0 || t >= CLEF_WTYPE_COUNT)
        return NULL;
    return &traits[t];
}

const char *clef_wtype_name(clef_wtype t) {
    const clef_wtype_traits *tr = clef_wtype_get_traits(t);
    return tr ? tr->name : "?";
}

size_t clef_wtype_size(clef_wtype t) {
    const clef_wtype_traits *tr = clef_wtype_get_traits(t);
    return tr && tr->block_size == 1 ? tr->block_bytes : 0;
}

size_t clef_wtype_row_bytes(clef_wtype t, int64_t n) {
    const clef_wtype_traits *tr = clef_wtype_get_traits(t);
    if (!tr || n < 0 || n % tr->block_size != 0)
        return 0;
    return (size_t)(n / tr->block_size) * tr->block_bytes;
}

clef_matrix clef_matrix_slice_rows(const clef_matrix *m, int64_t r0, int64_t n) {
    /* a prepared matrix's data may be its backend's layout (CPU panels), not rows: slice
     * the stored form and prepare each slice (weight_loader.h) */
    CLEF_ASSERT(m && !m->packed && r0 >= 0 && n > 0 && r0 + n <= m->rows);
    size_t row_bytes = clef_wtype_row_bytes(m->type, m->ld);
    CLEF_ASSERT(row_bytes > 0); /* ld is a whole number of blocks */
    clef_matrix s = *m;
    s.rows = n;
    s.data = (const char *)m->data + row_bytes * (size_t)r0;
    s.quant_row0 = m->quant_row0 + r0;
    s.packed = NULL;
    return s;
}

size_t clef_matrix_bytes(const clef_matrix *m) {
    return clef_wtype_row_bytes(m->type, m->ld) * (size_t)m->rows;
}
