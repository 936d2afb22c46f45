/*
 * cuda_quant_nf4.cu — NF4 matmul (bitsandbytes 4-bit with double quantization): the weight is
 * dequantized to bf16 into the matmul's scratch by one memory-bound kernel, then the BF16 path
 * of cuda_matmul.cu runs on that copy (activations rounded to bf16, cuBLASLt bf16 x bf16,
 * fp32 accumulation): the arithmetic of bitsandbytes' bf16 model (weights bf16(code x absmax)).
 * Resident weights stay 4-bit; the bf16 copy is scratch of one matrix at a time
 * (2 x rows x cols bytes), reused by the next matmul.
 *
 * Dequantization, element i of the STORED tensor (a row slice starts at quant_row0 x cols),
 * block b = i / block, bit-identical to clef_nf4_dequant_bf16:
 *   absmax = nested_code[absmax_q[b]] * nested_absmax[b / nested_block] + nested_offset
 *            (two fp32 operations, no fused multiply-add), or absmax_f32[b]
 *   W[i]   = bf16_rne(code[nibble(i)] * absmax)      nibble: high half of byte i/2 for even i
 * Each thread decodes 4 packed bytes (8 elements) and writes them as one 16-byte store; block
 * sizes are powers of two (the quant_state parser checks), so block numbers are shifts.
 *
 * Scratch: bf16 weights [rows, cols] | the BF16 path's staging of x (cuda_matmul_workspace_size).
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

__global__ void k_nf4_dequant(nf4_args a, __nv_bfloat16 *out) {
    __shared__ float code[16], nested_code[256];
    if (threadIdx.x < 16)
        code[threadIdx.x] = a.code[threadIdx.x];
    if (a.absmax_q)
        for (int i = threadIdx.x; i < 256; i += blockDim.x)
            nested_code[i] = a.nested_code[i];
    __syncthreads();
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

static int log2_exact(int64_t v) {
    int s = 0;
    while (s < 62 && ((int64_t)1 << s) < v)
        s++;
    return ((int64_t)1 << s) == v ? s : -1;
}

extern "C" void clef_cuda_nf4_dequant_bf16(clef_backend *be, const clef_matrix *w, uint16_t *out) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return;
    const clef_quant_nf4 *q = &w->quant->u.nf4;
    const int bs = log2_exact(q->block), ns = q->absmax_q ? log2_exact(q->nested_block) : 0;
    if (w->cols % 2 != 0 || w->ld != w->cols || bs < 0 || ns < 0) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED,
                        "CUDA NF4: %lld input features, blocks of %lld, nested blocks of %lld (need an even count "
                        "of dense columns and power-of-two blocks)",
                        (long long)w->cols, (long long)q->block, (long long)q->nested_block);
        return;
    }
    nf4_args a;
    a.packed = (const uint8_t *)w->data;
    a.n = w->rows * w->cols;
    a.first = w->quant_row0 * w->cols;
    a.block_shift = bs, a.nested_shift = ns;
    a.absmax_q = q->absmax_q, a.absmax_f32 = q->absmax_f32, a.nested_absmax = q->nested_absmax;
    a.code = q->code, a.nested_code = q->nested_code, a.nested_offset = q->nested_offset;
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

size_t cuda_nf4_workspace_size(int64_t T, const clef_matrix *w) {
    clef_matrix b = nf4_bf16_view(w, NULL);
    return nf4_weight_bytes(w) + cuda_matmul_workspace_size(NULL, T, &b);
}

void cuda_nf4_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                     const float *bias, float *y, int64_t ldy, int accumulate, void *scratch) {
    /* with no scratch given, the BF16 path stages x in its own buffer: only the weights here */
    char *ws = (char *)cuda_quant_scratch(be, scratch, scratch ? cuda_nf4_workspace_size(T, w) : nf4_weight_bytes(w));
    if (!ws)
        return;
    clef_cuda_nf4_dequant_bf16(be, w, (uint16_t *)ws);
    clef_matrix b = nf4_bf16_view(w, ws);
    /* the BF16 path stages x in the rest of the scratch (or, with none given, its own) */
    cuda_matmul(be, T, x, ldx, &b, bias, y, ldy, accumulate, scratch ? ws + nf4_weight_bytes(w) : NULL);
}
