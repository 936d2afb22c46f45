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
 * shared memory). One block of 384 threads makes 128 SUB weight rows x BT tokens (mx_cfg):
 *  - warpgroups 0 and 1, the consumers: SUB m64 slices of weight rows each. Per k16 step each
 *    thread reads its A fragment's codes from shared memory (two 32-bit words per row: the
 *    PTX m64nNk16 A layout gives thread (g = lane / 4, q = lane % 4) of warp w rows 16 w + g
 *    and + 8, columns 2q, 2q + 1 and 2q + 8, 2q + 9), widens them to bf16 pairs and issues
 *    m64nBTk16 wgmmas with A in registers; DEPTH steps' wgmmas stay in flight while the next
 *    step's codes are read and widened;
 *  - warpgroup 2, the producer: one thread loads per stage the weight rows' codes (one
 *    swizzled box) and the tokens' values (boxes of 64 bf16) with TMA into a ring of stages;
 *  - the epilogue: each thread scales its accumulators (cuda_quant_epilogue_f32's order) and
 *    stores them into y.
 * Persistent blocks (one per SM) walk the tiles in bands of weight rows (mx_tile); the ring
 * runs on across a block's tiles.
 *
 * What limits it (H200, run17_mx2 in bench/RESULTS.md): ~430-500 TFLOP/s at 8,192+ rows, ~60%
 * of cuBLASLt's BF16 GEMM, and none of 1, 2 or 3 steps in flight, persistence, the banded
 * order, 128 or 256 weight rows, or multicasting the tokens' values over a cluster of two
 * (25% less L2 traffic) moved that by more than run-to-run noise: not the wgmma queue, the
 * epilogue, the pipeline fill or L2. Left: the per-wgmma cost of m64n128k16 with A from
 * registers and the widening's instructions, both halved per multiply-add by 256-token tiles
 * (MIXED_T256: built, not yet run on a GPU). The default (CLEF_CUDA_WGMMA_AUTO, per layout)
 * takes 128-row tiles for outputs up to 5,120 wide (more tiles at few tokens), else 256.
 *
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
 * Status: the exact FP8 path's GEMM by default on sm_90 (CLEF_CUDA_WGMMA_AUTO; cuBLASLt stays
 * selectable: clef_backend_cuda_set_fp8_exact_wgmma(be, CLEF_CUDA_WGMMA_OFF) or
 * CLEF_CUDA_FP8_EXACT_GEMM=cublaslt). `test_cuda_quant` holds every variant to the exact path's
 * bounds and the row-alone check (`fp8-mixed` adds subnormal / every-code weight rows and a K
 * tail; `fp8-t256` the 256-token tiles). It needs no widened copy of the weight: the scratch
 * cuda_fp8_workspace_size plans for one is unused on this path.
 */
#include "backend/cuda/cuda_wgmma.cuh"

#define MX_CONSUMERS 256               /* two consumer warpgroups: warps 0-7 */
#define MX_THREADS (MX_CONSUMERS + 128) /* + the producer warpgroup */
#define MX_BAND 2048                   /* weight rows of a band of tiles (the raster below) */
/* registers per thread after setmaxnreg: the producer warpgroup gives what the consumers take
 * (entry: 65,536 over 384 threads, 168; per SM sub-partition one warp of each warpgroup). ptxas
 * allocates the consumers' code within MX_CONSUMER_REGS: 168 would not hold the accumulators
 * and DEPTH + 1 steps of fragments (it then serializes the wgmmas; a 288-thread block with a
 * producer warp cannot help: three of its warps share a sub-partition's 16,384 registers). */
#define MX_PRODUCER_REGS 40
#define MX_CONSUMER_REGS 232
static_assert(128 * MX_PRODUCER_REGS + MX_CONSUMERS * MX_CONSUMER_REGS <= 65536, "registers of a block");

/* A tile of 128 SUB weight rows x BT tokens (one m64nBTk16 wgmma per m64 slice and k16 step).
 * BT = 128: 128 of K a stage (one 128-byte row of codes per weight row, 128-byte swizzle; two
 * boxes of 64 bf16 x 128 tokens); BT = 256: 64 of K a stage (64-byte rows of codes, 64-byte
 * swizzle; one box of 64 bf16 x 256 tokens), so that a stage stays 40-64 KB and 3-5 fit. */
template <int SUB, int BT> struct mx_cfg {
    static constexpr int BW = 2 * 64 * SUB;                  /* weight rows per tile */
    static constexpr int KSTEP = BT == 128 ? 128 : 64;       /* K per stage = bytes of a row of codes */
    static constexpr int STEPS = KSTEP / 16;                 /* k16 steps per stage */
    static constexpr int W_BYTES = BW * KSTEP;               /* codes */
    static constexpr int X_BOXES = KSTEP / 64, X_BOX = BT * 128; /* boxes of 64 bf16 x BT tokens */
    static constexpr int X_BYTES = X_BOXES * X_BOX;
    static constexpr int STAGE = W_BYTES + X_BYTES;
    static constexpr int STAGES = (227 * 1024 - 2048) / STAGE;
    static constexpr int SMEM = STAGES * STAGE + 3 * STAGES * 8 + 1024; /* + barriers, alignment */
    static_assert(STAGES >= 3 && SMEM <= 232448 && STAGE % 1024 == 0, "shared memory of a block");
};

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

/* This thread's code words of k16 step j in a stage (rows: its A rows' first byte there): per
 * m64 slice row g and g + 8, columns 2q.. and 2q + 8.. (the pair picked later by sel); the
 * swizzle permutes a row's 16-byte chunks: 128-byte rows (128-byte swizzle) by row % 8, which
 * is g for all of them; 64-byte rows (64-byte swizzle: address bits 4-5 ^= bits 7-8) by
 * (row / 2) % 4, which is g / 2 */
/* d[128] += A (64 x 16 bf16, registers a[4]) x B (256 x 16 bf16, descriptor db)^T */
__device__ __forceinline__ void wgmma_bf16_rs_n256(float *d, const uint32_t (&a)[4], uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, {%128, %129, %130, %131}, %132, 1, 1, 1, 0;"
                 : MX_F8(0), MX_F8(8), MX_F8(16), MX_F8(24), MX_F8(32), MX_F8(40), MX_F8(48), MX_F8(56),
                   MX_F8(64), MX_F8(72), MX_F8(80), MX_F8(88), MX_F8(96), MX_F8(104), MX_F8(112), MX_F8(120)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

template <int SUB, int KSTEP>
__device__ __forceinline__ void mx_load_codes(uint32_t (&raw)[SUB][4], const uint8_t *rows, int j, int g) {
    const uint32_t chunk = (uint32_t)((j ^ (KSTEP == 128 ? g : (g >> 1) & 3)) << 4);
#pragma unroll
    for (int m = 0; m < SUB; m++) {
        const uint8_t *r0 = rows + (uint32_t)(m * 64 * KSTEP) + chunk, *r8 = r0 + 8 * KSTEP;
        raw[m][0] = *(const uint32_t *)r0;       /* row g,     k 2q, 2q + 1 */
        raw[m][1] = *(const uint32_t *)r8;       /* row g + 8, k 2q, 2q + 1 */
        raw[m][2] = *(const uint32_t *)(r0 + 8); /* row g,     k 2q + 8, 2q + 9 */
        raw[m][3] = *(const uint32_t *)(r8 + 8); /* row g + 8, k 2q + 8, 2q + 9 */
    }
}

/* Tile i of the grid's sequence -> its first token and weight row: bands of MX_BAND weight
 * rows, and within a band the token tiles in order, each with all of the band's weight tiles
 * (the blocks running at once share a band's codes and a few token tiles' values in L2, where
 * token-tile-major order streamed all the tokens' values from memory once per two weight tiles
 * at 8,192 rows). The order changes no sum. */
__device__ __forceinline__ void mx_tile(int i, int tiles_t, int tiles_n, int band, int bt, int bw, int *t0,
                                        int *n0) {
    const int b = i / (band * tiles_t), width = min(band, tiles_n - b * band), r = i - b * band * tiles_t;
    *t0 = (r / width) * bt;
    *n0 = (b * band + r % width) * bw;
}

/* The consumer warpgroups of k_fp8_exact_mixed: the wgmma pipeline and the epilogue */
template <int SUB, int DEPTH, int CL, int BT>
__device__ __forceinline__ void mx_consume(uint8_t *smem, uint64_t *full, uint64_t *empty, int nk, int tiles_t,
                                           int units_n, int units, int band, int cluster, int clusters, int rank,
                                           int T, int N, const float *sx, const float *sw, const float *bias,
                                           float *y, int64_t ldy, int accumulate) {
    typedef mx_cfg<SUB, BT> C;
    const int cw = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const uint32_t row_off = (uint32_t)((cw * 64 * SUB + warp * 16 + g) * C::KSTEP) + 4u * (uint32_t)(q >> 1);
    const uint32_t sel = (q & 1) ? 0x3424u : 0x1404u; /* the word's upper or lower code pair */
    uint32_t it = 0;
    for (int unit = cluster; unit < units; unit += clusters) {
        int t0, n0;
        mx_tile(unit, tiles_t, units_n, band, BT, CL * C::BW, &t0, &n0);
        n0 += rank * C::BW;
        float d[SUB][BT / 2];
#pragma unroll
        for (int m = 0; m < SUB; m++)
#pragma unroll
            for (int i = 0; i < BT / 2; i++)
                d[m][i] = 0.0f;
        /* the codes of the tile's first step */
        uint32_t raw[SUB][4];
        mbar_wait(&full[it % C::STAGES], (it / C::STAGES) & 1);
        mx_load_codes<SUB, C::KSTEP>(raw, smem + (it % C::STAGES) * C::STAGE + row_off, 0, g);
        for (int kb = 0; kb < nk; kb++, it++) {
            const uint8_t *wst = smem + (it % C::STAGES) * C::STAGE;
            const uint32_t xs = smem_u32(wst + C::W_BYTES);
#pragma unroll
            for (int j = 0; j < C::STEPS; j++) {
                uint32_t a[SUB][4];
#pragma unroll
                for (int m = 0; m < SUB; m++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        a[m][e] = mx_widen_pair(raw[m][e], sel);
                /* k16 step j: box j / 4 of the tokens' values, 32 bytes a step within its rows */
                const uint64_t db = wg_desc(xs + (uint32_t)((j >> 2) * C::X_BOX + 32 * (j & 3)));
                wgmma_fence();
#pragma unroll
                for (int m = 0; m < SUB; m++) {
                    if constexpr (BT == 256)
                        wgmma_bf16_rs_n256(d[m], a[m], db);
                    else
                        wgmma_bf16_rs_n128(d[m], a[m], db);
                }
                wgmma_commit();
                /* the next step's codes while these wgmmas run (the next stage's once it is in) */
                if (j + 1 < C::STEPS) {
                    mx_load_codes<SUB, C::KSTEP>(raw, wst + row_off, j + 1, g);
                } else if (kb + 1 < nk) {
                    const uint32_t nx = it + 1;
                    mbar_wait(&full[nx % C::STAGES], (nx / C::STAGES) & 1);
                    mx_load_codes<SUB, C::KSTEP>(raw, smem + (nx % C::STAGES) * C::STAGE + row_off, 0, g);
                }
                /* at most DEPTH steps in flight: step j - DEPTH is done, its fragments free; when
                 * that was the previous stage's last step, give that stage back */
                wgmma_wait<DEPTH>();
                if (j == DEPTH - 1 && kb > 0 && lane == 0)
                    mbar_arrive(&empty[(it - 1) % C::STAGES]);
            }
        }
        wgmma_wait<0>();
        if (lane == 0) /* the tile's last stage */
            mbar_arrive(&empty[(it - 1) % C::STAGES]);

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
                for (int j = 0; j < BT / 8; j++)
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
}

/* DEPTH: k16 steps whose wgmmas stay in flight while the next step's fragments are made (the
 * tensor cores' queue per warpgroup; each step's fragments live until its wgmmas are done).
 * CL = 2: blocks in clusters of two on the same token tile and neighbouring weight tiles (a
 * unit of 2 tiles): each block loads half the token rows' values and the copy engine writes
 * them into both, so a block reads 48 instead of 64 KB a stage from L2; a stage is refilled
 * once the consumers of both blocks are done with it. */
template <int SUB, int DEPTH, int CL, int BT>
__global__ void __launch_bounds__(MX_THREADS, 1)
    k_fp8_exact_mixed(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, int T,
                      int N, int K, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                      int accumulate) {
    typedef mx_cfg<SUB, BT> C;
    static_assert(DEPTH >= 1 && DEPTH <= C::STEPS, "wgmma steps in flight");
    static_assert(CL == 1 || CL == 2, "cluster size");
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw_addr = smem_u32(smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
    /* full: a stage's bytes are in; empty: this block's consumers are done with it; peer (CL
     * = 2): the other block's consumers are (its producer forwards that: a remote arrive among
     * the consumers' wgmmas would make ptxas serialize them) */
    uint64_t *full = (uint64_t *)(smem + C::STAGES * C::STAGE), *empty = full + C::STAGES, *peer = empty + C::STAGES;
    const int nk = (K + C::KSTEP - 1) / C::KSTEP;
    /* units of CL weight tiles on one token tile, one per cluster at a time */
    const int tiles_t = (T + BT - 1) / BT, units_n = (N + CL * C::BW - 1) / (CL * C::BW);
    const int units = tiles_t * units_n, band = MX_BAND / (CL * C::BW);
    const int cluster = (int)blockIdx.x / CL, clusters = (int)gridDim.x / CL;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8); /* lane 0 of each of the 8 consumer warps */
            mbar_init(&peer[s], 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    if constexpr (CL > 1)
        cluster_sync(); /* the peer's barriers exist before anything reaches them */
    else
        __syncthreads();
    const int rank = CL > 1 ? (int)cluster_rank() : 0;

    /* persistent: cluster c takes units c, c + clusters, ...; the ring of stages runs on across
     * tiles (its count `it`), so the next tile's first stages load during an epilogue */
    if (threadIdx.x >= MX_CONSUMERS) { /* the producer warpgroup: one thread issues the copies */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(MX_PRODUCER_REGS));
        if (threadIdx.x == MX_CONSUMERS) {
            uint32_t it = 0;
            for (int unit = cluster; unit < units; unit += clusters) {
                int t0, n0;
                mx_tile(unit, tiles_t, units_n, band, BT, CL * C::BW, &t0, &n0);
                n0 += rank * C::BW;
                for (int kb = 0; kb < nk; kb++, it++) {
                    const int s = (int)(it % C::STAGES);
                    if (it >= (uint32_t)C::STAGES) {
                        mbar_wait(&empty[s], (it / C::STAGES - 1) & 1);
                        if constexpr (CL > 1) { /* both blocks' consumers, before writing into both */
                            mbar_arrive_cluster(&peer[s], (uint32_t)(rank ^ 1));
                            mbar_wait(&peer[s], (it / C::STAGES - 1) & 1);
                        }
                    }
                    uint8_t *st = smem + s * C::STAGE;
                    mbar_expect_tx(&full[s], (uint32_t)C::STAGE);
                    tma_load_2d(st, &map_w, &full[s], kb * C::KSTEP, n0);
#pragma unroll
                    for (int b = 0; b < C::X_BOXES; b++) {
                        uint8_t *box = st + C::W_BYTES + b * C::X_BOX;
                        if constexpr (CL > 1) /* this block's half of the token rows, into both blocks */
                            tma_load_2d_multicast(box + rank * (C::X_BOX / 2), &map_x, &full[s], kb * C::KSTEP + 64 * b,
                                                  t0 + rank * (BT / 2), (uint16_t)3);
                        else
                            tma_load_2d(box, &map_x, &full[s], kb * C::KSTEP + 64 * b, t0);
                    }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(MX_CONSUMER_REGS));
        mx_consume<SUB, DEPTH, CL, BT>(smem, full, empty, nk, tiles_t, units_n, units, band, cluster, clusters, rank, T, N,
                                   sx, sw, bias, y, ldy, accumulate);
    }
    if constexpr (CL > 1) { /* no block leaves while its peer may still write into it or arrive on its barriers */
        __syncwarp();
        cluster_sync();
    }
}


/* CLEF_CUDA_WGMMA_AUTO: 128-row tiles for outputs this narrow, else 256-row ones. At few
 * tokens a 256-row tile count leaves SMs idle on the 5,120-wide outputs (27B o_proj / down:
 * 20 weight tiles x 3 token tiles at 298 rows on 132 SMs), and the K / V projections (1,024)
 * make 4 weight tiles; the choice may only depend on the layout. */
#define MX_NARROW 5120

template <int SUB, int DEPTH, int CL, int BT>
static int mx_launch(clef_backend *be, int64_t T, int64_t N, int64_t K, const __nv_bfloat16 *xv, const uint8_t *qw,
                     const float *sx, const float *sw, const float *bias, float *y, int64_t ldy, int accumulate) {
    typedef mx_cfg<SUB, BT> C;
    cuda_context *ctx = cuda_ctx(be);
    CUtensorMap mx, mw;
    if (!wg_map(&mx, xv, 2, T, K, BT / CL) || !wg_map(&mw, qw, 1, N, K, C::BW, C::KSTEP))
        return 0;
    /* every call: the attribute is per device */
    if (cudaFuncSetAttribute(k_fp8_exact_mixed<SUB, DEPTH, CL, BT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             C::SMEM) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    static int sms = 0, dev = -1;
    if (dev != ctx->device) {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
        dev = ctx->device;
    }
    /* persistent: no more blocks than run at once (one per SM; for clusters, as many as fit) */
    const int64_t units = (T + BT - 1) / BT * ((N + CL * C::BW - 1) / (CL * C::BW));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(MX_THREADS), cfg.dynamicSmemBytes = C::SMEM, cfg.stream = ctx->stream;
    int fit = sms > 0 ? sms / CL : 1;
    if (CL > 1) {
        cfg.gridDim = dim3((unsigned)(fit * CL)), cfg.attrs = attr, cfg.numAttrs = 1;
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, k_fp8_exact_mixed<SUB, DEPTH, CL, BT>, &cfg) == cudaSuccess && n > 0)
            fit = n < fit ? n : fit;
        cudaGetLastError();
    }
    cfg.gridDim = dim3((unsigned)((units < fit ? units : fit) * CL));
    if (cuda_record(be, cudaLaunchKernelEx(&cfg, k_fp8_exact_mixed<SUB, DEPTH, CL, BT>, mx, mw, (int)T, (int)N, (int)K, sx,
                                           sw, bias, y, ldy, accumulate),
                    "fp8 exact wgmma GEMM kernel (weight widened in registers)") != CLEF_OK)
        return 0;
    return CUDA_CHECK_LAUNCH(be, "fp8 exact wgmma GEMM kernel (weight widened in registers)") == CLEF_OK;
}

int cuda_fp8_exact_mixed_gemm(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K,
                              const __nv_bfloat16 *xv, const uint8_t *qw, const float *sx, const float *sw,
                              const float *bias, float *y, int64_t ldy, int accumulate) {
    if (variant == CLEF_CUDA_WGMMA_AUTO) /* per layout, never per row count (a row's bits) */
        variant = N <= MX_NARROW ? CLEF_CUDA_WGMMA_FP8_MIXED_128 : CLEF_CUDA_WGMMA_FP8_MIXED;
    /* tile counts in int (the kernel's tile index) */
    if (variant < CLEF_CUDA_WGMMA_FP8_MIXED || variant > CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC ||
        !wg_usable(be, T, N, K, xv, qw) || (T / 128 + 1) * (N / 128 + 1) >= INT32_MAX)
        return 0;
    switch (variant) {
#define MX_ARGS be, T, N, K, xv, qw, sx, sw, bias, y, ldy, accumulate
    case CLEF_CUDA_WGMMA_FP8_MIXED: return mx_launch<2, 2, 1, 128>(MX_ARGS);
    case CLEF_CUDA_WGMMA_FP8_MIXED_128: return mx_launch<1, 2, 1, 128>(MX_ARGS);
    case CLEF_CUDA_WGMMA_FP8_MIXED_D1: return mx_launch<2, 1, 1, 128>(MX_ARGS);
    case CLEF_CUDA_WGMMA_FP8_MIXED_D3: return mx_launch<2, 3, 1, 128>(MX_ARGS);
    case CLEF_CUDA_WGMMA_FP8_MIXED_MC: return mx_launch<2, 2, 2, 128>(MX_ARGS);
    case CLEF_CUDA_WGMMA_FP8_MIXED_T256: return mx_launch<1, 2, 1, 256>(MX_ARGS);
    case CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC: return mx_launch<1, 2, 2, 256>(MX_ARGS);
#undef MX_ARGS
    default: return 0;
    }
}
