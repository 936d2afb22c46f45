/*
 * cuda_backend.cu — the CUDA backend's creation (device, stream, cuBLASLt handle and its
 * workspace), device memory (cudaMalloc'd buffers, copies on the backend's stream) and the op
 * table wiring the kernels of the other cuda_*.cu files. Recordings (cuda_graph.cu) are off
 * unless the environment sets CLEF_CUDA_GRAPHS=1 (or clef_backend_cuda_set_graphs turns them
 * on): a replay saves 3-7% of a short forward, the forward that records costs ~25% more
 * (bench/RESULTS.md, run16_graph), so they pay only where a batch layout recurs often.
 */
#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/cuda_quant_internal.cuh"

#include <stdlib.h>
#include <string.h>

/* cuBLASLt's workspace: 32 MiB lets it pick the split-K and stream-K kernels Hopper prefers. */
#define CUDA_LT_WORKSPACE_BYTES ((size_t)32 << 20)

int cuda_record(clef_backend *be, cudaError_t err, const char *what) {
    cuda_context *ctx = cuda_ctx(be);
    if (err != cudaSuccess && ctx->status == CLEF_OK) {
        int code = err == cudaErrorMemoryAllocation ? CLEF_ERR_OUT_OF_MEMORY : CLEF_ERR_INTERNAL;
        ctx->status = clef_fail(code, "CUDA device %d: %s failed: %s", ctx->device, what, cudaGetErrorString(err));
    }
    return ctx->status;
}

void cuda_account(clef_backend *be, ptrdiff_t delta) {
    cuda_context *ctx = cuda_ctx(be);
    ctx->resident = (size_t)((ptrdiff_t)ctx->resident + delta);
    if (ctx->resident > ctx->peak)
        ctx->peak = ctx->resident;
}

/* Buffers carry their size just before the returned pointer's 256-byte aligned start, so
 * release can keep the resident count exact without a table. */
#define CUDA_BUF_HEADER 256

static void *cuda_alloc(clef_backend *be, size_t bytes) {
    void *p = NULL;
    size_t total = CUDA_BUF_HEADER + (bytes ? bytes : 1);
    cudaError_t err = cudaMalloc(&p, total);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is reported as NULL, not kept */
        return NULL;
    }
    size_t header[2] = {total, 0};
    if (cudaMemcpy(p, header, sizeof header, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    cuda_account(be, (ptrdiff_t)total);
    return (char *)p + CUDA_BUF_HEADER;
}

static void cuda_release(clef_backend *be, void *buf) {
    if (!buf)
        return;
    char *base = (char *)buf - CUDA_BUF_HEADER;
    size_t header[2] = {0, 0};
    cuda_context *ctx = cuda_ctx(be);
    /* the buffer may still be read by queued work: finish it before freeing */
    cuda_record(be, cudaStreamSynchronize(ctx->stream), "synchronize before free");
    if (cudaMemcpy(header, base, sizeof header, cudaMemcpyDeviceToHost) == cudaSuccess)
        cuda_account(be, -(ptrdiff_t)header[0]);
    cuda_record(be, cudaFree(base), "cudaFree");
}

static int cuda_write(clef_backend *be, void *dst, const void *host_src, size_t bytes) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return ctx->status;
    ctx->writes++; /* device memory changes: see cuda_context.xb_src */
    cuda_record(be, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->stream), "host-to-device copy");
    /* the caller may free or reuse host_src as soon as we return */
    return cuda_record(be, cudaStreamSynchronize(ctx->stream), "host-to-device copy");
}

static int cuda_read(clef_backend *be, void *host_dst, const void *src, size_t bytes) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return ctx->status;
    cuda_record(be, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream), "device-to-host copy");
    return cuda_record(be, cudaStreamSynchronize(ctx->stream), "device-to-host copy");
}

static int cuda_synchronize(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    cuda_record(be, cudaStreamSynchronize(ctx->stream), "synchronize");
    return cuda_record(be, cudaGetLastError(), "a queued kernel");
}

static void cuda_free_backend(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx) {
        cudaSetDevice(ctx->device);
        if (ctx->stream)
            cudaStreamSynchronize(ctx->stream);
        cuda_gemm_plans_free(ctx);
        cuda_quant_free(ctx);
        for (int i = 0; i < ctx->n_rope_inv; i++)
            cudaFree(ctx->rope_inv[i].dev);
        if (ctx->lt)
            cublasLtDestroy(ctx->lt);
        cudaFree(ctx->lt_workspace);
        cudaFree(ctx->xb);
        if (ctx->stream)
            cudaStreamDestroy(ctx->stream);
        free(ctx);
    }
    free(be);
}

/* A fork: the same device (cudaMalloc'd buffers are valid on every handle of it), its own
 * stream, cuBLASLt handle, workspace and staging, so forks run ops concurrently. Its memory
 * count covers what it allocates itself. */
static int cuda_fork(clef_backend *parent, clef_backend **child) {
    int st = clef_backend_cuda_create(cuda_ctx(parent)->device, child);
    if (st == CLEF_OK) { /* the kernel choices follow the parent */
        cuda_ctx(*child)->attention_fp32 = cuda_ctx(parent)->attention_fp32;
        cuda_ctx(*child)->gdn_chunked = cuda_ctx(parent)->gdn_chunked;
        cuda_ctx(*child)->gemm_tuning = cuda_ctx(parent)->gemm_tuning;
        cuda_ctx(*child)->graphs_off = cuda_ctx(parent)->graphs_off;
        cuda_quant_inherit(*child, parent); /* the quantized matmuls' paths and switches */
    }
    return st;
}

static const clef_backend_ops cuda_ops = {
    .name = "cuda",
    .free = cuda_free_backend,
    .fork = cuda_fork,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .write = cuda_write,
    .read = cuda_read,
    .synchronize = cuda_synchronize,
    .supports_format = cuda_supports_format, /* F32, BF16 and the quantized formats (cuda_quant.cu) */
    .prepared_size = NULL,   /* weights run as stored */
    .prepare_matrix = NULL,
    .matmul = cuda_matmul,
    .matmul_workspace_size = cuda_matmul_workspace_size,
    .get_rows = cuda_get_rows,
    .rmsnorm = cuda_rmsnorm,
    .rmsnorm_gated = cuda_rmsnorm_gated,
    .layernorm = cuda_layernorm,
    .conv1d_causal_silu = cuda_conv1d_causal_silu,
    .gdn_gates = cuda_gdn_gates,
    .gdn = cuda_gdn,
    .gdn_workspace_size = cuda_gdn_workspace_size,
    .rope_table = cuda_rope_table,
    .rope_apply = cuda_rope_apply,
    .attention = cuda_attention,
    .attention_workspace_size = cuda_attention_workspace_size,
    .softmax = cuda_softmax,
    .unary = cuda_unary,
    .mul_sigmoid = cuda_mul_sigmoid,
    .swiglu = cuda_swiglu,
    .swiglu_matmul = cuda_swiglu_matmul,
    .add = cuda_add,
    .segment_sum = cuda_segment_sum,
    .row_dot = cuda_row_dot,
    .segment_softmax = cuda_segment_softmax,
    .add_rows = cuda_add_rows,
    .pair_features = cuda_pair_features,
    .axpy = cuda_axpy,
    .memory = cuda_memory_query,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .write_async = cuda_write_async,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
};

extern "C" int clef_backend_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int clef_backend_cuda_create(int device, clef_backend **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_backend_cuda_create: out is NULL");
    *out = NULL;
    int n = clef_backend_cuda_device_count();
    if (device < 0 || device >= n)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA device %d does not exist (%d device%s visible)", device, n,
                         n == 1 ? "" : "s");
    clef_backend *be = (clef_backend *)calloc(1, sizeof *be);
    cuda_context *ctx = (cuda_context *)calloc(1, sizeof *ctx);
    if (!be || !ctx) {
        free(be);
        free(ctx);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_backend_cuda_create: out of memory");
    }
    be->ops = &cuda_ops;
    be->ctx = ctx;
    be->n_threads = 1;
    be->host_visible = 0;
    ctx->device = device;
    ctx->status = CLEF_OK;
    ctx->gemm_tuning = 1;
    const char *graphs = getenv("CLEF_CUDA_GRAPHS");
    ctx->graphs_off = !(graphs && !strcmp(graphs, "1"));
    int st = CLEF_OK;
    if ((st = cuda_record(be, cudaSetDevice(device), "cudaSetDevice")) != CLEF_OK ||
        (st = cuda_record(be, cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking), "cudaStreamCreate")) != CLEF_OK ||
        (st = cuda_record(be, cudaMalloc(&ctx->lt_workspace, CUDA_LT_WORKSPACE_BYTES), "cuBLASLt workspace")) != CLEF_OK) {
        cuda_free_backend(be);
        return st;
    }
    ctx->lt_workspace_bytes = CUDA_LT_WORKSPACE_BYTES;
    cuda_account(be, (ptrdiff_t)CUDA_LT_WORKSPACE_BYTES);
    if (cublasLtCreate(&ctx->lt) != CUBLAS_STATUS_SUCCESS) {
        ctx->lt = NULL;
        cuda_free_backend(be);
        return clef_fail(CLEF_ERR_INTERNAL, "CUDA device %d: cublasLtCreate failed", device);
    }
    ctx->flash_ok = cuda_flash_probe(be);
    *out = be;
    return CLEF_OK;
}

extern "C" void clef_backend_cuda_memory(const clef_backend *be, size_t *resident, size_t *peak) {
    const cuda_context *ctx = (const cuda_context *)be->ctx;
    if (resident)
        *resident = ctx->resident;
    if (peak)
        *peak = ctx->peak;
}

extern "C" void clef_backend_cuda_memory_reset_peak(clef_backend *be) { cuda_ctx(be)->peak = cuda_ctx(be)->resident; }

/* the kernel switches change what a forward launches: recordings made before are stale */
extern "C" void clef_backend_cuda_set_attention_fp32(clef_backend *be, int on) {
    cuda_ctx(be)->attention_fp32 = on != 0;
    cuda_ctx(be)->graph_epoch++;
}

extern "C" void clef_backend_cuda_set_gdn_chunked(clef_backend *be, int on) {
    cuda_ctx(be)->gdn_chunked = on != 0;
    cuda_ctx(be)->graph_epoch++;
}

extern "C" int clef_backend_cuda_flash_attention(const clef_backend *be) {
    return ((const cuda_context *)be->ctx)->flash_ok;
}

extern "C" int clef_backend_cuda_fill_normal_bf16(clef_backend *be, void *dst, size_t n, float std, uint64_t seed) {
    return cuda_fill_normal_bf16(be, dst, n, std, seed);
}
