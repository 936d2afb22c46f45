/*
 * cuda_matmul.cu — y (+)= x W^T (+ bias) through cuBLASLt, the embedding lookup, and the bf16
 * staging of a BF16 matmul's input rows.
 *
 * BF16 weights: the fp32 rows of x are rounded to bf16 into the backend's staging buffer (one
 * small kernel), then cuBLASLt runs bf16 x bf16 -> fp32 with fp32 accumulation; accumulate
 * is beta = 1 on the fp32 output. F32 matrices run in plain fp32 (CUBLAS_COMPUTE_32F, no
 * TF32) so the head's small fp32 products stay at fp32 accuracy.
 *
 * Layout: W is [N, K] row-major = a column-major K x N matrix (ld = W.ld); x [T, K] row-major
 * = column-major K x T (ld = ldx); y^T = W^T^T x^T, i.e. D (N x T, ld = ldy) = op_T(A) * B.
 * Plans (layouts + algorithm) are cached per weight shape, leading dimensions and pointer
 * alignment, NOT per row count: the algorithm is chosen once, for a canonical
 * CUDA_GEMM_CANON_ROWS rows with no split-K reduction, then used for every T. A row's result
 * then comes from the same kernel with the same summation order whatever the batch holds,
 * which keeps qwen35.h's promise (a sequence's output is bit-identical alone or in a batch).
 *
 * Choosing the algorithm: cuBLASLt's heuristic ranks up to CUDA_GEMM_TUNE_ALGOS candidates;
 * for a BF16 layout of at least CUDA_GEMM_TUNE_MIN weight elements (gemm_tuning, on by
 * default) each is timed once on random data at the canonical rows (CUDA events, best of two
 * runs of CUDA_GEMM_TUNE_REPS launches) and the fastest is kept, the heuristic's first unless
 * another is faster by CUDA_GEMM_TUNE_MARGIN. The heuristic alone picked poorly for the
 * wide-K shapes (down_proj, K = 17,408: 63% of the ceiling, bench/RESULTS.md run13). The
 * choice is made once per process, device and layout (a table shared by every backend,
 * under a mutex), so all contexts and forks of a process compute the same bits; another
 * process may time a near-tie the other way (rounding-level differences, never beyond the
 * bf16-input bound). Smaller layouts (the fixtures, the head) keep the heuristic's first:
 * there, timing noise would decide. The tuning buffers are allocated for the moment and
 * counted in the backend's peak.
 *
 * The projections of one layer read the same rows (in_qkv, in_z, in_b, in_a all read the
 * normalised hidden state; q/k/v; gate/up): the staging buffer remembers which fp32 rows it
 * holds and the next matmul on the same rows skips the conversion, as long as no kernel ran
 * and no host copy landed in between (cuda_context.writes) and no matmul wrote over them.
 * The ops that produce a matmul's input (RMSNorm, gated RMSNorm, SwiGLU, the attention output
 * gate) write the bf16 copy themselves (cuda_staging_claim / cuda_staging_mark), so the
 * matmul after them converts nothing.
 */

#define CUDA_GEMM_CANON_ROWS 2048
#define CUDA_GEMM_TUNE_ALGOS 16
#define CUDA_GEMM_TUNE_REPS 5
#define CUDA_GEMM_TUNE_MARGIN 0.02f
#define CUDA_GEMM_TUNE_MIN (1 << 17)
#define CUDA_GEMM_TUNE_ANY 8
#define CUDA_GEMM_TUNED_MAX 256
#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/cuda_quant_internal.cuh"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Row blockIdx.y (and every gridDim.y-th after it) of x into xb [T, K]; VEC = 4: K, ldx and x
 * are multiples of 4 floats, so each thread moves one float4 into 4 bf16 (8 bytes). */
template <int VEC>
__global__ void k_f32_to_bf16_rows(int64_t T, int64_t K, const float *x, int64_t ldx, __nv_bfloat16 *xb) {
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (c >= K)
        return;
    for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
        if (VEC == 4) {
            const float4 v = *(const float4 *)(x + t * ldx + c);
            cuda_store_bf16x4(xb + t * K + c, v);
        } else {
            xb[t * K + c] = __float2bfloat16_rn(x[t * ldx + c]);
        }
    }
}

static void convert_rows(clef_backend *be, int64_t T, int64_t K, const float *x, int64_t ldx, __nv_bfloat16 *xb) {
    cuda_context *ctx = cuda_ctx(be);
    const int vec = K % 4 == 0 && ldx % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)xb % 8 == 0 ? 4 : 1;
    dim3 grid(cuda_blocks(K / vec, 256), (unsigned)(T < 65535 ? T : 65535));
    if (vec == 4)
        k_f32_to_bf16_rows<4><<<grid, 256, 0, ctx->stream>>>(T, K, x, ldx, xb);
    else
        k_f32_to_bf16_rows<1><<<grid, 256, 0, ctx->stream>>>(T, K, x, ldx, xb);
    CUDA_CHECK_LAUNCH(be, "bf16 conversion kernel");
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

/* The choices made so far in this process: the layout (a plan's key fields and the device)
 * and what tune_plan found for it. */
typedef struct gemm_tuned {
    int device;
    cuda_gemm_plan key; /* key fields only (no descriptors) */
} gemm_tuned;
static gemm_tuned g_tuned[CUDA_GEMM_TUNED_MAX];
static int g_n_tuned;
static pthread_mutex_t g_tuned_lock = PTHREAD_MUTEX_INITIALIZER;

static int same_layout(const cuda_gemm_plan *a, const cuda_gemm_plan *b) {
    return a->a_type == b->a_type && a->m == b->m && a->k == b->k && a->lda == b->lda && a->ldb == b->ldb &&
           a->ldc == b->ldc && a->align_a == b->align_a && a->align_b == b->align_b && a->align_c == b->align_c &&
           a->beta_one == b->beta_one;
}

/* ms per launch of one algorithm on the tuning buffers (best of two runs of
 * CUDA_GEMM_TUNE_REPS launches after one warm-up run), or -1 when cuBLASLt refuses it. */
static float time_algo(clef_backend *be, const cuda_gemm_plan *p, const void *a, const void *b, void *c,
                       const cublasLtMatmulAlgo_t *algo, cudaEvent_t e0, cudaEvent_t e1) {
    cuda_context *ctx = cuda_ctx(be);
    const float alpha = 1.0f, beta = p->beta_one ? 1.0f : 0.0f;
    float best = -1.0f;
    for (int trial = 0; trial < 3; trial++) {
        int ok = cudaEventRecord(e0, ctx->stream) == cudaSuccess;
        for (int r = 0; r < CUDA_GEMM_TUNE_REPS && ok; r++)
            ok = cublasLtMatmul(ctx->lt, p->desc, &alpha, a, p->la, b, p->lb, &beta, c, p->lc, c, p->lc, algo,
                                ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream) == CUBLAS_STATUS_SUCCESS;
        float t = 0.0f;
        ok = ok && cudaEventRecord(e1, ctx->stream) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
             cudaEventElapsedTime(&t, e0, e1) == cudaSuccess;
        if (!ok) {
            (void)cudaGetLastError();
            return -1.0f;
        }
        if (trial > 0 && (best < 0.0f || t < best))
            best = t;
    }
    return best / CUDA_GEMM_TUNE_REPS;
}

static int algo_config(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;
    size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS ? (int)v
                                                                                                            : -1;
}

/* Time the heuristic's candidates on random data at the plan's canonical layouts (B and C of
 * CUDA_GEMM_CANON_ROWS columns, allocated for the moment) and keep the fastest in p->algo.
 * A candidate cuBLASLt refuses is skipped; with no buffers the heuristic's first stays.
 * any / n_any: the candidates with every reduction scheme allowed (split-K, ...): timed for
 * the report only (their per-tile split of K may follow the row count). */
static void tune_plan(clef_backend *be, cuda_gemm_plan *p, const void *a, const cublasLtMatmulHeuristicResult_t *res,
                      int found, const cublasLtMatmulHeuristicResult_t *any, int n_any) {
    cuda_context *ctx = cuda_ctx(be);
    const size_t b_bytes = 2 * (size_t)p->k * CUDA_GEMM_CANON_ROWS, c_bytes = 4 * (size_t)p->ldc * CUDA_GEMM_CANON_ROWS;
    void *b = NULL, *c = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (cudaMalloc(&b, b_bytes) != cudaSuccess || cudaMalloc(&c, c_bytes) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        (void)cudaGetLastError(); /* no room to tune: the heuristic's choice stays */
        goto out;
    }
    cuda_account(be, (ptrdiff_t)(b_bytes + c_bytes));
    cuda_fill_normal_bf16(be, b, b_bytes / 2, 1.0f, 0x7475u + (uint64_t)p->k);
    cudaMemsetAsync(c, 0, c_bytes, ctx->stream);
    {
        float ms[CUDA_GEMM_TUNE_ALGOS];
        int best = -1;
        for (int i = 0; i < found; i++) {
            ms[i] = time_algo(be, p, a, b, c, &res[i].algo, e0, e1);
            if (ms[i] >= 0.0f) {
                p->n_candidates++;
                if (best < 0 || ms[i] < ms[best])
                    best = i;
            }
        }
        /* the heuristic's first unless another beats it by the margin */
        if (best > 0 && ms[0] >= 0.0f && ms[best] >= ms[0] * (1.0f - CUDA_GEMM_TUNE_MARGIN))
            best = 0;
        p->first_ms = ms[0];
        if (best >= 0)
            p->algo = res[best].algo, p->chosen = best, p->chosen_ms = ms[best];
        for (int i = 0; i < n_any; i++) {
            const float t = time_algo(be, p, a, b, c, &any[i].algo, e0, e1);
            if (t >= 0.0f && (p->any_ms <= 0.0f || t < p->any_ms))
                p->any_ms = t, p->any_splitk = algo_config(&any[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                p->any_scheme = algo_config(&any[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
        }
    }
    cuda_account(be, -(ptrdiff_t)(b_bytes + c_bytes));
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (b || c)
        cudaStreamSynchronize(ctx->stream); /* the tuning launches are done with b and c */
    cudaFree(b), cudaFree(c);
}

/* The plan for these layouts, made (and cached) on first use; NULL if cuBLASLt has none.
 * tune: time the candidates (BF16 layouts of backends with gemm_tuning on). */
static cuda_gemm_plan *gemm_plan(clef_backend *be, int a_type, int m, int n, int k, int lda, int ldb, int ldc,
                                 const void *a, const void *b, const void *c, int beta_one, int tune) {
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
    /* a new plan may time candidates (allocates, waits): made by a direct run first */
    if (cuda_capture_refuse(be, "a new GEMM layout"))
        return NULL;
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
        cublasLtMatmulHeuristicResult_t res[CUDA_GEMM_TUNE_ALGOS];
        int found = 0;
        const int want =
            tune && a_type == CLEF_WTYPE_BF16 && (int64_t)m * k >= CUDA_GEMM_TUNE_MIN ? CUDA_GEMM_TUNE_ALGOS : 1;
        ok = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, want, res, &found) ==
                 CUBLAS_STATUS_SUCCESS && found > 0;
        if (ok) {
            p->algo = p->algo_first = res[0].algo;
            if (want > 1 && found > 1) { /* once per process, device and layout */
                pthread_mutex_lock(&g_tuned_lock);
                int t = 0;
                while (t < g_n_tuned && !(g_tuned[t].device == ctx->device && same_layout(&g_tuned[t].key, p)))
                    t++;
                if (t < g_n_tuned) {
                    const cuda_gemm_plan *q = &g_tuned[t].key;
                    p->algo = q->algo, p->n_candidates = q->n_candidates, p->chosen = q->chosen;
                    p->first_ms = q->first_ms, p->chosen_ms = q->chosen_ms, p->any_ms = q->any_ms;
                    p->any_splitk = q->any_splitk, p->any_scheme = q->any_scheme;
                } else {
                    cublasLtMatmulHeuristicResult_t any[CUDA_GEMM_TUNE_ANY];
                    int n_any = 0;
                    uint32_t all = CUBLASLT_REDUCTION_SCHEME_MASK;
                    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &all,
                                                         sizeof all);
                    if (cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref,
                                                       CUDA_GEMM_TUNE_ANY, any, &n_any) != CUBLAS_STATUS_SUCCESS)
                        n_any = 0;
                    tune_plan(be, p, a, res, found, any, n_any);
                    if (g_n_tuned < CUDA_GEMM_TUNED_MAX && p->n_candidates > 0) {
                        g_tuned[g_n_tuned].device = ctx->device;
                        g_tuned[g_n_tuned].key = *p;
                        g_n_tuned++;
                    }
                }
                pthread_mutex_unlock(&g_tuned_lock);
            }
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
    if (cuda_capture_refuse(be, "growing the bf16 staging buffer"))
        return ctx->status;
    ctx->graph_epoch++; /* recordings that use the old buffer are stale */
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

/* bf16 staging bytes for T rows of w's input (F32 weights need none); a quantized w: the
 * scratch of the path the settings take now, which are noted (a scratch planned by this
 * answer is then never asked for more: cuda_quant_scratch) */
size_t cuda_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    if (clef_wtype_get_traits(w->type)->is_quantized) {
        cuda_quant_state *st = cuda_quant_state_of(be);
        if (st)
            cuda_quant_note_paths(st);
        return cuda_quant_workspace_size(be, T, w);
    }
    return w->type == CLEF_WTYPE_BF16 ? sizeof(__nv_bfloat16) * (size_t)(T * w->cols) + 256 : 0;
}

/* A matmul wrote y [T, N] at stride ldy: the staging buffer no longer matches its source if
 * y overlaps those rows (cuBLASLt launches do not count in cuda_context.writes). */
static void invalidate_if_written(cuda_context *ctx, const float *y, int64_t T, int64_t N, int64_t ldy) {
    if (!ctx->xb_src)
        return;
    const float *s0 = ctx->xb_src;
    const float *s1 = ctx->xb_span > 0 ? s0 + ctx->xb_span : s0 + (ctx->xb_T - 1) * ctx->xb_ldx + ctx->xb_K;
    const float *y1 = y + (T - 1) * ldy + N;
    if (y < s1 && s0 < y1)
        ctx->xb_src = NULL;
}

__nv_bfloat16 *cuda_staging_claim(clef_backend *be, int64_t n) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || n <= 0 || sizeof(__nv_bfloat16) * (size_t)n > ctx->xb_bytes)
        return NULL;
    ctx->xb_src = NULL; /* the producer's kernel is about to write over it */
    return ctx->xb;
}

void *cuda_staging_take(clef_backend *be, size_t bytes) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || staging(be, bytes) != CLEF_OK)
        return NULL;
    ctx->xb_src = NULL; /* the caller's kernel is about to write over it */
    return ctx->xb;
}

void cuda_staging_mark(clef_backend *be, const float *src, int64_t n) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return;
    ctx->xb_src = src, ctx->xb_span = n, ctx->xb_T = ctx->xb_K = ctx->xb_ldx = 0, ctx->xb_writes = ctx->writes;
}

/* The staging's bf16 copy of x [T, K] at stride ldx, or NULL when it holds other values. */
static const __nv_bfloat16 *staged_rows(const cuda_context *ctx, int64_t T, const float *x, int64_t ldx, int64_t K) {
    if (!ctx->xb_src || ctx->xb_writes != ctx->writes)
        return NULL;
    if (ctx->xb_span > 0) /* a producer's contiguous values: any contiguous rows inside them */
        return ldx == K && x >= ctx->xb_src && x + T * K <= ctx->xb_src + ctx->xb_span && (x - ctx->xb_src) % 128 == 0
                   ? ctx->xb + (x - ctx->xb_src) /* 256-byte aligned like the buffer: the same plans */
                   : NULL;
    return ctx->xb_src == x && ctx->xb_T == T && ctx->xb_K == K && ctx->xb_ldx == ldx ? ctx->xb : NULL;
}

/* scratch: the caller's planned staging (T x K bf16), or NULL for the backend's own buffer
 * (grown on demand, between forwards in practice; remembered, so the next matmul on the same
 * rows converts nothing). */
const __nv_bfloat16 *cuda_matmul_bf16_rows(clef_backend *be, int64_t T, const float *x, int64_t ldx, int64_t K,
                                           void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    const __nv_bfloat16 *staged = scratch ? NULL : staged_rows(ctx, T, x, ldx, K);
    if (staged)
        return staged;
    __nv_bfloat16 *xb = (__nv_bfloat16 *)scratch;
    if (!xb) {
        if (staging(be, sizeof(__nv_bfloat16) * (size_t)(T * K)) != CLEF_OK)
            return NULL;
        xb = ctx->xb;
    }
    convert_rows(be, T, K, x, ldx, xb);
    if (!scratch)
        ctx->xb_src = x, ctx->xb_T = T, ctx->xb_K = K, ctx->xb_ldx = ldx, ctx->xb_span = 0, ctx->xb_writes = ctx->writes;
    return xb;
}

/* scratch: the caller's planned staging (matmul_workspace_size bytes), or NULL for the
 * backend's own buffer (grown on demand, between forwards in practice). */
void cuda_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w, const float *bias,
                 float *y, int64_t ldy, int accumulate, void *scratch) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    /* the quantized hand-off stays valid across a matmul that writes elsewhere (cuda_quant_stage.cu) */
    const int qstage_valid = cuda_qstage_valid(be);
    if (clef_wtype_get_traits(w->type)->is_quantized) { /* NF4, FP8, INT8: cuda_quant*.cu */
        cuda_quant_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
        invalidate_if_written(ctx, y, T, w->rows, ldy);
        cuda_qstage_after_matmul(be, qstage_valid, y, T, w->rows, ldy, scratch,
                                 scratch ? cuda_quant_workspace_size(be, T, w) : 0);
        return;
    }
    const int64_t N = w->rows, K = w->cols;
    const void *B;
    int64_t ldb;
    if (w->type == CLEF_WTYPE_BF16) {
        if (!(B = cuda_matmul_bf16_rows(be, T, x, ldx, K, scratch)))
            return;
        ldb = K;
    } else if (w->type == CLEF_WTYPE_F32) {
        B = x, ldb = ldx;
    } else {
        ctx->status = clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA matmul: weight type %s is not supported", clef_wtype_name(w->type));
        return;
    }
    cuda_gemm_plan *p = N < CUDA_SMALL_N ? NULL
                                         : gemm_plan(be, w->type, (int)N, (int)T, (int)K, (int)w->ld, (int)ldb, (int)ldy,
                                                     w->data, B, y, accumulate, ctx->gemm_tuning);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    int done = 0;
    if (p) /* the chosen algorithm, else the heuristic's first (a refused call writes nothing) */
        done = cublasLtMatmul(ctx->lt, p->desc, &alpha, w->data, p->la, B, p->lb, &beta, y, p->lc, y, p->lc, &p->algo,
                              ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream) == CUBLAS_STATUS_SUCCESS ||
               cublasLtMatmul(ctx->lt, p->desc, &alpha, w->data, p->la, B, p->lb, &beta, y, p->lc, y, p->lc,
                              &p->algo_first, ctx->lt_workspace, ctx->lt_workspace_bytes,
                              ctx->stream) == CUBLAS_STATUS_SUCCESS;
    if (!done)
        matmul_small(be, T, N, K, w, B, ldb, y, ldy, accumulate);
    if (bias) {
        k_add_bias<<<cuda_blocks(T * N, 256), 256, 0, ctx->stream>>>(T, N, bias, y, ldy);
        CUDA_CHECK_LAUNCH(be, "bias kernel");
    }
    invalidate_if_written(ctx, y, T, N, ldy);
    cuda_qstage_after_matmul(be, qstage_valid, y, T, N, ldy, scratch, scratch ? cuda_matmul_workspace_size(be, T, w) : 0);
}

/* Bench support: the timed plans of this backend, one table row each. */
extern "C" void clef_backend_cuda_gemm_tuning_report(clef_backend *be, FILE *out) {
    cuda_context *ctx = cuda_ctx(be);
    fprintf(out, "| weight rows x cols | beta | candidates | heuristic's first ms | chosen (rank, algo id, tile id) | "
                 "chosen ms | gain | best with split-K allowed ms (split-K, scheme) |\n");
    fprintf(out, "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < CUDA_GEMM_PLANS; i++) {
        const cuda_gemm_plan *p = &ctx->plans[i];
        if (!p->used || !p->n_candidates)
            continue;
        fprintf(out, "| %dx%d | %d | %d | %.4f | #%d, %d, %d | %.4f | %.1f%% | %.4f (%d, %d) |\n", p->m, p->k, p->beta_one,
                p->n_candidates, p->first_ms, p->chosen, algo_config(&p->algo, CUBLASLT_ALGO_CONFIG_ID),
                algo_config(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID), p->chosen_ms,
                p->first_ms > 0 ? 100.0 * (p->first_ms - p->chosen_ms) / p->first_ms : 0.0, p->any_ms, p->any_splitk,
                p->any_scheme);
    }
}

extern "C" void clef_backend_cuda_set_gemm_tuning(clef_backend *be, int on) {
    cuda_ctx(be)->gemm_tuning = on != 0;
    cuda_ctx(be)->graph_epoch++;
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
        cuda_gemm_plan *p = gemm_plan(be, CLEF_WTYPE_BF16, (int)m, (int)n, (int)k, (int)k, (int)k, (int)m, a, b, c, 0, 0);
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
