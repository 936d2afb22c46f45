/*
 * cuda_quant_act.cu — the per-token activation quantizers of the FP8 and INT8 ConvRot GEMMs:
 * one thread block per token (row), fp32 in, codes + one scale per row out, each bit-identical
 * to its CPU reference (src/quant/): every rounding step is written as an explicit
 * round-to-nearest intrinsic (__fdiv_rn, __fmul_rn, __fadd_rn), so nvcc never contracts or
 * approximates one, and the row maximum is exact in any order.
 *
 * FP8 (clef_fp8_quantize_tokens, CLEF_QUANT_ACT_F32):
 *   s = amax / 448, FLT_EPSILON if 0;  q = e4m3_rne(clamp(x / s, -448, 448))
 *   The row is read once (into shared memory: 68 KB for 17,408 features) and coded from there;
 *   the codes go out as bytes, or for the exact GEMM path as their bf16 values.
 * INT8 ConvRot (clef_convrot_quantize_tokens_fast, or with exact clef_convrot_quantize_tokens
 * in fp32):
 *   r = x H256 per group (butterfly: four radix-4 stages of 0.5 * H4; exact: the dense
 *   product summed as torch's CPU matmul does, two blocks of 128 in order, then added)
 *   s = max(amax_r / 127, 1e-30)   (or the static input scale)
 *   q = clamp(rint(r / s), -128, 127)
 * The ConvRot row lives in shared memory (K floats; the exact form another K for its output),
 * read from global memory once; the butterfly's last stage takes the row maximum as it writes.
 * The rounding steps are cuda_quant_row.cuh's, which the fused producers share (the hand-off,
 * cuda_quant_stage.cu): their codes are these kernels' bit for bit.
 */
#include "backend/cuda/cuda_quant_row.cuh"

/* 512 threads a row: a 17,408-wide row is one block per row with 68 KB of shared memory, so at
 * most three blocks fit an SM; enough loads must be in flight per block to keep memory busy. */
#define QACT_THREADS 512

/* Rows wider than this many floats (the shared memory a block can have, less the kernel's own)
 * take the two-pass kernel: every model here is far below it (17,408 at most). */
static int64_t fp8_row_limit(clef_backend *be) {
    int dev_max = 0;
    cudaDeviceGetAttribute(&dev_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, cuda_ctx(be)->device);
    return ((int64_t)dev_max - 1024) / (int64_t)sizeof(float);
}

/* The row's code at k goes out as the code (uint8) or as its value in bf16 (exact: every e4m3
 * value is a bf16 value), the exact path's GEMM input. */
template <bool BF16> __device__ __forceinline__ void fp8_put(void *q, int64_t i, uint8_t c) {
    if (BF16)
        ((__nv_bfloat16 *)q)[i] = __float2bfloat16_rn(cuda_e4m3_value(c));
    else
        ((uint8_t *)q)[i] = c;
}

/* Single pass: the row is read from global memory once, into shared memory (vectorized when
 * its start and length allow), its maximum taken on the way; then coded from shared memory.
 * Each thread codes the very elements it staged, so only the maximum needs the barrier. */
template <bool BF16>
__global__ void __launch_bounds__(QACT_THREADS) k_fp8_quantize_rows(int64_t K, const float *x, int64_t ldx, void *q,
                                                                    float *scale, int vec4) {
    extern __shared__ float row[]; /* K floats */
    __shared__ float red[QACT_THREADS / 32];
    const int64_t t = blockIdx.x;
    const float *xr = x + t * ldx;
    float amax = 0.0f;
    if (vec4) {
#pragma unroll 4
        for (int64_t k = threadIdx.x; k < K / 4; k += blockDim.x) {
            float4 v = ((const float4 *)xr)[k];
            ((float4 *)row)[k] = v;
            amax = fmaxf(fmaxf(amax, fmaxf(fabsf(v.x), fabsf(v.y))), fmaxf(fabsf(v.z), fabsf(v.w)));
        }
    } else {
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            float v = xr[k];
            row[k] = v;
            amax = fmaxf(amax, fabsf(v));
        }
    }
    const float s = fp8_row_scale(qrow_block_max(amax, red));
    if (threadIdx.x == 0)
        scale[t] = s;
    if (vec4) {
        for (int64_t k = threadIdx.x; k < K / 4; k += blockDim.x) {
            float4 v = ((const float4 *)row)[k];
            uint8_t c0 = fp8_code(v.x, s), c1 = fp8_code(v.y, s), c2 = fp8_code(v.z, s), c3 = fp8_code(v.w, s);
            if (BF16) {
                __nv_bfloat16 *o = (__nv_bfloat16 *)q + t * K + 4 * k;
                __nv_bfloat162 lo = __floats2bfloat162_rn(cuda_e4m3_value(c0), cuda_e4m3_value(c1));
                __nv_bfloat162 hi = __floats2bfloat162_rn(cuda_e4m3_value(c2), cuda_e4m3_value(c3));
                uint2 pk;
                pk.x = *(uint32_t *)&lo, pk.y = *(uint32_t *)&hi;
                *(uint2 *)o = pk; /* 8-byte aligned: t K + 4 k is a multiple of 4 */
            } else {
                ((uint32_t *)((uint8_t *)q + t * K))[k] =
                    (uint32_t)c0 | ((uint32_t)c1 << 8) | ((uint32_t)c2 << 16) | ((uint32_t)c3 << 24);
            }
        }
    } else {
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
            fp8_put<BF16>(q, t * K + k, fp8_code(row[k], s));
    }
}

/* The earlier two-pass form (maximum, then a second read to code), for rows past the shared
 * memory (none of the models'). */
template <bool BF16>
__global__ void __launch_bounds__(QACT_THREADS) k_fp8_quantize_rows_2pass(int64_t K, const float *x, int64_t ldx,
                                                                          void *q, float *scale) {
    __shared__ float red[QACT_THREADS / 32];
    const int64_t t = blockIdx.x;
    const float *xr = x + t * ldx;
    float amax = 0.0f;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
        amax = fmaxf(amax, fabsf(xr[k]));
    const float s = fp8_row_scale(qrow_block_max(amax, red));
    if (threadIdx.x == 0)
        scale[t] = s;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
        fp8_put<BF16>(q, t * K + k, fp8_code(xr[k], s));
}

template <bool BF16>
static void fp8_quantize(clef_backend *be, int64_t T, int64_t K, const float *x, int64_t ldx, void *q, float *scale) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    if (K > fp8_row_limit(be)) {
        k_fp8_quantize_rows_2pass<BF16><<<(unsigned)T, QACT_THREADS, 0, ctx->stream>>>(K, x, ldx, q, scale);
        CUDA_CHECK_LAUNCH(be, "fp8 activation quantizer kernel");
        return;
    }
    const size_t smem = sizeof(float) * (size_t)K;
    const int vec4 = K % 4 == 0 && ldx % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)q % 16 == 0;
    cuda_record(be, cudaFuncSetAttribute(k_fp8_quantize_rows<BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem), "fp8 quantizer shared memory");
    k_fp8_quantize_rows<BF16><<<(unsigned)T, QACT_THREADS, smem, ctx->stream>>>(K, x, ldx, q, scale, vec4);
    CUDA_CHECK_LAUNCH(be, "fp8 activation quantizer kernel");
}

extern "C" void clef_cuda_fp8_quantize_tokens(clef_backend *be, int64_t T, int64_t K, const float *x, int64_t ldx,
                                              uint8_t *q, float *scale) {
    fp8_quantize<false>(be, T, K, x, ldx, q, scale);
}

extern "C" void clef_cuda_fp8_quantize_tokens_bf16(clef_backend *be, int64_t T, int64_t K, const float *x,
                                                   int64_t ldx, uint16_t *qv, float *scale) {
    fp8_quantize<true>(be, T, K, x, ldx, qv, scale);
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
                                                                        float *scale, int vec4) {
    extern __shared__ float row[]; /* K floats (+ K more for the exact rotation's output) */
    __shared__ float red[QACT_THREADS / 32];
    const int64_t t = blockIdx.x;
    const float *xr = x + t * ldx;
    if (vec4) /* 16-byte loads: the row is read from global memory once, here */
#pragma unroll 4
        for (int64_t k = threadIdx.x; k < K / 4; k += blockDim.x)
            ((float4 *)row)[k] = ((const float4 *)xr)[k];
    else
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
            row[k] = xr[k];
    __syncthreads();
    float *r = row;
    float amax = 0.0f; /* of what this thread wrote last: the butterfly's last stage, or the scan below */
    if (rotate && exact) {
        hadamard_torch_order(row, row + K, K);
        r = row + K;
    } else if (rotate) {
        fht_stage(row, K, 1);
        fht_stage(row, K, 4);
        fht_stage(row, K, 16);
        amax = fht_stage(row, K, 64);
    }
    float s;
    if (static_scale) {
        s = *static_scale;
    } else {
        if (!rotate || exact)
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
                amax = fmaxf(amax, fabsf(r[k]));
        s = int8_row_scale(qrow_block_max(amax, red));
    }
    if (threadIdx.x == 0)
        scale[t] = s;
    int8_t *qr = q + t * K;
    if (vec4) {
        for (int64_t k = threadIdx.x; k < K / 4; k += blockDim.x) {
            float4 v = ((const float4 *)r)[k];
            char4 c;
            c.x = int8_code(v.x, s), c.y = int8_code(v.y, s), c.z = int8_code(v.z, s), c.w = int8_code(v.w, s);
            ((char4 *)qr)[k] = c;
        }
    } else {
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            qr[k] = int8_code(r[k], s);
        }
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
    /* always: the kernel's static shared memory counts against the 48 KB default too (a
     * 12,288-wide row, exactly 48 KB dynamic, failed to launch without it) */
    cuda_record(be, cudaFuncSetAttribute(k_convrot_quantize_rows, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem), "ConvRot quantizer shared memory");
    const int vec4 = K % 4 == 0 && ldx % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)q % 4 == 0;
    k_convrot_quantize_rows<<<(unsigned)T, QACT_THREADS, smem, ctx->stream>>>(K, x, ldx, rotate, exact, static_scale,
                                                                              q, scale, vec4);
    CUDA_CHECK_LAUNCH(be, "ConvRot activation quantizer kernel");
}
