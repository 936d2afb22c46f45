/*
 * test_cuda_quant.c — the quantized matmuls of the CUDA backend (FP8 W8A8, INT8 ConvRot,
 * NF4; src/backend/cuda/cuda_quant*.cu) against the CPU references of the same arithmetic
 * (src/quant/) and a float64 reference of each GPU path's own arithmetic, on random shapes,
 * row slices (quant_row0), padded leading dimensions, bias and accumulate. Outputs are
 * poisoned (NaN) first, so an unwritten element fails. What each check holds:
 *
 *  FP8   the activation quantizer (codes and scales) bit-identical to clef_fp8_quantize_tokens
 *        (also its bf16-valued output, and on rows that are not 16-byte aligned)
 *        (fp32). The GEMM vs float64 of its own arithmetic, y = (sum_k qx qw) s_t s_w
 *        (+ y0 + bias), on its three paths:
 *        exact (the default: the codes' bf16 values, bf16 tensor cores, fp32 accumulation;
 *        every product exact; with cuBLASLt's GEMM (also on a weight widened and multiplied in
 *        slices of 64 output features, rows in chunks: exact-sl64), with each wgmma kernel,
 *        scaling fused, with the kernels that widen the weight's codes in registers (256-row
 *        tiles with 2, 1 or 3 k16 steps in flight or in clusters of two, 128-row tiles;
 *        argument "fp8-t256": 128 x 256-token tiles) and the backend's default (those kernels'
 *        tiles per layout); argument "fp8-mixed" adds weight row 0 of subnormal codes and row
 *        1 of every code but NaN, so a widening that flushed or misread a code errs by the
 *        whole row, and a shape of several tiles with a K tail):
 *        relative L2 <= 1e-5 (the BF16 path's bound) and per element
 *        |err| <= K 2^-23 sum_k |qx qw| s_t s_w + 2^-21 (|y| + |y0| + |bias|) (fp32
 *        summation of K exact products, then the scaling's roundings);
 *        fp8 tensor cores (cuBLASLt outer-vector scaling, and the epilogue path):
 *        relative L2 <= 5e-3 and per element |err| <= 2^-6 sum_k |qx qw| s_t s_w
 *        + 2^-21 (|y| + |y0| + |bias|). Why that wide: Hopper's fp8 tensor cores add the
 *        products of one MMA (k = 32) to their running sum keeping about 14 bits, aligned to
 *        the largest term (DeepSeek-V3's measurement), and cuBLASLt (fast accumulation off)
 *        promotes that partial sum to fp32 after at most 4 MMAs: per element at most
 *        4 x 33 x 2^-13 of the magnitude sum of <= 128 products, so 2^-6 of sum |qx qw|;
 *        rounding errors of random sign make the relative L2 about 2^-14 x sqrt(128), ~1e-3
 *        at most. An indexing or scaling bug errs by O(1);
 *        cuBLASLt's fast accumulation (CLEF_CUDA_FP8_TC_FAST: no promotion, the whole sum in the
 *        tensor cores): the promoted bound once per 128-run of K, per element
 *        ceil(K / 128) 2^-6 sum |qx qw| s_t s_w (+ the same fp32 terms), and relative L2
 *        <= max(5e-3, K / 32 x 2^-13) (one ~14-bit rounding of the running sum per k32 step,
 *        possibly one-sided; DeepSeek-V3 measured ~2% at K = 4,096);
 *        our fp8 wgmma kernel with fp32 promotion (every 128 of K, and every 32): the same
 *        bounds, for the same reason (each partial the tensor cores keep covers at most 128 of
 *        K; the promotion adds are fp32, K / 32 x 2^-24 of sum |qx qw| at most, far inside);
 *        the relative L2 printed beside cuBLASLt's shows what promotion gains. Printed beside it: the difference
 *        from the CPU's fp32 W8A8 reference (clef_fp8_gemm_ref) and from the CPU backend's
 *        QDQ form (compressed-tensors' forward, docs/quant.md), which is a different
 *        arithmetic (the operands' rounding: ~1e-3..1e-2 apart). A row computed alone equals
 *        the same row in the batch, bit for bit.
 *  INT8  the quantizer bit-identical to clef_convrot_quantize_tokens_fast (butterfly) and, in
 *        exact mode, to clef_convrot_quantize_tokens (torch's order, the CPU backend's); the
 *        int32 accumulations equal the CPU's integer dot products exactly; the whole matmul
 *        bit-identical to clef_int8_matmul_rows on the same codes (butterfly) and to the CPU
 *        backend's matmul (exact mode); vs float64 of its arithmetic: relative L2 <= 1e-6
 *        (two fp32 roundings in the epilogue). A static input_scale: codes as computed here.
 *        The wgmma GEMMs (each variant, the persistent and ping-pong ones too): their int32
 *        sums equal the CPU's, and their matmul (scaling fused) the CPU's bits; at the 9B / 27B
 *        linear shapes (odd T; 1,501 rows: many tiles a block for the persistent kernels) its
 *        sums equal cuBLASLt's everywhere and the CPU's on three rows, its matmul the
 *        cuBLASLt path's.
 *  Hand-off (cuda_quant_stage.cu): RMSNorm, gated RMSNorm, SwiGLU and the attention output
 *        gate writing the next FP8 (codes or bf16 values) / INT8 ConvRot matmul's codes:
 *        codes and scales bit-identical to the standalone quantizer on the producer's own
 *        fp32 output (which the FP8 / INT8 checks hold to the CPU), the fp32 output and the
 *        matmul's result bit-identical to those with the hand-off off, and each case where it
 *        must not serve (test_fused says which); the 27B's K = 5,120 / 6,144 / 17,408 and
 *        random shapes.
 *        `test_cuda_quant fused` runs these checks alone.
 *  NF4   the dequantized weights bit-identical to clef_nf4_dequant_bf16 (double quant and
 *        plain absmax), from run15's kernel and the vectorized one; the matmul in each mode
 *        (run15's dequantization + cuBLASLt, the vectorized one + cuBLASLt: the same bits, and
 *        the fused GEMM, which reads the 4-bit codes) vs float64 of bf16(x) . W_bf16:
 *        relative L2 <= 1e-5 x max(1, sqrt(K / 4096)) (fp32 accumulation: the BF16 path's
 *        bound, its random-sign rounding errors growing as sqrt(K)) and per element
 *        |err| <= K 2^-23 sum_k |x w| + 2^-21 (|y| + |y0| + |bias|); vs the CPU backend (fp32
 *        x, fp32(code x absmax) weights): <= 1e-2 (x and W each rounded to bf16: <= 2^-9 per
 *        element). Rows alone, and the batch shifted by one row, give the batch's bits.
 *        Argument "nf4": these checks alone; argument "fp8": the FP8 checks alone;
 *        "fp8-mixed": the FP8 checks alone with the register-widening kernels' extra cases;
 *        "fp8-t256": those and the 256-token tiles (not yet run on a GPU).
 *  Scratch a caller planned (matmul_workspace_size: the path's own size) under one setting of
 *        the backend's paths, the matmul run under another, every ordered pair of six settings
 *        and each format: nothing written past what was planned (a pattern after it kept), and
 *        the bits of the same matmul given no scratch.
 * Exits 77 (ctest: SKIPPED) when no GPU is visible.
 */
#include "backend/cuda/cuda_quant.h"
#include "clef.h"
#include "gpu_test_util.h"
#include "quant/fp8.h"
#include "quant/hadamard.h"
#include "quant/int8_convrot.h"
#include "quant/nf4.h"
#include "quant/quant_matmul.h"
#include "test.h"

#include <stdio.h>

static clef_backend *cpu, *gpu;

#define POISON(p, n) for (size_t i_ = 0; i_ < (size_t)(n); i_++) (p)[i_] = NAN

static float *fmalloc(size_t n) { return malloc(sizeof(float) * (n ? n : 1)); }

static void sync_read(void *host, const void *dev, size_t bytes) {
    CHECK_EQ_INT(clef_backend_synchronize(gpu), CLEF_OK);
    CHECK_EQ_INT(clef_backend_read(gpu, host, dev, bytes), CLEF_OK);
}

/* relative L2 of a [T, ld] result's first N columns against a dense [T, N] double reference */
static double rel_l2_vs64(const float *y, int64_t ldy, const double *ref, int64_t T, int64_t N) {
    double num = 0, den = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double v = y[t * ldy + n];
            if (isnan(v))
                return INFINITY;
            double d = v - ref[t * N + n];
            num += d * d, den += ref[t * N + n] * ref[t * N + n];
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double rel_l2_ld(const float *a, const float *b, int64_t ld, int64_t T, int64_t N) {
    double num = 0, den = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double x = a[t * ld + n], r = b[t * ld + n];
            if (isnan(x) || isnan(r))
                return INFINITY;
            num += (x - r) * (x - r), den += r * r;
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Rows of activations with the cases quantizers care about: a zero row (the epsilon / floor
 * scale), a row with one large outlier, ordinary N(0, 1) rows. */
static float *make_x(int64_t T, int64_t ldx) {
    float *x = fmalloc((size_t)(T * ldx));
    fill_normal(x, (size_t)(T * ldx), 1.0f);
    if (T > 2) {
        for (int64_t k = 0; k < ldx; k++)
            x[k] = 0.0f;
        x[ldx + 3] = 300.0f;
    }
    return x;
}

/* ---- FP8 ------------------------------------------------------------------------------------ */

/* 1 (argument "fp8-mixed", with the FP8 checks alone): weight rows of subnormal codes and of
 * every code, and a shape of several tiles with a K tail, for the kernels that widen the
 * weight's codes in registers (cuda_quant_fp8_exact_wgmma.cu; every FP8 check runs them). */
static int test_mixed;
/* 1 (argument "fp8-t256": test_mixed's checks and) the 256-token tiles, built but not yet run
 * on a GPU: a pipeline fault there would leave the device unusable for the checks after it */
static int test_t256;

static void test_fp8(int64_t T, int64_t N, int64_t K, int64_t row0, int with_bias, int accumulate) {
    /* output rows 64-byte aligned where N allows (what cuBLASLt's FP8 kernels want), else odd */
    const int64_t Ns = N + row0, ldx = K + 16, ldy = N % 8 == 0 ? N + 16 : N + 3;
    char shape[96];
    snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld row0=%lld%s%s", (long long)T, (long long)N, (long long)K,
             (long long)row0, with_bias ? " bias" : "", accumulate ? " acc" : "");
    float *x = make_x(T, ldx), *y0 = fmalloc((size_t)(T * ldy)), *bias = fmalloc((size_t)N);
    fill_normal(y0, (size_t)(T * ldy), 1.0f);
    fill_normal(bias, (size_t)N, 1.0f);
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)(Ns * K));
    for (int64_t i = 0; i < Ns * K; i++)
        wb[i] = clef_f32_to_bf16(rnd_normal() * 0.05f);
    uint8_t *qw = malloc((size_t)(Ns * K)), *qx = malloc((size_t)(T * K)), *qx_g = malloc((size_t)(T * K));
    float *sw = fmalloc((size_t)Ns), *sx = fmalloc((size_t)T), *sx_g = fmalloc((size_t)T);
    clef_fp8_quantize_weight(wb, Ns, K, qw, sw);
    /* with the register-widening kernels (argument "fp8-mixed"): the first output row all
     * subnormal codes (+-1..7 x 2^-9: a kernel that flushed them would give 0 there), the
     * second every code but NaN in turn (each widening case) */
    for (int64_t k = 0; k < K && N >= 2 && test_mixed; k++) {
        qw[row0 * K + k] = (uint8_t)(1 + k % 7) | (uint8_t)(k & 8 ? 0x80 : 0);
        const uint8_t c = (uint8_t)(k * 37 + 11);
        qw[(row0 + 1) * K + k] = (c & 0x7f) == 0x7f ? (uint8_t)(c ^ 1) : c;
    }
    clef_fp8_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, qx, sx);

    /* the quantizer alone */
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * ldx));
    uint8_t *qxd = clef_backend_alloc(gpu, (size_t)(T * K));
    float *sxd = clef_backend_alloc(gpu, sizeof(float) * (size_t)T);
    clef_cuda_fp8_quantize_tokens(gpu, T, K, xd, ldx, qxd, sxd);
    memset(qx_g, 0xAA, (size_t)(T * K));
    POISON(sx_g, T);
    sync_read(qx_g, qxd, (size_t)(T * K));
    sync_read(sx_g, sxd, sizeof(float) * (size_t)T);
    int64_t code_diff = 0, scale_diff = 0;
    for (int64_t i = 0; i < T * K; i++)
        code_diff += qx_g[i] != qx[i];
    for (int64_t t = 0; t < T; t++)
        scale_diff += memcmp(&sx_g[t], &sx[t], sizeof(float)) != 0;
    printf("fp8 quantizer    %-40s codes differing %lld, scales differing %lld\n", shape, (long long)code_diff,
           (long long)scale_diff);
    CHECK_MSG(code_diff == 0 && scale_diff == 0, "fp8 quantizer %s: not bit-identical to the CPU", shape);
    /* the codes as bf16 values (the exact path's input), on the rows as given (16-byte aligned:
     * the vectorized kernel) and one float further on (unaligned: the scalar loop) */
    uint16_t *qv_g = malloc(sizeof(uint16_t) * (size_t)(T * K));
    uint16_t *qvd = clef_backend_alloc(gpu, sizeof(uint16_t) * (size_t)(T * K));
    uint8_t *qx1 = malloc((size_t)(T * K));
    float *sx1 = fmalloc((size_t)T);
    clef_fp8_quantize_tokens(x + 1, ldx, T, K, CLEF_QUANT_ACT_F32, qx1, sx1);
    for (int shift = 0; shift < 2; shift++) {
        const uint8_t *qref = shift ? qx1 : qx;
        const float *sref = shift ? sx1 : sx;
        clef_cuda_fp8_quantize_tokens_bf16(gpu, T, K, xd + shift, ldx, qvd, sxd);
        memset(qv_g, 0xAA, sizeof(uint16_t) * (size_t)(T * K));
        POISON(sx_g, T);
        sync_read(qv_g, qvd, sizeof(uint16_t) * (size_t)(T * K));
        sync_read(sx_g, sxd, sizeof(float) * (size_t)T);
        int64_t vd = 0, sd = 0, cd = 0;
        for (int64_t i = 0; i < T * K; i++) /* e4m3 values are bf16 values: the bf16 bits of fp8 -> f32 */
            vd += qv_g[i] != clef_f32_to_bf16(clef_fp8e4m3_to_f32(qref[i]));
        for (int64_t t = 0; t < T; t++)
            sd += memcmp(&sx_g[t], &sref[t], sizeof(float)) != 0;
        clef_cuda_fp8_quantize_tokens(gpu, T, K, xd + shift, ldx, qxd, sxd);
        memset(qx_g, 0xAA, (size_t)(T * K));
        sync_read(qx_g, qxd, (size_t)(T * K));
        for (int64_t i = 0; i < T * K; i++)
            cd += qx_g[i] != qref[i];
        printf("fp8 quantizer    %-40s rows at +%d floats: codes differing %lld, bf16 values differing %lld, "
               "scales differing %lld\n", shape, shift, (long long)cd, (long long)vd, (long long)sd);
        CHECK_MSG(cd == 0 && vd == 0 && sd == 0, "fp8 quantizer %s (+%d): not bit-identical to the CPU", shape, shift);
    }
    clef_backend_release(gpu, qvd);
    free(qv_g), free(qx1), free(sx1);

    /* the matmul */
    float *swd = to_gpu(gpu, sw, sizeof(float) * (size_t)Ns);
    void *qwd = to_gpu(gpu, qw, (size_t)(Ns * K));
    float *bd = to_gpu(gpu, bias, sizeof(float) * (size_t)N);
    float *yd = to_gpu(gpu, y0, sizeof(float) * (size_t)(T * ldy));
    clef_quant qdev = {.u.fp8 = {.weight_scale = swd}}, qhost = {.u.fp8 = {.weight_scale = sw}};
    clef_matrix stored_g = {.type = CLEF_WTYPE_FP8_E4M3, .rows = Ns, .cols = K, .ld = K, .data = qwd, .quant = &qdev};
    clef_matrix stored_c = {.type = CLEF_WTYPE_FP8_E4M3, .rows = Ns, .cols = K, .ld = K, .data = qw, .quant = &qhost};
    clef_matrix wg = clef_matrix_slice_rows(&stored_g, row0, N), wc = clef_matrix_slice_rows(&stored_c, row0, N);
    float *yg = fmalloc((size_t)(T * ldy)), *yc = fmalloc((size_t)(T * ldy));
    double *ref = malloc(sizeof(double) * (size_t)(T * N)), *mag = malloc(sizeof(double) * (size_t)(T * N));
    float *yref32 = fmalloc((size_t)(T * N));
    clef_fp8_gemm_ref(qw + row0 * K, sw + row0, N, K, qx, sx, T, yref32);
    /* float64 of the W8A8 arithmetic, and the magnitude each element's error is measured by
     * (the 256 code values decoded once: decoding per product made this loop the test's
     * slowest step, ~9 s for 260 x 600 x 2,064 on one core) */
    double code_value[256];
    for (int i = 0; i < 256; i++)
        code_value[i] = (double)clef_fp8e4m3_to_f32((uint8_t)i);
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0, m = 0;
            const uint8_t *a = qx + t * K, *b = qw + (row0 + n) * K;
            for (int64_t k = 0; k < K; k++) {
                double p = code_value[a[k]] * code_value[b[k]];
                acc += p, m += fabs(p);
            }
            double sc = (double)sx[t] * (double)sw[row0 + n];
            ref[t * N + n] = acc * sc + (accumulate ? y0[t * ldy + n] : 0.0) + (with_bias ? bias[n] : 0.0);
            mag[t * N + n] = m * sc;
        }
    memcpy(yc, y0, sizeof(float) * (size_t)(T * ldy));
    clef_matmul(cpu, T, x, ldx, &wc, with_bias ? bias : NULL, yc, ldy, accumulate); /* QDQ */
    /* the exact path with cuBLASLt's GEMM, the fp8 tensor cores (outer-vector, epilogue), then
     * the exact path on each wgmma kernel (scaling fused) */
    /* then the exact path on cuBLASLt with the weight widened and multiplied in slices of 64
     * output features (a slice budget of 64 x K bf16: the last slice shorter where N is not a
     * multiple of 64) and rows in chunks of K / 2 (T > K / 2: several chunks per slice) */
    /* then our fp8 wgmma kernel with fp32 promotion every 128 and every 32 of K */
    /* then the exact path on our kernels that widen the weight in registers (256-row tiles with
     * 2, 1, 3 k16 steps in flight or in clusters of two, 128-row tiles), then the backend's
     * default exact GEMM (tiles per layout: the row-alone check below covers what every model
     * runs), then (argument "fp8-t256" only: not yet run on a GPU) 128 x 256-token tiles */
    /* then the fp8 tensor cores with cuBLASLt's fast accumulation (outer-vector, epilogue) */
    enum { SLICED = 3 + CLEF_CUDA_WGMMA_LAST, PROMO = SLICED + 1, FAST = PROMO + 2, MIXED = FAST + 2,
           N_MODES = MIXED + 8 };
    static const char *const mode_names[N_MODES] = {
        "exact",      "outer",      "epilogue",   "exact-w1",    "exact-w2",    "exact-w3",
        "exact-w4",   "exact-sl64", "promo128",   "promo32",     "fast",        "fast-epi",
        "exact-mx",   "exact-mx128", "exact-mxd1", "exact-mxd3", "exact-mxmc",  "exact-dflt",
        "exact-t256", "exact-t256mc"};
    static const int mixed_variants[N_MODES - MIXED] = {
        CLEF_CUDA_WGMMA_FP8_MIXED,    CLEF_CUDA_WGMMA_FP8_MIXED_128, CLEF_CUDA_WGMMA_FP8_MIXED_D1,
        CLEF_CUDA_WGMMA_FP8_MIXED_D3, CLEF_CUDA_WGMMA_FP8_MIXED_MC,  -1 /* the default */,
        CLEF_CUDA_WGMMA_FP8_MIXED_T256, CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC};
    const int exact_default = clef_backend_cuda_fp8_exact_wgmma(gpu);
    /* Fast accumulation keeps the whole sum in the tensor cores: the promoted paths' bound per
     * 128 of K (2^-6 of sum |qx qw|, above), once per 128-run of K with nothing reset in
     * between; in L2, one ~14-bit rounding of the running sum per k32 step that may lean one
     * way (DeepSeek-V3 reports ~2% worst relative error at K = 4,096), so (K / 32) 2^-13,
     * never below the promoted paths' 5e-3. An indexing or scaling bug errs by O(1). */
    const double fast_runs = (double)((K + 127) / 128), fast_l2 = fmax(5e-3, (double)K / 32 * ldexp(1.0, -13));
    for (int mode = 0; mode < (test_t256 ? N_MODES : N_MODES - 2); mode++) {
        const int promoted = mode >= PROMO && mode < FAST, fast = mode == FAST || mode == FAST + 1;
        const int exact = mode == 0 || (mode >= 3 && !promoted && !fast);
        const int mixed = mode >= MIXED ? mixed_variants[mode - MIXED] : 0;
        clef_backend_cuda_set_fp8_tensor_cores(gpu, mode == 1 || mode == 2 ? CLEF_CUDA_FP8_TC_PROMOTED
                                                    : fast                 ? CLEF_CUDA_FP8_TC_FAST
                                                                           : CLEF_CUDA_FP8_TC_OFF);
        clef_backend_cuda_set_fp8_epilogue(gpu, mode == 2 || mode == FAST + 1);
        clef_backend_cuda_set_fp8_slice_bytes(gpu, mode == SLICED ? 64 * 2 * (size_t)K : 0);
        clef_backend_cuda_set_fp8_exact_wgmma(gpu, mixed < 0                             ? exact_default
                                                   : mode >= MIXED                       ? mixed
                                                   : exact && mode >= 3 && mode < SLICED ? mode - 2
                                                                                        : CLEF_CUDA_WGMMA_OFF);
        clef_backend_cuda_set_fp8_promoted(gpu, mode == PROMO       ? CLEF_CUDA_FP8_PROMOTE_128
                                                : mode == PROMO + 1 ? CLEF_CUDA_FP8_PROMOTE_32
                                                                    : CLEF_CUDA_FP8_PROMOTE_OFF);
        clef_backend_write(gpu, yd, y0, sizeof(float) * (size_t)(T * ldy));
        clef_matmul(gpu, T, xd, ldx, &wg, with_bias ? bd : NULL, yd, ldy, accumulate);
        POISON(yg, T * ldy);
        sync_read(yg, yd, sizeof(float) * (size_t)(T * ldy));
        double worst = 0, num = 0, den = 0;
        int64_t bad = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++) {
                const double r = ref[t * N + n], m = mag[t * N + n];
                const double err = fabs((double)yg[t * ldy + n] - r);
                const double bound = (exact  ? (double)K * ldexp(m, -23)
                                      : fast ? fast_runs * ldexp(m, -6)
                                             : ldexp(m, -6)) + ldexp(fabs(r) + (accumulate ? fabs(y0[t * ldy + n]) : 0) +
                                                          (with_bias ? fabs(bias[n]) : 0), -21);
                bad += !(err <= bound);
                if (m > 0 && err / m > worst)
                    worst = err / m;
                /* the product part against the CPU's fp32 W8A8 */
                double prod = (double)yg[t * ldy + n] - (accumulate ? y0[t * ldy + n] : 0) - (with_bias ? bias[n] : 0);
                num += (prod - yref32[t * N + n]) * (prod - yref32[t * N + n]);
                den += (double)yref32[t * N + n] * yref32[t * N + n];
            }
        double e64 = rel_l2_vs64(yg, ldy, ref, T, N);
        const double l2_bound = exact ? 1e-5 : fast ? fast_l2 : 5e-3;
        printf("fp8 matmul       %-40s %-9s vs f64 rel L2 %.3g (<= %.1e), worst |err|/sum|p| %.3g (<= %s), "
               "vs CPU W8A8 fp32 %.3g, vs CPU QDQ %.3g [paths so far: %s]\n",
               shape, mode_names[mode], e64, l2_bound, worst, exact ? "K 2^-23" : fast ? "K/128 2^-6" : "2^-6",
               den > 0 ? sqrt(num / den) : sqrt(num), rel_l2_ld(yg, yc, ldy, T, N), clef_cuda_fp8_gemm_path(gpu));
        CHECK_MSG(e64 <= l2_bound, "fp8 matmul %s %s: relative L2 %.3g vs float64", shape, mode_names[mode], e64);
        CHECK_MSG(bad == 0, "fp8 matmul %s %s: %lld elements past the per-element bound", shape, mode_names[mode],
                  (long long)bad);

        /* the last row alone: the same bits as in the batch */
        if (T > 1) {
            /* the same leading dimension and alignment: the same cached plan */
            float *y1d = to_gpu(gpu, y0 + (T - 1) * ldy, sizeof(float) * (size_t)ldy);
            float *y1 = fmalloc((size_t)N);
            clef_matmul(gpu, 1, xd + (T - 1) * ldx, ldx, &wg, with_bias ? bd : NULL, y1d, ldy, accumulate);
            POISON(y1, N);
            sync_read(y1, y1d, sizeof(float) * (size_t)N);
            CHECK_MSG(memcmp(y1, yg + (T - 1) * ldy, sizeof(float) * (size_t)N) == 0,
                      "fp8 matmul %s: the last row alone differs from the same row in the batch", shape);
            clef_backend_release(gpu, y1d);
            free(y1);
        }
    }
    clef_backend_cuda_set_fp8_epilogue(gpu, 0);
    clef_backend_cuda_set_fp8_tensor_cores(gpu, 0);
    clef_backend_cuda_set_fp8_slice_bytes(gpu, 0);
    clef_backend_cuda_set_fp8_exact_wgmma(gpu, exact_default);
    clef_backend_cuda_set_fp8_promoted(gpu, CLEF_CUDA_FP8_PROMOTE_OFF);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, qxd), clef_backend_release(gpu, sxd);
    clef_backend_release(gpu, swd), clef_backend_release(gpu, qwd), clef_backend_release(gpu, bd);
    clef_backend_release(gpu, yd);
    free(x), free(y0), free(bias), free(wb), free(qw), free(qx), free(qx_g), free(sw), free(sx), free(sx_g);
    free(yg), free(ref), free(mag), free(yref32), free(yc);
}

/* ---- INT8 ConvRot --------------------------------------------------------------------------- */

static int64_t count_diff_i8(const int8_t *a, const int8_t *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

static int64_t count_diff_f32(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

static void test_int8(int64_t T, int64_t N, int64_t K, int64_t row0, int with_bias, int accumulate) {
    const int64_t Ns = N + row0, ldx = K + 5, ldy = N + 7;
    char shape[96];
    snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld row0=%lld%s%s", (long long)T, (long long)N, (long long)K,
             (long long)row0, with_bias ? " bias" : "", accumulate ? " acc" : "");
    float *x = make_x(T, ldx), *y0 = fmalloc((size_t)(T * ldy)), *bias = fmalloc((size_t)N);
    fill_normal(y0, (size_t)(T * ldy), 1.0f);
    fill_normal(bias, (size_t)N, 1.0f);
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)(Ns * K));
    for (int64_t i = 0; i < Ns * K; i++)
        wb[i] = clef_f32_to_bf16(rnd_normal() * 0.05f);
    int8_t *qw = malloc((size_t)(Ns * K)), *qf = malloc((size_t)(T * K)), *qe = malloc((size_t)(T * K));
    int8_t *qg = malloc((size_t)(T * K));
    float *sw = fmalloc((size_t)Ns), *sf = fmalloc((size_t)T), *se = fmalloc((size_t)T), *sg = fmalloc((size_t)T);
    float *rot = fmalloc((size_t)(2 * K));
    clef_convrot_quantize_weight(wb, Ns, K, qw, sw, rot);
    clef_convrot_quantize_tokens_fast(x, ldx, T, K, qf, sf, rot);
    clef_convrot_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, qe, se, rot);

    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * ldx));
    int8_t *qxd = clef_backend_alloc(gpu, (size_t)(T * K));
    float *sxd = clef_backend_alloc(gpu, sizeof(float) * (size_t)T);
    for (int exact = 0; exact < 2; exact++) {
        clef_cuda_convrot_quantize_tokens(gpu, T, K, xd, ldx, 256, NULL, exact, qxd, sxd);
        memset(qg, 0x55, (size_t)(T * K));
        POISON(sg, T);
        sync_read(qg, qxd, (size_t)(T * K));
        sync_read(sg, sxd, sizeof(float) * (size_t)T);
        int64_t dc = count_diff_i8(qg, exact ? qe : qf, T * K), ds = count_diff_f32(sg, exact ? se : sf, T);
        printf("int8 quantizer   %-40s %-9s codes differing %lld, scales differing %lld\n", shape,
               exact ? "exact" : "butterfly", (long long)dc, (long long)ds);
        CHECK_MSG(dc == 0 && ds == 0, "int8 quantizer (%s) %s: not bit-identical to the CPU",
                  exact ? "exact" : "butterfly", shape);
    }
    { /* the same rows packed (ldx = K, 16-byte aligned): the kernel's vectorized loads and stores */
        float *xp = fmalloc((size_t)(T * K));
        for (int64_t t = 0; t < T; t++)
            memcpy(xp + t * K, x + t * ldx, sizeof(float) * (size_t)K);
        float *xpd = to_gpu(gpu, xp, sizeof(float) * (size_t)(T * K));
        for (int exact = 0; exact < 2; exact++) {
            clef_cuda_convrot_quantize_tokens(gpu, T, K, xpd, K, 256, NULL, exact, qxd, sxd);
            memset(qg, 0x55, (size_t)(T * K));
            POISON(sg, T);
            sync_read(qg, qxd, (size_t)(T * K));
            sync_read(sg, sxd, sizeof(float) * (size_t)T);
            int64_t dc = count_diff_i8(qg, exact ? qe : qf, T * K), ds = count_diff_f32(sg, exact ? se : sf, T);
            printf("int8 quantizer   %-40s %-9s packed rows: codes differing %lld, scales differing %lld\n", shape,
                   exact ? "exact" : "butterfly", (long long)dc, (long long)ds);
            CHECK_MSG(dc == 0 && ds == 0, "int8 quantizer (%s, packed rows) %s: not bit-identical to the CPU",
                      exact ? "exact" : "butterfly", shape);
        }
        clef_backend_release(gpu, xpd);
        free(xp);
    }
    printf("int8 quantizer   %-40s butterfly vs torch order on the CPU: %lld of %lld codes differ (by one step)\n",
           shape, (long long)count_diff_i8(qf, qe, T * K), (long long)(T * K));

    /* int32 accumulations: exact */
    void *qwd = to_gpu(gpu, qw, (size_t)(Ns * K));
    int8_t *qfd = to_gpu(gpu, qf, (size_t)(T * K));
    const int64_t ldacc = (N + 3) / 4 * 4;
    int32_t *accd = clef_backend_alloc(gpu, sizeof(int32_t) * (size_t)(T * ldacc));
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)(T * ldacc));
    clef_cuda_int8_gemm_i32(gpu, T, N, K, qfd, (const int8_t *)qwd + row0 * K, accd, ldacc);
    memset(acc, 0x7f, sizeof(int32_t) * (size_t)(T * ldacc));
    sync_read(acc, accd, sizeof(int32_t) * (size_t)(T * ldacc));
    int64_t acc_diff = 0;
    int32_t *cpu_acc = malloc(sizeof(int32_t) * (size_t)(T * N)); /* the CPU's sums of the butterfly codes */
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (int32_t)qf[t * K + k] * (int32_t)qw[(row0 + n) * K + k];
            cpu_acc[t * N + n] = s;
            acc_diff += acc[t * ldacc + n] != s;
        }
    printf("int8 gemm int32  %-40s accumulations differing from the CPU's: %lld\n", shape, (long long)acc_diff);
    CHECK_MSG(acc_diff == 0, "int8 gemm %s: int32 accumulations differ from the CPU's", shape);
    for (int v = CLEF_CUDA_WGMMA_128; v <= CLEF_CUDA_WGMMA_INT8_LAST; v++) { /* each wgmma kernel's sums (16 | K here) */
        CHECK_EQ_INT(clef_cuda_int8_gemm_i32_wgmma(gpu, v, T, N, K, qfd, (const int8_t *)qwd + row0 * K, accd,
                                                   ldacc), CLEF_OK);
        memset(acc, 0x7f, sizeof(int32_t) * (size_t)(T * ldacc));
        sync_read(acc, accd, sizeof(int32_t) * (size_t)(T * ldacc));
        int64_t wg_diff = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++)
                wg_diff += acc[t * ldacc + n] != cpu_acc[t * N + n];
        printf("int8 gemm int32  %-40s wgmma variant %d: accumulations differing from the CPU's: %lld\n", shape, v,
               (long long)wg_diff);
        CHECK_MSG(wg_diff == 0, "int8 wgmma gemm (variant %d) %s: int32 accumulations differ from the CPU's", v, shape);
    }

    /* the whole matmul, both rotations */
    float *swd = to_gpu(gpu, sw, sizeof(float) * (size_t)Ns), *bd = to_gpu(gpu, bias, sizeof(float) * (size_t)N);
    float *yd = clef_backend_alloc(gpu, sizeof(float) * (size_t)(T * ldy));
    clef_quant qdev = {.u.int8_convrot = {.weight_scale = swd, .rotation_group = 256}};
    clef_quant qhost = {.u.int8_convrot = {.weight_scale = sw, .rotation_group = 256}};
    clef_matrix stored_g = {.type = CLEF_WTYPE_INT8_CONVROT, .rows = Ns, .cols = K, .ld = K, .data = qwd, .quant = &qdev};
    clef_matrix stored_c = {.type = CLEF_WTYPE_INT8_CONVROT, .rows = Ns, .cols = K, .ld = K, .data = qw, .quant = &qhost};
    clef_matrix wg = clef_matrix_slice_rows(&stored_g, row0, N), wc = clef_matrix_slice_rows(&stored_c, row0, N);
    float *yg = fmalloc((size_t)(T * ldy)), *yc = fmalloc((size_t)(T * ldy));
    double *ref = malloc(sizeof(double) * (size_t)(T * N));
    /* exact and butterfly rotations with cuBLASLt's GEMM, then the butterfly on each wgmma
     * kernel (fused scaling): the same bits as the CPU each time */
    for (int r = 0; r < 2 + CLEF_CUDA_WGMMA_INT8_LAST; r++) { /* r >= 1 reuse the butterfly's ref */
        const int exact = r == 0, wgmma = r >= 2 ? r - 1 : CLEF_CUDA_WGMMA_OFF;
        char mode[32];
        snprintf(mode, sizeof mode, "%s%s", exact ? "exact" : "butterfly", wgmma ? " wgmma" : "");
        if (wgmma)
            snprintf(mode + strlen(mode), sizeof mode - strlen(mode), "%d", wgmma);
        clef_backend_cuda_set_convrot_exact(gpu, exact);
        clef_backend_cuda_set_int8_wgmma(gpu, wgmma);
        clef_backend_write(gpu, yd, y0, sizeof(float) * (size_t)(T * ldy));
        clef_matmul(gpu, T, xd, ldx, &wg, with_bias ? bd : NULL, yd, ldy, accumulate);
        POISON(yg, T * ldy);
        sync_read(yg, yd, sizeof(float) * (size_t)(T * ldy));
        memcpy(yc, y0, sizeof(float) * (size_t)(T * ldy));
        if (exact) /* the CPU backend's own matmul (torch-order rotation) */
            clef_matmul(cpu, T, x, ldx, &wc, with_bias ? bias : NULL, yc, ldy, accumulate);
        else
            clef_int8_matmul_rows(qw + row0 * K, sw + row0, K, 0, N, T, qf, sf, with_bias ? bias : NULL, yc, ldy,
                                  accumulate);
        const float *s = exact ? se : sf;
        if (r < 2) /* the float64 reference of this rotation's codes (the butterfly's sums are cpu_acc) */
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++) {
                    int64_t a = 0;
                    if (exact)
                        for (int64_t k = 0; k < K; k++)
                            a += (int64_t)qe[t * K + k] * qw[(row0 + n) * K + k];
                    else
                        a = cpu_acc[t * N + n];
                    ref[t * N + n] = (double)a * (double)s[t] * (double)sw[row0 + n] +
                                     (accumulate ? y0[t * ldy + n] : 0.0) + (with_bias ? bias[n] : 0.0);
                }
        int64_t differ = 0;
        for (int64_t t = 0; t < T; t++)
            differ += count_diff_f32(yg + t * ldy, yc + t * ldy, N);
        double e64 = rel_l2_vs64(yg, ldy, ref, T, N);
        printf("int8 matmul      %-40s %-18s elements differing from the CPU %lld, vs f64 rel L2 %.3g (<= 1e-6)\n",
               shape, mode, (long long)differ, e64);
        CHECK_MSG(differ == 0, "int8 matmul (%s) %s: not bit-identical to the CPU", mode, shape);
        CHECK_MSG(e64 <= 1e-6, "int8 matmul (%s) %s: relative L2 %.3g vs float64", mode, shape, e64);
    }
    clef_backend_cuda_set_convrot_exact(gpu, 0);
    clef_backend_cuda_set_int8_wgmma(gpu, 0);

    /* a static input scale: rotate (butterfly), divide by it, round, clamp */
    const float static_scale = 0.02f;
    float *ssd = to_gpu(gpu, &static_scale, sizeof(float));
    clef_cuda_convrot_quantize_tokens(gpu, T, K, xd, ldx, 256, ssd, 0, qxd, sxd);
    sync_read(qg, qxd, (size_t)(T * K));
    int64_t ds = 0;
    for (int64_t t = 0; t < T; t++) {
        memcpy(rot, x + t * ldx, sizeof(float) * (size_t)K);
        clef_fht256_groups_f32(rot, K);
        for (int64_t k = 0; k < K; k++)
            ds += qg[t * K + k] != (int8_t)fminf(fmaxf(rintf(rot[k] / static_scale), -128.0f), 127.0f);
    }
    printf("int8 quantizer   %-40s static input scale: codes differing %lld\n", shape, (long long)ds);
    CHECK_MSG(ds == 0, "int8 quantizer with a static scale %s: codes differ", shape);

    clef_backend_release(gpu, xd), clef_backend_release(gpu, qxd), clef_backend_release(gpu, sxd);
    clef_backend_release(gpu, qwd), clef_backend_release(gpu, qfd), clef_backend_release(gpu, accd);
    clef_backend_release(gpu, swd), clef_backend_release(gpu, bd), clef_backend_release(gpu, yd);
    clef_backend_release(gpu, ssd);
    free(x), free(y0), free(bias), free(wb), free(qw), free(qf), free(qe), free(qg), free(sw), free(sf), free(se);
    free(sg), free(rot), free(acc), free(cpu_acc), free(yg), free(yc), free(ref);
}

/* The wgmma INT8 GEMM at the models' shapes (too large for a CPU reference of every element):
 * its int32 sums, both tile widths, equal cuBLASLt's element for element, and rows 0, T / 2
 * and T - 1 equal the CPU's integer dot products; the whole matmul (fused scaling, bias,
 * accumulate, a padded ldy) equals the cuBLASLt path's bits (that path equals the CPU's in
 * test_int8). Codes: random int8 in [-127, 127] with the extremes -128 / 127 sprinkled in. */
static void test_int8_wgmma_large(int64_t T, int64_t N, int64_t K) {
    const int64_t ldacc = (N + 3) / 4 * 4, ldy = N + 2;
    char shape[96];
    snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld", (long long)T, (long long)N, (long long)K);
    int8_t *qx = malloc((size_t)(T * K)), *qw = malloc((size_t)(N * K));
    for (int64_t i = 0; i < T * K; i++)
        qx[i] = (int8_t)((int)(rnd_uniform() * 255) - 127);
    for (int64_t i = 0; i < N * K; i++)
        qw[i] = (int8_t)((int)(rnd_uniform() * 255) - 127);
    for (int64_t i = 0; i < 64; i++) { /* the extreme codes, where an int32 sum can grow largest */
        qx[(int64_t)(rnd_uniform() * (double)(T * K))] = -128;
        qw[(int64_t)(rnd_uniform() * (double)(N * K))] = 127;
    }
    int8_t *qxd = to_gpu(gpu, qx, (size_t)(T * K)), *qwd = to_gpu(gpu, qw, (size_t)(N * K));
    int32_t *accd = clef_backend_alloc(gpu, sizeof(int32_t) * (size_t)(T * ldacc));
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)(T * ldacc)), *acc = malloc(sizeof(int32_t) * (size_t)(T * ldacc));
    clef_cuda_int8_gemm_i32(gpu, T, N, K, qxd, qwd, accd, ldacc);
    sync_read(ref, accd, sizeof(int32_t) * (size_t)(T * ldacc));
    const int64_t rows[3] = {0, T / 2, T - 1};
    int32_t *cpu_rows = malloc(sizeof(int32_t) * (size_t)(3 * N));
    int64_t cpu_diff = 0;
    for (int r = 0; r < 3; r++)
        for (int64_t n = 0; n < N; n++) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (int32_t)qx[rows[r] * K + k] * (int32_t)qw[n * K + k];
            cpu_rows[r * N + n] = s;
            cpu_diff += ref[rows[r] * ldacc + n] != s;
        }
    printf("int8 wgmma       %-40s cuBLASLt's sums vs the CPU's (3 rows): %lld differing\n", shape, (long long)cpu_diff);
    CHECK_MSG(cpu_diff == 0, "int8 gemm %s: cuBLASLt's sums differ from the CPU's", shape);
    for (int tile = CLEF_CUDA_WGMMA_128; tile <= CLEF_CUDA_WGMMA_INT8_LAST; tile++) { /* variants */
        memset(acc, 0x7f, sizeof(int32_t) * (size_t)(T * ldacc));
        clef_backend_write(gpu, accd, acc, sizeof(int32_t) * (size_t)(T * ldacc));
        CHECK_EQ_INT(clef_cuda_int8_gemm_i32_wgmma(gpu, tile, T, N, K, qxd, qwd, accd, ldacc), CLEF_OK);
        sync_read(acc, accd, sizeof(int32_t) * (size_t)(T * ldacc));
        int64_t d = 0, d_cpu = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++)
                d += acc[t * ldacc + n] != ref[t * ldacc + n];
        for (int r = 0; r < 3; r++)
            for (int64_t n = 0; n < N; n++)
                d_cpu += acc[rows[r] * ldacc + n] != cpu_rows[r * N + n];
        printf("int8 wgmma       %-40s variant %d: sums differing from cuBLASLt's %lld of %lld, from the CPU's (3 rows) %lld\n",
               shape, tile, (long long)d, (long long)(T * N), (long long)d_cpu);
        CHECK_MSG(d == 0 && d_cpu == 0, "int8 wgmma gemm (variant %d) %s: sums differ", tile, shape);
    }
    /* the whole matmul on device-quantized activations: cuBLASLt path vs wgmma, same bits */
    float *x = fmalloc((size_t)(T * K)), *y0 = fmalloc((size_t)(T * ldy)), *sw = fmalloc((size_t)N);
    float *bias = fmalloc((size_t)N);
    fill_normal(x, (size_t)(T * K), 1.0f);
    fill_normal(y0, (size_t)(T * ldy), 1.0f);
    fill_normal(bias, (size_t)N, 1.0f);
    for (int64_t n = 0; n < N; n++)
        sw[n] = 1e-4f * (1.0f + (float)rnd_uniform());
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * K)), *swd = to_gpu(gpu, sw, sizeof(float) * (size_t)N);
    float *bd = to_gpu(gpu, bias, sizeof(float) * (size_t)N);
    float *yd = clef_backend_alloc(gpu, sizeof(float) * (size_t)(T * ldy));
    float *yl = fmalloc((size_t)(T * ldy)), *yw = fmalloc((size_t)(T * ldy));
    clef_quant qdev = {.u.int8_convrot = {.weight_scale = swd, .rotation_group = 256}};
    clef_matrix w = {.type = CLEF_WTYPE_INT8_CONVROT, .rows = N, .cols = K, .ld = K, .data = qwd, .quant = &qdev};
    for (int acc_mode = 0; acc_mode < 2; acc_mode++)
        for (int v = CLEF_CUDA_WGMMA_OFF; v <= CLEF_CUDA_WGMMA_INT8_LAST + 1; v++) { /* + 1: the default, auto */
            const int tile = v <= CLEF_CUDA_WGMMA_INT8_LAST ? v : CLEF_CUDA_WGMMA_AUTO;
            clef_backend_cuda_set_int8_wgmma(gpu, tile);
            clef_backend_write(gpu, yd, y0, sizeof(float) * (size_t)(T * ldy));
            clef_matmul(gpu, T, xd, K, &w, acc_mode ? bd : NULL, yd, ldy, acc_mode);
            float *dst = tile ? yw : yl;
            POISON(dst, T * ldy);
            sync_read(dst, yd, sizeof(float) * (size_t)(T * ldy));
            if (!tile)
                continue;
            int64_t d = 0;
            for (int64_t t = 0; t < T; t++)
                d += count_diff_f32(yw + t * ldy, yl + t * ldy, N);
            printf("int8 wgmma       %-40s matmul variant %d%s: elements differing from the cuBLASLt path %lld\n", shape,
                   tile, acc_mode ? " bias acc" : "", (long long)d);
            CHECK_MSG(d == 0, "int8 wgmma matmul (variant %d) %s: differs from the cuBLASLt path", tile, shape);
        }
    clef_backend_cuda_set_int8_wgmma(gpu, 0);
    clef_backend_release(gpu, qxd), clef_backend_release(gpu, qwd), clef_backend_release(gpu, accd);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, swd), clef_backend_release(gpu, bd);
    clef_backend_release(gpu, yd);
    free(qx), free(qw), free(ref), free(cpu_rows), free(acc), free(x), free(y0), free(sw), free(bias), free(yl), free(yw);
}

/* ---- NF4 ------------------------------------------------------------------------------------ */

static void test_nf4(int64_t T, int64_t N, int64_t K, int64_t row0, int double_quant, int with_bias, int accumulate) {
    const int64_t Ns = N + row0, n_el = Ns * K, n_blocks = (n_el + 63) / 64, n_nested = (n_blocks + 255) / 256;
    const int64_t ldx = K + 2, ldy = N + 1;
    char shape[96];
    snprintf(shape, sizeof shape, "T=%lld N=%lld K=%lld row0=%lld %s%s%s", (long long)T, (long long)N, (long long)K,
             (long long)row0, double_quant ? "dq" : "plain", with_bias ? " bias" : "", accumulate ? " acc" : "");
    uint8_t *packed = malloc((size_t)((n_el + 1) / 2)), *absmax_q = malloc((size_t)n_blocks);
    float *absmax_f = fmalloc((size_t)n_blocks), *nested = fmalloc((size_t)n_nested), nested_code[256];
    for (int64_t i = 0; i < (n_el + 1) / 2; i++)
        packed[i] = (uint8_t)(rnd_uniform() * 256);
    for (int64_t b = 0; b < n_blocks; b++) {
        absmax_q[b] = (uint8_t)(rnd_uniform() * 256);
        absmax_f[b] = 0.01f + 0.1f * (float)rnd_uniform();
    }
    for (int64_t b = 0; b < n_nested; b++)
        nested[b] = 0.02f + 0.05f * (float)rnd_uniform();
    for (int i = 0; i < 256; i++) /* a signed map, as bitsandbytes' dynamic one */
        nested_code[i] = (float)(2.0 * rnd_uniform() - 1.0);
    const float offset = 0.0213f;
    clef_nf4_desc desc = {.n_elements = n_el, .blocksize = 64, .quant_map = clef_nf4_table,
                          .absmax_code = double_quant ? absmax_q : NULL, .nested_quant_map = nested_code,
                          .nested_absmax = nested, .nested_blocksize = 256, .nested_offset = offset,
                          .absmax = absmax_f};
    void *pd = to_gpu(gpu, packed, (size_t)((n_el + 1) / 2));
    void *aqd = to_gpu(gpu, absmax_q, (size_t)n_blocks);
    float *afd = to_gpu(gpu, absmax_f, sizeof(float) * (size_t)n_blocks);
    float *nd = to_gpu(gpu, nested, sizeof(float) * (size_t)n_nested);
    float *ncd = to_gpu(gpu, nested_code, sizeof nested_code);
    float *cd = to_gpu(gpu, clef_nf4_table, sizeof(float) * 16);
    clef_quant qdev = {.u.nf4 = {.block = 64, .absmax_q = double_quant ? aqd : NULL, .absmax_f32 = afd,
                                 .nested_absmax = nd, .nested_block = 256, .nested_offset = offset, .code = cd,
                                 .nested_code = ncd}};
    clef_quant qhost = {.u.nf4 = {.block = 64, .absmax_q = double_quant ? absmax_q : NULL, .absmax_f32 = absmax_f,
                                  .nested_absmax = nested, .nested_block = 256, .nested_offset = offset,
                                  .code = clef_nf4_table, .nested_code = nested_code}};
    /* NF4 row r of the stored tensor starts at byte r * K / 2 (K even) */
    clef_matrix stored_g = {.type = CLEF_WTYPE_NF4, .rows = Ns, .cols = K, .ld = K, .data = pd, .quant = &qdev};
    clef_matrix stored_c = {.type = CLEF_WTYPE_NF4, .rows = Ns, .cols = K, .ld = K, .data = packed, .quant = &qhost};
    clef_matrix wg = clef_matrix_slice_rows(&stored_g, row0, N), wc = clef_matrix_slice_rows(&stored_c, row0, N);

    /* the dequantized weights, by run15's element-wise kernel and by the vectorized one
     * (taken where the slice's first element is a multiple of 8 and its codes 4-byte aligned) */
    const int mode0 = clef_backend_cuda_nf4_gemm(gpu);
    uint16_t *wref = malloc(sizeof(uint16_t) * (size_t)(N * K)), *wgot = malloc(sizeof(uint16_t) * (size_t)(N * K));
    clef_nf4_dequant_bf16(&desc, packed, row0 * K, N * K, wref);
    uint16_t *wdd = clef_backend_alloc(gpu, sizeof(uint16_t) * (size_t)(N * K));
    for (int m = 0; m < 2; m++) {
        clef_backend_cuda_set_nf4_gemm(gpu, m ? CLEF_CUDA_NF4_DEQUANT : CLEF_CUDA_NF4_RUN15);
        clef_cuda_nf4_dequant_bf16(gpu, &wg, wdd);
        memset(wgot, 0xff, sizeof(uint16_t) * (size_t)(N * K));
        sync_read(wgot, wdd, sizeof(uint16_t) * (size_t)(N * K));
        int64_t wdiff = 0;
        for (int64_t i = 0; i < N * K; i++)
            wdiff += wgot[i] != wref[i];
        printf("nf4 dequant      %-40s %-7s bf16 weights differing %lld of %lld\n", shape, m ? "vector" : "run15",
               (long long)wdiff, (long long)(N * K));
        CHECK_MSG(wdiff == 0, "nf4 dequant (%s kernel) %s: not bit-identical to clef_nf4_dequant_bf16",
                  m ? "vector" : "run15", shape);
    }

    /* the matmul: float64 of bf16(x) . W_bf16, and |x . w| per element for the bound */
    float *x = make_x(T, ldx), *y0 = fmalloc((size_t)(T * ldy)), *bias = fmalloc((size_t)N);
    fill_normal(y0, (size_t)(T * ldy), 1.0f);
    fill_normal(bias, (size_t)N, 1.0f);
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * ldx)), *bd = to_gpu(gpu, bias, sizeof(float) * (size_t)N);
    float *yd = clef_backend_alloc(gpu, sizeof(float) * (size_t)(T * ldy));
    float *ymodes[3], *yc = fmalloc((size_t)(T * ldy)), *y1 = fmalloc((size_t)ldy);
    double *ref = malloc(sizeof(double) * (size_t)(T * N)), *mag = malloc(sizeof(double) * (size_t)(T * N));
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0, m = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)clef_bf16_to_f32(clef_f32_to_bf16(x[t * ldx + k])) * (double)clef_bf16_to_f32(wref[n * K + k]);
                acc += p, m += fabs(p);
            }
            ref[t * N + n] = acc + (accumulate ? y0[t * ldy + n] : 0.0) + (with_bias ? bias[n] : 0.0);
            mag[t * N + n] = m;
        }
    memcpy(yc, y0, sizeof(float) * (size_t)(T * ldy));
    clef_matmul(cpu, T, x, ldx, &wc, with_bias ? bias : NULL, yc, ldy, accumulate);
    static const int modes[3] = {CLEF_CUDA_NF4_RUN15, CLEF_CUDA_NF4_DEQUANT, CLEF_CUDA_NF4_FUSED};
    static const char *const mode_name[3] = {"run15", "dequant", "fused"};
    const int fused_runs = clef_cuda_nf4_fused_layout(&wg);
    CHECK_MSG(fused_runs, "nf4 %s: the fused kernel refuses this layout", shape); /* NF4 rows are whole blocks */
    for (int mi = 0; mi < 3; mi++) {
        clef_backend_cuda_set_nf4_gemm(gpu, modes[mi]);
        float *yg = ymodes[mi] = fmalloc((size_t)(T * ldy));
        CHECK_EQ_INT(clef_backend_write(gpu, yd, y0, sizeof(float) * (size_t)(T * ldy)), CLEF_OK);
        clef_matmul(gpu, T, xd, ldx, &wg, with_bias ? bd : NULL, yd, ldy, accumulate);
        POISON(yg, T * ldy);
        sync_read(yg, yd, sizeof(float) * (size_t)(T * ldy));
        /* Per element: K fp32 additions of exact bf16 x bf16 products, each off by at most 2^-23
         * of a partial sum bounded by sum_k |x w| (generous for the tensor cores' k16 groups),
         * then the accumulate and bias additions: 2^-21 (|y| + |y0| + |bias|). */
        int64_t over = 0;
        double worst = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++) {
                const double r = ref[t * N + n], err = fabs((double)yg[t * ldy + n] - r);
                const double bound = (double)K * ldexp(mag[t * N + n], -23) +
                                     ldexp(fabs(r) + (accumulate ? fabs(y0[t * ldy + n]) : 0.0) +
                                               (with_bias ? fabs(bias[n]) : 0.0), -21) + 1e-30;
                over += !(err <= bound);
                worst = err / bound > worst ? err / bound : worst;
            }
        /* relative L2: 1e-5 (the BF16 path's bound, set at K <= 4096) x sqrt(K / 4096) beyond:
         * the random-sign rounding errors of an fp32 sum grow as sqrt(K) (at K = 17,408
         * cuBLASLt and the fused kernel both measured 1.71e-5, H200 run16) */
        const double l2_bound = 1e-5 * (K > 4096 ? sqrt((double)K / 4096.0) : 1.0);
        double e64 = rel_l2_vs64(yg, ldy, ref, T, N), ecpu = rel_l2_ld(yg, yc, ldy, T, N);
        printf("nf4 matmul       %-40s %-7s vs f64 of bf16 operands rel L2 %.3g (<= %.3g), worst |err| / bound %.3g, "
               "vs CPU backend %.3g (<= 1e-2)\n",
               shape, mi == 2 && !fused_runs ? "fused (dequant: layout)" : mode_name[mi], e64, l2_bound, worst, ecpu);
        CHECK_MSG(e64 <= l2_bound, "nf4 matmul (%s) %s: relative L2 %.3g vs float64", mode_name[mi], shape, e64);
        CHECK_MSG(over == 0, "nf4 matmul (%s) %s: %lld elements over the per-element bound", mode_name[mi], shape,
                  (long long)over);
        CHECK_MSG(ecpu <= 1e-2, "nf4 matmul (%s) %s: relative L2 %.3g vs the CPU backend", mode_name[mi], shape, ecpu);

        /* A row's bits do not depend on the batch: rows 0, T / 2, T - 1 alone, and rows 1..T-1
         * as a batch of their own (every row one place earlier in its tile). */
        int64_t alone_diff = 0, shift_diff = 0;
        const int64_t probe[3] = {0, T / 2, T - 1};
        for (int pi = 0; pi < 3; pi++) {
            const int64_t r = probe[pi];
            CHECK_EQ_INT(clef_backend_write(gpu, yd, y0 + r * ldy, sizeof(float) * (size_t)ldy), CLEF_OK);
            clef_matmul(gpu, 1, xd + r * ldx, ldx, &wg, with_bias ? bd : NULL, yd, ldy, accumulate);
            POISON(y1, ldy);
            sync_read(y1, yd, sizeof(float) * (size_t)ldy);
            alone_diff += count_diff_f32(y1, yg + r * ldy, N);
        }
        if (T > 1) {
            float *ys = fmalloc((size_t)(T * ldy));
            CHECK_EQ_INT(clef_backend_write(gpu, yd, y0 + ldy, sizeof(float) * (size_t)((T - 1) * ldy)), CLEF_OK);
            clef_matmul(gpu, T - 1, xd + ldx, ldx, &wg, with_bias ? bd : NULL, yd, ldy, accumulate);
            POISON(ys, (T - 1) * ldy);
            sync_read(ys, yd, sizeof(float) * (size_t)((T - 1) * ldy));
            for (int64_t t = 0; t + 1 < T; t++)
                shift_diff += count_diff_f32(ys + t * ldy, yg + (t + 1) * ldy, N);
            free(ys);
        }
        printf("nf4 batch        %-40s %-7s rows alone vs in the batch: elements differing %lld; batch shifted by a "
               "row: %lld\n",
               shape, mode_name[mi], (long long)alone_diff, (long long)shift_diff);
        CHECK_MSG(alone_diff == 0 && shift_diff == 0, "nf4 matmul (%s) %s: a row's result depends on its batch",
                  mode_name[mi], shape);
    }
    /* the two dequantization kernels feed cuBLASLt the same bf16 weights: the same bits */
    int64_t d_old_new = 0;
    for (int64_t t = 0; t < T; t++)
        d_old_new += count_diff_f32(ymodes[0] + t * ldy, ymodes[1] + t * ldy, N);
    printf("nf4 matmul       %-40s dequant vs run15 path: elements differing %lld\n", shape, (long long)d_old_new);
    CHECK_MSG(d_old_new == 0, "nf4 matmul %s: the vectorized dequantization changed the result", shape);
    clef_backend_cuda_set_nf4_gemm(gpu, mode0);

    clef_backend_release(gpu, pd), clef_backend_release(gpu, aqd), clef_backend_release(gpu, afd);
    clef_backend_release(gpu, nd), clef_backend_release(gpu, ncd), clef_backend_release(gpu, cd);
    clef_backend_release(gpu, wdd), clef_backend_release(gpu, xd), clef_backend_release(gpu, bd);
    clef_backend_release(gpu, yd);
    free(packed), free(absmax_q), free(absmax_f), free(nested), free(wref), free(wgot), free(x), free(y0);
    for (int mi = 0; mi < 3; mi++)
        free(ymodes[mi]);
    free(bias), free(yc), free(y1), free(ref), free(mag);
}

/* ---- the quantized hand-off (cuda_quant_stage.cu) ---------------------------------------- */

enum { FUSED_RMSNORM, FUSED_SWIGLU, FUSED_MUL_SIGMOID, FUSED_GATED };
enum { FMT_FP8_EXACT, FMT_FP8_TC, FMT_INT8 };
static const char *const fused_producer_name[] = {"rmsnorm", "swiglu", "mul_sigmoid", "rmsnorm_gated"};
static const char *const fused_fmt_name[] = {"fp8 exact", "fp8 tensor cores", "int8 convrot"};

typedef struct fused_case {
    clef_backend *g;
    int producer;
    int64_t T, K, d, H;               /* mul_sigmoid, rmsnorm_gated: T H rows of d (K = H d) */
    float *x, *aux, *normw;           /* device inputs: x (norm input / swiglu gate / gated rows), aux (up / gate / z) */
    const float *host_x;              /* mul_sigmoid works in place: x is written back before each run */
    size_t x_bytes;
} fused_case;

/* Run the producer into out (T rows of K, contiguous). */
static void fused_produce(fused_case *c, float *out) {
    switch (c->producer) {
    case FUSED_RMSNORM:
        clef_rmsnorm(c->g, c->T, c->K, c->x, c->K, c->normw, 1e-6f, 1, out, c->K);
        break;
    case FUSED_SWIGLU:
        clef_swiglu(c->g, c->T * c->K, c->x, c->aux, out);
        break;
    case FUSED_GATED:
        clef_rmsnorm_gated(c->g, c->T * c->H, c->d, c->x, c->d, c->aux, c->d, c->normw, 1e-6f, out, c->d);
        break;
    default:
        clef_backend_write(c->g, out, c->host_x, c->x_bytes);
        clef_mul_sigmoid(c->g, c->T * c->H, c->d, out, c->d, c->aux, 2 * c->d);
    }
}

static int64_t count_diff_bytes(const void *a, const void *b, size_t n) {
    int64_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
    return d;
}

/* A producer writing the next quantized matmul's codes: after one matmul has learnt it, the
 * producer's codes and scales are bit-identical to the standalone quantizer's on its own fp32
 * output (the quantizer that the tests above hold bit-identical to the CPU), its fp32 output
 * and the matmul's result are bit-identical to those with the hand-off off, the matmul reads
 * them (counted), and the hand-off is refused where it must be: rows at an offset the matmul's
 * plans would see misaligned, a column slice (another K), after any other kernel, after a
 * matmul that wrote over the producer's rows; and kept across a matmul that wrote elsewhere
 * (q, k, v reading one norm's codes). */
static void test_fused(int producer, int fmt, int64_t T, int64_t K) {
    char shape[96];
    snprintf(shape, sizeof shape, "%s T=%lld K=%lld %s", fused_producer_name[producer], (long long)T, (long long)K,
             fused_fmt_name[fmt]);
    fused_case c = {.producer = producer, .T = T, .K = K};
    CHECK_EQ_INT(clef_backend_cuda_create(0, &c.g), CLEF_OK);
    clef_backend *g = c.g;
    clef_backend_cuda_set_fp8_tensor_cores(g, fmt == FMT_FP8_TC);
    const int64_t N = 96, TK = T * K;
    const size_t esz = fmt == FMT_FP8_EXACT ? 2 : 1;
    /* the weight: random codes, scales 0.01 */
    void *wd = clef_backend_alloc(g, (size_t)(N * K));
    float *swd = clef_backend_alloc(g, sizeof(float) * (size_t)N);
    clef_wtype wt = fmt == FMT_INT8 ? CLEF_WTYPE_INT8_CONVROT : CLEF_WTYPE_FP8_E4M3;
    clef_cuda_fill_random_codes(g, wt, wd, (size_t)(N * K), 99);
    clef_cuda_fill_f32(g, swd, (size_t)N, 0.01f);
    clef_quant q;
    memset(&q, 0, sizeof q);
    if (fmt == FMT_INT8)
        q.u.int8_convrot.weight_scale = swd, q.u.int8_convrot.rotation_group = 256;
    else
        q.u.fp8.weight_scale = swd;
    clef_matrix w = {.type = wt, .rows = N, .cols = K, .ld = K, .data = wd, .quant = &q};
    clef_matrix w_half = w; /* a column slice's K: never the producer's codes */
    w_half.cols = w_half.ld = K / 2;
    /* the inputs */
    float *hx = fmalloc((size_t)TK), *haux = NULL;
    fill_normal(hx, (size_t)TK, 1.0f);
    c.x_bytes = sizeof(float) * (size_t)TK;
    c.x = to_gpu(g, hx, c.x_bytes);
    c.host_x = hx;
    if (producer == FUSED_RMSNORM) {
        float *hw = fmalloc((size_t)K);
        fill_normal(hw, (size_t)K, 0.1f);
        c.normw = to_gpu(g, hw, sizeof(float) * (size_t)K);
        free(hw);
    } else {
        c.d = producer == FUSED_GATED ? 128 : K % 256 == 0 ? 256 : 128; /* the GDN's value heads are 128 wide */
        c.H = K / c.d;
        if (producer == FUSED_GATED) {
            float *hw = fmalloc((size_t)c.d);
            fill_normal(hw, (size_t)c.d, 1.0f);
            c.normw = to_gpu(g, hw, sizeof(float) * (size_t)c.d);
            free(hw);
        }
        size_t n_aux = producer == FUSED_MUL_SIGMOID ? (size_t)(2 * TK) : (size_t)TK; /* the gate's rows 2d apart */
        haux = fmalloc(n_aux);
        fill_normal(haux, n_aux, 1.5f);
        c.aux = to_gpu(g, haux, sizeof(float) * n_aux);
    }
    float *y1 = clef_backend_alloc(g, c.x_bytes), *y2 = clef_backend_alloc(g, c.x_bytes);
    float *y3 = clef_backend_alloc(g, c.x_bytes);
    float *o1 = clef_backend_alloc(g, sizeof(float) * (size_t)(T * N)), *o2 = clef_backend_alloc(g, sizeof(float) * (size_t)(T * N));
    void *qs = clef_backend_alloc(g, (size_t)TK * esz);
    float *ss = clef_backend_alloc(g, sizeof(float) * (size_t)T);

    /* 1. the first producer + matmul: standalone, and the matmul learns */
    fused_produce(&c, y1);
    clef_matmul(g, T, y1, K, &w, NULL, o1, N, 0);
    int64_t served = -1, writes = -1;
    clef_cuda_fused_quant_counts(g, &served, &writes);
    CHECK_MSG(served == 0 && writes == 0, "%s: the first matmul was served (%lld, %lld)", shape, (long long)served,
              (long long)writes);
    /* 2. the producer again: it writes the codes */
    fused_produce(&c, y2);
    const void *codes = NULL;
    const float *scales = NULL;
    int held = clef_cuda_quant_staged(g, T, y2, K, &w, &codes, &scales);
    CHECK_MSG(held == 1, "%s: the producer wrote no codes", shape);
    uint8_t *hq_f = malloc((size_t)TK * esz), *hq_s = malloc((size_t)TK * esz);
    float *hs_f = fmalloc((size_t)T), *hs_s = fmalloc((size_t)T);
    if (held) {
        CHECK_EQ_INT(clef_backend_synchronize(g), CLEF_OK);
        CHECK_EQ_INT(clef_backend_read(g, hq_f, codes, (size_t)TK * esz), CLEF_OK);
        CHECK_EQ_INT(clef_backend_read(g, hs_f, scales, sizeof(float) * (size_t)T), CLEF_OK);
        /* what must be refused, looked at while the codes are valid */
        const void *c2 = NULL;
        const float *s2 = NULL;
        if (T > 64) {
            int sub = clef_cuda_quant_staged(g, T - 64, y2 + 64 * K, K, &w, &c2, &s2);
            CHECK_MSG(sub == 1 && c2 == (const char *)codes + (size_t)(64 * K) * esz && s2 == scales + 64,
                      "%s: rows 64.. not served from the producer's codes", shape);
        }
        if (T > 1)
            CHECK_MSG(!clef_cuda_quant_staged(g, T - 1, y2 + K, K, &w, &c2, &s2),
                      "%s: rows from 1 on served (the plans would see other alignments)", shape);
        CHECK_MSG(!clef_cuda_quant_staged(g, T, y2, K, &w_half, &c2, &s2), "%s: a column slice served", shape);
        CHECK_MSG(!clef_cuda_quant_staged(g, T, y3, K, &w, &c2, &s2), "%s: other rows served", shape);
    }
    clef_matmul(g, T, y2, K, &w, NULL, o2, N, 0); /* reads the codes */
    clef_cuda_fused_quant_counts(g, &served, &writes);
    CHECK_MSG(served == 1 && writes == 1, "%s: matmuls served %lld, producer writes %lld (want 1, 1)", shape,
              (long long)served, (long long)writes);
    held = clef_cuda_quant_staged(g, T, y2, K, &w, &codes, &scales);
    CHECK_MSG(held == 1, "%s: a matmul writing elsewhere ended the hand-off", shape);
    /* 3. the standalone quantizer on the producer's fp32 output */
    if (fmt == FMT_FP8_EXACT)
        clef_cuda_fp8_quantize_tokens_bf16(g, T, K, y2, K, (uint16_t *)qs, ss);
    else if (fmt == FMT_FP8_TC)
        clef_cuda_fp8_quantize_tokens(g, T, K, y2, K, (uint8_t *)qs, ss);
    else
        clef_cuda_convrot_quantize_tokens(g, T, K, y2, K, 256, NULL, 0, (int8_t *)qs, ss);
    CHECK_MSG(!clef_cuda_quant_staged(g, T, y2, K, &w, &codes, &scales), "%s: served after another kernel", shape);
    CHECK_EQ_INT(clef_backend_synchronize(g), CLEF_OK);
    CHECK_EQ_INT(clef_backend_read(g, hq_s, qs, (size_t)TK * esz), CLEF_OK);
    CHECK_EQ_INT(clef_backend_read(g, hs_s, ss, sizeof(float) * (size_t)T), CLEF_OK);
    int64_t dc = count_diff_bytes(hq_f, hq_s, (size_t)TK * esz), ds = count_diff_bytes(hs_f, hs_s, sizeof(float) * (size_t)T);
    /* 4. the hand-off off: the producer's fp32 output and the matmul's result, bit for bit */
    clef_backend_cuda_set_fused_quant(g, 0);
    fused_produce(&c, y3);
    float *o3 = clef_backend_alloc(g, sizeof(float) * (size_t)(T * N));
    clef_matmul(g, T, y3, K, &w, NULL, o3, N, 0);
    float *hy2 = fmalloc((size_t)TK), *hy3 = fmalloc((size_t)TK), *ho2 = fmalloc((size_t)(T * N)), *ho3 = fmalloc((size_t)(T * N));
    CHECK_EQ_INT(clef_backend_synchronize(g), CLEF_OK);
    clef_backend_read(g, hy2, y2, c.x_bytes), clef_backend_read(g, hy3, y3, c.x_bytes);
    clef_backend_read(g, ho2, o2, sizeof(float) * (size_t)(T * N)), clef_backend_read(g, ho3, o3, sizeof(float) * (size_t)(T * N));
    int64_t dy = count_diff_bytes(hy2, hy3, c.x_bytes), dout = count_diff_bytes(ho2, ho3, sizeof(float) * (size_t)(T * N));
    clef_cuda_fused_quant_counts(g, &served, &writes);
    CHECK_MSG(served == 1 && writes == 1, "%s: the hand-off ran while off (%lld, %lld)", shape, (long long)served,
              (long long)writes);
    /* 5. a matmul writing over the producer's rows ends it */
    clef_backend_cuda_set_fused_quant(g, 1);
    fused_produce(&c, y2);
    clef_matmul(g, T, y2, K, &w, NULL, y2, K, 0); /* N < K: y2's first N columns */
    int after_overwrite = clef_cuda_quant_staged(g, T, y2, K, &w, &codes, &scales);
    CHECK_MSG(!after_overwrite, "%s: served after a matmul wrote over the rows", shape);
    CHECK_EQ_INT(clef_backend_synchronize(g), CLEF_OK);
    printf("fused quantizer  %-44s codes differing %lld, scales differing %lld, fp32 output differing %lld bytes, "
           "matmul differing %lld bytes\n", shape, (long long)dc, (long long)ds, (long long)dy, (long long)dout);
    CHECK_MSG(dc == 0 && ds == 0, "%s: the producer's codes are not the standalone quantizer's", shape);
    CHECK_MSG(dy == 0 && dout == 0, "%s: the hand-off changed the fp32 output or the matmul", shape);
    free(hq_f), free(hq_s), free(hs_f), free(hs_s), free(hy2), free(hy3), free(ho2), free(ho3), free(hx), free(haux);
    void *bufs[] = {wd, swd, c.x, c.aux, c.normw, y1, y2, y3, o1, o2, o3, qs, ss};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        clef_backend_release(g, bufs[i]);
    clef_backend_free(g);
}

static void test_fused_all(void) {
    for (int fmt = 0; fmt < 3; fmt++) {
        /* the 27B's rows: input / post-attention norm (5,120), o_proj / out_proj input (6,144),
         * down_proj input (17,408); T = 130 (rows 64.. start a served slice) and 1 */
        test_fused(FUSED_RMSNORM, fmt, 130, 5120);
        test_fused(FUSED_RMSNORM, fmt, 1, 5120);
        test_fused(FUSED_RMSNORM, fmt, 37, 6144);
        test_fused(FUSED_RMSNORM, fmt, 70, 17408); /* wider than the register kernels: k_rmsnorm */
        test_fused(FUSED_SWIGLU, fmt, 130, 17408);
        test_fused(FUSED_MUL_SIGMOID, fmt, 130, 6144); /* 24 heads of 256 */
        test_fused(FUSED_GATED, fmt, 130, 6144);       /* 48 value heads of 128 */
        /* random shapes: multiples of 256 (the rotation's group) */
        for (int r = 0; r < 2; r++) {
            const int64_t K = 256 * (5 + (int64_t)(rnd_uniform() * 40)), T = 1 + (int64_t)(rnd_uniform() * 200);
            test_fused(r ? FUSED_SWIGLU : FUSED_RMSNORM, fmt, T, K);
            test_fused(FUSED_MUL_SIGMOID, fmt, T, K);
            test_fused(FUSED_GATED, fmt, T, K);
        }
        if (fmt != FMT_INT8) { /* FP8 needs K % 16 only */
            test_fused(FUSED_RMSNORM, fmt, 66, 1040);
            test_fused(FUSED_SWIGLU, fmt, 66, 1040 + 16 * 7);
            test_fused(FUSED_MUL_SIGMOID, fmt, 66, 128 * 11);
            test_fused(FUSED_GATED, fmt, 66, 128 * 11);
        }
    }
}

/* swiglu_matmul (the MLP's SwiGLU with its down projection): once the matmul has learnt that
 * SwiGLU rows feed it, the SwiGLU writes only the codes (y is left as it was: a NaN fill here,
 * counted) and the matmul reads them: its result is bit-identical to swiglu + matmul with the
 * hand-off off (the standalone quantizer on the fp32 y, held to the CPU by the tests above), in
 * place (y over gate, as the model calls it) too. Where the matmul would not take the codes
 * alone (the FP8 promoted kernel, which may fall back to reading y; the hand-off off) y is
 * written, the same bits as swiglu's. */
static void test_swiglu_matmul(int fmt, int promoted, int64_t T, int64_t K) {
    char shape[96];
    snprintf(shape, sizeof shape, "swiglu_matmul T=%lld K=%lld %s%s", (long long)T, (long long)K, fused_fmt_name[fmt],
             promoted ? " promoted" : "");
    clef_backend *g = NULL, *r = NULL;
    CHECK_EQ_INT(clef_backend_cuda_create(0, &g), CLEF_OK);
    CHECK_EQ_INT(clef_backend_cuda_create(0, &r), CLEF_OK);
    clef_backend *both[2] = {g, r};
    for (int i = 0; i < 2; i++) {
        clef_backend_cuda_set_fp8_tensor_cores(both[i], fmt == FMT_FP8_TC);
        clef_backend_cuda_set_fp8_promoted(both[i], promoted ? CLEF_CUDA_FP8_PROMOTE_128 : CLEF_CUDA_FP8_PROMOTE_OFF);
    }
    clef_backend_cuda_set_fused_quant(r, 0); /* the reference: swiglu, then the standalone quantizer */
    const int64_t N = 96, TK = T * K;
    const size_t xb = sizeof(float) * (size_t)TK, ob = sizeof(float) * (size_t)(T * N);
    const clef_wtype wt = fmt == FMT_INT8 ? CLEF_WTYPE_INT8_CONVROT : CLEF_WTYPE_FP8_E4M3;
    float *hg = fmalloc((size_t)TK), *hu = fmalloc((size_t)TK);
    fill_normal(hg, (size_t)TK, 1.0f), fill_normal(hu, (size_t)TK, 1.5f);
    float *hy[2], *ho[2];
    clef_quant q[2];
    for (int i = 0; i < 2; i++) {
        clef_backend *b = both[i];
        void *wd = clef_backend_alloc(b, (size_t)(N * K));
        float *swd = clef_backend_alloc(b, sizeof(float) * (size_t)N);
        clef_cuda_fill_random_codes(b, wt, wd, (size_t)(N * K), 99);
        clef_cuda_fill_f32(b, swd, (size_t)N, 0.01f);
        memset(&q[i], 0, sizeof q[i]);
        if (fmt == FMT_INT8)
            q[i].u.int8_convrot.weight_scale = swd, q[i].u.int8_convrot.rotation_group = 256;
        else
            q[i].u.fp8.weight_scale = swd;
        clef_matrix w = {.type = wt, .rows = N, .cols = K, .ld = K, .data = wd, .quant = &q[i]};
        float *gd = to_gpu(b, hg, xb), *ud = to_gpu(b, hu, xb), *yd = clef_backend_alloc(b, xb);
        float *od = clef_backend_alloc(b, ob);
        hy[i] = fmalloc((size_t)TK), ho[i] = fmalloc((size_t)(T * N));
        if (i == 1) { /* the reference */
            clef_swiglu(b, TK, gd, ud, yd);
            clef_matmul(b, T, yd, K, &w, NULL, od, N, 0);
        } else {
            clef_swiglu_matmul(b, T, gd, ud, yd, &w, od, N, 0, NULL); /* learns */
            clef_cuda_fill_f32(b, yd, (size_t)TK, NAN);
            clef_swiglu_matmul(b, T, gd, ud, yd, &w, od, N, 0, NULL); /* y: codes only, or written */
        }
        CHECK_EQ_INT(clef_backend_synchronize(b), CLEF_OK);
        clef_backend_read(b, hy[i], yd, xb), clef_backend_read(b, ho[i], od, ob);
        if (i == 0) {
            /* in place, as the model calls it: y over gate */
            float *od2 = clef_backend_alloc(b, ob), *ho2 = fmalloc((size_t)(T * N));
            clef_swiglu_matmul(b, T, gd, ud, gd, &w, od2, N, 0, NULL);
            CHECK_EQ_INT(clef_backend_synchronize(b), CLEF_OK);
            clef_backend_read(b, ho2, od2, ob);
            CHECK_MSG(count_diff_bytes(ho2, ho[0], ob) == 0, "%s: in place, another result", shape);
            free(ho2);
            clef_backend_release(b, od2);
        }
        void *bufs[] = {wd, swd, gd, ud, yd, od};
        for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++)
            clef_backend_release(b, bufs[k]);
    }
    int64_t served = -1, writes = -1, unwritten = 0;
    clef_cuda_fused_quant_counts(g, &served, &writes);
    for (int64_t i = 0; i < TK; i++)
        unwritten += isnan(hy[0][i]) != 0;
    const int64_t dout = count_diff_bytes(ho[0], ho[1], ob), dy = count_diff_bytes(hy[0], hy[1], xb);
    printf("fused quantizer  %-44s matmul differing %lld bytes, y unwritten %lld of %lld, served %lld\n", shape,
           (long long)dout, (long long)unwritten, (long long)TK, (long long)served);
    CHECK_MSG(dout == 0, "%s: the result differs from swiglu + matmul", shape);
    if (promoted && fmt != FMT_INT8) { /* may fall back to reading y: written, never served codes-only */
        CHECK_MSG(dy == 0, "%s: y not written (or not swiglu's) for a matmul that may read it", shape);
    } else {
        CHECK_MSG(unwritten == TK, "%s: y written although its matmul read only the codes (%lld of %lld)", shape,
                  (long long)(TK - unwritten), (long long)TK);
        CHECK_MSG(served == 2, "%s: matmuls served %lld (want 2: codes only, in place)", shape, (long long)served);
    }
    for (int i = 0; i < 2; i++)
        free(hy[i]), free(ho[i]);
    free(hg), free(hu);
    clef_backend_free(g), clef_backend_free(r);
}

static void test_swiglu_matmul_all(void) {
    for (int fmt = 0; fmt < 3; fmt++) {
        test_swiglu_matmul(fmt, 0, 130, 17408); /* the 27B's down_proj input */
        test_swiglu_matmul(fmt, 0, 1, 4096);
        if (fmt == FMT_FP8_EXACT)
            test_swiglu_matmul(fmt, 1, 130, 17408);
    }
    test_swiglu_matmul(FMT_FP8_TC, 0, 66, 1040 + 16 * 7);
}

/* A bad configuration is a status with a message, never a crash. */
/* ---- scratch planned under one setting, run under another -------------------------------------- */

/* The settings a quantized matmul's scratch depends on: each format's paths. */
typedef struct plan_setting {
    const char *name;
    int fp8_tc, fp8_epilogue, fp8_promoted, fp8_exact, int8_wgmma, nf4;
} plan_setting;

static void apply_setting(const plan_setting *p) {
    clef_backend_cuda_set_fp8_tensor_cores(gpu, p->fp8_tc);
    clef_backend_cuda_set_fp8_epilogue(gpu, p->fp8_epilogue);
    clef_backend_cuda_set_fp8_promoted(gpu, p->fp8_promoted);
    clef_backend_cuda_set_fp8_exact_wgmma(gpu, p->fp8_exact);
    clef_backend_cuda_set_int8_wgmma(gpu, p->int8_wgmma);
    clef_backend_cuda_set_nf4_gemm(gpu, p->nf4);
}

/* A caller's scratch planned (matmul_workspace_size, now the path's own size) under one
 * setting and the matmul run under another: it may use only what was planned (the 64 KiB after
 * it hold a pattern that must survive: cuda_quant_scratch takes its own buffer where the path
 * now taken needs more), and its result has the bits of the same matmul given no scratch (the
 * backend's own buffers). Every ordered pair of settings, one weight of each format. */
static void test_scratch_plans(void) {
    enum { OFF = CLEF_CUDA_WGMMA_OFF, AUTO = CLEF_CUDA_WGMMA_AUTO, DEQ = CLEF_CUDA_NF4_DEQUANT,
           FUSED = CLEF_CUDA_NF4_FUSED };
    static const plan_setting settings[] = {
        {"exact cuBLASLt, int8 wgmma, nf4 dequant", 0, 0, 0, OFF, AUTO, DEQ},
        {"exact mixed, int8 cuBLASLt, nf4 fused", 0, 0, 0, CLEF_CUDA_WGMMA_FP8_MIXED, OFF, FUSED},
        {"exact bf16 wgmma", 0, 0, 0, CLEF_CUDA_WGMMA_256, AUTO, DEQ},
        {"fp8 tensor cores", 1, 0, 0, OFF, OFF, FUSED},
        {"fp8 tensor cores, epilogue", 1, 1, 0, OFF, AUTO, DEQ},
        {"promoted 128", 0, 0, CLEF_CUDA_FP8_PROMOTE_128, OFF, AUTO, FUSED},
    };
    const int n_set = (int)(sizeof settings / sizeof settings[0]);
    const int64_t T = 96, N = 320, K = 512, n_el = N * K;
    const size_t guard = 64 << 10;
    /* FP8: finite e4m3 codes; INT8: [-127, 127]; NF4: any nibbles, plain absmax */
    uint8_t *codes = malloc((size_t)n_el);
    for (int64_t i = 0; i < n_el; i++)
        codes[i] = (uint8_t)(rnd_uniform() * 255);
    float *scale = fmalloc((size_t)N), *absmax = fmalloc((size_t)(n_el / 64)), *x = fmalloc((size_t)(T * K));
    for (int64_t n = 0; n < N; n++)
        scale[n] = 0.001f + 0.01f * (float)rnd_uniform();
    for (int64_t b = 0; b < n_el / 64; b++)
        absmax[b] = 0.01f + 0.1f * (float)rnd_uniform();
    for (int64_t i = 0; i < T * K; i++)
        x[i] = (float)(2.0 * rnd_uniform() - 1.0);
    uint8_t *f8 = malloc((size_t)n_el), *i8 = malloc((size_t)n_el);
    for (int64_t i = 0; i < n_el; i++) {
        f8[i] = (codes[i] & 0x7f) == 0x7f ? (uint8_t)(codes[i] ^ 1) : codes[i];
        i8[i] = (uint8_t)(int8_t)((int)codes[i] % 255 - 127);
    }
    void *f8d = to_gpu(gpu, f8, (size_t)n_el), *i8d = to_gpu(gpu, i8, (size_t)n_el);
    void *nf4d = to_gpu(gpu, codes, (size_t)(n_el / 2));
    float *sd = to_gpu(gpu, scale, sizeof(float) * (size_t)N);
    float *ad = to_gpu(gpu, absmax, sizeof(float) * (size_t)(n_el / 64));
    float *cd = to_gpu(gpu, clef_nf4_table, sizeof(float) * 16);
    float *xd = to_gpu(gpu, x, sizeof(float) * (size_t)(T * K));
    clef_quant qf8 = {.u.fp8 = {.weight_scale = sd}};
    clef_quant qi8 = {.u.int8_convrot = {.weight_scale = sd, .rotation_group = 256}};
    clef_quant qnf4 = {.u.nf4 = {.block = 64, .absmax_f32 = ad, .code = cd}};
    const clef_matrix mats[3] = {
        {.type = CLEF_WTYPE_FP8_E4M3, .rows = N, .cols = K, .ld = K, .data = f8d, .quant = &qf8},
        {.type = CLEF_WTYPE_INT8_CONVROT, .rows = N, .cols = K, .ld = K, .data = i8d, .quant = &qi8},
        {.type = CLEF_WTYPE_NF4, .rows = N, .cols = K, .ld = K, .data = nf4d, .quant = &qnf4},
    };
    static const char *const fmt[3] = {"fp8", "int8", "nf4"};
    float *yd = clef_backend_alloc(gpu, sizeof(float) * (size_t)(T * N));
    float *y_own = fmalloc((size_t)(T * N)), *y_planned = fmalloc((size_t)(T * N));
    uint8_t *pattern = malloc(guard), *after = malloc(guard);
    for (size_t i = 0; i < guard; i++)
        pattern[i] = (uint8_t)(i * 131 + 7);
    const int fp8_exact0 = clef_backend_cuda_fp8_exact_wgmma(gpu), nf40 = clef_backend_cuda_nf4_gemm(gpu);
    int64_t pairs = 0, bad = 0;
    for (int f = 0; f < 3; f++)
        for (int a = 0; a < n_set; a++) {
            apply_setting(&settings[a]);
            const size_t planned = clef_matmul_workspace_size(gpu, T, &mats[f]);
            char *ws = clef_backend_alloc(gpu, planned + guard);
            clef_backend_write(gpu, ws + planned, pattern, guard);
            for (int b = 0; b < n_set; b++) {
                apply_setting(&settings[b]);
                clef_matmul_scratch(gpu, T, xd, K, &mats[f], NULL, yd, N, 0, NULL);
                POISON(y_own, T * N);
                sync_read(y_own, yd, sizeof(float) * (size_t)(T * N));
                clef_matmul_scratch(gpu, T, xd, K, &mats[f], NULL, yd, N, 0, ws);
                POISON(y_planned, T * N);
                sync_read(y_planned, yd, sizeof(float) * (size_t)(T * N));
                memset(after, 0, guard);
                sync_read(after, ws + planned, guard);
                const int same = !memcmp(y_own, y_planned, sizeof(float) * (size_t)(T * N));
                const int kept = !memcmp(after, pattern, guard);
                pairs++;
                bad += !same || !kept;
                CHECK_MSG(same && kept, "%s scratch planned (%zu bytes) under \"%s\", run under \"%s\": %s",
                          fmt[f], planned, settings[a].name, settings[b].name,
                          !kept ? "wrote past what was planned" : "bits differ from the run with no scratch");
            }
            clef_backend_release(gpu, ws);
        }
    printf("scratch plans    %lld (format, planned-under, run-under) cases, %lld failing\n", (long long)pairs,
           (long long)bad);
    apply_setting(&settings[0]);
    clef_backend_cuda_set_fp8_exact_wgmma(gpu, fp8_exact0);
    clef_backend_cuda_set_nf4_gemm(gpu, nf40);
    clef_backend_cuda_set_int8_wgmma(gpu, CLEF_CUDA_WGMMA_AUTO);
    clef_backend_release(gpu, f8d), clef_backend_release(gpu, i8d), clef_backend_release(gpu, nf4d);
    clef_backend_release(gpu, sd), clef_backend_release(gpu, ad), clef_backend_release(gpu, cd);
    clef_backend_release(gpu, xd), clef_backend_release(gpu, yd);
    free(codes), free(scale), free(absmax), free(x), free(f8), free(i8), free(y_own), free(y_planned);
    free(pattern), free(after);
}

static void test_refusals(void) {
    clef_backend *g = NULL;
    CHECK_EQ_INT(clef_backend_cuda_create(0, &g), CLEF_OK);
    float *xd = clef_backend_alloc(g, sizeof(float) * 8 * 300), *yd = clef_backend_alloc(g, sizeof(float) * 8 * 8);
    int8_t *wd = clef_backend_alloc(g, 8 * 300);
    float *sd = clef_backend_alloc(g, sizeof(float) * 8);
    clef_quant q = {.u.int8_convrot = {.weight_scale = sd, .rotation_group = 256}};
    clef_matrix w = {.type = CLEF_WTYPE_INT8_CONVROT, .rows = 8, .cols = 300, .ld = 300, .data = wd, .quant = &q};
    clef_matmul(g, 8, xd, 300, &w, NULL, yd, 8, 0);
    int st = clef_backend_synchronize(g);
    printf("refusal          INT8 ConvRot with K = 300: status %d (%s)\n", st, clef_last_error());
    CHECK(st == CLEF_ERR_UNSUPPORTED);
    clef_backend_free(g);
}

/* argv[1] = "nf4", "fp8", "int8" or "fused": the NF4, the FP8, the INT8 or the quantizer
 * hand-off's checks alone (a short device run); none: everything */
int main(int argc, char **argv) {
    test_t256 = argc > 1 && !strcmp(argv[1], "fp8-t256");
    test_mixed = argc > 1 && (!strcmp(argv[1], "fp8-mixed") || test_t256);
    const int fp8_only = argc > 1 && (!strcmp(argv[1], "fp8") || test_mixed);
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
    if (argc > 1 && !strcmp(argv[1], "fused")) { /* the hand-off's checks alone */
        test_fused_all();
        test_swiglu_matmul_all();
        clef_backend_free(gpu);
        clef_backend_free(cpu);
        return test_summary();
    }
    const int nf4_only = argc > 1 && !strcmp(argv[1], "nf4"), int8_only = argc > 1 && !strcmp(argv[1], "int8");
    if (nf4_only)
        goto nf4;
    if (int8_only)
        goto int8;
    if (!fp8_only) {
        test_fused_all();
        test_swiglu_matmul_all();
    }
    test_fp8(1, 64, 256, 0, 0, 0);
    test_fp8(37, 200, 512, 16, 1, 1);
    test_fp8(300, 1024, 4096, 0, 0, 1);
    test_fp8(129, 48, 12288, 8, 1, 0);
    test_fp8(19, 203, 256, 1, 1, 1); /* odd output count and leading dimension */
    test_fp8(300, 203, 256, 8, 1, 1); /* exact-sl64: 4 slices (the last 11 wide), 3 chunks of rows */
    if (test_mixed) /* several tiles of both kinds, K not a multiple of the 128 of a stage */
        test_fp8(260, 600, 2064, 24, 1, 1);
    if (fp8_only) {
        clef_backend_free(gpu);
        clef_backend_free(cpu);
        return test_summary();
    }
int8:
    test_int8(1, 64, 256, 0, 0, 0);
    test_int8(37, 203, 512, 5, 1, 1);
    test_int8(300, 1024, 4096, 0, 0, 1);
    test_int8(9, 40, 17408, 3, 1, 0); /* a row over 48 KB of shared memory (27B down_proj width) */
    test_int8_wgmma_large(131, 17408, 5120);  /* 27B gate / up */
    test_int8_wgmma_large(257, 5120, 17408);  /* 27B down */
    test_int8_wgmma_large(77, 12288, 4096);   /* 9B gate / up */
    test_int8_wgmma_large(301, 4096, 12288);  /* 9B down */
    test_int8_wgmma_large(1, 1024, 5120);     /* 27B k / v, one token */
    test_int8_wgmma_large(1501, 17408, 5120); /* persistent kernels: many tiles a block, a part group of slabs */
    if (int8_only) {
        clef_backend_free(gpu);
        clef_backend_free(cpu);
        return test_summary();
    }
nf4:
    test_nf4(1, 64, 256, 0, 1, 0, 0);
    test_nf4(37, 200, 512, 3, 1, 1, 1);
    test_nf4(300, 1024, 4096, 0, 1, 0, 1);
    test_nf4(20, 77, 320, 1, 0, 1, 0);
    test_nf4(129, 384, 17408, 2, 1, 1, 1); /* the 27B down_proj width, a slice */
    if (!nf4_only) {
        test_refusals();
        test_scratch_plans();
    }
    clef_backend_free(gpu);
    clef_backend_free(cpu);
    return test_summary();
}
