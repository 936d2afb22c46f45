/*
 * bench_gpu_attention.c — causal GQA attention alone on the CUDA backend, one layer at the real
 * 27B / 9B heads (24 / 16 query heads, 4 kv heads, head_dim 256), in the model's layout (fp32
 * q rows holding [query | gate] per head, k and v packed, fp32 output), at 298 / 1,502 / 2,270
 * / 8,192 tokens and 8 records of 1,502 packed (clef_seqs). Prints ms per layer (the K/V
 * rounding to bf16 included, as the op does it), the FLOPs of the two products over the
 * visible (causal) keys, and TFLOP/s. A sample is a burst of FL_BURST calls back to back with
 * one synchronization at its end, divided by FL_BURST (as in a forward, where launches queue
 * ahead of the GPU; a synchronization per call would add its host round trip to every call);
 * ms is the median of the samples after a warm-up. Its peer in the same run is
 * peer_attention.py (torch's scaled_dot_product_attention, FlashAttention-2 kernel, bf16).
 *
 *   bench_gpu_attention 9b|27b [runs]
 *
 * Inputs N(0, 1), scale 1/16.
 */
#include "../bench_util.h"
#include "backend/cuda/cuda_backend.h"
#include "clef.h"
#include "cuda/gpu_test_util.h"

#include <stdio.h>
#include <string.h>

static clef_backend *gpu;

typedef struct att_case {
    clef_attention_args a;
    void *ws;
} att_case;

#define FL_BURST 10

static double time_ms(att_case *c, int runs) {
    for (int w = 0; w < 3; w++)
        clef_attention(gpu, &c->a, c->ws);
    clef_backend_synchronize(gpu);
    double t[64];
    for (int r = 0; r < runs; r++) {
        double t0 = bench_now_ms();
        for (int b = 0; b < FL_BURST; b++)
            clef_attention(gpu, &c->a, c->ws);
        if (clef_backend_synchronize(gpu) != CLEF_OK) {
            fprintf(stderr, "device error: %s\n", clef_last_error());
            exit(1);
        }
        t[r] = (bench_now_ms() - t0) / FL_BURST;
    }
    return bench_median(t, runs);
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "9b") && strcmp(argv[1], "27b"))) {
        fprintf(stderr, "usage: bench_gpu_attention 9b|27b [runs]\n");
        return 2;
    }
    if (clef_backend_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return GPU_TEST_SKIPPED;
    }
    const int is27 = !strcmp(argv[1], "27b");
    int runs = argc > 2 ? atoi(argv[2]) : 20;
    if (runs < 1 || runs > 64)
        runs = 20;
    if (clef_backend_cuda_create(0, &gpu) != CLEF_OK) {
        fprintf(stderr, "%s\n", clef_last_error());
        return 1;
    }
    const int64_t Hq = is27 ? 24 : 16, Hkv = 4, hd = 256, Tmax = 8 * 1502;
    const int64_t ldq = Hq * 2 * hd, ldkv = Hkv * hd;
    const size_t n_in = (size_t)(Tmax * (ldq + 2 * ldkv));
    float *host = malloc(n_in * sizeof(float));
    fill_normal(host, n_in, 1.0f);
    float *in = to_gpu(gpu, host, n_in * sizeof(float));
    float *out = clef_backend_alloc(gpu, sizeof(float) * (size_t)(Tmax * Hq * hd));
    int64_t start[9];
    int32_t start32[9];
    for (int s = 0; s <= 8; s++)
        start[s] = 1502 * s, start32[s] = (int32_t)start[s];
    int32_t *start_dev = to_gpu(gpu, start32, sizeof start32);
    if (!in || !out || !start_dev) {
        fprintf(stderr, "device allocation failed\n");
        return 1;
    }
    printf("# %s attention (%lld query / %lld kv heads, head_dim %lld, causal), one layer, median of %d bursts of %d "
           "calls\n\n",
           argv[1], (long long)Hq, (long long)Hkv, (long long)hd, runs, FL_BURST);
    printf("| batch x tokens | ms | GFLOP | TFLOP/s |\n|---|---|---|---|\n");
    const int64_t cases[][2] = {{1, 298}, {1, 1502}, {1, 2270}, {1, 8192}, {8, 1502}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t B = cases[ci][0], T = cases[ci][1], rows = B * T;
        clef_seqs seqs = {.n_seqs = B, .start = start, .start_dev = start_dev, .max_len = T};
        att_case c = {.a = {.n_q = rows, .n_kv = rows, .n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = hd, .q = in,
                            .ldq = ldq, .q_head_stride = 2 * hd, .k = in + rows * ldq, .ldk = ldkv, .k_head_stride = hd,
                            .v = in + rows * (ldq + ldkv), .ldv = ldkv, .v_head_stride = hd, .o = out, .ldo = Hq * hd,
                            .o_head_stride = hd, .scale = 0.0625f, .causal = 1, .seqs = B > 1 ? &seqs : NULL}};
        c.ws = clef_backend_alloc(gpu, clef_attention_workspace_size(gpu, &c.a));
        const double ms = time_ms(&c, runs);
        clef_backend_release(gpu, c.ws);
        const double gf = (double)B * 4.0 * (double)Hq * (double)hd * (double)T * (double)(T + 1) / 2 / 1e9;
        printf("| %lld x %lld | %.3f | %.1f | %.1f |\n", (long long)B, (long long)T, ms, gf, gf / ms);
    }
    clef_backend_release(gpu, in), clef_backend_release(gpu, out), clef_backend_release(gpu, start_dev);
    clef_backend_free(gpu);
    free(host);
    return 0;
}
