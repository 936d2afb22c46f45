/*
 * cpu_attention.c — scaled dot-product attention (causal GQA for the backbone, non-causal
 * cross-attention for the head): softmax((Q K^T) * scale, masked) V with the softmax in fp32,
 * the function torch's eager path computes, in flash-attention form so that memory does not
 * grow with the square of the length (16k-token prompts):
 *
 * Work is split over (query head, block of 64 query rows). A task walks the keys it may see in
 * blocks of 256: S = Q K_blk^T (the shared GEMM), scaled and masked; per row the running max m
 * and sum l are updated online (m' = max(m, max_j s_j); O and l are rescaled by e^(m - m');
 * p_j = e^(s_j - m'); l += sum p_j, in double); O += P V_blk (the GEMM, accumulating). After
 * the last block O /= l. Scratch per thread: one [64, 256] score block and one [64, head_dim]
 * output accumulator, whatever the length.
 *
 * Rounding differs from torch's (normalise P, then P V) only in where the 1/l scaling falls;
 * the exps go through the vector exp (the same bits on every instruction set), so the result
 * is the same on every CPU and for any thread count.
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_vexp.h"

#include <math.h>
#include <omp.h>
#include <string.h>

enum { ATTN_BLOCK_Q = 64, ATTN_BLOCK_K = 256 };

/* Per-thread scratch in floats: scores, output accumulator, running max and sum (sum in double). */
static size_t thread_floats(int64_t head_dim) {
    return (size_t)ATTN_BLOCK_Q * ATTN_BLOCK_K + (size_t)ATTN_BLOCK_Q * (size_t)head_dim +
           ATTN_BLOCK_Q + 2 * ATTN_BLOCK_Q + 16; /* 16: keeps the double array aligned */
}

size_t cpu_attention_workspace_size(clef_backend *be, const clef_attention_args *a) {
    return (size_t)be->n_threads * thread_floats(a->head_dim) * sizeof(float);
}

/* Query rows [i0, i0 + rows) of query head h. */
static void attend_block(const clef_attention_args *a, int64_t h, int64_t i0, int64_t rows,
                         float *S, float *O, float *m, double *l, float *pack) {
    const int64_t d = a->head_dim, kvh = h / (a->n_q_heads / a->n_kv_heads);
    const int64_t offset = a->n_kv - a->n_q; /* causal: query i sees keys j <= i + offset */
    const int64_t n_keys = a->causal ? i0 + rows + offset : a->n_kv;
    const float *q = a->q + i0 * a->ldq + h * a->q_head_stride;
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0;
    }
    memset(O, 0, sizeof(float) * (size_t)(rows * d));
    for (int64_t j0 = 0; j0 < n_keys; j0 += ATTN_BLOCK_K) {
        const int64_t n = n_keys - j0 < ATTN_BLOCK_K ? n_keys - j0 : ATTN_BLOCK_K;
        /* S = Q K_blk^T   torch: torch.matmul(query, key_states.transpose(2, 3)) */
        cpu_gemm_b kt = {CLEF_WTYPE_F32, CPU_GEMM_B_NK,
                         a->k + j0 * a->ldk + kvh * a->k_head_stride, a->ldk};
        cpu_gemm(rows, n, d, q, a->ldq, &kt, NULL, S, ATTN_BLOCK_K, 0, pack);
        for (int64_t r = 0; r < rows; r++) {
            float *s = S + r * ATTN_BLOCK_K;
            int64_t visible = a->causal ? i0 + r + offset + 1 - j0 : n;
            visible = visible < n ? visible : n;
            if (visible <= 0) { /* the whole block lies in this row's future */
                memset(s, 0, sizeof(float) * (size_t)n);
                continue;
            }
            float mx = m[r];
            for (int64_t j = 0; j < visible; j++) {
                s[j] *= a->scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            if (mx > m[r]) { /* rescale what the earlier blocks summed */
                float alpha = cpu_exp1(m[r] - mx); /* 0 for the first block (m = -inf) */
                l[r] *= alpha;
                float *o = O + r * d;
                for (int64_t e = 0; e < d; e++)
                    o[e] *= alpha;
                m[r] = mx;
            }
            for (int64_t j = 0; j < visible; j++)
                s[j] -= mx;
            cpu_exp_n(visible, s, s);
            double sum = 0.0;
            for (int64_t j = 0; j < visible; j++)
                sum += s[j];
            l[r] += sum;
            for (int64_t j = visible; j < n; j++)
                s[j] = 0.0f;
        }
        /* O += P V_blk   torch: torch.matmul(attn_weights, value_states) */
        cpu_gemm_b v = {CLEF_WTYPE_F32, CPU_GEMM_B_KN, a->v + j0 * a->ldv + kvh * a->v_head_stride,
                        a->ldv};
        cpu_gemm(rows, d, n, S, ATTN_BLOCK_K, &v, NULL, O, d, 1, pack);
    }
    for (int64_t r = 0; r < rows; r++) {
        float inv = (float)(1.0 / l[r]);
        const float *o = O + r * d;
        float *dst = a->o + (i0 + r) * a->ldo + h * a->o_head_stride;
        for (int64_t e = 0; e < d; e++)
            dst[e] = o[e] * inv;
    }
}

void cpu_attention(clef_backend *be, const clef_attention_args *a, void *scratch) {
    const int64_t n_blocks = (a->n_q + ATTN_BLOCK_Q - 1) / ATTN_BLOCK_Q;
    const int64_t n_tasks = n_blocks * a->n_q_heads;
    const size_t per_thread = thread_floats(a->head_dim);
#pragma omp parallel num_threads(be->n_threads)
    {
        float *pack = cpu_thread_pack(be);
        float *S = (float *)scratch + (size_t)omp_get_thread_num() * per_thread;
        float *O = S + ATTN_BLOCK_Q * ATTN_BLOCK_K;
        float *m = O + ATTN_BLOCK_Q * a->head_dim;
        double *l = (double *)(((uintptr_t)(m + ATTN_BLOCK_Q) + 7) & ~(uintptr_t)7);
        /* larger blocks (later rows see more keys) first, for balance */
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < n_tasks; task++) {
            int64_t blk = n_blocks - 1 - task / a->n_q_heads;
            int64_t h = task % a->n_q_heads, i0 = blk * ATTN_BLOCK_Q;
            int64_t rows = a->n_q - i0 < ATTN_BLOCK_Q ? a->n_q - i0 : ATTN_BLOCK_Q;
            attend_block(a, h, i0, rows, S, O, m, l, pack);
        }
    }
}
