/*
 * cuda_gdn.cu — the gated delta rule on the GPU, in two forms:
 *
 * CLEF_GDN_CHUNKED (the default; key and value head dims <= 128): chunks of 64 tokens in the
 * WY/UT form, split the way flash-linear-attention splits it so that only one pass is
 * sequential. Per chunk (rows i, j < L, gamma_i = cumulative log decay from the chunk's start,
 * q and k L2-normalised):
 *   A_ij  = beta_i exp(gamma_i - gamma_j) k_i.k_j (j < i),  Tinv = (I + A)^-1
 *   P_ij  = exp(gamma_i - gamma_j) q_i.k_j (j <= i)
 *   W     = Tinv (beta exp(gamma) K),  U = Tinv (beta V)
 *   v_new = U - W S                      (S: the state at the chunk's start)
 *   o     = exp(gamma) (Q S) + P v_new = Q' S + O0,  Q' = exp(gamma) Q - P W,  O0 = P U
 *   S'    = exp(gamma_last) S + (exp(gamma_last - gamma) K)^T v_new
 * Two kernels per segment of up to GC_SEG_DEFAULT chunks (the segment bounds the scratch):
 *   k_gdn_prep, fully parallel over (chunk, v-head): norms, decays, A and P, T' = Tinv diag(beta)
 *     (forward substitution on the CUDA cores while v arrives by cp.async: folding beta into
 *     T' lets v land raw), W, U, Q', O0; it leaves -W, Q', Kd, U, O0 for the walk, which so
 *     needs no P. Its element-wise passes go a row per warp, float4 a lane (no divisions).
 *   k_gdn_walk, the only sequential pass, parallel over (v-head, 32 or 64 value columns): the
 *     columns of S are independent (S[:, cols] needs all of W but only its own columns of U and
 *     O0), so 48 heads x 2..4 column blocks fill the device. Per chunk [v_new; o] = [U; O0] +
 *     [-W; Q'] S (o stored from the product's registers: no per-chunk state is stored), then
 *     S' ; the next chunk's operands arrive by cp.async while this one computes.
 * Every product runs on the tensor cores with PTX's mma.sync fragment layouts, each operand
 * split x = hi + lo and a b ~ hi hi + hi lo + lo hi (the dropped lo lo is second order), in one
 * of these forms (clef_backend_cuda_tune_gdn_products, or the environment's CLEF_GDN_PRODUCTS):
 *   3xBF16 over split planes, run18's parallel pass (the default since run18, GC_FORM_PREP_WIDE,
 *     `bf16x3-prep-wide`): run17's planes form below, whose parallel pass also splits T' and -P
 *     once into plane pairs in shared memory (read by ldmatrix in the W, U, Q', O0 products,
 *     gc_gemm_tri_ap, instead of every one of their 16 warp stripes splitting all of the 64x64
 *     matrix again), applies the decay masks where K K^T and Q K^T are stored (one pass and its
 *     element loop fewer) and stores the -W, Q' and Kd planes 8 bytes a lane (whole 32-byte
 *     sectors). The same halves, products and order: the same bits as run17's and run16's
 *     forms. `bf16x3-prep` has 4-byte plane stores, `bf16x3-planes-wide` run17's pass with the
 *     8-byte stores (both kept for comparison);
 *   3xBF16 over split planes (run17's, GC_FORM_PLANES, `bf16x3-planes`, m16n8k16): the
 *     parallel pass stores -W, Q' and Kd as bf16 hi / lo plane pairs instead of fp32 (the
 *     same bytes), the walk keeps its state tile in registers and splits the state and v_new
 *     once where it writes them, and every walk operand comes by ldmatrix: a k16 step of a
 *     warp tile is 6 ldmatrix + 12 mma instead of ~100 instructions of loads and splits. The
 *     same products of the same halves in the same order as run16's form: the same bits;
 *   3xBF16 split in the product loops (run16's, gc_gemm_bf): ~2^-16 per product term, 7.0e-6
 *     .. 7.7e-6 vs a float64 recurrence at T = 1 .. 8,192 (bound 1e-3; 1e-4 vs the CPU);
 *   3xTF32 (run15's, gc_gemm, m16n8k8): ~2^-20 per term, 1.5e-6 .. 2.8e-6 — where TF32 alone
 *     (10-bit mantissa) would put the state's error near the 1e-3 bound at long T.
 * BF16's k-step is twice TF32's at the same issue cost, so the tensor cores do half the
 * instructions. Measured on an H200 (bench/RESULTS.md, run18_gdn3, bench_gpu_cores): 0.64 ms
 * per 27B layer at 2,270 tokens (run17's planes form in the same run 0.69, run16's 0.73,
 * 3xTF32 0.76, the token-by-token kernel 1.44), 2.16 at 8,192, 3.42 for 8 packed records of
 * 1,502, 0.48 per 9B layer at 2,270. Each kind of kernel alone at 27B, 2,270: the parallel
 * passes 0.34 ms (run17's 0.40; the 8-byte stores alone 0.36), the walks 0.26. Nsight Compute
 * on a 16-chunk segment's pass: 156 us and 58.6 M instructions against run17's 177 us and
 * 66.1 M. The pass stays latency-bound (run17's issued 38% of its slots: 2 blocks of 8 warps
 * an SM, 108 KiB of shared memory and 128 registers each; its forward substitution runs on 2
 * of the 8 warps). Tried and dropped in run16: the walk's operands split once as planes read
 * by plain loads, with Kd^T stored transposed (0.85 ms); run17's planes differ
 * in ldmatrix (one instruction per 16x16 operand) and Kd stored as it is, read transposed by
 * ldmatrix.trans. An earlier form with WMMA fragments and four kernels per segment took
 * 1.57-1.78 ms: WMMA's TF32 fragments loaded through generic addresses, converted by an
 * emulated cvt.rna.tf32 (six instructions an element) and split once per tile instead of once
 * per warp. Tried and dropped in run18_gdn4: the pass making exp(gamma) q again from the input
 * q in the Q' product's fragment layout instead of the fp32 round trip through the scratch
 * (the same bits, one barrier fewer): 1-4% slower alone (the input rows 32-40 KB apart).
 *
 * CLEF_GDN_RECURRENT (and head dims past 128): the exact token-by-token recurrence with the
 * state held in registers, the reference form. The columns of S (one per value dim) evolve
 * independently — column j only needs k_t, q_t, v_t[j], g_t and beta_t — so a warp owns
 * GDN_COLS columns of one head, each lane holding rows lane, lane+32, ... of them (dk <= 256).
 * A first, fully parallel kernel L2-normalises (and scales) q and k into the scratch buffer,
 * so a step of the recurrence is a few FMAs per lane and two butterfly reductions (S~^T k,
 * S^T q). The GDN_WARPS warps of a block (all of one head) share one copy of each token's q
 * and k, copied GDN_TILE tokens at a time into shared memory (cp.async, the next tile while
 * this one runs). Measured: 1.45 ms per 27B layer at 2,270 tokens, bound by the latency of
 * its two reductions per token.
 */
#include "backend/cuda/cuda_internal.cuh"

#include <cuda_pipeline.h>
#include <stdlib.h>
#include <string.h>

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

#define GC 64                 /* chunk length */
#define GC_LDA (GC + 4)       /* row stride of the 64x64 A, Tinv, P in shared memory */
#define GC_MAX_D 128          /* key and value head dims up to 128 (padded to 32) */
#define GC_PREP_THREADS 256
#define GC_WALK_WARPS 16
#define GC_SEG_DEFAULT 16     /* chunks per segment: bounds the scratch (gdn_seg_ws) */

/* The chunked kernel runs for CLEF_GDN_CHUNKED by default (1), or only after
 * clef_backend_cuda_set_gdn_chunked(be, 1) (0). */
#define GC_BY_DEFAULT 1

/* Bench-only tuning (clef_backend_cuda_tune_gdn, clef_backend_cuda_tune_gdn_products): 0 = the
 * defaults. Process-wide, not per backend: set them before any forward is recorded as a CUDA
 * graph (cuda_graph.cu), whose recordings keep the form they were made with. */
static int gc_seg_tuned, gc_slice_tuned, gc_products_tuned, gc_parts_tuned;

extern "C" void clef_backend_cuda_tune_gdn(int seg_chunks, int slice_cols) {
    gc_seg_tuned = seg_chunks > 0 ? seg_chunks : 0;
    gc_slice_tuned = slice_cols == 32 || slice_cols == 64 ? slice_cols : 0;
}

extern "C" void clef_backend_cuda_tune_gdn_products(int form) {
    gc_products_tuned = form == CLEF_GDN_PRODUCTS_TF32X3 || form == CLEF_GDN_PRODUCTS_BF16X3 ||
                                form == CLEF_GDN_PRODUCTS_BF16X3_PLANES || form == CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE ||
                                form == CLEF_GDN_PRODUCTS_BF16X3_PREP || form == CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE
                            ? form
                            : 0;
}

extern "C" void clef_backend_cuda_tune_gdn_parts(int parts) { gc_parts_tuned = parts == 1 || parts == 2 ? parts : 0; }

__host__ __device__ static inline int64_t gdn_chunks(int64_t T) { return (T + GC - 1) / GC; }
__host__ __device__ static inline int gdn_dkp(int64_t dk) { return (int)((dk + 31) / 32 * 32); }
__host__ __device__ static inline int gdn_dvp(int64_t dv) { return (int)((dv + 31) / 32 * 32); }

static int64_t gdn_seg_chunks(int64_t n_chunks) {
    const int64_t s = gc_seg_tuned > 0 ? gc_seg_tuned : GC_SEG_DEFAULT;
    return n_chunks < s ? n_chunks : s;
}

/* Scratch of one segment (up to gdn_seg_chunks chunks) for all v-heads; ch = local chunk * Hv
 * + head. What the parallel pass leaves for the walk, so that the walk needs no P:
 *   o = exp(gamma) Q S + P (U - W S) = (exp(gamma) Q - P W) S + P U = Q' S + O0.
 * Every array starts 256-byte aligned (tensor-core loads need 32 bytes, cp.async 16). */
typedef struct gdn_seg_ws {
    float *wn;    /* [ch][64][dkp]: -W = -Tinv (beta exp(gamma) k) */
    float *qp;    /* [ch][64][dkp]: Q' = exp(gamma) q - P W */
    float *kd;    /* [ch][64][dkp]: exp(gamma_last - gamma) k */
    float *u;     /* [ch][64][dvp]: U = Tinv (beta v) */
    float *o0;    /* [ch][64][dvp]: O0 = P U */
    float *elast; /* [ch]: exp(gamma_last) */
    float *state; /* [Hv][dk][dv]: the carried state when the op has none */
} gdn_seg_ws;

static size_t gdn_seg_ws_floats(int64_t chunks, int64_t Hv, int64_t dk, int64_t dv) {
    const size_t ch = (size_t)(chunks * Hv), dkp = (size_t)gdn_dkp(dk), dvp = (size_t)gdn_dvp(dv);
    return ch * GC * (3 * dkp + 2 * dvp) + (ch + 63) / 64 * 64 + (size_t)(Hv * dk * dv);
}

static gdn_seg_ws gdn_seg_ws_at(float *base, int64_t chunks, int64_t Hv, int64_t dk, int64_t dv) {
    const size_t ch = (size_t)(chunks * Hv), dkp = (size_t)gdn_dkp(dk), dvp = (size_t)gdn_dvp(dv);
    gdn_seg_ws w;
    w.wn = base, w.qp = w.wn + ch * GC * dkp, w.kd = w.qp + ch * GC * dkp, w.u = w.kd + ch * GC * dkp;
    w.o0 = w.u + ch * GC * dvp, w.elast = w.o0 + ch * GC * dvp, w.state = w.elast + (ch + 63) / 64 * 64;
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

/* ---- warp-tile products with mma.sync m16n8k8 TF32, 3xTF32 (the default) ----------------
 * Fragment layouts are PTX's for mma.m16n8k8 .tf32 (g = lane / 4, t = lane % 4):
 *   A 16x8: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
 *   B 8x8:  b0 (t, g), b1 (t + 4, g)
 *   C 16x8: c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
 * Unlike WMMA's opaque fragments, these load straight from shared memory (LDS, no generic
 * addressing), split each operand once for all the tiles of a warp that use it, and split by
 * a mask: hi = x with its low 13 mantissa bits cleared (what a TF32 product reads), lo = x -
 * hi (exact in fp32; the product reads its top 10 mantissa bits), so x ~ hi + lo to ~2^-21
 * and a b ~ hi hi + hi lo + lo hi (the dropped lo lo is ~2^-20 of a b). */
__device__ __forceinline__ void gc_split(float x, uint32_t &hi, uint32_t &lo) {
    const uint32_t h = __float_as_uint(x) & 0xffffe000u;
    hi = h, lo = __float_as_uint(x - __uint_as_float(h));
}

__device__ __forceinline__ void gc_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* acc[mt][nt] (the 16x8 tile at rows r0 + 16 mt, columns n0 + 8 nt) += sum over k < K (a
 * multiple of 8) of A(m, k) B(k, n), with A(m, k) = AT ? A[k lda + m] : A[m lda + k] and
 * B(k, n) = BT ? B[n ldb + k] : B[k ldb + n]. TRI: A is lower triangular (A(m, k) = 0 for
 * k > m), so a row tile stops at its diagonal. Shared-memory strides: lda = 4 (mod 32) for a
 * row-major A, 8 for a transposed one; ldb = 8 for a row-major B, 4 for a transposed one (no
 * bank conflicts). */
template <int MT, int NT, bool AT, bool BT, bool TRI>
__device__ __forceinline__ void gc_gemm(float (&acc)[MT][NT][4], const float *A, int lda, const float *B, int ldb,
                                        int r0, int n0, int K) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 8) {
        uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int r = r0 + mt * 16 + g;
            if (TRI && k0 >= r0 + mt * 16 + 16)
                continue;
            float x[4];
            if (AT) {
                x[0] = A[(k0 + t) * lda + r], x[1] = A[(k0 + t) * lda + r + 8];
                x[2] = A[(k0 + t + 4) * lda + r], x[3] = A[(k0 + t + 4) * lda + r + 8];
            } else {
                x[0] = A[r * lda + k0 + t], x[1] = A[(r + 8) * lda + k0 + t];
                x[2] = A[r * lda + k0 + t + 4], x[3] = A[(r + 8) * lda + k0 + t + 4];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
                gc_split(x[i], ah[mt][i], al[mt][i]);
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int n = n0 + nt * 8 + g;
            const float y0 = BT ? B[n * ldb + k0 + t] : B[(k0 + t) * ldb + n];
            const float y1 = BT ? B[n * ldb + k0 + t + 4] : B[(k0 + t + 4) * ldb + n];
            gc_split(y0, bh[nt][0], bl[nt][0]);
            gc_split(y1, bh[nt][1], bl[nt][1]);
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (TRI && k0 >= r0 + mt * 16 + 16)
                continue;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                gc_mma(acc[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                gc_mma(acc[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
                gc_mma(acc[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
            }
        }
    }
}

/* ---- the same products as 3xBF16 with mma.sync m16n8k16 (the default, GC_FORM_BF16) ------
 * PTX's fragment layouts for m16n8k16 .bf16 (g = lane / 4, t = lane % 4; a register holds two
 * elements, the lower k in its low half):
 *   A 16x16: a0 (g, 2t..2t+1), a1 (g + 8, 2t..2t+1), a2 (g, 2t+8..2t+9), a3 (g + 8, 2t+8..2t+9)
 *   B 16x8:  b0 (2t..2t+1, g), b1 (2t+8..2t+9, g);  C as for m16n8k8.
 * x ~ hi + lo with hi = bf16(x) (8 significant bits, round to nearest: |x - hi| <= 2^-8 |x|)
 * and lo = bf16(x - hi) (|error| <= 2^-16 |x|); a b ~ hi hi + hi lo + lo hi drops lo lo
 * (<= 2^-16 |a b|), so a product term is good to ~2^-16, against 3xTF32's ~2^-20 — but a k-step
 * covers 16 instead of 8 at about the same cost an instruction (BF16 runs at twice TF32's
 * rate), so the tensor cores issue half as many.
 * Bank-conflict-free shared strides turn over: 8 (mod 32) for a row-major A (a pair is one
 * 64-bit load) and a transposed B, 4 for a transposed A and a row-major B (gc_pad). */
__device__ __forceinline__ void gc_split_bf(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1); /* .x = x0: the low half */
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
    hi = *reinterpret_cast<const uint32_t *>(&h), lo = *reinterpret_cast<const uint32_t *>(&l);
}

__device__ __forceinline__ void gc_mma_bf(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* gc_gemm's contract (K a multiple of 16) with 3xBF16 products. */
template <int MT, int NT, bool AT, bool BT, bool TRI>
__device__ __forceinline__ void gc_gemm_bf(float (&acc)[MT][NT][4], const float *A, int lda, const float *B, int ldb,
                                           int r0, int n0, int K) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 16) {
        uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (TRI && k0 >= r0 + mt * 16 + 16)
                continue;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = r0 + mt * 16 + g + 8 * (i & 1), k = k0 + 2 * t + 8 * (i >> 1);
                float2 x;
                if (AT)
                    x = make_float2(A[k * lda + r], A[(k + 1) * lda + r]);
                else
                    x = *reinterpret_cast<const float2 *>(A + r * lda + k);
                gc_split_bf(x.x, x.y, ah[mt][i], al[mt][i]);
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int n = n0 + nt * 8 + g;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int k = k0 + 2 * t + 8 * i;
                float2 y;
                if (BT)
                    y = *reinterpret_cast<const float2 *>(B + n * ldb + k);
                else
                    y = make_float2(B[k * ldb + n], B[(k + 1) * ldb + n]);
                gc_split_bf(y.x, y.y, bh[nt][i], bl[nt][i]);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (TRI && k0 >= r0 + mt * 16 + 16)
                continue;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                gc_mma_bf(acc[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                gc_mma_bf(acc[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
                gc_mma_bf(acc[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
            }
        }
    }
}

/* The product form of the chunked kernels: 3xBF16 (the default) or 3xTF32 (the run15 form,
 * kept for comparison and as the fallback: clef_backend_cuda_tune_gdn_products). */
#define GC_FORM_PREP_WIDE 5   /* GC_FORM_PREP, 8-byte plane stores */
#define GC_FORM_PREP 4        /* GC_FORM_PLANES, the parallel pass's T' and P split once too */
#define GC_FORM_PLANES_WIDE 3 /* GC_FORM_PLANES, 8-byte plane stores */
#define GC_FORM_PLANES 2
#define GC_FORM_BF16 1
#define GC_FORM_TF32 0
#define GC_FORM_DEFAULT GC_FORM_PREP_WIDE

template <int MT, int NT, bool AT, bool BT, bool TRI, int FORM>
__device__ __forceinline__ void gc_product(float (&acc)[MT][NT][4], const float *A, int lda, const float *B, int ldb,
                                           int r0, int n0, int K) {
    if (FORM != GC_FORM_TF32)
        gc_gemm_bf<MT, NT, AT, BT, TRI>(acc, A, lda, B, ldb, r0, n0, K);
    else
        gc_gemm<MT, NT, AT, BT, TRI>(acc, A, lda, B, ldb, r0, n0, K);
}

/* Shared-memory row padding by the role a matrix plays in the products (see above): a
 * row-major A, a transposed A, a row-major B, a transposed B. */
template <int FORM> struct gc_pad {
    static constexpr int rowA = FORM != GC_FORM_TF32 ? 8 : 4, colA = FORM != GC_FORM_TF32 ? 4 : 8;
    static constexpr int rowB = colA, colB = rowA;
};

/* The accumulator tiles of gc_gemm from / to a row-major matrix (row stride ld), or filled. */
template <int MT, int NT>
__device__ __forceinline__ void gc_tiles_load(float (&acc)[MT][NT][4], const float *C, int64_t ld, int r0, int n0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const float *c = C + (int64_t)(r0 + mt * 16 + g) * ld + n0 + nt * 8 + 2 * t;
            acc[mt][nt][0] = c[0], acc[mt][nt][1] = c[1], acc[mt][nt][2] = c[8 * ld], acc[mt][nt][3] = c[8 * ld + 1];
        }
}

template <int MT, int NT>
__device__ __forceinline__ void gc_tiles_store(const float (&acc)[MT][NT][4], float *C, int64_t ld, int r0, int n0,
                                               float sign) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            float *c = C + (int64_t)(r0 + mt * 16 + g) * ld + n0 + nt * 8 + 2 * t; /* 8-byte aligned: ld, n0 even */
            *(float2 *)c = make_float2(sign * acc[mt][nt][0], sign * acc[mt][nt][1]);
            *(float2 *)(c + 8 * ld) = make_float2(sign * acc[mt][nt][2], sign * acc[mt][nt][3]);
        }
}

template <int MT, int NT>
__device__ __forceinline__ void gc_tiles_fill(float (&acc)[MT][NT][4], float v) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mt][nt][i] = v;
}

/* Stores of accumulator tiles into a row-major matrix of rows x cols (rows and columns past
 * them dropped): the walk writes o straight from its registers. */
template <int MT, int NT>
__device__ __forceinline__ void gc_tiles_store_clip(const float (&acc)[MT][NT][4], float *C, int64_t ld, int r0,
                                                    int n0, int rows, int cols) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int r = r0 + mt * 16 + g, c = n0 + nt * 8 + 2 * t;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int rr = r + 8 * (e >> 1), cc = c + (e & 1);
                if (rr < rows && cc < cols)
                    C[(int64_t)rr * ld + cc] = acc[mt][nt][e];
            }
        }
}

/* ---- operands split once, as bf16 hi / lo planes (GC_FORM_PLANES and after) --------------
 * The run16 walk split every operand again in each warp and k-step that read it (x -> hi, lo:
 * ~6 instructions a pair); the profile of run17_gdn2 had it issue-bound at ~2,500 instructions
 * a warp and chunk. Here the parallel pass stores -W, Q' and Kd as two bf16 planes (hi =
 * bf16(x), lo = bf16(x - hi): the same bytes as fp32, the same values gc_split_bf makes), the
 * walk splits the state and v_new once where a product writes them, and every product operand
 * comes from shared memory by ldmatrix (four 8x8 bf16 tiles an instruction, in the mma
 * fragment layouts), so a k16 step of a 32 x 16 warp tile is 6 ldmatrix and 12 mma. The
 * products are the same three terms in the same order (lo hi, hi lo, hi hi). A plane pair
 * of an r x c matrix: hi [r][ld], then lo [r][ld], ld = c (global) or c + 8 (shared: rows of
 * 16 (mod 128) bytes, so the 8 rows an ldmatrix reads hit 8 different bank groups). */
#define GC_PLANE_PAD 8

__device__ __forceinline__ void gc_ldsm_x4(uint32_t (&r)[4], const __nv_bfloat16 *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void gc_ldsm_x4_t(uint32_t (&r)[4], const __nv_bfloat16 *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* acc[mt][nt] (16x8 tiles at rows r0 + 16 mt, columns n0 + 8 nt, NT = 2) += sum over k < K (a
 * multiple of 16) of A(m, k) B(k, n), both as plane pairs in shared memory (lo = hi + plane
 * offset pa / pb): A(m, k) = AT ? A[k lda + m] : A[m lda + k], B(k, n) = B[k ldb + n].
 * ldmatrix lane addresses (mat = lane / 8, i = lane % 8): a row-major A tile, rows (lane % 16)
 * at column (lane / 16) 8 (matrices a0..a3 of the fragment); a transposed one (.trans), stored
 * row k = i + 8 (mat / 2), column m = 8 (mat % 2); B (.trans, two 8-column tiles), stored row
 * k = i + 8 (mat % 2), column n = 8 (mat / 2): registers b0, b1 of the first tile, then of the
 * second. */
template <int MT, bool AT>
__device__ __forceinline__ void gc_gemm_planes(float (&acc)[MT][2][4], const __nv_bfloat16 *A, int lda, int pa,
                                               const __nv_bfloat16 *B, int ldb, int pb, int r0, int n0, int K) {
    const int lane = threadIdx.x & 31, mat = lane >> 3, i = lane & 7;
    const __nv_bfloat16 *a = AT ? A + (i + 8 * (mat >> 1)) * lda + r0 + 8 * (mat & 1) : A + (r0 + (lane & 15)) * lda + 8 * (lane >> 4);
    const __nv_bfloat16 *b = B + (i + 8 * (mat & 1)) * ldb + n0 + 8 * (mat >> 1);
    const int a_mt = AT ? 16 : 16 * lda, a_k = AT ? 16 * lda : 16; /* steps: next row tile, next k16 */
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 16, a += a_k, b += 16 * ldb) {
        uint32_t ah[MT][4], al[MT][4], bh[4], bl[4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (AT) {
                gc_ldsm_x4_t(ah[mt], a + mt * a_mt);
                gc_ldsm_x4_t(al[mt], a + mt * a_mt + pa);
            } else {
                gc_ldsm_x4(ah[mt], a + mt * a_mt);
                gc_ldsm_x4(al[mt], a + mt * a_mt + pa);
            }
        }
        gc_ldsm_x4_t(bh, b);
        gc_ldsm_x4_t(bl, b + pb);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                gc_mma_bf(acc[mt][nt], al[mt], bh[2 * nt], bh[2 * nt + 1]);
                gc_mma_bf(acc[mt][nt], ah[mt], bl[2 * nt], bl[2 * nt + 1]);
                gc_mma_bf(acc[mt][nt], ah[mt], bh[2 * nt], bh[2 * nt + 1]);
            }
    }
}

/* gc_gemm_bf's contract for a row-major, lower-triangular A (TRI) held as a plane pair in
 * shared memory (lo = hi + pa; lda = 8 (mod 64) elements: conflict-free ldmatrix) and a
 * row-major fp32 B split in the loop, as gc_gemm_bf splits it. The parallel pass's T' and -P
 * are the A of 16 warp stripes each: gc_gemm_bf split all of them again in every stripe
 * (~7 instructions a pair, ~300 a stripe); here they are split once where they are made and
 * a fragment is 2 ldmatrix. The registers hold the same halves and the mma the same three
 * terms in the same order: the same bits as gc_gemm_bf. */
template <int MT, int NT>
__device__ __forceinline__ void gc_gemm_tri_ap(float (&acc)[MT][NT][4], const __nv_bfloat16 *A, int lda, int pa,
                                               const float *B, int ldb, int r0, int n0, int K) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const __nv_bfloat16 *a = A + (r0 + (lane & 15)) * lda + 8 * (lane >> 4);
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 16) {
        uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (k0 >= r0 + mt * 16 + 16)
                continue;
            gc_ldsm_x4(ah[mt], a + mt * 16 * lda + k0);
            gc_ldsm_x4(al[mt], a + mt * 16 * lda + k0 + pa);
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int n = n0 + nt * 8 + g;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int k = k0 + 2 * t + 8 * i;
                gc_split_bf(B[k * ldb + n], B[(k + 1) * ldb + n], bh[nt][i], bl[nt][i]);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (k0 >= r0 + mt * 16 + 16)
                continue;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                gc_mma_bf(acc[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                gc_mma_bf(acc[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
                gc_mma_bf(acc[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
            }
        }
    }
}

/* Accumulator tiles (times sign) stored as a plane pair (hi, lo = hi + po), row stride ld
 * (shared or global memory): each element pair split as gc_split_bf splits it. A lane holds
 * two adjacent elements of a row per 8-column tile, so it stores 4 bytes a plane: half of a
 * 32-byte sector per instruction and row. WIDE (NT even): lanes t and t ^ 1 swap one pair, so
 * that an even lane stores columns 2t .. 2t + 3 of the first tile of two and an odd lane
 * columns 2t - 2 .. 2t + 1 of the second: 8 bytes a lane, whole sectors. */
template <bool WIDE, int MT, int NT>
__device__ __forceinline__ void gc_tiles_store_planes(const float (&acc)[MT][NT][4], __nv_bfloat16 *C, int64_t ld,
                                                      int64_t po, int r0, int n0, float sign) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (WIDE) {
        static_assert(!WIDE || NT % 2 == 0, "wide plane stores pair 8-column tiles");
        const bool odd = t & 1;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt += 2)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint32_t h0, l0, h1, l1;
                    gc_split_bf(sign * acc[mt][nt][2 * h], sign * acc[mt][nt][2 * h + 1], h0, l0);
                    gc_split_bf(sign * acc[mt][nt + 1][2 * h], sign * acc[mt][nt + 1][2 * h + 1], h1, l1);
                    const uint32_t hs = __shfl_xor_sync(0xffffffffu, odd ? h0 : h1, 1);
                    const uint32_t ls = __shfl_xor_sync(0xffffffffu, odd ? l0 : l1, 1);
                    __nv_bfloat16 *c = C + (int64_t)(r0 + mt * 16 + g + 8 * h) * ld + n0 + nt * 8 + (odd ? 6 + 2 * t : 2 * t);
                    *(uint2 *)c = odd ? make_uint2(hs, h1) : make_uint2(h0, hs);
                    *(uint2 *)(c + po) = odd ? make_uint2(ls, l1) : make_uint2(l0, ls);
                }
    } else {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    __nv_bfloat16 *c = C + (int64_t)(r0 + mt * 16 + g + 8 * h) * ld + n0 + nt * 8 + 2 * t;
                    uint32_t hi, lo;
                    gc_split_bf(sign * acc[mt][nt][2 * h], sign * acc[mt][nt][2 * h + 1], hi, lo);
                    *(uint32_t *)c = hi, *(uint32_t *)(c + po) = lo;
                }
    }
}

/* Four consecutive floats as a plane pair (two 8-byte stores). */
__device__ __forceinline__ void gc_store4_planes(__nv_bfloat16 *c, int64_t po, float4 x) {
    uint32_t h0, l0, h1, l1;
    gc_split_bf(x.x, x.y, h0, l0);
    gc_split_bf(x.z, x.w, h1, l1);
    *(uint2 *)c = make_uint2(h0, h1), *(uint2 *)(c + po) = make_uint2(l0, l1);
}

/* The plane pair of chunk-and-head ch in a [ch][64][d] fp32 scratch array (the same bytes):
 * hi [64][d] bf16, then lo. */
__device__ __forceinline__ __nv_bfloat16 *gc_planes_at(float *base, int64_t ch, int d) {
    return (__nv_bfloat16 *)(base + ch * GC * d);
}

/* Asynchronous copy of `rows` rows of row_bytes (a multiple of 16) from global (row stride
 * src_ld bytes) to shared memory (dst_ld bytes), `threads` threads. When the 16-byte pieces of
 * a row divide the thread count (every shape of the models), a thread's column stays put and
 * its rows step by a constant: no division per piece. */
__device__ __forceinline__ void gc_async_bytes(void *dst, int dst_ld, const void *src, int64_t src_ld, int rows,
                                               int row_bytes, int tid, int threads) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    const int vpr = row_bytes / 16;
    if (threads % vpr == 0) {
        const int c = (tid % vpr) * 16, step = threads / vpr;
        for (int r = tid / vpr; r < rows; r += step)
            __pipeline_memcpy_async(d + r * dst_ld + c, s + r * src_ld + c, 16);
        return;
    }
    for (int v = tid; v < rows * vpr; v += threads) {
        const int r = v / vpr, c = (v - r * vpr) * 16;
        __pipeline_memcpy_async(d + r * dst_ld + c, s + r * src_ld + c, 16);
    }
}

/* A 16x16 tile of K K^T (isp = 0) or Q K^T (isp = 1) stored with its decay mask applied
 * (GC_FORM_PREP): A_ij = beta_i exp(gamma_i - gamma_j) k_i.k_j (j < i) in fp32 (the forward
 * substitution reads it), -P_ij = -exp(gamma_i - gamma_j) q_i.k_j (j <= i) as a plane pair
 * (hi at Pp, lo at Pp + po; the products read it by ldmatrix); rows past L zero. The same
 * expressions on the same values as the separate mask pass of the other forms: the same bits. */
__device__ __forceinline__ void gc_tiles_store_masked(const float (&acc)[1][2][4], bool isp, float *As,
                                                      __nv_bfloat16 *Pp, int lda, int po, int r0, int n0,
                                                      const float *gs, const float *bs, int L) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int i = r0 + g + 8 * h, j = n0 + nt * 8 + 2 * t;
            float m[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float x = acc[0][nt][2 * h + e];
                const float dec = (j + e <= i && i < L) ? expf(gs[i] - gs[j + e]) : 0.0f;
                m[e] = isp ? (j + e <= i ? -dec * x : 0.0f) : (j + e < i ? bs[i] * dec * x : 0.0f);
            }
            if (isp) {
                uint32_t hi, lo;
                gc_split_bf(m[0], m[1], hi, lo);
                *(uint32_t *)(Pp + i * lda + j) = hi, *(uint32_t *)(Pp + po + i * lda + j) = lo;
            } else {
                *(float2 *)(As + i * lda + j) = make_float2(m[0], m[1]);
            }
        }
}

static size_t gdn_prep_smem(int64_t dk, int64_t dv, int form) {
    const int pa = form != GC_FORM_TF32 ? gc_pad<GC_FORM_BF16>::rowA : gc_pad<GC_FORM_TF32>::rowA;
    const int pb = form != GC_FORM_TF32 ? gc_pad<GC_FORM_BF16>::rowB : gc_pad<GC_FORM_TF32>::rowB;
    const int ldk = gdn_dkp(dk) + pa, ldv = gdn_dvp(dv) + pb;
    return sizeof(float) * (size_t)(GC * (ldk > ldv ? ldk : ldv) + GC * ldk + 2 * GC * (GC + pa) + 6 * GC);
}

/* The parallel pass: one block per (chunk, v-head), 8 warps, all independent. Loads the chunk's
 * q, k (of the head's k-head), v, g, beta; L2-normalises q and k; cumulative decay gamma; then
 *   A = beta exp(gamma_i - gamma_j) k_i.k_j (j < i),  -P = -exp(gamma_i - gamma_j) q_i.k_j (j <= i)
 *   T' = (I + A)^-1 diag(beta) (forward substitution, one thread per column, while v arrives
 *   by cp.async), W = T' (exp(gamma) k),  U = T' v,  Q' = exp(gamma) q - P W,  O0 = P U
 * (GC_FORM_PREP and its wide form: the masks applied where K K^T and Q K^T are stored, T' and
 * -P kept as bf16 plane pairs over the same shared bytes, read by ldmatrix)
 * and writes -W, Q', Kd = exp(gamma_last - gamma) k, U, O0, exp(gamma_last) (gdn_seg_ws).
 * Products on the tensor cores (gc_product: 3xBF16 or 3xTF32). Rows past the sequence's end
 * are zero everywhere. Element-wise passes go a row per warp, four columns a lane (float4). */
template <int FORM>
__global__ void __launch_bounds__(GC_PREP_THREADS, 2) k_gdn_prep(clef_gdn_args a, int64_t c0, gdn_seg_ws w) {
    extern __shared__ __align__(128) float gp_smem[];
    typedef gc_pad<FORM> pad;
    const int dk = (int)a.dk, dv = (int)a.dv, dkp = gdn_dkp(a.dk), dvp = gdn_dvp(a.dv);
    const int ldk = dkp + pad::rowA, ldv = dvp + pad::rowB, ldqv = ldk > ldv ? ldk : ldv, lda = GC + pad::rowA;
    float *Qs = gp_smem;        /* [64][ldk]: q^; later Vs [64][ldv]: v, then U */
    float *Vs = Qs;
    float *Ks = Qs + GC * ldqv; /* [64][ldk]: k^, then exp(gamma) k^, then W */
    float *As = Ks + GC * ldk;  /* [64][lda]: A, then T' */
    float *Ps = As + GC * lda;  /* [64][lda]: -P */
    float *gs = Ps + GC * lda, *bs = gs + GC, *iq = bs + GC, *ik = iq + GC, *eg = ik + GC, *ed = eg + GC;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    constexpr int NW = GC_PREP_THREADS / 32;
    constexpr bool WIDE = FORM == GC_FORM_PLANES_WIDE || FORM == GC_FORM_PREP_WIDE;
    constexpr bool PREP = FORM >= GC_FORM_PREP; /* T' and -P as plane pairs over As and Ps */
    __nv_bfloat16 *Tp = (__nv_bfloat16 *)As, *Pp = (__nv_bfloat16 *)Ps; /* hi [64][lda], lo */
    const int ppo = GC * lda;                                            /* lo plane offset */
    const int64_t h = blockIdx.y, Hv = a.n_v_heads, kh = h / (Hv / a.n_k_heads);
    const int64_t ch = (int64_t)blockIdx.x * Hv + h;
    const int64_t t0 = (c0 + blockIdx.x) * GC;
    const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);

    const float *qg = a.q + t0 * a.ldq + kh * dk, *kg = a.k + t0 * a.ldk + kh * dk;
    const bool vec = (dk & 3) == 0 && (a.ldq & 3) == 0 && (a.ldk & 3) == 0 && (((uintptr_t)a.q | (uintptr_t)a.k) & 15) == 0;
    if (vec) { /* 16-byte rows: all of the chunk's q and k in flight at once (cp.async) */
        const int vpr = dkp / 4;
        for (int v = tid; v < 2 * GC * vpr; v += GC_PREP_THREADS) {
            const int isk = v >= GC * vpr, vv = v - isk * GC * vpr, r = vv / vpr, d = (vv - r * vpr) * 4;
            float *dst = (isk ? Ks : Qs) + r * ldk + d;
            if (r < L && d < dk)
                __pipeline_memcpy_async(dst, (isk ? kg + r * a.ldk : qg + r * a.ldq) + d, 16);
            else
                *(float4 *)dst = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        __pipeline_commit();
        __pipeline_wait_prior(0);
    } else {
        gc_copy2(GC * dkp, tid, GC_PREP_THREADS,
                 [&](int i) { int r = i / dkp, d = i - r * dkp; return (r < L && d < dk) ? qg[r * a.ldq + d] : 0.0f; },
                 [&](int i, float x) { int r = i / dkp, d = i - r * dkp; Qs[r * ldk + d] = x; },
                 [&](int i) { int r = i / dkp, d = i - r * dkp; return (r < L && d < dk) ? kg[r * a.ldk + d] : 0.0f; },
                 [&](int i, float x) { int r = i / dkp, d = i - r * dkp; Ks[r * ldk + d] = x; });
    }
    if (tid < GC) {
        gs[tid] = tid < L ? a.g[(t0 + tid) * Hv + h] : 0.0f;
        bs[tid] = tid < L ? a.beta[(t0 + tid) * Hv + h] : 0.0f;
    }
    __syncthreads();
    /* norms as the recurrent kernel: q / sqrt(sum q^2 + 1e-6) / sqrt(dk), k / sqrt(sum k^2 + 1e-6) */
    for (int r = warp; r < GC; r += NW) {
        float sq = 0.0f, sk = 0.0f;
        for (int d = lane; d < dkp; d += 32) {
            const float x = Qs[r * ldk + d], y = Ks[r * ldk + d];
            sq += x * x, sk += y * y;
        }
        sq = warp_sum(sq), sk = warp_sum(sk);
        if (lane == 0) {
            iq[r] = a.l2norm_qk ? 1.0f / sqrtf(sq + 1e-6f) : 1.0f;
            ik[r] = a.l2norm_qk ? 1.0f / sqrtf(sk + 1e-6f) : 1.0f;
        }
    }
    if (warp == 0) { /* cumulative log decay (inclusive scan, two rows a lane); rows past L add 0 */
        const float x0 = gs[2 * lane], x1 = gs[2 * lane + 1];
        float s = x0 + x1;
        for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o)
                s += y;
        }
        float before = __shfl_up_sync(0xffffffffu, s, 1);
        if (lane == 0)
            before = 0.0f;
        gs[2 * lane] = before + x0, gs[2 * lane + 1] = s;
    }
    __syncthreads();
    if (tid < GC)
        eg[tid] = expf(gs[tid]), ed[tid] = expf(gs[GC - 1] - gs[tid]); /* gs[63] = gamma at row L - 1 */
    __syncthreads();
    const float scale = 1.0f / sqrtf((float)dk);
    {
        float *kd = w.kd + ch * GC * dkp, *qp = w.qp + ch * GC * dkp;
        for (int r = warp; r < GC; r += NW) {
            const float fq = iq[r], fk = ik[r], fe = eg[r], fd = ed[r];
            for (int d = 4 * lane; d < dkp; d += 128) {
                float4 x = *(float4 *)(Qs + r * ldk + d), y = *(float4 *)(Ks + r * ldk + d);
                x.x = (x.x * fq) * scale, x.y = (x.y * fq) * scale, x.z = (x.z * fq) * scale, x.w = (x.w * fq) * scale;
                y.x *= fk, y.y *= fk, y.z *= fk, y.w *= fk;
                *(float4 *)(Qs + r * ldk + d) = x, *(float4 *)(Ks + r * ldk + d) = y;
                const float4 kdv = make_float4(fd * y.x, fd * y.y, fd * y.z, fd * y.w);
                if (FORM >= GC_FORM_PLANES)
                    gc_store4_planes((__nv_bfloat16 *)kd + r * dkp + d, GC * dkp, kdv);
                else
                    *(float4 *)(kd + r * dkp + d) = kdv;
                /* exp(gamma) q, fp32 (for GC_FORM_PLANES only until the Q' product reads it);
                 * Q' is made from it below */
                *(float4 *)(qp + r * dkp + d) = make_float4(fe * x.x, fe * x.y, fe * x.z, fe * x.w);
            }
        }
        if (tid == 0)
            w.elast[ch] = expf(gs[GC - 1]);
    }
    __syncthreads();
    /* K K^T and Q K^T on their 10 lower 16x16 tiles each (the upper ones are masked away) */
    for (int p = warp; p < 20; p += NW) {
        const int isp = p >= 10, t = p - 10 * isp;
        int ti = 0;
        while ((ti + 1) * (ti + 2) / 2 <= t)
            ti++;
        const int tj = t - ti * (ti + 1) / 2;
        const float *X = isp ? Qs : Ks;
        float acc[1][2][4];
        gc_tiles_fill(acc, 0.0f);
        gc_product<1, 2, false, true, false, FORM>(acc, X, ldk, Ks, ldk, ti * 16, tj * 16, dkp); /* B = K^T */
        if (PREP) /* the masks below applied here, to the same values: A in fp32, -P as planes */
            gc_tiles_store_masked(acc, isp, As, Pp, lda, ppo, ti * 16, tj * 16, gs, bs, L);
        else
            gc_tiles_store(acc, isp ? Ps : As, lda, ti * 16, tj * 16, 1.0f);
    }
    __syncthreads(); /* q^ no longer read: v may land over it */
    const float *vg = a.v + t0 * a.ldv + h * dv;
    const bool vvec = (dv & 3) == 0 && (a.ldv & 3) == 0 && ((uintptr_t)a.v & 15) == 0;
    if (vvec) { /* v in flight while the masks and the solve run */
        const int vpr = dvp / 4;
        for (int v = tid; v < GC * vpr; v += GC_PREP_THREADS) {
            const int r = v / vpr, c = (v - r * vpr) * 4;
            float *dst = Vs + r * ldv + c;
            if (r < L && c < dv)
                __pipeline_memcpy_async(dst, vg + (int64_t)r * a.ldv + c, 16);
            else
                *(float4 *)dst = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        __pipeline_commit();
    }
    for (int idx = tid; !PREP && idx < GC * GC / 4; idx += GC_PREP_THREADS) {
        const int i = idx >> 4, j0 = (idx & 15) * 4;
        const float4 av = *(const float4 *)(As + i * lda + j0), pv = *(const float4 *)(Ps + i * lda + j0);
        const float ai[4] = {av.x, av.y, av.z, av.w}, pi[4] = {pv.x, pv.y, pv.z, pv.w};
        float ao[4], po[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int j = j0 + e;
            const float dec = (j <= i && i < L) ? expf(gs[i] - gs[j]) : 0.0f;
            ao[e] = j < i ? bs[i] * dec * ai[e] : 0.0f;
            po[e] = j <= i ? -dec * pi[e] : 0.0f;
        }
        *(float4 *)(As + i * lda + j0) = make_float4(ao[0], ao[1], ao[2], ao[3]);
        *(float4 *)(Ps + i * lda + j0) = make_float4(po[0], po[1], po[2], po[3]);
    }
    for (int r = warp; r < GC; r += NW) {
        const float f = eg[r];
        for (int d = 4 * lane; d < dkp; d += 128) {
            float4 *p = (float4 *)(Ks + r * ldk + d);
            const float4 y = *p;
            *p = make_float4(f * y.x, f * y.y, f * y.z, f * y.w);
        }
    }
    __syncthreads();
    /* (I + A)^-1 by columns (warps 0-1; registers indexed by unrolled constants only) while v
     * arrives (cp.async) or, for rows that are not 16-byte aligned, the other warps load it */
    float x[GC];
    if (tid < GC) {
        const int j = tid;
#pragma unroll
        for (int i = 0; i < GC; i++) {
            float s[4] = {i == j ? 1.0f : 0.0f, 0.0f, 0.0f, 0.0f}; /* 4 chains: a quarter of the latency */
#pragma unroll
            for (int m = 0; m < i; m++)
                s[m & 3] -= As[i * lda + m] * x[m];
            x[i] = (s[0] + s[1]) + (s[2] + s[3]);
        }
    } else if (!vvec) {
        gc_copy(GC * dvp, tid - GC, GC_PREP_THREADS - GC,
                [&](int i) {
                    int r = i / dvp, c = i - r * dvp;
                    return (r < L && c < dv) ? vg[r * a.ldv + c] : 0.0f;
                },
                [&](int i, float v) { int r = i / dvp, c = i - r * dvp; Vs[r * ldv + c] = v; });
    }
    if (vvec)
        __pipeline_wait_prior(0);
    __syncthreads(); /* every read of A done; v in place */
    if (tid < GC) { /* T' = (I + A)^-1 diag(beta): column j scaled by beta_j */
        const float bj = bs[tid];
#pragma unroll
        for (int i = 0; i < GC; i++) {
            if (PREP) { /* split as gc_split_bf splits it (element-wise round to nearest) */
                const float v = x[i] * bj;
                const __nv_bfloat16 hi = __float2bfloat16_rn(v);
                Tp[i * lda + tid] = hi, Tp[ppo + i * lda + tid] = __float2bfloat16_rn(v - __bfloat162float(hi));
            } else {
                As[i * lda + tid] = x[i] * bj;
            }
        }
    }
    __syncthreads();
    /* W = T' (exp(gamma) k) and U = T' v, one 16-column stripe per warp at a time: a stripe's
     * product reads only that stripe, so it overwrites it in place. T' is lower triangular:
     * row tile ri needs its first 16 (ri + 1) columns. */
    const int nsk = dkp / 16, nst = nsk + dvp / 16;
    for (int s = warp; s < nst; s += NW) {
        const bool isw = s < nsk;
        const int cj = isw ? s : s - nsk, ldb = isw ? ldk : ldv;
        float *B = (isw ? Ks : Vs) + cj * 16;
        float *dst = isw ? w.wn + ch * GC * dkp + cj * 16 : w.u + ch * GC * dvp + cj * 16;
        const int ldd = isw ? dkp : dvp;
        float acc[4][2][4];
        gc_tiles_fill(acc, 0.0f);
        if (PREP)
            gc_gemm_tri_ap<4, 2>(acc, Tp, lda, ppo, B, ldb, 0, 0, GC);
        else
            gc_product<4, 2, false, false, true, FORM>(acc, As, lda, B, ldb, 0, 0, GC);
        __syncwarp(); /* every lane's reads of the stripe done */
        gc_tiles_store(acc, B, ldb, 0, 0, 1.0f);
        if (FORM >= GC_FORM_PLANES && isw)
            gc_tiles_store_planes<WIDE>(acc, gc_planes_at(w.wn, ch, dkp) + cj * 16, dkp, GC * dkp, 0, 0, -1.0f);
        else
            gc_tiles_store(acc, dst, ldd, 0, 0, isw ? -1.0f : 1.0f);
    }
    __syncthreads();
    if (FORM >= GC_FORM_PLANES) {
        /* Q' = exp(gamma) q + (-P) W as a plane pair over the fp32 exp(gamma) q it starts from:
         * a warp's Q' stripe (one at most: dkp <= 128 makes nsk <= NW) reads its fp32 columns
         * first, and the planes, whose bytes overlap other warps' columns, are written after
         * a barrier. Then O0 = -((-P) U) as before. */
        float acc[4][2][4];
        if (warp < nsk)
            gc_tiles_load(acc, w.qp + ch * GC * dkp + warp * 16, dkp, 0, 0);
        __syncthreads();
        if (warp < nsk) {
            if (PREP)
                gc_gemm_tri_ap<4, 2>(acc, Pp, lda, ppo, Ks + warp * 16, ldk, 0, 0, GC);
            else
                gc_product<4, 2, false, false, true, FORM>(acc, Ps, lda, Ks + warp * 16, ldk, 0, 0, GC);
            gc_tiles_store_planes<WIDE>(acc, gc_planes_at(w.qp, ch, dkp) + warp * 16, dkp, GC * dkp, 0, 0, 1.0f);
        }
        for (int s = nsk + warp; s < nst; s += NW) {
            const int cj = s - nsk;
            gc_tiles_fill(acc, 0.0f);
            if (PREP)
                gc_gemm_tri_ap<4, 2>(acc, Pp, lda, ppo, Vs + cj * 16, ldv, 0, 0, GC);
            else
                gc_product<4, 2, false, false, true, FORM>(acc, Ps, lda, Vs + cj * 16, ldv, 0, 0, GC);
            gc_tiles_store(acc, w.o0 + ch * GC * dvp + cj * 16, dvp, 0, 0, -1.0f);
        }
    } else {
        /* Q' = exp(gamma) q + (-P) W (over the exp(gamma) q written above), O0 = -((-P) U); -P is
         * lower triangular too */
        for (int s = warp; s < nst; s += NW) {
            const bool isw = s < nsk;
            const int cj = isw ? s : s - nsk, ldb = isw ? ldk : ldv;
            const float *B = (isw ? Ks : Vs) + cj * 16;
            float *dst = isw ? w.qp + ch * GC * dkp + cj * 16 : w.o0 + ch * GC * dvp + cj * 16;
            const int ldd = isw ? dkp : dvp;
            float acc[4][2][4];
            if (isw)
                gc_tiles_load(acc, dst, ldd, 0, 0);
            else
                gc_tiles_fill(acc, 0.0f);
            gc_product<4, 2, false, false, true, FORM>(acc, Ps, lda, B, ldb, 0, 0, GC);
            gc_tiles_store(acc, dst, ldd, 0, 0, isw ? 1.0f : -1.0f);
        }
    }
}

static size_t gdn_walk_smem(int64_t dk, int nc, int form) {
    const int dkp = gdn_dkp(dk);
    const int ra = form == GC_FORM_BF16 ? gc_pad<GC_FORM_BF16>::rowA : gc_pad<GC_FORM_TF32>::rowA;
    const int ca = form == GC_FORM_BF16 ? gc_pad<GC_FORM_BF16>::colA : gc_pad<GC_FORM_TF32>::colA;
    const int rb = form == GC_FORM_BF16 ? gc_pad<GC_FORM_BF16>::rowB : gc_pad<GC_FORM_TF32>::rowB;
    return sizeof(float) * (size_t)(2 * GC * (dkp + ra) + GC * (dkp + ca) + (3 * GC + dkp) * (nc + rb));
}

/* The only sequential pass. One block per (NC value columns, v-head), 16 warps, walks the
 * segment's n chunks in order with its columns of S in shared memory (the columns of S are
 * independent: S[:, cols] needs all of W but only its own columns of U and O0):
 *   [v_new; o] = [U; O0] + [-W; Q'] S       (o stored from the registers: no per-chunk state)
 *   S = exp(gamma_last) S + Kd^T v_new
 * While the first product runs, Kd (and exp(gamma_last)) are on their way; while the second
 * runs, the next chunk's -W, Q', U and O0 (cp.async). st: the carried state [Hv][dk][dv], read
 * at the start unless st_zero, written at the end. Products: gc_product warp tiles of
 * (16 MT) x 16. */
template <int NC, int FORM>
__global__ void __launch_bounds__(GC_WALK_WARPS * 32, 1)
    k_gdn_walk(clef_gdn_args a, int64_t c0, int64_t n, gdn_seg_ws w, float *st, int st_zero) {
    extern __shared__ __align__(128) float gw_smem[];
    typedef gc_pad<FORM> pad;
    const int dk = (int)a.dk, dv = (int)a.dv, dkp = gdn_dkp(a.dk), dvp = gdn_dvp(a.dv);
    const int ldk = dkp + pad::rowA, ldkb = dkp + pad::colA;
    constexpr int ldn = NC + pad::rowB, NT = GC_WALK_WARPS * 32, CT = NC / 16, MT = NC == 64 ? 2 : 1;
    float *WQ = gw_smem;           /* [128][ldk]: -W rows, then Q' rows */
    float *Kb = WQ + 2 * GC * ldk; /* [64][ldkb]: Kd */
    float *UO = Kb + GC * ldkb;    /* [128][ldn]: U rows, then O0 rows (this block's columns) */
    float *Ss = UO + 2 * GC * ldn; /* [dkp][ldn]: the state's columns */
    float *Vn = Ss + dkp * ldn;    /* [64][ldn]: v_new */
    const int tid = threadIdx.x, warp = tid >> 5;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads;
    const int j0 = blockIdx.x * NC;
    float *sth = st + h * a.dk * a.dv;

    for (int idx = tid; idx < dkp * NC; idx += NT) {
        const int i = idx / NC, j = idx - i * NC;
        Ss[i * ldn + j] = (!st_zero && i < dk && j0 + j < dv) ? sth[(int64_t)i * dv + j0 + j] : 0.0f;
    }
    auto load_wu = [&](int64_t c) { /* -W, Q', U, O0 of chunk c: one commit group (maybe empty) */
        if (c < n) {
            const int64_t ch = c * Hv + h;
            gc_async_rows(WQ, ldk, w.wn + ch * GC * dkp, dkp, GC, dkp, tid, NT);
            gc_async_rows(WQ + GC * ldk, ldk, w.qp + ch * GC * dkp, dkp, GC, dkp, tid, NT);
            gc_async_rows(UO, ldn, w.u + ch * GC * dvp + j0, dvp, GC, NC, tid, NT);
            gc_async_rows(UO + GC * ldn, ldn, w.o0 + ch * GC * dvp + j0, dvp, GC, NC, tid, NT);
        }
        __pipeline_commit();
    };
    auto load_k = [&](int64_t c) { /* Kd of chunk c: one commit group (maybe empty) */
        if (c < n)
            gc_async_rows(Kb, ldkb, w.kd + (c * Hv + h) * GC * dkp, dkp, GC, dkp, tid, NT);
        __pipeline_commit();
    };
    load_wu(0);
    load_k(0);
    for (int64_t c = 0; c < n; c++) {
        const int64_t ch = c * Hv + h, t0 = (c0 + c) * GC;
        const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);
        const float el = w.elast[ch]; /* first needed after the first product */
        __pipeline_wait_prior(1);     /* groups complete in order: this chunk's -W, Q', U, O0 */
        __syncthreads();              /* ... for every thread, and the last update of S */
        /* 128 rows x NC columns in (16 MT) x 16 warp tiles: 16 of them; the o rows go out */
        for (int p = warp; p < (8 / MT) * CT; p += GC_WALK_WARPS) {
            const int r0 = (p / CT) * 16 * MT, n0 = (p - (p / CT) * CT) * 16;
            float acc[MT][2][4];
            gc_tiles_load(acc, UO, ldn, r0, n0);
            gc_product<MT, 2, false, false, false, FORM>(acc, WQ, ldk, Ss, ldn, r0, n0, dkp);
            if (r0 < GC)
                gc_tiles_store(acc, Vn, ldn, r0, n0, 1.0f);
            else
                gc_tiles_store_clip(acc, a.o + t0 * a.ldo + h * dv + j0, a.ldo, r0 - GC, n0, L, dv - j0);
        }
        __pipeline_wait_prior(0); /* Kd */
        __syncthreads();          /* v_new complete; -W, Q', U, O0 and S read */
        load_wu(c + 1);
        /* dkp rows x NC columns, (16 MT) x 16 warp tiles; A = Kd^T */
        for (int p = warp; p < (dkp / (16 * MT)) * CT; p += GC_WALK_WARPS) {
            const int r0 = (p / CT) * 16 * MT, n0 = (p - (p / CT) * CT) * 16;
            float acc[MT][2][4];
            gc_tiles_load(acc, Ss, ldn, r0, n0);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < 2; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[mt][nt][e] *= el;
            gc_product<MT, 2, true, false, false, FORM>(acc, Kb, ldkb, Vn, ldn, r0, n0, GC);
            gc_tiles_store(acc, Ss, ldn, r0, n0, 1.0f);
        }
        __syncthreads(); /* Kd and v_new read */
        load_k(c + 1);
    }
    for (int idx = tid; idx < dk * NC; idx += NT) {
        const int i = idx / NC, j = idx - i * NC;
        if (j0 + j < dv)
            sth[(int64_t)i * dv + j0 + j] = Ss[i * ldn + j];
    }
}

static size_t gdn_walk_planes_smem(int64_t dk, int nc) {
    const size_t ldk = (size_t)gdn_dkp(dk) + GC_PLANE_PAD, ldn = (size_t)nc + GC_PLANE_PAD;
    return sizeof(float) * 2 * GC * (size_t)(nc + 4) +
           sizeof(__nv_bfloat16) * 2 * (2 * GC * ldk + GC * ldk + (size_t)gdn_dkp(dk) * ldn + GC * ldn);
}

/* The walk over plane pairs (GC_FORM_PLANES): k_gdn_walk's blocks, passes and cp.async order,
 * with every product operand a bf16 plane pair read by ldmatrix (gc_gemm_planes) and the
 * state in registers: a warp owns one (16 MT) x 16 tile of S[:, cols] for the whole walk (the
 * update's 16 tiles, one a warp), scales and updates it in its accumulators, and writes it
 * split into the shared plane pair the next chunk's first product reads. v_new is split
 * where the first product writes it. U and O0 stay fp32 (they only start accumulators). */
template <int NC>
__global__ void __launch_bounds__(GC_WALK_WARPS * 32, 1)
    k_gdn_walk_planes(clef_gdn_args a, int64_t c0, int64_t n, gdn_seg_ws w, float *st, int st_zero) {
    extern __shared__ __align__(128) float gw_smem[];
    const int dk = (int)a.dk, dv = (int)a.dv, dkp = gdn_dkp(a.dk), dvp = gdn_dvp(a.dv);
    const int ldk = dkp + GC_PLANE_PAD;
    constexpr int ldn = NC + GC_PLANE_PAD, ldu = NC + 4, NT = GC_WALK_WARPS * 32, CT = NC / 16, MT = NC == 64 ? 2 : 1;
    float *UO = gw_smem;                                            /* [128][ldu] fp32: U rows, then O0 rows */
    __nv_bfloat16 *WQ = (__nv_bfloat16 *)(UO + 2 * GC * ldu);       /* pair of [128][ldk]: -W rows, then Q' */
    __nv_bfloat16 *Kb = WQ + 2 * (2 * GC * ldk);                    /* pair of [64][ldk]: Kd */
    __nv_bfloat16 *Sp = Kb + 2 * (GC * ldk);                        /* pair of [dkp][ldn]: the state's columns */
    __nv_bfloat16 *Vp = Sp + 2 * (dkp * ldn);                       /* pair of [64][ldn]: v_new */
    const int pWQ = 2 * GC * ldk, pK = GC * ldk, pS = dkp * ldn, pV = GC * ldn;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads;
    const int j0 = blockIdx.x * NC;
    float *sth = st + h * a.dk * a.dv;
    /* this warp's state tile (rows sr0 + ..., columns sn0 + ...), if it has one */
    const bool owner = warp < (dkp / (16 * MT)) * CT;
    const int sr0 = (warp / CT) * 16 * MT, sn0 = (warp - (warp / CT) * CT) * 16;
    float S[MT][2][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = sr0 + mt * 16 + g + 8 * (e >> 1), j = sn0 + nt * 8 + 2 * t + (e & 1);
                S[mt][nt][e] = (owner && !st_zero && i < dk && j0 + j < dv) ? sth[(int64_t)i * dv + j0 + j] : 0.0f;
            }
    if (owner)
        gc_tiles_store_planes<false>(S, Sp, ldn, pS, sr0, sn0, 1.0f);

    auto load_wu = [&](int64_t c) { /* -W, Q', U, O0 of chunk c: one commit group (maybe empty) */
        if (c < n) {
            const int64_t ch = c * Hv + h;
            const __nv_bfloat16 *wn = gc_planes_at(w.wn, ch, dkp), *qp = gc_planes_at(w.qp, ch, dkp);
            const int rb = dkp * 2, lb = ldk * 2; /* bytes: a global row, a shared row */
            gc_async_bytes(WQ, lb, wn, rb, GC, rb, tid, NT);                      /* -W hi */
            gc_async_bytes(WQ + pWQ, lb, wn + GC * dkp, rb, GC, rb, tid, NT);     /* -W lo */
            gc_async_bytes(WQ + GC * ldk, lb, qp, rb, GC, rb, tid, NT);            /* Q' hi */
            gc_async_bytes(WQ + pWQ + GC * ldk, lb, qp + GC * dkp, rb, GC, rb, tid, NT);
            gc_async_bytes(UO, ldu * 4, w.u + ch * GC * dvp + j0, dvp * 4, GC, NC * 4, tid, NT);
            gc_async_bytes(UO + GC * ldu, ldu * 4, w.o0 + ch * GC * dvp + j0, dvp * 4, GC, NC * 4, tid, NT);
        }
        __pipeline_commit();
    };
    auto load_k = [&](int64_t c) { /* Kd of chunk c: one commit group (maybe empty) */
        if (c < n) {
            const __nv_bfloat16 *kd = gc_planes_at(w.kd, c * Hv + h, dkp);
            gc_async_bytes(Kb, ldk * 2, kd, dkp * 2, GC, dkp * 2, tid, NT);
            gc_async_bytes(Kb + pK, ldk * 2, kd + GC * dkp, dkp * 2, GC, dkp * 2, tid, NT);
        }
        __pipeline_commit();
    };
    load_wu(0);
    load_k(0);
    /* the first product's tile of this warp: 128 rows x NC columns in 16 (16 MT) x 16 tiles */
    const int pr0 = (warp / CT) * 16 * MT, pn0 = (warp - (warp / CT) * CT) * 16;
    for (int64_t c = 0; c < n; c++) {
        const int64_t ch = c * Hv + h, t0 = (c0 + c) * GC;
        const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);
        const float el = w.elast[ch]; /* first needed after the first product */
        __pipeline_wait_prior(1);     /* groups complete in order: this chunk's -W, Q', U, O0 */
        __syncthreads();              /* ... for every thread, and the state's planes */
        {
            float acc[MT][2][4];
            gc_tiles_load(acc, UO, ldu, pr0, pn0);
            gc_gemm_planes<MT, false>(acc, WQ, ldk, pWQ, Sp, ldn, pS, pr0, pn0, dkp);
            if (pr0 < GC)
                gc_tiles_store_planes<false>(acc, Vp, ldn, pV, pr0, pn0, 1.0f);
            else
                gc_tiles_store_clip(acc, a.o + t0 * a.ldo + h * dv + j0, a.ldo, pr0 - GC, pn0, L, dv - j0);
        }
        __pipeline_wait_prior(0); /* Kd */
        __syncthreads();          /* v_new complete; -W, Q', U, O0 and the state's planes read */
        load_wu(c + 1);
        if (owner) { /* S = exp(gamma_last) S + Kd^T v_new; A = Kd^T (transposed planes) */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < 2; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        S[mt][nt][e] *= el;
            gc_gemm_planes<MT, true>(S, Kb, ldk, pK, Vp, ldn, pV, sr0, sn0, GC);
            gc_tiles_store_planes<false>(S, Sp, ldn, pS, sr0, sn0, 1.0f);
        }
        __syncthreads(); /* Kd and v_new read */
        load_k(c + 1);
    }
    if (owner)
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = sr0 + mt * 16 + g + 8 * (e >> 1), j = sn0 + nt * 8 + 2 * t + (e & 1);
                    if (i < dk && j0 + j < dv)
                        sth[(int64_t)i * dv + j0 + j] = S[mt][nt][e];
                }
}

/* Value columns per walk block: 32 while the (columns, head) blocks fit the device's
 * multiprocessors in one wave (one block each: the walk's shared memory), else 64. */
static int gdn_slice_cols(clef_backend *be, int64_t Hv, int dvp) {
    if (gc_slice_tuned && dvp % gc_slice_tuned == 0)
        return gc_slice_tuned;
    if (dvp % 64)
        return 32;
    return Hv * (dvp / 32) <= cuda_sm_count(be) ? 32 : 64;
}

static bool gdn_chunked_fits(const cuda_context *ctx, const clef_gdn_args *args) {
    return args->mode == CLEF_GDN_CHUNKED && (GC_BY_DEFAULT || ctx->gdn_chunked) && args->dk <= GC_MAX_D &&
           args->dv <= GC_MAX_D;
}

/* The product form: clef_backend_cuda_tune_gdn_products, else the environment's
 * CLEF_GDN_PRODUCTS (tf32x3 | bf16x3 | bf16x3-planes[-wide] | bf16x3-prep[-wide]: whole-model
 * comparisons without a rebuild), else GC_FORM_DEFAULT. */
static int gdn_products_form(void) {
    if (gc_products_tuned)
        return gc_products_tuned == CLEF_GDN_PRODUCTS_TF32X3         ? GC_FORM_TF32
               : gc_products_tuned == CLEF_GDN_PRODUCTS_BF16X3        ? GC_FORM_BF16
               : gc_products_tuned == CLEF_GDN_PRODUCTS_BF16X3_PLANES ? GC_FORM_PLANES
               : gc_products_tuned == CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE ? GC_FORM_PLANES_WIDE
               : gc_products_tuned == CLEF_GDN_PRODUCTS_BF16X3_PREP  ? GC_FORM_PREP
                                                                      : GC_FORM_PREP_WIDE;
    static int from_env = -1; /* read once; a racing first read stores the same value */
    if (from_env < 0) {
        const char *v = getenv("CLEF_GDN_PRODUCTS");
        from_env = v && !strcmp(v, "tf32x3")          ? GC_FORM_TF32
                   : v && !strcmp(v, "bf16x3")        ? GC_FORM_BF16
                   : v && !strcmp(v, "bf16x3-planes") ? GC_FORM_PLANES
                   : v && !strcmp(v, "bf16x3-planes-wide") ? GC_FORM_PLANES_WIDE
                   : v && !strcmp(v, "bf16x3-prep") ? GC_FORM_PREP
                   : v && !strcmp(v, "bf16x3-prep-wide") ? GC_FORM_PREP_WIDE
                                                      : GC_FORM_DEFAULT;
    }
    return from_env;
}

/* One sequence, segment by segment: the parallel pass, then the walk (two launches each). */
static void gdn_chunked(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t n_chunks = gdn_chunks(args->T), Hv = args->n_v_heads;
    const int64_t seg = gdn_seg_chunks(n_chunks);
    float *base = (float *)(((uintptr_t)scratch + 255) & ~(uintptr_t)255); /* workspace_size has the slack */
    gdn_seg_ws w = gdn_seg_ws_at(base, seg, Hv, args->dk, args->dv);
    const int dvp = gdn_dvp(args->dv), nc = gdn_slice_cols(be, Hv, dvp);
    const int form = gdn_products_form();
    const size_t prep_smem = gdn_prep_smem(args->dk, args->dv, form);
    const size_t walk_smem = form >= GC_FORM_PLANES ? gdn_walk_planes_smem(args->dk, nc) : gdn_walk_smem(args->dk, nc, form);
    void (*prep)(clef_gdn_args, int64_t, gdn_seg_ws) = form == GC_FORM_PREP_WIDE ? k_gdn_prep<GC_FORM_PREP_WIDE>
                                                       : form == GC_FORM_PREP ? k_gdn_prep<GC_FORM_PREP>
                                                       : form == GC_FORM_PLANES_WIDE ? k_gdn_prep<GC_FORM_PLANES_WIDE>
                                                       : form == GC_FORM_PLANES ? k_gdn_prep<GC_FORM_PLANES>
                                                       : form == GC_FORM_BF16 ? k_gdn_prep<GC_FORM_BF16>
                                                                              : k_gdn_prep<GC_FORM_TF32>;
    void (*walk)(clef_gdn_args, int64_t, int64_t, gdn_seg_ws, float *, int) =
        form >= GC_FORM_PLANES ? (nc == 32 ? k_gdn_walk_planes<32> : k_gdn_walk_planes<64>)
        : form == GC_FORM_BF16 ? (nc == 32 ? k_gdn_walk<32, GC_FORM_BF16> : k_gdn_walk<64, GC_FORM_BF16>)
                               : (nc == 32 ? k_gdn_walk<32, GC_FORM_TF32> : k_gdn_walk<64, GC_FORM_TF32>);
    cuda_record(be, cudaFuncSetAttribute(prep, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prep_smem),
                "gdn chunk pass shared memory");
    cuda_record(be, cudaFuncSetAttribute(walk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)walk_smem),
                "gdn walk shared memory");
    float *st = args->state ? args->state : w.state;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += seg) {
        const int64_t n = n_chunks - c0 < seg ? n_chunks - c0 : seg;
        if (gc_parts_tuned != 2) /* the bench's per-kernel timing may run one kind alone */
            prep<<<dim3((unsigned)n, (unsigned)Hv), GC_PREP_THREADS, prep_smem, ctx->stream>>>(*args, c0, w);
        const dim3 wgrid((unsigned)(dvp / nc), (unsigned)Hv);
        if (gc_parts_tuned != 1)
            walk<<<wgrid, GC_WALK_WARPS * 32, walk_smem, ctx->stream>>>(*args, c0, n, w, st, !args->state && c0 == 0);
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
    if (gdn_chunked_fits(ctx, args)) {
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
 * segment's operands (gdn_seg_ws, at most gdn_seg_chunks chunks, whatever T) and a carried
 * state. Packed sequences run one at a time, so the longest sequence sizes it. */
size_t cuda_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args) {
    const int64_t T = args->seqs && args->seqs->max_len < args->T ? args->seqs->max_len : args->T;
    if (gdn_chunked_fits(cuda_ctx(be), args))
        return sizeof(float) * gdn_seg_ws_floats(gdn_seg_chunks(gdn_chunks(T)), args->n_v_heads, args->dk, args->dv) +
               256;
    return 2 * sizeof(float) * (size_t)(T * args->n_k_heads * args->dk) + 256;
}
