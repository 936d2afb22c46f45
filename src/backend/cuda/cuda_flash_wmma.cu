/*
 * cuda_flash_wmma.cu — the first register-accumulator flash attention, through WMMA; it now
 * serves only head dims 65..80 (the vision tower's 72, zero-padded to 80), which the mma.sync
 * kernel of cuda_flash.cu does not take (its swizzle needs rows of a multiple of 64 dims).
 * A block takes FA_BQ = 128 queries (8 warps x 16 rows) of one head and streams keys and
 * values through shared memory FA_BK = 64 at a time. Per key tile a warp computes its 16 x 64
 * scores S = Q K^T (bf16 inputs, fp32 accumulation), the online softmax on them (running
 * max m, sum l, in fp32), rescales its 16 x head_dim output fragments in registers by
 * exp(m_old - m_new) and adds P V (P rounded to bf16). Q (pre-scaled), K and V are rounded to
 * bf16 as they enter shared memory (the op's inputs are fp32).
 *
 * Rescaling fragments in registers needs the row of each accumulator element, which WMMA
 * leaves unspecified: cuda_flash_probe() checks the layout used here (the m16n8 pairs of
 * sm_80 and later) on the device once per backend, and attention falls back to the
 * shared-memory kernel of cuda_attention.cu if it differs.
 *
 * K and V are first rounded to bf16 into the op's scratch by a small kernel (contiguous
 * [n_kv, kv heads, 80] rows, the dims past head_dim zero: they add nothing to the scores or
 * the output, which is written only up to head_dim), so that each key tile arrives as 16-byte
 * loads. Packed sequences run one launch per sequence (cuda_attention.cu).
 */
#include "backend/cuda/cuda_flash_wmma.cuh"
#include "backend/cuda/cuda_internal.cuh"

#include <mma.h>

#define FA_BQ 128
#define FA_BK 64
#define FA_WARPS 8
#define FA_THREADS (FA_WARPS * 32)
#define FA_BATCH 8

/* Row and column of element i of a 16 x 16 fp32 accumulator fragment held by `lane`. */
__device__ __forceinline__ int fa_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int fa_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 2); }

__global__ void k_flash_probe(int *ok) {
    using namespace nvcuda;
    __shared__ float m[256];
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32)
        m[i] = (float)i;
    __syncwarp();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, m, 16, wmma::mem_row_major);
    int good = acc.num_elements == 8;
    for (int i = 0; i < acc.num_elements && i < 8; i++)
        good &= acc.x[i] == (float)(fa_row(lane, i) * 16 + fa_col(lane, i));
    good = __all_sync(0xffffffffu, good);
    if (lane == 0)
        *ok = good;
}

/* 1 when the accumulator layout is the one fa_row/fa_col describe (checked on this device). */
int cuda_flash_probe(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    int *d = NULL, h = 0;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    k_flash_probe<<<1, 32, 0, ctx->stream>>>(d);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, ctx->stream) != cudaSuccess ||
        cudaStreamSynchronize(ctx->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        h = 0;
    }
    cudaFree(d);
    return h == 1;
}

/* The kernel's head dim for head_dim hd: 80 for 65..80 (zero-padded), else hd itself. */
static inline int64_t fa_padded(int64_t hd) { return hd > 64 && hd <= 80 ? 80 : hd; }

template <int HD>
struct fa_smem {
    static constexpr int LQ = HD + 8;     /* bf16 rows of Q, K, V */
    static constexpr int LS = FA_BK + 4;  /* fp32 score rows */
    static constexpr int LP = FA_BK + 8;  /* bf16 probability rows */
    static constexpr size_t bytes = sizeof(__nv_bfloat16) * (size_t)((FA_BQ + 2 * FA_BK) * LQ + FA_WARPS * 16 * LP) +
                                    sizeof(float) * (size_t)(FA_WARPS * 16 * LS + FA_WARPS * 16);
};

/* rows [r0, r0 + rows) of a head, `HD` columns, rounded to bf16 into dst (ld LQ); rows past
 * `limit` and columns past `hd` are zeros; `scale` multiplies (Q's softmax scale) */
template <int HD>
__device__ __forceinline__ void fa_load(__nv_bfloat16 *dst, const float *src, int64_t ld, int64_t r0, int rows,
                                        int64_t limit, int64_t hd, float scale) {
    constexpr int LQ = fa_smem<HD>::LQ;
    const int n = rows * HD;
    for (int base = threadIdx.x; base < n; base += FA_BATCH * FA_THREADS) {
        float v[FA_BATCH];
#pragma unroll
        for (int u = 0; u < FA_BATCH; u++) {
            const int i = base + u * FA_THREADS, r = i / HD, d = i % HD;
            v[u] = (i < n && r0 + r < limit && d < hd) ? src[(r0 + r) * ld + d] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < FA_BATCH; u++) {
            const int i = base + u * FA_THREADS, r = i / HD, d = i % HD;
            if (i < n)
                dst[r * LQ + d] = __float2bfloat16_rn(v[u] * scale);
        }
    }
}

/* kb, vb [n_kv, Hkv, hdp] bf16 = k, v rounded; columns past head_dim (up to hdp) are zeros */
__global__ void k_kv_bf16(clef_attention_args a, int64_t hdp, __nv_bfloat16 *kb, __nv_bfloat16 *vb) {
    const int64_t n = a.n_kv * a.n_kv_heads * hdp;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d = i % hdp, rh = i / hdp, hh = rh % a.n_kv_heads, t = rh / a.n_kv_heads;
        const bool in = d < a.head_dim;
        kb[i] = __float2bfloat16_rn(in ? a.k[t * a.ldk + hh * a.k_head_stride + d] : 0.0f);
        vb[i] = __float2bfloat16_rn(in ? a.v[t * a.ldv + hh * a.v_head_stride + d] : 0.0f);
    }
}

/* rows [r0, r0 + FA_BK) of kv head kvh from the bf16 copy into dst (ld LQ), 16-byte loads;
 * rows past n_kv are zeros */
template <int HD>
__device__ __forceinline__ void fa_load_kv(__nv_bfloat16 *ks, __nv_bfloat16 *vs, const __nv_bfloat16 *kb,
                                           const __nv_bfloat16 *vb, int64_t Hkv, int64_t kvh, int64_t r0, int64_t n_kv) {
    constexpr int LQ = fa_smem<HD>::LQ, V8 = HD / 8, N = FA_BK * V8, PER = (N + FA_THREADS - 1) / FA_THREADS;
    uint4 kr[PER], vr[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = threadIdx.x + u * FA_THREADS, r = i / V8, c = i % V8;
        const bool ok = i < N && r0 + r < n_kv;
        const int64_t off = ((r0 + r) * Hkv + kvh) * HD + c * 8;
        kr[u] = ok ? *(const uint4 *)(kb + off) : make_uint4(0, 0, 0, 0);
        vr[u] = ok ? *(const uint4 *)(vb + off) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = threadIdx.x + u * FA_THREADS, r = i / V8, c = i % V8;
        if (i < N) {
            *(uint4 *)(ks + r * LQ + c * 8) = kr[u];
            *(uint4 *)(vs + r * LQ + c * 8) = vr[u];
        }
    }
}

template <int HD>
__global__ void __launch_bounds__(FA_THREADS, 1) k_flash(clef_attention_args a, const __nv_bfloat16 *kb,
                                                          const __nv_bfloat16 *vb) {
    using namespace nvcuda;
    typedef fa_smem<HD> L;
    constexpr int ND = HD / 16; /* output fragments per warp */
    extern __shared__ __align__(128) unsigned char fa_raw[];
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)fa_raw, *Ks = Qs + FA_BQ * L::LQ, *Vs = Ks + FA_BK * L::LQ;
    __nv_bfloat16 *Ps = Vs + FA_BK * L::LQ;
    float *Ss = (float *)(Ps + FA_WARPS * 16 * L::LP), *Al = Ss + FA_WARPS * 16 * L::LS;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t h = blockIdx.y, kvh = h / (a.n_q_heads / a.n_kv_heads);
    const int64_t n_tiles = (a.n_q + FA_BQ - 1) / FA_BQ;
    const int64_t q0 = (n_tiles - 1 - (int64_t)blockIdx.x) * FA_BQ; /* longest causal tiles first */
    const int64_t offset = a.n_kv - a.n_q;

    fa_load<HD>(Qs, a.q + h * a.q_head_stride, a.ldq, q0, FA_BQ, a.n_q, a.head_dim, a.scale);
    float *S = Ss + warp * 16 * L::LS, *alpha_s = Al + warp * 16;
    __nv_bfloat16 *P = Ps + warp * 16 * L::LP;
    const int r = lane >> 1, half = lane & 1; /* softmax: row r of the warp's 16, half the columns */
    const int64_t my_q = q0 + warp * 16 + r;
    float m = -INFINITY, l = 0.0f;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> o[ND];
#pragma unroll
    for (int d = 0; d < ND; d++)
        wmma::fill_fragment(o[d], 0.0f);
    int64_t k_end = a.n_kv;
    if (a.causal) {
        const int64_t last = q0 + FA_BQ - 1 + offset;
        if (last + 1 < k_end)
            k_end = last + 1;
    }
    const int64_t warp_last = q0 + warp * 16 + 15 + offset; /* the last key any row of this warp sees */
    for (int64_t k0 = 0; k0 < k_end; k0 += FA_BK) {
        __syncthreads(); /* the last tile's K/V reads are done */
        fa_load_kv<HD>(Ks, Vs, kb, vb, a.n_kv_heads, kvh, k0, a.n_kv);
        __syncthreads();
        if (a.causal && k0 > warp_last)
            continue; /* every key of this tile is in the future of every row of this warp */
        /* S = Q K^T, 16 x 64 */
#pragma unroll
        for (int nb = 0; nb < FA_BK / 16; nb++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll 4
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
#pragma unroll 8
        for (int c = 0; c < 32; c++) {
            const int col = half * 32 + c;
            const int64_t kj = k0 + col;
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
#pragma unroll 8
        for (int c = 0; c < 32; c++) {
            const int col = half * 32 + c;
            const float p = m_new == -INFINITY ? 0.0f : expf(S[r * L::LS + col] - m_new);
            const __nv_bfloat16 pb = __float2bfloat16_rn(p);
            P[r * L::LP + col] = pb;
            rsum += __bfloat162float(pb); /* the sum of what P V multiplies */
        }
        rsum += __shfl_xor_sync(0xffffffffu, rsum, 1);
        l = l * alpha + rsum;
        m = m_new;
        if (half == 0)
            alpha_s[r] = alpha;
        __syncwarp();
        float al[2] = {alpha_s[lane >> 2], alpha_s[(lane >> 2) + 8]};
#pragma unroll
        for (int d = 0; d < ND; d++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                o[d].x[i] *= al[(i >> 1) & 1];
        /* O += P V */
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pf[FA_BK / 16];
#pragma unroll
        for (int kb = 0; kb < FA_BK / 16; kb++)
            wmma::load_matrix_sync(pf[kb], P + kb * 16, L::LP);
#pragma unroll
        for (int d = 0; d < ND; d++)
#pragma unroll
            for (int kb = 0; kb < FA_BK / 16; kb++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fb, Vs + kb * 16 * L::LQ + d * 16, L::LQ);
                wmma::mma_sync(o[d], pf[kb], fb, o[d]);
            }
        __syncwarp(); /* S, P and alpha_s are rewritten by the next tile */
    }
    /* o / l, rows of this lane: lane / 4 and lane / 4 + 8 */
    if (half == 0)
        alpha_s[r] = l > 0.0f ? 1.0f / l : 0.0f;
    __syncwarp();
    const float inv[2] = {alpha_s[lane >> 2], alpha_s[(lane >> 2) + 8]};
#pragma unroll
    for (int d = 0; d < ND; d++)
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int64_t qi = q0 + warp * 16 + fa_row(lane, i);
            const int col = d * 16 + fa_col(lane, i);
            if (qi < a.n_q && col < a.head_dim)
                a.o[qi * a.ldo + h * a.o_head_stride + col] = o[d].x[i] * inv[(i >> 1) & 1];
        }
}

template <int HD>
static void launch_flash(clef_backend *be, const clef_attention_args *a, __nv_bfloat16 *kb, __nv_bfloat16 *vb) {
    cuda_context *ctx = cuda_ctx(be);
    const size_t smem = fa_smem<HD>::bytes;
    cuda_record(be, cudaFuncSetAttribute(k_flash<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                "flash attention shared memory");
    dim3 grid((unsigned)((a->n_q + FA_BQ - 1) / FA_BQ), (unsigned)a->n_q_heads);
    k_flash<HD><<<grid, FA_THREADS, smem, ctx->stream>>>(*a, kb, vb);
    CUDA_CHECK_LAUNCH(be, "flash attention kernel");
}

/* bytes of scratch this kernel needs for n_kv keys: the bf16 copies of K and V */
size_t cuda_flash_wmma_workspace_size(int64_t n_kv, int64_t n_kv_heads, int64_t head_dim) {
    return 2 * sizeof(__nv_bfloat16) * (size_t)(n_kv * n_kv_heads * fa_padded(head_dim)) + 256;
}

/* 1 when this kernel ran args (one sequence; head_dim 64, 65..80, 128 or 256, and scratch of
 * cuda_flash_wmma_workspace_size bytes, 16-byte aligned) */
int cuda_flash_wmma_attention(clef_backend *be, const clef_attention_args *args, void *scratch) {
    const int64_t hd = fa_padded(args->head_dim);
    if ((hd != 64 && hd != 80 && hd != 128 && hd != 256) || !scratch || ((uintptr_t)scratch & 15))
        return 0;
    cuda_context *ctx = cuda_ctx(be);
    __nv_bfloat16 *kb = (__nv_bfloat16 *)scratch, *vb = kb + args->n_kv * args->n_kv_heads * hd;
    const int64_t n = args->n_kv * args->n_kv_heads * hd;
    const unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    k_kv_bf16<<<blocks, 256, 0, ctx->stream>>>(*args, hd, kb, vb);
    CUDA_CHECK_LAUNCH(be, "attention K/V to bf16 kernel");
    if (hd == 64)
        launch_flash<64>(be, args, kb, vb);
    else if (hd == 80)
        launch_flash<80>(be, args, kb, vb);
    else if (hd == 128)
        launch_flash<128>(be, args, kb, vb);
    else
        launch_flash<256>(be, args, kb, vb);
    return 1;
}
