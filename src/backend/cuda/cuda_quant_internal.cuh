/*
 * cuda_quant_internal.cuh — what the quantized-format files of the CUDA backend
 * (cuda_quant*.cu) share: their per-backend state (scratch grown on demand, cached cuBLASLt
 * plans of the FP8, INT8 and exact-FP8 BF16 GEMMs, the ConvRot rotation mode, which wgmma
 * kernels run), the plan cache, the scaling epilogues, the wgmma GEMMs' entry point, and each
 * format's matmul entry point for the dispatch in cuda_quant.cu.
 *
 * Plans, as for the BF16 GEMMs (cuda_matmul.cu): chosen once per weight shape for a canonical
 * row count with no split-K reduction and reused for every T, so a row's result does not
 * depend on what else is in the batch.
 */
#ifndef CLEF_BACKEND_CUDA_QUANT_INTERNAL_CUH
#define CLEF_BACKEND_CUDA_QUANT_INTERNAL_CUH

#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/cuda_quant.h"

/* The GEMMs the INT8 and exact FP8 matmuls take by default (CLEF_CUDA_WGMMA_*; where a wgmma
 * kernel cannot run, cuBLASLt). INT8: CLEF_CUDA_WGMMA_AUTO, i.e. 128 x 128 tiles for small
 * products and the persistent / ping-pong kernels for the rest (CUDA_QUANT_INT8_WGMMA_*
 * below; exact integers, the cuBLASLt path's bits; per 27B forward of linears 0.80-0.95x the
 * cuBLASLt path's time at 298-12,016 tokens on an H200, run17_i8, bench/RESULTS.md). Exact
 * FP8: CLEF_CUDA_WGMMA_AUTO, the kernel that widens the weight's codes in registers (no
 * widened copy, no product round trip), 128- or 256-row tiles per layout: the 27B x 16 / 9B
 * forwards in 0.60-1.00x / 0.76-1.03x the time they take with cuBLASLt's BF16 GEMM on the
 * widened weight, the default before (H200 run17_mx2); cuBLASLt where it cannot run. */
#define CUDA_QUANT_INT8_WGMMA_DEFAULT CLEF_CUDA_WGMMA_AUTO
#define CUDA_QUANT_FP8_EXACT_WGMMA_DEFAULT CLEF_CUDA_WGMMA_AUTO
/* The FP8 matmuls' promoted wgmma kernel by default (clef_backend_cuda_set_fp8_promoted): off,
 * the exact path, because the promoted kernel misses the fixture parity the default must meet
 * (last hidden 1.0e-2..1.2e-2 from the CPU on the decide records and 1.1e-2 on the 7-token
 * backbone record, run16; docs/cuda.md, "Why FP8 defaults to the exact path"). */
#define CUDA_QUANT_FP8_PROMOTED_DEFAULT CLEF_CUDA_FP8_PROMOTE_OFF
#define CUDA_QUANT_WGMMA_LARGE CLEF_CUDA_WGMMA_256
/* CLEF_CUDA_WGMMA_AUTO's INT8 kernels (cuda_quant_wgmma.cu, wg_resolve): products of fewer
 * than 2.5 waves of 128 x 256 tiles; the rest with K > 8,192; the others (H200 run17_i8: per
 * 27B forward of linears 0.88-0.95x run15's choice at 1,502-12,016 rows; run18_i8b: the
 * TMA-store persistent kernel on K > 8,192, the 27B down_proj matmuls 0.93-0.97x the plain
 * persistent kernel's time at 1,502-12,016 rows; run18_i8c: with its epilogue's inputs loaded
 * a box ahead, on every large product, the 27B forward's INT8 matmuls 0.96 / 0.95 / 0.91x the
 * multicast ping-pong kernel's time at 1,502 / 2,270 / 8,192 rows) */
#define CUDA_QUANT_INT8_WGMMA_SMALL CLEF_CUDA_WGMMA_128
#define CUDA_QUANT_INT8_WGMMA_LONG_K CLEF_CUDA_WGMMA_256_PERSIST_TS
#define CUDA_QUANT_INT8_WGMMA_LARGE CLEF_CUDA_WGMMA_256_PERSIST_TS
/* NF4 matmuls' GEMM by default (clef_backend_cuda_set_nf4_gemm): the vectorized dequantization
 * (~3.5 TB/s) + cuBLASLt. The fused kernel (mma.sync, ~120-240 TFLOP/s) measured 1.3-3.5x that
 * path's time on every 27B linear at 298-12,016 rows (H200 run16, bench/RESULTS.md), and the
 * choice may not depend on the row count (a row's bits). */
#define CUDA_QUANT_NF4_DEFAULT CLEF_CUDA_NF4_DEQUANT

/* Rows every cached plan is chosen for. */
#define CUDA_QUANT_CANON_ROWS 2048
/* Bytes of the product buffer of the GEMMs that need one (INT8's int32, FP8's fallback
 * fp32): the rows are done in chunks of at most this many bytes of output. */
#define CUDA_QUANT_PRODUCT_BYTES ((size_t)128 << 20)
/* The exact FP8 path on cuBLASLt widens the weight and multiplies it a slice of output
 * features at a time: at most this many bytes of widened weight per slice, and of fp32
 * products per chunk of rows of a slice (the 27B's 17408 x 5120 weight: 3 slices of 5,824
 * features, 60 MB widened, instead of 178 MB at once). clef_backend_cuda_set_fp8_slice_bytes
 * sets another (tests: small shapes in several slices). */
#define CUDA_QUANT_SLICE_BYTES ((size_t)64 << 20)

typedef enum cuda_qplan_kind {
    CUDA_QPLAN_FP8_OUTER = 1, /* e4m3 x e4m3 -> fp32, outer-vector scales */
    CUDA_QPLAN_FP8_PLAIN,     /* e4m3 x e4m3 -> fp32, unscaled */
    CUDA_QPLAN_INT8,          /* int8 x int8 -> int32 */
    CUDA_QPLAN_BF16,          /* bf16 x bf16 -> fp32 (the exact FP8 path's widened codes) */
    CUDA_QPLAN_FP8_OUTER_FAST, /* FP8_OUTER with cuBLASLt's fast accumulation */
    CUDA_QPLAN_FP8_PLAIN_FAST, /* FP8_PLAIN with cuBLASLt's fast accumulation */
} cuda_qplan_kind;

typedef struct cuda_qplan {
    int used, kind, m, n, k, lda, ldb, ldc, align_a, align_b, align_c, beta_one;
    int refused;              /* 1: cuBLASLt has no algorithm for these layouts (or refused a call) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} cuda_qplan;

#define CUDA_QPLANS 64

/* The paths a backend's settings send its quantized matmuls down: all that a matmul's
 * scratch size depends on besides T and the weight's shape (cuda_quant_paths_of). */
typedef struct cuda_quant_paths {
    size_t fp8_slice_bytes; /* the exact path's slices on cuBLASLt (clef_backend_cuda_set_fp8_slice_bytes) */
    unsigned char fp8_tc, fp8_epilogue, fp8_promoted, fp8_exact_gemm, int8_wgmma, nf4_fused;
} cuda_quant_paths;
/* fp8_exact_gemm: which GEMM the exact FP8 path takes */
enum { CUDA_FP8_EXACT_CUBLASLT = 0, CUDA_FP8_EXACT_MIXED = 1, CUDA_FP8_EXACT_BF16_WGMMA = 2 };
/* whether an exact FP8 GEMM setting (CLEF_CUDA_WGMMA_*) is the register-widening kernel: one of
 * its variants, or CLEF_CUDA_WGMMA_AUTO (it, with tiles per layout) */
static inline int cuda_fp8_exact_is_mixed(int g) {
    return g == CLEF_CUDA_WGMMA_AUTO || (g >= CLEF_CUDA_WGMMA_FP8_MIXED && g <= CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC);
}
/* Distinct settings a backend answered matmul_workspace_size under (cuda_quant_state.seen):
 * a scratch a caller planned by that answer was planned under one of them. */
#define CUDA_QUANT_PATHS_SEEN 32

/* What the hand-off learnt (cuda_quant_stage.cu): producer kind and row length K -> the mode
 * (and INT8's static input scale) of the matmul that read its rows. */
#define CUDA_QSTAGE_WANTS 8
typedef struct cuda_qstage_want {
    int kind, mode;
    int64_t K;
    const float *static_scale;
} cuda_qstage_want;

typedef struct cuda_quant_state {
    void *scratch;            /* the formats' own scratch when the caller's cannot hold a call's */
    size_t scratch_bytes;
    void *extra;              /* the parts a path taken at run time adds (cuda_quant_scratch_part) */
    size_t extra_bytes;
    cuda_quant_paths seen[CUDA_QUANT_PATHS_SEEN]; /* the settings matmul_workspace_size answered under */
    int n_seen, seen_overflow;
    int64_t fp8_outer_calls;  /* FP8 matmuls scaled by cuBLASLt (outer-vector) */
    int64_t fp8_epilogue_calls; /* ... by the epilogue kernel (refused layouts, or forced) */
    int64_t fp8_exact_calls;  /* ... by the exact path (bf16 tensor cores on the widened codes) */
    int64_t fp8_promoted_calls; /* ... by the fp8 wgmma kernel with fp32 promotion */
    int64_t fp8_fast_calls;   /* ... on cuBLASLt with fast accumulation (outer-vector or epilogue) */
    int fp8_tensor_cores;     /* clef_backend_cuda_set_fp8_tensor_cores: CLEF_CUDA_FP8_TC_* */
    int fp8_force_epilogue;   /* clef_backend_cuda_set_fp8_epilogue */
    int convrot_exact;        /* clef_backend_cuda_set_convrot_exact */
    int int8_wgmma;           /* clef_backend_cuda_set_int8_wgmma: CLEF_CUDA_WGMMA_* */
    int fp8_exact_wgmma;      /* clef_backend_cuda_set_fp8_exact_wgmma: CLEF_CUDA_WGMMA_* */
    int nf4_gemm;             /* clef_backend_cuda_set_nf4_gemm: CLEF_CUDA_NF4_* */
    int fp8_promoted;         /* clef_backend_cuda_set_fp8_promoted: CLEF_CUDA_FP8_PROMOTE_* */
    size_t fp8_slice_bytes;   /* clef_backend_cuda_set_fp8_slice_bytes (0: CUDA_QUANT_SLICE_BYTES) */
    char fp8_path_name[96];   /* clef_cuda_fp8_gemm_path's answer */
    cudaEvent_t timer[2];     /* clef_cuda_timer_start / stop, made on first use */
    /* The quantized hand-off (cuda_quant_stage.cu): on/off, what was learnt, the code buffer,
     * what it holds, and how often it served a matmul. */
    int fused;                /* 1 (default; CLEF_CUDA_FUSED_QUANT=0 in the environment: 0) */
    cuda_qstage_want wants[CUDA_QSTAGE_WANTS];
    int n_wants;
    void *qs_codes;           /* codes (up to 2 bytes each) and scales, grown by a matmul that learns */
    float *qs_scales;
    size_t qs_codes_bytes, qs_scales_bytes;
    const float *held_src;    /* the buffer holds the codes of the held_n floats from held_src on, */
    int64_t held_n, held_K;   /* in rows of held_K, in held_mode, while `writes` == held_writes */
    int held_mode;
    const float *held_static;
    unsigned long long held_writes;
    int64_t fused_served;     /* matmuls served by a producer's codes (clef_cuda_fused_quant_counts) */
    int64_t fused_writes;     /* producer launches that wrote codes */
    cuda_qplan plans[CUDA_QPLANS];
} cuda_quant_state;

/* The backend's quant state, made on first use; NULL (status recorded) if out of memory. */
cuda_quant_state *cuda_quant_state_of(clef_backend *be);
/* A fork's quantized matmuls take the parent's paths and switches (the setters above), so a
 * context forked from a model's backend computes what the model's backend would; nothing else
 * (buffers, plans, the hand-off's learning) is shared. */
void cuda_quant_inherit(clef_backend *child, clef_backend *parent);
/* Free it (cuda_backend.cu's free; accepts a context without one). */
void cuda_quant_free(cuda_context *ctx);
/* The paths the backend's settings take now; note them in the state's `seen` list
 * (cuda_matmul_workspace_size, when it answers for a quantized matrix). */
cuda_quant_paths cuda_quant_paths_of(const cuda_quant_state *st);
void cuda_quant_note_paths(cuda_quant_state *st);

/* A quantized matmul's scratch: `room` bytes at `base`. The caller's when what it planned
 * (matmul_workspace_size under any setting it answered under: the least of those sizes,
 * cuda_quant_planned_bytes) holds `need` bytes, else the state's own buffer grown to need
 * (a setting changed since, to a path that needs more). 0 on failure (status recorded). */
typedef struct cuda_qscratch {
    char *base;
    size_t room;
} cuda_qscratch;
int cuda_quant_scratch(clef_backend *be, void *scratch, int64_t T, const clef_matrix *w, size_t need,
                       cuda_qscratch *out);
/* Bytes [off, off + bytes) of it when its room holds them, else the state's second buffer
 * (grown to bytes; it never moves the first): the part a path chosen at run time adds (the
 * FP8 epilogue's products after cuBLASLt refused outer-vector scaling, the INT8 products where
 * no wgmma kernel runs, ...). NULL on failure. */
void *cuda_quant_scratch_part(clef_backend *be, const cuda_qscratch *qs, size_t off, size_t bytes);
/* The least scratch a caller can have planned for T rows of w (see cuda_quant_scratch). */
size_t cuda_quant_planned_bytes(clef_backend *be, int64_t T, const clef_matrix *w);

/* The cached plan for these layouts (rows n this call), made on first use; NULL if
 * cuBLASLt has none for them (remembered: asked once per layout). a, b, c give the pointer
 * alignments. */
cuda_qplan *cuda_qplan_get(clef_backend *be, int kind, int m, int n, int k, int lda, int ldb, int ldc,
                           const void *a, const void *b, const void *c, int beta_one);

/* Rows per chunk when T rows are done in chunks of at most max_rows: as even as possible (a
 * last chunk of a few rows would run the GEMM at a fraction of its rate). */
static inline int64_t cuda_quant_even_chunk(int64_t T, int64_t max_rows) {
    int64_t n_chunks = (T + max_rows - 1) / max_rows;
    return n_chunks <= 1 ? T : (T + n_chunks - 1) / n_chunks;
}

/* Byte offsets in a scratch buffer: each piece starts 256-byte aligned. */
static inline size_t cuda_quant_align(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* Rows of output per product chunk for N output features of elem_bytes each. */
static inline int64_t cuda_quant_chunk_rows(int64_t N, size_t elem_bytes) {
    int64_t r = (int64_t)(CUDA_QUANT_PRODUCT_BYTES / ((size_t)N * elem_bytes));
    return r < 1 ? 1 : r;
}

/* The launch grid of a kernel over T rows x N columns: x over columns, y over rows (the
 * kernel strides by gridDim.y past 65,535 rows). */
dim3 cuda_quant_rows_grid(int64_t T, int64_t N, int threads);

/* y[t, n] = (accumulate ? y : 0) + (v + bias[n]) over T x N with
 *   int32 products: v = float(acc) * (sx[t] * sw[n])     (clef_int8_matmul_rows)
 *   fp32 products:  v = acc * sx[t] * sw[n]              (clef_fp8_gemm_ref's order)
 * No fused multiply-adds: the CPU's bits for the same acc. */
void cuda_quant_epilogue_i32(clef_backend *be, int64_t T, int64_t N, const int32_t *acc, int64_t ldacc,
                             const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                             int accumulate);
void cuda_quant_epilogue_f32(clef_backend *be, int64_t T, int64_t N, const float *acc, int64_t ldacc,
                             const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                             int accumulate);

/* CUDA-core GEMMs for the layouts cuBLASLt refuses (odd output counts or leading
 * dimensions): one thread per output, k ascending. FP8: fp32 products of the decoded codes
 * (exact) summed in fp32, the bits of clef_fp8_gemm_ref before scaling; INT8: dp4a, exact. */
void cuda_fp8_gemm_simple(clef_backend *be, int64_t T, int64_t N, int64_t K, const uint8_t *qx, const uint8_t *qw,
                          float *prod, int64_t ldprod);
void cuda_int8_gemm_simple(clef_backend *be, int64_t T, int64_t N, int64_t K, const int8_t *qx, const int8_t *qw,
                           int32_t *acc, int64_t ldacc);

/* A wgmma GEMM (cuda_quant_wgmma.cu) with the scaling fused: bf16 = 0, int8 codes x [T, K] and
 * w [N, K], y = (accumulate ? y : 0) + float(x w^T) * (sx[t] * sw[n]) (+ bias)
 * (cuda_quant_epilogue_i32's arithmetic); bf16 = 1, bf16 values, y = (accumulate ? y : 0) +
 * (x w^T) * sx[t] * sw[n] (+ bias) (cuda_quant_epilogue_f32's). variant: CLEF_CUDA_WGMMA_*.
 * Returns 0, having queued nothing, where the kernel cannot run (not an sm_90 device, K not a
 * multiple of 16, misaligned operands): the caller takes cuBLASLt. */
int cuda_wgmma_gemm(clef_backend *be, int bf16, int variant, int64_t T, int64_t N, int64_t K, const void *x,
                    const void *w, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                    int accumulate);

/* The exact FP8 GEMM with the weight's codes widened in registers (cuda_quant_fp8_exact_wgmma.cu):
 * bf16 code values xv [T, K] (dense), e4m3 codes qw [N, K], y = (accumulate ? y : 0) +
 * (xv wv^T) * sx[t] * sw[n] (+ bias) (cuda_quant_epilogue_f32's order). variant:
 * CLEF_CUDA_WGMMA_FP8_MIXED or _MIXED_128. Returns 0, having queued nothing, where it cannot run
 * (not sm_90, K not a multiple of 16, misaligned operands, another variant). */
int cuda_fp8_exact_mixed_gemm(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K,
                              const __nv_bfloat16 *xv, const uint8_t *qw, const float *sx, const float *sw,
                              const float *bias, float *y, int64_t ldy, int accumulate);

/* The FP8 GEMM on the fp8 tensor cores with fp32 promotion (cuda_quant_fp8_wgmma.cu): e4m3
 * codes qx [T, K] and qw [N, K], y = (accumulate ? y : 0) + (qx qw^T) * sx[t] * sw[n] (+ bias),
 * partial sums of the variant's run of K (CLEF_CUDA_FP8_PROMOTE_*) added in fp32. Returns 0,
 * having queued nothing, where it cannot run (not sm_90, K not a multiple of 16, misaligned
 * operands, variant off): the caller takes the exact path. */
int cuda_fp8_wgmma_gemm(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K, const uint8_t *qx,
                        const uint8_t *qw, const float *sx, const float *sw, const float *bias, float *y, int64_t ldy,
                        int accumulate);

/* e4m3 code -> fp32 (exact; 0x7f / 0xff NaN) */
__device__ __forceinline__ float cuda_e4m3_value(uint8_t b) {
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7)
        return __int_as_float(0x7fc00000);
    return e ? sign * ldexpf((float)(8 + m), e - 10) : sign * ldexpf((float)m, -9);
}

/* log2 of v when v is a power of two (>= 1), else -1 */
static inline int cuda_log2_exact(int64_t v) {
    int s = 0;
    while (s < 62 && ((int64_t)1 << s) < v)
        s++;
    return ((int64_t)1 << s) == v ? s : -1;
}

/* The fused NF4 GEMM (cuda_quant_nf4_gemm.cu): whether it runs w's layout (K a multiple of
 * 64, power-of-two blocks of >= 64, 16-byte aligned codes), and the matmul itself on x
 * already rounded to bf16 (xb [T, K], dense, 16-byte aligned): y = (accumulate ? y : 0) +
 * xb W^T (+ bias). Returns 0, having queued nothing, where it cannot run. */
int cuda_nf4_gemm_fused_supported(const clef_matrix *w);
int cuda_nf4_gemm_fused(clef_backend *be, int64_t T, const __nv_bfloat16 *xb, const clef_matrix *w,
                        const float *bias, float *y, int64_t ldy, int accumulate);

/* The bf16 rows a BF16 matmul reads for x [T, K] (ldx) (cuda_matmul.cu): converted into
 * scratch when given, else the staging buffer (reused when it already holds these rows).
 * NULL on failure (status recorded). */
const __nv_bfloat16 *cuda_matmul_bf16_rows(clef_backend *be, int64_t T, const float *x, int64_t ldx, int64_t K,
                                           void *scratch);

/* The matmul side of the hand-off (cuda_quant_stage.cu). cuda_qstage_rows: 1 with the
 * codes and scales of x [T, K] (ldx) in `mode` when a producer wrote them and nothing wrote
 * since (rows inside its output, at a row offset that keeps the pointers 256-byte aligned,
 * as the matmul's own scratch is: the same GEMM plans); else 0 and the matmul quantizes.
 * cuda_qstage_learn: called by a matmul about to quantize x itself (before its quantizer
 * runs): if the last producer's output holds x's rows and nothing ran since, remember that
 * this producer kind feeds `mode` at row length K and grow the code buffer for its output. */
int cuda_qstage_rows(clef_backend *be, int mode, int64_t T, const float *x, int64_t ldx, int64_t K,
                     const float *static_scale, const void **codes, const float **scales);
void cuda_qstage_learn(clef_backend *be, int mode, const float *x, int64_t ldx, int64_t K, const float *static_scale);
/* The mode a matmul on w quantizes its input in (CUDA_QMODE_NONE: never through the hand-off). */
int cuda_qstage_mode_of(clef_backend *be, const clef_matrix *w);
/* The hand-off's code buffer for a matmul quantizing standalone, when it holds `bytes` and
 * no producer's codes in it are valid any more (a standalone quantization comes after other
 * kernels ran, or on the call that learns its producer and has just grown the buffer to that
 * producer's output): the quantizer then needs no buffer of its own. Else NULL. */
void *cuda_qstage_spare(clef_backend *be, size_t bytes);
/* Free the hand-off's buffers (cuda_quant_free). */
void cuda_qstage_free(cuda_quant_state *st);

/* Each format's matmul (backend.h's contract) and the scratch it needs for T rows on the
 * paths p (the path's own, not every path's: a path taken at run time that needs more takes
 * it from cuda_quant_scratch_part). */
void cuda_fp8_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                     const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
size_t cuda_fp8_workspace_size(const cuda_quant_paths *p, int64_t T, const clef_matrix *w);
void cuda_int8_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                      const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
size_t cuda_int8_workspace_size(const cuda_quant_paths *p, int64_t T, const clef_matrix *w);
void cuda_nf4_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                     const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
size_t cuda_nf4_workspace_size(const cuda_quant_paths *p, int64_t T, const clef_matrix *w);

/* Dispatch (cuda_quant.cu), wired into the op table and cuda_matmul. */
int cuda_supports_format(clef_backend *be, clef_wtype t);
void cuda_quant_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                       const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
size_t cuda_quant_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w);

/* Record a failure of this op as the backend's status (first one kept), with a message. */
#define CUDA_QUANT_FAIL(be, code, ...)                                                 \
    do {                                                                               \
        if (cuda_ctx(be)->status == CLEF_OK)                                           \
            cuda_ctx(be)->status = clef_fail((code), __VA_ARGS__);                     \
    } while (0)

#endif /* CLEF_BACKEND_CUDA_QUANT_INTERNAL_CUH */
