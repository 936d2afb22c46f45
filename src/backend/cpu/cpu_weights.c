/*
 * cpu_weights.c — the CPU backend's side of the weight formats: which formats its matmul and
 * get_rows run, the prepare step each weight matrix goes through once at load, and the
 * scratch a matmul needs.
 *
 * Formats: F32, BF16 and F16 weights are pre-packed at load into the GEMM's panel layout
 * (cpu_gemm.h, CPU_GEMM_B_PANELS): F32 and F16 as fp32 panels (F16 widened exactly: every
 * half is a float), BF16 as BF16 panels (the GEMM widens a block per call, a contiguous
 * conversion instead of a transpose). The panels REPLACE the stored form (the loader
 * releases it), so a weight is resident once, at the size of its stored type (plus zero
 * columns up to a whole panel; F16 doubles, as fp32). One panel width serves every
 * instruction-set level, so the level may change after load (cpu_isa_set_limit) and a
 * pre-packed weight gives the same bits as the stored one: packing only moves values.
 * get_rows reads the panels too (an embedding is a prepared weight like any other).
 * The quantized formats (NF4, FP8, INT8 ConvRot) run as stored, by cpu_quant_matmul.c on
 * src/quant's kernels; they are matmul-only (never embeddings).
 */
#include "backend/cpu/cpu_internal.h"

#include "core/error.h"

int cpu_supports_format(clef_backend *be, clef_wtype t) {
    (void)be;
    return t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16 || t == CLEF_WTYPE_F16 ||
           t == CLEF_WTYPE_NF4 || t == CLEF_WTYPE_FP8_E4M3 || t == CLEF_WTYPE_INT8_CONVROT;
}

/* The panel type a plain stored type packs into (F32 or BF16); COUNT for the others. */
static clef_wtype panel_type(const clef_matrix *w) {
    if (w->quant || w->packed)
        return CLEF_WTYPE_COUNT;
    switch (w->type) {
    case CLEF_WTYPE_F32:
    case CLEF_WTYPE_F16: return CLEF_WTYPE_F32;
    case CLEF_WTYPE_BF16: return CLEF_WTYPE_BF16;
    default: return CLEF_WTYPE_COUNT;
    }
}

size_t cpu_prepared_size(clef_backend *be, const clef_matrix *w) {
    (void)be;
    clef_wtype t = panel_type(w);
    return t == CLEF_WTYPE_COUNT ? 0 : cpu_gemm_panels_bytes(w->rows, w->cols, clef_wtype_size(t));
}

int cpu_prepare_matrix(clef_backend *be, const clef_matrix *w, void *dst, clef_matrix *out) {
    const clef_wtype t = panel_type(w);
    if (t == CLEF_WTYPE_COUNT)
        return clef_fail(CLEF_ERR_INTERNAL, "cpu backend: nothing to prepare for a %s matrix",
                         clef_wtype_name(w->type));
    const int64_t n_panels = (w->rows + CPU_GEMM_PANEL - 1) / CPU_GEMM_PANEL;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t p = 0; p < n_panels; p++)
        cpu_gemm_pack_panels(w->data, w->ld, w->type, w->rows, w->cols, t, p, p + 1, dst);
    *out = *w;
    out->type = t;
    out->ld = w->cols;
    out->data = dst; /* the panels: no row-major form remains (slicing it is a bug) */
    out->packed = dst;
    return CLEF_OK;
}

size_t cpu_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    if (w->quant) /* NF4, FP8, INT8 ConvRot: panels and quantized activations */
        return cpu_quant_workspace_size(be, T, w);
    return (size_t)be->n_threads * CPU_PACK_BYTES;
}
