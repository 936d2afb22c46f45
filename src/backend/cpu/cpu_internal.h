/*
 * cpu_internal.h — what the files of the CPU backend share: the backend context (thread
 * count, one GEMM packing buffer per thread, allocated at create so no op allocates) and the
 * op implementations each file provides to the table in cpu_backend.c.
 */
#ifndef CLEF_BACKEND_CPU_INTERNAL_H
#define CLEF_BACKEND_CPU_INTERNAL_H

#include "backend/backend.h"
#include "backend/cpu/cpu_gemm.h"

typedef struct cpu_guard cpu_guard;

typedef struct cpu_context {
    int n_threads;
    float **pack; /* [n_threads] buffers of CPU_GEMM_PACK_FLOATS floats */
    void *quant_scratch;       /* a quantized matmul's scratch when the caller planned none */
    size_t quant_scratch_bytes; /* (cpu_quant_matmul.c: grown on demand, freed with the handle) */
    cpu_guard *guard;              /* guarded variant only: the protected arena, else NULL */
    int shares_guard;              /* 1: a fork; guard is the parent's (not freed here) */
    clef_backend_ops guarded_ops;  /* guarded variant only: its op table */
} cpu_context;

static inline cpu_context *cpu_ctx(clef_backend *be) { return (cpu_context *)be->ctx; }

/* The packing buffer of the calling OpenMP thread (0 outside a parallel region). */
float *cpu_thread_pack(clef_backend *be);

/* Thread tid's packing buffer inside a matmul scratch of cpu_matmul_workspace_size bytes. */
#define CPU_PACK_BYTES ((CPU_GEMM_PACK_FLOATS * sizeof(float) + 63) / 64 * 64)
static inline float *cpu_scratch_pack(void *scratch, int tid) {
    return (float *)(void *)((char *)scratch + (size_t)tid * CPU_PACK_BYTES);
}

/* cpu_matmul.c */
void cpu_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
void cpu_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids, float *y,
                  int64_t ldy);

/* cpu_weights.c: the weight formats the CPU runs and their prepare step */
int cpu_supports_format(clef_backend *be, clef_wtype t);
/* cpu_matmul of an NF4 / FP8 / INT8 ConvRot matrix (cpu_quant_matmul.c, src/quant kernels);
 * scratch: cpu_quant_workspace_size(be, T_max >= T, w) bytes planned by the caller, or NULL
 * for the handle's own (quant_scratch above). */
void cpu_quant_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx,
                      const clef_matrix *w, const float *bias, float *y, int64_t ldy,
                      int accumulate, void *scratch);
size_t cpu_quant_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w);
size_t cpu_prepared_size(clef_backend *be, const clef_matrix *w);
int cpu_prepare_matrix(clef_backend *be, const clef_matrix *w, void *dst, clef_matrix *out);
size_t cpu_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w);

/* cpu_norm.c */
void cpu_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                 const float *w, float eps, int add_one, float *y, int64_t ldy);
void cpu_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                       const float *z, int64_t ldz, const float *w, float eps, float *y,
                       int64_t ldy);
void cpu_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                   const float *w, const float *b, float eps, float *y, int64_t ldy);

/* cpu_elementwise.c */
float cpu_silu(float x);
float cpu_sigmoid(float x);
float cpu_softplus(float x);
void cpu_silu_n(int64_t n, const float *x, float *y); /* vectorised; same values as cpu_silu */
void cpu_exp_n(int64_t n, const float *x, float *y);  /* vectorised; same values as cpu_exp1 */
void cpu_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx);
void cpu_softmax_row(float *x, int64_t n);
void cpu_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y);
void cpu_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                     const float *gate, int64_t ldgate);
void cpu_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y);
void cpu_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y);

/* cpu_conv.c */
void cpu_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x,
                            int64_t ldx, const float *w, const float *prev, float *y, int64_t ldy);

/* cpu_rope.c */
void cpu_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims,
                    double theta, const int64_t sections[3], int mrope_interleaved,
                    float *cos_out, float *sin_out);
void cpu_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                    int64_t head_stride, int64_t rot_dims, const float *cos_t, const float *sin_t);

/* cpu_attention.c */
void cpu_attention(clef_backend *be, const clef_attention_args *args, void *scratch);
size_t cpu_attention_workspace_size(clef_backend *be, const clef_attention_args *args);

/* cpu_gdn.c */
void cpu_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda,
                   const float *b, int64_t ldb, const float *a_log, const float *dt_bias,
                   float *g, float *beta);
void cpu_gdn(clef_backend *be, const clef_gdn_args *args, void *scratch);
size_t cpu_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args);

/* cpu_seqs.c: the op-table entries for packed sequences (clef_seqs), looping the kernels
 * above over the sequences */
void cpu_conv1d_causal_silu_seqs(clef_backend *be, int64_t T, int64_t C, int64_t K,
                                 const float *x, int64_t ldx, const float *w, const float *prev,
                                 float *y, int64_t ldy, const clef_seqs *seqs);
void cpu_gdn_seqs(clef_backend *be, const clef_gdn_args *args, void *scratch);
size_t cpu_gdn_workspace_size_seqs(clef_backend *be, const clef_gdn_args *args);
void cpu_attention_seqs(clef_backend *be, const clef_attention_args *args, void *scratch);
size_t cpu_attention_workspace_size_seqs(clef_backend *be, const clef_attention_args *args);

/* cpu_guard.c: the guarded variant (clef_backend_params.guard_host_access). */
int cpu_guard_create(size_t reserve_bytes, cpu_guard **out);
void cpu_guard_free(cpu_guard *g); /* accepts NULL */
void cpu_guard_ops(const clef_backend_ops *plain, clef_backend_ops *out);

/* cpu_head_ops.c (the head ops section of the op table) */
void cpu_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs,
                     const float *x, int64_t ldx, const float *row_weight, float *y,
                     int64_t ldy);
void cpu_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda,
                 const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib, float scale,
                 float eps, float *out);
void cpu_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets,
                         const float *x, float *y);
void cpu_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                  const float *v, int64_t ldv, const int32_t *idx, float *y, int64_t ldy);
void cpu_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f,
                       int64_t ldf, const int32_t *idx, const float *o, int64_t ldo,
                       float *feat, int64_t ldfeat);
void cpu_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y);

#endif /* CLEF_BACKEND_CPU_INTERNAL_H */
