/*
 * cuda_internal.cuh — what the files of the CUDA backend share: the backend context (device,
 * stream, cuBLASLt handle and workspace, the bf16 staging buffer of matmul inputs and what it
 * holds, the first error seen), the launch-check helper, the staging hand-off from the ops
 * that produce a matmul's input (norms, SwiGLU, the attention gate) and the op entry points
 * each .cu file provides to the table in cuda_backend.cu.
 *
 * Errors: ops return void (backend.h), so a failed launch or library call is recorded in the
 * context (first one wins) and reported by the next synchronize, read or write.
 */
#ifndef CLEF_BACKEND_CUDA_INTERNAL_CUH
#define CLEF_BACKEND_CUDA_INTERNAL_CUH

extern "C" {
#include "backend/backend.h"
#include "core/error.h"
}
#include "backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

/* One cached cuBLASLt plan: the layouts and the algorithm used for them (the fastest of the
 * heuristic's candidates when timed, cuda_matmul.cu), and the heuristic's first choice, kept
 * as the fallback should cuBLASLt refuse the chosen one at some row count. */
typedef struct cuda_gemm_plan {
    int used;
    int a_type, m, n, k, lda, ldb, ldc, align_a, align_b, align_c, beta_one;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo, algo_first;
    int n_candidates, chosen;     /* candidates timed (0: not timed) and the index picked */
    float first_ms, chosen_ms;    /* their times at the tuning rows (CUDA_GEMM_CANON_ROWS) */
    float any_ms;                 /* the fastest with split-K allowed (report only), its split and scheme */
    int any_splitk, any_scheme;
} cuda_gemm_plan;

#define CUDA_GEMM_PLANS 128
#define CUDA_ROPE_TABLES 8

typedef struct cuda_context {
    int device;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_workspace;
    size_t lt_workspace_bytes;
    __nv_bfloat16 *xb;      /* bf16 copy of a matmul's activation rows, grown on demand */
    size_t xb_bytes;
    /* What xb holds (cuda_matmul.cu): the rows [xb_T, xb_K] of xb_src at stride xb_ldx, valid
     * while `writes` still equals xb_writes, i.e. no kernel ran and no host copy landed since.
     * The projections that read the same normalised rows then convert them once. */
    const float *xb_src;
    int64_t xb_T, xb_K, xb_ldx;
    /* > 0: instead, xb holds the bf16 rounding of the xb_span floats from xb_src on, written
     * by the op that produced them (cuda_staging_claim / cuda_staging_mark): a matmul on any
     * contiguous rows inside that span skips its conversion. */
    int64_t xb_span;
    unsigned long long writes, xb_writes;
    /* The last op that offered its output to the quantized hand-off (cuda_qstage_mark): which
     * kind, the n contiguous floats it wrote at qp_src, and `writes` right after it. A
     * quantized matmul that finds its rows there while nothing ran since learns that this kind
     * of op feeds it (cuda_quant_stage.cu). */
    int qp_kind;
    const float *qp_src;
    int64_t qp_n;
    unsigned long long qp_writes;
    size_t resident, peak;  /* device bytes held by this backend */
    int status;             /* first error (clef_status), CLEF_OK while none */
    int attention_fp32;     /* 1: attention on the fp32 kernel only (cuda_attention.cu) */
    int gdn_chunked;        /* 1: CLEF_GDN_CHUNKED runs the WY/UT kernel (cuda_gdn.cu) */
    int n_sm;               /* multiprocessors of the device (0 until first asked) */
    int flash_ok;           /* 1: this device's WMMA accumulator layout is the one cuda_flash.cu
                               assumes (checked at create); 0: the shared-memory kernel runs */
    int gemm_tuning;        /* 1 (default): time cuBLASLt's candidate algorithms per new BF16
                               layout and keep the fastest (cuda_matmul.cu) */
    /* Recordings (cuda_graph.cu). capturing: ops are being recorded on the stream, so
     * nothing may allocate, free or synchronize: the ops that grow a buffer on first use
     * refuse instead (cuda_capture_refuse) and the recording fails. graph_epoch counts the
     * moves of the backend's own buffers a recording may use (the bf16 staging, the quantized
     * matmuls' scratch) and the kernel switches: a recording of an older epoch is stale.
     * graphs_off: never record (the default: unless CLEF_CUDA_GRAPHS=1 or
     * clef_backend_cuda_set_graphs(be, 1)). */
    int capturing, graphs_off;
    unsigned long long graph_epoch, capture_epoch;
    /* RoPE inverse frequencies per (theta, rot_dims) on the device, uploaded once each
     * (cuda_elementwise.cu): a forward's rope_table then copies nothing from the host */
    struct { double theta; int64_t rot_dims; float *dev; } rope_inv[CUDA_ROPE_TABLES];
    int n_rope_inv;
    cuda_gemm_plan plans[CUDA_GEMM_PLANS];
    struct cuda_quant_state *quant; /* quantized formats (cuda_quant.cu); NULL until first used */
} cuda_context;

static inline cuda_context *cuda_ctx(clef_backend *be) { return (cuda_context *)be->ctx; }

/* Record a CUDA runtime failure (the first one is kept); returns the context's status. */
int cuda_record(clef_backend *be, cudaError_t err, const char *what);

/* After each op's launches: record a launch-configuration error, and count the op as one that
 * may have written device memory (ends the reuse of the matmul's bf16 input copy). */
static inline int cuda_launched(clef_backend *be, const char *what) {
    cuda_ctx(be)->writes++;
    return cuda_record(be, cudaGetLastError(), what);
}
#define CUDA_CHECK_LAUNCH(be, what) cuda_launched((be), (what))

/* Four floats rounded to bf16 (round to nearest even, as every bf16 copy of an fp32 value in
 * this backend) and stored with one 8-byte write; dst 8-byte aligned. */
__device__ __forceinline__ void cuda_store_bf16x4(__nv_bfloat16 *dst, float4 v) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 packed;
    packed.x = *(const uint32_t *)&lo, packed.y = *(const uint32_t *)&hi;
    *(uint2 *)dst = packed;
}

static inline unsigned cuda_blocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

/* Multiprocessors of the backend's device (grid sizing). */
static inline int cuda_sm_count(clef_backend *be) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, cuda_ctx(be)->device) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 132;
    }
    return n;
}

/* Called by an op that must allocate, free or wait while its stream is being recorded:
 * records the failure that makes the recording fail (the caller runs the ops directly
 * afterwards, cuda_graph.cu) and returns 1; 0 when not recording. */
int cuda_capture_refuse(clef_backend *be, const char *what);

/* cuda_graph.cu: the recording slots of the op table (backend.h) */
int cuda_capture_begin(clef_backend *be);
int cuda_capture_end(clef_backend *be, clef_graph **graph);
int cuda_graph_launch(clef_backend *be, clef_graph *graph);
void cuda_graph_free(clef_backend *be, clef_graph *graph);

/* Count device bytes for clef_backend_cuda_memory (cuda_backend.cu). */
void cuda_account(clef_backend *be, ptrdiff_t delta);

/* cuda_host.cu: the memory slots of the op table (backend.h) */
int cuda_memory_query(clef_backend *be, clef_backend_memory_info *out);
void *cuda_host_alloc(clef_backend *be, size_t bytes);
void cuda_host_free(clef_backend *be, void *ptr);
int cuda_write_async(clef_backend *be, void *dst, const void *host_src, size_t bytes);

/* cuda_matmul.cu */
void cuda_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                 const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
size_t cuda_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w);
void cuda_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids, float *y,
                   int64_t ldy);
void cuda_gemm_plans_free(cuda_context *ctx);

/* The staging hand-off (cuda_matmul.cu). An op about to write n contiguous fp32 values that a
 * BF16 matmul may read next asks for the staging buffer: it gets it when it already holds n
 * bf16 values (it is never grown here: a backend whose matmuls never used it keeps none),
 * else NULL and the op writes fp32 only. The op's kernel then writes each
 * value v both as fp32 and as __float2bfloat16_rn(v) (the matmul's own rounding of it, so
 * the product is the same bit for bit), and after the launch check it marks the staging as
 * holding those n values. */
__nv_bfloat16 *cuda_staging_claim(clef_backend *be, int64_t n);
void cuda_staging_mark(clef_backend *be, const float *src, int64_t n);
/* The staging buffer grown to hold `bytes` and marked as holding nothing: for a quantized
 * matmul's operand of the same size and role as a BF16 matmul's bf16 rows (the exact FP8
 * path's bf16 code values), so the two never take a buffer each. NULL on failure. */
void *cuda_staging_take(clef_backend *be, size_t bytes);

/* The quantized hand-off (cuda_quant_stage.cu), the quantized matmuls' counterpart of the
 * staging: an op whose output the next FP8 or INT8 ConvRot matmul quantizes per token also
 * writes that matmul's codes and per-token scales (the standalone quantizer's bits, by the
 * same device code: cuda_quant_row.cuh), and the matmul skips its quantizer. Which format a
 * producer writes, and for rows of which length, is learnt: a quantized matmul that quantizes
 * rows a producer has just written records (producer kind, row length K) -> its mode, and
 * makes the backend's code buffer large enough. A producer then asks cuda_qstage_claim
 * before its launch; when it gets a target, its kernel writes the fp32 output as before AND
 * for each K-long row the codes + scale into the target (cuda_qrow_quantize), and after the
 * launch check it calls cuda_qstage_mark with the target (a producer that did not fuse calls
 * it with NULL, so the matmul after it can learn). Valid, as the staging, while `writes` is
 * unchanged (a matmul that writes neither the rows nor the codes keeps it valid). */
typedef enum cuda_qstage_kind {
    CUDA_QSTAGE_RMSNORM = 1,  /* cuda_rmsnorm: a K-long row per norm row (K == dim) */
    CUDA_QSTAGE_SWIGLU,       /* cuda_swiglu: n flat values, rows of K */
    CUDA_QSTAGE_MUL_SIGMOID,  /* cuda_mul_sigmoid (the attention output gate): K / cols rows a token */
    CUDA_QSTAGE_GATED_NORM,   /* cuda_rmsnorm_gated (the GDN's output): K / dim head rows a token */
} cuda_qstage_kind;

typedef enum cuda_qstage_mode {
    CUDA_QMODE_NONE = 0,
    CUDA_QMODE_FP8,           /* e4m3 codes (the tensor-core path), clef_cuda_fp8_quantize_tokens */
    CUDA_QMODE_FP8_BF16,      /* the codes' values in bf16 (the exact path), ..._tokens_bf16 */
    CUDA_QMODE_INT8,          /* int8, no rotation (rotation group 0) */
    CUDA_QMODE_INT8_ROT256,   /* int8 after the 256-wide butterfly Hadamard (ConvRot, not exact mode) */
} cuda_qstage_mode;

/* Where a fused producer's kernel writes row t's codes (codes + t K elements) and scale
 * (scales[t]); static_scale: INT8's static input scale (device pointer) or NULL. */
typedef struct cuda_qstage_target {
    int mode;
    int64_t K;
    void *codes;
    float *scales;
    const float *static_scale;
} cuda_qstage_target;

/* A producer of `kind` about to write n contiguous floats whose rows it produces `unit`
 * values at a time (a norm's row; 1 for elementwise ops): 1 and *tg when a quantized matmul
 * of rows of tg->K (a multiple of unit dividing n; == only_K unless 0) was seen reading this
 * kind's output and the code buffer holds n values; else 0 (write fp32 only). */
int cuda_qstage_claim(clef_backend *be, int kind, int64_t n, int64_t unit, int64_t only_K, cuda_qstage_target *tg);
/* After the producer's launch check: its output is the n floats at src; tg: the claimed
 * target its kernel wrote, or NULL. */
void cuda_qstage_mark(clef_backend *be, int kind, const float *src, int64_t n, const cuda_qstage_target *tg);
/* Around each matmul (cuda_matmul.cu): whether the hand-off is valid before it, and after it
 * keep it valid when the matmul wrote neither the producer's rows (y) nor its scratch there. */
int cuda_qstage_valid(clef_backend *be);
void cuda_qstage_after_matmul(clef_backend *be, int was_valid, const float *y, int64_t T, int64_t N, int64_t ldy,
                              const void *scratch, size_t scratch_bytes);
/* A producer whose fp32 output only the next matmul, on w, reads (cuda_swiglu_matmul): whether
 * that matmul reads the codes alone when it finds them (FP8 / INT8 ConvRot paths that never
 * fall back to reading x); whether it would find them now for T rows at x; and the matmul
 * itself, which fails (CLEF_ERR_INTERNAL) if it did not take them. */
int cuda_qstage_codes_only(clef_backend *be, const clef_matrix *w);
int cuda_qstage_takes(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w);
void cuda_matmul_codes_only(clef_backend *be, int64_t T, const float *x, const clef_matrix *w, float *y, int64_t ldy,
                            int accumulate, void *scratch);
/* The largest dynamic shared memory a block may opt into (bytes; cached per context). */
int cuda_smem_optin(clef_backend *be);

/* cuda_norm.cu */
void cuda_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                  const float *w, float eps, int add_one, float *y, int64_t ldy);
void cuda_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                        const float *z, int64_t ldz, const float *w, float eps, float *y, int64_t ldy);
void cuda_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                    const float *w, const float *b, float eps, float *y, int64_t ldy);
void cuda_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx);

/* cuda_elementwise.cu */
void cuda_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x,
                             int64_t ldx, const float *w, const float *prev, float *y, int64_t ldy,
                             const clef_seqs *seqs);
void cuda_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda, const float *b,
                    int64_t ldb, const float *a_log, const float *dt_bias, float *g, float *beta);
void cuda_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims, double theta,
                     const int64_t sections[3], int mrope_interleaved, float *cos_out, float *sin_out);
void cuda_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                     int64_t head_stride, int64_t rot_dims, const float *cos_t, const float *sin_t);
void cuda_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y);
void cuda_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                      const float *gate, int64_t ldgate);
void cuda_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y);
void cuda_swiglu_matmul(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                        const clef_matrix *w, float *out, int64_t ldo, int accumulate, void *scratch);
/* its first half: 1 when y was left unwritten, and the matmul must be cuda_matmul_codes_only */
int cuda_swiglu_for_matmul(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                           const clef_matrix *w);
void cuda_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y);
int cuda_fill_normal_bf16(clef_backend *be, void *dst, size_t n, float std, uint64_t seed);

/* cuda_gdn.cu */
void cuda_gdn(clef_backend *be, const clef_gdn_args *args, void *scratch);
size_t cuda_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args);

/* cuda_attention.cu */
void cuda_attention(clef_backend *be, const clef_attention_args *args, void *scratch);
size_t cuda_attention_workspace_size(clef_backend *be, const clef_attention_args *args);

/* cuda_flash.cu: the register-accumulator flash attention (head_dim 64/128/256 with scratch;
 * returns 0 otherwise), its scratch (bf16 K and V) and the once-per-backend check of the layout it assumes */
int cuda_flash_attention(clef_backend *be, const clef_attention_args *args, void *scratch);
size_t cuda_flash_workspace_size(int64_t n_kv, int64_t n_kv_heads, int64_t head_dim);
int cuda_flash_probe(clef_backend *be);

/* cuda_head_ops.cu */
void cuda_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs, const float *x,
                      int64_t ldx, const float *row_weight, float *y, int64_t ldy);
void cuda_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda, const int32_t *ia,
                  const float *b, int64_t ldb, const int32_t *ib, float scale, float eps, float *out);
void cuda_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets, const float *x, float *y);
void cuda_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx, const float *v,
                   int64_t ldv, const int32_t *idx, float *y, int64_t ldy);
void cuda_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f, int64_t ldf, const int32_t *idx,
                        const float *o, int64_t ldo, float *feat, int64_t ldfeat);
void cuda_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y);

#endif /* CLEF_BACKEND_CUDA_INTERNAL_CUH */
