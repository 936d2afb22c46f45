/*
 * cuda_quant_fp8_wgmma.cu — the FP8 W8A8 GEMM on Hopper's fp8 tensor cores (wgmma e4m3 x e4m3,
 * sm_90a) with fp32 promotion, the scaling fused into the epilogue:
 *
 *   y[t, n] = (accumulate ? y : 0) + (sum_k qx[t, k] qw[n, k]) * s_t * s_w[n] (+ bias[n])
 *
 * (cuda_quant_epilogue_f32's scaling order). Why promotion: Hopper's fp8 MMA adds the 32
 * products of one k32 step to its running sum keeping only ~14 bits, aligned to the largest
 * term (DeepSeek-V3's report), so a long sum kept in the tensor core loses bits. Here the
 * tensor core sums only a short run of K into a fresh register partial (the first wgmma of the
 * run has scale-d = 0: D = A B), the consumer waits for it and adds it to fp32 accumulators in
 * registers on the CUDA cores (__fadd_rn). The run is the variant's (cuda_quant.h):
 *   CLEF_CUDA_FP8_PROMOTE_128  one stage, 4 wgmma k32 steps, 128 of K (DeepGEMM's interval);
 *   CLEF_CUDA_FP8_PROMOTE_32   every wgmma: each partial is one k32 step on a zero accumulator,
 *                              so the tensor core rounds only within 32 products (more adds on
 *                              the CUDA cores: 64 per thread per step instead of per stage).
 * The products of two e4m3 values are exact; what rounds is the tensor core's alignment within
 * a run, then one fp32 add per run. The result does not depend on T or on the rows beside a
 * row (no split of K, one kernel for every row count): a row alone equals the row in a batch.
 *
 * The pipeline is cuda_quant_wgmma.cu's (cuda_wgmma.cuh's helpers): one block of 384 threads
 * makes a 128 x 128 tile of y; warpgroup 0 produces (one thread loads the 128-row slabs of the
 * activation codes and of the weight's codes for each 128-byte step of K with TMA, 128-byte
 * swizzle, into a ring of 6 stages of 32 KB), warpgroups 1 and 2 consume 64 rows each with
 * m64n128k32 wgmmas. Registers: 64 partials + 64 accumulators a thread (why 128 outputs and not
 * 256: 256 of each would pass the 232 a consumer thread can have). A stage goes back to the
 * producer once its last partial has been promoted. Edges: TMA fills rows past T or N and bytes
 * past K with zeros (code 0 is +0.0), the epilogue stores only t < T, n < N.
 *
 * Measured (H200, run16, bench/RESULTS.md): promoting every 128 gives cuBLASLt's fp8 results to
 * the digit (cuBLASLt promotes as often; 1.3e-4..4e-4 relative per GEMM) at 0.71-0.80 of its
 * ~1,100 TFLOP/s; every 32 cuts the error ~3x (4e-5..1.4e-4) at ~500 TFLOP/s. Neither meets the
 * fixture backbone's parity, so the default FP8 path stays the exact one. Tried and dropped: the
 * promotion of one run overlapped with the tensor cores' next (two register partials in turn;
 * 192 registers a thread, so 256 threads and loads from a consumer thread): the same bits but
 * ~0.8x this kernel's speed.
 */
#include "backend/cuda/cuda_wgmma.cuh"

#define F8_BM 128 /* tokens per tile: two consumer warpgroups of 64 rows */
#define F8_BN 128 /* outputs per tile: one m64n128k32 per k32 step */
#define F8_STAGES 6
#define F8_THREADS 384
#define F8_A_BYTES (F8_BM * WG_ROW)
#define F8_B_BYTES (F8_BN * WG_ROW)
#define F8_SMEM (F8_STAGES * (F8_A_BYTES + F8_B_BYTES) + 2 * F8_STAGES * 8 + 1024) /* + barriers, alignment */
static_assert(F8_SMEM <= 232448, "shared memory of a block");

/* d[64] (+)= A (64 x 32 e4m3, descriptor da) x B (128 x 32 e4m3, descriptor db)^T; keep = 0: D = A B */
__device__ __forceinline__ void wgmma_e4m3_n128(float *d, uint64_t da, uint64_t db, int keep) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                   "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                   "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                   "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
                   "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(keep));
}

/* The scaling of a consumer thread's accumulators, stored: acc[4 j + 2 h + e] is row
 * row_base + 8 h, column col_base + 8 j + e (the m64nNk32 accumulator layout) */
__device__ __forceinline__ void fp8_epilogue(const float (&acc)[F8_BN / 2], int row_base, int col_base, int T, int N,
                                             const float *sx, const float *sw, const float *bias, float *y,
                                             int64_t ldy, int accumulate, int pairs) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int t = row_base + 8 * h;
        if (t >= T)
            continue;
        const float st = sx[t];
        float *yrow = y + (int64_t)t * ldy;
#pragma unroll
        for (int j = 0; j < F8_BN / 8; j++) {
            const int n = col_base + 8 * j;
            if (pairs && n + 1 < N) {
                float r0 = __fmul_rn(__fmul_rn(acc[4 * j + 2 * h], st), sw[n]);
                float r1 = __fmul_rn(__fmul_rn(acc[4 * j + 2 * h + 1], st), sw[n + 1]);
                if (bias)
                    r0 = __fadd_rn(r0, bias[n]), r1 = __fadd_rn(r1, bias[n + 1]);
                if (accumulate) {
                    const float2 old = *(const float2 *)(yrow + n);
                    r0 = __fadd_rn(old.x, r0), r1 = __fadd_rn(old.y, r1);
                }
                *(float2 *)(yrow + n) = make_float2(r0, r1);
            } else {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    if (n + e >= N)
                        break;
                    float r = __fmul_rn(__fmul_rn(acc[4 * j + 2 * h + e], st), sw[n + e]);
                    if (bias)
                        r = __fadd_rn(r, bias[n + e]);
                    yrow[n + e] = accumulate ? __fadd_rn(yrow[n + e], r) : r;
                }
            }
        }
    }
}

/* RUN: k32 steps per promoted partial (1 or 4; a stage holds 4) */
template <int RUN>
__global__ void __launch_bounds__(F8_THREADS, 1)
    k_fp8_wgmma_promoted(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int T,
                         int N, int K, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                         int accumulate, int pairs) {
    static_assert(RUN == 1 || RUN == 4, "a run divides the stage's 4 k32 steps");
    constexpr int NR = F8_BN / 2; /* accumulator registers a thread: 64 rows x 128 columns / 128 threads */
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
    uint8_t *sa = smem, *sb = smem + F8_STAGES * F8_A_BYTES;
    uint64_t *full = (uint64_t *)(sb + F8_STAGES * F8_B_BYTES), *empty = full + F8_STAGES;
    const int m0 = blockIdx.x * F8_BM, n0 = blockIdx.y * F8_BN, nk = (K + WG_ROW - 1) / WG_ROW;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < F8_STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8); /* lane 0 of each of the 8 consumer warps */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) { /* producer: registers handed to the consumers (the block's total stays) */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(40));
        if (threadIdx.x == 0) {
            for (int kb = 0; kb < nk; kb++) {
                const int s = kb % F8_STAGES;
                if (kb >= F8_STAGES)
                    mbar_wait(&empty[s], (uint32_t)((kb / F8_STAGES - 1) & 1));
                mbar_expect_tx(&full[s], (uint32_t)(F8_A_BYTES + F8_B_BYTES));
                tma_load_2d(sa + s * F8_A_BYTES, &map_x, &full[s], kb * WG_ROW, m0);
                tma_load_2d(sb + s * F8_B_BYTES, &map_w, &full[s], kb * WG_ROW, n0);
            }
        }
        return;
    }
    /* consumers */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(232));
    const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    float acc[NR], part[NR];
#pragma unroll
    for (int i = 0; i < NR; i++)
        acc[i] = 0.0f, part[i] = 0.0f;
    for (int kb = 0; kb < nk; kb++) {
        const int s = kb % F8_STAGES;
        mbar_wait(&full[s], (uint32_t)((kb / F8_STAGES) & 1));
        const uint32_t a = smem_u32(sa + s * F8_A_BYTES) + (uint32_t)(cw * 64 * WG_ROW);
        const uint32_t b = smem_u32(sb + s * F8_B_BYTES);
#pragma unroll
        for (int kk = 0; kk < WG_ROW / 32; kk++) {
            if (kk % RUN == 0) /* the partial's registers were read by the last promotion */
                wgmma_fence();
            wgmma_e4m3_n128(part, wg_desc(a + 32 * kk), wg_desc(b + 32 * kk), kk % RUN != 0);
            if (kk % RUN == RUN - 1) { /* the run is done: promote it to fp32 */
                wgmma_commit();
                wgmma_wait<0>();
#pragma unroll
                for (int i = 0; i < NR; i++)
                    acc[i] = __fadd_rn(acc[i], part[i]);
            }
        }
        /* every wgmma of this stage has completed (waited above): give it back */
        if (lane == 0)
            mbar_arrive(&empty[s]);
    }

    fp8_epilogue(acc, m0 + cw * 64 + warp * 16 + lane / 4, n0 + 2 * (lane % 4), T, N, sx, sw, bias, y, ldy,
                 accumulate, pairs);
}

template <int RUN>
static int fp8_wgmma_launch(clef_backend *be, int64_t T, int64_t N, int64_t K, const uint8_t *qx, const uint8_t *qw,
                            const float *sx, const float *sw, const float *bias, float *y, int64_t ldy, int accumulate) {
    CUtensorMap mx, mw;
    if (!wg_map(&mx, qx, 1, T, K, F8_BM) || !wg_map(&mw, qw, 1, N, K, F8_BN))
        return 0;
    /* every call: the attribute is per device */
    if (cudaFuncSetAttribute(k_fp8_wgmma_promoted<RUN>, cudaFuncAttributeMaxDynamicSharedMemorySize, F8_SMEM) !=
        cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    const int pairs = ldy % 2 == 0 && (uintptr_t)y % 8 == 0;
    dim3 grid((unsigned)((T + F8_BM - 1) / F8_BM), (unsigned)((N + F8_BN - 1) / F8_BN));
    k_fp8_wgmma_promoted<RUN><<<grid, F8_THREADS, F8_SMEM, cuda_ctx(be)->stream>>>(
        mx, mw, (int)T, (int)N, (int)K, sx, sw, bias, y, ldy, accumulate, pairs);
    return CUDA_CHECK_LAUNCH(be, "fp8 wgmma GEMM kernel (fp32 promotion)") == CLEF_OK;
}

int cuda_fp8_wgmma_gemm(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K, const uint8_t *qx,
                        const uint8_t *qw, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                        int accumulate) {
    if (!wg_usable(be, T, N, K, qx, qw))
        return 0;
    switch (variant) {
    case CLEF_CUDA_FP8_PROMOTE_128: return fp8_wgmma_launch<4>(be, T, N, K, qx, qw, sx, sw, bias, y, ldy, accumulate);
    case CLEF_CUDA_FP8_PROMOTE_32: return fp8_wgmma_launch<1>(be, T, N, K, qx, qw, sx, sw, bias, y, ldy, accumulate);
    default: return 0;
    }
}
