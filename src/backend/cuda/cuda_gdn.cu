/*
 * cuda_gdn.cu — the gated delta rule on the GPU, in two forms:
 *
 * CLEF_GDN_CHUNKED: chunks of 64 tokens in the WY/UT form, the matrix products on the tensor
 * cores. Per chunk (rows i, j < L, gamma_i = cumulative log decay from the chunk's start,
 * q and k L2-normalised in the kernels that load them):
 *   A_ij  = beta_i exp(gamma_i - gamma_j) k_i.k_j (j < i),  Tinv = (I + A)^-1
 *   P_ij  = exp(gamma_i - gamma_j) q_i.k_j (j <= i)
 *   u     = Tinv (beta (v - exp(gamma) (K S)))             (the delta-rule writes)
 *   o     = exp(gamma) (Q S) + P u
 *   S'    = exp(gamma_last) S + (exp(gamma_last - gamma) K)^T u
 * A first kernel, parallel over chunks x heads, normalises q/k, forms A and P and inverts
 * (I + A) by forward substitution (fp32, CUDA cores). A second kernel, one block per
 * (head, 32 value columns), walks the chunks in order with its slice of S in shared memory;
 * its five products run as WMMA TF32 with the 3xTF32 split (a = hi + lo, a*b ~ hi*hi +
 * hi*lo + lo*hi), which keeps fp32 accuracy: TF32 alone (10-bit mantissa) would put the
 * state's error near the 1e-3 bound at long T.
 *
 * Measured on an H200 at the 27B's heads (bench_gpu_cores, bench/RESULTS.md) the chunked form
 * is still 1.3x slower than the recurrent kernel below: a block spends its time on the
 * chunk's loads and barriers, not on the products. So CLEF_GDN_CHUNKED runs the recurrent
 * kernel unless clef_backend_cuda_set_gdn_chunked() turns the chunked one on (tests and
 * bench_gpu_cores do).
 *
 * CLEF_GDN_RECURRENT: the exact token-by-token recurrence with the state held in registers —
 * the reference the chunked form is checked against on the device (tests/cuda).
 * Why this shape: the columns of S (one per value dim) evolve independently — column j only
 * needs k_t, q_t, v_t[j], g_t and beta_t — so a warp owns GDN_COLS columns of one head, each
 * lane holding rows lane, lane+32, ... of them (dk <= 256). A first, fully parallel kernel
 * L2-normalises (and scales) q and k into the scratch buffer, so a step of the recurrence is
 * a few FMAs per lane and two butterfly reductions (S~^T k, S^T q); the next token's inputs
 * are loaded while the current one computes. The recurrence is latency-bound, so columns per
 * warp are few (many warps per SM hide each other's shuffle latency). No block
 * synchronisation.
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

/* ---- token by token, dk = 128: 8 columns per warp ---------------------------------------
 * The same recurrence for Qwen3.5's key head dim, laid out so a step needs few shuffles: lane
 * (c, r) = (lane / 4, lane % 4) holds rows 32 r .. 32 r + 31 of column j0 + c of S. A dot
 * product over dk is 32 FMAs per lane and two shuffles (xor 1, 2) that sum the 4 lanes of a
 * column, one shuffle instruction serving all 8 columns of the warp (the 2-column layout
 * above spends 5 shuffles per column and dot product). k^ and q^ of the next token (32 floats
 * each per lane, read as float4 from the normalised scratch) are loaded while the current
 * token computes. */
#define GDN8_WARPS 4

__global__ void __launch_bounds__(GDN8_WARPS * 32) k_gdn_recurrent8(clef_gdn_args a, const float *qn, const float *kn) {
    const int64_t h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, c = lane >> 2, r = lane & 3;
    const int64_t dv = a.dv, Hv = a.n_v_heads, ldqk = a.n_k_heads * 128;
    const int64_t j = ((int64_t)blockIdx.x * GDN8_WARPS + warp) * 8 + c;
    const bool col_ok = j < dv;
    const int64_t kh = h / (a.n_v_heads / a.n_k_heads);
    float S[32];
    float *state = a.state ? a.state + h * 128 * dv : NULL;
#pragma unroll
    for (int m = 0; m < 32; m++)
        S[m] = (state && col_ok) ? state[(int64_t)(32 * r + m) * dv + j] : 0.0f;
    float4 nk[8], nq[8];
    float nv = 0.0f, ng = 0.0f, nb = 0.0f;
    auto load = [&](int64_t t) {
        const float4 *kp = (const float4 *)(kn + t * ldqk + kh * 128 + 32 * r);
        const float4 *qp = (const float4 *)(qn + t * ldqk + kh * 128 + 32 * r);
#pragma unroll
        for (int u = 0; u < 8; u++)
            nk[u] = kp[u], nq[u] = qp[u];
        nv = col_ok ? a.v[t * a.ldv + h * dv + j] : 0.0f;
        ng = a.g[t * Hv + h];
        nb = a.beta[t * Hv + h];
    };
    if (a.T > 0)
        load(0);
    for (int64_t t = 0; t < a.T; t++) {
        float k[32], q[32];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            k[4 * u] = nk[u].x, k[4 * u + 1] = nk[u].y, k[4 * u + 2] = nk[u].z, k[4 * u + 3] = nk[u].w;
            q[4 * u] = nq[u].x, q[4 * u + 1] = nq[u].y, q[4 * u + 2] = nq[u].z, q[4 * u + 3] = nq[u].w;
        }
        const float v = nv, eg = expf(ng), beta = nb;
        if (t + 1 < a.T)
            load(t + 1);
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int m = 0; m < 32; m++) {
            S[m] *= eg;
            d[m & 3] += S[m] * k[m];
        }
        float dot = (d[0] + d[1]) + (d[2] + d[3]);
        dot += __shfl_xor_sync(0xffffffffu, dot, 1);
        dot += __shfl_xor_sync(0xffffffffu, dot, 2);
        const float uu = beta * (v - dot);
        float o4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int m = 0; m < 32; m++) {
            S[m] += k[m] * uu;
            o4[m & 3] += S[m] * q[m];
        }
        float o = (o4[0] + o4[1]) + (o4[2] + o4[3]);
        o += __shfl_xor_sync(0xffffffffu, o, 1);
        o += __shfl_xor_sync(0xffffffffu, o, 2);
        if (r == 0 && col_ok)
            a.o[t * a.ldo + h * dv + j] = o;
    }
    if (state && col_ok)
#pragma unroll
        for (int m = 0; m < 32; m++)
            state[(int64_t)(32 * r + m) * dv + j] = S[m];
}

/* ---- chunked form (WY/UT), see the file comment ------------------------------------------ */

#include <mma.h>

#define GC 64            /* chunk length */
#define GC_PREP_THREADS 256
#define GC_WARPS 8
#define GC_LDT (GC + 8)       /* row stride of Tinv / P tiles */

/* scratch of the chunked form, for T rows (one sequence) */
typedef struct gdn_chunk_ws {
    float *tinv, *pm;      /* [n_chunks, Hv, 64, 64] */
    float *gam, *qsc, *ksc; /* [T, Hv]: cumulative log decay in the chunk, q and k scales */
} gdn_chunk_ws;

__host__ __device__ static inline int64_t gdn_chunks(int64_t T) { return (T + GC - 1) / GC; }

static inline size_t gdn_chunk_ws_floats(int64_t T, int64_t Hv) {
    return (size_t)(2 * gdn_chunks(T) * Hv * GC * GC + 3 * T * Hv);
}

static gdn_chunk_ws gdn_chunk_ws_at(float *base, int64_t T, int64_t Hv) {
    gdn_chunk_ws w;
    const int64_t n = gdn_chunks(T) * Hv * GC * GC;
    w.tinv = base, w.pm = base + n, w.gam = base + 2 * n, w.qsc = w.gam + T * Hv, w.ksc = w.qsc + T * Hv;
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

/* One block per (chunk, v-head): normalise the chunk's q and k rows, cumulative decay,
 * A and P (CUDA-core dot products), Tinv = (I + A)^-1 by forward substitution, one thread
 * per column of the identity (registers indexed by unrolled constants only). */
__global__ void __launch_bounds__(GC_PREP_THREADS) k_gdn_chunk_prep(clef_gdn_args a, gdn_chunk_ws w) {
    extern __shared__ float gp_smem[];
    const int dk = (int)a.dk, ld = dk + 1; /* odd stride: rows i and j of a warp hit distinct banks */
    float *Qs = gp_smem, *Ks = Qs + GC * ld, *As = Ks + GC * ld, *gs = As + GC * (GC + 1);
    float *bs = gs + GC, *iq = bs + GC, *ik = iq + GC;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t c = blockIdx.x, h = blockIdx.y, Hv = a.n_v_heads, kh = h / (Hv / a.n_k_heads);
    const int64_t t0 = c * GC;
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
    if (tid < L) {
        w.gam[(t0 + tid) * Hv + h] = gs[tid];
        w.qsc[(t0 + tid) * Hv + h] = iq[tid] * scale;
        w.ksc[(t0 + tid) * Hv + h] = ik[tid];
    }
    __syncthreads();
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
        float *P = w.pm + ((c * Hv + h) * GC + i) * GC;
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
        float *Ti = w.tinv + (c * Hv + h) * GC * GC;
#pragma unroll
        for (int i = 0; i < GC; i++)
            Ti[i * GC + j] = x[i];
    }
}

typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> gc_acc;

/* acc += a b on the tensor cores at ~fp32 accuracy (3xTF32): a 16x8 (layout LA), b 8x16
 * row-major, both fp32 in shared memory (32-byte aligned, ld a multiple of 8 floats). */
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

__host__ __device__ static inline int gdn_dkp(int64_t dk) { return (int)((dk + 15) / 16 * 16); }

/* the chunk walk keeps S's slice, q and k rows of a chunk in shared memory: dk <= 192 fits a
 * block (227 KiB on Hopper); larger key heads run the recurrent kernel */
#define GC_MAX_DK 192

static size_t gdn_walk_smem(int64_t dk, int slice) {
    const int dkp = gdn_dkp(dk), ldk = dkp + 8, lds = slice + 8;
    return sizeof(float) * (size_t)(dkp * lds + 2 * GC * ldk + 2 * GC * GC_LDT + 2 * GC * lds + 4 * GC) + 128;
}

/* One block per (SLICE value columns, v-head) walks the chunks in order; S's slice
 * [dkp, SLICE] stays in shared memory. The chunk's 64 x SLICE products are 16 x 16 tiles dealt
 * round the 8 warps, as are the state update's dkp/16 x SLICE/16 tiles. SLICE 32 or 64: the
 * launch takes 64 when 32 would need more blocks than the GPU has multiprocessors (the
 * per-chunk loads, not the products, bound a block, so fewer, wider blocks finish sooner). */
template <int SLICE>
__global__ void __launch_bounds__(GC_WARPS * 32, 1) k_gdn_chunk_walk(clef_gdn_args a, gdn_chunk_ws w) {
    using namespace nvcuda;
    constexpr int LDS = SLICE + 8, NTILE = (GC / 16) * (SLICE / 16);
    extern __shared__ __align__(128) float gw_smem[];
    const int dk = (int)a.dk, dv = (int)a.dv, dkp = gdn_dkp(a.dk), ldk = dkp + 8;
    const int NT = GC_WARPS * 32;
    float *Ss = gw_smem;              /* [dkp][LDS] */
    float *Kb = Ss + dkp * LDS;       /* [GC][ldk] k rows, normalised */
    float *Qb = Kb + GC * ldk;        /* [GC][ldk] q rows, normalised, scaled, times exp(gamma) */
    float *Tb = Qb + GC * ldk;        /* [GC][GC_LDT] Tinv */
    float *Pb = Tb + GC * GC_LDT;     /* [GC][GC_LDT] P */
    float *Xb = Pb + GC * GC_LDT;     /* [GC][LDS] v, then the right-hand side, then o */
    float *Ub = Xb + GC * LDS;        /* [GC][LDS] K S, then u */
    float *gsm = Ub + GC * LDS, *bsm = gsm + GC, *qs = bsm + GC, *ks = qs + GC;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t h = blockIdx.y, Hv = a.n_v_heads, kh = h / (Hv / a.n_k_heads);
    const int j0 = blockIdx.x * SLICE;
    float *state = a.state ? a.state + h * a.dk * a.dv : NULL;

    for (int idx = tid; idx < dkp * SLICE; idx += NT) {
        int i = idx / SLICE, j = idx - i * SLICE;
        Ss[i * LDS + j] = (state && i < dk && j0 + j < dv) ? state[(int64_t)i * dv + j0 + j] : 0.0f;
    }
    const int64_t n_chunks = gdn_chunks(a.T);
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t t0 = c * GC;
        const int L = (int)(a.T - t0 < GC ? a.T - t0 : GC);
        __syncthreads(); /* the last chunk's reads are done */
        if (tid < GC) {
            const bool ok = tid < L;
            const int64_t e = (t0 + tid) * Hv + h;
            const float gm = ok ? w.gam[e] : 0.0f, be = ok ? a.beta[e] : 0.0f;
            const float qsc = ok ? w.qsc[e] : 0.0f, ksc = ok ? w.ksc[e] : 0.0f;
            gsm[tid] = gm, bsm[tid] = be, qs[tid] = qsc * expf(gm), ks[tid] = ksc;
        }
        __syncthreads();
        const float *kg = a.k + t0 * a.ldk + kh * dk, *qg = a.q + t0 * a.ldq + kh * dk;
        gc_copy2(GC * dkp, tid, NT,
                 [&](int i) { int r = i / dkp, d = i - r * dkp; return (r < L && d < dk) ? kg[r * a.ldk + d] : 0.0f; },
                 [&](int i, float x) { int r = i / dkp, d = i - r * dkp; Kb[r * ldk + d] = x * ks[r]; },
                 [&](int i) { int r = i / dkp, d = i - r * dkp; return (r < L && d < dk) ? qg[r * a.ldq + d] : 0.0f; },
                 [&](int i, float x) { int r = i / dkp, d = i - r * dkp; Qb[r * ldk + d] = x * qs[r]; });
        const float *Ti = w.tinv + (c * Hv + h) * GC * GC, *Pm = w.pm + (c * Hv + h) * GC * GC;
        gc_copy2(GC * GC, tid, NT, [&](int i) { return Ti[i]; },
                 [&](int i, float x) { Tb[(i / GC) * GC_LDT + i % GC] = x; }, [&](int i) { return Pm[i]; },
                 [&](int i, float x) { Pb[(i / GC) * GC_LDT + i % GC] = x; });
        const float *vg = a.v + t0 * a.ldv + h * dv + j0;
        gc_copy(GC * SLICE, tid, NT,
                [&](int i) { int r = i / SLICE, j = i % SLICE; return (r < L && j0 + j < dv) ? vg[r * a.ldv + j] : 0.0f; },
                [&](int i, float x) { Xb[(i / SLICE) * LDS + i % SLICE] = x; });
        __syncthreads();
        /* K S -> Ub; right-hand side beta (v - exp(gamma) K S) -> Xb (own tiles) */
        for (int p = warp; p < NTILE; p += GC_WARPS) {
            const int r0 = (p / (SLICE / 16)) * 16, c0 = (p % (SLICE / 16)) * 16;
            gc_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kb = 0; kb < dkp / 8; kb++)
                gc_mma3<wmma::row_major>(acc, Kb + r0 * ldk + kb * 8, ldk, Ss + kb * 8 * LDS + c0, LDS);
            wmma::store_matrix_sync(Ub + r0 * LDS + c0, acc, LDS, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int r = r0 + (e >> 4), j = c0 + (e & 15);
                Xb[r * LDS + j] = bsm[r] * (Xb[r * LDS + j] - expf(gsm[r]) * Ub[r * LDS + j]);
            }
        }
        __syncthreads();
        /* u = Tinv rhs -> Ub */
        for (int p = warp; p < NTILE; p += GC_WARPS) {
            const int r0 = (p / (SLICE / 16)) * 16, c0 = (p % (SLICE / 16)) * 16;
            gc_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kb = 0; kb < GC / 8; kb++)
                gc_mma3<wmma::row_major>(acc, Tb + r0 * GC_LDT + kb * 8, GC_LDT, Xb + kb * 8 * LDS + c0, LDS);
            wmma::store_matrix_sync(Ub + r0 * LDS + c0, acc, LDS, wmma::mem_row_major);
        }
        __syncthreads();
        /* o = (exp(gamma) Q) S + P u -> Xb (own tiles) -> global */
        for (int p = warp; p < NTILE; p += GC_WARPS) {
            const int r0 = (p / (SLICE / 16)) * 16, c0 = (p % (SLICE / 16)) * 16;
            gc_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kb = 0; kb < dkp / 8; kb++)
                gc_mma3<wmma::row_major>(acc, Qb + r0 * ldk + kb * 8, ldk, Ss + kb * 8 * LDS + c0, LDS);
            for (int kb = 0; kb < GC / 8; kb++)
                gc_mma3<wmma::row_major>(acc, Pb + r0 * GC_LDT + kb * 8, GC_LDT, Ub + kb * 8 * LDS + c0, LDS);
            wmma::store_matrix_sync(Xb + r0 * LDS + c0, acc, LDS, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int r = r0 + (e >> 4), j = c0 + (e & 15);
                if (r < L && j0 + j < dv)
                    a.o[(t0 + r) * a.ldo + h * dv + j0 + j] = Xb[r * LDS + j];
            }
        }
        __syncthreads(); /* every read of S and K above is done */
        /* S = exp(gamma_last) S + (exp(gamma_last - gamma) K)^T u */
        const float gl = gsm[L - 1];
        for (int idx = tid; idx < GC * dkp; idx += NT) {
            int r = idx / dkp, d = idx - r * dkp;
            if (r < L)
                Kb[r * ldk + d] *= expf(gl - gsm[r]);
        }
        const float egl = expf(gl);
        for (int idx = tid; idx < dkp * SLICE; idx += NT) {
            int i = idx / SLICE, j = idx - i * SLICE;
            Ss[i * LDS + j] *= egl;
        }
        __syncthreads();
        for (int p = warp; p < (dkp / 16) * (SLICE / 16); p += GC_WARPS) {
            const int mi = p / (SLICE / 16), n = p % (SLICE / 16);
            gc_acc acc;
            wmma::load_matrix_sync(acc, Ss + mi * 16 * LDS + n * 16, LDS, wmma::mem_row_major);
            for (int kb = 0; kb < GC / 8; kb++) /* K^T is K read column-major */
                gc_mma3<wmma::col_major>(acc, Kb + kb * 8 * ldk + mi * 16, ldk, Ub + kb * 8 * LDS + n * 16, LDS);
            wmma::store_matrix_sync(Ss + mi * 16 * LDS + n * 16, acc, LDS, wmma::mem_row_major);
        }
    }
    __syncthreads();
    if (state)
        for (int idx = tid; idx < dk * SLICE; idx += NT) {
            int i = idx / SLICE, j = idx - i * SLICE;
            if (j0 + j < dv)
                state[(int64_t)i * dv + j0 + j] = Ss[i * LDS + j];
        }
}

template <int SLICE>
static void gdn_walk(clef_backend *be, const clef_gdn_args *args, const gdn_chunk_ws &w) {
    cuda_context *ctx = cuda_ctx(be);
    const size_t smem = gdn_walk_smem(args->dk, SLICE);
    cuda_record(be, cudaFuncSetAttribute(k_gdn_chunk_walk<SLICE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                "gdn walk shared memory");
    dim3 grid((unsigned)((args->dv + SLICE - 1) / SLICE), (unsigned)args->n_v_heads);
    k_gdn_chunk_walk<SLICE><<<grid, GC_WARPS * 32, smem, ctx->stream>>>(*args, w);
    CUDA_CHECK_LAUNCH(be, "gdn chunk walk kernel");
}

static void gdn_chunked(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    gdn_chunk_ws w = gdn_chunk_ws_at((float *)scratch, args->T, args->n_v_heads);
    const size_t prep_smem = sizeof(float) * (size_t)(2 * GC * (args->dk + 1) + GC * (GC + 1) + 4 * GC);
    cuda_record(be, cudaFuncSetAttribute(k_gdn_chunk_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prep_smem),
                "gdn prep shared memory");
    dim3 pgrid((unsigned)gdn_chunks(args->T), (unsigned)args->n_v_heads);
    k_gdn_chunk_prep<<<pgrid, GC_PREP_THREADS, prep_smem, ctx->stream>>>(*args, w);
    CUDA_CHECK_LAUNCH(be, "gdn chunk prep kernel");
    if (ctx->n_sm <= 0)
        ctx->n_sm = cuda_sm_count(be);
    const int64_t blocks32 = (args->dv + 31) / 32 * args->n_v_heads;
    if (blocks32 > ctx->n_sm && args->dk <= 128)
        gdn_walk<64>(be, args, w);
    else
        gdn_walk<32>(be, args, w);
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
    if (args->dk == 128 && !((uintptr_t)scratch & 15)) { /* Qwen3.5's key heads: the 8-column layout */
        k_gdn_qk<4><<<qk_blocks, 128, 0, ctx->stream>>>(*args, qn, kn);
        dim3 grid8((unsigned)((args->dv + 8 * GDN8_WARPS - 1) / (8 * GDN8_WARPS)), (unsigned)args->n_v_heads);
        k_gdn_recurrent8<<<grid8, GDN8_WARPS * 32, 0, ctx->stream>>>(*args, qn, kn);
        CUDA_CHECK_LAUNCH(be, "gdn kernel");
        return;
    }
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

/* recurrent: normalised q and k of every token, 2 x T x Hk x dk floats; chunked: Tinv and P
 * per chunk and head plus three [T, Hv] vectors. Packed sequences run one at a time, so the
 * longest sequence sizes it. */
size_t cuda_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args) {
    const int64_t T = args->seqs && args->seqs->max_len < args->T ? args->seqs->max_len : args->T;
    if (args->mode == CLEF_GDN_CHUNKED && cuda_ctx(be)->gdn_chunked && args->dk <= GC_MAX_DK)
        return sizeof(float) * gdn_chunk_ws_floats(T, args->n_v_heads) + 256;
    return 2 * sizeof(float) * (size_t)(T * args->n_k_heads * args->dk) + 256;
}
