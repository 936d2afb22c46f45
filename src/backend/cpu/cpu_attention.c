/*
 * cpu_attention.c — scaled dot-product attention (causal GQA for the backbone, non-causal
 * cross-attention for the head), exactly as torch's eager path: S = (Q K^T) * scale, masked
 * softmax in fp32, O = P V. Work is split over (query head, block of 64 query rows); each
 * block computes its scores against only the keys it may see, with the shared GEMM kernel.
 * scratch: one [64, n_kv] score block per thread.
 */
#include "backend/cpu/cpu_internal.h"

#include <omp.h>

enum { ATTN_BLOCK_Q = 64 };

size_t cpu_attention_workspace_size(clef_backend *be, const clef_attention_args *a) {
    return (size_t)be->n_threads * ATTN_BLOCK_Q * (size_t)(a->n_kv > 0 ? a->n_kv : 1) * sizeof(float);
}

void cpu_attention(clef_backend *be, const clef_attention_args *a, void *scratch) {
    const int64_t n_blocks = (a->n_q + ATTN_BLOCK_Q - 1) / ATTN_BLOCK_Q;
    const int64_t group = a->n_q_heads / a->n_kv_heads;
    const int64_t offset = a->n_kv - a->n_q; /* causal: query i sees keys j <= i + offset */
    const int64_t n_tasks = n_blocks * a->n_q_heads;
#pragma omp parallel num_threads(be->n_threads)
    {
        float *pack = cpu_thread_pack(be);
        float *S = (float *)scratch + (size_t)omp_get_thread_num() * ATTN_BLOCK_Q * (size_t)a->n_kv;
        /* larger blocks (later rows see more keys) first, for balance */
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < n_tasks; task++) {
            int64_t blk = n_blocks - 1 - task / a->n_q_heads;
            int64_t h = task % a->n_q_heads, kvh = h / group;
            int64_t i0 = blk * ATTN_BLOCK_Q;
            int64_t rows = a->n_q - i0 < ATTN_BLOCK_Q ? a->n_q - i0 : ATTN_BLOCK_Q;
            int64_t n_keys = a->causal ? i0 + rows + offset : a->n_kv;
            const float *q = a->q + i0 * a->ldq + h * a->q_head_stride;
            /* S = Q K^T   torch: torch.matmul(query, key_states.transpose(2, 3)) */
            cpu_gemm_b kt = {CLEF_WTYPE_F32, CPU_GEMM_B_NK, a->k + kvh * a->k_head_stride, a->ldk};
            cpu_gemm(rows, n_keys, a->head_dim, q, a->ldq, &kt, NULL, S, a->n_kv, 0, pack);
            /* S * scale, causal mask, softmax(dim=-1, dtype=float32) */
            for (int64_t r = 0; r < rows; r++) {
                float *s = S + r * a->n_kv;
                int64_t visible = a->causal ? i0 + r + offset + 1 : n_keys;
                for (int64_t j = 0; j < visible; j++)
                    s[j] *= a->scale;
                cpu_softmax_row(s, visible);
                for (int64_t j = visible; j < n_keys; j++)
                    s[j] = 0.0f;
            }
            /* O = P V   torch: torch.matmul(attn_weights, value_states) */
            cpu_gemm_b v = {CLEF_WTYPE_F32, CPU_GEMM_B_KN, a->v + kvh * a->v_head_stride, a->ldv};
            cpu_gemm(rows, a->head_dim, n_keys, S, a->n_kv, &v, NULL,
                     a->o + i0 * a->ldo + h * a->o_head_stride, a->ldo, 0, pack);
        }
    }
}
