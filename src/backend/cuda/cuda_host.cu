/*
 * cuda_host.cu — the CUDA backend's optional memory slots of the op table: the memory facts
 * of a handle (its own byte counts, kept by cuda_backend.cu's alloc/release, and the device's
 * use as the driver reports it), page-locked host staging, which the weight loader reads
 * shards into so each piece reaches its final device buffer in one DMA, with no pageable
 * bounce buffer in between, and the queued copy out of it (write_async), so the loader reads
 * the next piece into its other staging buffer while the DMA runs.
 */
#include "backend/cuda/cuda_internal.cuh"

int cuda_memory_query(clef_backend *be, clef_backend_memory_info *out) {
    cuda_context *ctx = cuda_ctx(be);
    out->resident = ctx->resident;
    out->peak = ctx->peak;
    size_t free_bytes = 0, total_bytes = 0;
    int st = cuda_record(be, cudaSetDevice(ctx->device), "cudaSetDevice");
    if (st == CLEF_OK)
        st = cuda_record(be, cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    out->device_used = total_bytes - free_bytes;
    out->device_total = total_bytes;
    return st;
}

void *cuda_host_alloc(clef_backend *be, size_t bytes) {
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* reported as NULL (the caller names what it was for) */
        return NULL;
    }
    return p;
}

void cuda_host_free(clef_backend *be, void *ptr) {
    if (ptr)
        cuda_record(be, cudaFreeHost(ptr), "cudaFreeHost");
}

int cuda_write_async(clef_backend *be, void *dst, const void *host_src, size_t bytes) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return ctx->status;
    ctx->writes++; /* device memory changes: see cuda_context.xb_src */
    /* page-locked host_src: a true asynchronous DMA, ordered on the handle's stream */
    return cuda_record(be, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->stream),
                       "host-to-device copy");
}
