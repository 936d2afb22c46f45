/*
 * cuda_quant.cu — the CUDA backend's quantized formats, common parts: which formats the
 * backend runs, the matmul dispatch to each format's file (cuda_quant_fp8.cu,
 * cuda_quant_int8.cu, cuda_quant_nf4.cu; their wgmma GEMMs in cuda_quant_wgmma.cu, NF4's fused
 * GEMM in cuda_quant_nf4_gemm.cu, the activation quantizers in cuda_quant_act.cu), the
 * per-backend state (scratch, cuBLASLt plans of the FP8, INT8 and exact-FP8 BF16 GEMMs, the
 * wgmma and NF4 GEMM choices) and the scaling epilogues those GEMMs share.
 */
#include "backend/cuda/cuda_quant_internal.cuh"

extern "C" {
#include "core/log.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cuda_supports_format(clef_backend *be, clef_wtype t) {
    (void)be;
    return t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16 || t == CLEF_WTYPE_NF4 || t == CLEF_WTYPE_FP8_E4M3 ||
           t == CLEF_WTYPE_INT8_CONVROT;
}

/* A choice named by environment variable `var` (docs/cli.md, "Environment"): the value paired
 * with its text in names, else dflt (unset, or not a name: then a warning naming the variable
 * and the names it takes, so a typo does not pass for the default unseen). */
typedef struct env_name { const char *name; int value; } env_name;
static int env_choice(const char *var, const env_name *names, int n, int dflt) {
    const char *v = getenv(var);
    if (!v)
        return dflt;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i].name))
            return names[i].value;
    char known[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i].name);
    clef_log(CLEF_LOG_WARN, "%s=%s is not one of: %s; the default is used", var, v, known);
    return dflt;
}

cuda_quant_state *cuda_quant_state_of(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    if (!ctx->quant) {
        ctx->quant = (cuda_quant_state *)calloc(1, sizeof(cuda_quant_state));
        if (!ctx->quant)
            CUDA_QUANT_FAIL(be, CLEF_ERR_OUT_OF_MEMORY, "CUDA quantized matmul: out of host memory");
        else { /* the GEMMs by default (cuda_quant_internal.cuh says why) */
            static const env_name fp8_exact[] = {{"cublaslt", CLEF_CUDA_WGMMA_OFF},
                                                 {"auto", CLEF_CUDA_WGMMA_AUTO},
                                                 {"mixed", CLEF_CUDA_WGMMA_FP8_MIXED},
                                                 {"mixed128", CLEF_CUDA_WGMMA_FP8_MIXED_128},
                                                 {"mixed-d1", CLEF_CUDA_WGMMA_FP8_MIXED_D1},
                                                 {"mixed-d3", CLEF_CUDA_WGMMA_FP8_MIXED_D3},
                                                 {"mixed-mc", CLEF_CUDA_WGMMA_FP8_MIXED_MC},
                                                 {"mixed-t256", CLEF_CUDA_WGMMA_FP8_MIXED_T256},
                                                 {"mixed-t256mc", CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC},
                                                 {"wgmma", CLEF_CUDA_WGMMA_256}};
            static const env_name nf4[] = {{"dequant", CLEF_CUDA_NF4_DEQUANT},
                                           {"fused", CLEF_CUDA_NF4_FUSED},
                                           {"run15", CLEF_CUDA_NF4_RUN15}};
            ctx->quant->int8_wgmma = CUDA_QUANT_INT8_WGMMA_DEFAULT;
            ctx->quant->fp8_exact_wgmma = env_choice("CLEF_CUDA_FP8_EXACT_GEMM", fp8_exact, 10,
                                                     CUDA_QUANT_FP8_EXACT_WGMMA_DEFAULT);
            ctx->quant->nf4_gemm = env_choice("CLEF_CUDA_NF4_GEMM", nf4, 3, CUDA_QUANT_NF4_DEFAULT);
            /* the FP8 path: exact by default (cuda_quant_internal.cuh says why); the fp8 tensor
             * cores or the promoted kernel for speed, as their setters choose them */
            static const env_name fp8_path[] = {{"exact", 0},
                                                {"tensor-cores", -1},
                                                {"tensor-cores-fast", -2},
                                                {"promoted128", CLEF_CUDA_FP8_PROMOTE_128},
                                                {"promoted32", CLEF_CUDA_FP8_PROMOTE_32}};
            const int fp8 = env_choice("CLEF_CUDA_FP8", fp8_path, 5, 0);
            ctx->quant->fp8_tensor_cores = fp8 == -1   ? CLEF_CUDA_FP8_TC_PROMOTED
                                           : fp8 == -2 ? CLEF_CUDA_FP8_TC_FAST
                                                       : CLEF_CUDA_FP8_TC_OFF;
            ctx->quant->fp8_promoted = fp8 == CLEF_CUDA_FP8_PROMOTE_128 || fp8 == CLEF_CUDA_FP8_PROMOTE_32
                                           ? fp8
                                           : CUDA_QUANT_FP8_PROMOTED_DEFAULT;
            const char *fused = getenv("CLEF_CUDA_FUSED_QUANT"); /* "0": the standalone quantizers only */
            ctx->quant->fused = !(fused && !strcmp(fused, "0"));
        }
    }
    return ctx->quant;
}

void cuda_quant_inherit(clef_backend *child, clef_backend *parent) {
    const cuda_quant_state *p = cuda_ctx(parent)->quant;
    cuda_quant_state *c = p ? cuda_quant_state_of(child) : NULL;
    if (!c) /* the parent never set up its quantized matmuls: the child keeps the defaults */
        return;
    c->fp8_tensor_cores = p->fp8_tensor_cores, c->fp8_force_epilogue = p->fp8_force_epilogue;
    c->convrot_exact = p->convrot_exact, c->int8_wgmma = p->int8_wgmma;
    c->fp8_exact_wgmma = p->fp8_exact_wgmma, c->nf4_gemm = p->nf4_gemm;
    c->fp8_promoted = p->fp8_promoted, c->fused = p->fused, c->fp8_slice_bytes = p->fp8_slice_bytes;
}

cuda_quant_paths cuda_quant_paths_of(const cuda_quant_state *st) {
    cuda_quant_paths p;
    memset(&p, 0, sizeof p);
    p.fp8_tc = st->fp8_tensor_cores != 0;
    p.fp8_epilogue = p.fp8_tc && st->fp8_force_epilogue;
    p.fp8_promoted = !p.fp8_tc && st->fp8_promoted != CLEF_CUDA_FP8_PROMOTE_OFF;
    const int g = st->fp8_exact_wgmma;
    p.fp8_exact_gemm = cuda_fp8_exact_is_mixed(g)   ? CUDA_FP8_EXACT_MIXED
                       : g != CLEF_CUDA_WGMMA_OFF ? CUDA_FP8_EXACT_BF16_WGMMA
                                                  : CUDA_FP8_EXACT_CUBLASLT;
    p.int8_wgmma = st->int8_wgmma != CLEF_CUDA_WGMMA_OFF;
    p.nf4_fused = st->nf4_gemm == CLEF_CUDA_NF4_FUSED;
    p.fp8_slice_bytes = st->fp8_slice_bytes ? st->fp8_slice_bytes : CUDA_QUANT_SLICE_BYTES;
    return p;
}

void cuda_quant_note_paths(cuda_quant_state *st) {
    const cuda_quant_paths now = cuda_quant_paths_of(st);
    for (int i = 0; i < st->n_seen; i++)
        if (!memcmp(&st->seen[i], &now, sizeof now))
            return;
    if (st->n_seen == CUDA_QUANT_PATHS_SEEN) { /* never for a model's settings: trust no caller's scratch */
        st->seen_overflow = 1;
        return;
    }
    st->seen[st->n_seen++] = now;
}

static void qplans_free(cuda_quant_state *st) {
    for (int i = 0; i < CUDA_QPLANS; i++) {
        cuda_qplan *p = &st->plans[i];
        if (!p->used)
            continue;
        p->used = 0;
        if (p->refused)
            continue;
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatmulDescDestroy(p->desc);
        p->used = 0;
    }
}

void cuda_quant_free(cuda_context *ctx) {
    cuda_quant_state *st = ctx->quant;
    if (!st)
        return;
    qplans_free(st);
    cuda_qstage_free(st);
    cudaFree(st->scratch);
    cudaFree(st->extra);
    for (int i = 0; i < 2; i++)
        if (st->timer[i])
            cudaEventDestroy(st->timer[i]);
    free(st);
    ctx->quant = NULL;
}

/* Grow one of the state's own buffers to hold `bytes` (queued work may still read the old
 * one: synchronize first); 0 on failure (status recorded). */
static int own_buffer(clef_backend *be, void **buf, size_t *have, size_t bytes, const char *what) {
    if (bytes <= *have)
        return 1;
    cuda_context *ctx = cuda_ctx(be);
    if (cuda_capture_refuse(be, "growing the quantized-matmul scratch"))
        return 0;
    ctx->graph_epoch++; /* recordings that use the old buffer are stale */
    cuda_record(be, cudaStreamSynchronize(ctx->stream), "synchronize before growing the quantized-matmul scratch");
    cudaFree(*buf);
    cuda_account(be, -(ptrdiff_t)*have);
    *buf = NULL, *have = 0;
    size_t want = bytes + bytes / 4; /* head room for a slightly longer next forward */
    if (cuda_record(be, cudaMalloc(buf, want), what) != CLEF_OK)
        return 0;
    *have = want;
    cuda_account(be, (ptrdiff_t)want);
    return 1;
}

static size_t bytes_for(const cuda_quant_paths *p, int64_t T, const clef_matrix *w) {
    switch (w->type) {
    case CLEF_WTYPE_FP8_E4M3: return cuda_fp8_workspace_size(p, T, w);
    case CLEF_WTYPE_INT8_CONVROT: return cuda_int8_workspace_size(p, T, w);
    case CLEF_WTYPE_NF4: return cuda_nf4_workspace_size(p, T, w);
    default: return 0;
    }
}

/* A caller sized its scratch by asking matmul_workspace_size, under the settings of that
 * moment, which the state noted: the least size over those is what any caller has. None
 * noted: the caller asked another backend (the contract: under the settings now). */
size_t cuda_quant_planned_bytes(clef_backend *be, int64_t T, const clef_matrix *w) {
    const cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st || st->seen_overflow)
        return 0;
    if (!st->n_seen) {
        const cuda_quant_paths now = cuda_quant_paths_of(st);
        return bytes_for(&now, T, w);
    }
    size_t least = SIZE_MAX;
    for (int i = 0; i < st->n_seen; i++) {
        const size_t b = bytes_for(&st->seen[i], T, w);
        least = b < least ? b : least;
    }
    return least;
}

int cuda_quant_scratch(clef_backend *be, void *scratch, int64_t T, const clef_matrix *w, size_t need,
                       cuda_qscratch *out) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    out->base = NULL, out->room = 0;
    if (!st)
        return 0;
    if (scratch) {
        const size_t planned = cuda_quant_planned_bytes(be, T, w);
        if (need <= planned) {
            out->base = (char *)scratch, out->room = planned;
            return 1;
        }
    }
    /* no scratch given, or a setting changed since the caller planned it: ours, grown */
    if (!own_buffer(be, &st->scratch, &st->scratch_bytes, need, "quantized-matmul scratch"))
        return 0;
    out->base = (char *)st->scratch, out->room = st->scratch_bytes;
    return 1;
}

void *cuda_quant_scratch_part(clef_backend *be, const cuda_qscratch *qs, size_t off, size_t bytes) {
    if (off + bytes <= qs->room)
        return qs->base + off;
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st || !own_buffer(be, &st->extra, &st->extra_bytes, bytes, "quantized-matmul scratch (second buffer)"))
        return NULL;
    return st->extra;
}

static int ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && a % (uintptr_t)al)
        al /= 2;
    return al;
}

static int qplan_build(clef_backend *be, cuda_qplan *p) {
    cuda_context *ctx = cuda_ctx(be);
    const int is_int8 = p->kind == CUDA_QPLAN_INT8, is_bf16 = p->kind == CUDA_QPLAN_BF16;
    cudaDataType_t ab = is_int8 ? CUDA_R_8I : is_bf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
    cudaDataType_t cd = is_int8 ? CUDA_R_32I : CUDA_R_32F;
    cublasComputeType_t compute = is_int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    int ok = cublasLtMatmulDescCreate(&p->desc, compute, cd) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN) == CUBLAS_STATUS_SUCCESS;
    const int outer = p->kind == CUDA_QPLAN_FP8_OUTER || p->kind == CUDA_QPLAN_FP8_OUTER_FAST;
    const int fast = p->kind == CUDA_QPLAN_FP8_OUTER_FAST || p->kind == CUDA_QPLAN_FP8_PLAIN_FAST;
    if (outer) {
        int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode) == CUBLAS_STATUS_SUCCESS;
        ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode) == CUBLAS_STATUS_SUCCESS;
        /* the heuristic judges a scaled matmul with its scale pointers set: stand-ins until
         * each call sets the real ones (never read by the heuristic) */
        const void *stand_in = ctx->lt_workspace;
        ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &stand_in, sizeof stand_in) == CUBLAS_STATUS_SUCCESS;
        ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &stand_in, sizeof stand_in) == CUBLAS_STATUS_SUCCESS;
    }
    if (!is_int8 && !is_bf16) {
        /* 0: cuBLASLt's periodic promotion of the fp8 partial sums to fp32 (CLEF_CUDA_FP8_TC_PROMOTED);
         * 1: the sums kept in the tensor cores (CLEF_CUDA_FP8_TC_FAST) */
        int8_t fast_accum = (int8_t)fast;
        ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                  sizeof fast_accum) == CUBLAS_STATUS_SUCCESS;
    }
    ok = ok && cublasLtMatrixLayoutCreate(&p->la, ab, p->k, p->m, p->lda) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p->lb, ab, p->k, CUDA_QUANT_CANON_ROWS, p->ldb) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatrixLayoutCreate(&p->lc, cd, p->m, CUDA_QUANT_CANON_ROWS, p->ldc) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = NULL;
    ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
    if (ok) {
        uint64_t ws = ctx->lt_workspace_bytes;
        uint32_t aa = (uint32_t)p->align_a, ba = (uint32_t)p->align_b, ca = (uint32_t)p->align_c;
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
        cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res,
                                                           &found);
        ok = hs == CUBLAS_STATUS_SUCCESS && found > 0;
        if (!ok)
            clef_log(outer ? CLEF_LOG_WARN : CLEF_LOG_INFO, "CUDA: cuBLASLt has no %s algorithm for [%d x %d] x %d rows, ldc %d (status %d)",
                     outer ? "FP8 outer-vector" : p->kind == CUDA_QPLAN_INT8 ? "int8"
                     : is_bf16 ? "bf16 (exact FP8)" : "FP8",
                     p->m, p->k, CUDA_QUANT_CANON_ROWS, p->ldc, (int)hs);
        if (ok)
            p->algo = res.algo;
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    return ok;
}

static void qplan_set_rows(cuda_qplan *p, int n) {
    uint64_t cols = (uint64_t)n;
    cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
    cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
    p->n = n;
}

cuda_qplan *cuda_qplan_get(clef_backend *be, int kind, int m, int n, int k, int lda, int ldb, int ldc,
                           const void *a, const void *b, const void *c, int beta_one) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return NULL;
    cuda_qplan key;
    memset(&key, 0, sizeof key);
    key.used = 1, key.kind = kind, key.m = m, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.align_a = ptr_align(a), key.align_b = ptr_align(b), key.align_c = ptr_align(c), key.beta_one = beta_one;
    int slot = -1;
    for (int i = 0; i < CUDA_QPLANS; i++) {
        cuda_qplan *p = &st->plans[i];
        if (!p->used) {
            if (slot < 0)
                slot = i;
            continue;
        }
        if (p->kind == kind && p->m == m && p->k == k && p->lda == lda && p->ldb == ldb && p->ldc == ldc &&
            p->align_a == key.align_a && p->align_b == key.align_b && p->align_c == key.align_c &&
            p->beta_one == beta_one) {
            if (p->refused)
                return NULL;
            if (p->n != n)
                qplan_set_rows(p, n); /* same algorithm, this call's row count */
            return p;
        }
    }
    if (slot < 0) { /* table full: start over (the shapes of one model fit easily) */
        qplans_free(st);
        slot = 0;
    }
    cuda_qplan *p = &st->plans[slot];
    *p = key;
    if (!qplan_build(be, p)) {
        if (p->la) cublasLtMatrixLayoutDestroy(p->la);
        if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
        if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
        if (p->desc) cublasLtMatmulDescDestroy(p->desc);
        memset(p, 0, sizeof *p);
        *p = key;
        p->la = p->lb = p->lc = NULL, p->desc = NULL;
        p->refused = 1; /* remembered, so the heuristic is not asked again for these layouts */
        return NULL;
    }
    qplan_set_rows(p, n);
    return p;
}

/* ---- epilogues ------------------------------------------------------------------------------ */

/* grid: x over the N output features, y over rows (grid-stride): no 64-bit division */
__global__ void k_epilogue_i32(int64_t T, int64_t N, const int32_t *acc, int64_t ldacc, const float *sx,
                               const float *sw, const float *bias, float *y, int64_t ldy, int accumulate) {
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    const float swn = sw[n], bn = bias ? bias[n] : 0.0f;
    for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
        float v = __fmul_rn(__int2float_rn(acc[t * ldacc + n]), __fmul_rn(sx[t], swn));
        if (bias)
            v = __fadd_rn(v, bn);
        float *out = y + t * ldy + n;
        *out = accumulate ? __fadd_rn(*out, v) : v;
    }
}

__global__ void k_epilogue_f32(int64_t T, int64_t N, const float *acc, int64_t ldacc, const float *sx,
                               const float *sw, const float *bias, float *y, int64_t ldy, int accumulate) {
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    const float swn = sw[n], bn = bias ? bias[n] : 0.0f;
    for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
        float v = __fmul_rn(__fmul_rn(acc[t * ldacc + n], sx[t]), swn);
        if (bias)
            v = __fadd_rn(v, bn);
        float *out = y + t * ldy + n;
        *out = accumulate ? __fadd_rn(*out, v) : v;
    }
}

dim3 cuda_quant_rows_grid(int64_t T, int64_t N, int threads) {
    return dim3(cuda_blocks(N, threads), (unsigned)(T < 65535 ? T : 65535));
}

void cuda_quant_epilogue_i32(clef_backend *be, int64_t T, int64_t N, const int32_t *acc, int64_t ldacc,
                             const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                             int accumulate) {
    k_epilogue_i32<<<cuda_quant_rows_grid(T, N, 256), 256, 0, cuda_ctx(be)->stream>>>(T, N, acc, ldacc, sx, sw, bias, y, ldy,
                                                                               accumulate);
    CUDA_CHECK_LAUNCH(be, "int8 scaling epilogue kernel");
}

void cuda_quant_epilogue_f32(clef_backend *be, int64_t T, int64_t N, const float *acc, int64_t ldacc,
                             const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                             int accumulate) {
    k_epilogue_f32<<<cuda_quant_rows_grid(T, N, 256), 256, 0, cuda_ctx(be)->stream>>>(T, N, acc, ldacc, sx, sw, bias, y, ldy,
                                                                               accumulate);
    CUDA_CHECK_LAUNCH(be, "fp8 scaling epilogue kernel");
}

/* ---- dispatch ------------------------------------------------------------------------------- */

void cuda_quant_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                       const float *bias, float *y, int64_t ldy, int accumulate, void *scratch) {
    if (cuda_ctx(be)->status != CLEF_OK || T <= 0)
        return;
    if (w->ld != w->cols) {
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED, "CUDA matmul: %s matrix with ld %lld != cols %lld",
                        clef_wtype_name(w->type), (long long)w->ld, (long long)w->cols);
        return;
    }
    switch (w->type) {
    case CLEF_WTYPE_FP8_E4M3:
        cuda_fp8_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
        break;
    case CLEF_WTYPE_INT8_CONVROT:
        cuda_int8_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
        break;
    case CLEF_WTYPE_NF4:
        cuda_nf4_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
        break;
    default:
        CUDA_QUANT_FAIL(be, CLEF_ERR_UNSUPPORTED, "CUDA matmul: weight type %s is not supported",
                        clef_wtype_name(w->type));
    }
}

/* The scratch of the path the backend's settings take now (not every path's: see
 * cuda_quant_scratch for a setting changed after planning). cuda_matmul_workspace_size, the
 * callers' question, also notes the settings it answered under. */
size_t cuda_quant_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return 0;
    const cuda_quant_paths p = cuda_quant_paths_of(st);
    return bytes_for(&p, T, w);
}

/* For a setter of the quantized matmuls' paths: the backend's state (NULL if it could not be
 * made), after marking its recorded forwards stale — the recordings made before the change
 * launch other kernels (or the same ones with other scratch). */
static cuda_quant_state *quant_setting(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    cuda_ctx(be)->graph_epoch++;
    return st;
}

extern "C" void clef_backend_cuda_set_convrot_exact(clef_backend *be, int on) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->convrot_exact = on != 0;
    }
}

static int wgmma_variant(int v) {
    return (v >= CLEF_CUDA_WGMMA_128 && v <= CLEF_CUDA_WGMMA_LAST) || v == CLEF_CUDA_WGMMA_AUTO ? v : CLEF_CUDA_WGMMA_OFF;
}

extern "C" void clef_backend_cuda_set_int8_wgmma(clef_backend *be, int variant) {
    cuda_quant_state *st = quant_setting(be);
    if (st) /* INT8 also takes its own variants, the persistent and ping-pong kernels */
        st->int8_wgmma =
            variant > CLEF_CUDA_WGMMA_LAST && variant <= CLEF_CUDA_WGMMA_INT8_LAST ? variant : wgmma_variant(variant);
}

extern "C" void clef_backend_cuda_set_fp8_exact_wgmma(clef_backend *be, int variant) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->fp8_exact_wgmma = cuda_fp8_exact_is_mixed(variant) && variant != CLEF_CUDA_WGMMA_AUTO
                                  ? variant
                                  : wgmma_variant(variant);
    }
}

extern "C" int clef_backend_cuda_fp8_exact_wgmma(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    return st ? st->fp8_exact_wgmma : CUDA_QUANT_FP8_EXACT_WGMMA_DEFAULT;
}

extern "C" void clef_backend_cuda_set_nf4_gemm(clef_backend *be, int mode) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->nf4_gemm = mode == CLEF_CUDA_NF4_FUSED || mode == CLEF_CUDA_NF4_RUN15 ? mode : CLEF_CUDA_NF4_DEQUANT;
    }
}

extern "C" int clef_backend_cuda_nf4_gemm(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    return st ? st->nf4_gemm : CUDA_QUANT_NF4_DEFAULT;
}

extern "C" void clef_backend_cuda_set_fp8_epilogue(clef_backend *be, int on) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->fp8_force_epilogue = on != 0;
    }
}

extern "C" void clef_backend_cuda_set_fp8_tensor_cores(clef_backend *be, int on) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->fp8_tensor_cores = on == CLEF_CUDA_FP8_TC_FAST ? CLEF_CUDA_FP8_TC_FAST
                               : on != 0                   ? CLEF_CUDA_FP8_TC_PROMOTED
                                                           : CLEF_CUDA_FP8_TC_OFF;
    }
}

extern "C" void clef_backend_cuda_set_fp8_promoted(clef_backend *be, int variant) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->fp8_promoted = variant == CLEF_CUDA_FP8_PROMOTE_128 || variant == CLEF_CUDA_FP8_PROMOTE_32
                               ? variant
                               : CLEF_CUDA_FP8_PROMOTE_OFF;
    }
}

extern "C" void clef_backend_cuda_set_fp8_slice_bytes(clef_backend *be, size_t bytes) {
    cuda_quant_state *st = quant_setting(be);
    if (st) {
        st->fp8_slice_bytes = bytes;
    }
}

extern "C" int clef_backend_cuda_fp8_promoted(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    return st ? st->fp8_promoted : CLEF_CUDA_FP8_PROMOTE_OFF;
}

extern "C" const char *clef_cuda_fp8_gemm_path(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return "untried";
    /* the paths taken so far, in a fixed order, joined by ", " and a last " and " */
    const char *taken[5];
    int n = 0;
    if (st->fp8_exact_calls)
        taken[n++] = "exact";
    if (st->fp8_promoted_calls)
        taken[n++] = "promoted";
    if (st->fp8_outer_calls)
        taken[n++] = "outer-vector";
    if (st->fp8_epilogue_calls)
        taken[n++] = "epilogue";
    if (st->fp8_fast_calls)
        taken[n++] = "fast accumulation";
    if (n == 0)
        return "untried";
    char *out = st->fp8_path_name;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0)
            strcat(out, i == n - 1 ? " and " : ", ");
        strcat(out, taken[i]);
    }
    return out;
}

/* ---- bench support ---------------------------------------------------------------------------- */

extern "C" void clef_cuda_grown_bytes(clef_backend *be, clef_cuda_grown *out) {
    const cuda_context *ctx = cuda_ctx(be);
    const cuda_quant_state *st = ctx->quant;
    out->staging = ctx->xb_bytes;
    out->quant_scratch = st ? st->scratch_bytes : 0;
    out->quant_extra = st ? st->extra_bytes : 0;
    out->handoff = st ? st->qs_codes_bytes + st->qs_scales_bytes : 0;
}

extern "C" void clef_cuda_release_grown(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    if (cuda_capture_refuse(be, "releasing the grown buffers"))
        return;
    ctx->graph_epoch++; /* recordings that use these buffers are stale */
    cuda_record(be, cudaStreamSynchronize(ctx->stream), "synchronize before releasing the grown buffers");
    cudaFree(ctx->xb);
    cuda_account(be, -(ptrdiff_t)ctx->xb_bytes);
    ctx->xb = NULL, ctx->xb_bytes = 0, ctx->xb_src = NULL;
    cuda_quant_state *st = ctx->quant;
    if (!st)
        return;
    cuda_account(be, -(ptrdiff_t)(st->scratch_bytes + st->extra_bytes + st->qs_codes_bytes + st->qs_scales_bytes));
    cudaFree(st->scratch);
    cudaFree(st->extra);
    st->scratch = st->extra = NULL, st->scratch_bytes = st->extra_bytes = 0;
    cuda_qstage_free(st);
}

__global__ void k_fill_codes(uint8_t *dst, size_t n, uint64_t seed, int type) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1); /* splitmix64 of the index */
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        uint8_t b = (uint8_t)z;
        if (type == CLEF_WTYPE_FP8_E4M3) /* magnitude codes 0x00..0x7e (0x7f is NaN), either sign */
            b = (uint8_t)(((z >> 8) % 0x7f) | (b & 0x80));
        else if (type == CLEF_WTYPE_INT8_CONVROT) /* [-127, 127] */
            b = (uint8_t)(int8_t)((int)((z >> 8) % 255) - 127);
        dst[i] = b;
    }
}

__global__ void k_fill_f32(float *dst, size_t n, float value) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = value;
}

extern "C" int clef_cuda_fill_random_codes(clef_backend *be, clef_wtype t, void *dst, size_t bytes, uint64_t seed) {
    k_fill_codes<<<4096, 256, 0, cuda_ctx(be)->stream>>>((uint8_t *)dst, bytes, seed, (int)t);
    return CUDA_CHECK_LAUNCH(be, "random codes kernel");
}

extern "C" int clef_cuda_fill_f32(clef_backend *be, float *dst, size_t n, float value) {
    k_fill_f32<<<1024, 256, 0, cuda_ctx(be)->stream>>>(dst, n, value);
    return CUDA_CHECK_LAUNCH(be, "fill kernel");
}

extern "C" void clef_cuda_timer_start(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return;
    for (int i = 0; i < 2; i++)
        if (!st->timer[i])
            cuda_record(be, cudaEventCreate(&st->timer[i]), "timer event");
    cuda_record(be, cudaEventRecord(st->timer[0], cuda_ctx(be)->stream), "timer start");
}

extern "C" double clef_cuda_timer_stop(clef_backend *be) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st || !st->timer[0] || !st->timer[1])
        return -1.0;
    float ms = -1.0f;
    if (cuda_record(be, cudaEventRecord(st->timer[1], cuda_ctx(be)->stream), "timer stop") != CLEF_OK ||
        cuda_record(be, cudaEventSynchronize(st->timer[1]), "timer wait") != CLEF_OK ||
        cuda_record(be, cudaEventElapsedTime(&ms, st->timer[0], st->timer[1]), "timer read") != CLEF_OK)
        return -1.0;
    return ms;
}
