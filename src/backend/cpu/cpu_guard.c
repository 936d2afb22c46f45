/*
 * cpu_guard.c — the guarded CPU backend (clef_backend_params.guard_host_access): the plain
 * CPU ops over buffers the host may not touch. Every buffer lives in one arena of reserved
 * address space that is mapped PROT_NONE except while the backend itself runs an op, a read
 * or a write; so any dereference of backend memory by model code faults (SIGSEGV, reported
 * by AddressSanitizer in sanitizer builds). It exists to prove, in a test, that the model
 * brings results back only through clef_backend_read — what a GPU backend requires — and it
 * gives the same bits as the plain CPU backend because it runs the same op functions.
 *
 * Arena: a bump allocator over the reservation (64-byte aligned blocks). A released block is
 * given back to the kernel (madvise) but its addresses are not reused until every block is
 * released, when the arena starts over; that is enough for tests, which load, run and free.
 * Several threads may run ops on one arena at once (forked handles sharing the parent's
 * memory): the arena is opened by the first op to enter and closed by the last to leave
 * (a count under a mutex), and a block allocated while it is open is opened at once. While
 * any op runs, a host access from another thread goes unnoticed; the tests that use the guard
 * run one op at a time.
 */
#include "backend/cpu/cpu_internal.h"

#include "core/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct cpu_guard {
    pthread_mutex_t lock; /* guards every field below */
    char *base;           /* the reservation */
    size_t reserved;      /* its bytes */
    size_t used;          /* bump pointer */
    size_t open_bytes;    /* bytes currently mapped read-write (a page multiple >= used) */
    int open_count;       /* ops, reads and writes running now */
    size_t live;          /* blocks allocated and not yet released */
    size_t page;
};

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

int cpu_guard_create(size_t reserve_bytes, cpu_guard **out) {
    cpu_guard *g = calloc(1, sizeof *g);
    if (!g)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "guarded cpu backend: out of memory");
    g->page = (size_t)sysconf(_SC_PAGESIZE);
    g->reserved = round_up(reserve_bytes ? reserve_bytes : (size_t)8 << 30, g->page);
    void *p = mmap(NULL, g->reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        free(g);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY,
                         "guarded cpu backend: cannot reserve %zu bytes of address space",
                         reserve_bytes);
    }
    g->base = p;
    pthread_mutex_init(&g->lock, NULL);
    *out = g;
    return CLEF_OK;
}

void cpu_guard_free(cpu_guard *g) {
    if (!g)
        return;
    munmap(g->base, g->reserved);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Map the used pages read-write up to `used` (lock held). */
static void open_to_used(cpu_guard *g) {
    size_t bytes = round_up(g->used, g->page);
    if (bytes > g->open_bytes)
        CLEF_ASSERT(mprotect(g->base + g->open_bytes, bytes - g->open_bytes,
                             PROT_READ | PROT_WRITE) == 0);
    g->open_bytes = bytes > g->open_bytes ? bytes : g->open_bytes;
}

/* Make the arena accessible for the op about to run (open) or, when the last running op
 * leaves, inaccessible again (close). */
static void guard_open(clef_backend *be) {
    cpu_guard *g = cpu_ctx(be)->guard;
    pthread_mutex_lock(&g->lock);
    if (g->open_count++ == 0)
        open_to_used(g);
    pthread_mutex_unlock(&g->lock);
}

static void guard_close(clef_backend *be) {
    cpu_guard *g = cpu_ctx(be)->guard;
    pthread_mutex_lock(&g->lock);
    CLEF_ASSERT(g->open_count > 0);
    if (--g->open_count == 0 && g->open_bytes) {
        CLEF_ASSERT(mprotect(g->base, g->open_bytes, PROT_NONE) == 0);
        g->open_bytes = 0;
    }
    pthread_mutex_unlock(&g->lock);
}

static void *guard_alloc(clef_backend *be, size_t bytes) {
    cpu_guard *g = cpu_ctx(be)->guard;
    size_t size = round_up(bytes ? bytes : 1, 64);
    void *p = NULL;
    pthread_mutex_lock(&g->lock);
    if (size <= g->reserved - g->used) {
        p = g->base + g->used;
        g->used += size;
        g->live++;
        if (g->open_count) /* ops are running on this arena: the new block is open too */
            open_to_used(g);
    }
    pthread_mutex_unlock(&g->lock);
    return p;
}

static void guard_release(clef_backend *be, void *buf) {
    cpu_guard *g = cpu_ctx(be)->guard;
    if (!buf)
        return;
    pthread_mutex_lock(&g->lock);
    CLEF_ASSERT((char *)buf >= g->base && (char *)buf < g->base + g->used && g->live > 0);
    if (--g->live == 0 && g->open_count == 0) {
        /* everything released: give the pages back and start over */
        madvise(g->base, round_up(g->used, g->page), MADV_DONTNEED);
        g->used = 0;
    }
    pthread_mutex_unlock(&g->lock);
}

static int guard_write(clef_backend *be, void *dst, const void *host_src, size_t bytes) {
    guard_open(be);
    memmove(dst, host_src, bytes);
    guard_close(be);
    return CLEF_OK;
}

static int guard_read(clef_backend *be, void *host_dst, const void *src, size_t bytes) {
    guard_open(be);
    memmove(host_dst, src, bytes);
    guard_close(be);
    return CLEF_OK;
}

static int guard_synchronize(clef_backend *be) {
    (void)be;
    return CLEF_OK;
}

/* ---- the ops: open, run the plain CPU op, close ------------------------------------------- */

static void guarded_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx,
                           const clef_matrix *w, const float *bias, float *y, int64_t ldy,
                           int accumulate, void *scratch) {
    guard_open(be);
    cpu_matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
    guard_close(be);
}

static int guarded_prepare_matrix(clef_backend *be, const clef_matrix *w, void *dst,
                                  clef_matrix *out) {
    guard_open(be);
    int st = cpu_prepare_matrix(be, w, dst, out);
    guard_close(be);
    return st;
}

static void guarded_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids,
                             float *y, int64_t ldy) {
    guard_open(be);
    cpu_get_rows(be, e, n, ids, y, ldy);
    guard_close(be);
}

static void guarded_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x,
                            int64_t ldx, const float *w, float eps, int add_one, float *y,
                            int64_t ldy) {
    guard_open(be);
    cpu_rmsnorm(be, rows, dim, x, ldx, w, eps, add_one, y, ldy);
    guard_close(be);
}

static void guarded_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x,
                                  int64_t ldx, const float *z, int64_t ldz, const float *w,
                                  float eps, float *y, int64_t ldy) {
    guard_open(be);
    cpu_rmsnorm_gated(be, rows, dim, x, ldx, z, ldz, w, eps, y, ldy);
    guard_close(be);
}

static void guarded_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x,
                              int64_t ldx, const float *w, const float *b, float eps, float *y,
                              int64_t ldy) {
    guard_open(be);
    cpu_layernorm(be, rows, dim, x, ldx, w, b, eps, y, ldy);
    guard_close(be);
}

static void guarded_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K,
                                       const float *x, int64_t ldx, const float *w,
                                       const float *prev, float *y, int64_t ldy,
                                       const clef_seqs *seqs) {
    guard_open(be);
    cpu_conv1d_causal_silu_seqs(be, T, C, K, x, ldx, w, prev, y, ldy, seqs);
    guard_close(be);
}

static void guarded_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda,
                              const float *b, int64_t ldb, const float *a_log, const float *dt_bias,
                              float *g, float *beta) {
    guard_open(be);
    cpu_gdn_gates(be, T, H, a, lda, b, ldb, a_log, dt_bias, g, beta);
    guard_close(be);
}

static void guarded_gdn(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    guard_open(be);
    cpu_gdn_seqs(be, args, scratch);
    guard_close(be);
}

static void guarded_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims,
                               double theta, const int64_t sections[3], int mrope_interleaved,
                               float *cos_out, float *sin_out) {
    guard_open(be);
    cpu_rope_table(be, T, pos, rot_dims, theta, sections, mrope_interleaved, cos_out, sin_out);
    guard_close(be);
}

static void guarded_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                               int64_t head_stride, int64_t rot_dims, const float *cos_t,
                               const float *sin_t) {
    guard_open(be);
    cpu_rope_apply(be, T, n_heads, x, ldx, head_stride, rot_dims, cos_t, sin_t);
    guard_close(be);
}

static void guarded_attention(clef_backend *be, const clef_attention_args *args, void *scratch) {
    guard_open(be);
    cpu_attention_seqs(be, args, scratch);
    guard_close(be);
}

static void guarded_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx) {
    guard_open(be);
    cpu_softmax(be, rows, cols, x, ldx);
    guard_close(be);
}

static void guarded_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y) {
    guard_open(be);
    cpu_unary(be, op, n, x, y);
    guard_close(be);
}

static void guarded_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                                const float *gate, int64_t ldgate) {
    guard_open(be);
    cpu_mul_sigmoid(be, rows, cols, x, ldx, gate, ldgate);
    guard_close(be);
}

static void guarded_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up,
                           float *y) {
    guard_open(be);
    cpu_swiglu(be, n, gate, up, y);
    guard_close(be);
}

static void guarded_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y) {
    guard_open(be);
    cpu_add(be, n, a, b, y);
    guard_close(be);
}

static void guarded_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim,
                                const clef_segment *segs, const float *x, int64_t ldx,
                                const float *row_weight, float *y, int64_t ldy) {
    guard_open(be);
    cpu_segment_sum(be, n_seg, dim, segs, x, ldx, row_weight, y, ldy);
    guard_close(be);
}

static void guarded_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda,
                            const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib,
                            float scale, float eps, float *out) {
    guard_open(be);
    cpu_row_dot(be, n, dim, a, lda, ia, b, ldb, ib, scale, eps, out);
    guard_close(be);
}

static void guarded_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets,
                                    const float *x, float *y) {
    guard_open(be);
    cpu_segment_softmax(be, n_seg, offsets, x, y);
    guard_close(be);
}

static void guarded_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x,
                             int64_t ldx, const float *v, int64_t ldv, const int32_t *idx, float *y,
                             int64_t ldy) {
    guard_open(be);
    cpu_add_rows(be, rows, cols, x, ldx, v, ldv, idx, y, ldy);
    guard_close(be);
}

static void guarded_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f,
                                  int64_t ldf, const int32_t *idx, const float *o, int64_t ldo,
                                  float *feat, int64_t ldfeat) {
    guard_open(be);
    cpu_pair_features(be, rows, dim, f, ldf, idx, o, ldo, feat, ldfeat);
    guard_close(be);
}

static void guarded_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y) {
    guard_open(be);
    cpu_axpy(be, n, alpha, x, y);
    guard_close(be);
}

/* The plain table with memory and every op replaced by its guarded form; the workspace and
 * format queries (supports_format, prepared_size, *_workspace_size) and the memory slots
 * (memory, host_alloc, host_free: NULL on the CPU) touch no buffer and stay as they are;
 * write_async is NULL on the CPU too, so clef_backend_write_async takes the guarded write;
 * the recording slots (capture_begin ...) are NULL on the CPU: forwards run their ops;
 * swiglu_matmul is NULL on the CPU too: clef_swiglu_matmul runs the guarded swiglu and matmul. */
void cpu_guard_ops(const clef_backend_ops *plain, clef_backend_ops *out) {
    *out = *plain;
    out->name = "cpu-guarded";
    out->alloc = guard_alloc;
    out->release = guard_release;
    out->write = guard_write;
    out->read = guard_read;
    out->synchronize = guard_synchronize;
    out->prepare_matrix = guarded_prepare_matrix;
    out->matmul = guarded_matmul;
    out->get_rows = guarded_get_rows;
    out->rmsnorm = guarded_rmsnorm;
    out->rmsnorm_gated = guarded_rmsnorm_gated;
    out->layernorm = guarded_layernorm;
    out->conv1d_causal_silu = guarded_conv1d_causal_silu;
    out->gdn_gates = guarded_gdn_gates;
    out->gdn = guarded_gdn;
    out->rope_table = guarded_rope_table;
    out->rope_apply = guarded_rope_apply;
    out->attention = guarded_attention;
    out->softmax = guarded_softmax;
    out->unary = guarded_unary;
    out->mul_sigmoid = guarded_mul_sigmoid;
    out->swiglu = guarded_swiglu;
    out->add = guarded_add;
    out->segment_sum = guarded_segment_sum;
    out->row_dot = guarded_row_dot;
    out->segment_softmax = guarded_segment_softmax;
    out->add_rows = guarded_add_rows;
    out->pair_features = guarded_pair_features;
    out->axpy = guarded_axpy;
}
