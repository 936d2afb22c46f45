/*
 * cuda_attention.cu — scaled dot-product attention, flash style: a block takes ATT_BQ queries
 * of one head and streams the keys and values through shared memory ATT_BK at a time with
 * the online softmax (running max m, running sum l, output rescaled by exp(m_old - m_new)),
 * so no T x T matrix exists. fp32 arithmetic on the CUDA cores; GQA by indexing (query head
 * h reads kv head h / group); any head layout through the strides; causal with the query
 * offset of backend.h (query i sees keys j <= i + n_kv - n_q).
 *
 * Which kernel runs (cuda_attention below): head_dim 64, 128 or 256 (the backbone's), the
 * mma.sync flash kernel of cuda_flash.cu, packed sequences in one launch; head_dim 65..80 (the
 * vision tower's 72, zero-padded to 80), the WMMA flash kernel of cuda_flash_wmma.cu, or where
 * this device's WMMA layout is not the one it assumes the shared-memory tensor-core kernel of
 * this file (all bf16 inputs, fp32 accumulation); any other head dim, and whenever
 * clef_backend_cuda_set_attention_fp32() asks for it, the fp32 kernel of this file (CUDA
 * cores, fp32 throughout).
 *
 * fp32 kernel thread layout: 256 threads = 32 query rows x 8; a thread scores 4 keys of its
 * row and owns head dims tk, tk+8, ... of the row's output. Rows of 8 lanes reduce max/sum
 * by shuffles.
 */
#include "backend/cuda/cuda_flash_wmma.cuh"
#include "backend/cuda/cuda_internal.cuh"

#define ATT_BQ 32
#define ATT_BK 32
#define ATT_THREADS 256

template <int HD>
__global__ void __launch_bounds__(ATT_THREADS) k_attention(clef_attention_args a) {
    extern __shared__ float smem[];
    const int HP = HD + 1; /* padded rows: lanes with different keys hit different banks */
    float *Qs = smem, *Ks = Qs + ATT_BQ * HP, *Vs = Ks + ATT_BK * HP, *Ps = Vs + ATT_BK * HP;
    const int64_t hd = a.head_dim;
    const int64_t h = blockIdx.y, kvh = h / (a.n_q_heads / a.n_kv_heads);
    const int64_t n_tiles = (a.n_q + ATT_BQ - 1) / ATT_BQ;
    const int64_t q0 = (n_tiles - 1 - (int64_t)blockIdx.x) * ATT_BQ; /* longest causal tiles first */
    const int tid = threadIdx.x, tq = tid >> 3, tk = tid & 7;
    const int64_t offset = a.n_kv - a.n_q;

    for (int idx = tid; idx < ATT_BQ * HD; idx += ATT_THREADS) {
        int r = idx / HD, d = idx - r * HD;
        int64_t qi = q0 + r;
        Qs[r * HP + d] = (qi < a.n_q && d < hd) ? a.q[qi * a.ldq + h * a.q_head_stride + d] * a.scale : 0.0f;
    }
    float acc[HD / 8];
#pragma unroll
    for (int i = 0; i < HD / 8; i++)
        acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int64_t my_q = q0 + tq;
    int64_t k_end = a.n_kv;
    if (a.causal) {
        int64_t last = q0 + ATT_BQ - 1 + offset; /* the last key any row of this tile sees */
        if (last + 1 < k_end)
            k_end = last + 1;
    }
    for (int64_t k0 = 0; k0 < k_end; k0 += ATT_BK) {
        __syncthreads(); /* previous tile's Ks/Vs/Ps are no longer read */
        for (int idx = tid; idx < ATT_BK * HD; idx += ATT_THREADS) {
            int r = idx / HD, d = idx - r * HD;
            int64_t kj = k0 + r;
            bool ok = kj < a.n_kv && d < hd;
            Ks[r * HP + d] = ok ? a.k[kj * a.ldk + kvh * a.k_head_stride + d] : 0.0f;
            Vs[r * HP + d] = ok ? a.v[kj * a.ldv + kvh * a.v_head_stride + d] : 0.0f;
        }
        __syncthreads();
        float s[ATT_BK / 8];
#pragma unroll
        for (int kk = 0; kk < ATT_BK / 8; kk++)
            s[kk] = 0.0f;
        for (int d = 0; d < HD; d++) {
            float qv = Qs[tq * HP + d];
#pragma unroll
            for (int kk = 0; kk < ATT_BK / 8; kk++)
                s[kk] += qv * Ks[(tk + 8 * kk) * HP + d];
        }
        float rmax = -INFINITY;
#pragma unroll
        for (int kk = 0; kk < ATT_BK / 8; kk++) {
            int64_t kj = k0 + tk + 8 * kk;
            if (kj >= a.n_kv || (a.causal && kj > my_q + offset))
                s[kk] = -INFINITY;
            rmax = fmaxf(rmax, s[kk]);
        }
        for (int o = 4; o > 0; o >>= 1)
            rmax = fmaxf(rmax, __shfl_xor_sync(0xffffffffu, rmax, o));
        const float m_new = fmaxf(m, rmax);
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
        float rsum = 0.0f;
#pragma unroll
        for (int kk = 0; kk < ATT_BK / 8; kk++) {
            float p = m_new == -INFINITY ? 0.0f : expf(s[kk] - m_new);
            Ps[tq * (ATT_BK + 1) + tk + 8 * kk] = p;
            rsum += p;
        }
        for (int o = 4; o > 0; o >>= 1)
            rsum += __shfl_xor_sync(0xffffffffu, rsum, o);
        l = l * alpha + rsum;
        m = m_new;
#pragma unroll
        for (int i = 0; i < HD / 8; i++)
            acc[i] *= alpha;
        __syncthreads();
        for (int kj = 0; kj < ATT_BK; kj++) {
            float p = Ps[tq * (ATT_BK + 1) + kj];
#pragma unroll
            for (int i = 0; i < HD / 8; i++)
                acc[i] += p * Vs[kj * HP + tk + 8 * i];
        }
    }
    if (my_q < a.n_q) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *o = a.o + my_q * a.ldo + h * a.o_head_stride;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) {
            int d = tk + 8 * i;
            if (d < hd)
                o[d] = acc[i] * inv;
        }
    }
}

template <int HD>
static void launch(clef_backend *be, const clef_attention_args *a) {
    cuda_context *ctx = cuda_ctx(be);
    size_t smem = sizeof(float) * (size_t)(ATT_BQ * (HD + 1) + 2 * ATT_BK * (HD + 1) + ATT_BQ * (ATT_BK + 1));
    cuda_record(be, cudaFuncSetAttribute(k_attention<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                "attention shared memory");
    dim3 grid((unsigned)((a->n_q + ATT_BQ - 1) / ATT_BQ), (unsigned)a->n_q_heads);
    k_attention<HD><<<grid, ATT_THREADS, smem, ctx->stream>>>(*a);
    CUDA_CHECK_LAUNCH(be, "attention kernel");
}

/* ---- tensor-core variant ------------------------------------------------------------------
 * Same online-softmax algorithm with the two products on the tensor cores (WMMA, bf16 inputs,
 * fp32 accumulation): a block takes 64 queries (4 warps x 16 rows) of one head, key tiles of
 * 64. Q (pre-scaled), K and V are rounded to bf16 as they enter shared memory, the
 * probabilities P are rounded to bf16 before P V; scores, the running max/sum and the output
 * accumulator stay fp32 (the output lives in shared memory so rows can be rescaled).
 * Accuracy: bf16-input bound (tests/cuda: <= 1e-2 relative vs the CPU). head_dim 64/128/256,
 * and 65..80 on the HD = 80 tiles with the dims past head_dim zero (the vision tower's 72). */

#include <mma.h>

#define TC_BQ 64
#define TC_BK 64
#define TC_WARPS 4

template <int HD>
struct tc_smem {
    static constexpr int LQ = HD + 8;      /* bf16 rows: Q, K, V */
    static constexpr int LS = TC_BK + 4;   /* fp32 score rows */
    static constexpr int LP = TC_BK + 8;   /* bf16 probability rows */
    static constexpr int LO = HD + 4;      /* fp32 output rows */
    static constexpr size_t bytes = sizeof(__nv_bfloat16) * (size_t)(3 * TC_BQ * LQ + TC_WARPS * 16 * LP) +
                                    sizeof(float) * (size_t)(TC_WARPS * 16 * LS + TC_BQ * LO);
};

template <int HD>
__global__ void __launch_bounds__(TC_WARPS * 32) k_attention_tc(clef_attention_args a) {
    using namespace nvcuda;
    typedef tc_smem<HD> L;
    extern __shared__ __align__(128) unsigned char tc_raw[];
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)tc_raw, *Ks = Qs + TC_BQ * L::LQ, *Vs = Ks + TC_BK * L::LQ;
    __nv_bfloat16 *Ps = Vs + TC_BK * L::LQ;
    float *Ss = (float *)(Ps + TC_WARPS * 16 * L::LP), *Os = Ss + TC_WARPS * 16 * L::LS;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t h = blockIdx.y, kvh = h / (a.n_q_heads / a.n_kv_heads);
    const int64_t n_tiles = (a.n_q + TC_BQ - 1) / TC_BQ;
    const int64_t q0 = (n_tiles - 1 - (int64_t)blockIdx.x) * TC_BQ; /* longest causal tiles first */
    const int64_t offset = a.n_kv - a.n_q;

    for (int idx = tid; idx < TC_BQ * HD; idx += TC_WARPS * 32) {
        int r = idx / HD, d = idx - r * HD;
        int64_t qi = q0 + r;
        float v = qi < a.n_q && d < a.head_dim ? a.q[qi * a.ldq + h * a.q_head_stride + d] * a.scale : 0.0f;
        Qs[r * L::LQ + d] = __float2bfloat16_rn(v);
        Os[r * L::LO + d] = 0.0f;
    }
    __syncthreads();
    /* softmax bookkeeping: lane handles row r = lane / 2 of its warp's 16, half the columns */
    const int r = lane >> 1, half = lane & 1;
    const int64_t my_q = q0 + warp * 16 + r;
    float m = -INFINITY, l = 0.0f;
    int64_t k_end = a.n_kv;
    if (a.causal) {
        int64_t last = q0 + TC_BQ - 1 + offset;
        if (last + 1 < k_end)
            k_end = last + 1;
    }
    float *S = Ss + warp * 16 * L::LS;
    __nv_bfloat16 *P = Ps + warp * 16 * L::LP;
    float *O = Os + warp * 16 * L::LO;
    for (int64_t k0 = 0; k0 < k_end; k0 += TC_BK) {
        __syncthreads();
        for (int idx = tid; idx < TC_BK * HD; idx += TC_WARPS * 32) {
            int rr = idx / HD, d = idx - rr * HD;
            int64_t kj = k0 + rr;
            bool ok = kj < a.n_kv && d < a.head_dim; /* zero past head_dim: adds nothing */
            Ks[rr * L::LQ + d] = __float2bfloat16_rn(ok ? a.k[kj * a.ldk + kvh * a.k_head_stride + d] : 0.0f);
            Vs[rr * L::LQ + d] = __float2bfloat16_rn(ok ? a.v[kj * a.ldv + kvh * a.v_head_stride + d] : 0.0f);
        }
        __syncthreads();
        /* S = Q K^T for this warp's 16 rows x 64 keys */
        for (int nb = 0; nb < TC_BK / 16; nb++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < HD / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, Qs + warp * 16 * L::LQ + kk * 16, L::LQ);
                wmma::load_matrix_sync(fb, Ks + nb * 16 * L::LQ + kk * 16, L::LQ);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(S + nb * 16, acc, L::LS, wmma::mem_row_major);
        }
        __syncwarp();
        /* online softmax on row r, columns half*32 .. +32 */
        float rmax = -INFINITY;
        for (int c = 0; c < 32; c++) {
            int col = half * 32 + c;
            int64_t kj = k0 + col;
            float s = S[r * L::LS + col];
            if (kj >= a.n_kv || (a.causal && kj > my_q + offset))
                s = -INFINITY;
            S[r * L::LS + col] = s;
            rmax = fmaxf(rmax, s);
        }
        rmax = fmaxf(rmax, __shfl_xor_sync(0xffffffffu, rmax, 1));
        const float m_new = fmaxf(m, rmax);
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
        float rsum = 0.0f;
        for (int c = 0; c < 32; c++) {
            int col = half * 32 + c;
            float p = m_new == -INFINITY ? 0.0f : expf(S[r * L::LS + col] - m_new);
            __nv_bfloat16 pb = __float2bfloat16_rn(p);
            P[r * L::LP + col] = pb;
            rsum += __bfloat162float(pb); /* the sum of what P V multiplies */
        }
        rsum += __shfl_xor_sync(0xffffffffu, rsum, 1);
        l = l * alpha + rsum;
        m = m_new;
        for (int c = 0; c < HD / 2; c++)
            O[r * L::LO + half * (HD / 2) + c] *= alpha;
        __syncwarp();
        /* O += P V */
        for (int db = 0; db < HD / 16; db++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, O + db * 16, L::LO, wmma::mem_row_major);
            for (int kb = 0; kb < TC_BK / 16; kb++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, P + kb * 16, L::LP);
                wmma::load_matrix_sync(fb, Vs + kb * 16 * L::LQ + db * 16, L::LQ);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(O + db * 16, acc, L::LO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (my_q < a.n_q) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *o = a.o + my_q * a.ldo + h * a.o_head_stride;
        for (int c = 0; c < HD / 2; c++) {
            int d = half * (HD / 2) + c;
            if (d < a.head_dim)
                o[d] = O[r * L::LO + d] * inv;
        }
    }
}

template <int HD>
static void launch_tc(clef_backend *be, const clef_attention_args *a) {
    cuda_context *ctx = cuda_ctx(be);
    size_t smem = tc_smem<HD>::bytes;
    cuda_record(be, cudaFuncSetAttribute(k_attention_tc<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                "attention shared memory");
    dim3 grid((unsigned)((a->n_q + TC_BQ - 1) / TC_BQ), (unsigned)a->n_q_heads);
    k_attention_tc<HD><<<grid, TC_WARPS * 32, smem, ctx->stream>>>(*a);
    CUDA_CHECK_LAUNCH(be, "tensor-core attention kernel");
}

static void attention_one(clef_backend *be, const clef_attention_args *args, void *scratch);

/* The mma.sync flash kernel (cuda_flash.cu: head_dim 64/128/256) takes packed sequences in one
 * launch; the other kernels run packed sequences (self-attention, n_q == n_kv) one launch per
 * sequence on the stream. */
void cuda_attention(clef_backend *be, const clef_attention_args *args, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return;
    if (!ctx->attention_fp32 && cuda_flash_attention(be, args, scratch))
        return;
    if (!args->seqs) {
        attention_one(be, args, scratch);
        return;
    }
    const clef_seqs *sq = args->seqs;
    for (int64_t s = 0; s < sq->n_seqs; s++) {
        const int64_t r0 = sq->start[s], n = sq->start[s + 1] - r0;
        clef_attention_args a = *args;
        a.seqs = NULL;
        a.n_q = a.n_kv = n;
        a.q = args->q + r0 * args->ldq, a.k = args->k + r0 * args->ldk, a.v = args->v + r0 * args->ldv;
        a.o = args->o + r0 * args->ldo;
        attention_one(be, &a, scratch);
    }
}

static void attention_one(clef_backend *be, const clef_attention_args *args, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || args->n_q <= 0 || args->n_kv <= 0)
        return;
    const int64_t hd = args->head_dim;
    if (!ctx->attention_fp32 && ctx->flash_ok && cuda_flash_wmma_attention(be, args, scratch))
        return;
    if (!ctx->attention_fp32 && (hd == 64 || (hd > 64 && hd <= 80) || hd == 128 || hd == 256)) {
        if (hd == 64)
            launch_tc<64>(be, args);
        else if (hd <= 80) /* the vision tower's 72, padded to 80 (the fp32 kernel is ~20x slower) */
            launch_tc<80>(be, args);
        else if (hd == 128)
            launch_tc<128>(be, args);
        else
            launch_tc<256>(be, args);
        return;
    }
    if (hd <= 32)
        launch<32>(be, args);
    else if (hd <= 64)
        launch<64>(be, args);
    else if (hd <= 128)
        launch<128>(be, args);
    else if (hd <= 256)
        launch<256>(be, args);
    else
        ctx->status = clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA attention: head_dim %lld > 256", (long long)hd);
}

/* flash style, no scores in memory: the bf16 copies of K and V; of every row for the mma.sync
 * kernel (packed sequences in one launch), of the longest sequence for the WMMA one (packed
 * sequences one at a time) */
size_t cuda_attention_workspace_size(clef_backend *be, const clef_attention_args *args) {
    (void)be;
    const int64_t hd = args->head_dim;
    const int all_rows = hd == 64 || hd == 128 || hd == 256;
    const int64_t n = !all_rows && args->seqs && args->seqs->max_len < args->n_kv ? args->seqs->max_len : args->n_kv;
    return cuda_flash_workspace_size(n, args->n_kv_heads, hd);
}
