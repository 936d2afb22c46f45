/*
 * cpu_backend.c — the CPU backend: creation and forks (threads, per-thread GEMM packing
 * buffers), host memory (large blocks mapped, so releasing one returns it), and the op table wiring the implementations of the other cpu_*.c files.
 * Every op is fp32 and multi-threaded with OpenMP inside the op; the backend is the exact
 * reference the other backends are tested against.
 */
#include "backend/cpu/cpu_internal.h"

#include "core/error.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Host memory. Every block carries a 64-byte header before it saying how it was made, so
 * release knows how to give it back: large blocks are their own anonymous mappings, returned
 * to the system the moment they are released. Through malloc, a released large block (a
 * weight's stored form once its pre-packed panels exist, weight_loader.c) would stay in the
 * heap as a hole that blocks of other sizes cannot fill: measured, 10% more peak RSS after
 * loading a model. */
enum { CPU_BLOCK_HEADER = 64 };
#define CPU_MAP_MIN_BYTES ((size_t)1 << 20)

typedef struct cpu_block_header {
    size_t map_bytes; /* the mapping's length (header included), or 0: from aligned_alloc */
} cpu_block_header;

static void *cpu_alloc(clef_backend *be, size_t bytes) {
    (void)be;
    size_t rounded = (bytes + 63) / 64 * 64;
    if (bytes > SIZE_MAX - 2 * CPU_BLOCK_HEADER)
        return NULL;
    char *base;
    cpu_block_header h = {0};
    if (rounded >= CPU_MAP_MIN_BYTES) {
        h.map_bytes = rounded + CPU_BLOCK_HEADER;
        base = mmap(NULL, h.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            return NULL;
    } else {
        base = aligned_alloc(64, rounded + CPU_BLOCK_HEADER);
        if (!base)
            return NULL;
    }
    memcpy(base, &h, sizeof h);
    return base + CPU_BLOCK_HEADER;
}

static void cpu_release(clef_backend *be, void *buf) {
    (void)be;
    if (!buf)
        return;
    char *base = (char *)buf - CPU_BLOCK_HEADER;
    cpu_block_header h;
    memcpy(&h, base, sizeof h);
    if (h.map_bytes)
        munmap(base, h.map_bytes);
    else
        free(base);
}

static int cpu_copy(clef_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    memmove(dst, src, bytes);
    return CLEF_OK;
}

static int cpu_synchronize(clef_backend *be) {
    (void)be;
    return CLEF_OK;
}

float *cpu_thread_pack(clef_backend *be) {
    cpu_context *ctx = cpu_ctx(be);
    int tid = omp_get_thread_num();
    CLEF_ASSERT(tid >= 0 && tid < ctx->n_threads);
    return ctx->pack[tid];
}

static void cpu_free(clef_backend *be) {
    cpu_context *ctx = cpu_ctx(be);
    if (ctx) {
        if (ctx->pack)
            for (int i = 0; i < ctx->n_threads; i++)
                free(ctx->pack[i]);
        free(ctx->pack);
        free(ctx->quant_scratch);
        if (!ctx->shares_guard) /* a fork's arena is its parent's */
            cpu_guard_free(ctx->guard);
        free(ctx);
    }
    free(be);
}

static int cpu_fork(clef_backend *parent, clef_backend **child);

/* Every slot of the table is a pointer; the guarded variant (cpu_guard.c) must wrap each op,
 * so a new op is a compile error here until it is added there too. */
_Static_assert(sizeof(clef_backend_ops) == 45 * sizeof(void *),
               "the op table changed: add the new op to cpu_guard_ops() in cpu_guard.c, "
               "then update this count");

static const clef_backend_ops cpu_ops = {
    .name = "cpu",
    .free = cpu_free,
    .fork = cpu_fork,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .write = cpu_copy,
    .read = cpu_copy,
    .synchronize = cpu_synchronize,
    .supports_format = cpu_supports_format,
    .prepared_size = cpu_prepared_size,
    .prepare_matrix = cpu_prepare_matrix,
    .matmul = cpu_matmul,
    .matmul_workspace_size = cpu_matmul_workspace_size,
    .get_rows = cpu_get_rows,
    .rmsnorm = cpu_rmsnorm,
    .rmsnorm_gated = cpu_rmsnorm_gated,
    .layernorm = cpu_layernorm,
    .conv1d_causal_silu = cpu_conv1d_causal_silu_seqs,
    .gdn_gates = cpu_gdn_gates,
    .gdn = cpu_gdn_seqs,
    .gdn_workspace_size = cpu_gdn_workspace_size_seqs,
    .rope_table = cpu_rope_table,
    .rope_apply = cpu_rope_apply,
    .attention = cpu_attention_seqs,
    .attention_workspace_size = cpu_attention_workspace_size_seqs,
    .softmax = cpu_softmax,
    .unary = cpu_unary,
    .mul_sigmoid = cpu_mul_sigmoid,
    .swiglu = cpu_swiglu,
    .swiglu_matmul = NULL, /* clef_swiglu_matmul: swiglu, then matmul */
    .add = cpu_add,
    /* head ops */
    .segment_sum = cpu_segment_sum,
    .row_dot = cpu_row_dot,
    .segment_softmax = cpu_segment_softmax,
    .add_rows = cpu_add_rows,
    .pair_features = cpu_pair_features,
    .axpy = cpu_axpy,
};

/* A plain CPU backend of n_threads threads with its own packing buffers. */
static int cpu_new(int n_threads, clef_backend **out) {
    clef_backend *be = calloc(1, sizeof *be);
    cpu_context *ctx = calloc(1, sizeof *ctx);
    if (!be || !ctx) {
        free(be);
        free(ctx);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "cpu backend: out of memory");
    }
    be->ops = &cpu_ops;
    be->ctx = ctx;
    be->n_threads = n_threads;
    be->host_visible = 1;
    ctx->n_threads = n_threads;
    ctx->pack = calloc((size_t)n_threads, sizeof *ctx->pack);
    if (!ctx->pack)
        goto err;
    for (int i = 0; i < n_threads; i++) {
        ctx->pack[i] = aligned_alloc(64, CPU_GEMM_PACK_FLOATS * sizeof(float));
        if (!ctx->pack[i])
            goto err;
    }
    *out = be;
    return CLEF_OK;
err:
    cpu_free(be);
    return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "cpu backend: out of memory for %d packing buffers",
                     n_threads);
}

/* Host memory is one for all: a fork is a shallow copy of the parent (same threads, same op
 * table, the guarded variant's arena shared with it) whose only state of its own is the
 * packing buffers, the scratch its ops write. */
static int cpu_fork(clef_backend *parent, clef_backend **child) {
    int st = cpu_new(parent->n_threads, child);
    if (st)
        return st;
    cpu_context *pc = cpu_ctx(parent), *cc = cpu_ctx(*child);
    cc->guard = pc->guard;
    cc->shares_guard = pc->guard != NULL;
    (*child)->ops = parent->ops; /* the parent's table (guarded: in the parent's context) */
    (*child)->host_visible = parent->host_visible;
    return CLEF_OK;
}

int clef_backend_cpu_create(const clef_backend_params *params, clef_backend **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_backend_cpu_create: out is NULL");
    *out = NULL;
    clef_backend_params p = params ? *params : clef_backend_default_params();
    if (p.n_threads < 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "cpu backend: n_threads = %d, expected >= 0",
                         p.n_threads);
    clef_backend *be = NULL;
    int st = cpu_new(p.n_threads > 0 ? p.n_threads : omp_get_max_threads(), &be);
    if (st)
        return st;
    if (p.guard_host_access) {
        cpu_context *ctx = cpu_ctx(be);
        if ((st = cpu_guard_create(p.guard_arena_bytes, &ctx->guard))) {
            cpu_free(be);
            return st;
        }
        cpu_guard_ops(&cpu_ops, &ctx->guarded_ops);
        be->ops = &ctx->guarded_ops;
        be->host_visible = 0;
    }
    *out = be;
    return CLEF_OK;
}
