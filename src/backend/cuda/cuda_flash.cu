/*
 * cuda_flash.cu — flash attention on the tensor cores through mma.sync (the FlashAttention-2
 * arrangement), the default attention kernel for head dims 64, 128 and 256 (the backbone's),
 * causal or not, GQA, and packed sequences in one launch.
 *
 * Numerics (the same as the WMMA kernels before it): Q, K and V rounded to bf16, scores
 * accumulated in fp32, the online softmax in fp32 (running max m and sum l per row, the output
 * rescaled by exp(m_old - m_new)), the probabilities P rounded to bf16 for P V, fp32
 * accumulation, and l summing the rounded P (what P V multiplies). The softmax scale is folded
 * into base-2 exponents: p = 2^(s c - m c) with c = scale * log2(e), one FFMA and one EX2 per
 * score (ex2.approx.ftz: probabilities below 2^-126 of the row's largest become 0); Q is
 * rounded unscaled.
 *
 * Arrangement: a block takes FL_BQ = 128 queries (8 warps x 16 rows) of one query head of one
 * sequence and walks the keys FL_BK = 64 at a time. Q (bf16, 128 x HD), one K tile and one V
 * tile live in shared memory (128 KB at HD = 256), each row stored in 16-byte chunks at chunk
 * ^ (row & 7) (XOR swizzle) so that the 8 row addresses of every ldmatrix phase fall in 8
 * different bank groups. Per key tile a warp:
 *  - S = Q K^T, 16 x 64, with m16n8k16 bf16 mma.sync; Q fragments by ldmatrix, K fragments by
 *    ldmatrix (K rows are the B operand's columns);
 *  - masks only where it must (the causal diagonal tiles and the sequence's last tile), takes
 *    the row max across the 4 lanes of a row by shuffles, exponentiates, rescales its
 *    16 x HD fp32 output accumulator in registers;
 *  - O += P V: the score accumulators, rounded and packed in pairs, are already the A operand's
 *    fragments (the m16n8 accumulator layout equals the m16n8k16 A layout), so P never goes
 *    through shared memory; V fragments by ldmatrix.trans.
 * Loads overlap the products as FlashAttention-2 schedules them with one K and one V buffer:
 * V(j) is in flight (cp.async) while S = Q K(j)^T and the softmax run, K(j+1) while P V(j)
 * runs (two buffers each, one barrier per tile, measured no faster on an H200 in run15: the
 * products, not the loads, set the pace). Within a tile the fragments of the next k16 step
 * (ldmatrix) load while the current step multiplies, and every shared-memory address is one of
 * four per-lane offsets plus a constant (fl_lane_off), so the loops hold no swizzle arithmetic.
 * A warp none of whose rows' max moved skips the rescale (x 1). Causal: a block stops at its last
 * visible key tile, and a warp whose 16 rows see nothing of a tile skips it. Blocks are
 * numbered so the longest (last) query blocks of every sequence and head start first.
 *
 * Speed (bench_gpu_attention, H200, 27B heads: 24 query / 4 kv heads, head_dim 256, causal;
 * bench/RESULTS.md run15): 0.143 / 0.280 / 2.91 ms per layer at 1,502 / 2,270 / 8,192 tokens
 * (194 / 226 / 283 TFLOP/s), torch's FlashAttention-2 in the same run 0.147 / 0.281 / 2.79.
 * 240 registers, no spills, 128 KB of shared memory: one block of 8 warps per SM.
 *
 * K and V are rounded to bf16 first by a small kernel into the op's scratch, laid out
 * [kv head][row][HD] so that a key tile is one contiguous run of 16-byte cp.async copies
 * (rows past a sequence's end are zero-filled by the copy). Q is read as fp32 once per block
 * and rounded on the way into shared memory.
 *
 * Packed sequences (args->seqs, self-attention): one launch over every sequence; each block
 * finds its sequence's rows from the device offsets, so a record gives the same bits packed or
 * alone. Head dims 65..80 (the vision tower's 72) run cuda_flash_wmma.cu's kernel instead.
 */
#include "backend/cuda/cuda_internal.cuh"

#include <cuda_bf16.h>
#include <stdint.h>

#define FL_BQ 128
#define FL_BK 64
#define FL_WARPS 8
#define FL_THREADS (FL_WARPS * 32)

/* ---- PTX wrappers ---------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t fl_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void fl_ldsm4(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void fl_ldsm4_t(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* d += a b, m16n8k16, bf16 inputs, fp32 accumulators */
__device__ __forceinline__ void fl_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 16 bytes global -> shared; bytes past src_bytes (0 or 16) are zeros */
__device__ __forceinline__ void fl_cp16(uint32_t dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void fl_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void fl_cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* 2^x on the SFU; results below 2^-126 flush to zero (probabilities that small add nothing
 * a bf16 P could hold next to the row's largest, which is 1) */
__device__ __forceinline__ float fl_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t fl_pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (low half) = lo: the lower column */
    return *(uint32_t *)&v;
}

/* byte offset of 16-byte chunk c of row r in a tile of HD-wide bf16 rows (XOR swizzle) */
template <int HD>
__device__ __forceinline__ uint32_t fl_swz(int r, int c) {
    return (uint32_t)((r * (HD / 8) + (c ^ (r & 7))) * 16);
}

/* ---- K/V to bf16 ------------------------------------------------------------------------- */

/* kb, vb [Hkv][n_kv][HD] bf16 = k, v rounded; one thread per 8 dims of one row */
template <int HD>
__global__ void k_fl_kv_bf16(clef_attention_args a, __nv_bfloat16 *kb, __nv_bfloat16 *vb) {
    constexpr int CH = HD / 8;
    const int64_t n = a.n_kv * a.n_kv_heads * CH;
    const bool vec = ((uintptr_t)a.k % 16 == 0) && ((uintptr_t)a.v % 16 == 0) && a.ldk % 4 == 0 &&
                     a.ldv % 4 == 0 && a.k_head_stride % 4 == 0 && a.v_head_stride % 4 == 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % CH, t = (i / CH) % a.n_kv, hh = i / (CH * a.n_kv);
        const float *ks = a.k + t * a.ldk + hh * a.k_head_stride + c * 8;
        const float *vs = a.v + t * a.ldv + hh * a.v_head_stride + c * 8;
        float kf[8], vf[8];
        if (vec) {
            const float4 k0 = ((const float4 *)ks)[0], k1 = ((const float4 *)ks)[1];
            const float4 v0 = ((const float4 *)vs)[0], v1 = ((const float4 *)vs)[1];
            kf[0] = k0.x, kf[1] = k0.y, kf[2] = k0.z, kf[3] = k0.w, kf[4] = k1.x, kf[5] = k1.y, kf[6] = k1.z, kf[7] = k1.w;
            vf[0] = v0.x, vf[1] = v0.y, vf[2] = v0.z, vf[3] = v0.w, vf[4] = v1.x, vf[5] = v1.y, vf[6] = v1.z, vf[7] = v1.w;
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                kf[e] = ks[e], vf[e] = vs[e];
        }
        uint4 ko, vo;
        ko.x = fl_pack(kf[0], kf[1]), ko.y = fl_pack(kf[2], kf[3]), ko.z = fl_pack(kf[4], kf[5]), ko.w = fl_pack(kf[6], kf[7]);
        vo.x = fl_pack(vf[0], vf[1]), vo.y = fl_pack(vf[2], vf[3]), vo.z = fl_pack(vf[4], vf[5]), vo.w = fl_pack(vf[6], vf[7]);
        ((uint4 *)kb)[i] = ko;
        ((uint4 *)vb)[i] = vo;
    }
}

/* ---- the attention kernel ------------------------------------------------------------------ */

/* Per-lane shared-memory offsets for the loops below. With rows of CH = HD / 8 chunks and the
 * chunk stored at chunk ^ (row & 7), the k-th 16-column step (chunks 2k, 2k + 1) of a lane that
 * reads row `row`, half `hi` lands at (2k ^ (row & 6)) | (hi ^ (row & 1)): steps k and k + 4
 * differ by 8 chunks (128 bytes) whatever the row, so four offsets per operand (k mod 4) and
 * compile-time constants give every address, with no swizzle arithmetic in the loops. */
template <int HD>
__device__ __forceinline__ uint32_t fl_lane_off(int row, int hi, int k4) {
    return (uint32_t)(row * HD * 2 + ((((2 * k4) ^ (row & 6)) | (hi ^ (row & 1))) * 16));
}

/* rows [r0, r0 + FL_BK) of a sequence's keys (or values) of one kv head into a swizzled tile;
 * rows at or past n are zero-filled. A thread copies chunk c_t of rows r_t + u * RSTEP: the
 * same chunk and (row & 7) for every u, so its destinations are one offset plus constants. */
template <int HD>
__device__ __forceinline__ void fl_load_tile(uint32_t tile, const __nv_bfloat16 *rows, int r0, int n) {
    constexpr int CH = HD / 8, RSTEP = FL_THREADS / CH, PER = FL_BK / RSTEP;
    const int r_t = threadIdx.x / CH, c_t = threadIdx.x % CH;
    const uint32_t dst = tile + fl_swz<HD>(r_t, c_t);
    const __nv_bfloat16 *src = rows + (int64_t)(r0 + r_t) * HD + c_t * 8;
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const bool ok = r0 + r_t + u * RSTEP < n;
        fl_cp16(dst + u * RSTEP * HD * 2, ok ? src + (int64_t)u * RSTEP * HD : rows, ok ? 16 : 0);
    }
}

template <int HD>
__global__ void __launch_bounds__(FL_THREADS, 1)
    k_flash_mma(clef_attention_args a, const __nv_bfloat16 *kb, const __nv_bfloat16 *vb, const int32_t *starts,
                int64_t n_seqs, int64_t n_kv_rows) {
    constexpr int CH = HD / 8, ND = HD / 8, KK = HD / 16; /* 16-byte chunks per row; n8 output blocks; k16 steps */
    constexpr uint32_t TILE = FL_BK * HD * 2;
    extern __shared__ __align__(128) unsigned char fl_raw[];
    const uint32_t Qs = fl_smem(fl_raw), Ks = Qs + FL_BQ * HD * 2, Vs = Ks + TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;

    /* which sequence, query block and head: the last query blocks of all first */
    const int64_t Hq = a.n_q_heads, per = Hq * n_seqs;
    const int64_t i_back = (int64_t)blockIdx.x / per, rem = (int64_t)blockIdx.x % per;
    const int64_t s = rem / Hq, h = rem % Hq, kvh = h / (Hq / a.n_kv_heads);
    int64_t row0 = 0;
    int n_q = (int)a.n_q, n_kv = (int)a.n_kv; /* rows of this sequence (< 2^30: cuda_flash_attention) */
    if (starts) {
        row0 = starts[s];
        n_q = n_kv = starts[s + 1] - starts[s];
    }
    const int qb = (n_q + FL_BQ - 1) / FL_BQ - 1 - (int)i_back;
    if (qb < 0)
        return;
    const int q0 = qb * FL_BQ, offset = n_kv - n_q;
    const __nv_bfloat16 *kr = kb + (kvh * n_kv_rows + row0) * HD, *vr = vb + (kvh * n_kv_rows + row0) * HD;

    int k_end = n_kv;
    if (a.causal && q0 + FL_BQ + offset < k_end)
        k_end = q0 + FL_BQ + offset; /* the last key any row of this block sees, + 1 */
    const int n_tiles = k_end > 0 ? (k_end + FL_BK - 1) / FL_BK : 0;
    if (n_tiles > 0)
        fl_load_tile<HD>(Ks, kr, 0, n_kv);
    fl_cp_commit();

    /* Q: fp32 rows -> bf16, swizzled; rows past the sequence are zeros. A thread converts chunk
     * c_t of rows r_t + u * RSTEP, all its loads of a batch in flight together. */
    {
        constexpr int RSTEP = FL_THREADS / CH, PER = FL_BQ / RSTEP, BATCH = PER < 8 ? PER : 8;
        const int r_t = tid / CH, c_t = tid % CH;
        const float *src = a.q + (row0 + q0 + r_t) * a.ldq + h * a.q_head_stride + c_t * 8;
        const bool vec = ((uintptr_t)a.q % 16 == 0) && a.ldq % 4 == 0 && a.q_head_stride % 4 == 0;
        unsigned char *dst = fl_raw + fl_swz<HD>(r_t, c_t);
#pragma unroll
        for (int u0 = 0; u0 < PER; u0 += BATCH) {
            float f[BATCH][8];
#pragma unroll
            for (int u = 0; u < BATCH; u++) {
                const float *p = src + (int64_t)(u0 + u) * RSTEP * a.ldq;
                if (q0 + r_t + (u0 + u) * RSTEP >= n_q) {
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        f[u][e] = 0.0f;
                } else if (vec) {
                    const float4 x0 = ((const float4 *)p)[0], x1 = ((const float4 *)p)[1];
                    f[u][0] = x0.x, f[u][1] = x0.y, f[u][2] = x0.z, f[u][3] = x0.w;
                    f[u][4] = x1.x, f[u][5] = x1.y, f[u][6] = x1.z, f[u][7] = x1.w;
                } else {
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        f[u][e] = p[e];
                }
            }
#pragma unroll
            for (int u = 0; u < BATCH; u++) {
                uint4 o;
                o.x = fl_pack(f[u][0], f[u][1]), o.y = fl_pack(f[u][2], f[u][3]);
                o.z = fl_pack(f[u][4], f[u][5]), o.w = fl_pack(f[u][6], f[u][7]);
                *(uint4 *)(dst + (u0 + u) * RSTEP * HD * 2) = o;
            }
        }
    }

    const float c2 = a.scale * 1.4426950408889634f; /* scale * log2(e) */
    float o[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* rows g and g + 8: running max, lane's partial sum */
    const int wq0 = q0 + warp * 16;                              /* the warp's first query row */
    const int qi0 = wq0 + g;                                     /* this lane's rows: qi0, qi0 + 8 */
    /* ldmatrix offsets of this lane (see fl_lane_off): A = Q rows of the warp; B from K rows
     * (non-transposed: the key is the B column); B from V rows (transposed) */
    uint32_t qoff[4], koff[4], voff[4];
    {
        const int a_row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, a_hi = lane >> 4;
        const int k_row = (lane & 7) + (lane >> 4) * 8, k_hi = (lane >> 3) & 1;
        const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_hi = lane >> 4;
#pragma unroll
        for (int k4 = 0; k4 < 4; k4++) {
            qoff[k4] = Qs + fl_lane_off<HD>(a_row, a_hi, k4);
            koff[k4] = Ks + fl_lane_off<HD>(k_row, k_hi, k4);
            voff[k4] = Vs + fl_lane_off<HD>(v_row, v_hi, k4);
        }
    }

    for (int j = 0; j < n_tiles; j++) {
        const int k0 = j * FL_BK;
        fl_cp_wait_all();
        __syncthreads(); /* K(j) landed; every warp is done with V(j - 1) */
        fl_load_tile<HD>(Vs, vr, k0, n_kv);
        fl_cp_commit();
        /* every key of the tile is in the future of every row of this warp */
        const bool skip = a.causal && k0 > wq0 + 15 + offset;
        uint32_t pa[FL_BK / 16][4]; /* P as the A operand of P V, keys 16 kb .. +15 */
        if (!skip) {
            float sc[FL_BK / 8][4];
#pragma unroll
            for (int n = 0; n < FL_BK / 8; n++)
                sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
            /* S = Q K^T; the fragments of step kk + 1 load while step kk multiplies */
            uint32_t qa[2][4], kf[2][FL_BK / 16][4];
            fl_ldsm4(qa[0], qoff[0]);
#pragma unroll
            for (int np = 0; np < FL_BK / 16; np++)
                fl_ldsm4(kf[0][np], koff[0] + np * 16 * HD * 2);
#pragma unroll
            for (int kk = 0; kk < KK; kk++) {
                const int cur = kk & 1, nxt = cur ^ 1;
                if (kk + 1 < KK) {
                    const uint32_t step = ((kk + 1) >> 2) * 128;
                    fl_ldsm4(qa[nxt], qoff[(kk + 1) & 3] + step);
#pragma unroll
                    for (int np = 0; np < FL_BK / 16; np++)
                        fl_ldsm4(kf[nxt][np], koff[(kk + 1) & 3] + step + np * 16 * HD * 2);
                }
#pragma unroll
                for (int np = 0; np < FL_BK / 16; np++) {
                    fl_mma(sc[2 * np], qa[cur], kf[cur][np][0], kf[cur][np][1]);
                    fl_mma(sc[2 * np + 1], qa[cur], kf[cur][np][2], kf[cur][np][3]);
                }
            }
            /* masks: keys past the sequence, and (causal) keys after a row's own position */
            if (k0 + FL_BK > n_kv || (a.causal && k0 + FL_BK - 1 > wq0 + offset)) {
#pragma unroll
                for (int n = 0; n < FL_BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int kj = k0 + n * 8 + 2 * t4 + (e & 1);
                        if (kj >= n_kv || (a.causal && kj > qi0 + (e >> 1) * 8 + offset))
                            sc[n][e] = -INFINITY;
                    }
            }
            /* online softmax, rows g (e = 0, 1) and g + 8 (e = 2, 3) */
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int n = 0; n < FL_BK / 8; n++) {
                mx[0] = fmaxf(mx[0], fmaxf(sc[n][0], sc[n][1]));
                mx[1] = fmaxf(mx[1], fmaxf(sc[n][2], sc[n][3]));
            }
            float alpha[2], mc[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                mc[r] = mx[r] == -INFINITY ? 0.0f : mx[r] * c2; /* a row that saw nothing yet: p = 0 */
                alpha[r] = m[r] == -INFINITY ? 0.0f : fl_exp2(m[r] * c2 - mc[r]);
                m[r] = mx[r];
                l[r] *= alpha[r];
            }
#pragma unroll
            for (int n = 0; n < FL_BK / 8; n++) {
                const float p0 = fl_exp2(fmaf(sc[n][0], c2, -mc[0])), p1 = fl_exp2(fmaf(sc[n][1], c2, -mc[0]));
                const float p2 = fl_exp2(fmaf(sc[n][2], c2, -mc[1])), p3 = fl_exp2(fmaf(sc[n][3], c2, -mc[1]));
                const uint32_t lo = fl_pack(p0, p1), hi = fl_pack(p2, p3);
                const __nv_bfloat162 lb = *(const __nv_bfloat162 *)&lo, hb = *(const __nv_bfloat162 *)&hi;
                l[0] += __low2float(lb) + __high2float(lb); /* the sum of what P V multiplies */
                l[1] += __low2float(hb) + __high2float(hb);
                /* the m16n8 accumulators of keys 8n .. 8n+7 are half of the m16n8k16 A fragment of
                 * keys 16 (n / 2) ..: regs 0/1 = rows g/g+8 of the first 8 keys, 2/3 of the next */
                pa[n >> 1][(n & 1) * 2] = lo;
                pa[n >> 1][(n & 1) * 2 + 1] = hi;
            }
            /* rescale the output where a row's max moved (x 1 changes nothing: skipped) */
            if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
                for (int n = 0; n < ND; n++) {
                    o[n][0] *= alpha[0], o[n][1] *= alpha[0];
                    o[n][2] *= alpha[1], o[n][3] *= alpha[1];
                }
            }
        }
        fl_cp_wait_all();
        __syncthreads(); /* V(j) landed; every warp is done with K(j) */
        if (j + 1 < n_tiles)
            fl_load_tile<HD>(Ks, kr, k0 + FL_BK, n_kv);
        fl_cp_commit();
        if (!skip) {
            /* O += P V, step st = 16-key block kb x 16-column pair dp; the V fragment of step
             * st + 1 loads while step st multiplies */
            constexpr int DP = HD / 16, NST = FL_BK / 16 * DP;
            uint32_t vf[2][4];
            fl_ldsm4_t(vf[0], voff[0]);
#pragma unroll
            for (int st = 0; st < NST; st++) {
                const int kb = st / DP, dp = st % DP, cur = st & 1;
                if (st + 1 < NST) {
                    const int kb1 = (st + 1) / DP, dp1 = (st + 1) % DP;
                    fl_ldsm4_t(vf[cur ^ 1], voff[dp1 & 3] + (dp1 >> 2) * 128 + kb1 * 16 * HD * 2);
                }
                fl_mma(o[2 * dp], pa[kb], vf[cur][0], vf[cur][1]);
                fl_mma(o[2 * dp + 1], pa[kb], vf[cur][2], vf[cur][3]);
            }
        }
    }
    fl_cp_wait_all();

    /* O / l: the row sums are spread over the 4 lanes of each row */
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float sum = l[r];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    }
    const bool vec2 = ((uintptr_t)a.o % 8 == 0) && a.ldo % 2 == 0 && a.o_head_stride % 2 == 0;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int qi = qi0 + 8 * r;
        if (qi >= n_q)
            continue;
        float *dst = a.o + (row0 + qi) * a.ldo + h * a.o_head_stride + 2 * t4;
#pragma unroll
        for (int n = 0; n < ND; n++) {
            const float x = o[n][2 * r] * inv[r], y = o[n][2 * r + 1] * inv[r];
            if (vec2)
                *(float2 *)(dst + n * 8) = make_float2(x, y);
            else
                dst[n * 8] = x, dst[n * 8 + 1] = y;
        }
    }
}

template <int HD>
static void launch_flash_mma(clef_backend *be, const clef_attention_args *a, __nv_bfloat16 *kb,
                             __nv_bfloat16 *vb) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t n = a->n_kv * a->n_kv_heads * (HD / 8);
    const unsigned kv_blocks = (unsigned)((n + 255) / 256 < 8192 ? (n + 255) / 256 : 8192);
    k_fl_kv_bf16<HD><<<kv_blocks, 256, 0, ctx->stream>>>(*a, kb, vb);
    CUDA_CHECK_LAUNCH(be, "attention K/V to bf16 kernel");
    const size_t smem = (size_t)(FL_BQ + 2 * FL_BK) * HD * sizeof(__nv_bfloat16);
    cuda_record(be, cudaFuncSetAttribute(k_flash_mma<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                "flash attention shared memory");
    const clef_seqs *sq = a->seqs;
    const int64_t n_seqs = sq ? sq->n_seqs : 1, longest = sq ? sq->max_len : a->n_q;
    const int64_t blocks = (longest + FL_BQ - 1) / FL_BQ * n_seqs * a->n_q_heads;
    if (blocks <= 0)
        return;
    k_flash_mma<HD><<<(unsigned)blocks, FL_THREADS, smem, ctx->stream>>>(*a, kb, vb, sq ? sq->start_dev : NULL,
                                                                         n_seqs, a->n_kv);
    CUDA_CHECK_LAUNCH(be, "flash attention kernel");
}

/* bytes of scratch the flash kernels need for n_kv keys: the bf16 copies of K and V */
size_t cuda_flash_workspace_size(int64_t n_kv, int64_t n_kv_heads, int64_t head_dim) {
    const int64_t hd = head_dim > 64 && head_dim <= 80 ? 80 : head_dim;
    return 2 * sizeof(__nv_bfloat16) * (size_t)(n_kv * n_kv_heads * hd) + 256;
}

/* 1 when this kernel ran args: head_dim 64, 128 or 256, scratch of cuda_flash_workspace_size
 * bytes for all n_kv rows (16-byte aligned), and with seqs self-attention (n_q == n_kv) with
 * the device offsets; 0 (nothing ran) otherwise. */
int cuda_flash_attention(clef_backend *be, const clef_attention_args *args, void *scratch) {
    const int64_t hd = args->head_dim;
    if ((hd != 64 && hd != 128 && hd != 256) || !scratch || ((uintptr_t)scratch & 15) || args->n_q <= 0 ||
        args->n_kv <= 0 || args->n_q >= (1 << 30) || args->n_kv >= (1 << 30) || args->n_kv_heads <= 0 ||
        args->n_q_heads % args->n_kv_heads)
        return 0;
    if (args->seqs && (!args->seqs->start_dev || args->n_q != args->n_kv || args->seqs->n_seqs <= 0))
        return 0;
    __nv_bfloat16 *kb = (__nv_bfloat16 *)scratch, *vb = kb + args->n_kv * args->n_kv_heads * hd;
    if (hd == 64)
        launch_flash_mma<64>(be, args, kb, vb);
    else if (hd == 128)
        launch_flash_mma<128>(be, args, kb, vb);
    else
        launch_flash_mma<256>(be, args, kb, vb);
    return 1;
}
