/*
 * cuda_quant_wgmma.cu — GEMMs of the quantized formats on Hopper's own tensor-core instruction
 * (wgmma.mma_async, sm_90a) with the scaling fused into the epilogue:
 *
 *   INT8 ConvRot (s8 x s8 -> s32, m64nNk32):
 *     y[t, n] = (accumulate ? y : 0) + float(sum_k qx[t, k] qw[n, k]) * (s_t * s_w[n]) (+ bias[n])
 *     the arithmetic of cuda_quant_epilogue_i32 (clef_int8_matmul_rows) on the same int32
 *     sums (int32 accumulation of int8 products is exact in any order), so the result is the
 *     cuBLASLt path's and the CPU's, bit for bit.
 *   FP8 exact (bf16 x bf16 -> f32, m64nNk16, on the codes' bf16 values):
 *     y[t, n] = (accumulate ? y : 0) + (sum_k xv[t, k] wv[n, k]) * s_t * s_w[n] (+ bias[n])
 *     every product exact in fp32, summed in fp32 (cuda_quant_epilogue_f32's scaling order).
 * Why kernels of our own: cuBLASLt writes the int32 / fp32 sums to memory for a second kernel
 * to scale (a round trip of 8 bytes per output), and has no per-row x per-column scaling for
 * these types; here each sum is scaled from registers.
 *
 * One thread block (384 threads) makes a 128 x BN tile of y:
 *  - warpgroup 0, the producer: one thread loads the 128-row slab of x and the BN-row slab of
 *    the weight for each 128-byte step of K with the bulk tensor copy engine (TMA, 128-byte
 *    swizzle) into a ring of STAGES shared-memory stages; "full" mbarriers count the bytes in,
 *    "empty" mbarriers say when the consumers are done with a stage.
 *  - warpgroups 1 and 2, the consumers: 64 rows of the tile each; per stage four
 *    32-byte slices of K, each BN / WN wgmmas m64nWN (WN = 128 or 256), accumulators in
 *    registers; one stage's wgmmas stay in flight while the next stage is waited for.
 *  - the epilogue: each consumer thread scales its own accumulators and stores them (or, for
 *    the tests, stores the int32 sums).
 * Variants (cuda_quant.h, CLEF_CUDA_WGMMA_*): BN 128 or 256, WN 128 or 256, clusters of one or
 * two blocks. One block per SM (a 128 x 128 tile with two blocks per SM would need more than
 * the 85 registers a thread could then have; so would a 192 x 256 tile: ptxas compiles the
 * whole kernel within the entry cap, setmaxnreg or not). At these rates the operands' traffic
 * from L2 is a limit (48 KB per 8.4 M multiply-adds for a 128 x 256 tile: ~6 TB/s at 1,000
 * TOPS): the cluster variant multicasts the weight's slab to two blocks, 32 KB per block
 * (measured slower as written, H200 run15: not a default).
 * Operands in shared memory: K-major (both x and the weight are [rows, K] row-major, as
 * stored; wgmma has no other layout for 8-bit types), each row 128 bytes, the 16-byte chunks of
 * row r permuted by r mod 8 (TMA's 128-byte swizzle, which is wgmma's canonical 128B-swizzled
 * K-major layout: 8-row atoms 1,024 bytes apart, the descriptor's stride byte offset; a slice
 * is the descriptor's start address plus 32 bytes, the hardware applying the swizzle to the
 * address bits, so every stage starts 1,024-byte aligned). TMA fills rows past T or N and
 * elements past K with zeros, so edges need no special case (K a multiple of 16: TMA's stride
 * rule); the epilogue stores only t < T, n < N.
 *
 * The tensor maps are made per call on the host (cuTensorMapEncodeTiled, reached through the
 * runtime's driver entry point: no link against libcuda) and passed by value.
 */
#include "backend/cuda/cuda_wgmma.cuh"

/* The operand types: int8 codes (int32 sums) or the bf16 values of e4m3 codes (fp32 sums). */
struct wg_s8 {
    typedef int32_t acc_t;
    static constexpr int ELEM = 1;
};
struct wg_bf16 {
    typedef float acc_t;
    static constexpr int ELEM = 2;
};

/* A tile of BM rows of x (BM / 64 consumer warpgroups of 64 rows; 128 in every variant) x BN
 * rows of the weight. */
template <int BM, int BN> struct wg_cfg {
    static constexpr int CONSUMERS = BM / 64;
    static constexpr int THREADS = 128 * (1 + CONSUMERS);
    static constexpr int STAGES = BN == 128 ? 6 : 4;
    static constexpr int A_BYTES = BM * WG_ROW;            /* 16 KB */
    static constexpr int B_BYTES = BN * WG_ROW;            /* 16 or 32 KB */
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024; /* + barriers, alignment */
    /* registers after setmaxnreg: the producer gives what the consumers take (entry: 65,536
     * over the block's 384 threads, 168) */
    static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
    static_assert(SMEM <= 232448, "shared memory of a block");
    static_assert(128 * PRODUCER_REGS + 128 * CONSUMERS * CONSUMER_REGS <= 65536, "registers of a block");
};


#define WG_R8(i) "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), "+r"(d[i + 5]), \
                 "+r"(d[i + 6]), "+r"(d[i + 7])
#define WG_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])

/* d[WN / 2] += A (64 x k, descriptor da) x B (WN x k, descriptor db)^T, k = 32 bytes of K */
__device__ __forceinline__ void wgmma_s8_n128(int32_t *d, uint64_t da, uint64_t db) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p;\n\t}"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24), WG_R8(32), WG_R8(40), WG_R8(48), WG_R8(56)
                 : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_s8_n256(int32_t *d, uint64_t da, uint64_t db) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p;\n\t}"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24), WG_R8(32), WG_R8(40), WG_R8(48), WG_R8(56),
                   WG_R8(64), WG_R8(72), WG_R8(80), WG_R8(88), WG_R8(96), WG_R8(104), WG_R8(112), WG_R8(120)
                 : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_bf16_n128(float *d, uint64_t da, uint64_t db) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 0;\n\t}"
                 : WG_F8(0), WG_F8(8), WG_F8(16), WG_F8(24), WG_F8(32), WG_F8(40), WG_F8(48), WG_F8(56)
                 : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_bf16_n256(float *d, uint64_t da, uint64_t db) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1, 0, 0;\n\t}"
                 : WG_F8(0), WG_F8(8), WG_F8(16), WG_F8(24), WG_F8(32), WG_F8(40), WG_F8(48), WG_F8(56),
                   WG_F8(64), WG_F8(72), WG_F8(80), WG_F8(88), WG_F8(96), WG_F8(104), WG_F8(112), WG_F8(120)
                 : "l"(da), "l"(db), "r"(1));
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

template <class OP, int WN>
__device__ __forceinline__ void wg_mma(typename OP::acc_t *d, uint64_t da, uint64_t db) {
    if constexpr (OP::ELEM == 1) {
        if constexpr (WN == 256)
            wgmma_s8_n256(d, da, db);
        else
            wgmma_s8_n128(d, da, db);
    } else {
        if constexpr (WN == 256)
            wgmma_bf16_n256(d, da, db);
        else
            wgmma_bf16_n128(d, da, db);
    }
}

/* The scaling of one sum, in the order of the matching epilogue kernel (cuda_quant.cu) */
__device__ __forceinline__ float wg_scale(int32_t v, float st, float swn) {
    return __fmul_rn(__int2float_rn(v), __fmul_rn(st, swn));
}
__device__ __forceinline__ float wg_scale(float v, float st, float swn) { return __fmul_rn(__fmul_rn(v, st), swn); }

/* CL = 2: blocks in clusters of two along the tokens (the same weight columns): each loads
 * half of the weight's slab and the copy engine writes it into both, halving the weight's
 * traffic from L2; a stage is refilled once the consumers of both blocks are done with it. */
template <class OP, int BM, int BN, int WN, int CL, bool FUSED>
__global__ void __launch_bounds__(wg_cfg<BM, BN>::THREADS, 1)
    k_wgmma_gemm(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int T, int N,
                 int K, wg_out out) {
    typedef wg_cfg<BM, BN> C;
    typedef typename OP::acc_t acc_t;
    constexpr int NB = BN / WN, NR = WN / 2, BK = WG_ROW / OP::ELEM; /* K elements per stage */
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
    uint8_t *sa = smem, *sb = smem + C::STAGES * C::A_BYTES;
    uint64_t *full = (uint64_t *)(sb + C::STAGES * C::B_BYTES), *empty = full + C::STAGES;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, nk = (K + BK - 1) / BK;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 4 * C::CONSUMERS * CL); /* lane 0 of each consumer warp (of the cluster) */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    if constexpr (CL > 1)
        cluster_sync(); /* the peer's barriers exist before anything reaches them */
    else
        __syncthreads();
    const uint32_t rank = CL > 1 ? cluster_rank() : 0;

    if (wg == 0) { /* producer: registers handed to the consumers (the block's total stays) */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(C::PRODUCER_REGS));
        if (threadIdx.x == 0) {
            for (int kb = 0; kb < nk; kb++) {
                const int s = kb % C::STAGES;
                if (kb >= C::STAGES)
                    mbar_wait(&empty[s], (uint32_t)((kb / C::STAGES - 1) & 1));
                mbar_expect_tx(&full[s], (uint32_t)(C::A_BYTES + C::B_BYTES));
                tma_load_2d(sa + s * C::A_BYTES, &map_x, &full[s], kb * BK, m0);
                if constexpr (CL > 1) /* this block's half of the weight rows, into both blocks */
                    tma_load_2d_multicast(sb + s * C::B_BYTES + rank * (C::B_BYTES / CL), &map_w, &full[s], kb * BK,
                                          n0 + (int)rank * (BN / CL), (uint16_t)((1u << CL) - 1));
                else
                    tma_load_2d(sb + s * C::B_BYTES, &map_w, &full[s], kb * BK, n0);
            }
        }
    } else { /* consumers */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(C::CONSUMER_REGS));
        const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        acc_t d[NB][NR];
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int i = 0; i < NR; i++)
                d[nb][i] = 0;
        for (int kb = 0; kb < nk; kb++) {
            const int s = kb % C::STAGES;
            mbar_wait(&full[s], (uint32_t)((kb / C::STAGES) & 1));
            const uint32_t a = smem_u32(sa + s * C::A_BYTES) + (uint32_t)(cw * 64 * WG_ROW);
            const uint32_t b = smem_u32(sb + s * C::B_BYTES);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WG_ROW / 32; kk++) {
                const uint64_t da = wg_desc(a + 32 * kk);
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
                    wg_mma<OP, WN>(d[nb], da, wg_desc(b + (uint32_t)(nb * WN * WG_ROW) + 32 * kk));
            }
            wgmma_commit();
            /* the previous stage's wgmmas are done with it: give it back */
            wgmma_wait<1>();
            if (kb > 0 && lane == 0) {
                if constexpr (CL > 1)
                    for (uint32_t r = 0; r < (uint32_t)CL; r++)
                        mbar_arrive_cluster(&empty[(kb - 1) % C::STAGES], r);
                else
                    mbar_arrive(&empty[(kb - 1) % C::STAGES]);
            }
        }
        wgmma_wait<0>();

        /* d[nb][4 j + 2 h + e] is row 16 warp + lane / 4 + 8 h, column nb WN + 8 j + 2 (lane % 4) + e */
        const int row_base = m0 + cw * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int t = row_base + 8 * h;
            if (t >= T)
                continue;
            const float st = FUSED ? out.sx[t] : 0.0f;
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int j = 0; j < WN / 8; j++) {
                    const int n = n0 + nb * WN + 8 * j + 2 * (lane % 4);
                    const acc_t v0 = d[nb][4 * j + 2 * h], v1 = d[nb][4 * j + 2 * h + 1];
                    if constexpr (!FUSED) {
                        int32_t *o = out.acc + (int64_t)t * out.ldacc + n;
                        if (n < N)
                            o[0] = (int32_t)v0;
                        if (n + 1 < N)
                            o[1] = (int32_t)v1;
                    } else {
                        float *o = out.y + (int64_t)t * out.ldy + n;
                        if (out.pairs && n + 1 < N) {
                            float r0 = wg_scale(v0, st, out.sw[n]), r1 = wg_scale(v1, st, out.sw[n + 1]);
                            if (out.bias)
                                r0 = __fadd_rn(r0, out.bias[n]), r1 = __fadd_rn(r1, out.bias[n + 1]);
                            if (out.accumulate) {
                                float2 old = *(const float2 *)o;
                                r0 = __fadd_rn(old.x, r0), r1 = __fadd_rn(old.y, r1);
                            }
                            *(float2 *)o = make_float2(r0, r1);
                        } else {
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                if (n + e >= N)
                                    break;
                                float r = wg_scale(e ? v1 : v0, st, out.sw[n + e]);
                                if (out.bias)
                                    r = __fadd_rn(r, out.bias[n + e]);
                                o[e] = out.accumulate ? __fadd_rn(o[e], r) : r;
                            }
                        }
                    }
                }
        }
    }
    if constexpr (CL > 1) { /* no block leaves while its peer may still write into it or arrive on its barriers */
        __syncwarp();
        cluster_sync();
    }
}

/* ---- host side (tensor maps, the device check: cuda_wgmma.cuh) ----------------------------- */

template <class OP, int BM, int BN, int WN, int CL, bool FUSED>
static int wg_launch(clef_backend *be, int64_t T, int64_t N, int64_t K, const void *x, const void *w,
                     const wg_out &out) {
    cuda_context *ctx = cuda_ctx(be);
    CUtensorMap mx, mw;
    if (!wg_map(&mx, x, OP::ELEM, T, K, BM) || !wg_map(&mw, w, OP::ELEM, N, K, BN / CL))
        return 0;
    typedef wg_cfg<BM, BN> C;
    /* every call: the attribute is per device */
    if (cudaFuncSetAttribute(k_wgmma_gemm<OP, BM, BN, WN, CL, FUSED>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             C::SMEM) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    /* clusters: the token tiles rounded up to a multiple of CL (a tile past T loads zeros, its
     * half of the weight for its peer, and stores nothing) */
    const unsigned mt = (unsigned)((T + BM - 1) / BM), nt = (unsigned)((N + BN - 1) / BN);
    dim3 grid((mt + CL - 1) / CL * CL, nt);
    if (CL == 1) {
        k_wgmma_gemm<OP, BM, BN, WN, CL, FUSED><<<grid, C::THREADS, C::SMEM, ctx->stream>>>(mx, mw, (int)T, (int)N,
                                                                                         (int)K, out);
    } else {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.gridDim = grid, cfg.blockDim = dim3(C::THREADS), cfg.dynamicSmemBytes = C::SMEM, cfg.stream = ctx->stream;
        cfg.attrs = attr, cfg.numAttrs = 1;
        if (cuda_record(be, cudaLaunchKernelEx(&cfg, k_wgmma_gemm<OP, BM, BN, WN, CL, FUSED>, mx, mw, (int)T, (int)N,
                                               (int)K, out), "wgmma GEMM kernel (cluster launch)") != CLEF_OK)
            return 0;
    }
    return CUDA_CHECK_LAUNCH(be, "wgmma GEMM kernel") == CLEF_OK;
}

template <class OP, bool FUSED>
static int wg_variant(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K, const void *x, const void *w,
                      const wg_out &o) {
    switch (variant) {
    case CLEF_CUDA_WGMMA_128: return wg_launch<OP, 128, 128, 128, 1, FUSED>(be, T, N, K, x, w, o);
    case CLEF_CUDA_WGMMA_256_SPLIT: return wg_launch<OP, 128, 256, 128, 1, FUSED>(be, T, N, K, x, w, o);
    case CLEF_CUDA_WGMMA_256: return wg_launch<OP, 128, 256, 256, 1, FUSED>(be, T, N, K, x, w, o);
    case CLEF_CUDA_WGMMA_256_MC: return wg_launch<OP, 128, 256, 256, 2, FUSED>(be, T, N, K, x, w, o);
    default: return 0;
    }
}

/* CLEF_CUDA_WGMMA_AUTO: where 128 x 256 tiles would make fewer than 2.5 waves over the SMs (a
 * few hundred tokens, or narrow outputs) the last wave leaves much of the GPU idle; 128 x 128
 * tiles make twice as many (the threshold: the best per-forward sum over the 9B and 27B
 * shapes of bench_gpu_quant wgmma, H200 run15). Only for int8, whose sums are
 * exact whatever the kernel: the bf16 (FP8 exact) sums keep one kernel for every row count, so
 * a row's result never depends on the batch it came in. */
static int wg_resolve(clef_backend *be, int bf16, int variant, int64_t T, int64_t N) {
    if (variant != CLEF_CUDA_WGMMA_AUTO)
        return variant;
    if (bf16)
        return CUDA_QUANT_WGMMA_LARGE;
    static int sms = 0, dev = -1;
    if (dev != cuda_ctx(be)->device) {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cuda_ctx(be)->device);
        dev = cuda_ctx(be)->device;
    }
    const int64_t tiles = (T + 127) / 128 * ((N + 255) / 256);
    return tiles * 2 < (int64_t)sms * 5 ? CLEF_CUDA_WGMMA_128 : CUDA_QUANT_WGMMA_LARGE;
}

int cuda_wgmma_gemm(clef_backend *be, int bf16, int variant, int64_t T, int64_t N, int64_t K, const void *x,
                    const void *w, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                    int accumulate) {
    if (!wg_usable(be, T, N, K, x, w))
        return 0;
    variant = wg_resolve(be, bf16, variant, T, N);
    wg_out o = {};
    o.sx = sx, o.sw = sw, o.bias = bias, o.y = y, o.ldy = ldy, o.accumulate = accumulate;
    o.pairs = ldy % 2 == 0 && (uintptr_t)y % 8 == 0;
    return bf16 ? wg_variant<wg_bf16, true>(be, variant, T, N, K, x, w, o)
                : wg_variant<wg_s8, true>(be, variant, T, N, K, x, w, o);
}

extern "C" int clef_cuda_int8_gemm_i32_wgmma(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K,
                                             const int8_t *qx, const int8_t *qw, int32_t *acc, int64_t ldacc) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return ctx->status;
    if (!wg_usable(be, T, N, K, qx, qw) || ldacc < N)
        return CLEF_ERR_UNSUPPORTED;
    wg_out o = {};
    o.acc = acc, o.ldacc = ldacc;
    int ok = wg_variant<wg_s8, false>(be, variant, T, N, K, qx, qw, o);
    return ok ? CLEF_OK : (ctx->status != CLEF_OK ? ctx->status : CLEF_ERR_UNSUPPORTED);
}
