/*
 * bench_gpu_vision.c — the Qwen3.5 vision tower (27 blocks x 1152, 16 heads of 72, MLP 4304,
 * patch 16, temporal 2, 2x2 merger into the text width) on the CUDA backend for one
 * 1,000 x 1,500 image, random N(0, 0.02) BF16 weights made on the device (no weight files).
 * The image is synthetic (a smooth gradient with noise, width 1,000, height 1,500) and goes
 * through the engine's own image processor (smart_resize to multiples of 32, bicubic
 * antialiased resize, normalization, patchify) on the host, once, before timing: the grid and
 * vision token count are the ones a record with such an image gets. Prints one markdown table:
 * grid, patches, vision tokens, ms per tower forward (median of runs after a warm-up;
 * vision_forward from host pixel rows to merged features in device memory, so the upload of
 * the pixel rows and the per-patch tables is inside), patches/s, TFLOP/s, the backend's
 * resident / peak device memory; then the per-op GPU time of one forward.
 *
 *   bench_gpu_vision 9b|27b [depth] [runs]
 *
 * 9b / 27b pick out_hidden_size 4096 / 5120 (the merger's last matrix; the tower is the same).
 * FLOPs counted: 2 x (patch embedding + per block qkv, proj, fc1, fc2) x patches + 2 x merger
 * x tokens, plus the attention core (2 x 2 x H x frame^2 per block: non-causal, one frame).
 * The peer is peer_vision.py (transformers' Qwen3_5VisionModel, bf16, same config and grid).
 */
#include "../bench_util.h"
#include "backend/cuda/cuda_backend.h"
#include "clef.h"
#include "cuda/random_vision.h"
#include "media/image_processor.h"
#include "media/rgb_image.h"
#include "model/vision_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loader source whose BF16 matrices read as zeros (filled on the device afterwards); the fp32
 * vectors (norms, biases) come from random_vision.h. */
static int zero_matrix_read(void *ctx, const clef_tensor_info *t, void *dst) {
    if (t->dtype == CLEF_DTYPE_BF16) {
        memset(dst, 0, t->n_bytes);
        return CLEF_OK;
    }
    return rv_read(ctx, t, dst);
}

static int fill(clef_backend *be, const clef_matrix *w, uint64_t *seed) {
    if (w->type != CLEF_WTYPE_BF16)
        return CLEF_ERR_INTERNAL;
    return clef_backend_cuda_fill_normal_bf16(be, (void *)w->data, (size_t)(w->rows * w->ld), 0.02f, (*seed)++);
}

static int randomize(vision_model *m, clef_backend *be) {
    uint64_t seed = 1;
    vision_weights *w = &m->w;
    int st = fill(be, &w->patch, &seed);
    if (st == CLEF_OK)
        st = fill(be, &w->pos, &seed);
    for (int64_t i = 0; i < m->cfg.depth && st == CLEF_OK; i++) {
        const vision_block *B = &w->blocks[i];
        const clef_matrix *ws[] = {&B->qkv, &B->proj, &B->fc1, &B->fc2};
        for (size_t j = 0; j < 4 && st == CLEF_OK; j++)
            st = fill(be, ws[j], &seed);
    }
    if (st == CLEF_OK)
        st = fill(be, &w->merger_fc1, &seed);
    if (st == CLEF_OK)
        st = fill(be, &w->merger_fc2, &seed);
    return st == CLEF_OK ? clef_backend_synchronize(be) : st;
}

static double tower_flops(const clef_vision_config *c, int64_t patch_dim, int64_t t, int64_t h, int64_t w) {
    const double H = (double)c->hidden_size, I = (double)c->intermediate_size, M = (double)c->out_hidden_size;
    const double frame = (double)(h * w), N = (double)t * frame, tokens = N / 4;
    double f = 2.0 * N * (double)patch_dim * H;
    f += (double)c->depth * (2.0 * N * (3 * H * H + H * H + 2 * H * I) + 4.0 * (double)t * frame * frame * H);
    f += 2.0 * tokens * (4 * H * 4 * H + 4 * H * M);
    return f;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "9b") && strcmp(argv[1], "27b"))) {
        fprintf(stderr, "usage: bench_gpu_vision 9b|27b [depth] [runs]\n");
        return 2;
    }
    if (clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int64_t depth = argc > 2 ? atoll(argv[2]) : 27;
    const int runs = argc > 3 ? atoi(argv[3]) : 10;
    const clef_vision_config cfg = config_vision_qwen35(depth, strcmp(argv[1], "27b") ? 4096 : 5120);

    /* the image: 1,000 wide, 1,500 high, through the processor with Qwen3.5's defaults */
    clef_rgb_image img;
    if (clef_rgb_image_alloc(&img, 1000, 1500, "bench image") != CLEF_OK) {
        fprintf(stderr, "image: %s\n", clef_last_error());
        return 1;
    }
    uint64_t noise = 0x9e3779b97f4a7c15ull;
    for (int64_t y = 0; y < img.height; y++)
        for (int64_t x = 0; x < img.width; x++)
            for (int ch = 0; ch < 3; ch++) {
                noise ^= noise << 13, noise ^= noise >> 7, noise ^= noise << 17;
                int v = (int)((x * 255 / img.width + y * 255 / img.height * (ch + 1)) / (ch + 2)) + (int)(noise % 32) - 16;
                img.rgb[(y * img.width + x) * 3 + ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    clef_image_processor_params pp;
    clef_image_processor_default_params(&pp);
    clef_image_pixels px = {0};
    double t0 = bench_now_ms();
    if (clef_image_pixels_from_frames(&img, 1, &pp, "bench image", &px) != CLEF_OK) {
        fprintf(stderr, "processor: %s\n", clef_last_error());
        return 1;
    }
    const double process_ms = bench_now_ms() - t0;
    free(img.rgb);

    clef_backend *be = NULL;
    if (clef_backend_cuda_create(0, &be) != CLEF_OK) {
        fprintf(stderr, "CUDA backend: %s\n", clef_last_error());
        return 1;
    }
    size_t res0 = 0, resident = 0, peak = 0;
    clef_backend_cuda_memory(be, &res0, NULL);
    random_vision rv = {.cfg = &cfg, .seed = 7};
    clef_tensor_source src = {.ctx = &rv, .find = rv_find, .read = zero_matrix_read};
    vision_model *m = NULL;
    vision_state *s = NULL;
    t0 = bench_now_s();
    int st = vision_load(&cfg, &src, be, &m);
    if (st == CLEF_OK)
        st = randomize(m, be);
    if (st == CLEF_OK)
        st = vision_state_create(m, be, px.n_rows, &s);
    if (st != CLEF_OK) {
        fprintf(stderr, "load: %s\n", clef_last_error());
        return 1;
    }
    const double load_s = bench_now_s() - t0;
    if (px.row_len != vision_patch_dim(m)) {
        fprintf(stderr, "pixel rows of %lld floats, the tower takes %lld\n", (long long)px.row_len,
                (long long)vision_patch_dim(m));
        return 1;
    }
    const vision_input in = {.pixels = px.rows, .grid_t = px.grid_t, .grid_h = px.grid_h, .grid_w = px.grid_w};
    const int64_t tokens = vision_tokens(m, &in);
    printf("# clef CUDA backend, Qwen3.5 vision tower (%lld blocks x 1152, 16 heads of 72, MLP 4304, patch 16, "
           "out %lld = %s), BF16 weights N(0, 0.02) made on the device\n",
           (long long)depth, (long long)cfg.out_hidden_size, argv[1]);
    printf("image 1000 x 1500 (w x h) -> smart_resize %lld x %lld -> grid (t, h, w) = (%lld, %lld, %lld): %lld patches, "
           "%lld vision tokens; host processor %.1f ms (not in the times below)\n",
           (long long)px.resized_w, (long long)px.resized_h, (long long)px.grid_t, (long long)px.grid_h,
           (long long)px.grid_w, (long long)px.n_rows, (long long)tokens, process_ms);
    printf("weights %.3f GiB, run state %.3f GiB, load + device fill %.1f s\n", vision_weight_bytes(m) / 1073741824.0,
           vision_state_bytes(s) / 1073741824.0, load_s);
    double *times = malloc(sizeof(double) * (size_t)runs);
    for (int r = -2; r < runs; r++) {
        double a = bench_now_ms();
        if ((st = vision_forward(m, s, 1, &in)) != CLEF_OK || (st = clef_backend_synchronize(be)) != CLEF_OK) {
            fprintf(stderr, "forward: %s\n", clef_last_error());
            return 1;
        }
        if (r >= 0)
            times[r] = bench_now_ms() - a;
    }
    /* the output is read back once: finite values, so the times are of a real forward */
    float *out = malloc(sizeof(float) * (size_t)(tokens * cfg.out_hidden_size));
    st = clef_backend_read(be, out, vision_state_output(s), sizeof(float) * (size_t)(tokens * cfg.out_hidden_size));
    double sum2 = 0;
    for (int64_t i = 0; st == CLEF_OK && i < tokens * cfg.out_hidden_size; i++)
        sum2 += (double)out[i] * out[i];
    if (st != CLEF_OK || !isfinite(sum2) || sum2 == 0) {
        fprintf(stderr, "output not finite or zero (sum of squares %g): %s\n", sum2, clef_last_error());
        return 1;
    }
    const double ms = bench_median(times, runs);
    double lo = times[0], hi = times[0];
    for (int r = 1; r < runs; r++)
        lo = times[r] < lo ? times[r] : lo, hi = times[r] > hi ? times[r] : hi;
    const double fl = tower_flops(&cfg, vision_patch_dim(m), px.grid_t, px.grid_h, px.grid_w);
    clef_backend_cuda_memory(be, &resident, &peak);
    printf("\n| tower | image | grid (t, h, w) | patches | vision tokens | ms (median of %d) | min-max ms | patches/s | "
           "TFLOP/s | resident GiB | peak GiB |\n", runs);
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| clef %s | 1000 x 1500 | (%lld, %lld, %lld) | %lld | %lld | %.2f | %.2f-%.2f | %.0f | %.0f | %.3f | %.3f |\n",
           argv[1], (long long)px.grid_t, (long long)px.grid_h, (long long)px.grid_w, (long long)px.n_rows,
           (long long)tokens, ms, lo, hi, (double)px.n_rows / (ms * 1e-3), fl / (ms * 1e-3) / 1e12,
           resident / 1073741824.0, peak / 1073741824.0);
    /* where the time goes */
    clef_backend_cuda_profile(be, 1);
    for (int r = 0; r < 2; r++)
        vision_forward(m, s, 1, &in);
    printf("\nPer-op GPU time, one 1000 x 1500 image (CUDA events around each op, mean of 2 forwards):\n\n");
    clef_backend_cuda_profile_report(be, stdout, 2);
    clef_backend_cuda_profile(be, 0);
    printf("\nbackend device memory: resident %.3f GiB, peak %.3f GiB (weights %.3f GiB; backend workspaces before load "
           "%.3f GiB)\n", resident / 1073741824.0, peak / 1073741824.0, vision_weight_bytes(m) / 1073741824.0,
           res0 / 1073741824.0);
    free(out), free(times);
    clef_image_pixels_free(&px);
    vision_state_free(s);
    vision_free(m);
    clef_backend_free(be);
    return 0;
}
