/*
 * cpu_matmul.c — y = x W^T for typed weights, split between threads, and the embedding
 * lookup. The split is by whole NR-column panels of W when there are enough of them, else by
 * MR-row blocks of x; either way each element is computed by the same kernel sequence, so
 * results never depend on the thread count or on the other rows of the batch.
 * Packing buffers: the caller's scratch (one per thread, cpu_matmul_workspace_size) or the
 * backend handle's own. A weight prepared at load (cpu_weights.c) carries its pre-packed
 * panels in `packed`: the GEMM then reads them instead of packing W on every call.
 */
#include "backend/cpu/cpu_internal.h"

#include "core/error.h"
#include "core/numeric.h"

#include <omp.h>
#include <string.h>

void cpu_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                const float *bias, float *y, int64_t ldy, int accumulate, void *scratch) {
    if (w->quant) { /* NF4, FP8, INT8 ConvRot: their own arithmetic (cpu_quant_matmul.c) */
        cpu_quant_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
        return;
    }
    CLEF_ASSERT(w->type == CLEF_WTYPE_F32 || w->type == CLEF_WTYPE_BF16);
    const int64_t N = w->rows, K = w->cols;
    const cpu_gemm_b B = w->packed
                             ? (cpu_gemm_b){.type = w->type, .layout = CPU_GEMM_B_PANELS,
                                            .data = w->packed, .ld = w->cols}
                             : (cpu_gemm_b){.type = w->type, .layout = CPU_GEMM_B_NK,
                                            .data = w->data, .ld = w->ld};
    const int64_t n_panels = (N + CPU_GEMM_NR - 1) / CPU_GEMM_NR;
    const int64_t m_blocks = (T + CPU_GEMM_MR - 1) / CPU_GEMM_MR;
    int nth = be->n_threads;
    const int split_n = n_panels >= 2 * nth || n_panels >= m_blocks;
    int64_t units = split_n ? n_panels : m_blocks;
    if (units < nth)
        nth = (int)units;
#pragma omp parallel num_threads(nth)
    {
        int tid = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t u0 = units * tid / n, u1 = units * (tid + 1) / n;
        float *pack = scratch ? cpu_scratch_pack(scratch, tid) : cpu_thread_pack(be);
        if (u1 > u0) {
            if (split_n) {
                int64_t n0 = u0 * CPU_GEMM_NR, n1 = u1 * CPU_GEMM_NR < N ? u1 * CPU_GEMM_NR : N;
                cpu_gemm_b Bs = cpu_gemm_b_cols(&B, n0);
                cpu_gemm(T, n1 - n0, K, x, ldx, &Bs, bias ? bias + n0 : NULL, y + n0, ldy,
                         accumulate, pack);
            } else {
                int64_t m0 = u0 * CPU_GEMM_MR, m1 = u1 * CPU_GEMM_MR < T ? u1 * CPU_GEMM_MR : T;
                cpu_gemm(m1 - m0, N, K, x + m0 * ldx, ldx, &B, bias, y + m0 * ldy, ldy,
                         accumulate, pack);
            }
        }
    }
}

void cpu_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids, float *y,
                  int64_t ldy) {
    CLEF_ASSERT(e->type == CLEF_WTYPE_F32 || e->type == CLEF_WTYPE_BF16 ||
                e->type == CLEF_WTYPE_F16); /* an embedding is kept as stored */
    const int64_t D = e->cols;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t t = 0; t < n; t++) {
        int64_t id = ids[t];
        CLEF_ASSERT(id >= 0 && id < e->rows); /* ids are validated against the vocabulary */
        float *dst = y + t * ldy;
        if (e->packed) { /* a prepared weight: its row is a column of its panels */
            cpu_gemm_panels_row(e->packed, e->type, D, id, dst);
        } else if (e->type == CLEF_WTYPE_BF16) {
            const uint16_t *src = (const uint16_t *)e->data + id * e->ld;
            for (int64_t i = 0; i < D; i++)
                dst[i] = clef_bf16_to_f32(src[i]);
        } else if (e->type == CLEF_WTYPE_F16) { /* exact: every half is a float */
            const uint16_t *src = (const uint16_t *)e->data + id * e->ld;
            for (int64_t i = 0; i < D; i++)
                dst[i] = clef_f16_to_f32(src[i]);
        } else {
            memcpy(dst, (const float *)e->data + id * e->ld, sizeof(float) * (size_t)D);
        }
    }
}
