/*
 * cuda_norm.cu — the per-row reductions: RMSNorm, gated RMSNorm, LayerNorm and softmax. One
 * block of 128 threads per row; RMSNorms of rows up to NORM_WARP_DIM long (the per-head
 * norms: 128 or 256 wide, n x heads rows) one warp per row instead, which needs no block
 * barrier. Sums in fp32 trees (the CPU sums in double: both are far inside 1e-5 relative of
 * the exact value for the row lengths of these models).
 * Formulas and rounding order as the CPU reference (cpu_norm.c, cpu_elementwise.c).
 *
 * Rows whose length, strides and pointers are multiples of 4 floats (the model's) run kernels
 * with 16-byte loads that keep the row in registers (k_rmsnorm_vec, k_rmsnorm_gated_warp_vec).
 *
 * RMSNorm and gated RMSNorm feed matmuls (the input and post-attention norms the layer's
 * projections, the gated norm out_proj): when their output rows are contiguous and the
 * backend's bf16 staging has room, the kernel also writes each value's bf16 rounding there
 * and the staging is marked as holding those rows (cuda_staging_claim, cuda_matmul.cu), so
 * the next BF16 matmul on them converts nothing. The fp32 output is written as before: a
 * quantized matmul, the residual and the head read it. When the matmul after an RMSNorm of
 * rows wider than NORM_WARP_DIM is FP8 or INT8 ConvRot (the quantized hand-off,
 * cuda_quant_stage.cu), the block kernels also keep the row in shared memory and write that
 * matmul's codes and per-token scale (cuda_quant_row.cuh); the one-warp-a-row kernels do not.
 * The gated norm's rows are heads (the GDN's 128 wide), a token's out_proj row K / dim of
 * them: its fused kernel runs one block per token, a warp per head with the per-head body of
 * k_rmsnorm_gated_warp_vec (the same bits), the token's row in shared memory for the quantizer.
 */
#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/cuda_quant_row.cuh"

#include <string.h>

#define NORM_THREADS 128

/* Sum of v over the block (every thread gets it). */
__device__ float block_sum(float v) {
    __shared__ float part[NORM_THREADS / 32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < NORM_THREADS / 32; i++)
            s += part[i];
        total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads(); /* part/total are reused by the next call */
    return r;
}

__device__ float block_max(float v) {
    __shared__ float part[NORM_THREADS / 32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = part[0];
        for (int i = 1; i < NORM_THREADS / 32; i++)
            s = fmaxf(s, part[i]);
        total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

/* yb: NULL, or the bf16 staging of y's rows (contiguous, dim apart); tg.mode != 0: also the
 * quantized hand-off's codes of each row (tg.K == dim; dim floats of dynamic shared memory) */
__global__ void k_rmsnorm(int64_t dim, const float *x, int64_t ldx, const float *w, float eps, int add_one, float *y,
                          int64_t ldy, __nv_bfloat16 *yb, cuda_qstage_target tg) {
    extern __shared__ float qrow[];
    __shared__ float red[32];
    const float *xr = x + (int64_t)blockIdx.x * ldx;
    float *yr = y + (int64_t)blockIdx.x * ldy;
    __nv_bfloat16 *ybr = yb ? yb + (int64_t)blockIdx.x * dim : NULL;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS)
        ss += xr[i] * xr[i];
    float s = 1.0f / sqrtf(block_sum(ss) / (float)dim + eps);
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
        float n = xr[i] * s;
        n = w ? n * (add_one ? 1.0f + w[i] : w[i]) : n;
        yr[i] = n;
        if (ybr)
            ybr[i] = __float2bfloat16_rn(n);
        if (tg.mode)
            qrow[i] = n;
    }
    if (tg.mode) {
        __syncthreads();
        cuda_qrow_quantize(tg, blockIdx.x, qrow, red);
    }
}

/* k_rmsnorm for rows of at most NORM_THREADS x 4 x NORM_VEC_MAX floats with dim, ldx, ldy and
 * the pointers multiples of 4 floats (the hidden-size norms): each thread keeps its float4s of
 * the row in registers, so x is read once, in 16-byte loads. Same formula; only the order of
 * the fp32 partial sums differs. FP8_REG (an FP8 hand-off) codes the row from those registers
 * too (its maximum taken as the values are written; a kernel of its own, so the other cases'
 * keeps the registers and occupancy it had): no shared-memory row (20 KB a 5,120-wide row, which
 * bounds the blocks an SM holds), no barrier and no pass over it for the maximum; the codes are
 * the same bits (the same values, scale and rounding). */
#define NORM_VEC_MAX 16
template <int NV, bool FP8_REG>
__global__ void k_rmsnorm_vec(int64_t dim, const float *x, int64_t ldx, const float *w, float eps, int add_one,
                              float *y, int64_t ldy, __nv_bfloat16 *yb, cuda_qstage_target tg) {
    extern __shared__ float qrow[]; /* dim floats when tg.mode is INT8 (k_rmsnorm's tg; FP8 codes from registers) */
    __shared__ float red[32];
    const float4 *xr = (const float4 *)(x + (int64_t)blockIdx.x * ldx);
    float4 *yr = (float4 *)(y + (int64_t)blockIdx.x * ldy);
    const float4 *w4 = (const float4 *)w;
    const int n4 = (int)(dim / 4);
    float4 v[NV];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int i = threadIdx.x + j * NORM_THREADS;
        v[j] = i < n4 ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
    const float s = 1.0f / sqrtf(block_sum(ss) / (float)dim + eps);
    const bool fp8 = FP8_REG; /* tg.mode is FP8: coded from registers (the other modes' kernel keeps none) */
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int i = threadIdx.x + j * NORM_THREADS;
        if (i >= n4)
            break;
        float4 n = make_float4(v[j].x * s, v[j].y * s, v[j].z * s, v[j].w * s);
        if (w) {
            float4 g = w4[i];
            if (add_one)
                g = make_float4(1.0f + g.x, 1.0f + g.y, 1.0f + g.z, 1.0f + g.w);
            n = make_float4(n.x * g.x, n.y * g.y, n.z * g.z, n.w * g.w);
        }
        yr[i] = n;
        if (yb) {
            cuda_store_bf16x4(yb + (int64_t)blockIdx.x * dim + 4 * (int64_t)i, n);
        }
        if (fp8)
            v[j] = n, amax = amax4(amax, n);
        else if (tg.mode)
            ((float4 *)qrow)[i] = n;
    }
    if (fp8) {
        const float qs = fp8_row_scale(qrow_block_max(amax, red));
        if (threadIdx.x == 0)
            tg.scales[blockIdx.x] = qs;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int i = threadIdx.x + j * NORM_THREADS;
            if (i >= n4)
                break;
            cuda_qrow_fp8_put4(tg, blockIdx.x, i, v[j], qs);
        }
    } else if (tg.mode) {
        __syncthreads();
        cuda_qrow_quantize(tg, blockIdx.x, qrow, red);
    }
}

__global__ void k_rmsnorm_gated(int64_t dim, const float *x, int64_t ldx, const float *z, int64_t ldz, const float *w,
                                float eps, float *y, int64_t ldy, __nv_bfloat16 *yb) {
    const float *xr = x + (int64_t)blockIdx.x * ldx;
    const float *zr = z + (int64_t)blockIdx.x * ldz;
    float *yr = y + (int64_t)blockIdx.x * ldy;
    __nv_bfloat16 *ybr = yb ? yb + (int64_t)blockIdx.x * dim : NULL;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS)
        ss += xr[i] * xr[i];
    float s = 1.0f / sqrtf(block_sum(ss) / (float)dim + eps);
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
        const float v = (w[i] * (xr[i] * s)) * silu_f(zr[i]);
        yr[i] = v;
        if (ybr)
            ybr[i] = __float2bfloat16_rn(v);
    }
}

__global__ void k_layernorm(int64_t dim, const float *x, int64_t ldx, const float *w, const float *b, float eps,
                            float *y, int64_t ldy) {
    const float *xr = x + (int64_t)blockIdx.x * ldx;
    float *yr = y + (int64_t)blockIdx.x * ldy;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS)
        sum += xr[i];
    float mean = block_sum(sum) / (float)dim;
    float var = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
        float d = xr[i] - mean;
        var += d * d;
    }
    float s = 1.0f / sqrtf(block_sum(var) / (float)dim + eps);
    for (int64_t i = threadIdx.x; i < dim; i += NORM_THREADS) {
        float n = (xr[i] - mean) * s;
        if (w)
            n *= w[i];
        if (b)
            n += b[i];
        yr[i] = n;
    }
}

__global__ void k_softmax(int64_t cols, float *x, int64_t ldx) {
    float *xr = x + (int64_t)blockIdx.x * ldx;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < cols; i += NORM_THREADS)
        m = fmaxf(m, xr[i]);
    m = block_max(m);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += NORM_THREADS)
        sum += expf(xr[i] - m);
    float inv = 1.0f / block_sum(sum);
    for (int64_t i = threadIdx.x; i < cols; i += NORM_THREADS)
        xr[i] = expf(xr[i] - m) * inv;
}

#define NORM_WARP_DIM 1024
#define NORM_WARP_ROWS (NORM_THREADS / 32) /* rows per block of the warp kernels */

__device__ __forceinline__ float warp_sum_all(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* k_rmsnorm / k_rmsnorm_gated with one warp per row (rows of at most NORM_WARP_DIM). */
__global__ void k_rmsnorm_warp(int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *w, float eps,
                               int add_one, float *y, int64_t ldy, __nv_bfloat16 *yb) {
    const int64_t r = (int64_t)blockIdx.x * NORM_WARP_ROWS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    __nv_bfloat16 *ybr = yb ? yb + r * dim : NULL;
    float ss = 0.0f;
    for (int64_t i = lane; i < dim; i += 32)
        ss += xr[i] * xr[i];
    float s = 1.0f / sqrtf(warp_sum_all(ss) / (float)dim + eps);
    for (int64_t i = lane; i < dim; i += 32) {
        float n = xr[i] * s;
        n = w ? n * (add_one ? 1.0f + w[i] : w[i]) : n;
        yr[i] = n;
        if (ybr)
            ybr[i] = __float2bfloat16_rn(n);
    }
}

__global__ void k_rmsnorm_gated_warp(int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *z,
                                     int64_t ldz, const float *w, float eps, float *y, int64_t ldy, __nv_bfloat16 *yb) {
    const int64_t r = (int64_t)blockIdx.x * NORM_WARP_ROWS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    const float *xr = x + r * ldx, *zr = z + r * ldz;
    float *yr = y + r * ldy;
    __nv_bfloat16 *ybr = yb ? yb + r * dim : NULL;
    float ss = 0.0f;
    for (int64_t i = lane; i < dim; i += 32)
        ss += xr[i] * xr[i];
    float s = 1.0f / sqrtf(warp_sum_all(ss) / (float)dim + eps);
    for (int64_t i = lane; i < dim; i += 32) {
        const float v = (w[i] * (xr[i] * s)) * silu_f(zr[i]);
        yr[i] = v;
        if (ybr)
            ybr[i] = __float2bfloat16_rn(v);
    }
}

/* One row r of the gated norm by one warp (lane = its lane), dim, ldx, ldz, ldy and the
 * pointers multiples of 4 floats and dim <= 128 x NV (the GDN's 128-wide heads: one float4 of
 * x and of z per lane, 16-byte loads); qrow: NULL, or where the row's values also go (shared
 * memory of the fused kernel; returns the largest magnitude this lane put there, for the FP8
 * scale). The one body of k_rmsnorm_gated_warp_vec and k_rmsnorm_gated_rows_q, so both write
 * the same bits. */
template <int NV>
__device__ __forceinline__ float gated_row_vec(int64_t r, int lane, int64_t dim, const float *x, int64_t ldx,
                                              const float *z, int64_t ldz, const float *w, float eps, float *y,
                                              int64_t ldy, __nv_bfloat16 *yb, float *qrow) {
    const float4 *xr = (const float4 *)(x + r * ldx), *zr = (const float4 *)(z + r * ldz), *w4 = (const float4 *)w;
    float4 *yr = (float4 *)(y + r * ldy);
    const int n4 = (int)(dim / 4);
    float4 v[NV];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int i = lane + 32 * j;
        v[j] = i < n4 ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
    const float s = 1.0f / sqrtf(warp_sum_all(ss) / (float)dim + eps);
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int i = lane + 32 * j;
        if (i >= n4)
            break;
        const float4 g = w4[i], zz = zr[i];
        const float4 o = make_float4((g.x * (v[j].x * s)) * silu_f(zz.x), (g.y * (v[j].y * s)) * silu_f(zz.y),
                                     (g.z * (v[j].z * s)) * silu_f(zz.z), (g.w * (v[j].w * s)) * silu_f(zz.w));
        yr[i] = o;
        if (yb) {
            cuda_store_bf16x4(yb + r * dim + 4 * (int64_t)i, o);
        }
        if (qrow)
            ((float4 *)qrow)[i] = o, amax = amax4(amax, o);
    }
    return amax;
}

/* k_rmsnorm_gated_warp with 16-byte loads (gated_row_vec). */
template <int NV>
__global__ void k_rmsnorm_gated_warp_vec(int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *z,
                                         int64_t ldz, const float *w, float eps, float *y, int64_t ldy,
                                         __nv_bfloat16 *yb) {
    const int64_t r = (int64_t)blockIdx.x * NORM_WARP_ROWS + (threadIdx.x >> 5);
    if (r >= rows)
        return;
    gated_row_vec<NV>(r, threadIdx.x & 31, dim, x, ldx, z, ldz, w, eps, y, ldy, yb, NULL);
}

/* The quantized hand-off's gated norm: one block per token, whose tg.K values are K / dim
 * consecutive norm rows (ldy == dim), each by one warp as k_rmsnorm_gated_warp_vec does; the
 * token's row kept in shared memory (tg.K floats) for the quantizer. */
#define NORM_GATED_Q_THREADS 256
template <int NV>
__global__ void __launch_bounds__(NORM_GATED_Q_THREADS)
    k_rmsnorm_gated_rows_q(int64_t dim, const float *x, int64_t ldx, const float *z, int64_t ldz, const float *w,
                           float eps, float *y, int64_t ldy, __nv_bfloat16 *yb, cuda_qstage_target tg) {
    extern __shared__ float qrow[];
    __shared__ float red[32];
    const int64_t t = blockIdx.x, heads = tg.K / dim;
    float amax = 0.0f;
    for (int64_t h = threadIdx.x >> 5; h < heads; h += blockDim.x >> 5) /* warp-uniform */
        amax = fmaxf(amax, gated_row_vec<NV>(t * heads + h, threadIdx.x & 31, dim, x, ldx, z, ldz, w, eps, y, ldy, yb,
                                             qrow + h * dim));
    __syncthreads();
    cuda_qrow_quantize_max(tg, t, qrow, red, amax);
}

/* Rows run as a grid of up to 2^31-1 blocks: every model's row count fits. */

/* Contiguous output rows: also into the bf16 staging, when it has room (see the header). */
static __nv_bfloat16 *staging_for(clef_backend *be, int64_t rows, int64_t dim, int64_t ldy) {
    return ldy == dim ? cuda_staging_claim(be, rows * dim) : NULL;
}

/* k_rmsnorm_vec<NV>: its FP8 register form (no shared memory), or the form of every other case */
template <int NV>
static void rmsnorm_vec(int reg_fp8, int64_t rows, size_t smem, cudaStream_t st, int64_t dim, const float *x,
                        int64_t ldx, const float *w, float eps, int add_one, float *y, int64_t ldy, __nv_bfloat16 *yb,
                        const cuda_qstage_target &tg) {
    if (reg_fp8)
        k_rmsnorm_vec<NV, true><<<(unsigned)rows, NORM_THREADS, 0, st>>>(dim, x, ldx, w, eps, add_one, y, ldy, yb, tg);
    else
        k_rmsnorm_vec<NV, false><<<(unsigned)rows, NORM_THREADS, smem, st>>>(dim, x, ldx, w, eps, add_one, y, ldy, yb,
                                                                            tg);
}

void cuda_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *w, float eps,
                  int add_one, float *y, int64_t ldy) {
    if (cuda_ctx(be)->status != CLEF_OK || rows <= 0)
        return;
    __nv_bfloat16 *yb = staging_for(be, rows, dim, ldy);
    cudaStream_t st = cuda_ctx(be)->stream;
    const int vec = dim % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 &&
                    ((uintptr_t)x | (uintptr_t)y | (uintptr_t)w) % 16 == 0 && dim <= 4 * NORM_THREADS * NORM_VEC_MAX;
    /* the quantized hand-off: a block kernel's rows, contiguous, each one matmul row */
    cuda_qstage_target tg;
    memset(&tg, 0, sizeof tg);
    const int fused = dim > NORM_WARP_DIM && ldy == dim &&
                      cuda_qstage_claim(be, CUDA_QSTAGE_RMSNORM, rows * dim, dim, dim, &tg);
    size_t smem = 0;
    /* the register kernels code an FP8 row from registers (k_rmsnorm_vec<NV, true>): no shared row */
    const int reg_fp8 = vec && (tg.mode == CUDA_QMODE_FP8 || tg.mode == CUDA_QMODE_FP8_BF16);
    const int nv = dim <= 4 * NORM_THREADS * 4 ? 4 : dim <= 4 * NORM_THREADS * 8 ? 8 : dim <= 4 * NORM_THREADS * 10 ? 10
                                                                                               : NORM_VEC_MAX;
    if (fused && !reg_fp8) {
        smem = sizeof(float) * (size_t)dim;
        if (vec && nv == 4)
            cudaFuncSetAttribute(k_rmsnorm_vec<4, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        else if (vec && nv == 8)
            cudaFuncSetAttribute(k_rmsnorm_vec<8, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        else if (vec && nv == 10)
            cudaFuncSetAttribute(k_rmsnorm_vec<10, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        else if (vec)
            cudaFuncSetAttribute(k_rmsnorm_vec<NORM_VEC_MAX, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)smem);
        else
            cudaFuncSetAttribute(k_rmsnorm, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        cuda_record(be, cudaGetLastError(), "rmsnorm + quantizer shared memory");
    }
    if (dim <= NORM_WARP_DIM)
        k_rmsnorm_warp<<<cuda_blocks(rows, NORM_WARP_ROWS), NORM_THREADS, 0, st>>>(rows, dim, x, ldx, w, eps, add_one, y,
                                                                                  ldy, yb);
    else if (vec && nv == 4)
        rmsnorm_vec<4>(reg_fp8, rows, smem, st, dim, x, ldx, w, eps, add_one, y, ldy, yb, tg);
    else if (vec && nv == 8)
        rmsnorm_vec<8>(reg_fp8, rows, smem, st, dim, x, ldx, w, eps, add_one, y, ldy, yb, tg);
    else if (vec && nv == 10)
        rmsnorm_vec<10>(reg_fp8, rows, smem, st, dim, x, ldx, w, eps, add_one, y, ldy, yb, tg);
    else if (vec)
        rmsnorm_vec<NORM_VEC_MAX>(reg_fp8, rows, smem, st, dim, x, ldx, w, eps, add_one, y, ldy, yb, tg);
    else
        k_rmsnorm<<<(unsigned)rows, NORM_THREADS, smem, st>>>(dim, x, ldx, w, eps, add_one, y, ldy, yb, tg);
    CUDA_CHECK_LAUNCH(be, "rmsnorm kernel");
    if (yb)
        cuda_staging_mark(be, y, rows * dim);
    if (ldy == dim)
        cuda_qstage_mark(be, CUDA_QSTAGE_RMSNORM, y, rows * dim, fused ? &tg : NULL);
}

void cuda_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *z,
                        int64_t ldz, const float *w, float eps, float *y, int64_t ldy) {
    if (cuda_ctx(be)->status != CLEF_OK || rows <= 0)
        return;
    __nv_bfloat16 *yb = staging_for(be, rows, dim, ldy);
    const int vec = dim % 4 == 0 && ldx % 4 == 0 && ldz % 4 == 0 && ldy % 4 == 0 &&
                    ((uintptr_t)x | (uintptr_t)z | (uintptr_t)w | (uintptr_t)y) % 16 == 0;
    cuda_qstage_target tg;
    if (vec && dim <= 256 && ldy == dim && cuda_qstage_claim(be, CUDA_QSTAGE_GATED_NORM, rows * dim, dim, 0, &tg)) {
        const size_t smem = sizeof(float) * (size_t)tg.K;
        const unsigned tokens = (unsigned)(rows * dim / tg.K);
        if (dim <= 128) {
            cudaFuncSetAttribute(k_rmsnorm_gated_rows_q<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            k_rmsnorm_gated_rows_q<1><<<tokens, NORM_GATED_Q_THREADS, smem, cuda_ctx(be)->stream>>>(
                dim, x, ldx, z, ldz, w, eps, y, ldy, yb, tg);
        } else {
            cudaFuncSetAttribute(k_rmsnorm_gated_rows_q<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            k_rmsnorm_gated_rows_q<2><<<tokens, NORM_GATED_Q_THREADS, smem, cuda_ctx(be)->stream>>>(
                dim, x, ldx, z, ldz, w, eps, y, ldy, yb, tg);
        }
        CUDA_CHECK_LAUNCH(be, "rmsnorm_gated + quantizer kernel");
        if (yb)
            cuda_staging_mark(be, y, rows * dim);
        cuda_qstage_mark(be, CUDA_QSTAGE_GATED_NORM, y, rows * dim, &tg);
        return;
    }
    if (vec && dim <= 128)
        k_rmsnorm_gated_warp_vec<1><<<cuda_blocks(rows, NORM_WARP_ROWS), NORM_THREADS, 0, cuda_ctx(be)->stream>>>(
            rows, dim, x, ldx, z, ldz, w, eps, y, ldy, yb);
    else if (vec && dim <= 256)
        k_rmsnorm_gated_warp_vec<2><<<cuda_blocks(rows, NORM_WARP_ROWS), NORM_THREADS, 0, cuda_ctx(be)->stream>>>(
            rows, dim, x, ldx, z, ldz, w, eps, y, ldy, yb);
    else if (dim <= NORM_WARP_DIM)
        k_rmsnorm_gated_warp<<<cuda_blocks(rows, NORM_WARP_ROWS), NORM_THREADS, 0, cuda_ctx(be)->stream>>>(
            rows, dim, x, ldx, z, ldz, w, eps, y, ldy, yb);
    else
        k_rmsnorm_gated<<<(unsigned)rows, NORM_THREADS, 0, cuda_ctx(be)->stream>>>(dim, x, ldx, z, ldz, w, eps, y, ldy,
                                                                                  yb);
    CUDA_CHECK_LAUNCH(be, "rmsnorm_gated kernel");
    if (yb)
        cuda_staging_mark(be, y, rows * dim);
    if (ldy == dim)
        cuda_qstage_mark(be, CUDA_QSTAGE_GATED_NORM, y, rows * dim, NULL);
}

void cuda_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *w,
                    const float *b, float eps, float *y, int64_t ldy) {
    if (cuda_ctx(be)->status != CLEF_OK || rows <= 0)
        return;
    k_layernorm<<<(unsigned)rows, NORM_THREADS, 0, cuda_ctx(be)->stream>>>(dim, x, ldx, w, b, eps, y, ldy);
    CUDA_CHECK_LAUNCH(be, "layernorm kernel");
}

void cuda_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx) {
    if (cuda_ctx(be)->status != CLEF_OK || rows <= 0)
        return;
    k_softmax<<<(unsigned)rows, NORM_THREADS, 0, cuda_ctx(be)->stream>>>(cols, x, ldx);
    CUDA_CHECK_LAUNCH(be, "softmax kernel");
}
