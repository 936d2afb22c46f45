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
 * INT8 also has persistent kernels (k_wgmma_persistent: one block per SM walking tiles, the
 * next tile's loads under the epilogue; optionally in clusters sharing the weight's and x's
 * slabs by multicast) and ping-pong ones (k_wgmma_pingpong: each consumer warpgroup a whole
 * tile, one's epilogue under the other's wgmmas; optionally the weight multicast over two
 * blocks), the large products' defaults since run17_i8 (wg_resolve).
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

#include <stdlib.h>
#include <string.h>

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

/* The epilogue of one consumer warpgroup: its 64 rows (from m0w) x NB WN columns (from n0) of
 * sums d, scaled and stored (FUSED) or stored as int32. d[nb][4 j + 2 h + e] is row
 * m0w + 16 warp + lane / 4 + 8 h, column n0 + nb WN + 8 j + 2 (lane % 4) + e (wgmma's
 * accumulator layout). */
template <class OP, int NB, int WN, bool FUSED>
__device__ __forceinline__ void wg_epilogue(const typename OP::acc_t (&d)[NB][WN / 2], const wg_out &out, int m0w,
                                            int n0, int T, int N) {
    typedef typename OP::acc_t acc_t;
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int row_base = m0w + warp * 16 + lane / 4;
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
        const int cw = wg - 1, lane = threadIdx.x % 32;
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

        wg_epilogue<OP, NB, WN, FUSED>(d, out, m0 + cw * 64, n0, T, N);
    }
    if constexpr (CL > 1) { /* no block leaves while its peer may still write into it or arrive on its barriers */
        __syncwarp();
        cluster_sync();
    }
}

/* arrive on the barrier at bar's place in block `rank` of the cluster (release at the block's
 * scope, as for a local arrive: it only says this warp's wgmmas are done reading the stage) */
__device__ __forceinline__ void mbar_arrive_peer(uint64_t *bar, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

/* a consumer warp is done with a stage: arrive on its `empty` barrier in this block and (CL > 1)
 * in every other block of the cluster, whose producers may all multicast into this block's
 * stage. The peers' arrives as k_wgmma_pingpong's (mbar_arrive_peer): the release at the
 * cluster's scope that mbar_arrive_cluster makes (k_wgmma_gemm's CL = 2) cost these kernels
 * a third of their rate (H200 run18_i8b: the 2 x 1 kernel 520-790 TOPS with them on the 27B
 * shapes at 1,502+ rows, 770-1,370 with these; k_wgmma_gemm's 530-790 may be the same cause). */
template <int CL> __device__ __forceinline__ void wg_release(uint64_t *bar, uint32_t rank) {
    mbar_arrive(bar);
    if constexpr (CL > 1)
        for (uint32_t r = 1; r < (uint32_t)CL; r++)
            mbar_arrive_peer(bar, (rank + r) % CL);
}

/* The persistent kernels (CLEF_CUDA_WGMMA_*_PERSIST, INT8): one block per SM walks the tiles
 * blockIdx.x, blockIdx.x + gridDim.x, ... with one ring of stages across its tiles, so the
 * producer loads the next tile's first stages while the consumers run the previous tile's
 * epilogue, and no block launch or pipeline fill sits between tiles. Tile order (wg_tile_at):
 * groups of WG_GROUP_N column tiles; in a group the column tile varies fastest, then the row
 * tile, so the tiles in flight at once cover a band of about WG_GROUP_N weight slabs x 16 row
 * slabs, which L2 keeps (the grid of k_wgmma_gemm, rows fastest, re-reads all of x for every
 * weight slab once x outgrows L2: 8,192 rows x 17,408 of K is 142 MB). The sums of a tile are
 * those of k_wgmma_gemm (same stages, same wgmmas in the same order).
 * CM x CN > 1 (CLEF_CUDA_WGMMA_256_PERSIST_MC*): blocks in clusters of CM x CN walk units of
 * CM row tiles x CN column tiles, block (rm, rn) = cluster rank rm + CM rn making row tile
 * CM i + rm, column tile CN j + rn of unit (i, j). The CM blocks of a column share the weight's
 * slab: each loads 1 / CM of its rows and the copy engine writes them into all CM (TMA
 * multicast); likewise the CN blocks of a row share x's slab. A 128 x 256 tile's bytes from L2
 * per k-step fall from 48 KB to 32 KB (2 x 1) or 24 KB (2 x 2), the limit run17_i8 suspected for
 * the K = 5,120 shapes. A stage is refilled once the consumers of every block of the cluster
 * are done with it (each consumer warp arrives on the `empty` barrier of every block: a peer's
 * multicast may write into any of them). Measured (H200 run18_i8b): no faster than the plain
 * kernel on the K = 5,120 shapes (2 x 1: 770-1,090 TOPS vs 770-1,210), so the 128 x 256 tile is
 * not limited by its operands' traffic there; opt-in. */
#define WG_GROUP_N 8

__device__ __forceinline__ void wg_tile_at(int tile, int mt, int nt, int &mi, int &ni) {
    const int per_group = WG_GROUP_N * mt, g = tile / per_group, in = tile - g * per_group;
    const int n_first = g * WG_GROUP_N, width = min(WG_GROUP_N, nt - n_first);
    mi = in / width;
    ni = n_first + in % width;
}

/* TS (CLEF_CUDA_WGMMA_256_PERSIST_TS): the epilogue through shared memory, stored by the copy
 * engine. run18_i8b found the persistent 128 x 256 kernel's main loop at cuBLASLt's rate and
 * ~8 us a tile outside it (its stores, 128 KB a tile, made by every SM at once); here each
 * consumer warpgroup writes its 64 x 256 results in eight 64 x 32 boxes (8 KB, TMA's 128-byte
 * swizzle, so a warp's 8-byte writes spread over all banks) through a ring of two buffers, and
 * one thread hands each box to a bulk tensor store: the warpgroup goes on to the next box, and
 * after the last to the next tile's wgmmas, while the stores drain. The values are
 * wg_epilogue's (same scaling, bias and accumulate order, a read of y for accumulate), so the
 * same bits; TMA leaves out the rows past T and columns past N. Each box's column scales, bias
 * and y are loaded while the box before it is written (run18_i8c: loaded after each box's
 * barrier, they kept the matmul 1-2% behind the ping-pong kernel at 1,502-2,270 rows). */
#define WG_TS_BOX 8192 /* a 64-row x 32-column box of 4-byte results */

__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 ::"l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(src))
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
/* the stores committed before the newest N have read their shared memory */
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
/* the 128 threads of consumer warpgroup cw (named barrier 1 + cw; 0 is __syncthreads') */
__device__ __forceinline__ void wg_bar(int cw) { asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory"); }

/* what this thread's results in box k (columns n0 + 32 k + 8 jj + 2 (lane % 4) + e, rows
 * m0w + r_base + 8 h) take besides their sums: the column scales and bias at [2 jj + e], and
 * with accumulate the y they add to at [h][2 jj + e] (zero where absent or past T / N, never
 * used there). y's box is not yet stored, so it holds y's value before this matmul. */
struct wg_ts_in {
    float sw[8], bias[8], y[2][8];
};
template <bool FUSED>
__device__ __forceinline__ void wg_ts_load(const wg_out &out, int m0w, int r_base, int n0, int k, int T, int N,
                                           wg_ts_in &in) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int jj = 0; jj < 4; jj++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int n = n0 + 32 * k + 8 * jj + 2 * (lane % 4) + e;
            in.sw[2 * jj + e] = FUSED && n < N ? out.sw[n] : 0.0f;
            in.bias[2 * jj + e] = FUSED && n < N && out.bias ? out.bias[n] : 0.0f;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int t = m0w + r_base + 8 * h;
                in.y[h][2 * jj + e] =
                    FUSED && out.accumulate && t < T && n < N ? out.y[(int64_t)t * out.ldy + n] : 0.0f;
            }
        }
}

template <class OP, bool FUSED>
__device__ __forceinline__ void wg_epilogue_tma(const typename OP::acc_t (&d)[128], const wg_out &out,
                                                const CUtensorMap *map_y, uint8_t *ring, int cw, int m0w, int n0,
                                                int T, int N) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, leader = threadIdx.x % 128 == 0;
    const int r_base = warp * 16 + lane / 4;
    float st[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int t = m0w + r_base + 8 * h;
        st[h] = FUSED && t < T ? out.sx[t] : 0.0f;
    }
    /* a box's column scales, bias and (accumulate) y, loaded a box ahead: issued before the
     * named barriers that the previous box waits at, they arrive while it is written, where
     * loads after each barrier (run18_i8b) cost a trip to L2 or HBM every box */
    wg_ts_in cur, next;
    wg_ts_load<FUSED>(out, m0w, r_base, n0, 0, T, N, cur);
#pragma unroll
    for (int k = 0; k < 8; k++) { /* box k: columns n0 + 32 k ... + 31 */
        uint8_t *buf = ring + (k & 1) * WG_TS_BOX;
        if (k + 1 < 8)
            wg_ts_load<FUSED>(out, m0w, r_base, n0, k + 1, T, N, next);
        if (leader) /* the store two boxes back (this buffer's) has read it */
            bulk_wait_read<1>();
        wg_bar(cw);
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int j = 4 * k + jj, n = n0 + 8 * j + 2 * (lane % 4);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int rr = r_base + 8 * h, t = m0w + rr;
                uint32_t bits[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const typename OP::acc_t v = d[4 * j + 2 * h + e];
                    if constexpr (!FUSED)
                        bits[e] = (uint32_t)(int32_t)v;
                    else {
                        float r = 0.0f;
                        if (t < T && n + e < N) {
                            r = wg_scale(v, st[h], cur.sw[2 * jj + e]);
                            if (out.bias)
                                r = __fadd_rn(r, cur.bias[2 * jj + e]);
                            if (out.accumulate)
                                r = __fadd_rn(cur.y[h][2 * jj + e], r);
                        }
                        bits[e] = __float_as_uint(r);
                    }
                }
                /* byte 4 (8 jj + 2 (lane % 4)) of row rr: 16-byte chunk 2 jj + (lane % 4) / 2, XOR rr % 8 */
                const int chunk = (2 * jj + (lane % 4) / 2) ^ (rr & 7);
                *(uint2 *)(buf + rr * 128 + chunk * 16 + (lane & 1) * 8) = make_uint2(bits[0], bits[1]);
            }
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* the writes, seen by the copy engine */
        wg_bar(cw);
        if (leader) {
            tma_store_2d(map_y, buf, n0 + 32 * k, m0w);
            bulk_commit();
        }
        if (k + 1 < 8)
            cur = next;
    }
}

template <class OP, int BN, int WN, int CM, int CN, bool FUSED, bool TS>
__global__ void __launch_bounds__(wg_cfg<128, BN>::THREADS, 1)
    k_wgmma_persistent(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                       const __grid_constant__ CUtensorMap map_y, int T, int N, int K, wg_out out) {
    constexpr int BM = 128, CL = CM * CN;
    typedef wg_cfg<BM, BN> C;
    typedef typename OP::acc_t acc_t;
    constexpr int NB = BN / WN, NR = WN / 2, BK = WG_ROW / OP::ELEM;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
    uint8_t *sa = smem, *sb = smem + C::STAGES * C::A_BYTES;
    uint8_t *so = sb + C::STAGES * C::B_BYTES; /* TS: two boxes a consumer warpgroup */
    uint64_t *full = (uint64_t *)(so + (TS ? 2 * C::CONSUMERS * WG_TS_BOX : 0)), *empty = full + C::STAGES;
    static_assert(!TS || (BN == 256 && WN == 256), "the TMA-store epilogue takes one m64n256 accumulator");
    /* units: CM row tiles x CN column tiles, one a cluster (one tile when CL = 1) */
    const int mt = (T + BM - 1) / BM, nt = (N + BN - 1) / BN, mu = (mt + CM - 1) / CM, nu = (nt + CN - 1) / CN;
    const int units = mu * nu, nk = (K + BK - 1) / BK, first = (int)blockIdx.x / CL, stride = (int)gridDim.x / CL;
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
        cluster_sync(); /* the peers' barriers exist before anything reaches them */
    else
        __syncthreads();
    const uint32_t rank = CL > 1 ? cluster_rank() : 0;
    const int rm = (int)rank % CM, rn = (int)rank / CM;

    /* it counts the stage uses of this block over all its tiles: stage it % STAGES, its
     * (it / STAGES)-th fill; producer and consumers walk the same tiles, so the same count */
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(C::PRODUCER_REGS));
        if (threadIdx.x == 0) {
            uint16_t mask_x = 0, mask_w = 0; /* the blocks sharing this one's x slab / weight slab */
            for (int c = 0; c < CN; c++)
                mask_x |= (uint16_t)(1u << (rm + CM * c));
            for (int r = 0; r < CM; r++)
                mask_w |= (uint16_t)(1u << (r + CM * rn));
            uint32_t it = 0;
            for (int u = first; u < units; u += stride) {
                int mi, ni;
                wg_tile_at(u, mu, nu, mi, ni);
                mi = mi * CM + rm, ni = ni * CN + rn; /* past mt / nt: zeros loaded, nothing stored */
                for (int kb = 0; kb < nk; kb++, it++) {
                    const uint32_t s = it % C::STAGES;
                    if (it >= (uint32_t)C::STAGES) /* its previous fill consumed (in every block of the cluster) */
                        mbar_wait(&empty[s], (it / C::STAGES - 1) & 1);
                    mbar_expect_tx(&full[s], (uint32_t)(C::A_BYTES + C::B_BYTES));
                    if constexpr (CN > 1) /* this block's share of x's rows, into the blocks of its row */
                        tma_load_2d_multicast(sa + s * C::A_BYTES + rn * (C::A_BYTES / CN), &map_x, &full[s], kb * BK,
                                              mi * BM + rn * (BM / CN), mask_x);
                    else
                        tma_load_2d(sa + s * C::A_BYTES, &map_x, &full[s], kb * BK, mi * BM);
                    if constexpr (CM > 1) /* this block's share of the weight's rows, into the blocks of its column */
                        tma_load_2d_multicast(sb + s * C::B_BYTES + rm * (C::B_BYTES / CM), &map_w, &full[s], kb * BK,
                                              ni * BN + rm * (BN / CM), mask_w);
                    else
                        tma_load_2d(sb + s * C::B_BYTES, &map_w, &full[s], kb * BK, ni * BN);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(C::CONSUMER_REGS));
        const int cw = wg - 1, lane = threadIdx.x % 32;
        uint32_t it = 0;
        for (int u = first; u < units; u += stride) {
            int mi, ni;
            wg_tile_at(u, mu, nu, mi, ni);
            mi = mi * CM + rm, ni = ni * CN + rn;
            acc_t d[NB][NR];
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int i = 0; i < NR; i++)
                    d[nb][i] = 0;
            for (int kb = 0; kb < nk; kb++, it++) {
                const uint32_t s = it % C::STAGES;
                mbar_wait(&full[s], (it / C::STAGES) & 1);
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
                wgmma_wait<1>(); /* the previous stage's wgmmas are done with it: give it back */
                if (kb > 0 && lane == 0)
                    wg_release<CL>(&empty[(it - 1) % C::STAGES], rank);
            }
            wgmma_wait<0>(); /* the tile's last stage, given back before the epilogue: the
                              * producer refills it for the next tile meanwhile */
            if (nk > 0 && lane == 0)
                wg_release<CL>(&empty[(it - 1) % C::STAGES], rank);
            if constexpr (TS)
                wg_epilogue_tma<OP, FUSED>(d[0], out, &map_y, so + cw * 2 * WG_TS_BOX, cw, mi * BM + cw * 64,
                                           ni * BN, T, N);
            else
                wg_epilogue<OP, NB, WN, FUSED>(d, out, mi * BM + cw * 64, ni * BN, T, N);
        }
        if (TS && threadIdx.x % 128 == 0) /* the last stores done before the block's shared memory goes */
            bulk_wait_all();
    }
    if constexpr (CL > 1) { /* no block leaves while a peer may still write into it or arrive on its barriers */
        __syncwarp();
        cluster_sync();
    }
}

/* The ping-pong kernels (CLEF_CUDA_WGMMA_PP_*, INT8): persistent as above, but each consumer
 * warpgroup makes whole tiles of TM x TN (128 x 128: two m64n128 per slice; 64 x 256: one
 * m64n256), warpgroup 1 the block's even tiles, warpgroup 2 its odd ones, so one warpgroup's
 * epilogue runs while the other's wgmmas keep the tensor cores busy. The producer fills the
 * ring tile after tile (tile j's k-steps are the stage uses j nk ... j nk + nk - 1). A
 * warpgroup starts tile j's main loop once the fills of tile j - 1 have all landed (the
 * `order` barrier, phase j - 1): the tensor cores pass from one warpgroup to the other at the
 * tile boundary, and the parity a warpgroup waits for on a stage's `full` barrier is never
 * two fills ahead of the barrier (the stage's previous fill, possibly the other warpgroup's,
 * has landed). A tile's sums are those of the other kernels (each product exact, int32).
 * CL = 2 (CLEF_CUDA_WGMMA_PP_128_MC): blocks in clusters of two walk the same sequence of
 * 2 TM-row x TN units, each block TM rows of it; each loads its half of the weight's TN rows
 * and the copy engine writes it into both blocks (the weight's traffic from L2 halved: per
 * multiply-add that of a 128 x 256 tile), so a stage is refilled only once the warpgroups of
 * both blocks that used it are done (the `empty` barriers count both). */
template <int TM, int TN, int STAGES> struct wg_pp_cfg {
    static constexpr int A_BYTES = TM * WG_ROW, B_BYTES = TN * WG_ROW;
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + (2 * STAGES + 1) * 8 + 1024;
    static_assert(SMEM <= 232448, "shared memory of a block");
    static_assert(TM * TN <= 128 * 128, "a warpgroup's accumulators: 128 registers a thread");
};

template <class OP, int TM, int TN, int STAGES, int CL, bool FUSED>
__global__ void __launch_bounds__(384, 1)
    k_wgmma_pingpong(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int T,
                     int N, int K, wg_out out) {
    typedef wg_pp_cfg<TM, TN, STAGES> C;
    typedef wg_cfg<128, 128> R; /* the register split of a 384-thread block */
    typedef typename OP::acc_t acc_t;
    constexpr int MB = TM / 64, NR = TN / 2, BK = WG_ROW / OP::ELEM;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
    uint8_t *sa = smem, *sb = smem + STAGES * C::A_BYTES;
    uint64_t *full = (uint64_t *)(sb + STAGES * C::B_BYTES), *empty = full + STAGES, *order = empty + STAGES;
    /* units: CL row tiles (one a block) x one column tile, walked by the cluster */
    const int mt = (T + TM - 1) / TM, nt = (N + TN - 1) / TN, mu = (mt + CL - 1) / CL, units = mu * nt;
    const int nk = (K + BK - 1) / BK, first = (int)blockIdx.x / CL, stride = (int)gridDim.x / CL;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 4 * CL); /* lane 0 of each warp of the warpgroups (of the cluster) that used it */
        }
        mbar_init(order, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    if constexpr (CL > 1)
        cluster_sync(); /* the peer's barriers exist before anything reaches them */
    else
        __syncthreads();
    const uint32_t rank = CL > 1 ? cluster_rank() : 0;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R::PRODUCER_REGS));
        if (threadIdx.x == 0) {
            uint32_t it = 0;
            for (int u = first; u < units; u += stride) {
                int mi, ni;
                wg_tile_at(u, mu, nt, mi, ni);
                mi = mi * CL + (int)rank; /* past mt: zeros loaded, nothing stored */
                for (int kb = 0; kb < nk; kb++, it++) {
                    const uint32_t s = it % STAGES;
                    if (it >= (uint32_t)STAGES)
                        mbar_wait(&empty[s], (it / STAGES - 1) & 1);
                    mbar_expect_tx(&full[s], (uint32_t)(C::A_BYTES + C::B_BYTES));
                    tma_load_2d(sa + s * C::A_BYTES, &map_x, &full[s], kb * BK, mi * TM);
                    if constexpr (CL > 1) /* this block's share of the weight rows, into both blocks */
                        tma_load_2d_multicast(sb + s * C::B_BYTES + rank * (C::B_BYTES / CL), &map_w, &full[s], kb * BK,
                                              ni * TN + (int)rank * (TN / CL), (uint16_t)((1u << CL) - 1));
                    else
                        tma_load_2d(sb + s * C::B_BYTES, &map_w, &full[s], kb * BK, ni * TN);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R::CONSUMER_REGS));
        const int cw = wg - 1, lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
        for (int j = cw, u = first + cw * stride; u < units; j += 2, u += 2 * stride) {
            int mi, ni;
            wg_tile_at(u, mu, nt, mi, ni);
            mi = mi * CL + (int)rank;
            acc_t d[MB][1][NR];
#pragma unroll
            for (int mb = 0; mb < MB; mb++)
#pragma unroll
                for (int i = 0; i < NR; i++)
                    d[mb][0][i] = 0;
            if (j > 0) /* tile j - 1's fills have landed */
                mbar_wait(order, (uint32_t)((j - 1) & 1));
            uint32_t it = (uint32_t)j * (uint32_t)nk;
            for (int kb = 0; kb < nk; kb++, it++) {
                const uint32_t s = it % STAGES;
                mbar_wait(&full[s], (it / STAGES) & 1);
                if (kb == nk - 1 && warp == 0 && lane == 0) /* the next tile's warpgroup may start */
                    mbar_arrive(order);
                const uint32_t a = smem_u32(sa + s * C::A_BYTES), b = smem_u32(sb + s * C::B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < WG_ROW / 32; kk++) {
                    const uint64_t db = wg_desc(b + 32 * kk);
#pragma unroll
                    for (int mb = 0; mb < MB; mb++)
                        wg_mma<OP, TN>(d[mb][0], wg_desc(a + (uint32_t)(mb * 64 * WG_ROW) + 32 * kk), db);
                }
                wgmma_commit();
                wgmma_wait<1>();
                if (kb > 0 && lane == 0) {
                    mbar_arrive(&empty[(it - 1) % STAGES]);
                    if constexpr (CL > 1)
                        mbar_arrive_peer(&empty[(it - 1) % STAGES], rank ^ 1);
                }
            }
            wgmma_wait<0>();
            if (nk > 0 && lane == 0) {
                mbar_arrive(&empty[(it - 1) % STAGES]);
                if constexpr (CL > 1)
                    mbar_arrive_peer(&empty[(it - 1) % STAGES], rank ^ 1);
            } else if (nk == 0 && warp == 0 && lane == 0) /* no k-steps: still hand the turn on */
                mbar_arrive(order);
#pragma unroll
            for (int mb = 0; mb < MB; mb++)
                wg_epilogue<OP, 1, TN, FUSED>(d[mb], out, mi * TM + mb * 64, ni * TN, T, N);
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

/* the SMs of the backend's device (looked up once per device) */
static int wg_sm_count(clef_backend *be) {
    static int sms = 0, dev = -1;
    if (dev != cuda_ctx(be)->device) {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cuda_ctx(be)->device);
        dev = cuda_ctx(be)->device;
    }
    return sms > 0 ? sms : 1;
}

/* the ping-pong kernels: as many blocks as SMs, or half the tiles (two per block at least);
 * CL = 2: as many clusters as fit at once (cudaOccupancyMaxActiveClusters; a GPC's odd SM
 * stays idle) */
template <class OP, int TM, int TN, int STAGES, int CL, bool FUSED>
static int wg_launch_pingpong(clef_backend *be, int64_t T, int64_t N, int64_t K, const void *x, const void *w,
                              const wg_out &out) {
    cuda_context *ctx = cuda_ctx(be);
    CUtensorMap mx, mw;
    if (!wg_map(&mx, x, OP::ELEM, T, K, TM) || !wg_map(&mw, w, OP::ELEM, N, K, TN / CL))
        return 0;
    typedef wg_pp_cfg<TM, TN, STAGES> C;
    auto kernel = k_wgmma_pingpong<OP, TM, TN, STAGES, CL, FUSED>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    const int64_t units = (T + TM * CL - 1) / (TM * CL) * ((N + TN - 1) / TN), sms = wg_sm_count(be);
    int64_t groups = sms / CL; /* blocks, or clusters, resident at once */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = C::SMEM, cfg.stream = ctx->stream;
    cfg.attrs = attr, cfg.numAttrs = 1;
    if (CL > 1) {
        static int clusters = 0, dev = -1; /* per device: the kernel and its shared memory fixed */
        if (dev != ctx->device) {
            /* the query once, outside a recording (the direct run after a refused one makes it) */
            if (cuda_capture_refuse(be, "the multicast GEMM's first cluster count"))
                return 0;
            cfg.gridDim = dim3((unsigned)(CL * groups));
            if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
                cudaGetLastError();
                clusters = 0;
            }
            dev = ctx->device;
        }
        groups = clusters > 0 && clusters < groups ? clusters : groups;
    }
    const int64_t want = (units + 1) / 2;
    cfg.gridDim = dim3((unsigned)(CL * (want < groups ? want : groups)));
    if (CL == 1)
        kernel<<<cfg.gridDim, cfg.blockDim, C::SMEM, ctx->stream>>>(mx, mw, (int)T, (int)N, (int)K, out);
    else if (cuda_record(be, cudaLaunchKernelEx(&cfg, kernel, mx, mw, (int)T, (int)N, (int)K, out),
                         "wgmma GEMM kernel (ping-pong, cluster launch)") != CLEF_OK)
        return 0;
    return CUDA_CHECK_LAUNCH(be, "wgmma GEMM kernel (ping-pong)") == CLEF_OK;
}

/* the results' tensor map of the TMA-store epilogue: [rows, cols] 4-byte elements, row stride
 * ld, boxes of 64 rows x 32 (128 bytes, swizzled at that width); TMA wants the base 16-byte
 * aligned and ld a multiple of 4 */
static int wg_map_out(CUtensorMap *map, void *p, int is_int, int64_t rows, int64_t cols, int64_t ld) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = wg_encode_fn();
    if (!enc || (uintptr_t)p % 16 != 0 || ld % 4 != 0)
        return 0;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)(ld * 4)};
    cuuint32_t box[2] = {32, 64}, one[2] = {1, 1};
    return enc(map, is_int ? CU_TENSOR_MAP_DATA_TYPE_INT32 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, p, dims, strides, box,
               one, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* the persistent kernels: as many blocks as SMs (or tiles, if fewer); CM x CN > 1: as many
 * clusters as fit at once (cudaOccupancyMaxActiveClusters: a GPC's SMs past a multiple of the
 * cluster stay idle), or as many as units, if fewer; TS: the results' tensor map too */
template <class OP, int BN, int WN, int CM, int CN, bool FUSED, bool TS>
static int wg_launch_persistent(clef_backend *be, int64_t T, int64_t N, int64_t K, const void *x, const void *w,
                                const wg_out &out) {
    constexpr int CL = CM * CN;
    cuda_context *ctx = cuda_ctx(be);
    CUtensorMap mx, mw, my = {};
    if (!wg_map(&mx, x, OP::ELEM, T, K, 128 / CN) || !wg_map(&mw, w, OP::ELEM, N, K, BN / CM))
        return 0;
    if constexpr (TS) /* results the copy engine cannot store (unaligned): the register epilogue */
        if (!wg_map_out(&my, FUSED ? (void *)out.y : (void *)out.acc, !FUSED, T, N, FUSED ? out.ldy : out.ldacc))
            return wg_launch_persistent<OP, BN, WN, CM, CN, FUSED, false>(be, T, N, K, x, w, out);
    typedef wg_cfg<128, BN> C;
    constexpr int SMEM = C::SMEM + (TS ? 2 * C::CONSUMERS * WG_TS_BOX : 0);
    static_assert(SMEM <= 232448, "shared memory of a block");
    auto kernel = k_wgmma_persistent<OP, BN, WN, CM, CN, FUSED, TS>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    const int64_t units = (T + 128 * CM - 1) / (128 * CM) * ((N + BN * CN - 1) / (BN * CN)), sms = wg_sm_count(be);
    int64_t groups = sms / CL; /* blocks, or clusters, resident at once */
    if (CL == 1) {
        const unsigned blocks = (unsigned)(units < groups ? units : groups);
        kernel<<<blocks, C::THREADS, SMEM, ctx->stream>>>(mx, mw, my, (int)T, (int)N, (int)K, out);
        return CUDA_CHECK_LAUNCH(be, "wgmma GEMM kernel (persistent)") == CLEF_OK;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(C::THREADS), cfg.dynamicSmemBytes = SMEM, cfg.stream = ctx->stream;
    cfg.attrs = attr, cfg.numAttrs = 1;
    static int clusters = 0, dev = -1; /* per device: the kernel and its shared memory fixed */
    if (dev != ctx->device) {
        /* the query once, outside a recording (the direct run after a refused one makes it) */
        if (cuda_capture_refuse(be, "the multicast persistent GEMM's first cluster count"))
            return 0;
        cfg.gridDim = dim3((unsigned)(CL * groups));
        if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
            cudaGetLastError();
            clusters = 0;
        }
        dev = ctx->device;
    }
    groups = clusters > 0 && clusters < groups ? clusters : groups;
    cfg.gridDim = dim3((unsigned)(CL * (units < groups ? units : groups)));
    if (cuda_record(be, cudaLaunchKernelEx(&cfg, kernel, mx, mw, my, (int)T, (int)N, (int)K, out),
                    "wgmma GEMM kernel (persistent, cluster launch)") != CLEF_OK)
        return 0;
    return CUDA_CHECK_LAUNCH(be, "wgmma GEMM kernel (persistent, multicast)") == CLEF_OK;
}

template <class OP, bool FUSED>
static int wg_variant(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K, const void *x, const void *w,
                      const wg_out &o) {
    switch (variant) {
    case CLEF_CUDA_WGMMA_128: return wg_launch<OP, 128, 128, 128, 1, FUSED>(be, T, N, K, x, w, o);
    case CLEF_CUDA_WGMMA_256_SPLIT: return wg_launch<OP, 128, 256, 128, 1, FUSED>(be, T, N, K, x, w, o);
    case CLEF_CUDA_WGMMA_256: return wg_launch<OP, 128, 256, 256, 1, FUSED>(be, T, N, K, x, w, o);
    case CLEF_CUDA_WGMMA_256_MC: return wg_launch<OP, 128, 256, 256, 2, FUSED>(be, T, N, K, x, w, o);
    default: break;
    }
    if constexpr (OP::ELEM == 1) /* the persistent kernels: INT8 only */
        switch (variant) {
        case CLEF_CUDA_WGMMA_256_PERSIST:
            return wg_launch_persistent<OP, 256, 256, 1, 1, FUSED, false>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_128_PERSIST:
            return wg_launch_persistent<OP, 128, 128, 1, 1, FUSED, false>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_PP_128: return wg_launch_pingpong<OP, 128, 128, 7, 1, FUSED>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_PP_64X256: return wg_launch_pingpong<OP, 64, 256, 5, 1, FUSED>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_PP_128_MC: return wg_launch_pingpong<OP, 128, 128, 7, 2, FUSED>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_256_PERSIST_MC:
            return wg_launch_persistent<OP, 256, 256, 2, 1, FUSED, false>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_256_PERSIST_MC4:
            return wg_launch_persistent<OP, 256, 256, 2, 2, FUSED, false>(be, T, N, K, x, w, o);
        case CLEF_CUDA_WGMMA_256_PERSIST_TS:
            return wg_launch_persistent<OP, 256, 256, 1, 1, FUSED, true>(be, T, N, K, x, w, o);
        default: break;
        }
    return 0;
}

/* CLEF_CUDA_WGMMA_AUTO: where 128 x 256 tiles would make fewer than 2.5 waves over the SMs (a
 * few hundred tokens, or narrow outputs) the last wave leaves much of the GPU idle; 128 x 128
 * tiles make twice as many (the threshold: the best per-forward sum over the 9B and 27B
 * shapes of bench_gpu_quant wgmma, H200 run15). The larger products by layout (H200 run17_i8):
 * K > 8,192 (the MLP's down_proj) the persistent 128 x 256 kernel (a tile's main loop is long,
 * its epilogue a small part; the fewest operand bytes per multiply-add), its results stored by
 * TMA since run18_i8b (the epilogue's stores under the next tile's wgmmas); the others the
 * ping-pong kernel with the weight multicast over two blocks (the epilogue hidden under the
 * other warpgroup's wgmmas) until run18_i8c, which loaded the TMA-store epilogue's scales, bias
 * and accumulated y a box ahead: that kernel is now every large product's (per 27B forward of
 * INT8 matmuls 0.96 / 0.95 / 0.91x the ping-pong kernel's time at 1,502 / 2,270 / 8,192 rows,
 * faster on every 9B / 27B shape at 1,502-8,192 rows); the K split stays for
 * CLEF_CUDA_WGMMA_INT8_LARGE=v,w comparisons. Only for int8, whose sums are exact
 * whatever the kernel (every variant gives the same bits, test_cuda_quant): the bf16 (FP8
 * exact) sums keep one kernel for every row count, so a row's result never depends on the
 * batch it came in. */
static int wg_resolve(clef_backend *be, int bf16, int variant, int64_t T, int64_t N, int64_t K) {
    if (variant != CLEF_CUDA_WGMMA_AUTO)
        return variant;
    if (bf16)
        return CUDA_QUANT_WGMMA_LARGE;
    /* CLEF_CUDA_WGMMA_INT8_LARGE=v (an INT8 variant): every large product's kernel instead, or
     * =v,w: v where K <= 8,192 and w where K > 8,192; for same-run comparisons of whole
     * forwards (read once) */
    static int large = -1, long_k = 0;
    if (large < 0) {
        const char *e = getenv("CLEF_CUDA_WGMMA_INT8_LARGE");
        const char *comma = e ? strchr(e, ',') : NULL;
        const int v = e ? atoi(e) : 0, w = comma ? atoi(comma + 1) : v;
        large = v >= CLEF_CUDA_WGMMA_128 && v <= CLEF_CUDA_WGMMA_INT8_LAST ? v : 0;
        long_k = w >= CLEF_CUDA_WGMMA_128 && w <= CLEF_CUDA_WGMMA_INT8_LAST ? w : 0;
    }
    const int64_t tiles = (T + 127) / 128 * ((N + 255) / 256);
    if (tiles * 2 < (int64_t)wg_sm_count(be) * 5)
        return CUDA_QUANT_INT8_WGMMA_SMALL;
    if (K > 8192)
        return long_k ? long_k : CUDA_QUANT_INT8_WGMMA_LONG_K;
    return large ? large : CUDA_QUANT_INT8_WGMMA_LARGE;
}

int cuda_wgmma_gemm(clef_backend *be, int bf16, int variant, int64_t T, int64_t N, int64_t K, const void *x,
                    const void *w, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                    int accumulate) {
    if (!wg_usable(be, T, N, K, x, w))
        return 0;
    variant = wg_resolve(be, bf16, variant, T, N, K);
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
