/*
 * cuda_quant_nf4.cu — NF4 matmul (bitsandbytes 4-bit with double quantization): the choice of
 * GEMM and the dequantization kernels. The arithmetic is bitsandbytes' bf16 model's: weights
 * bf16(code x absmax), activations rounded to bf16, bf16 x bf16 products summed in fp32.
 *
 *  - CLEF_CUDA_NF4_FUSED (where cuda_nf4_gemm_fused_supported): x rounded to bf16 (the BF16
 *    path's staging), then cuda_quant_nf4_gemm.cu's kernel reads the 4-bit codes themselves.
 *    Scratch: none.
 *  - CLEF_CUDA_NF4_DEQUANT (and the fused mode's other layouts): the weight is dequantized to
 *    bf16 into the matmul's scratch by one memory-bound kernel, then the BF16 path of
 *    cuda_matmul.cu runs on that copy (cuBLASLt). The bf16 copy is scratch of one matrix at a
 *    time (2 x rows x cols bytes), reused by the next matmul. CLEF_CUDA_NF4_RUN15: the same
 *    with run15's element-wise dequantization kernel (the old path, for same-run comparisons).
 * The mode is the backend's, not the call's: a row's result never depends on the batch.
 *
 * Dequantization, element i of the STORED tensor (a row slice starts at quant_row0 x cols),
 * block b = i / block, bit-identical to clef_nf4_dequant_bf16:
 *   absmax = nested_code[absmax_q[b]] * nested_absmax[b / nested_block] + nested_offset
 *            (two fp32 operations, no fused multiply-add), or absmax_f32[b]
 *   W[i]   = bf16_rne(code[nibble(i)] * absmax)      nibble: high half of byte i/2 for even i
 * Block sizes are powers of two (the quant_state parser checks), so block numbers are shifts.
 * The vectorized kernel (run16): each lane decodes 4 of its warp's 16-byte-apart groups of 8
 * elements (a 4-byte load, one 16-byte store each: every warp-wide access coalesced), all its
 * loads (codes, absmax codes, nested absmax) issued before any use: ~3.5 TB/s on the 27B's
 * large weights (0.064 ms for 17408 x 5120), where run15's kernel (each thread 4 byte loads, a
 * block-number test per element) ran at ~1.75 TB/s (0.125 ms) of the H200's ~4.8 (run16).
 *
 * x's bf16 rows are the BF16 path's: the backend's staging buffer (where the op that produced
 * x already wrote them, nothing converts), not the scratch. Scratch: DEQUANT the bf16 weights
 * [rows, cols]; FUSED none (a layout the fused kernel does not run takes the bf16 weights from
 * cuda_quant_scratch_part).
 */
#include "backend/cuda/cuda_quant_internal.cuh"

#include <string.h>

typedef struct nf4_args {
    const uint8_t *packed;      /* this matrix's first byte (the slice's data) */
    int64_t n;                  /* elements of this matrix: rows x cols (even) */
    int64_t first;              /* its first element in the stored tensor: quant_row0 x cols */
    int block_shift, nested_shift; /* log2 of the block sizes (powers of two, bitsandbytes') */
    const uint8_t *absmax_q;
    const float *absmax_f32, *nested_absmax, *code, *nested_code;
    float nested_offset;
} nf4_args;

__device__ __forceinline__ float nf4_absmax(const nf4_args &a, const float *nested_code, int64_t b) {
    if (!a.absmax_q)
        return a.absmax_f32[b];
    return __fadd_rn(__fmul_rn(nested_code[a.absmax_q[b]], a.nested_absmax[b >> a.nested_shift]), a.nested_offset);
}

/* The block's copies of the 16 NF4 code values and (double quantization) the 256 nested absmax
 * codes, in shared memory; the block synchronizes before its threads read them. */
__device__ __forceinline__ void nf4_load_tables(const nf4_args &a, float *code, float *nested_code) {
    if (threadIdx.x < 16)
        code[threadIdx.x] = a.code[threadIdx.x];
    if (a.absmax_q)
        for (int i = threadIdx.x; i < 256; i += blockDim.x)
            nested_code[i] = a.nested_code[i];
    __syncthreads();
}

/* run15's kernel, any layout (odd slices, unaligned codes): each thread 4 packed bytes (8
 * elements), one 16-byte store */
__global__ void k_nf4_dequant(nf4_args a, __nv_bfloat16 *out) {
    __shared__ float code[16], nested_code[256];
    nf4_load_tables(a, code, nested_code);
    const int64_t n_bytes = a.n / 2;
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q * 4 < n_bytes;
         q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t byte0 = q * 4;
        const int nb = n_bytes - byte0 < 4 ? (int)(n_bytes - byte0) : 4;
        __align__(16) __nv_bfloat16 v[8];
        int64_t cached_b = -1;
        float am = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j < 2 * nb) {
                const int64_t b = (a.first + 2 * byte0 + j) >> a.block_shift;
                if (b != cached_b) /* 8 consecutive elements: one block unless it starts inside */
                    am = nf4_absmax(a, nested_code, b), cached_b = b;
                const uint8_t byte = a.packed[byte0 + j / 2];
                const int nib = (j & 1) ? (byte & 0x0f) : (byte >> 4);
                v[j] = __float2bfloat16_rn(__fmul_rn(code[nib], am));
            }
        }
        if (nb == 4) {
            *(uint4 *)(out + 2 * byte0) = *(const uint4 *)v;
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j < 2 * nb)
                    out[2 * byte0 + j] = v[j];
        }
    }
}

/* 8 consecutive elements (one 4-byte word of codes) to bf16, absmax am */
__device__ __forceinline__ uint4 nf4_decode8(uint32_t word, float am, const float *code) {
    uint32_t h[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t byte = (word >> (8 * j)) & 0xffu; /* byte j: elements 2j (high nibble), 2j + 1 */
        __nv_bfloat162 v = __floats2bfloat162_rn(__fmul_rn(code[byte >> 4], am), __fmul_rn(code[byte & 15u], am));
        h[j] = *(uint32_t *)&v;
    }
    return make_uint4(h[0], h[1], h[2], h[3]);
}

/* Groups of 8 elements: group g = packed word g, elements 8g..8g+7 (first % 8 == 0, n % 8 ==
 * 0, blocks >= 8 elements: one absmax per group). A block of threads covers 1,024 groups,
 * each warp 128: lane l the groups 32 s + l, s = 0..3. */
#define NF4_GROUPS_PER_LANE 4
__global__ void k_nf4_dequant_vec(nf4_args a, __nv_bfloat16 *out) {
    __shared__ float code[16], nested_code[256];
    nf4_load_tables(a, code, nested_code);
    const int64_t n_groups = a.n >> 3, per_block = (int64_t)blockDim.x * NF4_GROUPS_PER_LANE;
    const uint32_t *words = (const uint32_t *)a.packed;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t base = (int64_t)blockIdx.x * per_block + warp * 32 * NF4_GROUPS_PER_LANE + lane; base < n_groups;
         base += (int64_t)gridDim.x * per_block) {
        uint32_t word[NF4_GROUPS_PER_LANE], aq[NF4_GROUPS_PER_LANE];
        float af[NF4_GROUPS_PER_LANE];
#pragma unroll
        for (int s = 0; s < NF4_GROUPS_PER_LANE; s++) { /* every load first */
            const int64_t g = base + 32 * s;
            if (g < n_groups) {
                const int64_t b = (a.first + 8 * g) >> a.block_shift;
                word[s] = __ldg(words + g);
                if (a.absmax_q)
                    aq[s] = __ldg(a.absmax_q + b), af[s] = __ldg(a.nested_absmax + (b >> a.nested_shift));
                else
                    aq[s] = 0, af[s] = __ldg(a.absmax_f32 + b);
            }
        }
#pragma unroll
        for (int s = 0; s < NF4_GROUPS_PER_LANE; s++) {
            const int64_t g = base + 32 * s;
            if (g < n_groups) {
                const float am = a.absmax_q ? __fadd_rn(__fmul_rn(nested_code[aq[s]], af[s]), a.nested_offset) : af[s];
                *(uint4 *)(out + 8 * g) = nf4_decode8(word[s], am, code);
            }
        }
    }
}

static int nf4_fill_args(clef_backend *be, const clef_matrix *w, nf4_args *a) {
    const clef_quant_nf4 *q = &w->quant->u.nf4;
    const int bs = cuda_log2_exact(q->block), ns = q->absmax_q ? cuda_log2_exact(q->nested_block) : 0;
    if (w->cols % 2 != 0 || w->ld != w->cols || bs < 0 || ns < 0) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED,
                        "CUDA NF4: %lld input features, blocks of %lld, nested blocks of %lld (need an even count "
                        "of dense columns and power-of-two blocks)",
                        (long long)w->cols, (long long)q->block, (long long)q->nested_block);
        return 0;
    }
    a->packed = (const uint8_t *)w->data;
    a->n = w->rows * w->cols;
    a->first = w->quant_row0 * w->cols;
    a->block_shift = bs, a->nested_shift = ns;
    a->absmax_q = q->absmax_q, a->absmax_f32 = q->absmax_f32, a->nested_absmax = q->nested_absmax;
    a->code = q->code, a->nested_code = q->nested_code, a->nested_offset = q->nested_offset;
    return 1;
}

extern "C" void clef_cuda_nf4_dequant_bf16(clef_backend *be, const clef_matrix *w, uint16_t *out) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_quant_state *st = cuda_quant_state_of(be);
    nf4_args a;
    if (ctx->status != CLEF_OK || !st || !nf4_fill_args(be, w, &a))
        return;
    const int vec = st->nf4_gemm != CLEF_CUDA_NF4_RUN15 && a.first % 8 == 0 && a.n % 8 == 0 && a.block_shift >= 3 &&
                    (uintptr_t)a.packed % 4 == 0 && (uintptr_t)out % 16 == 0;
    if (vec) {
        const int64_t per_block = 256 * NF4_GROUPS_PER_LANE;
        int64_t blocks = ((a.n >> 3) + per_block - 1) / per_block;
        if (blocks > 65535 * 8)
            blocks = 65535 * 8;
        k_nf4_dequant_vec<<<(unsigned)blocks, 256, 0, ctx->stream>>>(a, (__nv_bfloat16 *)out);
        CUDA_CHECK_LAUNCH(be, "NF4 dequantization kernel");
        return;
    }
    int64_t threads_needed = (a.n / 2 + 3) / 4;
    unsigned blocks = cuda_blocks(threads_needed, 256);
    if (blocks > 65535u * 8)
        blocks = 65535u * 8;
    k_nf4_dequant<<<blocks, 256, 0, ctx->stream>>>(a, (__nv_bfloat16 *)out);
    CUDA_CHECK_LAUNCH(be, "NF4 dequantization kernel");
}

static size_t nf4_weight_bytes(const clef_matrix *w) {
    return cuda_quant_align(sizeof(uint16_t) * (size_t)(w->rows * w->cols));
}

static clef_matrix nf4_bf16_view(const clef_matrix *w, const void *data) {
    clef_matrix b;
    memset(&b, 0, sizeof b);
    b.type = CLEF_WTYPE_BF16, b.rows = w->rows, b.cols = w->cols, b.ld = w->cols, b.data = data;
    return b;
}

size_t cuda_nf4_workspace_size(const cuda_quant_paths *p, int64_t T, const clef_matrix *w) {
    (void)T;
    return p->nf4_fused ? 0 : nf4_weight_bytes(w);
}

void cuda_nf4_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                     const float *bias, float *y, int64_t ldy, int accumulate, void *scratch) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return;
    const cuda_quant_paths paths = cuda_quant_paths_of(st);
    if (st->nf4_gemm == CLEF_CUDA_NF4_FUSED && cuda_nf4_gemm_fused_supported(w)) {
        const __nv_bfloat16 *xb = cuda_matmul_bf16_rows(be, T, x, ldx, w->cols, NULL); /* the staging */
        if (xb && cuda_nf4_gemm_fused(be, T, xb, w, bias, y, ldy, accumulate))
            return;
        if (cuda_ctx(be)->status != CLEF_OK)
            return;
    }
    cuda_qscratch qs;
    if (!cuda_quant_scratch(be, scratch, T, w, cuda_nf4_workspace_size(&paths, T, w), &qs))
        return;
    char *ws = (char *)cuda_quant_scratch_part(be, &qs, 0, nf4_weight_bytes(w));
    if (!ws)
        return;
    clef_cuda_nf4_dequant_bf16(be, w, (uint16_t *)ws);
    clef_matrix b = nf4_bf16_view(w, ws);
    cuda_matmul(be, T, x, ldx, &b, bias, y, ldy, accumulate, NULL); /* x staged as for any BF16 matmul */
}
