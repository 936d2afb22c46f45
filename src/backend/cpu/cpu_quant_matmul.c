/*
 * cpu_quant_matmul.c — the CPU backend's matmul for the quantized weight formats (NF4, FP8,
 * INT8 ConvRot), on the kernels of src/quant/quant_matmul.h, each in its format's own
 * arithmetic (docs/quant.md):
 *   NF4   weight rows decoded block by block into a per-thread panel (bit-exact bf16 values),
 *         fp32 fused multiply-adds — the weights stay 4-bit in memory;
 *   FP8   the activations quantized per token as compressed-tensors does (fp32), then its
 *         QDQ forward: fp32(q_x s_t) x fp32(q_w s_w), fp32 accumulation — what transformers +
 *         compressed-tensors compute on an fp32 model;
 *   INT8  the activations rotated and quantized per token, int32 dot products (vpdpbusd
 *         where the CPU has VNNI), float(acc) * (s_t * s_w) — comfy-kitchen's eager int8
 *         linear. The rotation is the
 *         dense product in torch's summation order (clef_hadamard256_torch_f32), not the
 *         butterfly: a rotated value one fp32 bit off can move a code by a step, which the
 *         whole-backbone test saw (9.6e-4 relative L2 with the butterfly, 1.6e-7 without).
 * Threads split the output features in whole panels, so every output is computed by the same
 * sequence whatever the thread count or the batch.
 *
 * Scratch: NF4 and FP8 one decoded weight panel per thread (clef_qmm_panel_floats) and the
 * packed activations of the call (clef_qmm_xpack_floats: T x K floats, rounded up to whole
 * token blocks); FP8 and INT8 the activation scales (T floats) and one row per thread (K
 * floats: FP8's codes of a token, INT8's rotation); INT8 the quantized activations (T x K
 * bytes) and per thread the int8 kernel's own (clef_int8_matmul_scratch_bytes: a packed panel
 * of 32 weight rows for vpdpbusd and the tokens' code sums). Each region 64-byte aligned. The caller plans it once (cpu_quant_workspace_size for its
 * largest T, the size the backend's matmul_workspace_size query answers for these formats:
 * the backbone's run state does so for its largest quantized matrix) and no call allocates.
 * A caller that plans none gets the handle's own buffer, grown when a call needs more (in
 * practice on the first call of each larger shape), never shrunk, freed with the handle.
 */
#include "backend/cpu/cpu_internal.h"

#include "core/error.h"
#include "quant/fp8.h"
#include "quant/int8_convrot.h"
#include "quant/quant_matmul.h"

#include <omp.h>
#include <stdlib.h>

static clef_nf4_desc nf4_desc_of(const clef_matrix *w) {
    const clef_quant_nf4 *q = &w->quant->u.nf4;
    /* the descriptor describes the stored tensor: count its elements from the first row of
     * this matrix on; blocks are numbered in the stored tensor (weight_format.h) */
    int64_t stored_rows = w->quant_row0 + w->rows;
    return (clef_nf4_desc){
        .n_elements = stored_rows * w->cols,
        .blocksize = q->block,
        .quant_map = q->code,
        .absmax_code = q->absmax_q,
        .nested_quant_map = q->nested_code,
        .nested_absmax = q->nested_absmax,
        .nested_blocksize = q->nested_block,
        .nested_offset = q->nested_offset,
        .absmax = q->absmax_f32,
    };
}

/* The regions of a quantized matmul's scratch for nth threads and T tokens of K inputs. */
typedef struct quant_scratch {
    float *panels; /* NF4, FP8: [nth][clef_qmm_panel_floats(K)] decoded weight panels */
    float *xp;     /* NF4, FP8: [clef_qmm_xpack_floats(T, K)] packed activations */
    float *sx;     /* FP8, INT8: [T] activation scales */
    float *rot;    /* FP8, INT8: [nth][K] a thread's row (FP8 codes, INT8 rotation) */
    int8_t *qx;    /* INT8: [T][K] quantized activations */
    char *i8;      /* INT8: [nth][clef_int8_matmul_scratch_bytes(T, K)] the kernels' own */
} quant_scratch;

static size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* Bytes of the layout for (type, nth, T, K); with base non-NULL, also the regions in base. */
static size_t quant_scratch_layout(clef_wtype type, int nth, int64_t T, int64_t K, void *base,
                                   quant_scratch *out) {
    const int panels = type == CLEF_WTYPE_NF4 || type == CLEF_WTYPE_FP8_E4M3;
    const int int8 = type == CLEF_WTYPE_INT8_CONVROT;
    const size_t sizes[6] = {
        panels ? sizeof(float) * clef_qmm_panel_floats(K) * (size_t)nth : 0,
        panels ? sizeof(float) * clef_qmm_xpack_floats(T, K) : 0,
        sizeof(float) * (size_t)T,
        sizeof(float) * (size_t)K * (size_t)nth,
        int8 ? (size_t)T * (size_t)K : 0,
        int8 ? clef_int8_matmul_scratch_bytes(T, K) * (size_t)nth : 0,
    };
    size_t off[6], total = 0;
    for (int i = 0; i < 6; i++) {
        off[i] = total;
        total += align64(sizes[i]);
    }
    if (base) {
        char *b = base;
        *out = (quant_scratch){.panels = (float *)(void *)(b + off[0]),
                               .xp = (float *)(void *)(b + off[1]),
                               .sx = (float *)(void *)(b + off[2]),
                               .rot = (float *)(void *)(b + off[3]),
                               .qx = (int8_t *)(void *)(b + off[4]),
                               .i8 = b + off[5]};
    }
    return total;
}

/* Threads a call uses: whole panels each, no more threads than panels. */
static int quant_threads(clef_backend *be, int64_t N) {
    const int64_t n_panels = (N + CLEF_QMM_NR - 1) / CLEF_QMM_NR;
    int nth = be->n_threads < n_panels ? be->n_threads : (int)n_panels;
    return nth < 1 ? 1 : nth;
}

/* The layout is monotone in T, so the bytes for T_max cover every T <= T_max. */
size_t cpu_quant_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    return quant_scratch_layout(w->type, quant_threads(be, w->rows), T, w->cols, NULL, NULL);
}

/* The handle's own scratch of at least bytes (callers that planned none). */
static void *own_scratch(clef_backend *be, size_t bytes) {
    cpu_context *ctx = cpu_ctx(be);
    if (ctx->quant_scratch_bytes < bytes) {
        free(ctx->quant_scratch);
        ctx->quant_scratch = aligned_alloc(64, align64(bytes));
        ctx->quant_scratch_bytes = ctx->quant_scratch ? align64(bytes) : 0;
    }
    CLEF_ASSERT(ctx->quant_scratch); /* out of memory in an op: no status to return here */
    return ctx->quant_scratch;
}

void cpu_quant_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx,
                      const clef_matrix *w, const float *bias, float *y, int64_t ldy,
                      int accumulate, void *scratch) {
    const int64_t N = w->rows, K = w->cols, row0 = w->quant_row0;
    CLEF_ASSERT(w->quant && w->ld == K);
    const int64_t n_panels = (N + CLEF_QMM_NR - 1) / CLEF_QMM_NR;
    const int nth = quant_threads(be, N);
    quant_scratch sc;
    const size_t bytes = quant_scratch_layout(w->type, nth, T, K, NULL, NULL);
    quant_scratch_layout(w->type, nth, T, K, scratch ? scratch : own_scratch(be, bytes), &sc);
    const size_t panel_floats = clef_qmm_panel_floats(K);
    const int64_t blocks = clef_qmm_token_blocks(T);

    /* the activations, once per call: packed (NF4), quantized and packed (FP8), rotated and
     * quantized (INT8); split between the threads by token blocks / tokens */
    if (w->type == CLEF_WTYPE_INT8_CONVROT)
        CLEF_ASSERT(w->quant->u.int8_convrot.rotation_group == 256 &&
                    !w->quant->u.int8_convrot.input_scale);
#pragma omp parallel num_threads(nth)
    {
        const int tid = omp_get_thread_num(), n = omp_get_num_threads();
        if (w->type == CLEF_WTYPE_INT8_CONVROT) {
            const int64_t t0 = T * tid / n, t1 = T * (tid + 1) / n;
            for (int64_t t = t0; t < t1; t++)
                clef_convrot_quantize_tokens(x + t * ldx, ldx, 1, K, CLEF_QUANT_ACT_F32,
                                             sc.qx + t * K, sc.sx + t, sc.rot + (size_t)tid * K);
        } else {
            const int64_t b0 = blocks * tid / n, b1 = blocks * (tid + 1) / n;
            if (w->type == CLEF_WTYPE_FP8_E4M3) /* compressed-tensors' QDQ forward */
                clef_qmm_pack_fp8(x, ldx, T, K, 1, b0, b1, sc.xp, sc.sx,
                                  (uint8_t *)(sc.rot + (size_t)tid * K));
            else
                clef_qmm_pack_f32(x, ldx, T, K, b0, b1, sc.xp);
        }
    }
    const clef_nf4_desc nf4 = w->type == CLEF_WTYPE_NF4 ? nf4_desc_of(w) : (clef_nf4_desc){0};
#pragma omp parallel num_threads(nth)
    {
        int tid = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t p0 = n_panels * tid / n, p1 = n_panels * (tid + 1) / n;
        int64_t n0 = p0 * CLEF_QMM_NR, n1 = p1 * CLEF_QMM_NR < N ? p1 * CLEF_QMM_NR : N;
        float *panel = sc.panels + panel_floats * (size_t)tid;
        if (n1 > n0) {
            switch (w->type) {
            case CLEF_WTYPE_NF4: {
                /* blocks are numbered in the stored tensor: hand the kernel its start (the
                 * slice's data moved by row0 rows of K / 2 bytes, K a multiple of 64) */
                const uint8_t *stored = (const uint8_t *)w->data - row0 * (K / 2);
                clef_nf4_matmul_rows(&nf4, stored, row0, K, n0, n1, T, sc.xp, bias, y, ldy,
                                     accumulate, panel);
                break;
            }
            case CLEF_WTYPE_FP8_E4M3:
                clef_fp8_matmul_rows_qdq(w->data, w->quant->u.fp8.weight_scale + row0, K, n0, n1,
                                         T, sc.xp, bias, y, ldy, accumulate, panel);
                break;
            case CLEF_WTYPE_INT8_CONVROT:
                clef_int8_matmul_rows_ws(w->data, w->quant->u.int8_convrot.weight_scale + row0,
                                         K, n0, n1, T, sc.qx, sc.sx, bias, y, ldy, accumulate,
                                         sc.i8 + clef_int8_matmul_scratch_bytes(T, K) * (size_t)tid);
                break;
            default:
                CLEF_ASSERT(0);
            }
        }
    }
}
