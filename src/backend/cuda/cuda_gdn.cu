/*
 * cuda_gdn.cu — the gated delta rule on the GPU: the exact token-by-token recurrence with the
 * state held in registers.
 *
 * Why this shape: the columns of S (one per value dim) evolve independently — column j only
 * needs k_t, q_t, v_t[j], g_t and beta_t — so a warp owns GDN_COLS columns of one head, each
 * lane holding rows lane, lane+32, ... of them (dk <= 256). A first, fully parallel kernel
 * L2-normalises (and scales) q and k into the scratch buffer, so a step of the recurrence is
 * a few FMAs per lane and two butterfly reductions (S~^T k, S^T q); the next token's inputs
 * are loaded while the current one computes. The recurrence is latency-bound, so columns per
 * warp are few (many warps per SM hide each other's shuffle latency). No block
 * synchronisation.
 * Both CLEF_GDN_CHUNKED and CLEF_GDN_RECURRENT run this kernel: it computes the recurrent
 * reference exactly (fp32 state), so the chunked mode's tolerance is met trivially. A
 * tensor-core chunked (WY/UT) kernel is the next step for long prompts (bench/RESULTS.md).
 */
#include "backend/cuda/cuda_internal.cuh"

#define GDN_COLS 2        /* value columns per warp */
#define GDN_WARPS 4       /* warps per block */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* qn = q / sqrt(sum q^2 + 1e-6) / sqrt(dk), kn = k / sqrt(sum k^2 + 1e-6) (without l2norm_qk:
 * qn = q / sqrt(dk), kn = k), one warp per (token, k-head); qn, kn [T, Hk*dk] contiguous. */
template <int RPL>
__global__ void k_gdn_qk(clef_gdn_args a, float *qn, float *kn) {
    const int lane = threadIdx.x & 31;
    const int64_t pair = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int64_t Hk = a.n_k_heads, dk = a.dk;
    if (pair >= a.T * Hk)
        return;
    const int64_t t = pair / Hk, kh = pair - t * Hk;
    const float *qp = a.q + t * a.ldq + kh * dk, *kp = a.k + t * a.ldk + kh * dk;
    float q[RPL], k[RPL], sq = 0.0f, sk = 0.0f;
#pragma unroll
    for (int r = 0; r < RPL; r++) {
        int64_t i = lane + 32 * r;
        q[r] = i < dk ? qp[i] : 0.0f;
        k[r] = i < dk ? kp[i] : 0.0f;
        sq += q[r] * q[r], sk += k[r] * k[r];
    }
    float iq = 1.0f, ik = 1.0f;
    if (a.l2norm_qk) {
        sq = warp_sum(sq), sk = warp_sum(sk);
        iq = 1.0f / sqrtf(sq + 1e-6f), ik = 1.0f / sqrtf(sk + 1e-6f);
    }
    const float scale = 1.0f / sqrtf((float)dk);
#pragma unroll
    for (int r = 0; r < RPL; r++) {
        int64_t i = lane + 32 * r;
        if (i < dk) {
            qn[pair * dk + i] = (q[r] * iq) * scale;
            kn[pair * dk + i] = k[r] * ik;
        }
    }
}

template <int RPL>
__global__ void __launch_bounds__(GDN_WARPS * 32) k_gdn_recurrent(clef_gdn_args a, const float *qn, const float *kn) {
    const int64_t h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t j0 = ((int64_t)blockIdx.x * GDN_WARPS + warp) * GDN_COLS;
    const int64_t dk = a.dk, dv = a.dv, Hv = a.n_v_heads, ldqk = a.n_k_heads * dk;
    if (j0 >= dv)
        return; /* whole warp: nothing below synchronises the block */
    const int64_t kh = h / (a.n_v_heads / a.n_k_heads);

    float S[GDN_COLS][RPL];
    float *state = a.state ? a.state + h * dk * dv : NULL;
#pragma unroll
    for (int c = 0; c < GDN_COLS; c++)
#pragma unroll
        for (int r = 0; r < RPL; r++) {
            int64_t i = lane + 32 * r, j = j0 + c;
            S[c][r] = (state && i < dk && j < dv) ? state[i * dv + j] : 0.0f;
        }

    /* inputs of token t, loaded one step ahead */
    float nk[RPL], nq[RPL], nv[GDN_COLS], ng = 0.0f, nb = 0.0f;
    auto load = [&](int64_t t) {
        const float *kp = kn + t * ldqk + kh * dk, *qp = qn + t * ldqk + kh * dk;
#pragma unroll
        for (int r = 0; r < RPL; r++) {
            int64_t i = lane + 32 * r;
            nk[r] = i < dk ? kp[i] : 0.0f;
            nq[r] = i < dk ? qp[i] : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++)
            nv[c] = j0 + c < dv ? a.v[t * a.ldv + h * dv + j0 + c] : 0.0f;
        ng = a.g[t * Hv + h];
        nb = a.beta[t * Hv + h];
    };
    if (a.T > 0)
        load(0);
    for (int64_t t = 0; t < a.T; t++) {
        float kr[RPL], qr[RPL], vv[GDN_COLS];
#pragma unroll
        for (int r = 0; r < RPL; r++)
            kr[r] = nk[r], qr[r] = nq[r];
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++)
            vv[c] = nv[c];
        const float eg = expf(ng), beta = nb;
        if (t + 1 < a.T)
            load(t + 1);
        /* S~ = exp(g) S; dot = S~^T k */
        float dot[GDN_COLS];
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++) {
            float p = 0.0f;
#pragma unroll
            for (int r = 0; r < RPL; r++) {
                S[c][r] *= eg;
                p += S[c][r] * kr[r];
            }
            dot[c] = p;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int c = 0; c < GDN_COLS; c++)
                dot[c] += __shfl_xor_sync(0xffffffffu, dot[c], o);
        /* S = S~ + k (beta (v - dot))^T; out = S^T q */
        float out[GDN_COLS];
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++) {
            const float u = beta * (vv[c] - dot[c]);
            float p = 0.0f;
#pragma unroll
            for (int r = 0; r < RPL; r++) {
                S[c][r] += kr[r] * u;
                p += S[c][r] * qr[r];
            }
            out[c] = p;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int c = 0; c < GDN_COLS; c++)
                out[c] += __shfl_xor_sync(0xffffffffu, out[c], o);
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++)
            if (lane == c && j0 + c < dv)
                a.o[t * a.ldo + h * dv + j0 + c] = out[c];
    }
    if (state)
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++)
#pragma unroll
            for (int r = 0; r < RPL; r++) {
                int64_t i = lane + 32 * r, j = j0 + c;
                if (i < dk && j < dv)
                    state[i * dv + j] = S[c][r];
            }
}

static void gdn_one(clef_backend *be, const clef_gdn_args *args, void *scratch);

/* Packed sequences run one after the other on the stream, each from its own state. */
void cuda_gdn(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    if (!args->seqs) {
        gdn_one(be, args, scratch);
        return;
    }
    const clef_seqs *sq = args->seqs;
    for (int64_t s = 0; s < sq->n_seqs; s++) {
        const int64_t r0 = sq->start[s];
        clef_gdn_args a = *args;
        a.seqs = NULL;
        a.T = sq->start[s + 1] - r0;
        a.q = args->q + r0 * args->ldq, a.k = args->k + r0 * args->ldk, a.v = args->v + r0 * args->ldv;
        a.g = args->g + r0 * args->n_v_heads, a.beta = args->beta + r0 * args->n_v_heads;
        a.o = args->o + r0 * args->ldo;
        a.state = args->state ? args->state + s * args->n_v_heads * args->dk * args->dv : NULL;
        gdn_one(be, &a, scratch);
    }
}

static void gdn_one(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || args->T < 0)
        return;
    if (args->dk > 256) {
        ctx->status = clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA gdn: key head dim %lld > 256", (long long)args->dk);
        return;
    }
    if (args->T == 0)
        return;
    const int cols_per_block = GDN_COLS * GDN_WARPS;
    dim3 grid((unsigned)((args->dv + cols_per_block - 1) / cols_per_block), (unsigned)args->n_v_heads);
    const unsigned qk_blocks = (unsigned)((args->T * args->n_k_heads + 3) / 4);
    float *qn = (float *)scratch, *kn = qn + args->T * args->n_k_heads * args->dk;
    const int rpl = (int)((args->dk + 31) / 32);
    switch (rpl) {
#define GDN_CASE(R)                                                                        \
    case R:                                                                                \
        k_gdn_qk<R><<<qk_blocks, 128, 0, ctx->stream>>>(*args, qn, kn);                   \
        k_gdn_recurrent<R><<<grid, GDN_WARPS * 32, 0, ctx->stream>>>(*args, qn, kn);      \
        break;
    GDN_CASE(1) GDN_CASE(2) GDN_CASE(3) GDN_CASE(4) GDN_CASE(5) GDN_CASE(6) GDN_CASE(7) GDN_CASE(8)
#undef GDN_CASE
    default: break;
    }
    CUDA_CHECK_LAUNCH(be, "gdn kernel");
}

/* normalised q and k of every token: 2 x T x Hk x dk floats */
size_t cuda_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args) {
    (void)be;
    return 2 * sizeof(float) * (size_t)(args->T * args->n_k_heads * args->dk) + 256;
}
