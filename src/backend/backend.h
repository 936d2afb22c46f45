/*
 * backend.h — the op table every model (Qwen3.5 backbone, joint schema head, later vision) is
 * written against, once. A backend is a struct of function pointers plus a context; the CPU
 * backend (src/backend/cpu/) is the exact fp32 reference, later backends (CUDA) are held to it.
 * The model never branches on which backend it runs: it calls the clef_<op>() wrappers below,
 * which check arguments once (CLEF_ASSERT: a bad shape here is a bug in the model, not bad
 * input) and dispatch.
 *
 * Conventions shared by every op:
 *  - Activations are fp32, row-major, in backend memory (clef_backend_alloc). A "row" is one
 *    token (or one token-head). Wherever an op reads or writes a slice of a wider buffer it
 *    takes a leading dimension `ld*` = elements between consecutive rows, so the model can
 *    address q/k/v inside one projection output without copies.
 *  - Weights are typed matrices (clef_matrix, weight_format.h) [rows = out, cols = in], like
 *    torch.nn.Linear: y = x W^T, in any format of the traits table with its typed quantization
 *    descriptor. A backend says which formats it runs (supports_format); the loader refuses
 *    the others by tensor name. Weights are placed once, then handed to the backend's
 *    prepare step (prepare_matrix: pre-pack, widen, upload layout) before the first forward.
 *    An F32 clef_matrix may also wrap an activation buffer (e.g. K in attention scores).
 *  - Ops never allocate. Ops that need scratch memory say how much with a *_workspace_size
 *    query; the caller plans it at load time and passes it in.
 *  - Ops are asynchronous on devices that queue work; clef_backend_synchronize() waits and
 *    reports a device failure as a status. The CPU backend runs every op to completion.
 *  - in-place: an op may be called with y == x (same pointer and leading dimension) when its
 *    comment says "in place ok".
 *
 *  - Packed batches: rows of several sequences lie back to back. Ops that mix tokens (conv,
 *    delta rule, attention) take a clef_seqs (cu_seqlens style) and never let a sequence see
 *    another; every other op is row-wise and runs once over all rows as they are.
 *
 * Thread safety and forks: one clef_backend runs one op at a time (the CPU backend uses all
 * its threads inside each op). For concurrent forwards, fork it: clef_backend_fork(parent,
 * &child) gives a handle that shares the parent's device and memory (buffers allocated through
 * the parent, weights above all, are valid for every fork) but has its own queue/stream and
 * scratch, so forks may run ops at the same time. A fork must be freed before its parent.
 */
#ifndef CLEF_BACKEND_BACKEND_H
#define CLEF_BACKEND_BACKEND_H

#include "backend/weight_format.h"

#include <stddef.h>
#include <stdint.h>

/* ---- packed sequences ---------------------------------------------------------------------- */

/* n_seqs sequences packed back to back in the rows of an op (flash-attention's cu_seqlens):
 * sequence s is rows [start[s], start[s+1]). Offsets are given twice, as the host needs them to
 * plan work (loop bounds, grid sizes) and a device kernel needs them in its own memory; the
 * two copies hold the same values. An op passed NULL runs over one sequence of all its rows.
 * Workspace-size queries read only n_seqs and max_len. */
typedef struct clef_seqs {
    int64_t n_seqs;              /* >= 1 */
    const int64_t *start;        /* host memory, n_seqs + 1 offsets: start[0] = 0, increasing */
    const int32_t *start_dev;    /* backend memory, the same n_seqs + 1 offsets as int32 */
    int64_t max_len;             /* longest sequence (rows), >= every start[s+1] - start[s] */
} clef_seqs;

/* ---- argument blocks of the larger ops ---------------------------------------------------- */

/* Gated delta rule (Gated DeltaNet core), T tokens, all heads; with seqs, each sequence of
 * the T rows runs from its own S_0 (state[s], or 0) and no state crosses a boundary.
 * For each v-head h (its k-head is h / (n_v_heads / n_k_heads)), with S_0 = state or 0:
 *   q^ = q / sqrt(sum q^2 + 1e-6) / sqrt(dk);  k^ = k / sqrt(sum k^2 + 1e-6)   (if l2norm_qk)
 *   S~ = exp(g_t) S_{t-1};  S_t = S~ + k^_t (beta_t (v_t - S~^T k^_t))^T;  o_t = S_t^T q^_t
 * S is [dk, dv] per head. CLEF_GDN_CHUNKED evaluates the same function in chunks of 64
 * tokens (WY/UT form); CLEF_GDN_RECURRENT is the token-by-token reference. */
typedef enum clef_gdn_mode { CLEF_GDN_CHUNKED = 0, CLEF_GDN_RECURRENT = 1 } clef_gdn_mode;

typedef struct clef_gdn_args {
    int64_t T;                       /* tokens */
    int64_t n_k_heads, n_v_heads;    /* Hk, Hv (Hv a multiple of Hk) */
    int64_t dk, dv;                  /* key and value head dims */
    const float *q; int64_t ldq;     /* [T, Hk*dk] */
    const float *k; int64_t ldk;     /* [T, Hk*dk] */
    const float *v; int64_t ldv;     /* [T, Hv*dv] */
    const float *g;                  /* [T, Hv] log decay (<= 0), contiguous */
    const float *beta;               /* [T, Hv] write strength in (0, 1), contiguous */
    float *state;                    /* [n_seqs, Hv, dk, dv]: in = S_0, out = S_T of each sequence;
                                        NULL: S_0 = 0, not kept */
    float *o; int64_t ldo;           /* [T, Hv*dv] output */
    int l2norm_qk;                   /* 1: normalise q and k as above inside the op */
    clef_gdn_mode mode;
    const clef_seqs *seqs;           /* sequences of the T rows; NULL: one sequence */
} clef_gdn_args;

/* Scaled dot-product attention of n_q query rows over n_kv key rows, GQA: query head h uses
 * kv head h / (n_q_heads / n_kv_heads). Head h of row t of q is at q + t*ldq + h*q_head_stride
 * (likewise k, v, o), so interleaved layouts (Qwen3.5's [q | gate] per head) need no copy.
 * causal: query i sees keys j <= i + (n_kv - n_q) (queries are the last n_q positions).
 * Non-causal with n_q != n_kv is cross-attention (the head's routing and decoder layers).
 * seqs (self-attention over packed sequences, n_q == n_kv): the rows of sequence s attend
 * only to the rows of sequence s, causal within it when causal is set. */
typedef struct clef_attention_args {
    int64_t n_q, n_kv;
    int64_t n_q_heads, n_kv_heads, head_dim;
    const float *q; int64_t ldq, q_head_stride;
    const float *k; int64_t ldk, k_head_stride;
    const float *v; int64_t ldv, v_head_stride;
    float *o; int64_t ldo, o_head_stride;
    float scale;                     /* usually 1/sqrt(head_dim) */
    int causal;
    const clef_seqs *seqs;           /* NULL: one sequence (or cross-attention) */
} clef_attention_args;

/* Elementwise functions (fp32, exactly as torch defines them). */
typedef enum clef_unary_op {
    CLEF_UNARY_SILU = 0,      /* x * sigmoid(x) */
    CLEF_UNARY_GELU_ERF,      /* 0.5 x (1 + erf(x / sqrt 2))   nn.GELU() */
    CLEF_UNARY_GELU_TANH,     /* nn.GELU(approximate="tanh") */
    CLEF_UNARY_SIGMOID,
    CLEF_UNARY_SOFTPLUS,      /* log(1 + exp(x)), = x for x > 20 (torch threshold) */
    CLEF_UNARY_EXP,
    CLEF_UNARY_COUNT
} clef_unary_op;

/* One segment of clef_segment_sum (see segment_sum in the op table). */
typedef struct clef_segment {
    int32_t dst;        /* output row */
    int32_t begin, end; /* rows [begin, end) of x; begin <= end */
    int32_t count;      /* divisor of a mean (> 0; the whole segment's rows when its rows
                         * arrive in several calls); unused with row weights */
    int32_t accumulate; /* 1: add into y[dst]; 0: overwrite y[dst] */
} clef_segment;

/* Device memory facts of one backend handle (clef_backend_memory). */
typedef struct clef_backend_memory_info {
    size_t resident;       /* device bytes this handle has allocated now (its buffers, its own
                              scratch and workspaces); forks count their own */
    size_t peak;           /* the most it ever held */
    size_t device_used;    /* the device's bytes in use by every process (driver's view) */
    size_t device_total;   /* the device's memory */
} clef_backend_memory_info;

/* ---- the op table ------------------------------------------------------------------------- */

typedef struct clef_backend clef_backend;
typedef struct clef_graph clef_graph; /* a recording of queued ops (see capture_begin) */

typedef struct clef_backend_ops {
    const char *name; /* "cpu" */
    void (*free)(clef_backend *be);
    /* A handle on the same device and memory with its own queue and scratch (see the file
     * comment). CLEF_OK and *child, or a negative status. */
    int (*fork)(clef_backend *parent, clef_backend **child);

    /* memory (backend buffers hold weights and activations) */
    void *(*alloc)(clef_backend *be, size_t bytes);          /* NULL on failure; 64-byte aligned */
    void (*release)(clef_backend *be, void *buf);            /* accepts NULL */
    /* write: returns when host_src may be reused; ordered with the ops of this backend (an
     * op queued before it sees the old bytes, one queued after it the new). read: call
     * synchronize first; the only way results come back to the host. Model code never
     * dereferences backend memory (clef_backend_params.guard_host_access catches it). */
    int (*write)(clef_backend *be, void *dst, const void *host_src, size_t bytes);
    int (*read)(clef_backend *be, void *host_dst, const void *src, size_t bytes);
    int (*synchronize)(clef_backend *be);

    /* Weight formats. supports_format: 1 if matmul runs matrices of type t (as they are after
     * prepare_matrix) and get_rows runs them both prepared and as stored (a lookup table
     * skips the prepare step: weight_loader.h). NULL: F32 and BF16 only. */
    int (*supports_format)(clef_backend *be, clef_wtype t);

    /* The prepare step of a weight matrix, once at load (optional: NULL prepared_size = the
     * stored form is what matmul runs). prepared_size: bytes of backend memory the prepared
     * form of w needs, 0 = none (w runs as stored). prepare_matrix: build it in dst (that
     * many bytes, allocated by the caller, 64-byte aligned) from w (stored form, backend
     * memory) and describe it in *out (type, data, packed, ... pointing into dst; quant and
     * quant_row0 kept). w's memory may be released by the caller afterwards. Returns a
     * clef_status. */
    size_t (*prepared_size)(clef_backend *be, const clef_matrix *w);
    int (*prepare_matrix)(clef_backend *be, const clef_matrix *w, void *dst, clef_matrix *out);

    /* y[t, :] (+)= x[t, :] W^T (+ bias), t < T. x [T, W.cols], y [T, W.rows]; bias [W.rows] or
     * NULL; accumulate: add into y instead of overwriting. Row t of y depends only on row t
     * of x (results are identical whatever else is in the batch). scratch: at least
     * matmul_workspace_size(be, T_max >= T, w) bytes planned by the caller, or NULL to use
     * the backend handle's own scratch (allocated at create; one op at a time per handle). */
    void (*matmul)(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                   const float *bias, float *y, int64_t ldy, int accumulate, void *scratch);
    size_t (*matmul_workspace_size)(clef_backend *be, int64_t T, const clef_matrix *w);

    /* y[t, :] = E[ids[t], :] as fp32 (embedding lookup); ids in backend memory. */
    void (*get_rows)(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids,
                     float *y, int64_t ldy);

    /* RMSNorm per row: y = x * rsqrt(mean(x^2) + eps) * (add_one ? 1 + w : w); w NULL: no
     * weight. In place ok. */
    void (*rmsnorm)(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                    const float *w, float eps, int add_one, float *y, int64_t ldy);

    /* Gated RMSNorm per row: y = x * rsqrt(mean(x^2) + eps) * w * silu(z). In place ok. */
    void (*rmsnorm_gated)(clef_backend *be, int64_t rows, int64_t dim, const float *x,
                          int64_t ldx, const float *z, int64_t ldz, const float *w, float eps,
                          float *y, int64_t ldy);

    /* LayerNorm per row (biased variance): y = (x - mean) * rsqrt(var + eps) * w + b; w, b
     * may be NULL. In place ok. */
    void (*layernorm)(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                      const float *w, const float *b, float eps, float *y, int64_t ldy);

    /* Causal depthwise conv1d + SiLU over T rows of C channels, kernel K:
     * y[t, c] = silu(sum_{i<K} w[c, i] * x[t-K+1+i, c]), rows before 0 taken from prev
     * [K-1, C] (oldest first) or 0 when prev is NULL. w [C, K] fp32. Not in place.
     * seqs: t counts from each sequence's first row, and prev is [n_seqs, K-1, C]. */
    void (*conv1d_causal_silu)(clef_backend *be, int64_t T, int64_t C, int64_t K,
                               const float *x, int64_t ldx, const float *w, const float *prev,
                               float *y, int64_t ldy, const clef_seqs *seqs);

    /* GDN gates, per (t, h): beta = sigmoid(b[t,h]); g = -exp(A_log[h]) * softplus(a[t,h] +
     * dt_bias[h]). a, b [T, H] with leading dims; g, beta [T, H] contiguous. */
    void (*gdn_gates)(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda,
                      const float *b, int64_t ldb, const float *a_log, const float *dt_bias,
                      float *g, float *beta);

    /* Gated delta rule, see clef_gdn_args. scratch holds gdn_workspace_size() bytes. */
    void (*gdn)(clef_backend *be, const clef_gdn_args *args, void *scratch);
    size_t (*gdn_workspace_size)(clef_backend *be, const clef_gdn_args *args);

    /* RoPE tables for rot_dims rotary dims of T positions: cos, sin [T, rot_dims] (the
     * duplicated [phi, phi] layout). pos [3, T] int32 in backend memory (T/H/W axes; text:
     * all three = t). Frequency j < rot_dims/2 takes its position from axis
     * sections_axis(j): with mrope_interleaved, H for j % 3 == 1 and j < 3*sections[1], W for
     * j % 3 == 2 and j < 3*sections[2], T otherwise; without, contiguous sections T, H, W.
     * inv_freq_j = theta^(-2j/rot_dims); phi = fp32(pos * inv_freq_j) as transformers. */
    void (*rope_table)(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims,
                       double theta, const int64_t sections[3], int mrope_interleaved,
                       float *cos_out, float *sin_out);

    /* Apply RoPE in place to the first rot_dims dims of each head: x = x cos +
     * rotate_half(x) sin, rotate_half(x) = [-x[h:], x[:h]], h = rot_dims/2. Head hd of row t
     * at x + t*ldx + hd*head_stride. cos, sin [T, rot_dims] from rope_table: one row per row
     * of x, built from each row's own position, so packed sequences need no offsets here. */
    void (*rope_apply)(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                       int64_t head_stride, int64_t rot_dims, const float *cos_t,
                       const float *sin_t);

    /* Attention, see clef_attention_args. scratch holds attention_workspace_size() bytes. */
    void (*attention)(clef_backend *be, const clef_attention_args *args, void *scratch);
    size_t (*attention_workspace_size)(clef_backend *be, const clef_attention_args *args);

    /* Softmax over each row's first cols elements, in place. */
    void (*softmax)(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx);

    /* y = op(x) elementwise over n contiguous floats. In place ok. */
    void (*unary)(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y);

    /* x[r, c] *= sigmoid(gate[r, c]) for r < rows, c < cols (attention output gate). */
    void (*mul_sigmoid)(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                        const float *gate, int64_t ldgate);

    /* y = silu(gate) * up elementwise over n contiguous floats (SwiGLU). y may alias gate. */
    void (*swiglu)(clef_backend *be, int64_t n, const float *gate, const float *up, float *y);

    /* The MLP's down projection of its SwiGLU: y = silu(gate) * up over T rows of K = w->cols
     * contiguous floats (y may alias gate), then out = y w^T (+= out when accumulate) as
     * matmul does with scratch. Afterwards y's values are unspecified: a backend whose matmul
     * takes its input in another form (the CUDA backend's quantized hand-off: the codes an
     * FP8 / INT8 matmul reads) may leave y unwritten. NULL: swiglu, then matmul (the CPU). */
    void (*swiglu_matmul)(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                          const clef_matrix *w, float *out, int64_t ldo, int accumulate, void *scratch);

    /* y = a + b elementwise over n contiguous floats. y may alias a or b. */
    void (*add)(clef_backend *be, int64_t n, const float *a, const float *b, float *y);

    /* ==== head ops: the reductions of the joint schema head (src/model/joint_head.c) ======
     * The head computes nothing on the host; what used to be host loops over backend memory
     * are the ops below. Index arrays (segments, row indices, offsets) live in backend memory
     * like every other operand: the model stages them with clef_backend_write. Every
     * reduction accumulates in double and rounds to fp32 once, so the result does not depend
     * on the thread count or on how the backend splits the work. */

    /* Segment sums of rows: for each s < n_seg, with g = segs[s], in double,
     *   acc = sum over rows r in [g.begin, g.end) of row_weight[r] * x[r, :dim]   (weights)
     *   acc = (sum over rows r in [g.begin, g.end) of x[r, :dim]) / g.count   (row_weight NULL)
     *   y[g.dst, :] = (g.accumulate ? y[g.dst, :] : 0) + (float)acc.
     * Covers span means (row_weight NULL, count = span length), a mean whose rows arrive in
     * several pieces (later pieces with accumulate = 1) and attention-style weighted sums
     * (row_weight = softmax weights). No two segments of one call may share a dst. */
    void (*segment_sum)(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs,
                        const float *x, int64_t ldx, const float *row_weight, float *y,
                        int64_t ldy);

    /* Row dot products, for i < n (ia, ib NULL: row i):
     *   out[i] = scale * <a[ia[i], :dim], b[ib[i], :dim]> / (max(|a_i|, eps) * max(|b_i|, eps))
     * with eps > 0 (cosine similarity, or the dot of two F.normalize'd rows), and without the
     * division when eps == 0 (plain dot product). Dots and norms in double. */
    void (*row_dot)(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda,
                    const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib,
                    float scale, float eps, float *out);

    /* Softmax within segments of a vector: for s < n_seg, over i in [offsets[s],
     * offsets[s+1]) (cu_seqlens-style offsets, n_seg + 1 of them, non-decreasing):
     * y[i] = exp(x[i] - max) / sum exp(x[j] - max), in double. y may alias x. */
    void (*segment_softmax)(clef_backend *be, int64_t n_seg, const int32_t *offsets,
                            const float *x, float *y);

    /* Row broadcast / gathered add: y[r, c] = x[r, c] + v[idx ? idx[r] : 0, c] for r < rows,
     * c < cols (idx NULL: the single row v is added to every row). In place ok (y == x). */
    void (*add_rows)(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                     const float *v, int64_t ldv, const int32_t *idx, float *y, int64_t ldy);

    /* Pair features of the head's residual scorer, for r < rows, with f_r = f[idx[r], :dim]
     * and o_r = o[r, :dim]: feat[r, :4 dim] = [f_r, o_r, f_r * o_r, |f_r - o_r|] (fp32). */
    void (*pair_features)(clef_backend *be, int64_t rows, int64_t dim, const float *f,
                          int64_t ldf, const int32_t *idx, const float *o, int64_t ldo,
                          float *feat, int64_t ldfeat);

    /* y[i] += alpha * x[i] over n contiguous floats (fp32, one rounding per product and one
     * per sum). */
    void (*axpy)(clef_backend *be, int64_t n, float alpha, const float *x, float *y);
    /* ==== end of head ops ================================================================== */

    /* ==== memory facts and host staging (optional slots, NULL on the CPU) =================
     * memory: what this handle holds on its device and the device as a whole (see
     * clef_backend_memory). NULL: nothing is counted (host memory).
     * host_alloc / host_free: host memory the backend copies from fastest (page-locked on a
     * GPU, so clef_backend_write DMAs straight from it); the weight loader stages through it.
     * NULL: malloc / free. host_alloc returns NULL on failure. */
    int (*memory)(clef_backend *be, clef_backend_memory_info *out);
    void *(*host_alloc)(clef_backend *be, size_t bytes);
    void (*host_free)(clef_backend *be, void *ptr);

    /* write_async (optional, NULL: write): queue the copy of bytes from host_src, host
     * staging memory of host_alloc, to dst in the handle's order and return before it is
     * done, so the caller can fill another staging buffer meanwhile. host_src must stay
     * unchanged until synchronize returns (the weight loader alternates two buffers). */
    int (*write_async)(clef_backend *be, void *dst, const void *host_src, size_t bytes);

    /* ==== recordings (optional slots, NULL on the CPU) ====================================
     * A device that queues work can record the ops called between capture_begin and
     * capture_end instead of running them, and replay the recording later with one
     * graph_launch, so the host's per-op launch cost leaves the critical path. A recording
     * keeps every operand address and size it saw: the caller replays it only for the same
     * calls on the same buffers, whose contents may change (host writes go before the
     * launch). Between begin and end only ops are called: no write, read, synchronize, alloc
     * or release. Run the ops once directly first: buffers an op grows on first use, and
     * other first-use setup, cannot happen while recording.
     * capture_end: CLEF_OK and *graph, or a negative status and *graph NULL when something in
     * between could not be recorded (e.g. an op needed a bigger buffer). Nothing ran then: the
     * caller runs the same ops directly; the handle's status is as before capture_begin.
     * graph_launch: queue the recorded work, in order with the handle's other work; returns
     * CLEF_GRAPH_STALE (nothing queued) when a buffer of the backend's own that the recording
     * uses has moved since (the caller frees it, runs directly, records again).
     * graph_free accepts NULL. */
    int (*capture_begin)(clef_backend *be);
    int (*capture_end)(clef_backend *be, clef_graph **graph);
    int (*graph_launch)(clef_backend *be, clef_graph *graph);
    void (*graph_free)(clef_backend *be, clef_graph *graph);
} clef_backend_ops;

/* graph_launch's answer for a recording whose backend buffers have moved (> 0: not an error). */
#define CLEF_GRAPH_STALE 1

struct clef_backend {
    const clef_backend_ops *ops;
    void *ctx;          /* the implementation's state */
    int n_threads;      /* worker threads the backend uses per op */
    int host_visible;   /* 1: buffers are host memory, so a weight loader may read tensors
                         * straight in; model forward code never looks at it (and never
                         * dereferences backend memory, see write/read above) */
};

/* ---- creation ------------------------------------------------------------------------------ */

typedef struct clef_backend_params {
    int n_threads; /* CPU worker threads; 0 = all available (OpenMP default) */
    /* CPU only, for tests: 1 = buffers are readable and writable only inside the backend's
     * ops, read and write (an mprotect'ed arena; any other access faults), so a test proves
     * the model never touches backend memory from the host. host_visible is 0 then. Same
     * results, bit for bit, as the plain CPU backend. 0 = ordinary host memory. */
    int guard_host_access;
    size_t guard_arena_bytes; /* address space reserved for the guarded arena; 0 = 8 GiB */
} clef_backend_params;

clef_backend_params clef_backend_default_params(void);

/* The CPU backend (fp32 reference). Returns CLEF_OK and *out, or a negative status. */
int clef_backend_cpu_create(const clef_backend_params *params, clef_backend **out);
void clef_backend_free(clef_backend *be); /* accepts NULL; a fork before its parent */

/* A fork of parent (see the file comment): same device and memory, own queue and scratch.
 * CLEF_OK and *child (free with clef_backend_free), or a negative status and *child NULL. */
int clef_backend_fork(clef_backend *parent, clef_backend **child);

/* ---- dispatch (argument checks once, then the backend's op) --------------------------------- */

void *clef_backend_alloc(clef_backend *be, size_t bytes);
void clef_backend_release(clef_backend *be, void *buf);
int clef_backend_write(clef_backend *be, void *dst, const void *host_src, size_t bytes);
int clef_backend_read(clef_backend *be, void *host_dst, const void *src, size_t bytes);
int clef_backend_synchronize(clef_backend *be);

/* Fill *out (zeros where the backend counts nothing: the CPU). Returns a clef_status. */
int clef_backend_memory(clef_backend *be, clef_backend_memory_info *out);
/* Staging memory the backend copies from fastest (see host_alloc), and its release (accepts
 * NULL). Falls back to malloc / free. */
void *clef_backend_host_alloc(clef_backend *be, size_t bytes);
void clef_backend_host_free(clef_backend *be, void *ptr);
/* write_async where the backend has it, else write (see the op's comment). */
int clef_backend_write_async(clef_backend *be, void *dst, const void *host_src, size_t bytes);

/* Recordings (see capture_begin): 1 when be has them. capture_begin returns
 * CLEF_ERR_UNSUPPORTED on a backend without them. */
int clef_backend_can_capture(const clef_backend *be);
int clef_backend_capture_begin(clef_backend *be);
int clef_backend_capture_end(clef_backend *be, clef_graph **graph);
int clef_backend_graph_launch(clef_backend *be, clef_graph *graph);
void clef_backend_graph_free(clef_backend *be, clef_graph *graph);

/* 1 if be runs matrices of type t (see supports_format). */
int clef_backend_supports_format(clef_backend *be, clef_wtype t);
/* The prepare step (see prepared_size / prepare_matrix): size 0 = nothing to prepare. */
size_t clef_backend_prepared_size(clef_backend *be, const clef_matrix *w);
int clef_backend_prepare_matrix(clef_backend *be, const clef_matrix *w, void *dst,
                                clef_matrix *out);

/* matmul with the backend handle's own scratch, and with scratch planned by the caller
 * (clef_matmul_workspace_size(be, T_max, w) bytes, for any T <= T_max). */
void clef_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                 const float *bias, float *y, int64_t ldy, int accumulate);
void clef_matmul_scratch(clef_backend *be, int64_t T, const float *x, int64_t ldx,
                         const clef_matrix *w, const float *bias, float *y, int64_t ldy,
                         int accumulate, void *scratch);
size_t clef_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w);
void clef_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids,
                   float *y, int64_t ldy);
void clef_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                  const float *w, float eps, int add_one, float *y, int64_t ldy);
void clef_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                        const float *z, int64_t ldz, const float *w, float eps, float *y,
                        int64_t ldy);
void clef_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                    const float *w, const float *b, float eps, float *y, int64_t ldy);
void clef_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x,
                             int64_t ldx, const float *w, const float *prev, float *y,
                             int64_t ldy, const clef_seqs *seqs);
void clef_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda,
                    const float *b, int64_t ldb, const float *a_log, const float *dt_bias,
                    float *g, float *beta);
void clef_gdn(clef_backend *be, const clef_gdn_args *args, void *scratch);
size_t clef_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args);
void clef_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims,
                     double theta, const int64_t sections[3], int mrope_interleaved,
                     float *cos_out, float *sin_out);
void clef_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                     int64_t head_stride, int64_t rot_dims, const float *cos_t,
                     const float *sin_t);
void clef_attention(clef_backend *be, const clef_attention_args *args, void *scratch);
size_t clef_attention_workspace_size(clef_backend *be, const clef_attention_args *args);
void clef_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx);
void clef_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y);
void clef_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                      const float *gate, int64_t ldgate);
void clef_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y);
void clef_swiglu_matmul(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                        const clef_matrix *w, float *out, int64_t ldo, int accumulate, void *scratch);
void clef_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y);

/* head ops (see the op table) */
void clef_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs,
                      const float *x, int64_t ldx, const float *row_weight, float *y,
                      int64_t ldy);
void clef_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda,
                  const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib, float scale,
                  float eps, float *out);
void clef_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets,
                          const float *x, float *y);
void clef_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                   const float *v, int64_t ldv, const int32_t *idx, float *y, int64_t ldy);
void clef_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f,
                        int64_t ldf, const int32_t *idx, const float *o, int64_t ldo,
                        float *feat, int64_t ldfeat);
void clef_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y);

#endif /* CLEF_BACKEND_BACKEND_H */
