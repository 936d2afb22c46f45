/*
 * cuda_quant_row.cuh — the per-token activation quantizers' arithmetic as device functions,
 * shared by the standalone quantizer kernels (cuda_quant_act.cu) and the ops that write a
 * quantized matmul's codes themselves (the hand-off, cuda_quant_stage.cu: RMSNorm, SwiGLU,
 * the attention output gate). One copy of each rounding step, so a fused producer's codes
 * and scales are the standalone quantizer's bit for bit by construction; each step is the
 * CPU reference's (src/quant/), written with explicit round-to-nearest intrinsics so nvcc
 * never contracts or approximates one.
 */
#ifndef CLEF_BACKEND_CUDA_QUANT_ROW_CUH
#define CLEF_BACKEND_CUDA_QUANT_ROW_CUH

#include "backend/cuda/cuda_quant_internal.cuh"

#include <float.h>

/* The CPU's clef_f32_to_fp8e4m3 (torch's cast: round to nearest even, NaN at >= 480), in the
 * same integer steps. */
static __device__ __forceinline__ uint8_t f32_to_e4m3(float f) {
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

/* FP8: the row's scale from its maximum magnitude, and the code of x / s (the CPU's steps). */
static __device__ __forceinline__ float fp8_row_scale(float amax) {
    float s = __fdiv_rn(amax, 448.0f);
    return s == 0.0f ? FLT_EPSILON : s;
}

static __device__ __forceinline__ uint8_t fp8_code(float x, float s) {
    float v = __fdiv_rn(x, s);
    return f32_to_e4m3(fminf(fmaxf(v, -448.0f), 448.0f));
}

/* INT8: the dynamic scale, and the code of r / s. */
static __device__ __forceinline__ float int8_row_scale(float amax) { return fmaxf(__fdiv_rn(amax, 127.0f), 1e-30f); }

static __device__ __forceinline__ signed char int8_code(float r, float s) {
    return (signed char)fminf(fmaxf(rintf(__fdiv_rn(r, s)), -128.0f), 127.0f);
}

/* The maximum of v over the block (every thread gets it); red: 32 floats of shared memory. */
static __device__ __forceinline__ float qrow_block_max(float v, float *red) {
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

/* One radix-4 stage of stride s over every 256-group of r[0, K): butterfly b of a group
 * touches j, j + s, j + 2s, j + 3s with j = (b / s) * 4s + b % s. The CPU's FHT_STAGE; each
 * butterfly's arithmetic does not depend on which thread runs it. Returns the largest
 * magnitude this thread wrote (the last stage's gives the row maximum: no pass of its own). */
static __device__ __forceinline__ float fht_stage(float *r, int64_t K, int s) {
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < K / 4; i += blockDim.x) {
        int64_t g = (i / 64) * 256;
        int b = (int)(i % 64);
        int64_t j = g + (b / s) * 4 * s + b % s;
        float a = r[j], bb = r[j + s], c = r[j + 2 * s], d = r[j + 3 * s];
        float ab = __fadd_rn(a, bb), a_b = __fsub_rn(a, bb), cd = __fadd_rn(c, d), c_d = __fsub_rn(c, d);
        float o0 = __fmul_rn(0.5f, __fadd_rn(ab, c_d)), o1 = __fmul_rn(0.5f, __fsub_rn(ab, c_d));
        float o2 = __fmul_rn(0.5f, __fadd_rn(a_b, cd)), o3 = __fmul_rn(0.5f, __fsub_rn(cd, a_b));
        r[j] = o0, r[j + s] = o1, r[j + 2 * s] = o2, r[j + 3 * s] = o3;
        amax = fmaxf(amax, fmaxf(fmaxf(fabsf(o0), fabsf(o1)), fmaxf(fabsf(o2), fabsf(o3))));
    }
    __syncthreads();
    return amax;
}

/* FP8: the codes of four consecutive values v (elements 4 k4 .. 4 k4 + 3 of row t) with the
 * row's scale s, stored at once (the codes as bytes, or their bf16 values for the exact path). */
static __device__ __forceinline__ void cuda_qrow_fp8_put4(const cuda_qstage_target &tg, int64_t t, int64_t k4,
                                                          float4 v, float s) {
    const uint8_t c0 = fp8_code(v.x, s), c1 = fp8_code(v.y, s), c2 = fp8_code(v.z, s), c3 = fp8_code(v.w, s);
    if (tg.mode == CUDA_QMODE_FP8_BF16) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(cuda_e4m3_value(c0), cuda_e4m3_value(c1));
        __nv_bfloat162 hi = __floats2bfloat162_rn(cuda_e4m3_value(c2), cuda_e4m3_value(c3));
        uint2 pk;
        pk.x = *(uint32_t *)&lo, pk.y = *(uint32_t *)&hi;
        *(uint2 *)((__nv_bfloat16 *)tg.codes + t * tg.K + 4 * k4) = pk;
    } else {
        ((uint32_t *)((uint8_t *)tg.codes + t * tg.K))[k4] =
            (uint32_t)c0 | ((uint32_t)c1 << 8) | ((uint32_t)c2 << 16) | ((uint32_t)c3 << 24);
    }
}

static __device__ __forceinline__ float amax4(float a, float4 v) {
    return fmaxf(a, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
}

/* Row t of a fused producer: its tg.K values are in shared memory (row, written by this
 * block and followed by a barrier; the rotation works in place); writes the codes of row t
 * at tg.codes + t K and its scale at tg.scales[t], as clef_cuda_fp8_quantize_tokens(_bf16) /
 * clef_cuda_convrot_quantize_tokens (butterfly) would from the same fp32 values. K is a
 * multiple of 4 (16 for FP8, 256 with the rotation: cuda_qstage_claim), the code buffer
 * 256-byte aligned, so the stores go 4 codes at a time. Every thread of the block calls it. */
static __device__ void cuda_qrow_quantize_max(const cuda_qstage_target &tg, int64_t t, float *row, float *red,
                                               float fp8_amax);

static __device__ void cuda_qrow_quantize(const cuda_qstage_target &tg, int64_t t, float *row, float *red) {
    float amax = 0.0f;
    if (tg.mode == CUDA_QMODE_FP8 || tg.mode == CUDA_QMODE_FP8_BF16)
        for (int64_t k = threadIdx.x; k < tg.K; k += blockDim.x)
            amax = fmaxf(amax, fabsf(row[k]));
    cuda_qrow_quantize_max(tg, t, row, red, amax);
}

/* cuda_qrow_quantize for a producer that took, as it wrote the row, each thread's largest
 * magnitude among the values it wrote (fp8_amax; the block's maximum is the same whichever
 * thread saw which value, so the scale is the same bits): FP8 skips its own pass over the row
 * for it. INT8 ignores it (its maximum is of the rotated row). */
static __device__ void cuda_qrow_quantize_max(const cuda_qstage_target &tg, int64_t t, float *row, float *red,
                                               float fp8_amax) {
    const int64_t K = tg.K;
    if (tg.mode == CUDA_QMODE_FP8 || tg.mode == CUDA_QMODE_FP8_BF16) {
        const float s = fp8_row_scale(qrow_block_max(fp8_amax, red));
        if (threadIdx.x == 0)
            tg.scales[t] = s;
        for (int64_t k = threadIdx.x; k < K / 4; k += blockDim.x)
            cuda_qrow_fp8_put4(tg, t, k, ((const float4 *)row)[k], s);
        return;
    }
    /* INT8 ConvRot: rotate in place (butterfly), then as k_convrot_quantize_rows */
    float amax = 0.0f;
    if (tg.mode == CUDA_QMODE_INT8_ROT256) {
        fht_stage(row, K, 1);
        fht_stage(row, K, 4);
        fht_stage(row, K, 16);
        amax = fht_stage(row, K, 64);
    }
    float s;
    if (tg.static_scale) {
        s = *tg.static_scale;
    } else {
        if (tg.mode != CUDA_QMODE_INT8_ROT256)
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
                amax = fmaxf(amax, fabsf(row[k]));
        s = int8_row_scale(qrow_block_max(amax, red));
    }
    if (threadIdx.x == 0)
        tg.scales[t] = s;
    int8_t *qr = (int8_t *)tg.codes + t * K;
    for (int64_t k = threadIdx.x; k < K / 4; k += blockDim.x) {
        const float4 v = ((const float4 *)row)[k];
        char4 c;
        c.x = int8_code(v.x, s), c.y = int8_code(v.y, s), c.z = int8_code(v.z, s), c.w = int8_code(v.w, s);
        ((char4 *)qr)[k] = c;
    }
}

#endif /* CLEF_BACKEND_CUDA_QUANT_ROW_CUH */
