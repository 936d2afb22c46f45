/*
 * test_cuda_ops.c — every op of the table on the CUDA backend against the CPU backend (the
 * fp32 reference), on random shapes, leading dimensions and head strides; the gated delta
 * rule also against a float64 recurrence of this file. Outputs are poisoned (NaN) before
 * each run, so an unwritten element fails. Tolerances (relative L2):
 *  - fp32-path ops (norms, conv, gates, RoPE, fp32 attention, softmax, elementwise, F32
 *    matmul): <= 1e-5 vs the CPU
 *  - tensor-core attention (Q, K, V, P rounded to bf16; fp32 accumulation): <= 1e-2 vs the
 *    CPU (bf16 carries 8 significant bits; measured values are printed); labelled "mma" for
 *    the mma.sync kernel (head_dim 64/128/256), "flash" when the WMMA register-accumulator
 *    kernel ran (65..80), "tc" for the shared-memory one; packed sequences (empty and short
 *    ones among them) also bit for bit equal to each sequence run alone
 *  - BF16 matmul: the CUDA path rounds x to bf16 before the GEMM, so it is compared with the
 *    CPU on the same bf16-rounded x: <= 1e-5; and with the CPU on unrounded x: <= 8e-3
 *    (bf16 has 8 significant bits: one rounding of x is <= 2^-9 relative per element)
 *  - gated delta rule, both GPU forms (chunked: WY/UT on the tensor cores, 3xTF32; recurrent:
 *    token by token) vs float64 recurrence: <= 1e-3 at T = 1 .. 8,192 (and vs the CPU
 *    recurrent reference: <= 1e-4), packed sequences included
 *  - head ops (double accumulation in the CPU's order): <= 1e-6
 *  - a BF16 matmul right after the op that produced its input (RMSNorm, gated RMSNorm,
 *    SwiGLU, the attention gate write the bf16 staging themselves): bit for bit the same as
 *    the matmul converting the fp32 rows, and <= 1e-5 vs the CPU on the bf16 rounding of the
 *    GPU producer's output (whose fp32 values are held to 1e-5 vs the CPU's)
 *  - rows of a BF16 matmul computed alone vs in a batch, at the 27B's MLP shapes: bit for bit
 * Exits 77 (ctest: SKIPPED) when no GPU is visible.
 */
#include "clef.h"
#include "gpu_test_util.h"
#include "test.h"

#include <stdio.h>

static clef_backend *cpu, *gpu;

#define POISON(p, n) for (size_t i_ = 0; i_ < (size_t)(n); i_++) (p)[i_] = NAN

static void report(const char *op, const char *shape, double err, double tol) {
    printf("%-16s %-44s rel L2 %.3g (<= %.0e)\n", op, shape, err, tol);
    CHECK_MSG(err <= tol, "%s %s: relative L2 %.3g > %.0e", op, shape, err, tol);
}

/* Run on the GPU, then read n floats from dev back into host (poisoned first). */
static void readback(float *host, const float *dev, size_t n) {
    POISON(host, n);
    CHECK_EQ_INT(clef_backend_synchronize(gpu), CLEF_OK);
    CHECK_EQ_INT(clef_backend_read(gpu, host, dev, n * sizeof(float)), CLEF_OK);
}

/* y buffer [T, ld] with both backends: cpu poisoned, gpu poisoned too */
static float *gpu_poisoned(size_t n) {
    float *h = malloc(n * sizeof(float));
    POISON(h, n);
    float *d = to_gpu(gpu, h, n * sizeof(float));
    free(h);
    return d;
}

static void test_matmul(int64_t T, int64_t K, int64_t N, int bf16, int with_bias, int accumulate) {
    const int64_t ldx = K + 3, ldy = N + 5;
    float *x = malloc(sizeof(float) * (size_t)(T * ldx)), *xr = malloc(sizeof(float) * (size_t)(T * ldx));
    float *y0 = malloc(sizeof(float) * (size_t)(T * ldy)), *yc = malloc(sizeof(float) * (size_t)(T * ldy));
    float *yc_raw = malloc(sizeof(float) * (size_t)(T * ldy)), *yg = malloc(sizeof(float) * (size_t)(T * ldy));
    float *bias = malloc(sizeof(float) * (size_t)N);
    fill_normal(x, (size_t)(T * ldx), 1.0f);
    fill_normal(y0, (size_t)(T * ldy), 1.0f);
    fill_normal(bias, (size_t)N, 1.0f);
    for (int64_t i = 0; i < T * ldx; i++)
        xr[i] = bf16 ? clef_bf16_to_f32(clef_f32_to_bf16(x[i])) : x[i];
    size_t wbytes = (size_t)(N * K) * (bf16 ? 2 : 4);
    void *w = malloc(wbytes);
    for (int64_t i = 0; i < N * K; i++) {
        float v = rnd_normal() * 0.05f;
        if (bf16)
            ((uint16_t *)w)[i] = clef_f32_to_bf16(v);
        else
            ((float *)w)[i] = v;
    }
    clef_wtype type = bf16 ? CLEF_WTYPE_BF16 : CLEF_WTYPE_F32;
    clef_matrix wc = {.type = type, .rows = N, .cols = K, .ld = K, .data = w};
    memcpy(yc, y0, sizeof(float) * (size_t)(T * ldy));
    memcpy(yc_raw, y0, sizeof(float) * (size_t)(T * ldy));
    clef_matmul(cpu, T, xr, ldx, &wc, with_bias ? bias : NULL, yc, ldy, accumulate);
    clef_matmul(cpu, T, x, ldx, &wc, with_bias ? bias : NULL, yc_raw, ldy, accumulate);
    void *wd = to_gpu(gpu, w, wbytes);
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * ldx));
    float *yd = to_gpu(gpu, y0, sizeof(float) * (size_t)(T * ldy));
    float *bd = to_gpu(gpu, bias, sizeof(float) * (size_t)N);
    clef_matrix wg = {.type = type, .rows = N, .cols = K, .ld = K, .data = wd};
    clef_matmul(gpu, T, xd, ldx, &wg, with_bias ? bd : NULL, yd, ldy, accumulate);
    readback(yg, yd, (size_t)(T * ldy));
    char shape[96];
    snprintf(shape, sizeof shape, "%s T=%lld K=%lld N=%lld%s%s", bf16 ? "BF16" : "F32", (long long)T, (long long)K,
             (long long)N, with_bias ? " bias" : "", accumulate ? " acc" : "");
    report("matmul", shape, rel_l2(yg, yc, (size_t)(T * ldy)), 1e-5);
    if (bf16)
        report("matmul(unround)", shape, rel_l2(yg, yc_raw, (size_t)(T * ldy)), 8e-3);
    clef_backend_release(gpu, wd), clef_backend_release(gpu, xd), clef_backend_release(gpu, yd), clef_backend_release(gpu, bd);
    free(x), free(xr), free(y0), free(yc), free(yc_raw), free(yg), free(bias), free(w);
}

/* The reuse of a matmul's bf16 input copy (cuda_matmul.cu): two projections of the same rows
 * share one conversion; new rows written by the host, by a kernel (in place) or by a matmul
 * into those rows must be converted again. Each GPU result vs the CPU on the same
 * bf16-rounded rows. */
static void check_matmul_rows(const char *what, const float *x, int64_t T, int64_t K, const clef_matrix *wc,
                              const float *yd, int64_t N) {
    float *xr = malloc(sizeof(float) * (size_t)(T * K)), *yc = malloc(sizeof(float) * (size_t)(T * N));
    float *yg = malloc(sizeof(float) * (size_t)(T * N));
    for (int64_t i = 0; i < T * K; i++)
        xr[i] = clef_bf16_to_f32(clef_f32_to_bf16(x[i]));
    clef_matmul(cpu, T, xr, K, wc, NULL, yc, N, 0);
    readback(yg, yd, (size_t)(T * N));
    report("matmul reuse", what, rel_l2(yg, yc, (size_t)(T * N)), 1e-5);
    free(xr), free(yc), free(yg);
}

static void test_matmul_reuse(void) {
    const int64_t T = 70, K = 96, N1 = 64, N2 = 48;
    float *x = malloc(sizeof(float) * (size_t)(T * K)), *x2 = malloc(sizeof(float) * (size_t)(T * K));
    uint16_t *w1 = malloc(2 * (size_t)(N1 * K)), *w2 = malloc(2 * (size_t)(N2 * K)), *w3 = malloc(2 * (size_t)(K * K));
    fill_normal(x, (size_t)(T * K), 1.0f), fill_normal(x2, (size_t)(T * K), 1.0f);
    for (int64_t i = 0; i < N1 * K; i++)
        w1[i] = clef_f32_to_bf16(rnd_normal() * 0.05f);
    for (int64_t i = 0; i < N2 * K; i++)
        w2[i] = clef_f32_to_bf16(rnd_normal() * 0.05f);
    for (int64_t i = 0; i < K * K; i++)
        w3[i] = clef_f32_to_bf16(rnd_normal() * 0.05f);
    clef_matrix c1 = {.type = CLEF_WTYPE_BF16, .rows = N1, .cols = K, .ld = K, .data = w1};
    clef_matrix c2 = {.type = CLEF_WTYPE_BF16, .rows = N2, .cols = K, .ld = K, .data = w2};
    clef_matrix c3 = {.type = CLEF_WTYPE_BF16, .rows = K, .cols = K, .ld = K, .data = w3};
    clef_matrix g1 = c1, g2 = c2, g3 = c3;
    g1.data = to_gpu(gpu, w1, 2 * (size_t)(N1 * K)), g2.data = to_gpu(gpu, w2, 2 * (size_t)(N2 * K));
    g3.data = to_gpu(gpu, w3, 2 * (size_t)(K * K));
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * K)), *xo = gpu_poisoned((size_t)(T * K));
    float *y1 = gpu_poisoned((size_t)(T * N1)), *y2 = gpu_poisoned((size_t)(T * N2));
    clef_matmul(gpu, T, xd, K, &g1, NULL, y1, N1, 0);
    clef_matmul(gpu, T, xd, K, &g2, NULL, y2, N2, 0); /* same rows: the conversion is reused */
    check_matmul_rows("first of two", x, T, K, &c1, y1, N1);
    check_matmul_rows("second, same rows", x, T, K, &c2, y2, N2);
    clef_backend_write(gpu, xd, x2, sizeof(float) * (size_t)(T * K)); /* new rows from the host */
    clef_matmul(gpu, T, xd, K, &g2, NULL, y2, N2, 0);
    check_matmul_rows("after a host write", x2, T, K, &c2, y2, N2);
    clef_unary(gpu, CLEF_UNARY_SILU, T * K, xd, xd); /* new rows from a kernel, in place */
    clef_unary(cpu, CLEF_UNARY_SILU, T * K, x2, x2);
    clef_matmul(gpu, T, xd, K, &g1, NULL, y1, N1, 0);
    check_matmul_rows("after a kernel wrote them", x2, T, K, &c1, y1, N1);
    /* a matmul with the caller's scratch (its conversion goes there, the backend's copy of
     * xd's rows stays) writes over xd: the next matmul on xd converts again */
    float *xh = malloc(sizeof(float) * (size_t)(T * K));
    void *scratch = clef_backend_alloc(gpu, clef_matmul_workspace_size(gpu, T, &g3));
    clef_matmul(gpu, T, xd, K, &g2, NULL, y2, N2, 0); /* the backend's copy now holds xd's rows */
    clef_matmul_scratch(gpu, T, xd, K, &g3, NULL, xo, K, 0, scratch);
    clef_matmul_scratch(gpu, T, xo, K, &g3, NULL, xd, K, 0, scratch); /* xd <- new rows, by a matmul */
    clef_matmul(gpu, T, xd, K, &g1, NULL, y1, N1, 0);
    readback(xh, xd, (size_t)(T * K));
    check_matmul_rows("after a matmul wrote them", xh, T, K, &c1, y1, N1);
    clef_backend_release(gpu, scratch);
    clef_backend_release(gpu, (void *)g1.data), clef_backend_release(gpu, (void *)g2.data);
    clef_backend_release(gpu, (void *)g3.data), clef_backend_release(gpu, xd), clef_backend_release(gpu, xo);
    clef_backend_release(gpu, y1), clef_backend_release(gpu, y2);
    free(x), free(x2), free(w1), free(w2), free(w3), free(xh);
}

static void test_get_rows(void) {
    const int64_t V = 300, D = 77, n = 50, ldy = 80;
    uint16_t *e = malloc(2 * (size_t)(V * D));
    for (int64_t i = 0; i < V * D; i++)
        e[i] = clef_f32_to_bf16(rnd_normal());
    int32_t ids[50];
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rnd_uniform() * V);
    float *yc = malloc(sizeof(float) * (size_t)(n * ldy)), *yg = malloc(sizeof(float) * (size_t)(n * ldy));
    memset(yc, 0, sizeof(float) * (size_t)(n * ldy));
    clef_matrix ec = {.type = CLEF_WTYPE_BF16, .rows = V, .cols = D, .ld = D, .data = e};
    clef_get_rows(cpu, &ec, n, ids, yc, ldy);
    void *ed = to_gpu(gpu, e, 2 * (size_t)(V * D));
    int32_t *idd = to_gpu(gpu, ids, sizeof ids);
    float *yd = to_gpu(gpu, yc, sizeof(float) * (size_t)(n * ldy)); /* gaps keep the CPU's zeros */
    clef_matrix eg = {.type = CLEF_WTYPE_BF16, .rows = V, .cols = D, .ld = D, .data = ed};
    float *zero = calloc((size_t)(n * ldy), sizeof(float));
    clef_backend_write(gpu, yd, zero, sizeof(float) * (size_t)(n * ldy));
    clef_get_rows(gpu, &eg, n, idd, yd, ldy);
    readback(yg, yd, (size_t)(n * ldy));
    report("get_rows", "BF16 V=300 D=77 n=50 ldy=80", rel_l2(yg, yc, (size_t)(n * ldy)), 0.0);
    clef_backend_release(gpu, ed), clef_backend_release(gpu, idd), clef_backend_release(gpu, yd);
    free(e), free(yc), free(yg), free(zero);
}

/* norms and softmax: which = 0 rmsnorm, 1 rmsnorm (1+w), 2 rmsnorm no weight, 3 gated, 4 layernorm, 5 softmax */
static void test_rows(int which, int64_t rows, int64_t dim) {
    const int64_t ldx = dim + 7, ldz = dim + 2, ldy = dim + 4;
    size_t nx = (size_t)(rows * ldx), nz = (size_t)(rows * ldz), ny = (size_t)(rows * ldy);
    float *x = malloc(nx * 4), *z = malloc(nz * 4), *w = malloc((size_t)dim * 4), *b = malloc((size_t)dim * 4);
    float *yc = malloc(ny * 4), *yg = malloc((nx > ny ? nx : ny) * 4);
    fill_normal(x, nx, 2.0f), fill_normal(z, nz, 1.0f), fill_normal(w, (size_t)dim, 1.0f), fill_normal(b, (size_t)dim, 1.0f);
    float *xd = to_gpu(gpu, x, nx * 4), *zd = to_gpu(gpu, z, nz * 4), *wd = to_gpu(gpu, w, (size_t)dim * 4);
    float *bd = to_gpu(gpu, b, (size_t)dim * 4), *yd = gpu_poisoned(ny);
    const char *names[] = {"rmsnorm", "rmsnorm(1+w)", "rmsnorm(no w)", "rmsnorm_gated", "layernorm", "softmax"};
    /* only the rows x dim region is compared: copy it out of both */
    memcpy(yc, x, nx < ny ? nx * 4 : ny * 4);
    switch (which) {
    case 0: clef_rmsnorm(cpu, rows, dim, x, ldx, w, 1e-6f, 0, yc, ldy); clef_rmsnorm(gpu, rows, dim, xd, ldx, wd, 1e-6f, 0, yd, ldy); break;
    case 1: clef_rmsnorm(cpu, rows, dim, x, ldx, w, 1e-6f, 1, yc, ldy); clef_rmsnorm(gpu, rows, dim, xd, ldx, wd, 1e-6f, 1, yd, ldy); break;
    case 2: clef_rmsnorm(cpu, rows, dim, x, ldx, NULL, 1e-6f, 0, yc, ldy); clef_rmsnorm(gpu, rows, dim, xd, ldx, NULL, 1e-6f, 0, yd, ldy); break;
    case 3: clef_rmsnorm_gated(cpu, rows, dim, x, ldx, z, ldz, w, 1e-6f, yc, ldy); clef_rmsnorm_gated(gpu, rows, dim, xd, ldx, zd, ldz, wd, 1e-6f, yd, ldy); break;
    case 4: clef_layernorm(cpu, rows, dim, x, ldx, w, b, 1e-5f, yc, ldy); clef_layernorm(gpu, rows, dim, xd, ldx, wd, bd, 1e-5f, yd, ldy); break;
    case 5:
        clef_softmax(cpu, rows, dim, x, ldx);
        clef_softmax(gpu, rows, dim, xd, ldx);
        break;
    }
    float *outc = which == 5 ? x : yc;
    int64_t ld = which == 5 ? ldx : ldy;
    readback(yg, which == 5 ? xd : yd, which == 5 ? nx : ny);
    float *a = malloc((size_t)(rows * dim) * 4), *bb = malloc((size_t)(rows * dim) * 4);
    for (int64_t r = 0; r < rows; r++)
        memcpy(a + r * dim, yg + r * ld, (size_t)dim * 4), memcpy(bb + r * dim, outc + r * ld, (size_t)dim * 4);
    char shape[64];
    snprintf(shape, sizeof shape, "rows=%lld dim=%lld (strided)", (long long)rows, (long long)dim);
    report(names[which], shape, rel_l2(a, bb, (size_t)(rows * dim)), 1e-5);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, zd), clef_backend_release(gpu, wd);
    clef_backend_release(gpu, bd), clef_backend_release(gpu, yd);
    free(x), free(z), free(w), free(b), free(yc), free(yg), free(a), free(bb);
}

static void test_conv(int64_t T, int64_t C, int64_t K, int with_prev) {
    const int64_t ldx = C + 3, ldy = C + 1;
    size_t nx = (size_t)(T * ldx), ny = (size_t)(T * ldy);
    float *x = malloc(nx * 4), *w = malloc((size_t)(C * K) * 4), *prev = malloc((size_t)((K - 1) * C + 1) * 4);
    float *yc = malloc(ny * 4), *yg = malloc(ny * 4);
    fill_normal(x, nx, 1.0f), fill_normal(w, (size_t)(C * K), 0.5f), fill_normal(prev, (size_t)((K - 1) * C + 1), 1.0f);
    memset(yc, 0, ny * 4);
    clef_conv1d_causal_silu(cpu, T, C, K, x, ldx, w, with_prev ? prev : NULL, yc, ldy, NULL);
    float *xd = to_gpu(gpu, x, nx * 4), *wd = to_gpu(gpu, w, (size_t)(C * K) * 4);
    float *pd = to_gpu(gpu, prev, (size_t)((K - 1) * C + 1) * 4), *yd = to_gpu(gpu, yc, ny * 4);
    float *zero = calloc(ny, 4);
    clef_backend_write(gpu, yd, zero, ny * 4);
    clef_conv1d_causal_silu(gpu, T, C, K, xd, ldx, wd, with_prev ? pd : NULL, yd, ldy, NULL);
    readback(yg, yd, ny);
    char shape[64];
    snprintf(shape, sizeof shape, "T=%lld C=%lld K=%lld%s", (long long)T, (long long)C, (long long)K, with_prev ? " prev" : "");
    report("conv1d_silu", shape, rel_l2(yg, yc, ny), 1e-5);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, wd), clef_backend_release(gpu, pd), clef_backend_release(gpu, yd);
    free(x), free(w), free(prev), free(yc), free(yg), free(zero);
}

/* Packed sequences (an empty one included) with a carried state per sequence: taps never
 * reach into the previous sequence; rows that start a run of the GPU kernel mid-sequence. */
static void test_conv_packed(void) {
    const int64_t C = 70, K = 4, T = 5 + 0 + 35 + 37, ldx = C + 2, ldy = C;
    const int64_t start[] = {0, 5, 5, 40, T};
    const int32_t start32[] = {0, 5, 5, 40, (int32_t)T};
    const int64_t n_seqs = 4;
    size_t nx = (size_t)(T * ldx), ny = (size_t)(T * ldy), np = (size_t)(n_seqs * (K - 1) * C);
    float *x = malloc(nx * 4), *w = malloc((size_t)(C * K) * 4), *prev = malloc(np * 4);
    float *yc = calloc(ny, 4), *yg = malloc(ny * 4);
    fill_normal(x, nx, 1.0f), fill_normal(w, (size_t)(C * K), 0.5f), fill_normal(prev, np, 1.0f);
    clef_seqs sc = {.n_seqs = n_seqs, .start = start, .start_dev = start32, .max_len = 37};
    clef_conv1d_causal_silu(cpu, T, C, K, x, ldx, w, prev, yc, ldy, &sc);
    float *xd = to_gpu(gpu, x, nx * 4), *wd = to_gpu(gpu, w, (size_t)(C * K) * 4), *pd = to_gpu(gpu, prev, np * 4);
    float *yd = gpu_poisoned(ny);
    int32_t *sdev = to_gpu(gpu, start32, sizeof start32);
    clef_seqs sg = sc;
    sg.start_dev = sdev;
    clef_conv1d_causal_silu(gpu, T, C, K, xd, ldx, wd, pd, yd, ldy, &sg);
    readback(yg, yd, ny);
    report("conv1d_silu", "packed 5/0/35/37 prev", rel_l2(yg, yc, ny), 1e-5);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, wd), clef_backend_release(gpu, pd);
    clef_backend_release(gpu, yd), clef_backend_release(gpu, sdev);
    free(x), free(w), free(prev), free(yc), free(yg);
}

/* The 4-channel conv kernel (C, ldx, ldy and the pointers multiples of 4 floats, the model's
 * layout) against the CPU (1e-5, as test_conv) and bit for bit against the one-channel kernel on
 * the same values at an odd stride (the same products in the same order, so no difference is
 * allowed); packed sequences (an empty one, runs starting mid-sequence) with their states. */
static void test_conv_vec(int64_t T, int64_t C, int64_t K, int with_prev, int packed) {
    const int64_t ldx = C + 4, ldo = C + 1; /* ldo: the one-channel kernel's stride */
    const int64_t start[] = {0, 5, 5, 40, T};
    const int32_t start32[] = {0, 5, 5, 40, (int32_t)T};
    const int64_t n_seqs = packed ? 4 : 1;
    const size_t nx = (size_t)(T * ldx), no = (size_t)(T * ldo), ny = (size_t)(T * C), np = (size_t)(n_seqs * (K - 1) * C);
    float *x = malloc(nx * 4), *xo = malloc(no * 4), *w = malloc((size_t)(C * K) * 4), *prev = malloc(np * 4);
    float *yc = calloc(ny, 4), *yg = malloc(ny * 4), *yo = malloc(ny * 4);
    fill_normal(x, nx, 1.0f), fill_normal(w, (size_t)(C * K), 0.5f), fill_normal(prev, np, 1.0f);
    for (int64_t t = 0; t < T; t++)
        memcpy(xo + t * ldo, x + t * ldx, (size_t)C * 4);
    clef_seqs sc = {.n_seqs = n_seqs, .start = start, .start_dev = start32, .max_len = 37};
    clef_conv1d_causal_silu(cpu, T, C, K, x, ldx, w, with_prev ? prev : NULL, yc, C, packed ? &sc : NULL);
    float *xd = to_gpu(gpu, x, nx * 4), *xod = to_gpu(gpu, xo, no * 4), *wd = to_gpu(gpu, w, (size_t)(C * K) * 4);
    float *pd = to_gpu(gpu, prev, np * 4), *yd = gpu_poisoned(ny), *yod = gpu_poisoned(ny);
    int32_t *sdev = to_gpu(gpu, start32, sizeof start32);
    clef_seqs sg = sc;
    sg.start_dev = sdev;
    clef_conv1d_causal_silu(gpu, T, C, K, xd, ldx, wd, with_prev ? pd : NULL, yd, C, packed ? &sg : NULL);
    clef_conv1d_causal_silu(gpu, T, C, K, xod, ldo, wd, with_prev ? pd : NULL, yod, C, packed ? &sg : NULL);
    readback(yg, yd, ny), readback(yo, yod, ny);
    char shape[80];
    snprintf(shape, sizeof shape, "T=%lld C=%lld K=%lld%s%s (4 channels a thread)", (long long)T, (long long)C,
             (long long)K, with_prev ? " prev" : "", packed ? " packed 5/0/35/37" : "");
    report("conv1d_silu", shape, rel_l2(yg, yc, ny), 1e-5);
    CHECK_MSG(!memcmp(yg, yo, ny * 4), "conv1d %s: the 4-channel kernel differs from the one-channel kernel", shape);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, xod), clef_backend_release(gpu, wd);
    clef_backend_release(gpu, pd), clef_backend_release(gpu, yd), clef_backend_release(gpu, yod);
    clef_backend_release(gpu, sdev);
    free(x), free(xo), free(w), free(prev), free(yc), free(yg), free(yo);
}

static void test_gates(int64_t T, int64_t H) {
    const int64_t lda = H + 2, ldb = H + 5;
    float *a = malloc((size_t)(T * lda) * 4), *b = malloc((size_t)(T * ldb) * 4), *al = malloc((size_t)H * 4), *dt = malloc((size_t)H * 4);
    fill_normal(a, (size_t)(T * lda), 3.0f), fill_normal(b, (size_t)(T * ldb), 3.0f), fill_normal(al, (size_t)H, 1.0f), fill_normal(dt, (size_t)H, 1.0f);
    a[0] = 30.0f; /* softplus threshold branch */
    float *gc = malloc((size_t)(T * H) * 4), *bc = malloc((size_t)(T * H) * 4), *gg = malloc((size_t)(T * H) * 4), *bg = malloc((size_t)(T * H) * 4);
    clef_gdn_gates(cpu, T, H, a, lda, b, ldb, al, dt, gc, bc);
    float *ad = to_gpu(gpu, a, (size_t)(T * lda) * 4), *bd = to_gpu(gpu, b, (size_t)(T * ldb) * 4);
    float *ald = to_gpu(gpu, al, (size_t)H * 4), *dtd = to_gpu(gpu, dt, (size_t)H * 4);
    float *gd = gpu_poisoned((size_t)(T * H)), *btd = gpu_poisoned((size_t)(T * H));
    clef_gdn_gates(gpu, T, H, ad, lda, bd, ldb, ald, dtd, gd, btd);
    readback(gg, gd, (size_t)(T * H));
    readback(bg, btd, (size_t)(T * H));
    report("gdn_gates g", "T=333 H=12", rel_l2(gg, gc, (size_t)(T * H)), 1e-5);
    report("gdn_gates beta", "T=333 H=12", rel_l2(bg, bc, (size_t)(T * H)), 1e-5);
    clef_backend_release(gpu, ad), clef_backend_release(gpu, bd), clef_backend_release(gpu, ald);
    clef_backend_release(gpu, dtd), clef_backend_release(gpu, gd), clef_backend_release(gpu, btd);
    free(a), free(b), free(al), free(dt), free(gc), free(bc), free(gg), free(bg);
}

static void test_rope(int64_t T, int64_t rot, int interleaved) {
    const int64_t sections[3] = {rot / 2 - 2 * (rot / 8), rot / 8, rot / 8};
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(3 * T));
    for (int64_t i = 0; i < 3 * T; i++)
        pos[i] = (int32_t)(i < T ? i : rnd_uniform() * 5000);
    size_t nt = (size_t)(T * rot);
    float *cc = malloc(nt * 4), *sc = malloc(nt * 4), *cg = malloc(nt * 4), *sg = malloc(nt * 4);
    clef_rope_table(cpu, T, pos, rot, 1e7, sections, interleaved, cc, sc);
    int32_t *pd = to_gpu(gpu, pos, sizeof(int32_t) * (size_t)(3 * T));
    float *cd = gpu_poisoned(nt), *sd = gpu_poisoned(nt);
    clef_rope_table(gpu, T, pd, rot, 1e7, sections, interleaved, cd, sd);
    readback(cg, cd, nt);
    readback(sg, sd, nt);
    char shape[64];
    snprintf(shape, sizeof shape, "T=%lld rot=%lld%s", (long long)T, (long long)rot, interleaved ? " interleaved" : "");
    report("rope_table cos", shape, rel_l2(cg, cc, nt), 1e-5);
    report("rope_table sin", shape, rel_l2(sg, sc, nt), 1e-5);
    /* apply to heads of 2*rot+4 dims at stride 3*rot (interleaved layout, gaps untouched) */
    const int64_t nh = 3, hs = 3 * rot, ldx = nh * hs + 1;
    size_t nx = (size_t)(T * ldx);
    float *x = malloc(nx * 4), *xg = malloc(nx * 4);
    fill_normal(x, nx, 1.0f);
    float *xd = to_gpu(gpu, x, nx * 4);
    clef_rope_apply(cpu, T, nh, x, ldx, hs, rot, cc, sc);
    clef_rope_apply(gpu, T, nh, xd, ldx, hs, rot, cd, sd);
    readback(xg, xd, nx);
    report("rope_apply", shape, rel_l2(xg, x, nx), 1e-5);
    clef_backend_release(gpu, pd), clef_backend_release(gpu, cd), clef_backend_release(gpu, sd), clef_backend_release(gpu, xd);
    free(pos), free(cc), free(sc), free(cg), free(sg), free(x), free(xg);
}

static void test_attention(int64_t n_q, int64_t n_kv, int64_t Hq, int64_t Hkv, int64_t d, int causal) {
    /* Qwen3.5 layout: q rows hold [query | gate] per head; k, v packed; o with a gap */
    const int64_t ldq = Hq * 2 * d + 3, ldk = Hkv * d + 1, ldv = Hkv * d + 2, ldo = Hq * d + 5;
    size_t nq = (size_t)(n_q * ldq), nk = (size_t)(n_kv * ldk), nv = (size_t)(n_kv * ldv), no = (size_t)(n_q * ldo);
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nv * 4), *oc = malloc(no * 4), *og = malloc(no * 4);
    fill_normal(q, nq, 1.0f), fill_normal(k, nk, 1.0f), fill_normal(v, nv, 1.0f);
    memset(oc, 0, no * 4);
    clef_attention_args a = {.n_q = n_q, .n_kv = n_kv, .n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = d,
                             .q = q, .ldq = ldq, .q_head_stride = 2 * d, .k = k, .ldk = ldk, .k_head_stride = d,
                             .v = v, .ldv = ldv, .v_head_stride = d, .o = oc, .ldo = ldo, .o_head_stride = d,
                             .scale = 1.0f / sqrtf((float)d), .causal = causal};
    size_t ws = clef_attention_workspace_size(cpu, &a);
    void *scratch = malloc(ws ? ws : 1);
    clef_attention(cpu, &a, scratch);
    float *qd = to_gpu(gpu, q, nq * 4), *kd = to_gpu(gpu, k, nk * 4), *vd = to_gpu(gpu, v, nv * 4), *od = to_gpu(gpu, oc, no * 4);
    float *zero = calloc(no, 4);
    clef_backend_write(gpu, od, zero, no * 4);
    clef_attention_args ag = a;
    ag.q = qd, ag.k = kd, ag.v = vd, ag.o = od;
    void *gs = clef_backend_alloc(gpu, clef_attention_workspace_size(gpu, &ag));
    char shape[96];
    snprintf(shape, sizeof shape, "q=%lld kv=%lld H=%lld/%lld d=%lld%s", (long long)n_q, (long long)n_kv, (long long)Hq,
             (long long)Hkv, (long long)d, causal ? " causal" : "");
    /* the fp32 kernel, then the default (tensor cores for d = 64/65-80/128/256: bf16 bound) */
    for (int fp32 = 1; fp32 >= 0; fp32--) {
        clef_backend_write(gpu, od, zero, no * 4);
        clef_backend_cuda_set_attention_fp32(gpu, fp32);
        clef_attention(gpu, &ag, gs);
        readback(og, od, no);
        int tc = !fp32 && (d == 64 || (d > 64 && d <= 80) || d == 128 || d == 256);
        const char *label = fp32 ? "attention fp32" : !tc ? "attention" : d % 64 == 0 ? "attention mma"
                            : clef_backend_cuda_flash_attention(gpu) ? "attention flash" : "attention tc";
        report(label, shape, rel_l2(og, oc, no), tc ? 1e-2 : 1e-5);
    }
    clef_backend_release(gpu, qd), clef_backend_release(gpu, kd), clef_backend_release(gpu, vd);
    clef_backend_release(gpu, od), clef_backend_release(gpu, gs);
    free(q), free(k), free(v), free(oc), free(og), free(scratch), free(zero);
}

/* Packed self-attention (clef_seqs, the model's layout: q rows [query | gate] per head): the
 * default kernel vs the CPU on the same packing (bf16 bound), and every sequence's rows bit for
 * bit equal to that sequence run alone on the GPU (a record's answer must not depend on its
 * batch). check_cpu = 0 skips the CPU reference (the 27B-shaped 8 x 1,502 case: only its first
 * sequence is compared with the CPU, alone). */
static void test_attention_packed(int64_t n_seqs, const int64_t *len, int64_t Hq, int64_t Hkv, int64_t d,
                                  int causal, int check_cpu) {
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(n_seqs + 1)), longest = 0;
    int32_t *start32 = malloc(sizeof(int32_t) * (size_t)(n_seqs + 1));
    start[0] = 0, start32[0] = 0;
    for (int64_t s = 0; s < n_seqs; s++) {
        start[s + 1] = start[s] + len[s], start32[s + 1] = (int32_t)start[s + 1];
        longest = len[s] > longest ? len[s] : longest;
    }
    const int64_t T = start[n_seqs], ldq = Hq * 2 * d, ldkv = Hkv * d, ldo = Hq * d;
    size_t nq = (size_t)(T * ldq), nk = (size_t)(T * ldkv), no = (size_t)(T * ldo);
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *oc = malloc(no * 4), *og = malloc(no * 4);
    float *oa = malloc(no * 4);
    fill_normal(q, nq, 1.0f), fill_normal(k, nk, 1.0f), fill_normal(v, nk, 1.0f);
    clef_seqs sc = {.n_seqs = n_seqs, .start = start, .start_dev = start32, .max_len = longest};
    clef_attention_args a = {.n_q = T, .n_kv = T, .n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = d, .q = q,
                             .ldq = ldq, .q_head_stride = 2 * d, .k = k, .ldk = ldkv, .k_head_stride = d, .v = v,
                             .ldv = ldkv, .v_head_stride = d, .o = oc, .ldo = ldo, .o_head_stride = d,
                             .scale = 1.0f / sqrtf((float)d), .causal = causal, .seqs = &sc};
    float *qd = to_gpu(gpu, q, nq * 4), *kd = to_gpu(gpu, k, nk * 4), *vd = to_gpu(gpu, v, nk * 4);
    float *od = gpu_poisoned(no);
    int32_t *sdev = to_gpu(gpu, start32, sizeof(int32_t) * (size_t)(n_seqs + 1));
    clef_seqs sg = sc;
    sg.start_dev = sdev;
    clef_attention_args ag = a;
    ag.q = qd, ag.k = kd, ag.v = vd, ag.o = od, ag.seqs = &sg;
    void *gs = clef_backend_alloc(gpu, clef_attention_workspace_size(gpu, &ag));
    clef_attention(gpu, &ag, gs);
    readback(og, od, no);
    char shape[96];
    snprintf(shape, sizeof shape, "%lld seqs T=%lld H=%lld/%lld d=%lld%s", (long long)n_seqs, (long long)T,
             (long long)Hq, (long long)Hkv, (long long)d, causal ? " causal" : "");
    if (check_cpu) {
        void *cs = malloc(clef_attention_workspace_size(cpu, &a));
        clef_attention(cpu, &a, cs);
        report("attention packed", shape, rel_l2(og, oc, no), 1e-2);
        free(cs);
    }
    /* each sequence alone (no seqs), the GPU output rows of the packed run must be the same bits */
    int same = 1;
    for (int64_t s = 0; s < n_seqs; s++) {
        const int64_t r0 = start[s], n = len[s];
        if (n == 0)
            continue;
        clef_attention_args one = ag;
        one.seqs = NULL, one.n_q = one.n_kv = n;
        one.q = qd + r0 * ldq, one.k = kd + r0 * ldkv, one.v = vd + r0 * ldkv, one.o = od + r0 * ldo;
        POISON(oa + r0 * ldo, n * ldo);
        clef_backend_write(gpu, one.o, oa + r0 * ldo, (size_t)(n * ldo) * 4);
        clef_attention(gpu, &one, gs);
        readback(oa + r0 * ldo, one.o, (size_t)(n * ldo));
        same &= !memcmp(oa + r0 * ldo, og + r0 * ldo, (size_t)(n * ldo) * 4);
        if (s == 0 && !check_cpu) {
            clef_attention_args c1 = a;
            c1.seqs = NULL, c1.n_q = c1.n_kv = n;
            void *cs = malloc(clef_attention_workspace_size(cpu, &c1));
            clef_attention(cpu, &c1, cs);
            report("attention packed", "the first sequence alone vs cpu", rel_l2(oa, oc, (size_t)(n * ldo)), 1e-2);
            free(cs);
        }
    }
    printf("%-16s %-44s %s\n", "attention packed", shape, same ? "= each alone, bit for bit" : "DIFFERS from alone");
    CHECK_MSG(same, "packed attention %s differs from its sequences run alone", shape);
    clef_backend_release(gpu, qd), clef_backend_release(gpu, kd), clef_backend_release(gpu, vd);
    clef_backend_release(gpu, od), clef_backend_release(gpu, gs), clef_backend_release(gpu, sdev);
    free(q), free(k), free(v), free(oc), free(og), free(oa), free(start), free(start32);
}

/* float64 recurrence of backend.h's definition (the reference nobody optimised) */
static void gdn_reference(const clef_gdn_args *a, const float *state_in, double *o) {
    const int64_t dk = a->dk, dv = a->dv, grp = a->n_v_heads / a->n_k_heads;
    double *S = malloc(sizeof(double) * (size_t)(dk * dv)), *q = malloc(8 * (size_t)dk), *k = malloc(8 * (size_t)dk);
    double *sk = malloc(8 * (size_t)dv);
    for (int64_t h = 0; h < a->n_v_heads; h++) {
        const int64_t kh = h / grp;
        for (int64_t i = 0; i < dk * dv; i++)
            S[i] = state_in ? state_in[h * dk * dv + i] : 0.0;
        for (int64_t t = 0; t < a->T; t++) {
            double nq = 0, nk = 0;
            for (int64_t i = 0; i < dk; i++) {
                q[i] = a->q[t * a->ldq + kh * dk + i], k[i] = a->k[t * a->ldk + kh * dk + i];
                nq += q[i] * q[i], nk += k[i] * k[i];
            }
            for (int64_t i = 0; i < dk; i++) {
                if (a->l2norm_qk)
                    q[i] /= sqrt(nq + 1e-6), k[i] /= sqrt(nk + 1e-6);
                q[i] /= sqrt((double)dk);
            }
            double eg = exp((double)a->g[t * a->n_v_heads + h]), beta = a->beta[t * a->n_v_heads + h];
            for (int64_t j = 0; j < dv; j++) {
                double s = 0;
                for (int64_t i = 0; i < dk; i++)
                    s += (S[i * dv + j] *= eg) * k[i];
                sk[j] = beta * ((double)a->v[t * a->ldv + h * dv + j] - s);
            }
            for (int64_t i = 0; i < dk; i++)
                for (int64_t j = 0; j < dv; j++)
                    S[i * dv + j] += k[i] * sk[j];
            for (int64_t j = 0; j < dv; j++) {
                double s = 0;
                for (int64_t i = 0; i < dk; i++)
                    s += S[i * dv + j] * q[i];
                o[t * a->ldo + h * dv + j] = s;
            }
        }
    }
    free(S), free(q), free(k), free(sk);
}

/* test_gdn's row padding (1: rows that are not 16-byte aligned, the chunked kernel's element-
 * wise loads; 0: aligned rows, its cp.async loads, as in the model) and the label of the
 * chunked kernel's product form under test (clef_backend_cuda_tune_gdn_products). */
static int gdn_row_pad = 1;
static const char *gdn_form = "";

static void test_gdn(int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int with_state, int l2norm,
                     clef_gdn_mode mode) {
    const int64_t ldq = Hk * dk * 2 + Hv * dv + gdn_row_pad; /* q, k, v inside one conv output row */
    size_t nqkv = (size_t)(T * ldq), nh = (size_t)(T * Hv), ns = (size_t)(Hv * dk * dv);
    const int64_t ldo = Hv * dv + 3;
    size_t no = (size_t)(T * ldo);
    float *qkv = malloc(nqkv * 4), *g = malloc(nh * 4), *beta = malloc(nh * 4), *st = malloc(ns * 4), *st_c = malloc(ns * 4);
    float *oc = malloc(no * 4), *og = malloc(no * 4), *st_g = malloc(ns * 4), *of = malloc(no * 4);
    double *od = malloc(no * 8);
    /* without the l2 norm inside the op, inputs of norm ~1 keep the recurrence stable */
    fill_normal(qkv, nqkv, l2norm ? 1.0f : 1.0f / sqrtf((float)dk)), fill_normal(st, ns, 0.1f);
    for (size_t i = 0; i < nh; i++)
        g[i] = -(float)(rnd_uniform() * 0.5), beta[i] = (float)(0.05 + 0.9 * rnd_uniform());
    memcpy(st_c, st, ns * 4);
    memset(oc, 0, no * 4);
    memset(od, 0, no * 8);
    clef_gdn_args a = {.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv, .q = qkv, .ldq = ldq,
                       .k = qkv + Hk * dk, .ldk = ldq, .v = qkv + 2 * Hk * dk, .ldv = ldq, .g = g, .beta = beta,
                       .state = with_state ? st_c : NULL, .o = oc, .ldo = ldo, .l2norm_qk = l2norm,
                       .mode = CLEF_GDN_RECURRENT};
    gdn_reference(&a, with_state ? st : NULL, od);
    void *cs = malloc(clef_gdn_workspace_size(cpu, &a));
    clef_gdn(cpu, &a, cs);
    float *qd = to_gpu(gpu, qkv, nqkv * 4), *gd = to_gpu(gpu, g, nh * 4), *bd = to_gpu(gpu, beta, nh * 4);
    float *sd = to_gpu(gpu, st, ns * 4), *o_d = gpu_poisoned(no);
    float *zero = calloc(no, 4);
    clef_backend_write(gpu, o_d, zero, no * 4);
    clef_gdn_args ag = a;
    ag.q = qd, ag.k = qd + Hk * dk, ag.v = qd + 2 * Hk * dk, ag.g = gd, ag.beta = bd, ag.state = with_state ? sd : NULL;
    ag.o = o_d, ag.mode = mode;
    void *gs = clef_backend_alloc(gpu, clef_gdn_workspace_size(gpu, &ag));
    clef_gdn(gpu, &ag, gs);
    readback(og, o_d, no);
    for (size_t i = 0; i < no; i++)
        of[i] = (float)od[i];
    char shape[96];
    snprintf(shape, sizeof shape, "%s%s T=%lld H=%lld/%lld dk=%lld dv=%lld%s%s%s",
             mode == CLEF_GDN_CHUNKED ? "chunked" : "recurrent", mode == CLEF_GDN_CHUNKED ? gdn_form : "",
             (long long)T, (long long)Hk, (long long)Hv, (long long)dk, (long long)dv, with_state ? " state" : "",
             l2norm ? "" : " no-l2", gdn_row_pad ? "" : " aligned");
    report("gdn vs f64", shape, rel_l2(og, of, no), 1e-3);
    report("gdn vs cpu", shape, rel_l2(og, oc, no), 1e-4);
    if (with_state) {
        readback(st_g, sd, ns);
        report("gdn state out", shape, rel_l2(st_g, st_c, ns), 1e-4);
    }
    clef_backend_release(gpu, qd), clef_backend_release(gpu, gd), clef_backend_release(gpu, bd);
    clef_backend_release(gpu, sd), clef_backend_release(gpu, o_d), clef_backend_release(gpu, gs);
    free(qkv), free(g), free(beta), free(st), free(st_c), free(oc), free(og), free(st_g), free(of), free(od), free(cs), free(zero);
}

/* Packed sequences (clef_seqs) through the chunked GPU kernel vs the CPU backend's recurrent
 * reference on the same packing: each sequence from its own state, none crossing a cut;
 * lens may hold empty sequences. */
static void test_gdn_packed(const int64_t *lens, int64_t n_seqs, int64_t Hk, int64_t Hv) {
    const int64_t dk = 128, dv = 128;
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(n_seqs + 1)), T = 0, max_len = 0;
    int32_t *start32 = malloc(sizeof(int32_t) * (size_t)(n_seqs + 1));
    char shape[96];
    int at = snprintf(shape, sizeof shape, "chunked%s H=%lld/%lld seqs", gdn_form, (long long)Hk, (long long)Hv);
    for (int64_t s = 0; s < n_seqs; s++) {
        start[s] = T, start32[s] = (int32_t)T, T += lens[s];
        max_len = lens[s] > max_len ? lens[s] : max_len;
        if (at < (int)sizeof shape)
            at += snprintf(shape + at, sizeof shape - (size_t)at, "%s%lld", s ? "/" : " ", (long long)lens[s]);
    }
    start[n_seqs] = T, start32[n_seqs] = (int32_t)T;
    const int64_t ldq = Hk * dk * 2 + Hv * dv, ldo = Hv * dv;
    size_t nqkv = (size_t)(T * ldq), nh = (size_t)(T * Hv), ns = (size_t)(n_seqs * Hv * dk * dv), no = (size_t)(T * ldo);
    float *qkv = malloc(nqkv * 4), *g = malloc(nh * 4), *beta = malloc(nh * 4), *st = malloc(ns * 4);
    float *st_c = malloc(ns * 4), *st_g = malloc(ns * 4), *oc = malloc(no * 4), *og = malloc(no * 4);
    fill_normal(qkv, nqkv, 1.0f), fill_normal(st, ns, 0.1f);
    for (size_t i = 0; i < nh; i++)
        g[i] = -(float)(rnd_uniform() * 0.5), beta[i] = (float)(0.05 + 0.9 * rnd_uniform());
    memcpy(st_c, st, ns * 4);
    clef_seqs sc = {.n_seqs = n_seqs, .start = start, .start_dev = start32, .max_len = max_len};
    clef_gdn_args a = {.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv, .q = qkv, .ldq = ldq,
                       .k = qkv + Hk * dk, .ldk = ldq, .v = qkv + 2 * Hk * dk, .ldv = ldq, .g = g, .beta = beta,
                       .state = st_c, .o = oc, .ldo = ldo, .l2norm_qk = 1, .mode = CLEF_GDN_RECURRENT, .seqs = &sc};
    void *cs = malloc(clef_gdn_workspace_size(cpu, &a));
    clef_gdn(cpu, &a, cs);
    float *qd = to_gpu(gpu, qkv, nqkv * 4), *gd = to_gpu(gpu, g, nh * 4), *bd = to_gpu(gpu, beta, nh * 4);
    float *sd = to_gpu(gpu, st, ns * 4), *o_d = gpu_poisoned(no);
    int32_t *sdev = to_gpu(gpu, start32, sizeof(int32_t) * (size_t)(n_seqs + 1));
    clef_seqs sg = sc;
    sg.start_dev = sdev;
    clef_gdn_args ag = a;
    ag.q = qd, ag.k = qd + Hk * dk, ag.v = qd + 2 * Hk * dk, ag.g = gd, ag.beta = bd, ag.state = sd, ag.o = o_d;
    ag.mode = CLEF_GDN_CHUNKED, ag.seqs = &sg;
    void *gs = clef_backend_alloc(gpu, clef_gdn_workspace_size(gpu, &ag));
    clef_gdn(gpu, &ag, gs);
    readback(og, o_d, no);
    readback(st_g, sd, ns);
    report("gdn packed", shape, rel_l2(og, oc, no), 1e-4);
    report("gdn packed st", shape, rel_l2(st_g, st_c, ns), 1e-4);
    clef_backend_release(gpu, qd), clef_backend_release(gpu, gd), clef_backend_release(gpu, bd);
    clef_backend_release(gpu, sd), clef_backend_release(gpu, o_d), clef_backend_release(gpu, gs);
    clef_backend_release(gpu, sdev);
    free(qkv), free(g), free(beta), free(st), free(st_c), free(st_g), free(oc), free(og), free(cs);
    free(start), free(start32);
}

/* run17's planes form (operands split once into bf16 planes, read by ldmatrix) against run16's
 * (split in every product loop), the planes form with 8-byte plane stores and run18's prep
 * forms (the parallel pass's T' and -P split once into planes, masks applied where K K^T and
 * Q K^T are stored; narrow and wide stores), on the same inputs: the same three products of
 * the same bf16 halves in the same order, and the masks the same expressions on the same
 * values, so the outputs and states must be equal bit for bit (bound 0). T, heads and aligned rows as the model runs them; state carried in. */
static void test_gdn_forms_equal(int64_t T, int64_t Hk, int64_t Hv) {
    const int64_t dk = 128, dv = 128, ldq = Hk * dk * 2 + Hv * dv, ldo = Hv * dv;
    const size_t nqkv = (size_t)(T * ldq), nh = (size_t)(T * Hv), ns = (size_t)(Hv * dk * dv), no = (size_t)(T * ldo);
    float *qkv = malloc(nqkv * 4), *g = malloc(nh * 4), *beta = malloc(nh * 4), *st = malloc(ns * 4);
    enum { NF = 5 };
    float *o[NF], *so[NF];
    for (int f = 0; f < NF; f++)
        o[f] = malloc(no * 4), so[f] = malloc(ns * 4);
    fill_normal(qkv, nqkv, 1.0f), fill_normal(st, ns, 0.1f);
    for (size_t i = 0; i < nh; i++)
        g[i] = -(float)(rnd_uniform() * 0.5), beta[i] = (float)(0.05 + 0.9 * rnd_uniform());
    float *qd = to_gpu(gpu, qkv, nqkv * 4), *gd = to_gpu(gpu, g, nh * 4), *bd = to_gpu(gpu, beta, nh * 4);
    float *o_d = gpu_poisoned(no), *sd = gpu_poisoned(ns);
    clef_gdn_args ag = {.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv, .q = qd, .ldq = ldq,
                        .k = qd + Hk * dk, .ldk = ldq, .v = qd + 2 * Hk * dk, .ldv = ldq, .g = gd, .beta = bd,
                        .state = sd, .o = o_d, .ldo = ldo, .l2norm_qk = 1, .mode = CLEF_GDN_CHUNKED};
    void *gs = clef_backend_alloc(gpu, clef_gdn_workspace_size(gpu, &ag));
    static const int forms[NF] = {CLEF_GDN_PRODUCTS_BF16X3_PLANES, CLEF_GDN_PRODUCTS_BF16X3,
                                  CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE, CLEF_GDN_PRODUCTS_BF16X3_PREP,
                                  CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE};
    for (int f = 0; f < NF; f++) {
        clef_backend_cuda_tune_gdn_products(forms[f]);
        clef_backend_write(gpu, sd, st, ns * 4);
        clef_gdn(gpu, &ag, gs);
        readback(o[f], o_d, no);
        readback(so[f], sd, ns);
    }
    clef_backend_cuda_tune_gdn_products(0);
    char shape[64];
    snprintf(shape, sizeof shape, "T=%lld H=%lld/%lld state aligned", (long long)T, (long long)Hk, (long long)Hv);
    report("gdn planes = run16", shape, rel_l2(o[0], o[1], no), 0.0);
    report("gdn planes = run16 st", shape, rel_l2(so[0], so[1], ns), 0.0);
    report("gdn wide = planes", shape, rel_l2(o[2], o[0], no), 0.0); /* run17's pass, 8-byte plane stores */
    report("gdn wide = planes st", shape, rel_l2(so[2], so[0], ns), 0.0);
    report("gdn prep = planes", shape, rel_l2(o[3], o[0], no), 0.0);
    report("gdn prep = planes st", shape, rel_l2(so[3], so[0], ns), 0.0);
    report("gdn prep-wide = planes", shape, rel_l2(o[4], o[0], no), 0.0);
    report("gdn prep-wide = planes st", shape, rel_l2(so[4], so[0], ns), 0.0);
    clef_backend_release(gpu, qd), clef_backend_release(gpu, gd), clef_backend_release(gpu, bd);
    clef_backend_release(gpu, o_d), clef_backend_release(gpu, sd), clef_backend_release(gpu, gs);
    free(qkv), free(g), free(beta), free(st);
    for (int f = 0; f < NF; f++)
        free(o[f]), free(so[f]);
}

static void test_elementwise(int64_t n) {
    float *x = malloc((size_t)n * 4), *u = malloc((size_t)n * 4), *yc = malloc((size_t)n * 4), *yg = malloc((size_t)n * 4);
    fill_normal(x, (size_t)n, 4.0f), fill_normal(u, (size_t)n, 1.0f);
    x[0] = 25.0f, x[1] = -30.0f;
    float *xd = to_gpu(gpu, x, (size_t)n * 4), *ud = to_gpu(gpu, u, (size_t)n * 4), *yd = gpu_poisoned((size_t)n);
    const char *names[] = {"unary silu", "unary gelu_erf", "unary gelu_tanh", "unary sigmoid", "unary softplus", "unary exp"};
    for (int op = 0; op < CLEF_UNARY_COUNT; op++) {
        clef_unary(cpu, (clef_unary_op)op, n, x, yc);
        clef_unary(gpu, (clef_unary_op)op, n, xd, yd);
        readback(yg, yd, (size_t)n);
        report(names[op], "n=10007", rel_l2(yg, yc, (size_t)n), 1e-5);
    }
    clef_swiglu(cpu, n, x, u, yc);
    clef_swiglu(gpu, n, xd, ud, yd);
    readback(yg, yd, (size_t)n);
    report("swiglu", "n=10007", rel_l2(yg, yc, (size_t)n), 1e-5);
    clef_add(cpu, n, x, u, yc);
    clef_add(gpu, n, xd, ud, yd);
    readback(yg, yd, (size_t)n);
    report("add", "n=10007", rel_l2(yg, yc, (size_t)n), 1e-5);
    /* mul_sigmoid on rows of 37 at stride 41 (gate at stride 43) */
    const int64_t rows = n / 43, cols = 37;
    memcpy(yc, x, (size_t)n * 4);
    clef_backend_write(gpu, yd, x, (size_t)n * 4);
    clef_mul_sigmoid(cpu, rows, cols, yc, 41, u, 43);
    clef_mul_sigmoid(gpu, rows, cols, yd, 41, ud, 43);
    readback(yg, yd, (size_t)n);
    report("mul_sigmoid", "rows=232 cols=37 ld=41/43", rel_l2(yg, yc, (size_t)n), 1e-5);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, ud), clef_backend_release(gpu, yd);
    free(x), free(u), free(yc), free(yg);
}

/* The head ops (segment sums, row dots, segmented softmax, gathered adds, pair features,
 * axpy): computed in the CPU's order in double (cuda_head_ops.cu), so held to 1e-6. */
static void test_head_ops(void) {
    const int64_t rows = 300, dim = 70, ld = 75;
    size_t nx = (size_t)(rows * ld);
    float *x = malloc(nx * 4), *x2 = malloc(nx * 4), *w = malloc((size_t)rows * 4);
    fill_normal(x, nx, 1.0f), fill_normal(x2, nx, 1.0f);
    for (int64_t i = 0; i < rows; i++)
        w[i] = (float)rnd_uniform();
    float *xd = to_gpu(gpu, x, nx * 4), *x2d = to_gpu(gpu, x2, nx * 4), *wd = to_gpu(gpu, w, (size_t)rows * 4);
    /* segment_sum: means and weighted sums into rows of y, one accumulating */
    clef_segment segs[4] = {{0, 0, 10, 10, 0}, {2, 10, 100, 90, 0}, {5, 100, 101, 1, 0}, {0 + 7, 150, 300, 150, 1}};
    const int64_t ny = 8 * ld;
    float *yc = malloc((size_t)ny * 4), *yg = malloc((size_t)ny * 4);
    for (int weighted = 0; weighted < 2; weighted++) {
        fill_normal(yc, (size_t)ny, 1.0f);
        float *yd = to_gpu(gpu, yc, (size_t)ny * 4);
        clef_segment *sd = to_gpu(gpu, segs, sizeof segs);
        clef_segment_sum(cpu, 4, dim, segs, x, ld, weighted ? w : NULL, yc, ld);
        clef_segment_sum(gpu, 4, dim, sd, xd, ld, weighted ? wd : NULL, yd, ld);
        readback(yg, yd, (size_t)ny);
        report("segment_sum", weighted ? "4 segments, row weights" : "4 segments, means", rel_l2(yg, yc, (size_t)ny), 1e-6);
        clef_backend_release(gpu, yd), clef_backend_release(gpu, sd);
    }
    /* row_dot: cosine with gathered rows, plain dot */
    int32_t ia[50], ib[50];
    for (int i = 0; i < 50; i++)
        ia[i] = (int32_t)(rnd_uniform() * rows), ib[i] = (int32_t)(rnd_uniform() * rows);
    int32_t *iad = to_gpu(gpu, ia, sizeof ia), *ibd = to_gpu(gpu, ib, sizeof ib);
    float oc[50], og[50];
    float *od = gpu_poisoned(50);
    clef_row_dot(cpu, 50, dim, x, ld, ia, x2, ld, ib, 2.0f, 1e-8f, oc);
    clef_row_dot(gpu, 50, dim, xd, ld, iad, x2d, ld, ibd, 2.0f, 1e-8f, od);
    readback(og, od, 50);
    report("row_dot cosine", "n=50 dim=70 gathered", rel_l2(og, oc, 50), 1e-6);
    clef_row_dot(cpu, 50, dim, x, ld, NULL, x2, ld, NULL, 0.5f, 0.0f, oc);
    clef_row_dot(gpu, 50, dim, xd, ld, NULL, x2d, ld, NULL, 0.5f, 0.0f, od);
    readback(og, od, 50);
    report("row_dot", "n=50 dim=70", rel_l2(og, oc, 50), 1e-6);
    /* segment_softmax over x's first 300 values in 5 segments (one empty) */
    int32_t off[6] = {0, 7, 7, 100, 250, 300};
    int32_t *offd = to_gpu(gpu, off, sizeof off);
    float *sc = malloc(300 * 4), *sg = malloc(300 * 4);
    float *sd2 = gpu_poisoned(300);
    clef_segment_softmax(cpu, 5, off, x, sc);
    clef_segment_softmax(gpu, 5, offd, xd, sd2);
    readback(sg, sd2, 300);
    report("segment_softmax", "5 segments of 300", rel_l2(sg, sc, 300), 1e-6);
    /* add_rows with gathered v rows, in place; pair_features; axpy */
    float *ac = malloc(nx * 4), *ag = malloc(nx * 4);
    memcpy(ac, x, nx * 4);
    float *ad = to_gpu(gpu, x, nx * 4);
    int32_t idx[300];
    for (int i = 0; i < 300; i++)
        idx[i] = (int32_t)(rnd_uniform() * 50);
    int32_t *idxd = to_gpu(gpu, idx, sizeof idx);
    clef_add_rows(cpu, rows, dim, ac, ld, x2, ld, idx, ac, ld);
    clef_add_rows(gpu, rows, dim, ad, ld, x2d, ld, idxd, ad, ld);
    readback(ag, ad, nx);
    report("add_rows", "300 x 70, gathered, in place", rel_l2(ag, ac, nx), 1e-6);
    const int64_t ldf = 4 * dim + 3;
    size_t nf = (size_t)(rows * ldf);
    float *fc = calloc(nf, 4), *fg = malloc(nf * 4);
    float *fd = to_gpu(gpu, fc, nf * 4);
    clef_pair_features(cpu, rows, dim, x2, ld, idx, x, ld, fc, ldf);
    clef_pair_features(gpu, rows, dim, x2d, ld, idxd, xd, ld, fd, ldf);
    readback(fg, fd, nf);
    report("pair_features", "300 x 4*70", rel_l2(fg, fc, nf), 1e-6);
    memcpy(ac, x, nx * 4);
    clef_backend_write(gpu, ad, x, nx * 4);
    clef_axpy(cpu, (int64_t)nx, 0.37f, x2, ac);
    clef_axpy(gpu, (int64_t)nx, 0.37f, x2d, ad);
    readback(ag, ad, nx);
    report("axpy", "n=22500", rel_l2(ag, ac, nx), 1e-6);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, x2d), clef_backend_release(gpu, wd);
    clef_backend_release(gpu, iad), clef_backend_release(gpu, ibd), clef_backend_release(gpu, od);
    clef_backend_release(gpu, offd), clef_backend_release(gpu, sd2), clef_backend_release(gpu, ad);
    clef_backend_release(gpu, idxd), clef_backend_release(gpu, fd);
    free(x), free(x2), free(w), free(yc), free(yg), free(sc), free(sg), free(ac), free(ag), free(fc), free(fg);
}

/* The producers of a BF16 matmul's input (RMSNorm, gated RMSNorm, SwiGLU, the attention
 * output gate) write the bf16 staging themselves when it has room (cuda_staging_claim): the
 * matmul after them skips its conversion. Checked per producer: its fp32 output vs the CPU's:
 * <= 1e-5; the matmul after it vs the same matmul after a host write elsewhere (which makes
 * it convert the fp32 rows again): equal bit for bit; vs the CPU matmul on the bf16 rounding
 * of the GPU producer's own fp32 output: <= 1e-5 (as "matmul reuse"; rounding the CPU
 * producer's output instead would compare different bf16 inputs wherever the two fp32
 * values, 1 ulp apart, straddle a bf16 rounding boundary, and at 40 rows a single such
 * element moves the product by ~1e-5); rows inside the produced ones (an MLP row chunk) bit
 * for bit as the same rows of the whole; and after a kernel rewrote the rows in place,
 * converted again. */
static void check_fused(const char *what, float *yd, const float *yc, int64_t T, int64_t K) {
    const int64_t N = 64, r0 = 8;
    uint16_t *w = malloc(2 * (size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++)
        w[i] = clef_f32_to_bf16(rnd_normal() * 0.05f);
    clef_matrix wc = {.type = CLEF_WTYPE_BF16, .rows = N, .cols = K, .ld = K, .data = w}, wg = wc;
    wg.data = to_gpu(gpu, w, 2 * (size_t)(N * K));
    float *o1 = gpu_poisoned((size_t)(T * N)), *o2 = gpu_poisoned((size_t)(T * N)), *o3 = gpu_poisoned((size_t)(T * N));
    float *h1 = malloc(sizeof(float) * (size_t)(T * N)), *h2 = malloc(sizeof(float) * (size_t)(T * N));
    float *h3 = malloc(sizeof(float) * (size_t)(T * N)), *y2 = malloc(sizeof(float) * (size_t)(T * K));
    float *dummy = gpu_poisoned(4);
    clef_matmul(gpu, T, yd, K, &wg, NULL, o1, N, 0);                   /* right after the producer */
    clef_matmul(gpu, T - r0, yd + r0 * K, K, &wg, NULL, o3, N, 0);     /* rows inside its output */
    clef_backend_write(gpu, dummy, h1, 4 * sizeof(float));             /* ends the staging's claim */
    clef_matmul(gpu, T, yd, K, &wg, NULL, o2, N, 0);                   /* converts the fp32 rows */
    readback(h1, o1, (size_t)(T * N));
    readback(h2, o2, (size_t)(T * N));
    readback(h3, o3, (size_t)((T - r0) * N));
    char shape[96];
    snprintf(shape, sizeof shape, "%s T=%lld K=%lld", what, (long long)T, (long long)K);
    /* the producer's own fp32 output, contiguous rows (the 16-byte-load kernels), vs the CPU */
    float *yg = malloc(sizeof(float) * (size_t)(T * K));
    readback(yg, yd, (size_t)(T * K));
    report(what, shape, rel_l2(yg, yc, (size_t)(T * K)), 1e-5);
    CHECK_MSG(!memcmp(h1, h2, sizeof(float) * (size_t)(T * N)), "fused %s: matmul on the producer's bf16 differs from the converted rows", shape);
    CHECK_MSG(!memcmp(h3, h2 + r0 * N, sizeof(float) * (size_t)((T - r0) * N)), "fused %s: rows inside the produced ones differ", shape);
    check_matmul_rows(shape, yg, T, K, &wc, o1, N);
    /* a kernel rewrites the rows in place after the producer: the next matmul converts them again */
    clef_add(gpu, T * K, yd, yd, yd);
    for (int64_t i = 0; i < T * K; i++)
        y2[i] = yg[i] + yg[i];
    clef_matmul(gpu, T, yd, K, &wg, NULL, o1, N, 0);
    snprintf(shape, sizeof shape, "%s, rows rewritten", what);
    check_matmul_rows(shape, y2, T, K, &wc, o1, N);
    clef_backend_release(gpu, (void *)wg.data), clef_backend_release(gpu, o1), clef_backend_release(gpu, o2);
    clef_backend_release(gpu, o3), clef_backend_release(gpu, dummy);
    free(w), free(h1), free(h2), free(h3), free(y2), free(yg);
}

/* RMSNorm and gated RMSNorm on contiguous rows of every width their 16-byte-load kernels
 * take (k_rmsnorm_vec holds 4, 8, 10 or 16 float4 per thread; the gated warp kernel 1 or 2 per
 * lane), with and without weights, vs the CPU: <= 1e-5. */
static void test_norm_widths(void) {
    const int64_t dims[] = {2000, 4096, 5120, 8192, 100, 128, 256}, rows = 9;
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        const int64_t dim = dims[k];
        const size_t n = (size_t)(rows * dim);
        float *x = malloc(n * 4), *z = malloc(n * 4), *w = malloc((size_t)dim * 4), *yc = malloc(n * 4), *yg = malloc(n * 4);
        fill_normal(x, n, 2.0f), fill_normal(z, n, 1.0f), fill_normal(w, (size_t)dim, 0.5f);
        float *xd = to_gpu(gpu, x, n * 4), *zd = to_gpu(gpu, z, n * 4), *wd = to_gpu(gpu, w, (size_t)dim * 4);
        float *yd = gpu_poisoned(n);
        char shape[64];
        snprintf(shape, sizeof shape, "rows=%lld dim=%lld (contiguous)", (long long)rows, (long long)dim);
        for (int variant = 0; variant < 3; variant++) {
            const char *name = variant == 0 ? "rmsnorm(1+w)" : variant == 1 ? "rmsnorm(no w)" : "rmsnorm_gated";
            if (variant < 2) {
                const float *wc = variant == 0 ? w : NULL, *wg = variant == 0 ? wd : NULL;
                clef_rmsnorm(cpu, rows, dim, x, dim, wc, 1e-6f, variant == 0, yc, dim);
                clef_rmsnorm(gpu, rows, dim, xd, dim, wg, 1e-6f, variant == 0, yd, dim);
            } else {
                clef_rmsnorm_gated(cpu, rows, dim, x, dim, z, dim, w, 1e-6f, yc, dim);
                clef_rmsnorm_gated(gpu, rows, dim, xd, dim, zd, dim, wd, 1e-6f, yd, dim);
            }
            readback(yg, yd, n);
            report(name, shape, rel_l2(yg, yc, n), 1e-5);
        }
        clef_backend_release(gpu, xd), clef_backend_release(gpu, zd), clef_backend_release(gpu, wd);
        clef_backend_release(gpu, yd);
        free(x), free(z), free(w), free(yc), free(yg);
    }
}

static void test_fused_producers(void) {
    const int64_t T = 40, D = 5120, Dw = 256, H = 4, d = 128, F = 1000;
    /* grow the backend's staging first (producers never grow it): one matmul of T x D zeros */
    {
        float *zeros = calloc((size_t)(T * D), sizeof(float));
        float *x = to_gpu(gpu, zeros, sizeof(float) * (size_t)(T * D)), *y = gpu_poisoned((size_t)(T * 16));
        clef_matrix wg = {.type = CLEF_WTYPE_BF16, .rows = 16, .cols = D, .ld = D, .data = to_gpu(gpu, zeros, 2 * (size_t)(16 * D))};
        clef_matmul(gpu, T, x, D, &wg, NULL, y, 16, 0);
        CHECK_EQ_INT(clef_backend_synchronize(gpu), CLEF_OK);
        clef_backend_release(gpu, x), clef_backend_release(gpu, y), clef_backend_release(gpu, (void *)wg.data);
        free(zeros);
    }
    const size_t nmax = (size_t)(T * D);
    float *x = malloc(nmax * 4), *z = malloc(nmax * 4), *wn = malloc((size_t)D * 4), *yc = malloc(nmax * 4);
    fill_normal(x, nmax, 2.0f), fill_normal(z, nmax, 1.0f), fill_normal(wn, (size_t)D, 0.3f);
    float *xd = to_gpu(gpu, x, nmax * 4), *zd = to_gpu(gpu, z, nmax * 4), *wd = to_gpu(gpu, wn, (size_t)D * 4);
    float *yd = gpu_poisoned(nmax);
    /* RMSNorm (1 + w), hidden-size rows: the block-per-row kernel */
    clef_rmsnorm(cpu, T, D, x, D, wn, 1e-6f, 1, yc, D);
    clef_rmsnorm(gpu, T, D, xd, D, wd, 1e-6f, 1, yd, D);
    check_fused("rmsnorm", yd, yc, T, D);
    /* RMSNorm, rows of 256 from a strided input: the warp-per-row kernel */
    clef_rmsnorm(cpu, T, Dw, x, Dw + 9, wn, 1e-6f, 0, yc, Dw);
    clef_rmsnorm(gpu, T, Dw, xd, Dw + 9, wd, 1e-6f, 0, yd, Dw);
    check_fused("rmsnorm warp", yd, yc, T, Dw);
    /* gated RMSNorm per (token, head): T x H rows of d, the matmul reads T rows of H x d */
    clef_rmsnorm_gated(cpu, T * H, d, x, d, z, d, wn, 1e-6f, yc, d);
    clef_rmsnorm_gated(gpu, T * H, d, xd, d, zd, d, wd, 1e-6f, yd, d);
    check_fused("rmsnorm_gated", yd, yc, T, H * d);
    /* gated RMSNorm of 5,120-wide rows: the block-per-row kernel */
    clef_rmsnorm_gated(cpu, T, D, x, D, z, D, wn, 1e-6f, yc, D);
    clef_rmsnorm_gated(gpu, T, D, xd, D, zd, D, wd, 1e-6f, yd, D);
    check_fused("rmsnorm_gated wide", yd, yc, T, D);
    /* SwiGLU over T x F (float4 path) and T x (F - 1) (scalar path) */
    for (int64_t f = F; f >= F - 1; f--) {
        clef_swiglu(cpu, T * f, x, z, yc);
        clef_swiglu(gpu, T * f, xd, zd, yd);
        check_fused(f % 4 ? "swiglu scalar" : "swiglu", yd, yc, T, f);
    }
    /* attention output gate, in place: T x H rows of d, gate at stride 2d */
    memcpy(yc, x, nmax * 4);
    clef_backend_write(gpu, yd, x, nmax * 4);
    clef_mul_sigmoid(cpu, T * H, d, yc, d, z, 2 * d);
    clef_mul_sigmoid(gpu, T * H, d, yd, d, zd, 2 * d);
    check_fused("mul_sigmoid", yd, yc, T, H * d);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, zd), clef_backend_release(gpu, wd);
    clef_backend_release(gpu, yd);
    free(x), free(z), free(wn), free(yc);
}

/* The cuBLASLt algorithm of a layout is chosen once (timed at 2,048 rows, cuda_matmul.cu) and
 * used at every row count: at the 27B's MLP shapes, rows computed in a batch of T equal the
 * same rows computed alone (first rows, and rows from an offset), bit for bit. GPU only:
 * device-made weights, no CPU product at this size. */
static void test_matmul_batch_invariance(int64_t N, int64_t K, int accumulate) {
    const int64_t T = 600, r0 = 256, T1 = 100;
    float *x = malloc(sizeof(float) * (size_t)(T * K)), *y0 = malloc(sizeof(float) * (size_t)(T * N));
    float *ha = malloc(sizeof(float) * (size_t)(T * N)), *hb = malloc(sizeof(float) * (size_t)(T * N));
    fill_normal(x, (size_t)(T * K), 1.0f), fill_normal(y0, (size_t)(T * N), 1.0f);
    clef_matrix wg = {.type = CLEF_WTYPE_BF16, .rows = N, .cols = K, .ld = K, .data = clef_backend_alloc(gpu, 2 * (size_t)(N * K))};
    CHECK_EQ_INT(clef_backend_cuda_fill_normal_bf16(gpu, (void *)wg.data, (size_t)(N * K), 0.02f, 11), CLEF_OK);
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * K));
    float *ya = to_gpu(gpu, y0, sizeof(float) * (size_t)(T * N)), *yb = to_gpu(gpu, y0, sizeof(float) * (size_t)(T * N));
    clef_matmul(gpu, T, xd, K, &wg, NULL, ya, N, accumulate);
    clef_matmul(gpu, T1, xd, K, &wg, NULL, yb, N, accumulate);                              /* rows 0 .. T1 alone */
    clef_matmul(gpu, T - r0, xd + r0 * K, K, &wg, NULL, yb + r0 * N, N, accumulate);     /* rows r0 .. T alone */
    readback(ha, ya, (size_t)(T * N));
    readback(hb, yb, (size_t)(T * N));
    char shape[96];
    snprintf(shape, sizeof shape, "N=%lld K=%lld%s", (long long)N, (long long)K, accumulate ? " acc" : "");
    int same = !memcmp(ha, hb, sizeof(float) * (size_t)(T1 * N)) &&
               !memcmp(ha + r0 * N, hb + r0 * N, sizeof(float) * (size_t)((T - r0) * N));
    printf("%-16s %-44s %s\n", "matmul batch", shape, same ? "rows alone = rows in the batch, bit for bit" : "DIFFER");
    CHECK_MSG(same, "matmul %s: rows computed alone differ from the same rows in a batch of %lld", shape, (long long)T);
    clef_backend_release(gpu, (void *)wg.data), clef_backend_release(gpu, xd), clef_backend_release(gpu, ya);
    clef_backend_release(gpu, yb);
    free(x), free(y0), free(ha), free(hb);
}

/* The chunked and recurrent delta-rule checks (all of them: `test_cuda_ops gdn` runs only
 * these, for a device run that changes nothing else). */
/* A selectable product form of the chunked delta rule (CLEF_GDN_PRODUCTS_*) through the
 * default form's checks that differ by form: odd and model head shapes, 8,192 tokens, aligned
 * rows, packed records; the same bounds. The default form is set again after. */
static void test_gdn_other_form(int products, const char *name) {
    clef_backend_cuda_tune_gdn_products(products);
    gdn_form = name;
    test_gdn(65, 1, 2, 24, 20, 1, 1, CLEF_GDN_CHUNKED);
    test_gdn(300, 16, 48, 128, 128, 0, 0, CLEF_GDN_CHUNKED);
    test_gdn(8192, 1, 1, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    gdn_row_pad = 0;
    test_gdn(1000, 16, 32, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    gdn_row_pad = 1;
    const int64_t lens[] = {0, 200, 1, 0, 65, 1100, 3};
    test_gdn_packed(lens, 7, 16, 32);
    clef_backend_cuda_tune_gdn_products(0);
    gdn_form = "";
}

static void test_gdn_all(void) {
    for (int mode = 0; mode < 2; mode++) {
        const clef_gdn_mode m = mode ? CLEF_GDN_RECURRENT : CLEF_GDN_CHUNKED;
        test_gdn(1, 2, 4, 128, 128, 0, 1, m);
        test_gdn(64, 2, 6, 128, 128, 1, 1, m);
        test_gdn(65, 1, 2, 24, 20, 1, 1, m);
        test_gdn(300, 2, 4, 128, 128, 1, 1, m);
        test_gdn(129, 1, 1, 100, 36, 0, 0, m);
        test_gdn(200, 1, 1, 256, 72, 1, 1, m);
        test_gdn(130, 16, 48, 128, 128, 1, 1, m); /* the 27B's heads: 64-column walk blocks */
        test_gdn(2048, 1, 2, 128, 128, 0, 1, m);
        test_gdn(8192, 1, 1, 128, 128, 1, 1, m);
    }
    /* the chunked kernel only: a partial chunk past a segment's end (16 chunks), the 9B's heads
     * (32-column walk blocks), the 27B's without the L2 norm; packed records, empty ones too */
    test_gdn(1025, 1, 3, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    test_gdn(1000, 16, 32, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    test_gdn(300, 16, 48, 128, 128, 0, 0, CLEF_GDN_CHUNKED);
    {
        const int64_t lens[] = {64, 1, 130, 7};
        test_gdn_packed(lens, 4, 2, 4);
        const int64_t lens2[] = {0, 200, 1, 0, 65, 1100, 3};
        test_gdn_packed(lens2, 7, 16, 32);
    }
    /* the chunked kernel's bench-only tunings: the other walk width, short segments */
    clef_backend_cuda_tune_gdn(0, 64);
    test_gdn(300, 2, 4, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    clef_backend_cuda_tune_gdn(3, 0); /* segments of 3 chunks: 1,100 tokens in 6 segments */
    test_gdn(1100, 2, 4, 128, 128, 0, 1, CLEF_GDN_CHUNKED);
    clef_backend_cuda_tune_gdn(0, 0);
    /* 16-byte aligned rows (the chunked kernel's cp.async loads of q, k and v, as in the model)
     * against the float64 reference too, not only the packed checks vs the CPU */
    gdn_row_pad = 0;
    test_gdn(8192, 1, 1, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    test_gdn(1000, 16, 32, 128, 128, 1, 1, CLEF_GDN_CHUNKED);
    gdn_row_pad = 1;
    /* the run15 product form (3xTF32), kept selectable for comparison: the same function, the
     * same bounds (its error is ~3e-6 vs float64, the default 3xBF16's ~8e-6 measured in run16:
     * both far inside 1e-3 and 1e-4) */
    test_gdn_other_form(CLEF_GDN_PRODUCTS_TF32X3, " tf32x3");
    /* run16's form (3xBF16, operands split in every product loop; the default until run17 split
     * them once into bf16 planes), kept selectable for comparison: the same products in the same
     * order, so the same bounds (and test_gdn_forms_equal: the same bits) */
    test_gdn_other_form(CLEF_GDN_PRODUCTS_BF16X3, " bf16x3");
    /* run17's planes form (the default until run18 split the parallel pass's T' and -P once as
     * well): the same products in the same order as run16's and run18's, so the same bounds */
    test_gdn_other_form(CLEF_GDN_PRODUCTS_BF16X3_PLANES, " planes (run17)");
    test_gdn_forms_equal(2270, 16, 48); /* the 27B's heads: 64-column walk blocks, 3 segments */
    test_gdn_forms_equal(1000, 16, 32); /* the 9B's: 32-column walk blocks */
}

int main(int argc, char **argv) {
    if (clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return GPU_TEST_SKIPPED;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress survives a timeout */
    clef_backend_params p = clef_backend_default_params();
    if (clef_backend_cpu_create(&p, &cpu) != CLEF_OK || clef_backend_cuda_create(0, &gpu) != CLEF_OK) {
        fprintf(stderr, "backend creation failed: %s\n", clef_last_error());
        return 1;
    }
    clef_backend_cuda_set_gdn_chunked(gpu, 1); /* CLEF_GDN_CHUNKED: the WY/UT kernel (the default too) */
    if (argc > 1 && !strcmp(argv[1], "gdn")) {
        test_gdn_all();
        clef_backend_free(gpu);
        clef_backend_free(cpu);
        return test_summary();
    }
    test_matmul(1, 64, 48, 1, 0, 0);
    test_matmul(37, 200, 129, 1, 1, 1);
    test_matmul(300, 1024, 768, 1, 0, 1);
    test_matmul(1, 33, 17, 0, 1, 0);
    test_matmul(45, 130, 70, 0, 0, 1);
    test_matmul(13, 64, 1, 1, 0, 0); /* weights of < 16 rows: the small-matmul kernel */
    test_matmul(7, 40, 5, 1, 1, 1);
    test_matmul(9, 33, 3, 0, 1, 0);
    test_matmul_reuse();
    test_get_rows();
    for (int which = 0; which < 6; which++) {
        test_rows(which, 1, 5);
        test_rows(which, 333, 256);
        test_rows(which, 17, 1000);
        test_rows(which, 7, 5120); /* longer than NORM_WARP_DIM: the block-per-row kernels */
    }
    test_conv(1, 40, 4, 0);
    test_conv(130, 97, 4, 1);
    test_conv(77, 31, 3, 0);
    test_conv(300, 520, 4, 1);
    test_conv_packed();
    test_conv_vec(1, 40, 4, 0, 0);
    test_conv_vec(300, 520, 4, 1, 0);
    test_conv_vec(77, 36, 3, 1, 0);
    test_conv_vec(5 + 0 + 35 + 37, 72, 4, 1, 1);
    test_conv_vec(5 + 0 + 35 + 37, 72, 3, 0, 1);
    test_gates(333, 12);
    test_rope(300, 64, 1);
    test_rope(19, 24, 0);
    test_attention(1, 1, 2, 1, 256, 1);
    test_attention(150, 150, 8, 2, 256, 1);
    test_attention(70, 70, 4, 4, 24, 1);
    test_attention(5, 90, 3, 1, 64, 0);
    test_attention(40, 100, 4, 2, 128, 1);
    test_attention(700, 700, 4, 1, 256, 1);
    test_attention(1000, 1000, 2, 1, 64, 1);
    test_attention(333, 1200, 3, 3, 256, 1);
    test_attention(600, 600, 4, 4, 72, 0); /* the vision tower's head: zero-padded to 80 */
    test_attention(97, 97, 2, 1, 80, 1);
    test_attention(2270, 2270, 6, 1, 256, 1); /* the 27B's group of 6 query heads per kv head */
    test_attention(8192, 8192, 2, 1, 256, 1);
    test_attention(129, 129, 4, 2, 128, 0);
    {
        const int64_t mixed[] = {0, 1, 700, 5, 64, 129, 0, 300, 1502};
        test_attention_packed(9, mixed, 4, 2, 256, 1, 1);
        const int64_t records[] = {1502, 1502, 1502, 1502, 1502, 1502, 1502, 1502};
        test_attention_packed(8, records, 24, 4, 256, 1, 0); /* the 27B's heads, 8 x 1,502 */
        const int64_t small[] = {3, 0, 200, 77};
        test_attention_packed(4, small, 2, 1, 64, 1, 1);
        const int64_t frames[] = {256, 64, 0, 130}; /* the vision tower: frames, 72 dims, not causal */
        test_attention_packed(4, frames, 4, 4, 72, 0, 1);
    }
    test_gdn_all();
    test_elementwise(10007);
    test_head_ops();
    test_norm_widths();
    test_fused_producers();
    test_matmul_batch_invariance(5120, 17408, 1); /* the 27B's down_proj */
    test_matmul_batch_invariance(17408, 5120, 0); /* its gate / up */
    clef_backend_free(gpu);
    clef_backend_free(cpu);
    return test_summary();
}
