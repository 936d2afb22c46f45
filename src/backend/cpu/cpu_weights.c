/*
 * cpu_weights.c — the CPU backend's side of the weight formats: which formats its matmul and
 * get_rows run, the prepare step each weight matrix goes through once at load, and the
 * scratch a matmul needs.
 *
 * Formats: F32 and BF16 run as stored (the GEMM converts BF16 while packing). F16 is
 * prepared into F32 at load (exact: every half is a float), so every op that reads weights
 * sees F32; it costs twice the memory of the stored F16, until the GEMM packs F16 itself.
 * The quantized formats (NF4, FP8, INT8 ConvRot) run as stored, by cpu_quant_matmul.c on
 * src/quant's kernels; they are matmul-only (never embeddings).
 *
 * The prepare step is also where a pre-packed GEMM layout belongs (packing at load instead
 * of per forward): prepared_size says how much memory the prepared form needs, and
 * prepare_matrix fills it. Plain F32 / BF16 need none today (size 0).
 */
#include "backend/cpu/cpu_internal.h"

#include "core/convert.h"
#include "core/error.h"

int cpu_supports_format(clef_backend *be, clef_wtype t) {
    (void)be;
    return t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16 || t == CLEF_WTYPE_F16 ||
           t == CLEF_WTYPE_NF4 || t == CLEF_WTYPE_FP8_E4M3 || t == CLEF_WTYPE_INT8_CONVROT;
}

size_t cpu_prepared_size(clef_backend *be, const clef_matrix *w) {
    (void)be;
    if (w->type == CLEF_WTYPE_F16)
        return sizeof(float) * (size_t)w->rows * (size_t)w->cols;
    return 0;
}

int cpu_prepare_matrix(clef_backend *be, const clef_matrix *w, void *dst, clef_matrix *out) {
    if (w->type != CLEF_WTYPE_F16)
        return clef_fail(CLEF_ERR_INTERNAL, "cpu backend: nothing to prepare for a %s matrix",
                         clef_wtype_name(w->type));
    float *f = dst;
    const uint16_t *h = w->data;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t r = 0; r < w->rows; r++)
        clef_convert_to_f32(CLEF_SCALAR_F16, h + r * w->ld, (size_t)w->cols, f + r * w->cols);
    *out = *w;
    out->type = CLEF_WTYPE_F32;
    out->ld = w->cols;
    out->data = dst;
    out->packed = NULL;
    return CLEF_OK;
}

size_t cpu_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    (void)T, (void)w;
    return (size_t)be->n_threads * CPU_PACK_BYTES;
}
