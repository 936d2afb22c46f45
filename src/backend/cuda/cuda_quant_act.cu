/*
 * cuda_quant_act.cu — the per-token activation quantizers of the FP8 and INT8 ConvRot GEMMs:
 * one thread block per token (row), fp32 in, codes + one scale per row out, each bit-identical
 * to its CPU reference (src/quant/): every rounding step is written as an explicit
 * round-to-nearest intrinsic (__fdiv_rn, __fmul_rn, __fadd_rn), so nvcc never contracts or
 * approximates one, and the row maximum is exact in any order.
 *
 * FP8 (clef_fp8_quantize_tokens, CLEF_QUANT_ACT_F32):
 *   s = amax / 448, FLT_EPSILON if 0;  q = e4m3_rne(clamp(x / s, -448, 448))
 * INT8 ConvRot (clef_convrot_quantize_tokens_fast, or with exact clef_convrot_quantize_tokens
 * in fp32):
 *   r = x H256 per group (butterfly: four radix-4 stages of 0.5 * H4; exact: the dense
 *   product summed as torch's CPU matmul does, two blocks of 128 in order, then added)
 *   s = max(amax_r / 127, 1e-30)   (or the static input scale)
 *   q = clamp(rint(r / s), -128, 127)
 * The ConvRot row lives in shared memory (K floats; the exact form another K for its output).
 */
#include "backend/cuda/cuda_quant_internal.cuh"

#include <float.h>

#define QACT_THREADS 256

/* The CPU's clef_f32_to_fp8e4m3 (torch's cast: round to nearest even, NaN at >= 480), in the
 * same integer steps. */
__device__ __forceinline__ uint8_t f32_to_e4m3(float f) {
    uint32_t u = __float_as_uint(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u || u >= 0x43f00000u)
        return (uint8_t)(sign | 0x7fu);
    if (u < 0x3c800000u) { /* subnormal: multiples of 2^-9, scaled exactly, rounded to even */
        float steps = rintf(__fmul_rn(__uint_as_float(u), 512.0f));
        return (uint8_t)(sign | (uint8_t)steps);
    }
    uint32_t r = (u + 0x7ffffu + ((u >> 20) & 1u)) >> 20;
    return (uint8_t)(sign | (uint8_t)(r - (120u << 3)));
}

/* The maximum of v over the block (every thread gets it). */
__device__ float block_max(float v, float *red) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); /* red may still be read from a previous call */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = red[0];
    for (int i = 1; i < (int)(blockDim.x / 32); i++)
        v = fmaxf(v, red[i]);
    return v;
}

__global__ void __launch_bounds__(QACT_THREADS) k_fp8_quantize_rows(int64_t K, const float *x, int64_t ldx,
                                                                    uint8_t *q, float *scale) {
    __shared__ float red[QACT_THREADS / 32];
    const int64_t t = blockIdx.x;
    const float *xr = x + t * ldx;
    float amax = 0.0f;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
        amax = fmaxf(amax, fabsf(xr[k]));
    amax = block_max(amax, red);
    float s = __fdiv_rn(amax, 448.0f);
    if (s == 0.0f)
        s = FLT_EPSILON;
    if (threadIdx.x == 0)
        scale[t] = s;
    uint8_t *qr = q + t * K;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        float v = __fdiv_rn(xr[k], s);
        v = fminf(fmaxf(v, -448.0f), 448.0f);
        qr[k] = f32_to_e4m3(v);
    }
}

extern "C" void clef_cuda_fp8_quantize_tokens(clef_backend *be, int64_t T, int64_t K, const float *x, int64_t ldx,
                                              uint8_t *q, float *scale) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    k_fp8_quantize_rows<<<(unsigned)T, QACT_THREADS, 0, ctx->stream>>>(K, x, ldx, q, scale);
    CUDA_CHECK_LAUNCH(be, "fp8 activation quantizer kernel");
}

/* One radix-4 stage of stride s over every 256-group of r[0, K): butterfly b of a group
 * touches j, j + s, j + 2s, j + 3s with j = (b / s) * 4s + b % s. The CPU's FHT_STAGE. */
__device__ __forceinline__ void fht_stage(float *r, int64_t K, int s) {
    for (int64_t i = threadIdx.x; i < K / 4; i += blockDim.x) {
        int64_t g = (i / 64) * 256;
        int b = (int)(i % 64);
        int64_t j = g + (b / s) * 4 * s + b % s;
        float a = r[j], bb = r[j + s], c = r[j + 2 * s], d = r[j + 3 * s];
        float ab = __fadd_rn(a, bb), a_b = __fsub_rn(a, bb), cd = __fadd_rn(c, d), c_d = __fsub_rn(c, d);
        r[j] = __fmul_rn(0.5f, __fadd_rn(ab, c_d));
        r[j + s] = __fmul_rn(0.5f, __fsub_rn(ab, c_d));
        r[j + 2 * s] = __fmul_rn(0.5f, __fadd_rn(a_b, cd));
        r[j + 3 * s] = __fmul_rn(0.5f, __fsub_rn(cd, a_b));
    }
    __syncthreads();
}

/* y = x H256 for every group, as clef_hadamard256_torch_f32 sums it: H[k][j] = +-1/16, the
 * sign the parity of the base-4 digits where k and j sum to 3 (where k ^ j has both bits). */
__device__ __forceinline__ void hadamard_torch_order(const float *x, float *y, int64_t K) {
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
        const float *xg = x + (i / 256) * 256;
        const int j = (int)(i % 256);
        float sum = 0.0f;
        for (int k0 = 0; k0 < 256; k0 += 128) {
            float block = 0.0f;
            for (int k = k0; k < k0 + 128; k++) {
                unsigned z = (unsigned)(k ^ j);
                float h = (__popc(z & (z >> 1) & 0x55u) & 1) ? -0.0625f : 0.0625f;
                block = __fadd_rn(block, __fmul_rn(xg[k], h));
            }
            sum = __fadd_rn(sum, block);
        }
        y[i] = sum;
    }
    __syncthreads();
}

__global__ void __launch_bounds__(QACT_THREADS) k_convrot_quantize_rows(int64_t K, const float *x, int64_t ldx,
                                                                        int rotate, int exact,
                                                                        const float *static_scale, int8_t *q,
                                                                        float *scale) {
    extern __shared__ float row[]; /* K floats (+ K more for the exact rotation's output) */
    __shared__ float red[QACT_THREADS / 32];
    const int64_t t = blockIdx.x;
    const float *xr = x + t * ldx;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
        row[k] = xr[k];
    __syncthreads();
    float *r = row;
    if (rotate && exact) {
        hadamard_torch_order(row, row + K, K);
        r = row + K;
    } else if (rotate) {
        fht_stage(row, K, 1);
        fht_stage(row, K, 4);
        fht_stage(row, K, 16);
        fht_stage(row, K, 64);
    }
    float s;
    if (static_scale) {
        s = *static_scale;
    } else {
        float amax = 0.0f;
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
            amax = fmaxf(amax, fabsf(r[k]));
        amax = block_max(amax, red);
        s = fmaxf(__fdiv_rn(amax, 127.0f), 1e-30f);
    }
    if (threadIdx.x == 0)
        scale[t] = s;
    int8_t *qr = q + t * K;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        float v = fminf(fmaxf(rintf(__fdiv_rn(r[k], s)), -128.0f), 127.0f);
        qr[k] = (int8_t)v;
    }
}

extern "C" void clef_cuda_convrot_quantize_tokens(clef_backend *be, int64_t T, int64_t K, const float *x,
                                                  int64_t ldx, int64_t group, const float *static_scale, int exact,
                                                  int8_t *q, float *scale) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    if (group != 0 && (group != 256 || K % 256 != 0)) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED,
                        "CUDA INT8 ConvRot: rotation group %lld over %lld input features (need 256 | K, or 0)",
                        (long long)group, (long long)K);
        return;
    }
    const int rotate = group == 256, two_rows = rotate && exact;
    size_t smem = sizeof(float) * (size_t)K * (two_rows ? 2 : 1);
    int dev_max = 0;
    cudaDeviceGetAttribute(&dev_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device);
    if (smem + 1024 > (size_t)dev_max) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED,
                        "CUDA INT8 ConvRot: %lld input features need %zu bytes of shared memory per row, the device "
                        "has %d", (long long)K, smem, dev_max);
        return;
    }
    if (smem > 48 * 1024)
        cuda_record(be, cudaFuncSetAttribute(k_convrot_quantize_rows, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem), "ConvRot quantizer shared memory");
    k_convrot_quantize_rows<<<(unsigned)T, QACT_THREADS, smem, ctx->stream>>>(K, x, ldx, rotate, exact, static_scale,
                                                                              q, scale);
    CUDA_CHECK_LAUNCH(be, "ConvRot activation quantizer kernel");
}
