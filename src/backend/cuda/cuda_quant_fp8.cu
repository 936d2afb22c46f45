/*
 * cuda_quant_fp8.cu — FP8 W8A8 matmul (compressed-tensors FP8_DYNAMIC weights): activations
 * quantized per token (cuda_quant_act.cu), then cuBLASLt e4m3 x e4m3 with fp32 accumulation.
 *
 * Scaling: y[t, n] = acc[t, n] * s_t * s_w[n]. cuBLASLt applies both vectors in its epilogue
 * with outer-vector scaling (A = the weight: one scale per output feature; B = the
 * activations: one per token), writing fp32 straight into y (beta = 1 when accumulating),
 * then a bias kernel adds the bias. For layouts cuBLASLt has no such algorithm for (or
 * refuses at run time; remembered per layout), the epilogue path: unscaled fp32 products
 * into scratch, in chunks of rows, then cuda_quant_epilogue_f32; where cuBLASLt has no FP8
 * algorithm at all for the layout, a CUDA-core kernel makes those products.
 *
 * Layouts as in cuda_matmul.cu: W [N, K] row-major = column-major K x N (op T), the codes of
 * x [T, K] = column-major K x T, D = y^T (N x T, ld = ldy). FP8 needs K, both leading
 * dimensions and the code pointers in multiples of 16 bytes.
 *
 * Scratch: codes [T, K] | scales [T] | (epilogue path) fp32 products [chunk, N].
 */
#include "backend/cuda/cuda_quant_internal.cuh"

extern "C" {
#include "core/log.h"
}

static size_t fp8_codes_bytes(int64_t T, int64_t K) { return cuda_quant_align((size_t)(T * K)); }
static size_t fp8_scales_bytes(int64_t T) { return cuda_quant_align(sizeof(float) * (size_t)T); }

static size_t fp8_product_bytes(int64_t T, int64_t N) {
    int64_t chunk = cuda_quant_chunk_rows(N, sizeof(float)); /* >= the even chunk of any T */
    return cuda_quant_align(sizeof(float) * (size_t)((T < chunk ? T : chunk) * N));
}

size_t cuda_fp8_workspace_size(int64_t T, const clef_matrix *w) {
    /* the epilogue path's products are included: which path runs is known only once cuBLASLt
     * has been asked, after the caller planned its memory */
    return fp8_codes_bytes(T, w->cols) + fp8_scales_bytes(T) + fp8_product_bytes(T, w->rows);
}

__global__ void k_fp8_add_bias(int64_t T, int64_t N, const float *bias, float *y, int64_t ldy) {
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    const float bn = bias[n];
    for (int64_t t = blockIdx.y; t < T; t += gridDim.y)
        y[t * ldy + n] = __fadd_rn(y[t * ldy + n], bn);
}

/* The outer-vector path; returns 0 if cuBLASLt has no algorithm for these layouts or refuses
 * the call (then remembered for the layouts, and nothing was written). */
static int fp8_gemm_outer(clef_backend *be, int64_t T, const clef_matrix *w, const uint8_t *qx, const float *sx,
                          const float *bias, float *y, int64_t ldy, int accumulate) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t N = w->rows, K = w->cols;
    cuda_qplan *p = cuda_qplan_get(be, CUDA_QPLAN_FP8_OUTER, (int)N, (int)T, (int)K, (int)K, (int)K, (int)ldy, w->data,
                                   qx, y, accumulate);
    if (!p)
        return 0;
    const float *sw = w->quant->u.fp8.weight_scale + w->quant_row0;
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof sw);
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof sx);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t s = cublasLtMatmul(ctx->lt, p->desc, &alpha, w->data, p->la, qx, p->lb, &beta, y, p->lc, y, p->lc,
                                      &p->algo, ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream);
    if (s != CUBLAS_STATUS_SUCCESS) { /* refused at run time: never ask for these layouts again */
        clef_log(CLEF_LOG_INFO, "CUDA: cuBLASLt refused FP8 outer-vector scaling for [%lld x %lld] (status %d); "
                                "those matmuls scale in a kernel", (long long)N, (long long)K, (int)s);
        p->refused = 1;
        cublasLtMatrixLayoutDestroy(p->la), cublasLtMatrixLayoutDestroy(p->lb), cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatmulDescDestroy(p->desc);
        return 0;
    }
    if (bias) {
        k_fp8_add_bias<<<cuda_quant_rows_grid(T, N, 256), 256, 0, ctx->stream>>>(T, N, bias, y, ldy);
        CUDA_CHECK_LAUNCH(be, "fp8 bias kernel");
    }
    return 1;
}

/* e4m3 code -> fp32 (exact) */
__device__ __forceinline__ float e4m3_value(uint8_t b) {
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7)
        return __int_as_float(0x7fc00000);
    return e ? sign * ldexpf((float)(8 + m), e - 10) : sign * ldexpf((float)m, -9);
}

__global__ void k_fp8_gemm_simple(int64_t T, int64_t N, int64_t K, const uint8_t *qx, const uint8_t *qw, float *prod,
                                  int64_t ldprod) {
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
        const uint8_t *a = qx + t * K, *b = qw + n * K;
        float acc = 0.0f;
        for (int64_t k = 0; k < K; k++) /* the product is exact: the sum rounds once per k */
            acc = __fadd_rn(acc, __fmul_rn(e4m3_value(a[k]), e4m3_value(b[k])));
        prod[t * ldprod + n] = acc;
    }
}

void cuda_fp8_gemm_simple(clef_backend *be, int64_t T, int64_t N, int64_t K, const uint8_t *qx, const uint8_t *qw,
                          float *prod, int64_t ldprod) {
    k_fp8_gemm_simple<<<cuda_quant_rows_grid(T, N, 128), 128, 0, cuda_ctx(be)->stream>>>(T, N, K, qx, qw, prod, ldprod);
    CUDA_CHECK_LAUNCH(be, "fp8 CUDA-core GEMM kernel");
}

/* The epilogue path: unscaled fp32 products of up to `chunk` rows (cuBLASLt, or the CUDA-core
 * kernel where it has no algorithm), then the scaling kernel. */
static void fp8_gemm_epilogue(clef_backend *be, int64_t T, const clef_matrix *w, const uint8_t *qx, const float *sx,
                              const float *bias, float *y, int64_t ldy, int accumulate, float *prod) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t N = w->rows, K = w->cols;
    const int64_t chunk = cuda_quant_even_chunk(T, cuda_quant_chunk_rows(N, sizeof(float)));
    const float *sw = w->quant->u.fp8.weight_scale + w->quant_row0;
    for (int64_t t0 = 0; t0 < T && ctx->status == CLEF_OK; t0 += chunk) {
        int64_t rows = T - t0 < chunk ? T - t0 : chunk;
        const uint8_t *b = qx + t0 * K;
        cuda_qplan *p = cuda_qplan_get(be, CUDA_QPLAN_FP8_PLAIN, (int)N, (int)rows, (int)K, (int)K, (int)K, (int)N,
                                       w->data, b, prod, 0);
        cublasStatus_t s = CUBLAS_STATUS_NOT_SUPPORTED;
        if (p) {
            const float alpha = 1.0f, beta = 0.0f;
            s = cublasLtMatmul(ctx->lt, p->desc, &alpha, w->data, p->la, b, p->lb, &beta, prod, p->lc, prod, p->lc,
                               &p->algo, ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream);
        }
        if (s != CUBLAS_STATUS_SUCCESS)
            cuda_fp8_gemm_simple(be, rows, N, K, b, (const uint8_t *)w->data, prod, N);
        cuda_quant_epilogue_f32(be, rows, N, prod, N, sx + t0, sw, bias, y + t0 * ldy, ldy, accumulate);
    }
}

void cuda_fp8_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                     const float *bias, float *y, int64_t ldy, int accumulate, void *scratch) {
    const int64_t K = w->cols;
    if (K % 16 != 0) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED, "CUDA FP8 matmul: %lld input features (need a multiple of 16)",
                        (long long)K);
        return;
    }
    cuda_quant_state *st = cuda_quant_state_of(be);
    char *ws = (char *)cuda_quant_scratch(be, scratch, cuda_fp8_workspace_size(T, w));
    if (!st || !ws)
        return;
    uint8_t *qx = (uint8_t *)ws;
    float *sx = (float *)(ws + fp8_codes_bytes(T, K));
    float *prod = (float *)(ws + fp8_codes_bytes(T, K) + fp8_scales_bytes(T));
    clef_cuda_fp8_quantize_tokens(be, T, K, x, ldx, qx, sx);
    if (!st->fp8_force_epilogue && fp8_gemm_outer(be, T, w, qx, sx, bias, y, ldy, accumulate)) {
        st->fp8_outer_calls++;
        return;
    }
    st->fp8_epilogue_calls++;
    fp8_gemm_epilogue(be, T, w, qx, sx, bias, y, ldy, accumulate, prod);
}
