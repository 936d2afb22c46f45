/*
 * cuda_quant_int8_wgmma.cu — the INT8 ConvRot GEMM on Hopper's own integer tensor-core
 * instruction (wgmma.mma_async m64n128k32 s32.s8.s8, sm_90a), with the scaling epilogue fused:
 *
 *   y[t, n] = (accumulate ? y : 0) + float(sum_k qx[t, k] qw[n, k]) * (s_t * s_w[n]) (+ bias[n])
 *
 * the arithmetic of cuda_quant_epilogue_i32 (clef_int8_matmul_rows) on the same int32 sums, so
 * the result is the cuBLASLt path's, bit for bit: int32 accumulation of int8 products is exact
 * in any order. Why a kernel of our own: cuBLASLt runs int8 on sm_90 with an Ampere-generation
 * (mma.sync) kernel at about the BF16 rate and writes the int32 sums to memory for a second
 * kernel to scale; wgmma runs int8 at twice the BF16 rate and the epilogue here reads each sum
 * from registers.
 *
 * One thread block (384 threads) makes a 128 x BN tile of y (BN = 128 or 256):
 *  - warpgroup 0, the producer: one thread loads the 128 x 128-byte slab of qx and the BN x 128
 *    slab of qw of each k step with the bulk tensor copy engine (TMA, 128-byte swizzle) into a
 *    ring of STAGES shared-memory stages; "full" mbarriers count the bytes in, "empty"
 *    mbarriers say when the consumers are done with a stage.
 *  - warpgroups 1 and 2, the consumers: rows 0-63 and 64-127 of the tile; per k step four
 *    k32 slices times BN / 128 wgmma m64n128k32, accumulators in registers (int32); one group
 *    of wgmmas stays in flight while the next stage is waited for.
 *  - the epilogue: each consumer thread scales its own accumulators and stores them (or, for
 *    the tests, stores the int32 sums).
 * Operands in shared memory: K-major (the only layout wgmma has for 8-bit types: both qx and
 * qw are [rows, K] row-major, as stored), each row 128 bytes, the 16-byte chunks of row r
 * permuted by r mod 8 (TMA's 128-byte swizzle, which is wgmma's canonical 128B-swizzled
 * K-major layout: 8-row atoms 1,024 bytes apart, the descriptor's stride byte offset; a k32
 * slice is the descriptor's start address plus 32 bytes, the hardware applying the swizzle to
 * the address bits, so every stage starts 1,024-byte aligned). TMA fills rows past T or N and
 * bytes past K with zeros, so edges need no special case (K a multiple of 16: TMA's stride
 * rule); the epilogue stores only t < T, n < N.
 *
 * The tensor maps are made per call on the host (cuTensorMapEncodeTiled, reached through the
 * runtime's driver entry point: no link against libcuda) and passed by value.
 */
#include "backend/cuda/cuda_quant_internal.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#define WG_BM 128       /* rows of qx (tokens) per tile: two consumer warpgroups of 64 */
#define WG_BK 128       /* bytes (= int8 elements) of K per stage: one 128-byte swizzle row */
#define WG_THREADS 384  /* producer + 2 consumer warpgroups */

template <int BN> struct wg_cfg {
    static constexpr int NB = BN / 128;                     /* m64n128 wgmmas per k32 slice */
    static constexpr int STAGES = BN == 256 ? 4 : 6;
    static constexpr int A_BYTES = WG_BM * WG_BK;          /* 16 KB */
    static constexpr int B_BYTES = BN * WG_BK;             /* 16 or 32 KB */
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024; /* + barriers, alignment */
};

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

/* Waits for the phase of the given parity to complete. A pipeline bug would hang here; past
 * ~10 s of waiting the kernel traps instead, so the backend reports a failed launch. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done = 0;
    long long start = 0;
    for (int tries = 0;; tries++) {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(smem_u32(bar)), "r"(parity)
                     : "memory");
        if (done)
            return;
        if (tries == 0)
            start = clock64();
        else if ((tries & 1023) == 0 && clock64() - start > 20000000000ll)
            __trap();
    }
}

/* box at coordinates (c0 = byte of K, c1 = row) of the tensor map into dst, counted on bar */
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}

/* wgmma shared-memory descriptor: 128-byte swizzle (mode 1, bits 62-63), stride byte offset
 * 1,024 (8 rows of 128 bytes, bits 32-45, in 16-byte units), leading byte offset unused for
 * swizzled K-major operands (1), start address in 16-byte units (bits 0-13). */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3ffff) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

#define WG_R8(i) "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), "+r"(d[i + 5]), \
                 "+r"(d[i + 6]), "+r"(d[i + 7])

/* d[64] += A (64 x 32, descriptor da) x B (128 x 32, descriptor db)^T, int32 */
__device__ __forceinline__ void wgmma_m64n128k32_s8(int32_t *d, uint64_t da, uint64_t db) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p;\n\t}"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24), WG_R8(32), WG_R8(40), WG_R8(48), WG_R8(56)
                 : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Where the tile goes: fused (scales, bias, accumulate into fp32 y) or the int32 sums. */
struct wg_out {
    int32_t *acc;
    int64_t ldacc;
    const float *sx, *sw, *bias;
    float *y;
    int64_t ldy;
    int accumulate, pairs; /* pairs: y and ldy allow 8-byte stores of column pairs */
};

template <int BN, bool FUSED>
__global__ void __launch_bounds__(WG_THREADS, 1)
    k_int8_wgmma(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int T, int N,
                 int K, wg_out out) {
    typedef wg_cfg<BN> C;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
    uint8_t *sa = smem, *sb = smem + C::STAGES * C::A_BYTES;
    uint64_t *full = (uint64_t *)(sb + C::STAGES * C::B_BYTES), *empty = full + C::STAGES;
    const int m0 = blockIdx.x * WG_BM, n0 = blockIdx.y * BN, nk = (K + WG_BK - 1) / WG_BK;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8); /* lane 0 of each consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            for (int kb = 0; kb < nk; kb++) {
                const int s = kb % C::STAGES;
                if (kb >= C::STAGES)
                    mbar_wait(&empty[s], (uint32_t)((kb / C::STAGES - 1) & 1));
                mbar_expect_tx(&full[s], (uint32_t)(C::A_BYTES + C::B_BYTES));
                tma_load_2d(sa + s * C::A_BYTES, &map_x, &full[s], kb * WG_BK, m0);
                tma_load_2d(sb + s * C::B_BYTES, &map_w, &full[s], kb * WG_BK, n0);
            }
        }
    } else { /* consumers */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        int32_t d[C::NB][64];
#pragma unroll
        for (int nb = 0; nb < C::NB; nb++)
#pragma unroll
            for (int i = 0; i < 64; i++)
                d[nb][i] = 0;
        for (int kb = 0; kb < nk; kb++) {
            const int s = kb % C::STAGES;
            mbar_wait(&full[s], (uint32_t)((kb / C::STAGES) & 1));
            const uint32_t a = smem_u32(sa + s * C::A_BYTES) + (uint32_t)(cw * 64 * WG_BK);
            const uint32_t b = smem_u32(sb + s * C::B_BYTES);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 32; kk++) {
                const uint64_t da = wg_desc(a + 32 * kk);
#pragma unroll
                for (int nb = 0; nb < C::NB; nb++)
                    wgmma_m64n128k32_s8(d[nb], da, wg_desc(b + (uint32_t)(nb * 128 * WG_BK) + 32 * kk));
            }
            wgmma_commit();
            /* the previous k step's wgmmas are done with their stage: give it back */
            wgmma_wait<1>();
            if (kb > 0 && lane == 0)
                mbar_arrive(&empty[(kb - 1) % C::STAGES]);
        }
        wgmma_wait<0>();

        /* d[nb][4 j + 2 h + e] is row 16 warp + lane / 4 + 8 h, column nb 128 + 8 j + 2 (lane % 4) + e */
        const int row_base = m0 + cw * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int t = row_base + 8 * h;
            if (t >= T)
                continue;
            const float st = FUSED ? out.sx[t] : 0.0f;
#pragma unroll
            for (int nb = 0; nb < C::NB; nb++)
#pragma unroll
                for (int j = 0; j < 16; j++) {
                    const int n = n0 + nb * 128 + 8 * j + 2 * (lane % 4);
                    const int32_t v0 = d[nb][4 * j + 2 * h], v1 = d[nb][4 * j + 2 * h + 1];
                    if (!FUSED) {
                        int32_t *o = out.acc + (int64_t)t * out.ldacc + n;
                        if (n < N)
                            o[0] = v0;
                        if (n + 1 < N)
                            o[1] = v1;
                        continue;
                    }
                    float *o = out.y + (int64_t)t * out.ldy + n;
                    if (out.pairs && n + 1 < N) {
                        float r0 = __fmul_rn(__int2float_rn(v0), __fmul_rn(st, out.sw[n]));
                        float r1 = __fmul_rn(__int2float_rn(v1), __fmul_rn(st, out.sw[n + 1]));
                        if (out.bias)
                            r0 = __fadd_rn(r0, out.bias[n]), r1 = __fadd_rn(r1, out.bias[n + 1]);
                        if (out.accumulate) {
                            float2 old = *(const float2 *)o;
                            r0 = __fadd_rn(old.x, r0), r1 = __fadd_rn(old.y, r1);
                        }
                        *(float2 *)o = make_float2(r0, r1);
                        continue;
                    }
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        if (n + e >= N)
                            break;
                        float r = __fmul_rn(__int2float_rn(e ? v1 : v0), __fmul_rn(st, out.sw[n + e]));
                        if (out.bias)
                            r = __fadd_rn(r, out.bias[n + e]);
                        o[e] = out.accumulate ? __fadd_rn(o[e], r) : r;
                    }
                }
        }
    }
}

/* ---- host side ------------------------------------------------------------------------------ */

static PFN_cuTensorMapEncodeTiled_v12000 wg_encode_fn(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    static int asked = 0;
    if (!asked) {
        asked = 1;
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        else
            cudaGetLastError(); /* not this backend's failure: the caller falls back */
    }
    return fn;
}

/* [rows, K] int8 row-major at p, boxes of box_rows x 128 bytes, 128-byte swizzle */
static int wg_map(CUtensorMap *map, const void *p, int64_t rows, int64_t K, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = wg_encode_fn();
    if (!enc)
        return 0;
    cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)K};
    cuuint32_t box[2] = {WG_BK, (cuuint32_t)box_rows}, elem[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BN, bool FUSED> static int wg_launch(clef_backend *be, int64_t T, int64_t N, int64_t K, const int8_t *qx,
                                                   const int8_t *qw, const wg_out &out) {
    cuda_context *ctx = cuda_ctx(be);
    CUtensorMap mx, mw;
    if (!wg_map(&mx, qx, T, K, WG_BM) || !wg_map(&mw, qw, N, K, BN))
        return 0;
    /* every call: the attribute is per device */
    if (cudaFuncSetAttribute(k_int8_wgmma<BN, FUSED>, cudaFuncAttributeMaxDynamicSharedMemorySize, wg_cfg<BN>::SMEM) !=
        cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    dim3 grid((unsigned)((T + WG_BM - 1) / WG_BM), (unsigned)((N + BN - 1) / BN));
    k_int8_wgmma<BN, FUSED><<<grid, WG_THREADS, wg_cfg<BN>::SMEM, ctx->stream>>>(mx, mw, (int)T, (int)N, (int)K, out);
    return CUDA_CHECK_LAUNCH(be, "int8 wgmma GEMM kernel") == CLEF_OK;
}

/* Whether this device and these operands can take the wgmma kernel: sm_90 (the code is built
 * for sm_90a only), K a multiple of 16 and 16-byte aligned operands (TMA), sizes in int. */
static int wg_usable(clef_backend *be, int64_t T, int64_t N, int64_t K, const void *qx, const void *qw) {
    cuda_context *ctx = cuda_ctx(be);
    static int major = -1, minor = -1, dev = -1;
    if (dev != ctx->device) {
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx->device);
        dev = ctx->device;
    }
    return major == 9 && minor == 0 && K % 16 == 0 && (uintptr_t)qx % 16 == 0 && (uintptr_t)qw % 16 == 0 &&
           T < INT32_MAX / 2 && N < INT32_MAX / 2 && K < INT32_MAX / 2;
}

int cuda_int8_wgmma_gemm(clef_backend *be, int tile_n, int64_t T, int64_t N, int64_t K, const int8_t *qx,
                         const int8_t *qw, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                         int accumulate) {
    if (!wg_usable(be, T, N, K, qx, qw))
        return 0;
    wg_out o = {};
    o.sx = sx, o.sw = sw, o.bias = bias, o.y = y, o.ldy = ldy, o.accumulate = accumulate;
    o.pairs = ldy % 2 == 0 && (uintptr_t)y % 8 == 0;
    return tile_n == 128 ? wg_launch<128, true>(be, T, N, K, qx, qw, o) : wg_launch<256, true>(be, T, N, K, qx, qw, o);
}

extern "C" int clef_cuda_int8_gemm_i32_wgmma(clef_backend *be, int tile_n, int64_t T, int64_t N, int64_t K,
                                             const int8_t *qx, const int8_t *qw, int32_t *acc, int64_t ldacc) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return ctx->status;
    if (!wg_usable(be, T, N, K, qx, qw) || ldacc < N)
        return CLEF_ERR_UNSUPPORTED;
    wg_out o = {};
    o.acc = acc, o.ldacc = ldacc;
    int ok = tile_n == 128 ? wg_launch<128, false>(be, T, N, K, qx, qw, o) : wg_launch<256, false>(be, T, N, K, qx, qw, o);
    return ok ? CLEF_OK : (ctx->status != CLEF_OK ? ctx->status : CLEF_ERR_UNSUPPORTED);
}
