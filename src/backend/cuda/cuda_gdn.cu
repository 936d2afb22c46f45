/*
 * cuda_gdn.cu — the gated delta rule on the GPU, in two forms:
 *
 * CLEF_GDN_CHUNKED (after clef_backend_cuda_set_gdn_chunked(be, 1); key heads <= 128):
 * chunks of 64 tokens in the WY/UT form, split the way flash-linear-attention splits it so
 * that only one pass is sequential. Per chunk (rows i, j < L, gamma_i = cumulative log decay
 * from the chunk's start, q and k L2-normalised):
 *   A_ij  = beta_i exp(gamma_i - gamma_j) k_i.k_j (j < i),  Tinv = (I + A)^-1
 *   P_ij  = exp(gamma_i - gamma_j) q_i.k_j (j <= i)
 *   W     = Tinv (beta exp(gamma) K),  U = Tinv (beta V)
 *   v_new = U - W S                      (S: the state at the chunk's start)
 *   o     = exp(gamma) (Q S) + P v_new
 *   S'    = exp(gamma_last) S + (exp(gamma_last - gamma) K)^T v_new
 * Four kernels per segment of GC_SEG chunks: prep (q/k norms, decays, A, P, Tinv on the CUDA
 * cores; parallel over chunks x heads), W/U (parallel), the walk (the only sequential pass:
 * v_new and S' per chunk, the state at each chunk's start stored, the next chunk's operands
 * copied asynchronously while this one computes), the output (parallel over chunks x heads x
 * 64 columns). The products run as WMMA TF32 with the 3xTF32 split (a = hi + lo, a*b ~
 * hi*hi + hi*lo + lo*hi), which keeps fp32 accuracy: TF32 alone (10-bit mantissa) would put
 * the state's error near the 1e-3 bound at long T. Measured on an H200 (bench/RESULTS.md,
 * run13) it is exact (~2e-6 vs float64) but slower than the recurrent kernel at the 27B's
 * heads (1.78 vs 1.45 ms per layer at 2,270 tokens): each of its kernels is bound by one
 * block's latency (~50 us for a 240-block launch) and it moves ~0.7 MB of fp32 per chunk and
 * head. So CLEF_GDN_CHUNKED runs the recurrent kernel by default.
 *
 * CLEF_GDN_RECURRENT (and CHUNKED by default): the exact token-by-token recurrence with the
 * state held in registers. The columns of S (one per value dim) evolve independently — column
 * j only needs k_t, q_t, v_t[j], g_t and beta_t — so a warp owns GDN_COLS columns of one
 * head, each lane holding rows lane, lane+32, ... of them (dk <= 256). A first, fully
 * parallel kernel L2-normalises (and scales) q and k into the scratch buffer, so a step of the
 * recurrence is a few FMAs per lane and two butterfly reductions (S~^T k, S^T q). The
 * GDN_WARPS warps of a block (all of one head) share one copy of each token's q and k, copied
 * GDN_TILE tokens at a time into shared memory (cp.async, the next tile while this one runs),
 * instead of every warp loading its own copy from L2 (64 warps per head re-reading the same
 * rows, ~7 GB per 27B layer at 2,270 tokens). Measured: 1.72 -> 1.45 ms per 27B layer, 1.51
 * -> 1.04 per 9B layer; what bounds the step now is the latency of its two reductions.
 */
#include "backend/cuda/cuda_internal.cuh"

#include <cuda_pipeline.h>

#define GDN_COLS 2        /* value columns per warp */
#define GDN_WARPS 8       /* warps per block: they share one copy of each token's q and k */

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

/* Asynchronous copy of one float (cp.async, 4 bytes); the caller commits and waits. */
__device__ __forceinline__ void gdn_async4(float *dst, const float *src) { __pipeline_memcpy_async(dst, src, 4); }

/* The block's inputs for GDN_TILE tokens in shared memory: normalised q and k rows of its
 * k-head, v of its GDN_COLS * GDN_WARPS columns, g and beta. */
#define GDN_TILE 32

__host__ __device__ static inline int gdn_tile_floats(int64_t dk) {
    return GDN_TILE * (2 * (int)dk + GDN_COLS * GDN_WARPS + 2);
}

template <int RPL>
__global__ void __launch_bounds__(GDN_WARPS * 32) k_gdn_recurrent(clef_gdn_args a, const float *qn, const float *kn) {
    extern __shared__ __align__(16) float gr_smem[]; /* [2][gdn_tile_floats] */
    const int64_t h = blockIdx.y;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t jb = (int64_t)blockIdx.x * GDN_WARPS * GDN_COLS, j0 = jb + warp * GDN_COLS;
    const int64_t dk = a.dk, dv = a.dv, Hv = a.n_v_heads, ldqk = a.n_k_heads * dk, T = a.T;
    const bool active = j0 < dv; /* inactive warps still load tiles and meet every barrier */
    const int64_t kh = h / (a.n_v_heads / a.n_k_heads);
    const int tile = gdn_tile_floats(dk), qk_f = GDN_TILE * 2 * (int)dk, v_f = GDN_TILE * GDN_COLS * GDN_WARPS;

    float S[GDN_COLS][RPL];
    float *state = a.state ? a.state + h * dk * dv : NULL;
#pragma unroll
    for (int c = 0; c < GDN_COLS; c++)
#pragma unroll
        for (int r = 0; r < RPL; r++) {
            int64_t i = lane + 32 * r, j = j0 + c;
            S[c][r] = (state && i < dk && j < dv) ? state[i * dv + j] : 0.0f;
        }

    /* tile layout: rows (token tt, q | k) of dk floats, then v [GDN_TILE][cols], g, beta */
    auto prefetch = [&](int64_t t0, int buf) {
        float *dst = gr_smem + buf * tile;
        const int n = (int)(T - t0 < GDN_TILE ? T - t0 : GDN_TILE);
        if ((dk & 3) == 0 && (ldqk & 3) == 0 && (((uintptr_t)qn | (uintptr_t)kn) & 15) == 0) {
            const int vpr = (int)dk / 4;
            for (int v = tid; v < n * 2 * vpr; v += GDN_WARPS * 32) {
                const int row = v / vpr, c = (v - row * vpr) * 4;
                const float *src = ((row & 1) ? kn : qn) + (t0 + (row >> 1)) * ldqk + kh * dk + c;
                __pipeline_memcpy_async(dst + row * dk + c, src, 16);
            }
        } else {
            for (int v = tid; v < n * 2 * (int)dk; v += GDN_WARPS * 32) {
                const int row = v / (int)dk, c = v - row * (int)dk;
                gdn_async4(dst + row * dk + c, ((row & 1) ? kn : qn) + (t0 + (row >> 1)) * ldqk + kh * dk + c);
            }
        }
        float *vd = dst + qk_f, *gd = vd + v_f, *bd = gd + GDN_TILE;
        const int cols = GDN_COLS * GDN_WARPS;
        for (int v = tid; v < n * cols; v += GDN_WARPS * 32) {
            const int tt = v / cols, c = v - tt * cols;
            if (jb + c < dv)
                gdn_async4(vd + v, a.v + (t0 + tt) * a.ldv + h * dv + jb + c);
            else
                vd[v] = 0.0f;
        }
        for (int tt = tid; tt < n; tt += GDN_WARPS * 32) {
            gdn_async4(gd + tt, a.g + (t0 + tt) * Hv + h);
            gdn_async4(bd + tt, a.beta + (t0 + tt) * Hv + h);
        }
        __pipeline_commit();
    };

    const int64_t n_tiles = (T + GDN_TILE - 1) / GDN_TILE;
    if (n_tiles > 0)
        prefetch(0, 0);
    for (int64_t b = 0; b < n_tiles; b++) {
        const int buf = (int)(b & 1);
        if (b + 1 < n_tiles) {
            prefetch((b + 1) * GDN_TILE, buf ^ 1);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads(); /* tile b is in shared memory */
        if (active) {
            const float *tq = gr_smem + buf * tile, *tv = tq + qk_f, *tg = tv + v_f, *tb = tg + GDN_TILE;
            const int64_t t0 = b * GDN_TILE;
            const int n = (int)(T - t0 < GDN_TILE ? T - t0 : GDN_TILE);
            for (int tt = 0; tt < n; tt++) {
                const int64_t t = t0 + tt;
                float kr[RPL], qr[RPL];
#pragma unroll
                for (int r = 0; r < RPL; r++) {
                    const int64_t i = lane + 32 * r;
                    qr[r] = i < dk ? tq[(2 * tt) * dk + i] : 0.0f;
                    kr[r] = i < dk ? tq[(2 * tt + 1) * dk + i] : 0.0f;
                }
                const float eg = expf(tg[tt]), beta = tb[tt];
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
                    const float u = beta * (tv[tt * GDN_COLS * GDN_WARPS + warp * GDN_COLS + c] - dot[c]);
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
        }
        __syncthreads(); /* buffer `buf` is free for tile b + 2 */
    }
    if (state && active)
#pragma unroll
        for (int c = 0; c < GDN_COLS; c++)
#pragma unroll
            for (int r = 0; r < RPL; r++) {
                int64_t i = lane + 32 * r, j = j0 + c;
                if (i < dk && j < dv)
                    state[i * dv + j] = S[c][r];
            }
}

/* ---- chunked form (WY/UT), see the file comment ------------------------------------------ */

#include <mma.h>

#define GC 64                 /* chunk length */
#define GC_SEG 8              /* chunks per segment: bounds the scratch (see gdn_seg_ws) */
#define GC_PREP_THREADS 256
#define GC_LDT (GC + 8)       /* row stride of 64-wide tiles in shared memory */
#define GC_SLICE 64           /* value columns per walk / output block */
#define GC_WALK_WARPS 16
#define GC_MAX_DK 128         /* key heads up to 128 (padded to 16): the walk's tiles fit a block */

__host__ __device__ static inline int64_t gdn_chunks(int64_t T) { return (T + GC - 1) / GC; }
__host__ __device__ static inline int gdn_dkp(int64_t dk) { return (int)((dk + 15) / 16 * 16); }
__host__ __device__ static inline int gdn_dvp(int64_t dv) { return (int)((dv + GC_SLICE - 1) / GC_SLICE * GC_SLICE); }

/* Scratch of one segment (up to GC_SEG chunks) for all v-heads; ch = local chunk * Hv + head.
 * Every array starts 256-byte aligned (the tensor-core loads and cp.async need 32 / 16). */
typedef struct gdn_seg_ws {
    float *tinv, *pm;   /* [ch][64][64]: (I + A)^-1, and P (decayed, masked q.k) */
    float *wn;          /* [ch][64][dkp]: beta exp(gamma) k (prep), then -W = -Tinv (that) */
    float *kd;          /* [ch][64][dkp]: exp(gamma_last - gamma) k */
    float *qe;          /* [ch][64][dkp]: exp(gamma) q, normalised and scaled */
    float *u;           /* [ch][64][dvp]: U = Tinv (beta v), then the walk's v_new = U - W S */
    float *sc;          /* [ch][dkp][dvp]: the state at the chunk's start */
    float *elast;       /* [ch]: exp(gamma_last) */
    float *state;       /* [Hv][dk][dv]: the carried state when the op has none */
} gdn_seg_ws;

static size_t gdn_seg_ws_floats(int64_t chunks, int64_t Hv, int64_t dk, int64_t dv) {
    const size_t ch = (size_t)(chunks * Hv), dkp = (size_t)gdn_dkp(dk), dvp = (size_t)gdn_dvp(dv);
    return ch * (2 * GC * GC + 3 * GC * dkp + GC * dvp + dkp * dvp) + (ch + 63) / 64 * 64 + (size_t)(Hv * dk * dv);
}

static gdn_seg_ws gdn_seg_ws_at(float *base, int64_t chunks, int64_t Hv, int64_t dk, int64_t dv) {
    const size_t ch = (size_t)(chunks * Hv), dkp = (size_t)gdn_dkp(dk), dvp = (size_t)gdn_dvp(dv);
    gdn_seg_ws w;
    w.tinv = base, w.pm = w.tinv + ch * GC * GC, w.wn = w.pm + ch * GC * GC;
    w.kd = w.wn + ch * GC * dkp, w.qe = w.kd + ch * GC * dkp, w.u = w.qe + ch * GC * dkp;
    w.sc = w.u + ch * GC * dvp, w.elast = w.sc + ch * dkp * dvp, w.state = w.elast + (ch + 63) / 64 * 64;
    return w;
}

/* Copy n elements with `threads` threads, GC_BATCH loads in flight per thread before the
 * first store: the loads of a chunk are independent, and issuing them one at a time would
 * pay a memory round trip per element. load(i) / store(i, x) are the element functions. */
#define GC_BATCH 8
template <typename LoadF, typename StoreF>
__device__ __forceinline__ void gc_copy(int n, int tid, int threads, LoadF load, StoreF store) {
    for (int base = tid; base < n; base += GC_BATCH * threads) {
        float r[GC_BATCH];
#pragma unroll
        for (int u = 0; u < GC_BATCH; u++) {
            const int i = base + u * threads;
            r[u] = i < n ? load(i) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < GC_BATCH; u++) {
            const int i = base + u * threads;
            if (i < n)
                store(i, r[u]);
        }
    }
}

/* The same for two arrays of n elements at once: 2 x GC_BATCH loads in flight. */
template <typename L1, typename S1, typename L2, typename S2>
__device__ __forceinline__ void gc_copy2(int n, int tid, int threads, L1 load1, S1 store1, L2 load2, S2 store2) {
    for (int base = tid; base < n; base += GC_BATCH * threads) {
        float r[GC_BATCH], q[GC_BATCH];
#pragma unroll
        for (int u = 0; u < GC_BATCH; u++) {
            const int i = base + u * threads;
            r[u] = i < n ? load1(i) : 0.0f;
            q[u] = i < n ? load2(i) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < GC_BATCH; u++) {
            const int i = base + u * threads;
            if (i < n)
                store1(i, r[u]), store2(i, q[u]);
        }
    }
}

/* One segment of one sequence: chunks [c0, c0 + n) of the op's T tokens. */
typedef struct gdn_seg {
    int64_t c0, n;
} gdn_seg;

/* One block per (chunk, v-head): normalise the chunk's q and k rows, cumulative decay, A and P
 * (CUDA-core dot products), Tinv = (I + A)^-1 by forward substitution (one thread per column of
 * the identity, registers indexed by unrolled constants only); writes the operands of the
 * later passes (struct gdn_seg_ws). Rows past the sequence's end are zero everywhere. */
__global__ void __launch_bounds__(GC_PREP_THREADS) k_gdn_chunk_prep(clef_gdn_args a, gdn_seg sg, gdn_seg_ws w) {
    extern __shared__ float gp_smem[];
    const int dk = (int)a.dk, ld = dk + 1; /* odd stride: rows i and j of a warp hit distinct banks */
    const int dkp = gdn_dkp(a.dk);
    float *Qs = gp_smem, *Ks = Qs + GC * ld, *As = Ks + GC * ld, *gs = As + GC * (GC + 1);
    float *bs = gs + GC, *iq = bs + GC, *ik = iq + GC;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads, kh = h / (Hv / a.n_k_heads);
    const int64_t ch = (int64_t)blockIdx.x * Hv + h;
    const int64_t t0 = (sg.c0 + blockIdx.x) * GC;
    const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);

    const float *qg = a.q + t0 * a.ldq + kh * dk, *kg = a.k + t0 * a.ldk + kh * dk;
    gc_copy2(GC * dk, tid, GC_PREP_THREADS,
             [&](int i) { int r = i / dk, d = i - r * dk; return r < L ? qg[r * a.ldq + d] : 0.0f; },
             [&](int i, float x) { int r = i / dk, d = i - r * dk; Qs[r * ld + d] = x; },
             [&](int i) { int r = i / dk, d = i - r * dk; return r < L ? kg[r * a.ldk + d] : 0.0f; },
             [&](int i, float x) { int r = i / dk, d = i - r * dk; Ks[r * ld + d] = x; });
    if (tid < GC) {
        gs[tid] = tid < L ? a.g[(t0 + tid) * Hv + h] : 0.0f;
        bs[tid] = tid < L ? a.beta[(t0 + tid) * Hv + h] : 0.0f;
    }
    __syncthreads();
    /* scales as the recurrent kernel: q / sqrt(sum q^2 + 1e-6) / sqrt(dk), k / sqrt(sum k^2 + 1e-6) */
    const float scale = 1.0f / sqrtf((float)dk);
    for (int r = warp; r < GC; r += GC_PREP_THREADS / 32) {
        float sq = 0.0f, sk = 0.0f;
        for (int d = lane; d < dk; d += 32)
            sq += Qs[r * ld + d] * Qs[r * ld + d], sk += Ks[r * ld + d] * Ks[r * ld + d];
        sq = warp_sum(sq), sk = warp_sum(sk);
        if (lane == 0) {
            iq[r] = a.l2norm_qk ? 1.0f / sqrtf(sq + 1e-6f) : 1.0f;
            ik[r] = a.l2norm_qk ? 1.0f / sqrtf(sk + 1e-6f) : 1.0f;
        }
    }
    if (tid == 0) { /* cumulative log decay; rows past L add 0 */
        float acc = 0.0f;
        for (int r = 0; r < GC; r++)
            acc += gs[r], gs[r] = acc;
    }
    __syncthreads();
    for (int idx = tid; idx < GC * dk; idx += GC_PREP_THREADS) {
        int r = idx / dk, d = idx - r * dk;
        Qs[r * ld + d] = (Qs[r * ld + d] * iq[r]) * scale;
        Ks[r * ld + d] *= ik[r];
    }
    __syncthreads();
    /* the operands of the W/U, walk and output passes; columns dk .. dkp are zero */
    {
        const float gl = gs[GC - 1]; /* = gamma at row L - 1: rows past L add 0 */
        float *wn = w.wn + ch * GC * dkp, *kd = w.kd + ch * GC * dkp, *qe = w.qe + ch * GC * dkp;
        for (int idx = tid; idx < GC * dkp; idx += GC_PREP_THREADS) {
            const int r = idx / dkp, d = idx - r * dkp;
            const bool in = r < L && d < dk;
            const float kv = in ? Ks[r * ld + d] : 0.0f, qv = in ? Qs[r * ld + d] : 0.0f;
            wn[idx] = bs[r] * expf(gs[r]) * kv;
            kd[idx] = expf(gl - gs[r]) * kv;
            qe[idx] = expf(gs[r]) * qv;
        }
        if (tid == 0)
            w.elast[ch] = expf(gl);
    }
    /* thread: row i, columns j = jj, jj + 4, ... */
    {
        const int i = tid >> 2, jj = tid & 3;
        float kk[GC / 4], qk[GC / 4];
#pragma unroll
        for (int m = 0; m < GC / 4; m++)
            kk[m] = 0.0f, qk[m] = 0.0f;
        for (int d = 0; d < dk; d++) {
            const float ki = Ks[i * ld + d], qi = Qs[i * ld + d];
#pragma unroll
            for (int m = 0; m < GC / 4; m++) {
                const float kj = Ks[(jj + 4 * m) * ld + d];
                kk[m] += ki * kj, qk[m] += qi * kj;
            }
        }
        float *P = w.pm + (ch * GC + i) * GC;
#pragma unroll
        for (int m = 0; m < GC / 4; m++) {
            const int j = jj + 4 * m;
            const float dec = (j <= i && i < L) ? expf(gs[i] - gs[j]) : 0.0f;
            As[i * (GC + 1) + j] = j < i ? bs[i] * dec * kk[m] : 0.0f;
            P[j] = dec * qk[m];
        }
    }
    __syncthreads();
    if (tid < GC) {
        const int j = tid;
        float x[GC];
#pragma unroll
        for (int i = 0; i < GC; i++) {
            float s[4] = {i == j ? 1.0f : 0.0f, 0.0f, 0.0f, 0.0f}; /* 4 chains: a quarter of the latency */
#pragma unroll
            for (int m = 0; m < i; m++)
                s[m & 3] -= As[i * (GC + 1) + m] * x[m];
            x[i] = (s[0] + s[1]) + (s[2] + s[3]);
        }
        float *Ti = w.tinv + ch * GC * GC;
#pragma unroll
        for (int i = 0; i < GC; i++)
            Ti[i * GC + j] = x[i];
    }
}

typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> gc_acc;

/* acc += a b on the tensor cores at ~fp32 accuracy (3xTF32): a 16x8 (layout LA), b 8x16
 * row-major, both fp32 in shared memory (32-byte aligned, ld a multiple of 4 floats). */
template <typename LA>
__device__ __forceinline__ void gc_mma3(gc_acc &acc, const float *pa, unsigned lda, const float *pb, unsigned ldb) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LA> ah, al;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bh, bl;
    wmma::load_matrix_sync(ah, pa, lda);
    wmma::load_matrix_sync(bh, pb, ldb);
#pragma unroll
    for (int i = 0; i < ah.num_elements; i++) {
        const float x = ah.x[i], hi = wmma::__float_to_tf32(x);
        ah.x[i] = hi, al.x[i] = wmma::__float_to_tf32(x - hi);
    }
#pragma unroll
    for (int i = 0; i < bh.num_elements; i++) {
        const float x = bh.x[i], hi = wmma::__float_to_tf32(x);
        bh.x[i] = hi, bl.x[i] = wmma::__float_to_tf32(x - hi);
    }
    wmma::mma_sync(acc, al, bh, acc);
    wmma::mma_sync(acc, ah, bl, acc);
    wmma::mma_sync(acc, ah, bh, acc);
}

/* Asynchronous copy of `rows` rows of `cols` floats (a multiple of 4; 16-byte aligned rows)
 * from global (row stride lds) to shared memory (row stride ldd), `threads` threads. */
__device__ __forceinline__ void gc_async_rows(float *dst, int ldd, const float *src, int64_t lds, int rows, int cols,
                                              int tid, int threads) {
    const int vpr = cols / 4;
    for (int v = tid; v < rows * vpr; v += threads) {
        const int r = v / vpr, c = (v - r * vpr) * 4;
        __pipeline_memcpy_async(dst + r * ldd + c, src + r * lds + c, 16);
    }
}

/* One block per (chunk, v-head), 8 warps: -W = -Tinv (beta exp(gamma) k) over wn in place and
 * U = Tinv (beta v), as 16 x 16 tiles dealt round the warps. */
__global__ void __launch_bounds__(256) k_gdn_chunk_wu(clef_gdn_args a, gdn_seg sg, gdn_seg_ws w) {
    using namespace nvcuda;
    extern __shared__ __align__(128) float gu_smem[];
    const int dkp = gdn_dkp(a.dk), dvp = gdn_dvp(a.dv), dv = (int)a.dv, ldb = dkp + dvp + 8;
    float *Tb = gu_smem;          /* [64][GC_LDT] */
    float *Bb = Tb + GC * GC_LDT; /* [64][ldb]: wn's rows | beta v rows */
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads, ch = (int64_t)blockIdx.x * Hv + h;
    const int64_t t0 = (sg.c0 + blockIdx.x) * GC;
    const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);
    gc_async_rows(Tb, GC_LDT, w.tinv + ch * GC * GC, GC, GC, GC, tid, 256);
    gc_async_rows(Bb, ldb, w.wn + ch * GC * dkp, dkp, GC, dkp, tid, 256);
    __pipeline_commit();
    const float *vg = a.v + t0 * a.ldv + h * dv;
    gc_copy(GC * dvp, tid, 256,
            [&](int i) {
                int r = i / dvp, j = i - r * dvp;
                return (r < L && j < dv) ? a.beta[(t0 + r) * Hv + h] * vg[r * a.ldv + j] : 0.0f;
            },
            [&](int i, float x) { int r = i / dvp, j = i - r * dvp; Bb[r * ldb + dkp + j] = x; });
    __pipeline_wait_prior(0);
    __syncthreads();
    const int nct = (dkp + dvp) / 16;
    for (int p = warp; p < 4 * nct; p += 8) {
        const int r0 = (p / nct) * 16, c0 = (p % nct) * 16;
        gc_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kb = 0; kb < GC / 8; kb++)
            gc_mma3<wmma::row_major>(acc, Tb + r0 * GC_LDT + kb * 8, GC_LDT, Bb + kb * 8 * ldb + c0, ldb);
        if (c0 < dkp) {
#pragma unroll
            for (int i = 0; i < acc.num_elements; i++)
                acc.x[i] = -acc.x[i];
            wmma::store_matrix_sync(w.wn + ch * GC * dkp + r0 * dkp + c0, acc, dkp, wmma::mem_row_major);
        } else {
            wmma::store_matrix_sync(w.u + ch * GC * dvp + r0 * dvp + (c0 - dkp), acc, dvp, wmma::mem_row_major);
        }
    }
}

static size_t gdn_walk_smem(int64_t dk) {
    const int dkp = gdn_dkp(dk), ldw = dkp + 4;
    return sizeof(float) * (size_t)(dkp * GC_LDT + 2 * 2 * GC * ldw + 2 * GC * GC_LDT) + 128;
}

/* The only sequential pass. One block per (64 value columns, v-head), 16 warps, walks the
 * segment's chunks in order with its slice of S in shared memory:
 *   S_c -> sc;  v_new = U + (-W) S -> u;  S = exp(gamma_last) S + Kd^T v_new
 * The next chunk's -W, Kd and U are copied (cp.async) into the second buffer while this one
 * computes. st: the carried state [Hv][dk][dv], read at the start unless st_zero, written at
 * the end. */
__global__ void __launch_bounds__(GC_WALK_WARPS * 32, 1)
    k_gdn_chunk_walk(clef_gdn_args a, gdn_seg sg, gdn_seg_ws w, float *st, int st_zero) {
    using namespace nvcuda;
    extern __shared__ __align__(128) float gw_smem[];
    const int dk = (int)a.dk, dv = (int)a.dv, dkp = gdn_dkp(a.dk), dvp = gdn_dvp(a.dv), ldw = dkp + 4;
    const int NT = GC_WALK_WARPS * 32;
    float *Ss = gw_smem;               /* [dkp][GC_LDT] */
    float *Wb = Ss + dkp * GC_LDT;     /* [2][64][ldw] */
    float *Kb = Wb + 2 * GC * ldw;     /* [2][64][ldw] */
    float *Ub = Kb + 2 * GC * ldw;     /* [2][64][GC_LDT] */
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads;
    const int j0 = blockIdx.x * GC_SLICE;
    float *sth = st + h * a.dk * a.dv;

    for (int idx = tid; idx < dkp * GC_SLICE; idx += NT) {
        int i = idx / GC_SLICE, j = idx - i * GC_SLICE;
        Ss[i * GC_LDT + j] = (!st_zero && i < dk && j0 + j < dv) ? sth[(int64_t)i * dv + j0 + j] : 0.0f;
    }
    auto prefetch = [&](int64_t c, int buf) {
        const int64_t ch = c * Hv + h;
        gc_async_rows(Wb + buf * GC * ldw, ldw, w.wn + ch * GC * dkp, dkp, GC, dkp, tid, NT);
        gc_async_rows(Kb + buf * GC * ldw, ldw, w.kd + ch * GC * dkp, dkp, GC, dkp, tid, NT);
        gc_async_rows(Ub + buf * GC * GC_LDT, GC_LDT, w.u + ch * GC * dvp + j0, dvp, GC, GC_SLICE, tid, NT);
        __pipeline_commit();
    };
    prefetch(0, 0);
    for (int64_t c = 0; c < sg.n; c++) {
        const int buf = (int)(c & 1);
        const int64_t ch = c * Hv + h;
        if (c + 1 < sg.n) {
            prefetch(c + 1, buf ^ 1);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads(); /* chunk c's operands and the last update of S are visible */
        float *scg = w.sc + ch * dkp * dvp + j0;
        for (int v = tid; v < dkp * (GC_SLICE / 4); v += NT) {
            const int i = v / (GC_SLICE / 4), j = (v - i * (GC_SLICE / 4)) * 4;
            *(float4 *)(scg + (int64_t)i * dvp + j) = *(const float4 *)(Ss + i * GC_LDT + j);
        }
        float *W = Wb + buf * GC * ldw, *K = Kb + buf * GC * ldw, *U = Ub + buf * GC * GC_LDT;
        /* v_new = U + (-W) S: 16 tiles, one per warp */
        for (int p = warp; p < (GC / 16) * (GC_SLICE / 16); p += GC_WALK_WARPS) {
            const int r0 = (p / (GC_SLICE / 16)) * 16, c0 = (p % (GC_SLICE / 16)) * 16;
            gc_acc acc;
            wmma::load_matrix_sync(acc, U + r0 * GC_LDT + c0, GC_LDT, wmma::mem_row_major);
            for (int kb = 0; kb < dkp / 8; kb++)
                gc_mma3<wmma::row_major>(acc, W + r0 * ldw + kb * 8, ldw, Ss + kb * 8 * GC_LDT + c0, GC_LDT);
            wmma::store_matrix_sync(U + r0 * GC_LDT + c0, acc, GC_LDT, wmma::mem_row_major);
            wmma::store_matrix_sync(w.u + ch * GC * dvp + (int64_t)r0 * dvp + j0 + c0, acc, dvp, wmma::mem_row_major);
        }
        __syncthreads(); /* v_new complete; every read of S done */
        /* S = exp(gamma_last) S + Kd^T v_new: (dkp/16) x 4 tiles */
        const float el = w.elast[ch];
        for (int p = warp; p < (dkp / 16) * (GC_SLICE / 16); p += GC_WALK_WARPS) {
            const int mi = p / (GC_SLICE / 16), n = p % (GC_SLICE / 16);
            gc_acc acc;
            wmma::load_matrix_sync(acc, Ss + mi * 16 * GC_LDT + n * 16, GC_LDT, wmma::mem_row_major);
#pragma unroll
            for (int i = 0; i < acc.num_elements; i++)
                acc.x[i] *= el;
            for (int kb = 0; kb < GC / 8; kb++) /* Kd^T is Kd read column-major */
                gc_mma3<wmma::col_major>(acc, K + kb * 8 * ldw + mi * 16, ldw, U + kb * 8 * GC_LDT + n * 16, GC_LDT);
            wmma::store_matrix_sync(Ss + mi * 16 * GC_LDT + n * 16, acc, GC_LDT, wmma::mem_row_major);
        }
        __syncthreads(); /* buffer `buf` is free for chunk c + 2 */
    }
    for (int idx = tid; idx < dk * GC_SLICE; idx += NT) {
        int i = idx / GC_SLICE, j = idx - i * GC_SLICE;
        if (j0 + j < dv)
            sth[(int64_t)i * dv + j0 + j] = Ss[i * GC_LDT + j];
    }
}

static size_t gdn_out_smem(int64_t dk) {
    const int dkp = gdn_dkp(dk);
    return sizeof(float) * (size_t)(GC * (dkp + 4) + dkp * GC_LDT + 2 * GC * GC_LDT) + 128;
}

/* One block per (chunk, v-head, 64 value columns), 8 warps, all independent:
 *   o = (exp(gamma) q) S_c + P v_new. */
__global__ void __launch_bounds__(256) k_gdn_chunk_out(clef_gdn_args a, gdn_seg sg, gdn_seg_ws w) {
    using namespace nvcuda;
    extern __shared__ __align__(128) float go_smem[];
    const int dv = (int)a.dv, dkp = gdn_dkp(a.dk), dvp = gdn_dvp(a.dv), ldq = dkp + 4;
    float *Qb = go_smem;           /* [64][ldq] */
    float *Sb = Qb + GC * ldq;     /* [dkp][GC_LDT] */
    float *Pb = Sb + dkp * GC_LDT; /* [64][GC_LDT] */
    float *Vb = Pb + GC * GC_LDT;  /* [64][GC_LDT]: v_new, then o */
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads, ch = (int64_t)blockIdx.x * Hv + h;
    const int j0 = blockIdx.z * GC_SLICE;
    const int64_t t0 = (sg.c0 + blockIdx.x) * GC;
    const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);
    gc_async_rows(Qb, ldq, w.qe + ch * GC * dkp, dkp, GC, dkp, tid, 256);
    gc_async_rows(Sb, GC_LDT, w.sc + ch * dkp * dvp + j0, dvp, dkp, GC_SLICE, tid, 256);
    gc_async_rows(Pb, GC_LDT, w.pm + ch * GC * GC, GC, GC, GC, tid, 256);
    gc_async_rows(Vb, GC_LDT, w.u + ch * GC * dvp + j0, dvp, GC, GC_SLICE, tid, 256);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    gc_acc acc[2];
    for (int q = 0; q < 2; q++) {
        const int p = warp + 8 * q, r0 = (p / 4) * 16, c0 = (p % 4) * 16;
        wmma::fill_fragment(acc[q], 0.0f);
        for (int kb = 0; kb < dkp / 8; kb++)
            gc_mma3<wmma::row_major>(acc[q], Qb + r0 * ldq + kb * 8, ldq, Sb + kb * 8 * GC_LDT + c0, GC_LDT);
        for (int kb = 0; kb <= r0 / 8 + 1; kb++) /* P is lower triangular: columns past row r0 + 15 are 0 */
            gc_mma3<wmma::row_major>(acc[q], Pb + r0 * GC_LDT + kb * 8, GC_LDT, Vb + kb * 8 * GC_LDT + c0, GC_LDT);
    }
    __syncthreads(); /* every read of Vb done */
    for (int q = 0; q < 2; q++) {
        const int p = warp + 8 * q, r0 = (p / 4) * 16, c0 = (p % 4) * 16;
        wmma::store_matrix_sync(Vb + r0 * GC_LDT + c0, acc[q], GC_LDT, wmma::mem_row_major);
    }
    __syncthreads();
    for (int idx = tid; idx < GC * GC_SLICE; idx += 256) {
        const int r = idx / GC_SLICE, j = idx - r * GC_SLICE;
        if (r < L && j0 + j < dv)
            a.o[(t0 + r) * a.ldo + h * dv + j0 + j] = Vb[r * GC_LDT + j];
    }
}

/* One sequence, segment by segment: prep, W/U, walk, output (four launches per segment). */
static void gdn_chunked(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t n_chunks = gdn_chunks(args->T), Hv = args->n_v_heads;
    const int64_t seg_chunks = n_chunks < GC_SEG ? n_chunks : GC_SEG;
    float *base = (float *)(((uintptr_t)scratch + 255) & ~(uintptr_t)255); /* workspace_size has the slack */
    gdn_seg_ws w = gdn_seg_ws_at(base, seg_chunks, Hv, args->dk, args->dv);
    const int dkp = gdn_dkp(args->dk), dvp = gdn_dvp(args->dv);
    const size_t prep_smem = sizeof(float) * (size_t)(2 * GC * (args->dk + 1) + GC * (GC + 1) + 4 * GC);
    const size_t wu_smem = sizeof(float) * (size_t)(GC * GC_LDT + GC * (dkp + dvp + 8)) + 128;
    const size_t walk_smem = gdn_walk_smem(args->dk), out_smem = gdn_out_smem(args->dk);
    cuda_record(be, cudaFuncSetAttribute(k_gdn_chunk_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prep_smem),
                "gdn prep shared memory");
    cuda_record(be, cudaFuncSetAttribute(k_gdn_chunk_wu, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)wu_smem),
                "gdn w/u shared memory");
    cuda_record(be, cudaFuncSetAttribute(k_gdn_chunk_walk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)walk_smem),
                "gdn walk shared memory");
    cuda_record(be, cudaFuncSetAttribute(k_gdn_chunk_out, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)out_smem),
                "gdn output shared memory");
    float *st = args->state ? args->state : w.state;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += seg_chunks) {
        gdn_seg sg = {c0, n_chunks - c0 < seg_chunks ? n_chunks - c0 : seg_chunks};
        dim3 grid((unsigned)sg.n, (unsigned)Hv);
        k_gdn_chunk_prep<<<grid, GC_PREP_THREADS, prep_smem, ctx->stream>>>(*args, sg, w);
        k_gdn_chunk_wu<<<grid, 256, wu_smem, ctx->stream>>>(*args, sg, w);
        dim3 wgrid((unsigned)(dvp / GC_SLICE), (unsigned)Hv);
        k_gdn_chunk_walk<<<wgrid, GC_WALK_WARPS * 32, walk_smem, ctx->stream>>>(*args, sg, w, st,
                                                                                 !args->state && c0 == 0);
        dim3 ogrid((unsigned)sg.n, (unsigned)Hv, (unsigned)(dvp / GC_SLICE));
        k_gdn_chunk_out<<<ogrid, 256, out_smem, ctx->stream>>>(*args, sg, w);
        CUDA_CHECK_LAUNCH(be, "gdn chunk kernels");
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
    if (args->mode == CLEF_GDN_CHUNKED && ctx->gdn_chunked && args->dk <= GC_MAX_DK) {
        gdn_chunked(be, args, scratch);
        return;
    }
    const int cols_per_block = GDN_COLS * GDN_WARPS;
    dim3 grid((unsigned)((args->dv + cols_per_block - 1) / cols_per_block), (unsigned)args->n_v_heads);
    const unsigned qk_blocks = (unsigned)((args->T * args->n_k_heads + 3) / 4);
    float *qn = (float *)scratch, *kn = qn + args->T * args->n_k_heads * args->dk;
    const int rpl = (int)((args->dk + 31) / 32);
    const size_t smem = 2 * sizeof(float) * (size_t)gdn_tile_floats(args->dk); /* two tiles: one loads, one runs */
    switch (rpl) {
#define GDN_CASE(R)                                                                                 \
    case R:                                                                                         \
        cuda_record(be, cudaFuncSetAttribute(k_gdn_recurrent<R>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                             (int)smem),                                            \
                    "gdn shared memory");                                                           \
        k_gdn_qk<R><<<qk_blocks, 128, 0, ctx->stream>>>(*args, qn, kn);                            \
        k_gdn_recurrent<R><<<grid, GDN_WARPS * 32, smem, ctx->stream>>>(*args, qn, kn);            \
        break;
    GDN_CASE(1) GDN_CASE(2) GDN_CASE(3) GDN_CASE(4) GDN_CASE(5) GDN_CASE(6) GDN_CASE(7) GDN_CASE(8)
#undef GDN_CASE
    default: break;
    }
    CUDA_CHECK_LAUNCH(be, "gdn kernel");
}

/* recurrent: normalised q and k of every token, 2 x T x Hk x dk floats; chunked: one
 * segment's operands (gdn_seg_ws, at most GC_SEG chunks, whatever T) and a carried state.
 * Packed sequences run one at a time, so the longest sequence sizes it. */
size_t cuda_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args) {
    const int64_t T = args->seqs && args->seqs->max_len < args->T ? args->seqs->max_len : args->T;
    if (args->mode == CLEF_GDN_CHUNKED && cuda_ctx(be)->gdn_chunked && args->dk <= GC_MAX_DK)
        return sizeof(float) * gdn_seg_ws_floats(gdn_chunks(T) < GC_SEG ? gdn_chunks(T) : GC_SEG, args->n_v_heads,
                                                 args->dk, args->dv) + 256;
    return 2 * sizeof(float) * (size_t)(T * args->n_k_heads * args->dk) + 256;
}
