/*
 * bench_quant_linear.c — the C side of bench/quant_linear: one linear y = x W^T of N outputs
 * and K inputs over T tokens, per weight format, with src/quant's CPU kernels split over
 * THREADS OpenMP threads by output-feature ranges (the way a backend's matmul would):
 *   nf4       NF4 double quant, weight rows decoded into per-thread panels (fp32 FMA tiles)
 *   fp8       FP8 W8A8: per-token activation quantization, fp8 x fp8 -> fp32, scales after
 *   fp8_qdq   FP8 as compressed-tensors' forward computes it (codes multiplied back out)
 *   int8      INT8 ConvRot as the CPU backend runs it: the rotation in torch's order + per-token
 *             int8 (clef_convrot_quantize_tokens), int32 dots (the CPU's best kernel: vpdpbusd
 *             where it has VNNI), scales after; and its parts, timed alone:
 *   int8_rot    the rotation only (clef_hadamard256_torch_f32 over every group of every token)
 *   int8_quant  the whole quantizer (rotation, amax, codes)
 *   int8_dots   the int32 dot products and the epilogue (clef_int8_matmul_rows_ws)
 *   int8_madd   the same on the level's kernel without VNNI (vpmaddwd: clef_int8_matmul_rows)
 * Weights: random BF16 N(0, 0.02) quantized with src/quant's quantizers (FP8, INT8); NF4
 * gets random codes and block statistics (the kernel's work does not depend on the values).
 * The activations' packing (and quantization) is included in the time; the kernels run the
 * best instruction-set level of the CPU unless CLEF_CPU_ISA caps it (avx2, c). Prints one JSON line per format: median
 * wall ms and CPU seconds (all threads) per call over RUNS samples after one warm-up, each
 * sample as many calls as fill ~0.2 s (the process CPU clock can be as coarse as 4 ms).
 *   bench_quant_linear N K T RUNS THREADS
 */
#include "../bench_util.h"

#include "backend/cpu/cpu_isa.h"
#include "core/numeric.h"
#include "quant/fp8.h"
#include "quant/int8_convrot.h"
#include "quant/nf4.h"
#include "quant/quant_matmul.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float normal(void) {
    return (float)(sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform()));
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct linear {
    int64_t N, K, T;
    const float *x;
    float *y;
    /* nf4 */
    clef_nf4_desc nf4;
    uint8_t *nf4_packed;
    /* fp8 */
    uint8_t *fp8_w;
    float *xp; /* packed activations (NF4, FP8) */
    float *fp8_sw, *fp8_sx;
    /* int8 */
    int8_t *i8_w, *i8_x;
    float *i8_sw, *i8_sx, *rot;
    float **panels;  /* per thread */
    void **i8_ws;    /* per thread: the int8 kernels' scratch */
} linear;

enum { F_NF4, F_FP8, F_FP8_QDQ, F_INT8, F_INT8_ROT, F_INT8_QUANT, F_INT8_DOTS, F_INT8_MADD, F_COUNT };
static const char *format_name[F_COUNT] = {"nf4",      "fp8",        "fp8_qdq",   "int8",
                                           "int8_rot", "int8_quant", "int8_dots", "int8_madd"};

static void run(linear *L, int f, int threads) {
    const int64_t blocks = clef_qmm_token_blocks(L->T);
    if (f == F_NF4 || f == F_FP8 || f == F_FP8_QDQ) /* packed once per call, by token blocks */
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num(), n_th = omp_get_num_threads();
        int64_t b0 = blocks * id / n_th, b1 = blocks * (id + 1) / n_th;
        if (f == F_NF4)
            clef_qmm_pack_f32(L->x, L->K, L->T, L->K, b0, b1, L->xp);
        else
            clef_qmm_pack_fp8(L->x, L->K, L->T, L->K, f == F_FP8_QDQ, b0, b1, L->xp, L->fp8_sx,
                              (uint8_t *)(L->rot + id * L->K));
    }
    if (f == F_INT8 || f == F_INT8_QUANT) /* as the backend: split by tokens */
#pragma omp parallel for num_threads(threads)
        for (int64_t t = 0; t < L->T; t++)
            clef_convrot_quantize_tokens(L->x + t * L->K, L->K, 1, L->K, CLEF_QUANT_ACT_F32,
                                         L->i8_x + t * L->K, L->i8_sx + t,
                                         L->rot + omp_get_thread_num() * L->K);
    if (f == F_INT8_ROT)
#pragma omp parallel for num_threads(threads)
        for (int64_t t = 0; t < L->T; t++)
            for (int64_t g = 0; g < L->K; g += 256)
                clef_hadamard256_torch_f32(L->x + t * L->K + g, L->rot + omp_get_thread_num() * L->K + g);
    if (f == F_INT8_ROT || f == F_INT8_QUANT)
        return;
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num(), n_th = omp_get_num_threads();
        /* ranges in whole panels so threads never split one */
        int64_t panels = (L->N + CLEF_QMM_NR - 1) / CLEF_QMM_NR;
        int64_t n0 = panels * id / n_th * CLEF_QMM_NR, n1 = panels * (id + 1) / n_th * CLEF_QMM_NR;
        if (n1 > L->N)
            n1 = L->N;
        if (n0 < n1) {
            float *panel = L->panels[id];
            if (f == F_NF4)
                clef_nf4_matmul_rows(&L->nf4, L->nf4_packed, 0, L->K, n0, n1, L->T, L->xp, NULL,
                                     L->y, L->N, 0, panel);
            else if (f == F_FP8)
                clef_fp8_matmul_rows(L->fp8_w, L->fp8_sw, L->K, n0, n1, L->T, L->xp, L->fp8_sx,
                                     NULL, L->y, L->N, 0, panel);
            else if (f == F_FP8_QDQ)
                clef_fp8_matmul_rows_qdq(L->fp8_w, L->fp8_sw, L->K, n0, n1, L->T, L->xp, NULL,
                                         L->y, L->N, 0, panel);
            else if (f == F_INT8_MADD)
                clef_int8_matmul_rows(L->i8_w, L->i8_sw, L->K, n0, n1, L->T, L->i8_x, L->i8_sx,
                                      NULL, L->y, L->N, 0);
            else
                clef_int8_matmul_rows_ws(L->i8_w, L->i8_sw, L->K, n0, n1, L->T, L->i8_x,
                                         L->i8_sx, NULL, L->y, L->N, 0, L->i8_ws[id]);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s N K T RUNS THREADS\n", argv[0]);
        return 2;
    }
    linear L = {.N = atoll(argv[1]), .K = atoll(argv[2]), .T = atoll(argv[3])};
    int runs = atoi(argv[4]), threads = atoi(argv[5]);
    if (L.N <= 0 || L.K <= 0 || L.K % 256 || L.T <= 0 || runs <= 0 || threads <= 0) {
        fprintf(stderr, "N, K, T, RUNS, THREADS must be positive, K a multiple of 256\n");
        return 2;
    }
    int64_t N = L.N, K = L.K, T = L.T;
    uint16_t *w = malloc(sizeof *w * (size_t)(N * K));
    float *x = malloc(sizeof *x * (size_t)(T * K));
    for (int64_t i = 0; i < N * K; i++)
        w[i] = clef_f32_to_bf16(0.02f * normal());
    for (int64_t i = 0; i < T * K; i++)
        x[i] = normal();
    L.x = x;
    L.y = malloc(sizeof(float) * (size_t)(T * N));
    /* NF4: random nibbles and block statistics */
    int64_t n = N * K, blocks = (n + 63) / 64;
    L.nf4_packed = malloc((size_t)(n + 1) / 2);
    uint8_t *codes = malloc((size_t)blocks);
    float *nested = malloc(sizeof(float) * (size_t)((blocks + 255) / 256));
    static float nested_map[256];
    for (int64_t i = 0; i < (n + 1) / 2; i++)
        L.nf4_packed[i] = (uint8_t)(uniform() * 256);
    for (int64_t i = 0; i < blocks; i++)
        codes[i] = (uint8_t)(uniform() * 256);
    for (int64_t i = 0; i < (blocks + 255) / 256; i++)
        nested[i] = 0.01f;
    for (int i = 0; i < 256; i++)
        nested_map[i] = (float)(i - 128) / 128.0f;
    L.nf4 = (clef_nf4_desc){.n_elements = n, .blocksize = 64, .quant_map = clef_nf4_table,
                            .absmax_code = codes, .nested_quant_map = nested_map,
                            .nested_absmax = nested, .nested_blocksize = 256,
                            .nested_offset = 0.05f};
    /* FP8, INT8: the real quantizers */
    L.fp8_w = malloc((size_t)(N * K));
    L.fp8_sw = malloc(sizeof(float) * (size_t)N);
    clef_fp8_quantize_weight(w, N, K, L.fp8_w, L.fp8_sw);
    L.xp = malloc(sizeof(float) * clef_qmm_xpack_floats(T, K));
    L.fp8_sx = malloc(sizeof(float) * (size_t)T);
    L.i8_w = malloc((size_t)(N * K));
    L.i8_sw = malloc(sizeof(float) * (size_t)N);
    L.rot = malloc(sizeof(float) * (size_t)(2 * K * (threads > 1 ? threads : 1)));
    clef_convrot_quantize_weight(w, N, K, L.i8_w, L.i8_sw, L.rot);
    L.i8_x = malloc((size_t)(T * K));
    L.i8_sx = malloc(sizeof(float) * (size_t)T);
    L.panels = malloc(sizeof(float *) * (size_t)threads);
    L.i8_ws = malloc(sizeof(void *) * (size_t)threads);
    for (int i = 0; i < threads; i++) {
        L.panels[i] = malloc(sizeof(float) * clef_qmm_panel_floats(K));
        L.i8_ws[i] = malloc(clef_int8_matmul_scratch_bytes(T, K));
    }
    /* the codes the dot products run on (int8_dots, int8_madd time only those) */
    for (int64_t t = 0; t < T; t++)
        clef_convrot_quantize_tokens(x + t * K, K, 1, K, CLEF_QUANT_ACT_F32, L.i8_x + t * K,
                                     L.i8_sx + t, L.rot);

    for (int f = 0; f < F_COUNT; f++) {
        double *ms = malloc(sizeof(double) * (size_t)runs), *cpu = malloc(sizeof(double) * (size_t)runs);
        /* warm-up; then each sample repeats the call until it spans ~0.2 s of wall time (the
         * process CPU clock may tick in milliseconds) and records the time per call */
        double w0 = bench_now_ms();
        run(&L, f, threads);
        double once = bench_now_ms() - w0;
        int reps = once > 0 && once < 200 ? (int)(200 / once) + 1 : 1;
        for (int r = 0; r < runs; r++) {
            double t0 = bench_now_ms(), c0 = cpu_seconds();
            for (int i = 0; i < reps; i++)
                run(&L, f, threads);
            ms[r] = (bench_now_ms() - t0) / reps;
            cpu[r] = (cpu_seconds() - c0) / reps;
        }
        printf("{\"format\": \"%s\", \"isa\": \"%s\", \"int8_kernel\": \"%s\", \"ms\": %.3f, "
               "\"cpu_s\": %.4f}\n",
               format_name[f], cpu_isa_name(cpu_isa_active()),
               clef_int8_kernel_name(clef_int8_kernel_active()),
               bench_median(ms, runs), bench_median(cpu, runs));
        free(ms);
        free(cpu);
    }
    return 0;
}
