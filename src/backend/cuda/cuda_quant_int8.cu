/*
 * cuda_quant_int8.cu — INT8 ConvRot matmul (comfy-kitchen int8_tensorwise + convrot weights):
 * the activations rotated and quantized per token (cuda_quant_act.cu), int8 x int8 -> int32
 * through cuBLASLt (IMMA; exact, so the accumulations are the CPU's integers whatever the
 * kernel's order), then cuda_quant_epilogue_i32: y = float(acc) * (s_t * s_w[n]) (+ bias),
 * the CPU's clef_int8_matmul_rows bit for bit.
 *
 * On sm_90 the GEMM and the scaling run by default in one of our wgmma kernels
 * (cuda_quant_wgmma.cu: the same int32 sums, the scaling from registers, no int32 round trip
 * through memory); cuBLASLt's int8 GEMM (~1,400 TOPS alone on the 27B shapes, H200 run15) and
 * the scaling kernel where it cannot run or with clef_backend_cuda_set_int8_wgmma(be, 0).
 * Layouts cuBLASLt has no int8 algorithm for run on a dp4a CUDA-core kernel (exact too, slow).
 *
 * Layouts as in cuda_matmul.cu (TN: the only int8 layout cuBLASLt runs without its special
 * orderings): W [N, K] = column-major K x N (op T), codes [T, K] = K x T, int32 products
 * [rows, ldacc] = column-major N x rows with ldacc = N rounded up to 4.
 * Scratch: codes [T, K] | scales [T] | (cuBLASLt only: where the backend runs no wgmma kernel
 * the size planned includes them, else a layout no wgmma kernel runs takes them from
 * cuda_quant_scratch_part) int32 products [chunk, ldacc]. Where the op that produced
 * x already wrote the codes and scales (the quantized hand-off, cuda_quant_stage.cu: the
 * butterfly rotation, not the exact mode) the GEMM reads those and the quantizer does not run.
 */
#include "backend/cuda/cuda_quant_internal.cuh"

static int64_t acc_ld(int64_t N) { return (N + 3) / 4 * 4; }
static size_t int8_codes_bytes(int64_t T, int64_t K) { return cuda_quant_align((size_t)(T * K)); }
static size_t int8_scales_bytes(int64_t T) { return cuda_quant_align(sizeof(float) * (size_t)T); }

static size_t int8_product_bytes(int64_t T, int64_t N) {
    int64_t ld = acc_ld(N), chunk = cuda_quant_chunk_rows(ld, sizeof(int32_t)); /* >= any even chunk */
    return cuda_quant_align(sizeof(int32_t) * (size_t)((T < chunk ? T : chunk) * ld));
}

size_t cuda_int8_workspace_size(const cuda_quant_paths *p, int64_t T, const clef_matrix *w) {
    return int8_codes_bytes(T, w->cols) + int8_scales_bytes(T) + (p->int8_wgmma ? 0 : int8_product_bytes(T, w->rows));
}

/* dp4a: four int8 products added to an int32 per instruction; exact in any order */
__global__ void k_int8_gemm_simple(int64_t T, int64_t N, int64_t K, const int8_t *qx, const int8_t *qw, int32_t *acc,
                                   int64_t ldacc) {
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
        const int *a = (const int *)(qx + t * K), *b = (const int *)(qw + n * K);
        int s = 0;
        for (int64_t k = 0; k < K / 4; k++)
            s = __dp4a(a[k], b[k], s);
        acc[t * ldacc + n] = s;
    }
}

void cuda_int8_gemm_simple(clef_backend *be, int64_t T, int64_t N, int64_t K, const int8_t *qx, const int8_t *qw,
                           int32_t *acc, int64_t ldacc) {
    k_int8_gemm_simple<<<cuda_quant_rows_grid(T, N, 128), 128, 0, cuda_ctx(be)->stream>>>(T, N, K, qx, qw, acc, ldacc);
    CUDA_CHECK_LAUNCH(be, "int8 CUDA-core GEMM kernel");
}

extern "C" void clef_cuda_int8_gemm_i32(clef_backend *be, int64_t T, int64_t N, int64_t K, const int8_t *qx,
                                        const int8_t *qw, int32_t *acc, int64_t ldacc) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    if (K % 4 != 0 || ldacc % 4 != 0 || ldacc < N) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED, "CUDA int8 GEMM: K %lld and ldacc %lld must be multiples of 4",
                        (long long)K, (long long)ldacc);
        return;
    }
    cuda_qplan *p = cuda_qplan_get(be, CUDA_QPLAN_INT8, (int)N, (int)T, (int)K, (int)K, (int)K, (int)ldacc, qw, qx,
                                   acc, 0);
    cublasStatus_t s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (p) {
        const int32_t alpha = 1, beta = 0;
        s = cublasLtMatmul(ctx->lt, p->desc, &alpha, qw, p->la, qx, p->lb, &beta, acc, p->lc, acc, p->lc, &p->algo,
                           ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream);
    }
    if (s != CUBLAS_STATUS_SUCCESS) /* a layout cuBLASLt has no int8 algorithm for */
        cuda_int8_gemm_simple(be, T, N, K, qx, qw, acc, ldacc);
}

void cuda_int8_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                      const float *bias, float *y, int64_t ldy, int accumulate, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    const int64_t N = w->rows, K = w->cols, ld = acc_ld(N);
    const int64_t chunk = cuda_quant_even_chunk(T, cuda_quant_chunk_rows(ld, sizeof(int32_t)));
    const clef_quant_int8_convrot *q = &w->quant->u.int8_convrot;
    if (K % 4 != 0) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED, "CUDA INT8 matmul: %lld input features (need a multiple of 4)",
                        (long long)K);
        return;
    }
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return;
    const cuda_quant_paths paths = cuda_quant_paths_of(st);
    cuda_qscratch qs;
    if (!cuda_quant_scratch(be, scratch, T, w, cuda_int8_workspace_size(&paths, T, w), &qs))
        return;
    char *ws = qs.base;
    const int8_t *qx = (const int8_t *)ws;
    const float *sx = (const float *)(ws + int8_codes_bytes(T, K));
    /* the codes and scales an op producing x wrote (cuda_quant_stage.cu), else quantize here */
    const int mode = cuda_qstage_mode_of(be, w);
    const void *staged = NULL;
    const float *staged_sx = NULL;
    if (cuda_qstage_rows(be, mode, T, x, ldx, K, q->input_scale, &staged, &staged_sx)) {
        qx = (const int8_t *)staged, sx = staged_sx;
    } else {
        cuda_qstage_learn(be, mode, x, ldx, K, q->input_scale);
        clef_cuda_convrot_quantize_tokens(be, T, K, x, ldx, q->rotation_group, q->input_scale, st->convrot_exact,
                                          (int8_t *)ws, (float *)(ws + int8_codes_bytes(T, K)));
    }
    const float *sw = q->weight_scale + w->quant_row0;
    if (st->int8_wgmma && ctx->status == CLEF_OK &&
        cuda_wgmma_gemm(be, 0, st->int8_wgmma, T, N, K, qx, w->data, sx, sw, bias, y, ldy, accumulate))
        return;
    int32_t *acc = (int32_t *)cuda_quant_scratch_part(be, &qs, int8_codes_bytes(T, K) + int8_scales_bytes(T),
                                                      int8_product_bytes(T, N));
    if (!acc)
        return;
    for (int64_t t0 = 0; t0 < T && ctx->status == CLEF_OK; t0 += chunk) {
        int64_t rows = T - t0 < chunk ? T - t0 : chunk;
        clef_cuda_int8_gemm_i32(be, rows, N, K, qx + t0 * K, (const int8_t *)w->data, acc, ld);
        if (ctx->status == CLEF_OK)
            cuda_quant_epilogue_i32(be, rows, N, acc, ld, sx + t0, sw, bias, y + t0 * ldy, ldy, accumulate);
    }
}
