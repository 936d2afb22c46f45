/*
 * cuda_graph.cu — recordings on the CUDA backend (the capture_begin / capture_end /
 * graph_launch / graph_free slots of backend.h): the ops queued between begin and end are
 * captured from the backend's stream into a CUDA graph, instantiated once, and a launch
 * replays every kernel and cuBLASLt call of them with one host call. A 27B forward is
 * ~1,000-1,500 launches; replayed, the host's launch cost leaves the critical path.
 *
 * Memory: a recording holds launches with their arguments (pointers and sizes as they were),
 * no allocation nodes, so it duplicates no buffer; the driver keeps the nodes' parameters
 * (kilobytes per hundred nodes), which bench_gpu_forward reports as device memory.
 *
 * Capture runs in thread-local mode: other threads (forks of this backend on other streams)
 * go on running directly, and any call of this thread that would allocate, free or wait
 * fails instead of breaking the stream. The ops that grow a buffer on first use (the bf16
 * staging, the quantized matmuls' scratch), make a RoPE table or time a new GEMM layout
 * check ctx->capturing and refuse (cuda_capture_refuse): the recording fails cleanly,
 * capture_end puts the handle's status back and the caller runs the ops directly, which
 * does that setup, and records next time.
 *
 * Staleness: a recording uses the staging and scratch buffers at the addresses it saw; when
 * either moves (grows for a larger batch) or a kernel switch changes, ctx->graph_epoch
 * advances and graph_launch answers CLEF_GRAPH_STALE instead of replaying.
 *
 * The staging record: cuda_matmul.cu remembers on the host which fp32 rows the bf16 staging
 * holds (so the next matmul on them skips its conversion). After a launch the staging holds
 * what the recorded ops left in it, so the launch puts that record back as it was at the end
 * of the capture; a direct run of the same ops would leave the same.
 */
#include "backend/cuda/cuda_internal.cuh"

#include <stdio.h>
#include <stdlib.h>

struct clef_graph {
    cudaGraphExec_t exec;
    unsigned long long epoch;    /* ctx->graph_epoch at capture */
    int xb_valid;                /* the staging record at the end of the capture */
    const float *xb_src;
    int64_t xb_T, xb_K, xb_ldx, xb_span;
};

int cuda_capture_refuse(clef_backend *be, const char *what) {
    cuda_context *ctx = cuda_ctx(be);
    if (!ctx->capturing)
        return 0;
    if (ctx->status == CLEF_OK)
        ctx->status = clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA device %d: %s while recording", ctx->device, what);
    return 1;
}

int cuda_capture_begin(clef_backend *be) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return ctx->status;
    if (ctx->graphs_off)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA device %d: recordings are off", ctx->device);
    if (ctx->capturing)
        return clef_fail(CLEF_ERR_INVALID_ARG, "CUDA device %d: already recording", ctx->device);
    cudaError_t err = cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* no recording: the caller runs the ops directly */
        return clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA device %d: cannot record: %s", ctx->device,
                         cudaGetErrorString(err));
    }
    ctx->capturing = 1;
    ctx->capture_epoch = ctx->graph_epoch;
    /* what the staging and the quantized hand-off hold now was written outside the recording:
     * a recorded op may not count on it, since a replay runs after whatever ran last */
    ctx->writes++;
    return CLEF_OK;
}

int cuda_capture_end(clef_backend *be, clef_graph **graph) {
    cuda_context *ctx = cuda_ctx(be);
    *graph = NULL;
    if (!ctx->capturing)
        return clef_fail(CLEF_ERR_INVALID_ARG, "CUDA device %d: not recording", ctx->device);
    cudaGraph_t g = NULL;
    cudaError_t err = cudaStreamEndCapture(ctx->stream, &g);
    ctx->capturing = 0;
    char why[256] = "";
    clef_graph *out = NULL;
    if (ctx->status != CLEF_OK)
        snprintf(why, sizeof why, "%s", clef_last_error());
    else if (err != cudaSuccess || !g)
        snprintf(why, sizeof why, "%s", cudaGetErrorString(err));
    else if (ctx->graph_epoch != ctx->capture_epoch)
        snprintf(why, sizeof why, "a backend buffer moved");
    else if (!(out = (clef_graph *)calloc(1, sizeof *out)))
        snprintf(why, sizeof why, "out of memory");
    else if ((err = cudaGraphInstantiate(&out->exec, g, 0)) != cudaSuccess)
        snprintf(why, sizeof why, "instantiate: %s", cudaGetErrorString(err));
    if (g)
        cudaGraphDestroy(g); /* the instantiated graph keeps what it needs */
    if (why[0]) {
        /* nothing ran: the failures seen were the recording's, not the device's */
        (void)cudaGetLastError();
        ctx->status = CLEF_OK;
        ctx->xb_src = NULL; /* the recorded conversions never ran */
        ctx->writes++;
        free(out);
        return clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA device %d: the recording failed: %s", ctx->device, why);
    }
    out->epoch = ctx->graph_epoch;
    out->xb_valid = ctx->xb_src && ctx->xb_writes == ctx->writes;
    out->xb_src = ctx->xb_src, out->xb_T = ctx->xb_T, out->xb_K = ctx->xb_K, out->xb_ldx = ctx->xb_ldx;
    out->xb_span = ctx->xb_span;
    /* the recorded ops have not run: until the recording is launched (cuda_graph_launch puts
     * the staging's note back), nothing they would have written may be read */
    ctx->writes++;
    *graph = out;
    return CLEF_OK;
}

int cuda_graph_launch(clef_backend *be, clef_graph *graph) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK)
        return ctx->status;
    if (graph->epoch != ctx->graph_epoch || ctx->graphs_off) /* off: held recordings run no more */
        return CLEF_GRAPH_STALE;
    int st = cuda_record(be, cudaGraphLaunch(graph->exec, ctx->stream), "graph launch");
    ctx->writes++;
    if (graph->xb_valid) {
        ctx->xb_src = graph->xb_src, ctx->xb_T = graph->xb_T, ctx->xb_K = graph->xb_K;
        ctx->xb_ldx = graph->xb_ldx, ctx->xb_span = graph->xb_span, ctx->xb_writes = ctx->writes;
    } else {
        ctx->xb_src = NULL;
    }
    return st;
}

void cuda_graph_free(clef_backend *be, clef_graph *graph) {
    if (!graph)
        return;
    /* a launch of it may still be queued */
    cuda_record(be, cudaStreamSynchronize(cuda_ctx(be)->stream), "synchronize before freeing a recording");
    if (graph->exec)
        cudaGraphExecDestroy(graph->exec);
    free(graph);
}

extern "C" void clef_backend_cuda_set_graphs(clef_backend *be, int on) { cuda_ctx(be)->graphs_off = on == 0; }
