/*
 * cuda_quant_fp8_exact_wgmma.cu — the exact FP8 W8A8 GEMM on Hopper (sm_90a) with the weight's
 * e4m3 codes widened to bf16 in registers, the scaling fused into the epilogue:
 *
 *   y[t, n] = (accumulate ? y : 0) + (sum_k xv[t, k] wv[n, k]) * s_t * s_w[n] (+ bias[n])
 *
 * xv: the activation codes' bf16 values (the quantizer or the producing op writes them); wv:
 * the weight's codes, read as bytes and widened here. Every e4m3 value is a bf16 value, so the
 * widening is exact and the bf16 x bf16 -> fp32 wgmma makes exact products summed in fp32:
 * the exact path's arithmetic (cuda_quant_fp8.cu) without the per-call widening of the whole
 * weight into scratch (2 bytes per weight written and read again) and without cuBLASLt's
 * product round trip (8 bytes per output) and the scaling kernel.
 *
 * The tile is y^T's: wgmma's M is the weight rows (A, from registers: wgmma takes A from
 * registers, B only from shared memory), its N the tokens (B = the activations' bf16 tile,
 * shared memory). One block of 384 threads makes 64 SUB x 2 weight rows x 128 tokens:
 *  - warpgroup 0, the producer: one thread loads, per 128 of K, the weight rows' codes (one
 *    128-byte swizzled box) and the tokens' values (two 128-byte boxes of 64 bf16) with TMA
 *    into a ring of stages;
 *  - warpgroups 1 and 2, the consumers: SUB m64 slices of weight rows each. Per k16 step each
 *    thread reads its A fragment's codes from shared memory (two 32-bit words per row: the
 *    PTX m64nNk16 A layout gives thread (g = lane / 4, q = lane % 4) of warp w rows 16 w + g
 *    and + 8, columns 2q, 2q + 1 and 2q + 8, 2q + 9), widens them to bf16 pairs and issues
 *    m64n128k16 wgmmas with A in registers; one step's wgmmas stay in flight while the next
 *    step's fragments are made;
 *  - the epilogue: each thread scales its accumulators (cuda_quant_epilogue_f32's order) and
 *    stores them into y.
 * The widening of a code pair (bytes b0, b1 -> bf16x2): sign to bit 15, the 7 bits of exponent
 * and mantissa to bits 4-10 (a bf16 whose exponent is the e4m3 one less 120 in bias: normal
 * codes become 2^-120 times their value, subnormal ones bf16 subnormals, again 2^-120 times),
 * then one bf16x2 multiply by 2^120: exact (a power of two into the normal range; bf16
 * arithmetic keeps subnormal inputs). Codes 0x7f / 0xff (NaN in e4m3) would read as 480; no
 * FP8 weight holds them (compressed-tensors' quantizer clamps to +-448).
 *
 * The sums do not depend on T or on the rows beside a row (each output's k16 steps in order,
 * one kernel per layout): a row alone equals the row in a batch. Edges: TMA fills rows past T
 * or N and bytes past K with zeros (code 0 is +0.0), the epilogue stores only t < T, n < N.
 *
 * Status (run16_mixed, bench/RESULTS.md): compiled (ptxas: 168 registers, no spills, no
 * serialized wgmma) but not yet run on a GPU, so opt-in (clef_backend_cuda_set_fp8_exact_wgmma,
 * CLEF_CUDA_FP8_EXACT_GEMM=mixed); `test_cuda_quant fp8-mixed` holds it to the exact path's
 * bounds and the row-alone check.
 */
#include "backend/cuda/cuda_wgmma.cuh"

#define MX_BT 128     /* tokens per tile: one m64n128k16 per m64 slice and k16 step */
#define MX_THREADS 384
#define MX_KSTEP 128  /* K per stage: one 128-byte row of codes, two 128-byte rows of bf16 values */

template <int SUB> struct mx_cfg {
    static constexpr int BW = 2 * 64 * SUB;                  /* weight rows per tile */
    static constexpr int W_BYTES = BW * MX_KSTEP;            /* codes */
    static constexpr int X_BYTES = MX_BT * MX_KSTEP * 2;     /* two boxes of 64 bf16 x 128 tokens */
    static constexpr int STAGE = W_BYTES + X_BYTES;
    static constexpr int STAGES = (227 * 1024 - 2048) / STAGE;
    static constexpr int SMEM = STAGES * STAGE + 2 * STAGES * 8 + 1024; /* + barriers, alignment */
};
static_assert(mx_cfg<2>::STAGES >= 3 && mx_cfg<2>::SMEM <= 232448, "shared memory of a block");
static_assert(mx_cfg<1>::STAGES >= 4 && mx_cfg<1>::SMEM <= 232448, "shared memory of a block");

/* Two e4m3 codes (the 16-bit half `odd` of word w; the lower byte the lower k) -> bf16x2, exact */
__device__ __forceinline__ uint32_t mx_widen_pair(uint32_t w, uint32_t sel) {
    const uint32_t v = __byte_perm(w, 0u, sel); /* byte b of each half at bits 8-15: b << 8 */
    const uint32_t scaled = (v & 0x80008000u) | ((v >> 4) & 0x07f007f0u);
    uint32_t r;
    /* x 2^120 (bf16 0x7b80) + (-0): the exponents' bias difference, exact */
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(scaled), "r"(0x7b807b80u), "r"(0x80008000u));
    return r;
}

#define MX_F8(i)                                                                                                       \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),      \
        "+f"(d[i + 7])

/* d[64] += A (64 x 16 bf16, registers a[4]) x B (128 x 16 bf16, descriptor db)^T */
__device__ __forceinline__ void wgmma_bf16_rs_n128(float *d, const uint32_t (&a)[4], uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;"
                 : MX_F8(0), MX_F8(8), MX_F8(16), MX_F8(24), MX_F8(32), MX_F8(40), MX_F8(48), MX_F8(56)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

template <int SUB>
__global__ void __launch_bounds__(MX_THREADS, 1)
    k_fp8_exact_mixed(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int T,
                      int N, int K, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                      int accumulate) {
    typedef mx_cfg<SUB> C;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
    uint64_t *full = (uint64_t *)(smem + C::STAGES * C::STAGE), *empty = full + C::STAGES;
    const int t0 = blockIdx.x * MX_BT, n0 = blockIdx.y * C::BW, nk = (K + MX_KSTEP - 1) / MX_KSTEP;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
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
                const int s = kb % C::STAGES;
                if (kb >= C::STAGES)
                    mbar_wait(&empty[s], (uint32_t)((kb / C::STAGES - 1) & 1));
                uint8_t *st = smem + s * C::STAGE;
                mbar_expect_tx(&full[s], (uint32_t)C::STAGE);
                tma_load_2d(st, &map_w, &full[s], kb * MX_KSTEP, n0);
                tma_load_2d(st + C::W_BYTES, &map_x, &full[s], kb * MX_KSTEP, t0);
                tma_load_2d(st + C::W_BYTES + C::X_BYTES / 2, &map_x, &full[s], kb * MX_KSTEP + 64, t0);
            }
        }
        return;
    }
    /* consumers */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(232));
    const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    /* this thread's A rows: r and r + 8 of each slice; the swizzle permutes a row's 16-byte
     * chunks by row % 8, which is g for all of them */
    const uint32_t row_off = (uint32_t)((cw * 64 * SUB + warp * 16 + g) * MX_KSTEP) + 4u * (uint32_t)(q >> 1);
    const uint32_t sel = (q & 1) ? 0x3424u : 0x1404u; /* the word's upper or lower code pair */
    float d[SUB][64];
#pragma unroll
    for (int m = 0; m < SUB; m++)
#pragma unroll
        for (int i = 0; i < 64; i++)
            d[m][i] = 0.0f;
    for (int kb = 0; kb < nk; kb++) {
        const int s = kb % C::STAGES;
        mbar_wait(&full[s], (uint32_t)((kb / C::STAGES) & 1));
        const uint8_t *wst = smem + s * C::STAGE;
        const uint32_t xs = smem_u32(wst + C::W_BYTES);
#pragma unroll
        for (int j = 0; j < MX_KSTEP / 16; j++) {
            const uint32_t chunk = (uint32_t)((j ^ g) << 4);
            uint32_t a[SUB][4];
#pragma unroll
            for (int m = 0; m < SUB; m++) {
                const uint8_t *r0 = wst + row_off + (uint32_t)(m * 64 * MX_KSTEP) + chunk, *r8 = r0 + 8 * MX_KSTEP;
                const uint32_t lo0 = *(const uint32_t *)r0, hi0 = *(const uint32_t *)(r0 + 8);
                const uint32_t lo8 = *(const uint32_t *)r8, hi8 = *(const uint32_t *)(r8 + 8);
                a[m][0] = mx_widen_pair(lo0, sel); /* row g,     k 2q, 2q + 1 */
                a[m][1] = mx_widen_pair(lo8, sel); /* row g + 8, k 2q, 2q + 1 */
                a[m][2] = mx_widen_pair(hi0, sel); /* row g,     k 2q + 8, 2q + 9 */
                a[m][3] = mx_widen_pair(hi8, sel); /* row g + 8, k 2q + 8, 2q + 9 */
            }
            /* k16 step j: box j / 4 of the tokens' values, 32 bytes a step within its rows */
            const uint64_t db = wg_desc(xs + (uint32_t)((j >> 2) * (C::X_BYTES / 2) + 32 * (j & 3)));
            wgmma_fence();
#pragma unroll
            for (int m = 0; m < SUB; m++)
                wgmma_bf16_rs_n128(d[m], a[m], db);
            wgmma_commit();
            /* the previous step's wgmmas are done: their fragments free, and at the first step
             * of a stage the previous stage is done with: give it back */
            wgmma_wait<1>();
            if (j == 0 && kb > 0 && lane == 0)
                mbar_arrive(&empty[(kb - 1) % C::STAGES]);
        }
    }
    wgmma_wait<0>();

    /* d[m][4 j + 2 h + e]: weight row (output n) 64 (SUB cw + m) + 16 warp + g + 8 h, token
     * 8 j + 2 q + e (the m64nNk16 accumulator layout) */
#pragma unroll
    for (int m = 0; m < SUB; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int n = n0 + 64 * (SUB * cw + m) + 16 * warp + g + 8 * h;
            if (n >= N)
                continue;
            const float swn = sw[n], bn = bias ? bias[n] : 0.0f;
#pragma unroll
            for (int j = 0; j < MX_BT / 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int t = t0 + 8 * j + 2 * q + e;
                    if (t >= T)
                        continue;
                    float r = __fmul_rn(__fmul_rn(d[m][4 * j + 2 * h + e], sx[t]), swn);
                    if (bias)
                        r = __fadd_rn(r, bn);
                    float *o = y + (int64_t)t * ldy + n;
                    *o = accumulate ? __fadd_rn(*o, r) : r;
                }
        }
}

template <int SUB>
static int mx_launch(clef_backend *be, int64_t T, int64_t N, int64_t K, const __nv_bfloat16 *xv, const uint8_t *qw,
                     const float *sx, const float *sw, const float *bias, float *y, int64_t ldy, int accumulate) {
    typedef mx_cfg<SUB> C;
    CUtensorMap mx, mw;
    if (!wg_map(&mx, xv, 2, T, K, MX_BT) || !wg_map(&mw, qw, 1, N, K, C::BW))
        return 0;
    /* every call: the attribute is per device */
    if (cudaFuncSetAttribute(k_fp8_exact_mixed<SUB>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) !=
        cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    dim3 grid((unsigned)((T + MX_BT - 1) / MX_BT), (unsigned)((N + C::BW - 1) / C::BW));
    k_fp8_exact_mixed<SUB><<<grid, MX_THREADS, C::SMEM, cuda_ctx(be)->stream>>>(
        mx, mw, (int)T, (int)N, (int)K, sx, sw, bias, y, ldy, accumulate);
    return CUDA_CHECK_LAUNCH(be, "fp8 exact wgmma GEMM kernel (weight widened in registers)") == CLEF_OK;
}

int cuda_fp8_exact_mixed_gemm(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K,
                              const __nv_bfloat16 *xv, const uint8_t *qw, const float *sx, const float *sw,
                              const float *bias, float *y, int64_t ldy, int accumulate) {
    if ((variant != CLEF_CUDA_WGMMA_FP8_MIXED && variant != CLEF_CUDA_WGMMA_FP8_MIXED_128) ||
        !wg_usable(be, T, N, K, xv, qw) || N > 65535 * 128)
        return 0;
    switch (variant) {
    case CLEF_CUDA_WGMMA_FP8_MIXED: return mx_launch<2>(be, T, N, K, xv, qw, sx, sw, bias, y, ldy, accumulate);
    case CLEF_CUDA_WGMMA_FP8_MIXED_128: return mx_launch<1>(be, T, N, K, xv, qw, sx, sw, bias, y, ldy, accumulate);
    default: return 0;
    }
}
