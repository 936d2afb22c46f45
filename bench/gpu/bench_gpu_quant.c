/*
 * bench_gpu_quant.c — the quantized matmuls of the CUDA backend (FP8 W8A8, INT8 ConvRot, NF4)
 * against the BF16 cuBLASLt matmul in the same run, on one GPU:
 *
 *   bench_gpu_quant gemm 9b|27b [reps]             every distinct linear shape of the model at
 *                                                  298 / 1,502 / 2,270 / 8,192 / 8 x 1,502 rows
 *   bench_gpu_quant wgmma 9b|27b [reps]            the INT8 GEMM alone and the INT8 and exact
 *                                                  FP8 matmuls, cuBLASLt vs each wgmma kernel
 *   bench_gpu_quant forward 9b|27b [layers] [runs] the whole backbone (random BF16 weights made
 *                                                  on the device, as bench_gpu_forward), then
 *                                                  its linears swapped for random quantized ones
 *                                                  (CLEF_BENCH_PRECISIONS="bf16,fp8": only those;
 *                                                  CLEF_BENCH_FUSED_COMPARE=1: each quantized
 *                                                  precision with its quantizers standalone,
 *                                                  then fused into the producers)
 *   bench_gpu_quant nf4gemm 9b|27b [reps]          NF4 alone: each of its GEMM modes and
 *                                                  dequantization kernels beside BF16
 *   bench_gpu_quant nf4mem 27b [tokens] [runs]     the NF4 27B's device memory under the 24gb
 *                                                  and 16gb profiles (run_nf4_memory says how)
 *
 * Each time is the clef_matmul op as the model calls it (fp32 rows in, fp32 rows out): BF16
 * includes the rounding of x to bf16, FP8 and INT8 their activation quantizers and epilogues,
 * NF4 its dequantization; the quantizer / dequantizer alone is a column of its own. CUDA
 * events on the backend's stream, median of reps after 3 warm-ups. TFLOP/s = 2 N K T / time.
 * Weights are random codes (never zeros) with scales that give N(0, 0.02)-sized values; speed
 * does not depend on the values (accuracy is tests/cuda/test_cuda_quant's business).
 *
 * FP8 runs on the fp8 tensor cores (clef_backend_cuda_set_fp8_tensor_cores, cuBLASLt); with
 * CLEF_BENCH_FP8_FAST=1 there with cuBLASLt's fast accumulation (CLEF_CUDA_FP8_TC_FAST); with
 * CLEF_BENCH_FP8_EXACT=1 in the environment the exact path, with CLEF_BENCH_FP8_PROMOTED=v our
 * fp8 wgmma kernel with fp32 promotion (v: CLEF_CUDA_FP8_PROMOTE_128 = 1, _32 = 2). The gemm
 * table times the promoted kernel (every variant) and the exact path beside the chosen one.
 *
 * NF4 runs the backend's default GEMM (cuda_quant.h); CLEF_CUDA_NF4_GEMM=dequant|fused|run15
 * in the environment picks another (the backend reads it).
 *
 * INT8 and exact FP8 run the backend's default GEMMs; CLEF_BENCH_INT8_WGMMA=v and
 * CLEF_BENCH_FP8_EXACT_WGMMA=v (v: a CLEF_CUDA_WGMMA_* variant, 0 = cuBLASLt; for FP8 also
 * CLEF_CUDA_FP8_EXACT_GEMM=cublaslt|auto|mixed|mixed128|mixed-d1|mixed-d3|mixed-mc|mixed-t256|mixed-t256mc|wgmma, which the backend reads) pick others
 * for the gemm and forward benches.
 *
 * Which linears each precision quantizes (the releases, docs/quant.md): FP8 the attention and
 * MLP linears (Gated DeltaNet projections stay BF16); INT8 ConvRot every linear except GDN
 * in_proj_a / in_proj_b; NF4 every linear. The per-forward sums of the gemm table and the
 * forward bench follow that.
 */
#include "../bench_util.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_quant.h"
#include "clef.h"
#include "cuda/random_release.h"
#include "model/qwen35_internal.h"
#include "quant/nf4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_BF16, P_FP8, P_INT8, P_NF4, P_COUNT };
static const char *prec_name[P_COUNT] = {"bf16", "fp8", "int8", "nf4"};

/* ---- quantized random matrices ---------------------------------------------------------------- */

/* One quantized (or BF16) weight on the device with its descriptor; free with qm_free. */
typedef struct qmat {
    clef_matrix m;
    clef_quant q;
    void *bufs[5];
    size_t bytes;
} qmat;

static void *qalloc(clef_backend *be, qmat *w, int slot, size_t bytes) {
    w->bufs[slot] = clef_backend_alloc(be, bytes);
    w->bytes += bytes;
    return w->bufs[slot];
}

static int qm_make(clef_backend *be, int prec, int64_t N, int64_t K, uint64_t seed, qmat *w) {
    memset(w, 0, sizeof *w);
    w->m.rows = N, w->m.cols = K, w->m.ld = K;
    int st = CLEF_OK;
    if (prec == P_BF16) {
        w->m.type = CLEF_WTYPE_BF16;
        void *d = qalloc(be, w, 0, 2 * (size_t)(N * K));
        st = d ? clef_backend_cuda_fill_normal_bf16(be, d, (size_t)(N * K), 0.02f, seed) : CLEF_ERR_OUT_OF_MEMORY;
        w->m.data = d;
        return st;
    }
    w->m.quant = &w->q;
    if (prec == P_FP8 || prec == P_INT8) {
        w->m.type = prec == P_FP8 ? CLEF_WTYPE_FP8_E4M3 : CLEF_WTYPE_INT8_CONVROT;
        void *d = qalloc(be, w, 0, (size_t)(N * K));
        float *s = qalloc(be, w, 1, sizeof(float) * (size_t)N);
        if (!d || !s)
            return CLEF_ERR_OUT_OF_MEMORY;
        st = clef_cuda_fill_random_codes(be, w->m.type, d, (size_t)(N * K), seed);
        /* random e4m3 codes are up to 448 in size, int8 up to 127: scale to ~0.02 */
        if (st == CLEF_OK)
            st = clef_cuda_fill_f32(be, s, (size_t)N, prec == P_FP8 ? 2e-4f : 3e-4f);
        w->m.data = d;
        if (prec == P_FP8)
            w->q.u.fp8.weight_scale = s;
        else
            w->q.u.int8_convrot.weight_scale = s, w->q.u.int8_convrot.rotation_group = 256;
        return st;
    }
    /* NF4, double quant, blocks of 64, nested blocks of 256 */
    const int64_t n = N * K, nb = (n + 63) / 64, nn = (nb + 255) / 256;
    w->m.type = CLEF_WTYPE_NF4;
    void *packed = qalloc(be, w, 0, (size_t)((n + 1) / 2));
    void *absq = qalloc(be, w, 1, (size_t)nb);
    float *nested = qalloc(be, w, 2, sizeof(float) * (size_t)nn);
    float *code = qalloc(be, w, 3, sizeof(float) * 16), *ncode = qalloc(be, w, 4, sizeof(float) * 256);
    if (!packed || !absq || !nested || !code || !ncode)
        return CLEF_ERR_OUT_OF_MEMORY;
    float ntab[256];
    for (int i = 0; i < 256; i++)
        ntab[i] = (float)(i + 1) / 256.0f;
    st = clef_cuda_fill_random_codes(be, CLEF_WTYPE_NF4, packed, (size_t)((n + 1) / 2), seed);
    if (st == CLEF_OK)
        st = clef_cuda_fill_random_codes(be, CLEF_WTYPE_NF4, absq, (size_t)nb, seed ^ 0x55);
    if (st == CLEF_OK)
        st = clef_cuda_fill_f32(be, nested, (size_t)nn, 0.04f);
    if (st == CLEF_OK)
        st = clef_backend_write(be, code, clef_nf4_table, sizeof(float) * 16);
    if (st == CLEF_OK)
        st = clef_backend_write(be, ncode, ntab, sizeof ntab);
    w->m.data = packed;
    w->q.u.nf4 = (clef_quant_nf4){.block = 64, .absmax_q = absq, .nested_absmax = nested, .nested_block = 256,
                                  .nested_offset = 0.001f, .code = code, .nested_code = ncode};
    return st;
}

static void qm_free(clef_backend *be, qmat *w) {
    for (int i = 0; i < 5; i++)
        clef_backend_release(be, w->bufs[i]);
    memset(w, 0, sizeof *w);
}

/* ---- gemm ------------------------------------------------------------------------------------- */

typedef struct lin_shape {
    const char *name;
    int64_t N, K;
    int n_gdn, n_other; /* how many per forward: Gated DeltaNet projections, the rest */
} lin_shape;

static const lin_shape shapes_27b[] = {
    {"in_proj_qkv", 10240, 5120, 48, 0}, {"in_proj_z", 6144, 5120, 48, 0},
    {"out_proj, o_proj", 5120, 6144, 48, 16}, {"q_proj", 12288, 5120, 0, 16},
    {"k_proj, v_proj", 1024, 5120, 0, 32}, {"gate, up", 17408, 5120, 0, 128},
    {"down", 5120, 17408, 0, 64},
};
static const lin_shape shapes_9b[] = {
    {"in_proj_qkv, q_proj", 8192, 4096, 24, 8}, {"in_z, out_proj, o_proj", 4096, 4096, 48, 8},
    {"k_proj, v_proj", 1024, 4096, 0, 16}, {"gate, up", 12288, 4096, 0, 64},
    {"down", 4096, 12288, 0, 32},
};

static const int64_t bench_T[] = {298, 1502, 2270, 8192, 8 * 1502};

/* The linear shapes of the 9B or 27B, their count and their largest K and N (the buffers of
 * the gemm and wgmma benches are sized for those). */
static const lin_shape *model_shapes(int is27, int *n_sh, int64_t *maxK, int64_t *maxN) {
    const lin_shape *sh = is27 ? shapes_27b : shapes_9b;
    *n_sh = is27 ? (int)(sizeof shapes_27b / sizeof *sh) : (int)(sizeof shapes_9b / sizeof *sh);
    *maxK = *maxN = 0;
    for (int i = 0; i < *n_sh; i++) {
        *maxK = sh[i].K > *maxK ? sh[i].K : *maxK;
        *maxN = sh[i].N > *maxN ? sh[i].N : *maxN;
    }
    return sh;
}
#define N_T 5

/* A host table of N(0, 1) samples drawn by index: billions of activations in a second. */
static void fill_x(float *x, size_t n) {
    static float table[4096];
    uint64_t s = 0x12345;
    for (int i = 0; i < 4096; i++)
        table[i] = rr_normal(&s);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = table[s & 4095];
    }
}

/* The activations x [maxT, maxK] (N(0, 1), fill_x) and the output y [maxT, maxN] on the device,
 * the buffers every GEMM table times on; 0, or 1 when out of memory (nothing to free: the bench
 * exits). */
static int device_xy(clef_backend *be, int64_t maxT, int64_t maxK, int64_t maxN, float **x, float **y) {
    float *xh = malloc(sizeof(float) * (size_t)(maxT * maxK));
    *x = clef_backend_alloc(be, sizeof(float) * (size_t)(maxT * maxK));
    *y = clef_backend_alloc(be, sizeof(float) * (size_t)(maxT * maxN));
    if (!xh || !*x || !*y) {
        free(xh);
        return 1;
    }
    fill_x(xh, (size_t)(maxT * maxK));
    int st = clef_backend_write(be, *x, xh, sizeof(float) * (size_t)(maxT * maxK));
    free(xh);
    return st != CLEF_OK;
}

static double time_matmul(clef_backend *be, int reps, int64_t T, const float *x, int64_t K, const clef_matrix *w,
                          float *y, double *times) {
    for (int r = -3; r < reps; r++) {
        clef_cuda_timer_start(be);
        clef_matmul(be, T, x, K, w, NULL, y, w->rows, 0);
        double ms = clef_cuda_timer_stop(be);
        if (r >= 0)
            times[r] = ms;
    }
    return clef_backend_synchronize(be) == CLEF_OK ? bench_median(times, reps) : -1.0;
}

/* the quantizer / dequantizer step alone */
static double time_step(clef_backend *be, int reps, int prec, int64_t T, const float *x, int64_t K, const qmat *w,
                        void *buf, float *sx, double *times) {
    for (int r = -3; r < reps; r++) {
        clef_cuda_timer_start(be);
        if (prec == P_FP8)
            clef_cuda_fp8_quantize_tokens(be, T, K, x, K, buf, sx);
        else if (prec == P_INT8)
            clef_cuda_convrot_quantize_tokens(be, T, K, x, K, 256, NULL, 0, buf, sx);
        else
            clef_cuda_nf4_dequant_bf16(be, &w->m, buf);
        double ms = clef_cuda_timer_stop(be);
        if (r >= 0)
            times[r] = ms;
    }
    return clef_backend_synchronize(be) == CLEF_OK ? bench_median(times, reps) : -1.0;
}

/* The FP8 path main() chose for the fp8 column and the forward bench, set back after the gemm
 * table's other FP8 columns. */
static int bench_fp8_tc, bench_fp8_promoted;

static void set_fp8_path(clef_backend *be, int tensor_cores, int promoted) {
    clef_backend_cuda_set_fp8_tensor_cores(be, tensor_cores);
    clef_backend_cuda_set_fp8_promoted(be, promoted);
}

/* the gemm table's FP8 columns beside the chosen path: our fp8 wgmma kernel promoting every
 * 128 and every 32 of K (CLEF_CUDA_FP8_PROMOTE_128, _32), the exact path, and cuBLASLt's fp8
 * GEMM with fast accumulation (CLEF_CUDA_FP8_TC_FAST) */
enum { FP8_P128, FP8_P32, FP8_EXACT, FP8_FAST, FP8_COLS };

static int run_gemm(clef_backend *be, int is27, int reps) {
    int n_sh;
    int64_t maxK, maxN, maxT = bench_T[N_T - 1];
    const lin_shape *sh = model_shapes(is27, &n_sh, &maxK, &maxN);
    float *x, *y;
    int oom = device_xy(be, maxT, maxK, maxN, &x, &y);
    void *buf = clef_backend_alloc(be, (size_t)(maxT * maxK) > 2 * (size_t)(maxN * maxK) ? (size_t)(maxT * maxK)
                                                                                            : 2 * (size_t)(maxN * maxK));
    float *sx = clef_backend_alloc(be, sizeof(float) * (size_t)maxT);
    if (oom || !buf || !sx) {
        fprintf(stderr, "gemm bench: out of memory\n");
        return 1;
    }
    double *times = malloc(sizeof(double) * (size_t)reps);
    double fwd[N_T][P_COUNT], fwd8[N_T][FP8_COLS];
    memset(fwd, 0, sizeof fwd);
    memset(fwd8, 0, sizeof fwd8);
    printf("\n| model | linear | N x K | per forward | T | bf16 ms | TFLOP/s | fp8 ms | TFLOP/s | quantize ms | "
           "fp8 promo-128 ms | TFLOP/s | fp8 promo-32 ms | TFLOP/s | fp8 exact ms | TFLOP/s | fp8 fast-accum ms | "
           "TFLOP/s | int8 ms | TFLOP/s | rotate+quantize ms | nf4 ms | TFLOP/s | dequantize ms |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_sh; i++) {
        qmat w[P_COUNT];
        int st = CLEF_OK;
        for (int p = 0; p < P_COUNT && st == CLEF_OK; p++)
            st = qm_make(be, p, sh[i].N, sh[i].K, 100 + (uint64_t)(10 * i + p), &w[p]);
        if (st != CLEF_OK || clef_backend_synchronize(be) != CLEF_OK) {
            fprintf(stderr, "gemm bench: weights: %s\n", clef_last_error());
            return 1;
        }
        for (int ti = 0; ti < N_T; ti++) {
            const int64_t T = bench_T[ti];
            double ms[P_COUNT], step[P_COUNT] = {0};
            for (int p = 0; p < P_COUNT; p++) {
                ms[p] = time_matmul(be, reps, T, x, sh[i].K, &w[p].m, y, times);
                if (p != P_BF16)
                    step[p] = time_step(be, reps, p, T, x, sh[i].K, &w[p], buf, sx, times);
                if (ms[p] < 0 || step[p] < 0) {
                    fprintf(stderr, "gemm bench: %s %s T=%lld: %s\n", sh[i].name, prec_name[p], (long long)T,
                            clef_last_error());
                    return 1;
                }
            }
            double ms8[FP8_COLS];
            for (int c = 0; c < FP8_COLS; c++) {
                set_fp8_path(be, c == FP8_FAST ? CLEF_CUDA_FP8_TC_FAST : CLEF_CUDA_FP8_TC_OFF,
                             c >= FP8_EXACT ? CLEF_CUDA_FP8_PROMOTE_OFF : CLEF_CUDA_FP8_PROMOTE_128 + c);
                ms8[c] = time_matmul(be, reps, T, x, sh[i].K, &w[P_FP8].m, y, times);
                if (ms8[c] < 0) {
                    fprintf(stderr, "gemm bench: %s fp8 column %d T=%lld: %s\n", sh[i].name, c, (long long)T,
                            clef_last_error());
                    return 1;
                }
                fwd8[ti][c] += sh[i].n_gdn * ms[P_BF16] + sh[i].n_other * ms8[c];
            }
            set_fp8_path(be, bench_fp8_tc, bench_fp8_promoted);
            const double fl = 2.0 * (double)sh[i].N * (double)sh[i].K * (double)T / 1e9; /* GFLOP */
            printf("| %s | %s | %lld x %lld | %d | %lld | %.3f | %.0f | %.3f | %.0f | %.3f | %.3f | %.0f | %.3f | %.0f | "
                   "%.3f | %.0f | %.3f | %.0f | %.3f | %.0f | %.3f | %.3f | %.0f | %.3f |\n",
                   is27 ? "27B" : "9B", sh[i].name, (long long)sh[i].N, (long long)sh[i].K, sh[i].n_gdn + sh[i].n_other,
                   (long long)T, ms[P_BF16], fl / ms[P_BF16], ms[P_FP8], fl / ms[P_FP8], step[P_FP8], ms8[FP8_P128],
                   fl / ms8[FP8_P128], ms8[FP8_P32], fl / ms8[FP8_P32], ms8[FP8_EXACT], fl / ms8[FP8_EXACT],
                   ms8[FP8_FAST], fl / ms8[FP8_FAST],
                   ms[P_INT8], fl / ms[P_INT8], step[P_INT8], ms[P_NF4], fl / ms[P_NF4], step[P_NF4]);
            fflush(stdout);
            /* one forward's linears in each precision (see the file comment) */
            fwd[ti][P_BF16] += (sh[i].n_gdn + sh[i].n_other) * ms[P_BF16];
            fwd[ti][P_FP8] += sh[i].n_gdn * ms[P_BF16] + sh[i].n_other * ms[P_FP8];
            fwd[ti][P_INT8] += (sh[i].n_gdn + sh[i].n_other) * ms[P_INT8];
            fwd[ti][P_NF4] += (sh[i].n_gdn + sh[i].n_other) * ms[P_NF4];
        }
        for (int p = 0; p < P_COUNT; p++)
            qm_free(be, &w[p]);
    }
    printf("\nSum over one forward's linears (GDN in_proj_a / in_proj_b left out: < 0.1%% of the work); FP8 keeps "
           "the GDN projections in BF16:\n\n| model | T | bf16 ms | fp8 ms | int8 ms | nf4 ms | fp8 / bf16 | int8 / bf16 "
           "| nf4 / bf16 |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int ti = 0; ti < N_T; ti++)
        printf("| %s | %lld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", is27 ? "27B" : "9B",
               (long long)bench_T[ti], fwd[ti][P_BF16], fwd[ti][P_FP8], fwd[ti][P_INT8], fwd[ti][P_NF4],
               fwd[ti][P_FP8] / fwd[ti][P_BF16], fwd[ti][P_INT8] / fwd[ti][P_BF16], fwd[ti][P_NF4] / fwd[ti][P_BF16]);
    printf("\nThe same sums for the FP8 paths beside it (GDN projections in BF16 again; / bf16: over the bf16 "
           "sum):\n\n| model | T | fp8 ms | promo-128 ms | promo-32 ms | exact ms | fast-accum ms | promo-128 / bf16 "
           "| promo-32 / bf16 | exact / bf16 | fast-accum / bf16 |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int ti = 0; ti < N_T; ti++) {
        printf("| %s | %lld | %.2f", is27 ? "27B" : "9B", (long long)bench_T[ti], fwd[ti][P_FP8]);
        for (int c = 0; c < FP8_COLS; c++)
            printf(" | %.2f", fwd8[ti][c]);
        for (int c = 0; c < FP8_COLS; c++)
            printf(" | %.2f", fwd8[ti][c] / fwd[ti][P_BF16]);
        printf(" |\n");
    }
    printf("FP8 matmuls scaled by: %s\n", clef_cuda_fp8_gemm_path(be));
    clef_backend_release(be, x), clef_backend_release(be, y), clef_backend_release(be, buf);
    clef_backend_release(be, sx);
    free(times);
    return 0;
}

/* ---- NF4: its GEMMs side by side ------------------------------------------------------------------ */

/* Every linear shape and row count: BF16, then the NF4 matmul in each mode (run15's path, the
 * vectorized dequantization + cuBLASLt, the fused kernel) and each dequantization kernel
 * alone with its memory rate (codes + absmax read, bf16 written). */
static int run_nf4_gemm(clef_backend *be, int is27, int reps) {
    int n_sh;
    int64_t maxK, maxN, maxT = bench_T[N_T - 1];
    const lin_shape *sh = model_shapes(is27, &n_sh, &maxK, &maxN);
    float *x, *y;
    int oom = device_xy(be, maxT, maxK, maxN, &x, &y);
    void *buf = clef_backend_alloc(be, 2 * (size_t)(maxN * maxK));
    if (oom || !buf) {
        fprintf(stderr, "nf4 gemm bench: out of memory\n");
        return 1;
    }
    double *times = malloc(sizeof(double) * (size_t)reps);
    static const int modes[3] = {CLEF_CUDA_NF4_RUN15, CLEF_CUDA_NF4_DEQUANT, CLEF_CUDA_NF4_FUSED};
    const int mode0 = clef_backend_cuda_nf4_gemm(be);
    double fwd[N_T][4];
    memset(fwd, 0, sizeof fwd);
    printf("\n| model | linear | N x K | per forward | T | bf16 ms | nf4 run15 path ms | nf4 dequant+cuBLASLt ms | nf4 "
           "fused ms | fused TFLOP/s | fused / bf16 | dequant run15 ms (GB/s) | dequant vector ms (GB/s) |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_sh; i++) {
        qmat wb, wq;
        int st = qm_make(be, P_BF16, sh[i].N, sh[i].K, 100 + (uint64_t)(10 * i), &wb);
        if (st == CLEF_OK)
            st = qm_make(be, P_NF4, sh[i].N, sh[i].K, 103 + (uint64_t)(10 * i), &wq);
        if (st != CLEF_OK || clef_backend_synchronize(be) != CLEF_OK) {
            fprintf(stderr, "nf4 gemm bench: weights: %s\n", clef_last_error());
            return 1;
        }
        /* bytes a dequantization moves: codes and absmax codes read, bf16 written (the
         * nested absmax and tables are a few KB) */
        const double deq_bytes = (double)wq.bytes + 2.0 * (double)(sh[i].N * sh[i].K);
        double deq[2];
        for (int m = 0; m < 2; m++) {
            clef_backend_cuda_set_nf4_gemm(be, modes[m]);
            deq[m] = time_step(be, reps, P_NF4, 0, x, sh[i].K, &wq, buf, NULL, times);
        }
        for (int ti = 0; ti < N_T; ti++) {
            const int64_t T = bench_T[ti];
            double ms[4];
            clef_backend_cuda_set_nf4_gemm(be, mode0);
            ms[0] = time_matmul(be, reps, T, x, sh[i].K, &wb.m, y, times);
            for (int m = 0; m < 3; m++) {
                clef_backend_cuda_set_nf4_gemm(be, modes[m]);
                ms[1 + m] = time_matmul(be, reps, T, x, sh[i].K, &wq.m, y, times);
            }
            if (ms[0] < 0 || ms[1] < 0 || ms[2] < 0 || ms[3] < 0 || deq[0] < 0 || deq[1] < 0) {
                fprintf(stderr, "nf4 gemm bench: %s T=%lld: %s\n", sh[i].name, (long long)T, clef_last_error());
                return 1;
            }
            const double fl = 2.0 * (double)sh[i].N * (double)sh[i].K * (double)T / 1e9;
            printf("| %s | %s | %lld x %lld | %d | %lld | %.3f | %.3f | %.3f | %.3f | %.0f | %.2f | %.3f (%.0f) | %.3f "
                   "(%.0f) |\n",
                   is27 ? "27B" : "9B", sh[i].name, (long long)sh[i].N, (long long)sh[i].K, sh[i].n_gdn + sh[i].n_other,
                   (long long)T, ms[0], ms[1], ms[2], ms[3], fl / ms[3], ms[3] / ms[0], deq[0],
                   deq_bytes / (deq[0] * 1e6), deq[1], deq_bytes / (deq[1] * 1e6));
            for (int c = 0; c < 4; c++)
                fwd[ti][c] += (sh[i].n_gdn + sh[i].n_other) * ms[c];
        }
        qm_free(be, &wb), qm_free(be, &wq);
    }
    clef_backend_cuda_set_nf4_gemm(be, mode0);
    printf("\nSum over one forward's linears (all in NF4; GDN in_proj_a / in_proj_b left out):\n\n| model | T | bf16 ms "
           "| nf4 run15 path ms | nf4 dequant+cuBLASLt ms | nf4 fused ms | run15 / bf16 | dequant / bf16 | fused / "
           "bf16 |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int ti = 0; ti < N_T; ti++)
        printf("| %s | %lld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", is27 ? "27B" : "9B",
               (long long)bench_T[ti], fwd[ti][0], fwd[ti][1], fwd[ti][2], fwd[ti][3], fwd[ti][1] / fwd[ti][0],
               fwd[ti][2] / fwd[ti][0], fwd[ti][3] / fwd[ti][0]);
    clef_backend_release(be, x), clef_backend_release(be, y), clef_backend_release(be, buf);
    free(times);
    return 0;
}

/* ---- the wgmma kernels vs cuBLASLt --------------------------------------------------------------- */

/* cuBLASLt, then each wgmma variant: INT8's (the persistent and ping-pong kernels too), exact FP8's */
#define N_WG (1 + CLEF_CUDA_WGMMA_INT8_LAST)
#define N_WG_FP8 (1 + CLEF_CUDA_WGMMA_LAST)

/* GEMM-only time of one int8 kernel: CLEF_CUDA_WGMMA_OFF = cuBLASLt (int32 out), else that
 * wgmma variant (int32 out) */
static double time_i8_gemm(clef_backend *be, int reps, int kernel, int64_t T, int64_t N, int64_t K, const int8_t *qx,
                           const int8_t *qw, int32_t *acc, int64_t ldacc, double *times) {
    for (int r = -3; r < reps; r++) {
        clef_cuda_timer_start(be);
        if (kernel)
            clef_cuda_int8_gemm_i32_wgmma(be, kernel, T, N, K, qx, qw, acc, ldacc);
        else
            clef_cuda_int8_gemm_i32(be, T, N, K, qx, qw, acc, ldacc);
        double ms = clef_cuda_timer_stop(be);
        if (r >= 0)
            times[r] = ms;
    }
    return clef_backend_synchronize(be) == CLEF_OK ? bench_median(times, reps) : -1.0;
}

/* Every linear shape, every T, two tables:
 *  INT8: the int8 GEMM alone on cuBLASLt and on each wgmma variant (int32 out; TOPS =
 *  2 N K T / time), whether the variants' sums equal cuBLASLt's (compared on the host for
 *  T <= 2,270), and the whole INT8 matmul (quantizer + GEMM + scaling) on each;
 *  FP8 exact: the whole matmul (quantizer + widening + GEMM + scaling) on cuBLASLt's BF16 GEMM
 *  and on each bf16 wgmma variant. The BF16 matmul beside them: the rate to beat. */
static int run_wgmma(clef_backend *be, int is27, int reps) {
    int n_sh;
    int64_t maxK, maxN, maxT = bench_T[N_T - 1];
    const lin_shape *sh = model_shapes(is27, &n_sh, &maxK, &maxN);
    float *x, *y;
    int oom = device_xy(be, maxT, maxK, maxN, &x, &y);
    int8_t *qx = clef_backend_alloc(be, (size_t)(maxT * maxK));
    int32_t *acc = clef_backend_alloc(be, sizeof(int32_t) * (size_t)(maxT * maxN));
    const size_t cmp_n = (size_t)2270 * (size_t)maxN;
    int32_t *h0 = malloc(sizeof(int32_t) * cmp_n), *h1 = malloc(sizeof(int32_t) * cmp_n);
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (oom || !qx || !acc || !h0 || !h1 || !times ||
        clef_cuda_fill_random_codes(be, CLEF_WTYPE_INT8_CONVROT, qx, (size_t)(maxT * maxK), 77) != CLEF_OK) {
        fprintf(stderr, "wgmma bench: out of memory\n");
        return 1;
    }
    int bad = 0;
    for (int fp8 = 0; fp8 < 2; fp8++) {
        const int nv = fp8 ? N_WG_FP8 : N_WG; /* cuBLASLt + the variants this table times */
        if (!fp8) {
            printf("\nINT8: the GEMM alone (int32 out) on cuBLASLt and on wgmma variants 1 (128 x 128 tiles), 2 (128 x 256, "
                   "two m64n128 per slice), 3 (128 x 256, one m64n256), 4 (3 in clusters of two, the weight multicast), "
                   "5 (3 persistent), 6 (1 persistent), 7 (ping-pong, 128 x 128 a warpgroup), 8 (ping-pong, 64 x 256 a "
                   "warpgroup), 9 (7 in clusters of two, the weight multicast), 10 (5 in clusters of two, the weight "
                   "multicast), 11 (5 in clusters of 2 x 2, the weight and x multicast), 12 (5 with its results stored by "
                   "TMA); then the whole INT8 matmul on each and on the default (auto)\n\n"
                   "| model | linear | N x K | T | bf16 matmul ms | TFLOP/s | cuBLASLt ms | TOPS |");
            for (int k = 1; k < nv; k++)
                printf(" w%d ms | TOPS |", k);
            printf(" sums = cuBLASLt's | matmul cuBLASLt ms |");
            for (int k = 1; k < nv; k++)
                printf(" w%d ms |", k);
            printf(" auto ms | best TFLOP/s |\n|---|---|---|---|---|---|---|---|");
            for (int k = 1; k < nv; k++)
                printf("---|---|");
            printf("---|---|");
            for (int k = 1; k < nv; k++)
                printf("---|");
            printf("---|---|\n");
        } else
            printf("\nFP8 exact path (bf16 code values, fp32 sums): the whole matmul on cuBLASLt's BF16 GEMM and on bf16 "
                   "wgmma variants 1-4 (scaling fused)\n\n"
                   "| model | linear | N x K | T | bf16 matmul ms | TFLOP/s | exact cuBLASLt ms | TFLOP/s | w1 ms | w2 ms | "
                   "w3 ms | w4 ms | auto ms | best TFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < n_sh; i++) {
            qmat wb, wq;
            const int64_t N = sh[i].N, K = sh[i].K, ld = (N + 3) / 4 * 4;
            if (qm_make(be, P_BF16, N, K, 300 + (uint64_t)i, &wb) != CLEF_OK ||
                qm_make(be, fp8 ? P_FP8 : P_INT8, N, K, 400 + (uint64_t)i, &wq) != CLEF_OK ||
                clef_backend_synchronize(be) != CLEF_OK) {
                fprintf(stderr, "wgmma bench: weights: %s\n", clef_last_error());
                return 1;
            }
            for (int ti = 0; ti < N_T; ti++) {
                const int64_t T = bench_T[ti];
                const double fl = 2.0 * (double)N * (double)K * (double)T / 1e9;
                double bf = time_matmul(be, reps, T, x, K, &wb.m, y, times), g[N_WG] = {0}, m[N_WG + 1], best = 1e30;
                const char *same = "-";
                for (int k = 0; k < nv && !fp8; k++) {
                    g[k] = time_i8_gemm(be, reps, k, T, N, K, qx, wq.m.data, acc, ld, times);
                    if (T <= 2270 && g[k] >= 0) { /* this kernel's sums vs cuBLASLt's */
                        int32_t *h = k ? h1 : h0;
                        if (clef_backend_read(be, h, acc, sizeof(int32_t) * (size_t)(T * ld)) != CLEF_OK)
                            g[k] = -1;
                        if (k && memcmp(h0, h1, sizeof(int32_t) * (size_t)(T * ld)) != 0)
                            same = "NO", bad = 1;
                        else if (k && strcmp(same, "NO"))
                            same = "yes";
                    }
                }
                for (int k = 0; k <= nv; k++) { /* k = nv: the default, CLEF_CUDA_WGMMA_AUTO */
                    const int v = k < nv ? k : CLEF_CUDA_WGMMA_AUTO;
                    if (fp8)
                        clef_backend_cuda_set_fp8_exact_wgmma(be, v);
                    else
                        clef_backend_cuda_set_int8_wgmma(be, v);
                    m[k] = time_matmul(be, reps, T, x, K, &wq.m, y, times);
                    best = m[k] >= 0 && m[k] < best ? m[k] : best;
                }
                clef_backend_cuda_set_fp8_exact_wgmma(be, CLEF_CUDA_WGMMA_OFF);
                clef_backend_cuda_set_int8_wgmma(be, CLEF_CUDA_WGMMA_OFF);
                int failed = bf < 0;
                for (int k = 0; k < nv; k++)
                    failed |= (!fp8 && g[k] < 0) || m[k] < 0;
                failed |= m[nv] < 0;
                if (failed) {
                    fprintf(stderr, "wgmma bench: %s T=%lld: %s\n", sh[i].name, (long long)T, clef_last_error());
                    return 1;
                }
                if (!fp8) {
                    printf("| %s | %s | %lld x %lld | %lld | %.3f | %.0f |", is27 ? "27B" : "9B", sh[i].name,
                           (long long)N, (long long)K, (long long)T, bf, fl / bf);
                    for (int k = 0; k < nv; k++)
                        printf(" %.3f | %.0f |", g[k], fl / g[k]);
                    printf(" %s |", same);
                    for (int k = 0; k <= nv; k++)
                        printf(" %.3f |", m[k]);
                    printf(" %.0f |\n", fl / best);
                } else
                    printf("| %s | %s | %lld x %lld | %lld | %.3f | %.0f | %.3f | %.0f | %.3f | %.3f | %.3f | %.3f | %.3f | "
                           "%.0f |\n",
                           is27 ? "27B" : "9B", sh[i].name, (long long)N, (long long)K, (long long)T, bf, fl / bf, m[0],
                           fl / m[0], m[1], m[2], m[3], m[4], m[5], fl / best);
            }
            qm_free(be, &wb), qm_free(be, &wq);
        }
    }
    clef_backend_release(be, x), clef_backend_release(be, y), clef_backend_release(be, qx);
    clef_backend_release(be, acc);
    free(h0), free(h1), free(times);
    if (bad)
        fprintf(stderr, "wgmma bench: a wgmma kernel's int32 sums differ from cuBLASLt's\n");
    return bad;
}

/* ---- forward ---------------------------------------------------------------------------------- */

static int zero_matrix_read(void *ctx, const clef_tensor_info *t, void *dst) {
    if (t->dtype == CLEF_DTYPE_BF16) {
        memset(dst, 0, t->n_bytes);
        return CLEF_OK;
    }
    return rr_read(ctx, t, dst);
}

/* The linears of layer L that precision prec quantizes (NULL-terminated). */
static int layer_linears(qwen35_layer *L, int prec, clef_matrix **out) {
    int n = 0;
    out[n++] = &L->mlp_gate, out[n++] = &L->mlp_up, out[n++] = &L->mlp_down;
    clef_matrix *attn[] = {&L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj};
    clef_matrix *gdn[] = {&L->in_qkv, &L->in_z, &L->out_proj};
    for (int j = 0; j < 4; j++)
        if (attn[j]->data)
            out[n++] = attn[j];
    if (prec != P_FP8)
        for (int j = 0; j < 3; j++)
            if (gdn[j]->data)
                out[n++] = gdn[j];
    if (prec == P_NF4 && L->in_a.data)
        out[n++] = &L->in_a, out[n++] = &L->in_b;
    return n;
}

static int run_forward(clef_backend *be, int is27, int64_t n_layers, int runs) {
    clef_layer_type *types = malloc(sizeof(clef_layer_type) * (size_t)n_layers);
    clef_text_config cfg = is27 ? config_27b(n_layers, types) : config_9b(n_layers, types);
    random_release rr = {.cfg = &cfg, .seed = 7};
    clef_tensor_source src = {.ctx = &rr, .find = rr_find, .read = zero_matrix_read};
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = 8192, p.max_tokens = 8 * 1502;
    qwen35_model *m = NULL;
    qwen35_state *state = NULL;
    int st = qwen35_load(&cfg, &src, be, &m);
    uint64_t seed = 1;
    if (st == CLEF_OK)
        st = clef_backend_cuda_fill_normal_bf16(be, (void *)m->w.embed.data, (size_t)(m->w.embed.rows * m->w.embed.cols),
                                                0.02f, seed++);
    for (int64_t i = 0; i < n_layers && st == CLEF_OK; i++) {
        qwen35_layer *L = &m->w.layers[i];
        clef_matrix *ws[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->in_qkv, &L->in_z, &L->in_b, &L->in_a,
                             &L->out_proj, &L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj};
        for (size_t j = 0; j < sizeof ws / sizeof *ws && st == CLEF_OK; j++)
            if (ws[j]->data)
                st = clef_backend_cuda_fill_normal_bf16(be, (void *)ws[j]->data, (size_t)(ws[j]->rows * ws[j]->cols),
                                                        0.02f, seed++);
    }
    if (st == CLEF_OK)
        st = qwen35_state_create(m, be, &p, &state);
    if (st != CLEF_OK) {
        fprintf(stderr, "forward bench: load: %s\n", clef_last_error());
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * 8 * 8192);
    for (int64_t i = 0; i < 8 * 8192; i++)
        ids[i] = (int32_t)((i * 2654435761u) % (uint64_t)cfg.vocab_size);
    double *times = malloc(sizeof(double) * (size_t)runs);
    const int64_t cases[][2] = {{1, 298}, {1, 1502}, {1, 2270}, {1, 8192}, {8, 1502}};
    printf("\n# whole backbone, %s shape (%lld layers), linears in each precision (random weights). Memory as a "
           "release of that precision would hold it: the BF16 linears the bench keeps loaded beside the quantized "
           "ones are taken off the backend's counters; peak is each row's own (reset before its forwards), run "
           "state planned for 8,192-token sequences / 12,016-token batches\n\n",
           is27 ? "27B" : "9B", (long long)n_layers);
    /* the last four columns: where the bytes over the weights go (RunState: the state's buffers,
     * its scratch included; the rest the backend's buffers grown on demand, clef_cuda_grown) */
    static const char *header = "| model | precision | linear weights GiB | batch x tokens | ms (median of %d) | tokens/s "
                                "| weights GiB | peak GiB | peak - weights GiB | RunState GiB | bf16 staging GiB | "
                                "quant own scratch GiB | hand-off GiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    printf(header, runs);
    const int max_lin = 12;
    clef_matrix *saved = malloc(sizeof(clef_matrix) * (size_t)(n_layers * max_lin));
    qmat *qm = calloc((size_t)(n_layers * max_lin), sizeof(qmat));
    const char *only = getenv("CLEF_BENCH_PRECISIONS"); /* e.g. "bf16,fp8": the others skipped */
    /* The backend's buffers grown on demand (clef_cuda_grown) are freed before each precision, so
     * its rows hold what a process running only that precision would, as the BF16 linears are
     * taken off; CLEF_BENCH_RELEASE_GROWN=0 keeps them (the staging the BF16 rows grew then
     * stays through the quantized rows, as run17 and before measured). */
    const char *release = getenv("CLEF_BENCH_RELEASE_GROWN");
    const int release_grown = !(release && !strcmp(release, "0"));
    printf("grown buffers %s before each precision (CLEF_BENCH_RELEASE_GROWN=%d)\n\n",
           release_grown ? "released" : "kept", release_grown);
    for (int prec = 0; prec < P_COUNT; prec++) {
        if (only && !strstr(only, prec_name[prec]))
            continue;
        size_t lin_bytes = 0, bf16_swapped = 0; /* the BF16 linears kept loaded beside the quantized ones */
        for (int64_t i = 0; i < n_layers && st == CLEF_OK; i++) {
            clef_matrix *lin[12];
            int n = layer_linears(&m->w.layers[i], prec, lin);
            for (int j = 0; j < n && st == CLEF_OK; j++) {
                qmat *q = &qm[i * max_lin + j];
                saved[i * max_lin + j] = *lin[j];
                if (prec == P_BF16) {
                    lin_bytes += clef_matrix_bytes(lin[j]);
                    continue;
                }
                st = qm_make(be, prec, lin[j]->rows, lin[j]->cols, 1000 + (uint64_t)(i * max_lin + j), q);
                lin_bytes += q->bytes;
                bf16_swapped += clef_matrix_bytes(lin[j]);
                *lin[j] = q->m;
                lin[j]->quant = &q->q; /* the descriptor lives in qm[], not in the copy */
            }
        }
        if (st == CLEF_OK)
            st = clef_backend_synchronize(be);
        /* plan the run state for the linears now in place: its scratch is sized for their
         * quantized matmuls (qwen35_state.c), and the matmuls write that much into it. A
         * state planned for the BF16 model had only the mixers' scratch, which the FP8 exact
         * path overran at 8,192 / 12,016 rows into the next buffer's size header (the
         * nonsense resident/peak of run13's last line). */
        if (st == CLEF_OK) {
            qwen35_state_free(state);
            state = NULL;
            if (release_grown)
                clef_cuda_release_grown(be);
            st = qwen35_state_create(m, be, &p, &state);
        }
        /* CLEF_BENCH_FUSED_COMPARE=1: each quantized precision's rows twice in this process,
         * its matmuls' own quantizers first, then the quantizers fused into the producers */
        const char *cmp = getenv("CLEF_BENCH_FUSED_COMPARE");
        const int passes = prec != P_BF16 && cmp && !strcmp(cmp, "1") ? 2 : 1;
        for (int pass = 0; pass < passes && st == CLEF_OK; pass++)
        for (int c = 0; c < 5 && st == CLEF_OK; c++) {
            if (passes == 2)
                clef_backend_cuda_set_fused_quant(be, pass);
            const int64_t ns = cases[c][0], T = cases[c][1];
            int64_t seq[9];
            for (int64_t s = 0; s <= ns; s++)
                seq[s] = s * T;
            clef_backend_cuda_memory_reset_peak(be);
            for (int r = -1; r < runs && st == CLEF_OK; r++) {
                double a = bench_now_ms();
                st = qwen35_forward(m, state, ns, seq, ids, NULL);
                if (st == CLEF_OK)
                    st = clef_backend_synchronize(be);
                if (r >= 0)
                    times[r] = bench_now_ms() - a;
            }
            if (st != CLEF_OK)
                break;
            double ms = bench_median(times, runs);
            size_t peak = 0;
            clef_backend_cuda_memory(be, NULL, &peak);
            const double G = 1073741824.0, weights = (double)(qwen35_weight_bytes(m) - bf16_swapped + (prec != P_BF16 ? lin_bytes : 0));
            clef_cuda_grown grown;
            clef_cuda_grown_bytes(be, &grown);
            printf("| %s | %s%s | %.2f | %lld x %lld | %.1f | %.0f | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f |\n",
                   is27 ? "27B" : "9B", prec_name[prec],
                   passes == 2 ? (pass ? " fused quantizers" : " standalone quantizers") : "", lin_bytes / G,
                   (long long)ns, (long long)T, ms, (double)(ns * T) / (ms * 1e-3), weights / G,
                   (double)(peak - bf16_swapped) / G, ((double)(peak - bf16_swapped) - weights) / G,
                   qwen35_state_bytes(state) / G, grown.staging / G, (grown.quant_scratch + grown.quant_extra) / G,
                   grown.handoff / G);
            fflush(stdout);
        }
        if (st == CLEF_OK && prec != P_BF16) {
            int64_t served = 0, writes = 0;
            clef_cuda_fused_quant_counts(be, &served, &writes);
            printf("\nquantized hand-off so far (all precisions): %lld matmuls read a producer's codes, %lld producer "
                   "launches wrote codes\n", (long long)served, (long long)writes);
            int64_t seq[2] = {0, 2270};
            clef_backend_cuda_profile(be, 1);
            for (int r = 0; r < 2; r++)
                qwen35_forward(m, state, 1, seq, ids, NULL);
            printf("\nPer-op GPU time, %s %s, 1 x 2270 tokens (mean of 2 forwards):\n\n", is27 ? "27B" : "9B",
                   prec_name[prec]);
            clef_backend_cuda_profile_report(be, stdout, 2);
            clef_backend_cuda_profile(be, 0);
            printf("\n");
            printf(header, runs);
        }
        /* put the BF16 linears back */
        for (int64_t i = 0; i < n_layers; i++) {
            clef_matrix *lin[12];
            int n = layer_linears(&m->w.layers[i], prec, lin);
            for (int j = 0; j < n; j++) {
                *lin[j] = saved[i * max_lin + j];
                if (prec != P_BF16)
                    qm_free(be, &qm[i * max_lin + j]);
            }
        }
        if (st != CLEF_OK) {
            fprintf(stderr, "forward bench (%s): %s\n", prec_name[prec], clef_last_error());
            return 1;
        }
    }
    size_t resident = 0, peak = 0;
    clef_backend_cuda_memory(be, &resident, &peak);
    printf("\nbackend device memory at the end: resident %.2f GiB, peak of the last row %.2f GiB (the BF16 model, %.2f "
           "GiB, loaded throughout)\n",
           resident / 1073741824.0, peak / 1073741824.0, qwen35_weight_bytes(m) / 1073741824.0);
    qwen35_state_free(state);
    qwen35_free(m);
    free(types), free(ids), free(times), free(saved), free(qm);
    return 0;
}

/* The NF4 27B release's device memory under its placement profiles: the whole 64-layer 27B
 * loaded (BF16 zeros from the random source), every linear swapped for NF4 (random codes), a
 * RunState for T tokens and forwards of T tokens. The device bytes are the backend's own
 * counters minus what the release would not hold there: the BF16 linears (loaded only to be
 * swapped out) and, for the 16gb profile, the embedding table (host RAM under it). The joint
 * head's weights (a few MiB) are not loaded here. */
static int run_nf4_memory(clef_backend *be, int64_t T, int runs) {
    const int64_t n_layers = 64;
    clef_layer_type *types = malloc(sizeof(clef_layer_type) * (size_t)n_layers);
    clef_text_config cfg = config_27b(n_layers, types);
    random_release rr = {.cfg = &cfg, .seed = 7};
    clef_tensor_source src = {.ctx = &rr, .find = rr_find, .read = zero_matrix_read};
    qwen35_model *m = NULL;
    qwen35_state *state = NULL;
    int st = qwen35_load(&cfg, &src, be, &m);
    const int max_lin = 12;
    qmat *qm = calloc((size_t)(n_layers * max_lin), sizeof(qmat));
    size_t bf16_lin = 0, nf4_lin = 0;
    for (int64_t i = 0; i < n_layers && st == CLEF_OK; i++) {
        clef_matrix *lin[12];
        int n = layer_linears(&m->w.layers[i], P_NF4, lin);
        for (int j = 0; j < n && st == CLEF_OK; j++) {
            qmat *q = &qm[i * max_lin + j];
            bf16_lin += clef_matrix_bytes(lin[j]);
            st = qm_make(be, P_NF4, lin[j]->rows, lin[j]->cols, 5000 + (uint64_t)(i * max_lin + j), q);
            nf4_lin += q->bytes;
            *lin[j] = q->m;
            lin[j]->quant = &q->q;
        }
    }
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = T, p.max_tokens = T;
    if (st == CLEF_OK)
        st = qwen35_state_create(m, be, &p, &state);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
    for (int64_t i = 0; i < T; i++)
        ids[i] = (int32_t)((i * 2654435761u) % (uint64_t)cfg.vocab_size);
    double *times = malloc(sizeof(double) * (size_t)runs);
    int64_t seq[2] = {0, T};
    for (int r = -1; r < runs && st == CLEF_OK; r++) {
        double a = bench_now_ms();
        st = qwen35_forward(m, state, 1, seq, ids, NULL);
        if (st == CLEF_OK)
            st = clef_backend_synchronize(be);
        if (r >= 0)
            times[r] = bench_now_ms() - a;
    }
    if (st != CLEF_OK) {
        fprintf(stderr, "nf4 memory bench: %s\n", clef_last_error());
        return 1;
    }
    size_t resident = 0, peak = 0;
    clef_backend_cuda_memory(be, &resident, &peak);
    const size_t embed = clef_matrix_bytes(&m->w.embed), weights = qwen35_weight_bytes(m) - bf16_lin + nf4_lin;
    const double G = 1073741824.0, ms = bench_median(times, runs);
    printf("\n# NF4 27B (64 layers) on the device, 1 x %lld tokens, %.1f ms (median of %d); counters: resident %.2f "
           "GiB, peak %.2f GiB, of which BF16 linears %.2f GiB (not a release's) and embed_tokens %.2f GiB\n\n",
           (long long)T, ms, runs, resident / G, peak / G, bf16_lin / G, embed / G);
    printf("| profile | weights on the device GiB (NF4 linears %.2f) | RunState GiB | peak GiB | budget GiB | fits |\n",
           nf4_lin / G);
    printf("|---|---|---|---|---|---|\n");
    for (int prof = 0; prof < 2; prof++) {
        const size_t off = bf16_lin + (prof ? embed : 0), w = weights - (prof ? embed : 0);
        const double pk = (double)(peak - off) / G, budget = prof ? 16.0 : 24.0;
        printf("| %s | %.2f | %.2f | %.2f | %.0f | %s |\n", prof ? "16gb" : "24gb", w / G,
               qwen35_state_bytes(state) / G, pk, budget, pk <= budget ? "yes" : "NO");
    }
    qwen35_state_free(state);
    for (int64_t i = 0; i < n_layers * max_lin; i++)
        qm_free(be, &qm[i]);
    qwen35_free(m);
    free(types), free(ids), free(times), free(qm);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 ||
        (strcmp(argv[1], "gemm") && strcmp(argv[1], "wgmma") && strcmp(argv[1], "forward") &&
         strcmp(argv[1], "nf4mem") && strcmp(argv[1], "nf4gemm")) ||
        (strcmp(argv[2], "9b") && strcmp(argv[2], "27b")) || (!strcmp(argv[1], "nf4mem") && strcmp(argv[2], "27b"))) {
        fprintf(stderr, "usage: bench_gpu_quant gemm 9b|27b [reps]\n"
                        "       bench_gpu_quant wgmma 9b|27b [reps]\n"
                        "       bench_gpu_quant nf4gemm 9b|27b [reps]\n"
                        "       bench_gpu_quant forward 9b|27b [layers] [runs]\n"
                        "       bench_gpu_quant nf4mem 27b [tokens] [runs]\n");
        return 2;
    }
    if (clef_backend_cuda_device_count() == 0) {
        fprintf(stderr, "bench_gpu_quant: no CUDA device\n");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int is27 = !strcmp(argv[2], "27b");
    clef_backend *be = NULL;
    if (clef_backend_cuda_create(0, &be) != CLEF_OK) {
        fprintf(stderr, "CUDA backend: %s\n", clef_last_error());
        return 1;
    }
    /* FP8 on the fp8 tensor cores (the speed mode; the backend's default is the exact path at
     * about half the BF16 rate, cuda_quant_fp8.cu); CLEF_BENCH_FP8_EXACT=1 times the default */
    const char *fp8_exact = getenv("CLEF_BENCH_FP8_EXACT"), *fp8_promoted = getenv("CLEF_BENCH_FP8_PROMOTED");
    bench_fp8_promoted = fp8_promoted ? atoi(fp8_promoted) : CLEF_CUDA_FP8_PROMOTE_OFF;
    const char *fp8_fast = getenv("CLEF_BENCH_FP8_FAST");
    bench_fp8_tc = fp8_exact && !strcmp(fp8_exact, "1") ? CLEF_CUDA_FP8_TC_OFF
                   : bench_fp8_promoted                  ? CLEF_CUDA_FP8_TC_OFF
                   : fp8_fast && !strcmp(fp8_fast, "1")  ? CLEF_CUDA_FP8_TC_FAST
                                                         : CLEF_CUDA_FP8_TC_PROMOTED;
    set_fp8_path(be, bench_fp8_tc, bench_fp8_promoted);
    printf("FP8 matmuls: %s %d\n",
           bench_fp8_tc == CLEF_CUDA_FP8_TC_FAST ? "fp8 tensor cores, fast accumulation (CLEF_CUDA_FP8_TC_FAST)"
           : bench_fp8_tc         ? "fp8 tensor cores (clef_backend_cuda_set_fp8_tensor_cores)"
           : bench_fp8_promoted ? "our fp8 wgmma kernel with fp32 promotion, variant"
                                : "the exact path (bf16 tensor cores on the widened codes)",
           bench_fp8_promoted);
    /* CLEF_BENCH_INT8_WGMMA / CLEF_BENCH_FP8_EXACT_WGMMA = a CLEF_CUDA_WGMMA_* variant (0: cuBLASLt) */
    const char *i8 = getenv("CLEF_BENCH_INT8_WGMMA"), *f8 = getenv("CLEF_BENCH_FP8_EXACT_WGMMA");
    if (i8) {
        clef_backend_cuda_set_int8_wgmma(be, atoi(i8));
        printf("INT8 matmuls' GEMM: %s %d\n", atoi(i8) ? "wgmma variant" : "cuBLASLt", atoi(i8));
    }
    if (f8)
        clef_backend_cuda_set_fp8_exact_wgmma(be, atoi(f8));
    { /* the backend's default unless CLEF_BENCH_FP8_EXACT_WGMMA / CLEF_CUDA_FP8_EXACT_GEMM said otherwise */
        const int v = clef_backend_cuda_fp8_exact_wgmma(be);
        printf("exact FP8 matmuls' GEMM: %s %d\n",
               v == CLEF_CUDA_WGMMA_OFF                                                ? "cuBLASLt"
               : v == CLEF_CUDA_WGMMA_AUTO ? "weight widened in registers, tiles per layout (auto)"
               : v >= CLEF_CUDA_WGMMA_FP8_MIXED && v <= CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC ? "weight widened in registers, variant"
                                                                                       : "wgmma variant",
               v);
    }
    static const char *const nf4_modes[3] = {"dequantize + cuBLASLt", "fused kernel", "run15's dequantize + cuBLASLt"};
    printf("NF4 matmuls: %s\n", nf4_modes[clef_backend_cuda_nf4_gemm(be)]);
    /* CLEF_CUDA_FUSED_QUANT=0: every quantized matmul runs its own quantizer (the same-run
     * comparison with the producers writing the codes, the default) */
    const char *fq = getenv("CLEF_CUDA_FUSED_QUANT");
    printf("quantizers fused into the producers (CLEF_CUDA_FUSED_QUANT): %s\n", fq && !strcmp(fq, "0") ? "off" : "on");
    double ceiling = 0;
    if (clef_backend_cuda_gemm_ceiling(be, 8192, 8192, 8192, 20, &ceiling) == CLEF_OK)
        printf("cuBLASLt bf16 GEMM ceiling (8192^3, median of 20): %.0f TFLOP/s\n", ceiling);
    int rc;
    if (!strcmp(argv[1], "gemm"))
        rc = run_gemm(be, is27, argc > 3 ? atoi(argv[3]) : 10);
    else if (!strcmp(argv[1], "nf4gemm"))
        rc = run_nf4_gemm(be, is27, argc > 3 ? atoi(argv[3]) : 10);
    else if (!strcmp(argv[1], "wgmma"))
        rc = run_wgmma(be, is27, argc > 3 ? atoi(argv[3]) : 10);
    else if (!strcmp(argv[1], "nf4mem"))
        rc = run_nf4_memory(be, argc > 3 ? atoll(argv[3]) : 2270, argc > 4 ? atoi(argv[4]) : 3);
    else
        rc = run_forward(be, is27, argc > 3 ? atoll(argv[3]) : (is27 ? 64 : 32), argc > 4 ? atoi(argv[4]) : 5);
    clef_backend_free(be);
    return rc;
}
