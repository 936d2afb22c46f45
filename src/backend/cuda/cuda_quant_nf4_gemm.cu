/*
 * cuda_quant_nf4_gemm.cu — the NF4 GEMM with the dequantization in its main loop: the weight
 * stays 4-bit in device memory and is read as such (a quarter of the BF16 bytes), each k-slice
 * of it decoded into shared memory as bf16 and multiplied on the bf16 tensor cores
 * (mma.sync m16n8k16, fp32 accumulation, ldmatrix operands).
 *
 *   y[t, n] = (accumulate ? y[t, n] : 0) + sum_k xb[t, k] W[n, k]  (+ bias[n])
 *
 * xb: the activations already rounded to bf16 (the BF16 path's staging, cuda_matmul.cu);
 * W[n, k] = bf16_rne(code[nibble] x absmax) with absmax = nested_code[absmax_q[b]] x
 * nested_absmax[b / nested_block] + nested_offset (two fp32 roundings, no fma) or
 * absmax_f32[b]: cuda_quant_nf4.cu's dequantization and clef_nf4_dequant_bf16, bit for bit.
 * The result is then the BF16 GEMM of the dequantized weight up to the fp32 summation order.
 *
 * Tiles: a block of 256 threads (8 warps) makes 128 tokens x 128 outputs; k steps of 64,
 * which with K % 64 == 0 and blocks of >= 64 elements is one absmax per weight row per step.
 * Per step: the bf16 rows of x (128 x 64) and the packed codes (128 rows x 32 bytes) arrive by
 * cp.async in a 3-stage ring, issued two steps ahead; each warp multiplies its 64 tokens x 32
 * outputs (4 x 4 mma tiles, 4 k16 slices) on the weight tile decoded the step before, then
 * each thread decodes 32 codes of one row of the next step (its absmax loaded a step ahead
 * into registers) into the other of two bf16 weight tiles: one barrier a step, and a warp's
 * decoding overlaps the others' MMAs. Shared rows are padded to 72 bf16 (144 bytes), so
 * ldmatrix's 8 rows of 16 bytes land on distinct banks. The blocks are rastered in groups of
 * 8 output tiles, all token tiles of a group together, so a weight tile is fetched from memory
 * once and the rows of x stay in L2.
 *
 * Speed (H200, run16, bench_gpu_quant nf4gemm): 95-245 TFLOP/s on the 27B linears, 1.3-3.5x
 * the time of dequantization + cuBLASLt (whose wgmma kernels run at 700+), so it is opt-in
 * (CLEF_CUDA_NF4_FUSED). At 298 tokens those GEMMs are not weight-bandwidth bound, so reading
 * 4x fewer bytes does not make up for mma.sync's rate: a wgmma version would be needed.
 *
 * Summation order: each output's fp32 sum runs over the 16-wide k slices in ascending k, one
 * mma per slice, whatever T is and wherever the row sits in its tile (padding rows past T are
 * zeros and are not stored): a row's result does not depend on the rest of the batch.
 */
#include "backend/cuda/cuda_quant_internal.cuh"

#define NF4G_BM 128     /* tokens per block */
#define NF4G_BN 128     /* output features per block */
#define NF4G_BK 64      /* k per main-loop step */
#define NF4G_STAGES 3   /* cp.async ring depth */
#define NF4G_THREADS 256
#define NF4G_LDS 72     /* bf16 per shared row: 64 + 8 of padding */
#define NF4G_GROUP 8    /* output tiles per raster group */

#define NF4G_X_BYTES (NF4G_BM * NF4G_LDS * 2)     /* one stage of x */
#define NF4G_P_BYTES (NF4G_BN * NF4G_BK / 2)      /* one stage of packed codes */
#define NF4G_W_BYTES (NF4G_BN * NF4G_LDS * 2)     /* the decoded weight tile */
#define NF4G_SMEM (NF4G_STAGES * (NF4G_X_BYTES + NF4G_P_BYTES) + 2 * NF4G_W_BYTES + (16 + 256) * 4)

typedef struct nf4g_args {
    const __nv_bfloat16 *x; /* [T, K] */
    const uint8_t *packed;  /* [N, K / 2]: this matrix's codes */
    int T, N, K;
    int64_t first;          /* the matrix's first element in the stored tensor (quant_row0 x K) */
    int block_shift, nested_shift;
    const uint8_t *absmax_q;
    const float *absmax_f32, *nested_absmax, *code, *nested_code;
    float nested_offset;
    const float *bias;
    float *y;
    int64_t ldy;
    int accumulate;
} nf4g_args;

__device__ __forceinline__ uint32_t nf4g_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared; src_bytes 0 writes zeros (rows past T or N) */
__device__ __forceinline__ void nf4g_cp16(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(nf4g_smem_addr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void nf4g_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void nf4g_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void nf4g_ldmatrix4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(nf4g_smem_addr(p))
                 : "memory");
}

/* c (16 x 8, fp32) += a (16 x 16, bf16, row-major) b (16 x 8, bf16, column-major) */
__device__ __forceinline__ void nf4g_mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Step kt's x rows and packed codes into ring slot `stage` (4 + 1 16-byte copies a thread). */
__device__ __forceinline__ void nf4g_load(const nf4g_args &a, unsigned char *smem, int stage, int kt, int t0,
                                          int n0) {
    __nv_bfloat16 *xs = (__nv_bfloat16 *)(smem + stage * NF4G_X_BYTES);
    uint8_t *ps = smem + NF4G_STAGES * NF4G_X_BYTES + stage * NF4G_P_BYTES;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int c = threadIdx.x + j * NF4G_THREADS, r = c >> 3, ch = c & 7, t = t0 + r;
        const __nv_bfloat16 *src = a.x + (int64_t)(t < a.T ? t : 0) * a.K + kt * NF4G_BK + ch * 8;
        nf4g_cp16(xs + r * NF4G_LDS + ch * 8, src, t < a.T ? 16 : 0);
    }
    const int r = threadIdx.x >> 1, ch = threadIdx.x & 1, n = n0 + r;
    const uint8_t *src = a.packed + (int64_t)(n < a.N ? n : 0) * (a.K / 2) + kt * (NF4G_BK / 2) + ch * 16;
    nf4g_cp16(ps + r * (NF4G_BK / 2) + ch * 16, src, n < a.N ? 16 : 0);
}

/* 32 codes (16 bytes) of one weight row to bf16 (absmax am): 4 16-byte stores */
__device__ __forceinline__ void nf4g_decode(const uint8_t *codes, float am, const float *code, __nv_bfloat16 *dst) {
    const uint4 p = *(const uint4 *)codes;
    const uint32_t words[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
    for (int wI = 0; wI < 4; wI++) {
        uint32_t h[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t byte = (words[wI] >> (8 * j)) & 0xffu; /* elements 2j (high nibble), 2j + 1 */
            __nv_bfloat162 v = __floats2bfloat162_rn(__fmul_rn(code[byte >> 4], am), __fmul_rn(code[byte & 15u], am));
            h[j] = *(uint32_t *)&v;
        }
        *(uint4 *)(dst + wI * 8) = make_uint4(h[0], h[1], h[2], h[3]);
    }
}

__global__ void __launch_bounds__(NF4G_THREADS, 2) k_nf4_gemm(nf4g_args a) {
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16 *wb = (__nv_bfloat16 *)(smem + NF4G_STAGES * (NF4G_X_BYTES + NF4G_P_BYTES));
    float *code = (float *)(smem + NF4G_STAGES * (NF4G_X_BYTES + NF4G_P_BYTES) + 2 * NF4G_W_BYTES);
    float *nested_code = code + 16;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3; /* the warp's 64 tokens, 32 outputs */

    /* raster: groups of NF4G_GROUP output tiles; inside a group the output tile runs fastest */
    const int tiles_t = (a.T + NF4G_BM - 1) / NF4G_BM, tiles_n = (a.N + NF4G_BN - 1) / NF4G_BN;
    const int per_group = NF4G_GROUP * tiles_t, g = blockIdx.x / per_group, local = blockIdx.x - g * per_group;
    const int gsize = min(NF4G_GROUP, tiles_n - g * NF4G_GROUP);
    const int t0 = (local / gsize) * NF4G_BM, n0 = (g * NF4G_GROUP + local % gsize) * NF4G_BN;

    if (tid < 16)
        code[tid] = a.code[tid];
    if (a.absmax_q)
        for (int i = tid; i < 256; i += NF4G_THREADS)
            nested_code[i] = a.nested_code[i];

    const int KT = a.K / NF4G_BK;
#pragma unroll
    for (int s = 0; s < NF4G_STAGES - 1; s++) {
        if (s < KT)
            nf4g_load(a, smem, s, s, t0, n0);
        nf4g_commit();
    }

    /* this thread decodes row dr of the weight tile, k half dh (32 codes = 16 bytes a step) */
    const int dr = tid >> 1, dh = tid & 1, dn = n0 + dr;
    const int drow = dn < a.N;
    const int64_t row_first = a.first + (int64_t)(drow ? dn : 0) * a.K;
    uint32_t raw_q = 0; /* the next decoded step's absmax code (or 0) and nested absmax (or plain absmax) */
    float raw_f = 0.0f;
#define NF4G_FETCH(kt)                                                                      \
    do {                                                                                    \
        const int64_t b_ = (row_first + (int64_t)(kt) * NF4G_BK) >> a.block_shift;         \
        if (a.absmax_q)                                                                     \
            raw_q = __ldg(a.absmax_q + b_), raw_f = __ldg(a.nested_absmax + (b_ >> a.nested_shift)); \
        else                                                                                \
            raw_f = __ldg(a.absmax_f32 + b_);                                               \
    } while (0)
#define NF4G_DECODE(kt)                                                                     \
    nf4g_decode(smem + NF4G_STAGES * NF4G_X_BYTES + ((kt) % NF4G_STAGES) * NF4G_P_BYTES + dr * (NF4G_BK / 2) + \
                    dh * 16,                                                                \
                a.absmax_q ? __fadd_rn(__fmul_rn(nested_code[raw_q], raw_f), a.nested_offset) : raw_f, code, \
                wb + ((kt) & 1) * (NF4G_BN * NF4G_LDS) + dr * NF4G_LDS + dh * 32)
    NF4G_FETCH(0);

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    /* step 0 decoded ahead; then each step: its MMAs on the tile decoded the step before,
     * then the next step's decoding into the other tile (one barrier a step: a warp's
     * decoding overlaps the other warps' MMAs) */
    nf4g_wait<NF4G_STAGES - 2>();
    __syncthreads(); /* step 0's codes and the code tables are in shared memory */
    NF4G_DECODE(0);
    if (KT > 1)
        NF4G_FETCH(1);
    for (int kt = 0; kt < KT; kt++) {
        nf4g_wait<0>(); /* step kt + 1 landed (the last copies issued) */
        __syncthreads(); /* step kt decoded; every warp done with step kt - 1's slot and tile */
        {
            const int nk = kt + NF4G_STAGES - 1;
            if (nk < KT)
                nf4g_load(a, smem, nk % NF4G_STAGES, nk, t0, n0);
            nf4g_commit();
        }
        const __nv_bfloat16 *xs = (const __nv_bfloat16 *)(smem + (kt % NF4G_STAGES) * NF4G_X_BYTES);
        const __nv_bfloat16 *wt = wb + (kt & 1) * (NF4G_BN * NF4G_LDS);
#pragma unroll
        for (int ks = 0; ks < NF4G_BK / 16; ks++) {
            uint32_t b[4][2];
#pragma unroll
            for (int p = 0; p < 2; p++) { /* outputs 16p..16p+15 of the warp's 32: two n8 tiles */
                uint32_t r[4];
                nf4g_ldmatrix4(r, wt + (wn * 32 + p * 16 + (lane >> 4) * 8 + (lane & 7)) * NF4G_LDS + ks * 16 +
                                      ((lane >> 3) & 1) * 8);
                b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
                uint32_t af[4];
                nf4g_ldmatrix4(af, xs + (wm * 64 + mi * 16 + (lane & 15)) * NF4G_LDS + ks * 16 + (lane >> 4) * 8);
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
                    nf4g_mma(acc[mi][ni], af, b[ni]);
            }
        }
        if (kt + 1 < KT) {
            NF4G_DECODE(kt + 1);
            if (kt + 2 < KT)
                NF4G_FETCH(kt + 2);
        }
    }
#undef NF4G_DECODE
#undef NF4G_FETCH
    nf4g_wait<0>();

    /* accumulator (mi, ni): element e at token row lane / 4 (+ 8 for e >= 2), output column
     * 2 (lane % 4) + (e & 1) of the 16 x 8 tile */
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int t = t0 + wm * 64 + mi * 16 + (lane >> 2) + (e >> 1) * 8;
                const int n = n0 + wn * 32 + ni * 8 + (lane & 3) * 2 + (e & 1);
                if (t < a.T && n < a.N) {
                    float *o = a.y + (int64_t)t * a.ldy + n;
                    float v = acc[mi][ni][e];
                    if (a.accumulate)
                        v = __fadd_rn(*o, v);
                    if (a.bias)
                        v = __fadd_rn(v, a.bias[n]);
                    *o = v;
                }
            }
}

int cuda_nf4_gemm_fused_supported(const clef_matrix *w) {
    const clef_quant_nf4 *q = &w->quant->u.nf4;
    const int bs = cuda_log2_exact(q->block), ns = q->absmax_q ? cuda_log2_exact(q->nested_block) : 0;
    return w->cols % NF4G_BK == 0 && w->ld == w->cols && bs >= 6 && ns >= 0 && (uintptr_t)w->data % 16 == 0 &&
           w->rows < ((int64_t)1 << 30) && w->cols < ((int64_t)1 << 30);
}

extern "C" int clef_cuda_nf4_fused_layout(const clef_matrix *w) { return cuda_nf4_gemm_fused_supported(w); }

int cuda_nf4_gemm_fused(clef_backend *be, int64_t T, const __nv_bfloat16 *xb, const clef_matrix *w,
                        const float *bias, float *y, int64_t ldy, int accumulate) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t tiles = ((T + NF4G_BM - 1) / NF4G_BM) * ((w->rows + NF4G_BN - 1) / NF4G_BN);
    if (!cuda_nf4_gemm_fused_supported(w) || (uintptr_t)xb % 16 != 0 || T >= ((int64_t)1 << 30) ||
        tiles >= ((int64_t)1 << 31))
        return 0;
    /* every call: the attribute is per device */
    if (cudaFuncSetAttribute(k_nf4_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, NF4G_SMEM) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    const clef_quant_nf4 *q = &w->quant->u.nf4;
    nf4g_args a;
    a.x = xb, a.packed = (const uint8_t *)w->data;
    a.T = (int)T, a.N = (int)w->rows, a.K = (int)w->cols;
    a.first = w->quant_row0 * w->cols;
    a.block_shift = cuda_log2_exact(q->block), a.nested_shift = q->absmax_q ? cuda_log2_exact(q->nested_block) : 0;
    a.absmax_q = q->absmax_q, a.absmax_f32 = q->absmax_f32, a.nested_absmax = q->nested_absmax;
    a.code = q->code, a.nested_code = q->nested_code, a.nested_offset = q->nested_offset;
    a.bias = bias, a.y = y, a.ldy = ldy, a.accumulate = accumulate;
    k_nf4_gemm<<<(unsigned)tiles, NF4G_THREADS, NF4G_SMEM, ctx->stream>>>(a);
    return CUDA_CHECK_LAUNCH(be, "NF4 fused GEMM kernel") == CLEF_OK;
}
