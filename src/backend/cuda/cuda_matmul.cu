/*
 * cuda_matmul.cu — y (+)= x W^T (+ bias) through cuBLASLt, and the embedding lookup.
 *
 * BF16 weights: the fp32 rows of x are rounded to bf16 into the backend's staging buffer (one
 * small kernel), then cuBLASLt runs bf16 x bf16 -> fp32 with fp32 accumulation; accumulate
 * is beta = 1 on the fp32 output. F32 matrices run in plain fp32 (CUBLAS_COMPUTE_32F, no
 * TF32) so the head's small fp32 products stay at fp32 accuracy.
 *
 * Layout: W is [N, K] row-major = a column-major K x N matrix (ld = W.ld); x [T, K] row-major
 * = column-major K x T (ld = ldx); y^T = W^T^T x^T, i.e. D (N x T, ld = ldy) = op_T(A) * B.
 * Plans (layouts + the heuristic's algorithm) are cached per weight shape, leading dimensions
 * and pointer alignment, NOT per row count: the algorithm is chosen once for a canonical
 * CUDA_GEMM_CANON_ROWS rows with no split-K reduction, then used for every T. A row's result
 * then comes from the same kernel with the same summation order whatever the batch holds,
 * which keeps qwen35.h's promise (a sequence's output is bit-identical alone or in a batch).
 *
 * The projections of one layer read the same rows (in_qkv, in_z, in_b, in_a all read the
 * normalised hidden state; q/k/v; gate/up): the staging buffer remembers which fp32 rows it
 * holds and the next matmul on the same rows skips the conversion, as long as no kernel ran
 * and no host copy landed in between (cuda_context.writes) and no matmul wrote over them.
 */

#define CUDA_GEMM_CANON_ROWS 2048
#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/cuda_quant_internal.cuh"

#include <string.h>

__global__ void k_f32_to_bf16_rows(int64_t T, int64_t K, const float *x, int64_t ldx, __nv_bfloat16 *xb) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * K)
        return;
    int64_t t = i / K, c = i - t * K;
    xb[i] = __float2bfloat16_rn(x[t * ldx + c]);
}

__global__ void k_add_bias(int64_t T, int64_t N, const float *bias, float *y, int64_t ldy) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * N)
        return;
    int64_t t = i / N, c = i - t * N;
    y[t * ldy + c] += bias[c];
}

/* y[t, n] (+)= sum_k b[t, k] w[n, k], one thread per output, fp32 accumulation in k order:
 * the path for weights of fewer than CUDA_SMALL_N rows (the joint head's 1-row scorers, the
 * GDN's narrow projections are wider), where cuBLASLt plans made for 2,048 rows were seen to
 * refuse a call (status 15, NOT_SUPPORTED, on an H200 for a 1 x 64 weight at 13 rows), and the
 * fallback when cuBLASLt refuses any call. Chosen by the weight's shape alone, so a row's
 * result never depends on the batch around it. */
__device__ __forceinline__ float to_float_mm(float v) { return v; }
__device__ __forceinline__ float to_float_mm(__nv_bfloat16 v) { return __bfloat162float(v); }

#define CUDA_SMALL_N 16
template <typename TW, typename TB>
__global__ void k_matmul_small(int64_t T, int64_t N, int64_t K, const TW *w, int64_t ldw, const TB *b, int64_t ldb,
                               float *y, int64_t ldy, int accumulate) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * N)
        return;
    const int64_t t = i / N, n = i - t * N;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++)
        acc = fmaf(to_float_mm(b[t * ldb + k]), to_float_mm(w[n * ldw + k]), acc);
    y[t * ldy + n] = accumulate ? y[t * ldy + n] + acc : acc;
}

static void matmul_small(clef_backend *be, int64_t T, int64_t N, int64_t K, const clef_matrix *w, const void *B,
                         int64_t ldb, float *y, int64_t ldy, int accumulate) {
    cuda_context *ctx = cuda_ctx(be);
    const unsigned blocks = cuda_blocks(T * N, 128);
    if (w->type == CLEF_WTYPE_BF16)
        k_matmul_small<<<blocks, 128, 0, ctx->stream>>>(T, N, K, (const __nv_bfloat16 *)w->data, w->ld,
                                                        (const __nv_bfloat16 *)B, ldb, y, ldy, accumulate);
    else
        k_matmul_small<<<blocks, 128, 0, ctx->stream>>>(T, N, K, (const float *)w->data, w->ld, (const float *)B, ldb,
                                                        y, ldy, accumulate);
    CUDA_CHECK_LAUNCH(be, "small matmul kernel");
}

static int ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && a % (uintptr_t)al)
        al /= 2;
    return al;
}

void cuda_gemm_plans_free(cuda_context *ctx) {
    for (int i = 0; i < CUDA_GEMM_PLANS; i++) {
        cuda_gemm_plan *p = &ctx->plans[i];
        if (!p->used)
            continue;
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatmulDescDestroy(p->desc);
        p->used = 0;
    }
}

/* The plan for these layouts, made (and cached) on first use; NULL if cuBLASLt has none. */
static cuda_gemm_plan *gemm_plan(clef_backend *be, int a_type, int m, int n, int k, int lda, int ldb, int ldc,
                                 const void *a, const void *b, const void *c, int beta_one) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_gemm_plan key;
    memset(&key, 0, sizeof key);
    key.used = 1, key.a_type = a_type, key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.align_a = ptr_align(a), key.align_b = ptr_align(b), key.align_c = ptr_align(c), key.beta_one = beta_one;
    int slot = -1;
    for (int i = 0; i < CUDA_GEMM_PLANS; i++) {
        cuda_gemm_plan *p = &ctx->plans[i];
        if (!p->used) {
            if (slot < 0)
                slot = i;
            continue;
        }
        if (p->a_type == key.a_type && p->m == m && p->k == k && p->lda == lda && p->ldb == ldb &&
            p->ldc == ldc && p->align_a == key.align_a && p->align_b == key.align_b && p->align_c == key.align_c &&
            p->beta_one == beta_one) {
            if (p->n != n) { /* same algorithm, this call's row count */
                uint64_t cols = (uint64_t)n;
                cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
                cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
                p->n = n;
            }
            return p;
        }
    }
    if (slot < 0) { /* table full: start over (shapes of one model fit easily) */
        cuda_gemm_plans_free(ctx);
        slot = 0;
    }
    cuda_gemm_plan *p = &ctx->plans[slot];
    *p = key;
    cudaDataType_t ab = a_type == CLEF_WTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    int ok = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p->la, ab, k, m, lda) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p->lb, ab, k, CUDA_GEMM_CANON_ROWS, ldb) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, m, CUDA_GEMM_CANON_ROWS, ldc) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = NULL;
    ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
    if (ok) {
        uint64_t ws = ctx->lt_workspace_bytes;
        uint32_t aa = (uint32_t)key.align_a, ba = (uint32_t)key.align_b, ca = (uint32_t)key.align_c;
        uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
                                             sizeof no_reduction);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ba, sizeof ba);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ca, sizeof ca);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ca, sizeof ca);
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        ok = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found) ==
                 CUBLAS_STATUS_SUCCESS && found > 0;
        if (ok) {
            p->algo = res.algo;
            uint64_t cols = (uint64_t)n;
            cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
            cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
        }
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        if (p->la) cublasLtMatrixLayoutDestroy(p->la);
        if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
        if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
        if (p->desc) cublasLtMatmulDescDestroy(p->desc);
        memset(p, 0, sizeof *p);
        return NULL;
    }
    return p;
}

/* Make sure the bf16 staging buffer holds `bytes`; grows (never shrinks) between forwards. */
static int staging(clef_backend *be, size_t bytes) {
    cuda_context *ctx = cuda_ctx(be);
    if (bytes <= ctx->xb_bytes)
        return CLEF_OK;
    cuda_record(be, cudaStreamSynchronize(ctx->stream), "synchronize before growing the staging buffer");
    cudaFree(ctx->xb);
    cuda_account(be, -(ptrdiff_t)ctx->xb_bytes);
    ctx->xb = NULL, ctx->xb_bytes = 0, ctx->xb_src = NULL;
    size_t want = bytes + bytes / 4; /* head room: the next forward is often a little longer */
    if (cuda_record(be, cudaMalloc((void **)&ctx->xb, want), "bf16 staging buffer") != CLEF_OK)
        return ctx->status;
    ctx->xb_bytes = want;
    cuda_account(be, (ptrdiff_t)want);
    return CLEF_OK;
}

/* bf16 staging bytes for T rows of w's input (F32 weights need none) */
size_t cuda_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    if (clef_wtype_get_traits(w->type)->is_quantized)
        return cuda_quant_workspace_size(be, T, w);
    return w->type == CLEF_WTYPE_BF16 ? sizeof(__nv_bfloat16) * (size_t)(T * w->cols) + 256 : 0;
}

/* A matmul wrote y [T, N] at stride ldy: the staging buffer no longer matches its source if
 * y overlaps those rows (cuBLASLt launches do not count in cuda_context.writes). */
static void invalidate_if_written(cuda_context *ctx, const float *y, int64_t T, int64_t N, int64_t ldy) {
    if (!ctx->xb_src)
        return;
    const float *s0 = ctx->xb_src, *s1 = ctx->xb_src + (ctx->xb_T - 1) * ctx->xb_ldx + ctx->xb_K;
    const float *y1 = y + (T - 1) * ldy + N;
    if (y < s1 && s0 < y1)
        ctx->xb_src = NULL;
}

/* scratch: the caller's planned staging (matmul_workspace_size bytes), or NULL for the
 * backend's own buffer (grown on demand, between forwards in practice). */
void cuda_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w, const float *bias,
                 float *y, int64_t ldy, int accumulate, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    if (clef_wtype_get_traits(w->type)->is_quantized) { /* NF4, FP8, INT8: cuda_quant*.cu */
        cuda_quant_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
        invalidate_if_written(ctx, y, T, w->rows, ldy);
        return;
    }
    const int64_t N = w->rows, K = w->cols;
    const void *B;
    int64_t ldb;
    if (w->type == CLEF_WTYPE_BF16) {
        __nv_bfloat16 *xb = (__nv_bfloat16 *)scratch;
        const int cached = !xb && ctx->xb_src == x && ctx->xb_T == T && ctx->xb_K == K && ctx->xb_ldx == ldx &&
                           ctx->xb_writes == ctx->writes;
        if (cached) {
            xb = ctx->xb;
        } else {
            if (!xb) {
                if (staging(be, sizeof(__nv_bfloat16) * (size_t)(T * K)) != CLEF_OK)
                    return;
                xb = ctx->xb;
            }
            k_f32_to_bf16_rows<<<cuda_blocks(T * K, 256), 256, 0, ctx->stream>>>(T, K, x, ldx, xb);
            CUDA_CHECK_LAUNCH(be, "bf16 conversion kernel");
            if (!scratch)
                ctx->xb_src = x, ctx->xb_T = T, ctx->xb_K = K, ctx->xb_ldx = ldx, ctx->xb_writes = ctx->writes;
        }
        B = xb, ldb = K;
    } else if (w->type == CLEF_WTYPE_F32) {
        B = x, ldb = ldx;
    } else {
        ctx->status = clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA matmul: weight type %s is not supported", clef_wtype_name(w->type));
        return;
    }
    cuda_gemm_plan *p = N < CUDA_SMALL_N ? NULL
                                         : gemm_plan(be, w->type, (int)N, (int)T, (int)K, (int)w->ld, (int)ldb, (int)ldy,
                                                     w->data, B, y, accumulate);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (!p || cublasLtMatmul(ctx->lt, p->desc, &alpha, w->data, p->la, B, p->lb, &beta, y, p->lc, y, p->lc, &p->algo,
                             ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream) != CUBLAS_STATUS_SUCCESS)
        matmul_small(be, T, N, K, w, B, ldb, y, ldy, accumulate); /* nothing was written by a refused call */
    if (bias) {
        k_add_bias<<<cuda_blocks(T * N, 256), 256, 0, ctx->stream>>>(T, N, bias, y, ldy);
        CUDA_CHECK_LAUNCH(be, "bias kernel");
    }
    invalidate_if_written(ctx, y, T, N, ldy);
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename W>
__global__ void k_get_rows(const W *e, int64_t lde, int64_t D, int64_t n, const int32_t *ids, float *y, int64_t ldy) {
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const W *src = e + (int64_t)ids[r] * lde;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < D; c += (int64_t)gridDim.x * blockDim.x)
            y[r * ldy + c] = to_float(src[c]);
    }
}

void cuda_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids, float *y, int64_t ldy) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || n <= 0)
        return;
    dim3 grid(cuda_blocks(e->cols, 256) < 16 ? cuda_blocks(e->cols, 256) : 16, (unsigned)(n < 65535 ? n : 65535));
    if (e->type == CLEF_WTYPE_BF16)
        k_get_rows<__nv_bfloat16><<<grid, 256, 0, ctx->stream>>>((const __nv_bfloat16 *)e->data, e->ld, e->cols, n, ids, y, ldy);
    else
        k_get_rows<float><<<grid, 256, 0, ctx->stream>>>((const float *)e->data, e->ld, e->cols, n, ids, y, ldy);
    CUDA_CHECK_LAUNCH(be, "get_rows kernel");
}

extern "C" int clef_backend_cuda_gemm_ceiling(clef_backend *be, int64_t m, int64_t n, int64_t k, int reps, double *tflops) {
    cuda_context *ctx = cuda_ctx(be);
    void *a = NULL, *b = NULL, *c = NULL;
    int st = CLEF_OK;
    if ((st = cuda_record(be, cudaMalloc(&a, 2 * (size_t)(m * k)), "ceiling A")) != CLEF_OK ||
        (st = cuda_record(be, cudaMalloc(&b, 2 * (size_t)(k * n)), "ceiling B")) != CLEF_OK ||
        (st = cuda_record(be, cudaMalloc(&c, 4 * (size_t)(m * n)), "ceiling C")) != CLEF_OK)
        goto out;
    cuda_fill_normal_bf16(be, a, (size_t)(m * k), 0.02f, 1);
    cuda_fill_normal_bf16(be, b, (size_t)(k * n), 1.0f, 2);
    {
        cuda_gemm_plan *p = gemm_plan(be, CLEF_WTYPE_BF16, (int)m, (int)n, (int)k, (int)k, (int)k, (int)m, a, b, c, 0);
        if (!p) {
            st = clef_fail(CLEF_ERR_INTERNAL, "ceiling: no cuBLASLt algorithm");
            goto out;
        }
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        const float alpha = 1.0f, beta = 0.0f;
        float *ms = (float *)malloc(sizeof(float) * (size_t)reps);
        for (int r = -3; r < reps; r++) {
            cudaEventRecord(e0, ctx->stream);
            cublasLtMatmul(ctx->lt, p->desc, &alpha, a, p->la, b, p->lb, &beta, c, p->lc, c, p->lc, &p->algo,
                           ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream);
            cudaEventRecord(e1, ctx->stream);
            cudaEventSynchronize(e1);
            if (r >= 0)
                cudaEventElapsedTime(&ms[r], e0, e1);
        }
        for (int i = 1; i < reps; i++) /* insertion sort for the median */
            for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
                float t = ms[j];
                ms[j] = ms[j - 1], ms[j - 1] = t;
            }
        *tflops = 2.0 * (double)m * (double)n * (double)k / (ms[reps / 2] * 1e-3) / 1e12;
        free(ms);
        cudaEventDestroy(e0), cudaEventDestroy(e1);
        st = cuda_record(be, cudaGetLastError(), "ceiling GEMM");
    }
out:
    cudaFree(a), cudaFree(b), cudaFree(c);
    return st;
}
