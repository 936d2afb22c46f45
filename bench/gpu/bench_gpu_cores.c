/*
 * bench_gpu_cores.c — the two sequence cores of the Qwen3.5 backbone alone on the CUDA
 * backend, at the real 27B / 9B head shapes, one layer each: the gated delta rule (chunked
 * vs recurrent form; the chunked one also in its other product forms: run16's 3xBF16 split
 * in the product loops, run15's 3xTF32, run17's planes form with 4- and 8-byte plane stores,
 * run18's with 4-byte ones; the parallel passes and the walks also timed alone, and over 8
 * packed records of 1,502 tokens) and causal attention (tensor-core vs fp32 kernel). Prints
 * ms per layer
 * (median of runs after a warm-up), the FLOPs each form must do, and TFLOP/s. It exists so
 * the per-kernel profile (ncu over this program) and the tuning of these kernels need no
 * whole-model run; the whole-model numbers are bench_gpu_forward's.
 *
 *   bench_gpu_cores 9b|27b [runs]
 *
 * Shapes: 27B: GDN Hk 16, Hv 48, dk = dv = 128; attention 24 query / 4 kv heads, head_dim
 * 256, q rows interleaved with the gate ([q | gate] per head). 9B: GDN Hk 16, Hv 32;
 * attention 16 / 4 heads. Inputs N(0, 1) (q, k, v), g in [-0.5, 0), beta in (0.05, 0.95).
 */
#include "../bench_util.h"
#include "backend/cuda/cuda_backend.h"
#include "clef.h"
#include "cuda/gpu_test_util.h"

#include <stdio.h>
#include <string.h>

static clef_backend *gpu;

static double time_ms(void (*fn)(void *), void *arg, int runs) {
    fn(arg);
    clef_backend_synchronize(gpu);
    double t[64];
    for (int r = 0; r < runs; r++) {
        double t0 = bench_now_ms();
        fn(arg);
        if (clef_backend_synchronize(gpu) != CLEF_OK) {
            fprintf(stderr, "device error: %s\n", clef_last_error());
            exit(1);
        }
        t[r] = bench_now_ms() - t0;
    }
    return bench_median(t, runs);
}

typedef struct gdn_case {
    clef_gdn_args a;
    void *ws;
} gdn_case;

static void run_gdn(void *p) {
    gdn_case *c = p;
    clef_gdn(gpu, &c->a, c->ws);
}

typedef struct att_case {
    clef_attention_args a;
    void *ws;
} att_case;

/* The chunked form's parallel passes alone and its walks alone (clef_backend_cuda_tune_gdn_parts;
 * the walks over the scratch the last full call left), in run17's planes form and run18's prep
 * forms, each with 4- and 8-byte plane stores: where a layer's time goes without a profiler. T printed as the
 * table's other rows. */
static void gdn_parts(gdn_case *c, int64_t T, int runs, const char *prefix) {
    static const int forms[] = {CLEF_GDN_PRODUCTS_BF16X3_PLANES, CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE,
                                CLEF_GDN_PRODUCTS_BF16X3_PREP, CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE};
    static const char *names[] = {" planes (run17)", " planes-wide", " prep", " prep-wide"};
    const int64_t shown = prefix[0] ? T / 8 : T; /* "8 x 1502" */
    for (int f = 0; f < 4; f++) {
        clef_backend_cuda_tune_gdn_products(forms[f]);
        run_gdn(c); /* the scratch of this form */
        for (int part = 1; part <= 2; part++) {
            clef_backend_cuda_tune_gdn_parts(part);
            const double ms = time_ms(run_gdn, c, runs);
            printf("| gdn | chunked%s: %s alone | %s%lld | %.3f | | |\n", names[f],
                   part == 1 ? "parallel passes" : "walks", prefix, (long long)shown, ms);
        }
        clef_backend_cuda_tune_gdn_parts(0);
    }
    clef_backend_cuda_tune_gdn_products(0);
}

static void run_attention(void *p) {
    att_case *c = p;
    clef_attention(gpu, &c->a, c->ws);
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "9b") && strcmp(argv[1], "27b"))) {
        fprintf(stderr, "usage: bench_gpu_cores 9b|27b [runs]\n");
        return 2;
    }
    if (clef_backend_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return GPU_TEST_SKIPPED;
    }
    const int is27 = !strcmp(argv[1], "27b");
    int runs = argc > 2 ? atoi(argv[2]) : 10;
    if (runs < 1 || runs > 64)
        runs = 10;
    if (clef_backend_cuda_create(0, &gpu) != CLEF_OK) {
        fprintf(stderr, "%s\n", clef_last_error());
        return 1;
    }
    clef_backend_cuda_set_gdn_chunked(gpu, 1); /* mode CHUNKED: the WY/UT kernel */
    const int64_t Hk = 16, Hv = is27 ? 48 : 32, dk = 128, dv = 128;
    const int64_t Hq = is27 ? 24 : 16, Hkv = 4, hd = 256;
    const int64_t Ts[] = {298, 1502, 2270, 8192}, n_rec = 8, rec_len = 1502, Tmax = n_rec * rec_len;
    /* one buffer big enough for either core's inputs at Tmax, filled once */
    const int64_t ldqkv = 2 * Hk * dk + Hv * dv, ldq_att = Hq * 2 * hd, ldkv_att = Hkv * hd;
    const size_t n_in = (size_t)(Tmax * (ldqkv > ldq_att + 2 * ldkv_att ? ldqkv : ldq_att + 2 * ldkv_att));
    float *host = malloc(n_in * sizeof(float));
    fill_normal(host, n_in, 1.0f);
    float *in = to_gpu(gpu, host, n_in * sizeof(float));
    float *gb = malloc(sizeof(float) * (size_t)(2 * Tmax * Hv));
    for (int64_t i = 0; i < Tmax * Hv; i++)
        gb[i] = -(float)(rnd_uniform() * 0.5), gb[Tmax * Hv + i] = (float)(0.05 + 0.9 * rnd_uniform());
    float *gbd = to_gpu(gpu, gb, sizeof(float) * (size_t)(2 * Tmax * Hv));
    float *out = clef_backend_alloc(gpu, sizeof(float) * (size_t)(Tmax * (Hv * dv > Hq * hd ? Hv * dv : Hq * hd)));
    if (!in || !gbd || !out) {
        fprintf(stderr, "device allocation failed\n");
        return 1;
    }
    printf("# %s cores, one layer, median of %d runs (ms)\n\n", argv[1], runs);
    printf("| core | form | T | ms | GFLOP | TFLOP/s |\n|---|---|---|---|---|---|\n");
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int64_t T = Ts[ti];
        for (int mode = 0; mode < 2; mode++) {
            gdn_case c = {.a = {.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv, .q = in, .ldq = ldqkv,
                                .k = in + Hk * dk, .ldk = ldqkv, .v = in + 2 * Hk * dk, .ldv = ldqkv, .g = gbd,
                                .beta = gbd + Tmax * Hv, .o = out, .ldo = Hv * dv, .l2norm_qk = 1,
                                .mode = mode ? CLEF_GDN_RECURRENT : CLEF_GDN_CHUNKED}};
            c.ws = clef_backend_alloc(gpu, clef_gdn_workspace_size(gpu, &c.a));
            const double ms = time_ms(run_gdn, &c, runs);
            /* chunked work per chunk and head: K K^T, Q K^T, solve, K S, Tinv rhs, Q S, P u,
             * K^T u (2 flops per multiply-add); the recurrence: 4 dk dv per token and head */
            const double nc = (double)((T + 63) / 64), C = 64;
            const double gf = mode ? 4.0 * (double)(T * Hv * dk * dv) * 2 / 1e9
                                   : nc * (double)Hv * 2 * (2 * C * C * dk + C * C * C / 3 + 3 * C * dk * dv + 2 * C * C * dv) / 1e9;
            printf("| gdn | %s | %lld | %.3f | %.1f | %.1f |\n", mode ? "recurrent" : "chunked", (long long)T, ms, gf,
                   gf / ms);
            if (!mode) { /* the earlier product forms in the same run, then each kind of kernel alone */
                static const int forms[] = {CLEF_GDN_PRODUCTS_BF16X3,        CLEF_GDN_PRODUCTS_TF32X3,
                                            CLEF_GDN_PRODUCTS_BF16X3_PLANES, CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE,
                                            CLEF_GDN_PRODUCTS_BF16X3_PREP,   CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE};
                static const char *names[] = {"bf16x3 (run16)", "tf32x3 (run15)", "planes (run17)",
                                              "planes-wide",    "prep",           "prep-wide"};
                for (int f = 0; f < 6; f++) {
                    clef_backend_cuda_tune_gdn_products(forms[f]);
                    const double mt = time_ms(run_gdn, &c, runs);
                    printf("| gdn | chunked %s | %lld | %.3f | %.1f | %.1f |\n", names[f], (long long)T, mt, gf, gf / mt);
                }
                clef_backend_cuda_tune_gdn_products(0);
                gdn_parts(&c, T, runs, "");
            }
            clef_backend_release(gpu, c.ws);
            /* the chunked kernel's tuning (segment length, walk columns) at the long shapes */
            static const int tunes[][2] = {{8, 0}, {32, 0}, {128, 0}, {16, 32}, {16, 64}};
            for (size_t k = 0; !mode && T >= 2270 && k < sizeof tunes / sizeof tunes[0]; k++) {
                clef_backend_cuda_tune_gdn(tunes[k][0], tunes[k][1]);
                c.ws = clef_backend_alloc(gpu, clef_gdn_workspace_size(gpu, &c.a));
                const double mt = time_ms(run_gdn, &c, runs);
                printf("| gdn | chunked seg %d cols %d | %lld | %.3f | %.1f | %.1f |\n", tunes[k][0], tunes[k][1],
                       (long long)T, mt, gf, gf / mt);
                clef_backend_release(gpu, c.ws);
                clef_backend_cuda_tune_gdn(0, 0);
            }
        }
        for (int fp32 = 0; fp32 < 2; fp32++) {
            if (fp32 && T > 2270)
                continue; /* the fp32 kernel is the accuracy reference, slow at long T */
            clef_backend_cuda_set_attention_fp32(gpu, fp32);
            att_case c = {.a = {.n_q = T, .n_kv = T, .n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = hd,
                                     .q = in, .ldq = ldq_att, .q_head_stride = 2 * hd,
                                     .k = in + T * ldq_att, .ldk = ldkv_att, .k_head_stride = hd,
                                     .v = in + T * ldq_att + T * ldkv_att, .ldv = ldkv_att, .v_head_stride = hd,
                                     .o = out, .ldo = Hq * hd, .o_head_stride = hd, .scale = 0.0625f, .causal = 1}};
            c.ws = clef_backend_alloc(gpu, clef_attention_workspace_size(gpu, &c.a));
            const double ms = time_ms(run_attention, &c, runs);
            clef_backend_release(gpu, c.ws);
            const double gf = 4.0 * (double)Hq * (double)hd * (double)T * (double)(T + 1) / 2 / 1e9;
            printf("| attention | %s | %lld | %.3f | %.1f | %.1f |\n", fp32 ? "fp32" : "tensor-core", (long long)T, ms,
                   gf, gf / ms);
        }
        clef_backend_cuda_set_attention_fp32(gpu, 0);
    }
    { /* the chunked delta rule over 8 packed records of 1,502 tokens (a batched forward's call) */
        int64_t start[9];
        int32_t start32[9];
        for (int64_t s = 0; s <= n_rec; s++)
            start[s] = s * rec_len, start32[s] = (int32_t)(s * rec_len);
        int32_t *start_d = to_gpu(gpu, start32, sizeof start32);
        const clef_seqs sq = {.n_seqs = n_rec, .start = start, .start_dev = start_d, .max_len = rec_len};
        const int64_t T = n_rec * rec_len;
        gdn_case c = {.a = {.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv, .q = in, .ldq = ldqkv,
                            .k = in + Hk * dk, .ldk = ldqkv, .v = in + 2 * Hk * dk, .ldv = ldqkv, .g = gbd,
                            .beta = gbd + Tmax * Hv, .o = out, .ldo = Hv * dv, .l2norm_qk = 1, .seqs = &sq,
                            .mode = CLEF_GDN_CHUNKED}};
        c.ws = clef_backend_alloc(gpu, clef_gdn_workspace_size(gpu, &c.a));
        const double nc = (double)(n_rec * ((rec_len + 63) / 64)), C = 64;
        const double gf = nc * (double)Hv * 2 * (2 * C * C * dk + C * C * C / 3 + 3 * C * dk * dv + 2 * C * C * dv) / 1e9;
        static const int forms[] = {0,
                                    CLEF_GDN_PRODUCTS_BF16X3,
                                    CLEF_GDN_PRODUCTS_TF32X3,
                                    CLEF_GDN_PRODUCTS_BF16X3_PLANES,
                                    CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE,
                                    CLEF_GDN_PRODUCTS_BF16X3_PREP,
                                    CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE};
        static const char *names[] = {"chunked",          "chunked bf16x3 (run16)", "chunked tf32x3 (run15)",
                                      "chunked planes (run17)", "chunked planes-wide", "chunked prep",
                                      "chunked prep-wide"};
        for (int f = 0; f < 7; f++) {
            clef_backend_cuda_tune_gdn_products(forms[f]);
            const double ms = time_ms(run_gdn, &c, runs);
            printf("| gdn | %s | 8 x 1502 | %.3f | %.1f | %.1f |\n", names[f], ms, gf, gf / ms);
        }
        clef_backend_cuda_tune_gdn_products(0);
        gdn_parts(&c, T, runs, "8 x ");
        clef_backend_release(gpu, c.ws), clef_backend_release(gpu, start_d);
    }
    clef_backend_release(gpu, in), clef_backend_release(gpu, gbd), clef_backend_release(gpu, out);
    clef_backend_free(gpu);
    free(host), free(gb);
    return 0;
}
