/*
 * cuda_quant_stage.cu — the quantized hand-off: the ops that produce a quantized matmul's
 * input (RMSNorm, the gated RMSNorm, SwiGLU, the attention output gate) write its per-token
 * codes and scales
 * beside their fp32 output, and the FP8 / INT8 ConvRot matmul after them skips its own
 * quantizer (cuda_internal.cuh says how a producer uses it; cuda_quant_row.cuh holds the
 * quantizers' arithmetic both sides share, so the codes are the standalone quantizer's bit
 * for bit and the model's results do not change).
 *
 * What is learnt, not declared: a producer does not know which matmul reads its output. So
 * each producer marks its output (cuda_qstage_mark), and a quantized matmul that is about to
 * quantize rows lying in the last producer's output, with nothing run in between, records
 * "producer kind, row length K -> this mode" (a few entries, the latest per kind and K) and
 * grows the backend's code buffer to that output's size. From then on that producer writes
 * the codes (the first layer of the first forward runs standalone). A producer whose output
 * then feeds something else (a Gated DeltaNet layer's input norm in an FP8 release, whose
 * projections are BF16) writes codes nobody reads: a store of 1-2 bytes per value, no result
 * changes.
 *
 * Valid while nothing else wrote: the record of what the buffer holds carries the context's
 * `writes` count (every kernel launch and host copy bumps it). A matmul bumps it too
 * (quantizer, epilogue kernels) but writes only its scratch and y, so cuda_matmul keeps the
 * record valid across a matmul whose y and scratch lie outside the producer's output (q, k,
 * v all read the input norm's codes). Rows: any whole rows of the output at ldx == K whose
 * first row keeps the codes 256-byte aligned (and the scales too: a multiple of 64 rows), as
 * the matmul's own scratch is, so the GEMM plans (keyed on alignment) are the same. Anything
 * else (a column slice, another K or mode, a static input scale other than the one learnt,
 * the exact ConvRot rotation, a row of the wrong alignment) quantizes standalone.
 */
#include "backend/cuda/cuda_quant_internal.cuh"

#include <string.h>

static size_t qmode_code_bytes(int mode) { return mode == CUDA_QMODE_FP8_BF16 ? 2 : 1; }

int cuda_smem_optin(clef_backend *be) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, cuda_ctx(be)->device) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 48 << 10;
    }
    return n;
}

int cuda_qstage_claim(clef_backend *be, int kind, int64_t n, int64_t unit, int64_t only_K, cuda_qstage_target *tg) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_quant_state *st = ctx->quant;
    if (!st || !st->fused || ctx->status != CLEF_OK || n <= 0 || !st->qs_codes)
        return 0;
    for (int i = 0; i < st->n_wants; i++) {
        const cuda_qstage_want *w = &st->wants[i];
        if (w->kind != kind || n % w->K != 0 || w->K % unit != 0 || (only_K && w->K != only_K))
            continue;
        /* the fused kernels keep a K-long row in shared memory (as the standalone quantizer) */
        if ((size_t)n * qmode_code_bytes(w->mode) > st->qs_codes_bytes ||
            sizeof(float) * (size_t)(n / w->K) > st->qs_scales_bytes ||
            sizeof(float) * (size_t)w->K + 2048 > (size_t)cuda_smem_optin(be))
            return 0;
        st->held_src = NULL; /* the producer's kernel is about to write over the buffer */
        tg->mode = w->mode, tg->K = w->K, tg->codes = st->qs_codes, tg->scales = st->qs_scales;
        tg->static_scale = w->static_scale;
        return 1;
    }
    return 0;
}

void cuda_qstage_mark(clef_backend *be, int kind, const float *src, int64_t n, const cuda_qstage_target *tg) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return;
    ctx->qp_kind = kind, ctx->qp_src = src, ctx->qp_n = n, ctx->qp_writes = ctx->writes;
    cuda_quant_state *st = ctx->quant;
    if (!tg || !st)
        return;
    st->held_src = src, st->held_n = n, st->held_K = tg->K, st->held_mode = tg->mode;
    st->held_static = tg->static_scale, st->held_writes = ctx->writes;
    st->fused_writes++;
}

int cuda_qstage_valid(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    return ctx->quant && ctx->quant->held_src && ctx->quant->held_writes == ctx->writes;
}

static int overlaps(const void *a0, size_t a_bytes, const void *b0, size_t b_bytes) {
    const char *a = (const char *)a0, *b = (const char *)b0;
    return a < b + b_bytes && b < a + a_bytes;
}

void cuda_qstage_after_matmul(clef_backend *be, int was_valid, const float *y, int64_t T, int64_t N, int64_t ldy,
                              const void *scratch, size_t scratch_bytes) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_quant_state *st = ctx->quant;
    if (!was_valid || !st || !st->held_src || ctx->status != CLEF_OK)
        return;
    const size_t held_bytes = sizeof(float) * (size_t)st->held_n;
    const size_t y_bytes = sizeof(float) * (size_t)((T - 1) * ldy + N);
    if (overlaps(y, y_bytes, st->held_src, held_bytes) ||
        (scratch && overlaps(scratch, scratch_bytes, st->held_src, held_bytes))) {
        st->held_src = NULL;
        return;
    }
    st->held_writes = ctx->writes; /* the matmul's own launches wrote elsewhere */
}

int cuda_qstage_rows(clef_backend *be, int mode, int64_t T, const float *x, int64_t ldx, int64_t K,
                     const float *static_scale, const void **codes, const float **scales) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_quant_state *st = ctx->quant;
    if (!st || !st->fused || !cuda_qstage_valid(be) || mode == CUDA_QMODE_NONE)
        return 0;
    if (st->held_mode != mode || st->held_K != K || st->held_static != static_scale || ldx != K || T <= 0 ||
        x < st->held_src || (x - st->held_src) % K != 0)
        return 0;
    const int64_t r0 = (x - st->held_src) / K;
    const size_t esz = qmode_code_bytes(mode);
    if (r0 + T > st->held_n / K || r0 % 64 != 0 || ((size_t)(r0 * K) * esz) % 256 != 0)
        return 0;
    *codes = (const char *)st->qs_codes + (size_t)(r0 * K) * esz;
    *scales = st->qs_scales + r0;
    st->fused_served++;
    return 1;
}

/* Grow the code buffer to hold `codes` bytes and `scales` bytes (queued work may still read
 * the old one: synchronize first, as the staging does). */
static int qstage_grow(clef_backend *be, cuda_quant_state *st, size_t codes, size_t scales) {
    cuda_context *ctx = cuda_ctx(be);
    if (codes <= st->qs_codes_bytes && scales <= st->qs_scales_bytes)
        return 1;
    if (cuda_capture_refuse(be, "growing the quantized hand-off"))
        return 0;
    ctx->graph_epoch++; /* recordings whose producers write into the old buffer are stale */
    cuda_record(be, cudaStreamSynchronize(ctx->stream), "synchronize before growing the quantized hand-off");
    st->held_src = NULL;
    cudaFree(st->qs_codes);
    cudaFree(st->qs_scales);
    cuda_account(be, -(ptrdiff_t)(st->qs_codes_bytes + st->qs_scales_bytes));
    st->qs_codes = NULL, st->qs_scales = NULL, st->qs_codes_bytes = st->qs_scales_bytes = 0;
    /* no head room: the producers' outputs are bounded by the RunState's plan (a mixer group,
     * QWEN35_MLP_ROWS of the MLP), so the buffer grows a few times at first and then never,
     * and a quarter more of the SwiGLU's codes would be 0.03 GiB (bf16 values) at the 27B */
    codes = cuda_quant_align(codes), scales = cuda_quant_align(scales);
    if (cuda_record(be, cudaMalloc(&st->qs_codes, codes), "quantized hand-off codes") != CLEF_OK)
        return 0;
    if (cuda_record(be, cudaMalloc((void **)&st->qs_scales, scales), "quantized hand-off scales") != CLEF_OK) {
        cudaFree(st->qs_codes);
        st->qs_codes = NULL;
        return 0;
    }
    st->qs_codes_bytes = codes, st->qs_scales_bytes = scales;
    cuda_account(be, (ptrdiff_t)(codes + scales));
    return 1;
}

void cuda_qstage_learn(clef_backend *be, int mode, const float *x, int64_t ldx, int64_t K, const float *static_scale) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_quant_state *st = ctx->quant;
    if (!st || !st->fused || ctx->status != CLEF_OK || mode == CUDA_QMODE_NONE || !ctx->qp_src ||
        ctx->qp_writes != ctx->writes)
        return;
    const float *src = ctx->qp_src;
    const int64_t n = ctx->qp_n;
    if (ldx != K || K % 16 != 0 || (mode == CUDA_QMODE_INT8_ROT256 && K % 256 != 0) || n % K != 0 || x < src || x >= src + n || (x - src) % K != 0)
        return;
    int slot = -1;
    for (int i = 0; i < st->n_wants; i++)
        if (st->wants[i].kind == ctx->qp_kind && st->wants[i].K == K)
            slot = i;
    if (slot < 0) {
        if (st->n_wants == CUDA_QSTAGE_WANTS) /* full (never, for one model): forget the oldest */
            memmove(&st->wants[0], &st->wants[1], sizeof st->wants[0] * (CUDA_QSTAGE_WANTS - 1)), st->n_wants--;
        slot = st->n_wants++;
    }
    st->wants[slot].kind = ctx->qp_kind, st->wants[slot].mode = mode, st->wants[slot].K = K;
    st->wants[slot].static_scale = static_scale;
    qstage_grow(be, st, (size_t)n * qmode_code_bytes(mode), sizeof(float) * (size_t)(n / K));
}

void *cuda_qstage_spare(clef_backend *be, size_t bytes) {
    cuda_quant_state *st = cuda_ctx(be)->quant;
    if (!st || !st->qs_codes || bytes > st->qs_codes_bytes || cuda_qstage_valid(be) || cuda_ctx(be)->status != CLEF_OK)
        return NULL;
    st->held_src = NULL; /* stale already; the caller's kernel is about to write over it */
    return st->qs_codes;
}

void cuda_qstage_free(cuda_quant_state *st) {
    cudaFree(st->qs_codes);
    cudaFree(st->qs_scales);
    st->qs_codes = NULL, st->qs_scales = NULL, st->qs_codes_bytes = st->qs_scales_bytes = 0, st->held_src = NULL;
}

extern "C" void clef_backend_cuda_set_fused_quant(clef_backend *be, int on) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    cuda_ctx(be)->graph_epoch++; /* the recordings made before launch other kernels */
    if (st) {
        st->fused = on != 0;
        st->held_src = NULL;
    }
}

extern "C" void clef_cuda_fused_quant_counts(clef_backend *be, int64_t *matmuls_served, int64_t *producer_writes) {
    cuda_quant_state *st = cuda_ctx(be)->quant;
    *matmuls_served = st ? st->fused_served : 0;
    *producer_writes = st ? st->fused_writes : 0;
}

/* The mode a matmul on w quantizes its input in (CUDA_QMODE_NONE: not through the hand-off). */
int cuda_qstage_mode_of(clef_backend *be, const clef_matrix *w) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st)
        return CUDA_QMODE_NONE;
    if (w->type == CLEF_WTYPE_FP8_E4M3)
        return st->fp8_tensor_cores || st->fp8_promoted ? CUDA_QMODE_FP8 : CUDA_QMODE_FP8_BF16;
    if (w->type == CLEF_WTYPE_INT8_CONVROT && !st->convrot_exact) {
        const int64_t g = w->quant->u.int8_convrot.rotation_group;
        return g == 256 ? CUDA_QMODE_INT8_ROT256 : g == 0 ? CUDA_QMODE_INT8 : CUDA_QMODE_NONE;
    }
    return CUDA_QMODE_NONE;
}

/* Whether a matmul on w reads nothing but the hand-off's codes when it finds them (so a producer
 * whose only reader it is may skip its fp32 output): FP8 and INT8 ConvRot, except the FP8
 * promoted kernel, which falls back to quantizing x itself where it does not run a layout. */
int cuda_qstage_codes_only(clef_backend *be, const clef_matrix *w) {
    cuda_quant_state *st = cuda_quant_state_of(be);
    if (!st || !st->fused || cuda_qstage_mode_of(be, w) == CUDA_QMODE_NONE)
        return 0;
    return !(w->type == CLEF_WTYPE_FP8_E4M3 && cuda_quant_paths_of(st).fp8_promoted);
}

/* Whether a matmul on w over T rows at x would take the held codes now (cuda_qstage_rows's
 * own test on the same state, not counted as a use). */
int cuda_qstage_takes(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w) {
    const void *codes;
    const float *scales;
    return clef_cuda_quant_staged(be, T, x, ldx, w, &codes, &scales);
}

/* The matmul of rows whose fp32 values were never written (cuda_swiglu_matmul): it must take
 * the codes, which cuda_qstage_takes said it would; if it did not, its result is wrong, so the
 * backend fails rather than return it. */
void cuda_matmul_codes_only(clef_backend *be, int64_t T, const float *x, const clef_matrix *w, float *y, int64_t ldy,
                            int accumulate, void *scratch) {
    cuda_quant_state *st = cuda_ctx(be)->quant;
    const int64_t served = st->fused_served;
    cuda_matmul(be, T, x, w->cols, w, NULL, y, ldy, accumulate, scratch);
    if (cuda_ctx(be)->status == CLEF_OK && st->fused_served == served)
        CUDA_QUANT_FAIL(be, CLEF_ERR_INTERNAL, "CUDA quantized hand-off: a matmul of unwritten rows did not take the "
                                               "codes");
}

extern "C" int clef_cuda_quant_staged(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                                      const void **codes, const float **scales) {
    const int mode = cuda_qstage_mode_of(be, w);
    const float *stat = w->type == CLEF_WTYPE_INT8_CONVROT ? w->quant->u.int8_convrot.input_scale : NULL;
    if (!cuda_qstage_rows(be, mode, T, x, ldx, w->cols, stat, codes, scales))
        return 0;
    cuda_ctx(be)->quant->fused_served--; /* a look, not a use */
    return 1;
}
