/*
 * test_quant_matmul.c — the row-range CPU kernels of src/quant/quant_matmul.c against the
 * reference kernels (whose outputs test_quant_linear holds against the libraries), on every
 * quantized linear of the three fixture releases, with 9 and 41 tokens (partial token blocks
 * and register tiles), strided x and y, a bias, accumulate on and off, the output features
 * split in two ranges the way a backend splits them between threads, and on every
 * instruction-set level the machine has (C, AVX2, AVX-512: cpu_isa.h), which must all give
 * the reference's bits:
 *  - NF4 and FP8 (W8A8 and QDQ): bit-identical to clef_nf4_gemm_ref / clef_fp8_gemm_ref /
 *    clef_fp8_gemm_qdq_ref (same fused multiply-add chain per output) plus bias, plus y when
 *    accumulating;
 *  - INT8: the butterfly quantizer against the reference (torch-order dense rotation). Both
 *    rotations are within their fp32 error bounds of the exact product (test_quant_hadamard):
 *    gamma_12 A and gamma_256 A / 16 for an output of a group with sum |x| = A. So the two
 *    amax differ by at most (gamma_12 + gamma_256 / 16) A_max, the scales by that / 127 plus
 *    a rounding of each division; a perturbation that small moves a code by at most one step
 *    (where r / s sits next to a rounding midpoint) — checked: |dq| <= 1, scales in bound;
 *    the int32 kernel with the reference's codes bit-identical to clef_int8_gemm_ref.
 */
#include "quant_fixture.h"
#include "test.h"

#include "backend/cpu/cpu_isa.h"
#include "quant/quant_matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAD 3

static uint32_t lcg_state = 12345;
static float lcg_normalish(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) {
        lcg_state = lcg_state * 1664525u + 1013904223u;
        s += (float)(lcg_state >> 8) / (float)(1u << 24) - 0.5f;
    }
    return s;
}

/* expected = (accumulate ? y0 : 0) + (ref + bias) in the kernels' order */
static int compare(const float *ref, const float *bias, const float *y0, const float *y,
                   int64_t T, int64_t N, int64_t ldy, int accumulate) {
    int bad = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            float v = ref[t * N + n] + bias[n];
            float e = accumulate ? y0[t * ldy + n] + v : v;
            bad += memcmp(&e, &y[t * ldy + n], sizeof e) != 0;
        }
    return bad;
}

static void check_linear(const qf_case *c, const char *name, const qf_linear *w, int64_t T) {
    int64_t N = w->N, K = w->K, ldx = K + PAD, ldy = N + PAD;
    float *x = malloc(sizeof(float) * (size_t)(T * ldx));
    float *xd = malloc(sizeof(float) * (size_t)(T * K));
    float *bias = malloc(sizeof(float) * (size_t)N);
    float *y0 = malloc(sizeof(float) * (size_t)(T * ldy));
    float *y = malloc(sizeof(float) * (size_t)(T * ldy));
    float *ref = malloc(sizeof(float) * (size_t)(T * N));
    float *ref_qdq = malloc(sizeof(float) * (size_t)(T * N));
    float *panel = malloc(sizeof(float) * clef_qmm_panel_floats(K));
    for (int64_t i = 0; i < T * ldx; i++)
        x[i] = lcg_normalish() * (i % 7 == 0 ? 8.0f : 1.0f);
    for (int64_t t = 0; t < T; t++)
        memcpy(xd + t * K, x + t * ldx, sizeof(float) * (size_t)K);
    for (int64_t n = 0; n < N; n++)
        bias[n] = lcg_normalish();
    for (int64_t i = 0; i < T * ldy; i++)
        y0[i] = lcg_normalish();
    int64_t mid = N / 3; /* two thread ranges, the first not a multiple of the panel width */

    uint8_t *q8 = malloc((size_t)(T * K));
    int8_t *qi = malloc((size_t)(T * K)), *qi_fast = malloc((size_t)(T * K));
    float *sx = malloc(sizeof(float) * (size_t)T), *sx_fast = malloc(sizeof(float) * (size_t)T);
    float *rot = malloc(sizeof(float) * (size_t)K);
    const int64_t blocks = clef_qmm_token_blocks(T);
    float *xp = malloc(sizeof(float) * clef_qmm_xpack_floats(T, K));
    float *xp_qdq = malloc(sizeof(float) * clef_qmm_xpack_floats(T, K));
    float *sx_pack = malloc(sizeof(float) * (size_t)T);
    uint8_t *qrow = malloc((size_t)K);
    if (c->precision == QF_NF4) {
        clef_nf4_gemm_ref(&w->nf4, w->data, N, K, xd, T, CLEF_QUANT_ACT_F32, ref, panel);
    } else if (c->precision == QF_FP8) {
        clef_fp8_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, q8, sx);
        clef_fp8_gemm_ref(w->data, w->scale, N, K, q8, sx, T, ref);
        clef_fp8_gemm_qdq_ref(w->data, w->scale, N, K, q8, sx, T, CLEF_QUANT_ACT_F32, ref_qdq);
    } else {
        clef_convrot_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, qi, sx, rot);
        clef_convrot_quantize_tokens_fast(x, ldx, T, K, qi_fast, sx_fast, rot);
        int moved = 0, far = 0, scale_off = 0;
        for (int64_t i = 0; i < T * K; i++) {
            moved += qi[i] != qi_fast[i];
            far += abs(qi[i] - qi_fast[i]) > 1;
        }
        double g12 = 12 * ldexp(1.0, -24) / (1 - 12 * ldexp(1.0, -24));
        double g256 = 256 * ldexp(1.0, -24) / (1 - 256 * ldexp(1.0, -24));
        for (int64_t t = 0; t < T; t++) {
            double a_max = 0;
            for (int64_t g = 0; g < K; g += 256) {
                double a = 0;
                for (int64_t k = g; k < g + 256; k++)
                    a += fabs(x[t * ldx + k]);
                a_max = a > a_max ? a : a_max;
            }
            double bound = (g12 + g256 / 16) * a_max / 127 + 2 * ldexp(sx[t], -23);
            scale_off += fabs((double)sx[t] - sx_fast[t]) > bound;
        }
        printf("%s: butterfly moved %d of %lld codes by one step\n", name, moved,
               (long long)(T * K));
        CHECK_MSG(far == 0 && scale_off == 0,
                  "%s: butterfly quantizer: %d codes moved (%d by more than 1), %d scales off",
                  name, moved, far, scale_off);
    }
    if (c->precision == QF_NF4) {
        clef_qmm_pack_f32(x, ldx, T, K, 0, blocks, xp);
    } else if (c->precision == QF_FP8) {
        /* the packing quantizes with the same function: the same scales; the token blocks
         * split as two threads would */
        for (int qdq = 0; qdq < 2; qdq++) {
            clef_qmm_pack_fp8(x, ldx, T, K, qdq, 0, blocks / 2, qdq ? xp_qdq : xp, sx_pack, qrow);
            clef_qmm_pack_fp8(x, ldx, T, K, qdq, blocks / 2, blocks, qdq ? xp_qdq : xp, sx_pack,
                              qrow);
            CHECK_MSG(memcmp(sx_pack, sx, sizeof(float) * (size_t)T) == 0,
                      "%s: packing's activation scales differ from clef_fp8_quantize_tokens", name);
        }
    }
    int8_t *qi_level = malloc((size_t)(T * K));
    float *sx_level = malloc(sizeof(float) * (size_t)T);
    void *i8_scratch = malloc(clef_int8_matmul_scratch_bytes(T, K));
    if (c->precision == QF_INT8) { /* the reference quantizer: the C form */
        cpu_isa saved = cpu_isa_set_limit(CPU_ISA_SCALAR);
        clef_convrot_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, qi, sx, rot);
        cpu_isa_set_limit(saved);
        clef_int8_gemm_ref(w->data, w->scale, N, K, qi, sx, T, ref);
    }
    const cpu_isa best = cpu_isa_best();
    for (int level = CPU_ISA_SCALAR; level <= (int)best; level++) {
        cpu_isa saved = cpu_isa_set_limit((cpu_isa)level);
        if (c->precision == QF_INT8) { /* the quantizer's vector forms: the C form's bits */
            clef_convrot_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, qi_level, sx_level, rot);
            CHECK_MSG(memcmp(qi_level, qi, (size_t)(T * K)) == 0 &&
                          memcmp(sx_level, sx, sizeof(float) * (size_t)T) == 0,
                      "%s %s: quantizer differs at %s", c->name, name, cpu_isa_name(cpu_isa_active()));
        }
        /* variants: accumulate (bit 0); FP8 QDQ, INT8 without scratch (bit 1) */
        for (int variant = 0; variant < (c->precision == QF_NF4 ? 2 : 4); variant++) {
            int accumulate = variant & 1, qdq = variant >> 1;
            memcpy(y, y0, sizeof(float) * (size_t)(T * ldy));
            for (int part = 0; part < 2; part++) {
                int64_t n0 = part ? mid : 0, n1 = part ? N : mid;
                if (qdq && c->precision == QF_FP8)
                    clef_fp8_matmul_rows_qdq(w->data, w->scale, K, n0, n1, T, xp_qdq, bias, y,
                                             ldy, accumulate, panel);
                else if (c->precision == QF_NF4)
                    clef_nf4_matmul_rows(&w->nf4, w->data, 0, K, n0, n1, T, xp, bias, y, ldy,
                                         accumulate, panel);
                else if (c->precision == QF_FP8)
                    clef_fp8_matmul_rows(w->data, w->scale, K, n0, n1, T, xp, sx, bias, y, ldy,
                                         accumulate, panel);
                else if (qdq) /* INT8: the level's vpmaddwd kernel (no scratch) */
                    clef_int8_matmul_rows(w->data, w->scale, K, n0, n1, T, qi, sx, bias, y, ldy,
                                          accumulate);
                else /* INT8: the level's VNNI kernel where the CPU has it */
                    clef_int8_matmul_rows_ws(w->data, w->scale, K, n0, n1, T, qi, sx, bias, y,
                                             ldy, accumulate, i8_scratch);
            }
            int bad = compare(qdq && c->precision == QF_FP8 ? ref_qdq : ref, bias, y0, y, T, N, ldy, accumulate);
            CHECK_MSG(bad == 0,
                      "%s %s T=%lld %s accumulate=%d qdq=%d: %d outputs differ from the reference",
                      c->name, name, (long long)T, cpu_isa_name(cpu_isa_active()), accumulate,
                      qdq, bad);
            /* the padding between rows is never written */
            int touched = 0;
            for (int64_t t = 0; t < T; t++)
                for (int64_t p = N; p < ldy; p++)
                    touched += memcmp(&y[t * ldy + p], &y0[t * ldy + p], sizeof(float)) != 0;
            CHECK_MSG(touched == 0, "%s %s: %d padding values written", c->name, name, touched);
        }
        cpu_isa_set_limit(saved);
    }
    free(x), free(xd), free(bias), free(y0), free(y), free(ref), free(ref_qdq), free(panel);
    free(q8), free(qi), free(qi_fast), free(sx), free(sx_fast), free(rot);
    free(xp), free(xp_qdq), free(sx_pack), free(qrow), free(qi_level), free(sx_level);
    free(i8_scratch);
}

static void check_precision(qf_precision p) {
    qf_case c;
    if (qf_open(&c, p) != 0) {
        CHECK_MSG(0, "cannot open the fixture release or its oracle");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < clef_release_tensor_count(c.rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(c.rel, i);
        if (!qf_is_quantized(&c, t))
            continue;
        qf_linear w;
        if (qf_linear_load(&c, t->name, &w) != 0) {
            CHECK_MSG(0, "%s: cannot read %s", c.name, t->name);
        } else {
            check_linear(&c, t->name, &w, 9);
            check_linear(&c, t->name, &w, 41);
            n++;
        }
        qf_linear_free(&w);
    }
    CHECK_MSG(n > 0, "%s: no quantized linear", c.name);
    printf("%s: %zu linears checked\n", c.name, n);
    qf_close(&c);
}

/* Every INT8 kernel the machine has (C, AVX2, AVX-VNNI, AVX-512, AVX-512 VNNI) against
 * clef_int8_gemm_ref bit for bit on seeded shapes the fixtures lack: T from 1 to 40 (partial
 * 6- and 12-token tiles), N not a multiple of 8 or 16 (partial row vectors) and row ranges
 * starting anywhere, K multiples of 256 up to 3,584 and small K (a multiple of 4, and not:
 * the VNNI kernels' fallback), codes at the extremes (-128 x -128 on whole rows: the largest
 * dot products), bias and accumulate. */
static void check_int8_shapes(void) {
    static const int64_t Ks[] = {256, 512, 1280, 3584, 4, 36, 100, 30};
    static const int64_t Ns[] = {1, 7, 16, 33, 50};
    static const int64_t Ts[] = {1, 5, 6, 12, 13, 40};
    void *scratch = malloc(clef_int8_matmul_scratch_bytes(40, 3584));
    int cases = 0;
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
                const int64_t K = Ks[ki], N = Ns[ni], T = Ts[ti], ldy = N + PAD;
                int8_t *qw = malloc((size_t)(N * K)), *qx = malloc((size_t)(T * K));
                float *sw = malloc(sizeof(float) * (size_t)N), *sx = malloc(sizeof(float) * (size_t)T);
                float *bias = malloc(sizeof(float) * (size_t)N), *ref = malloc(sizeof(float) * (size_t)(T * N));
                float *y0 = malloc(sizeof(float) * (size_t)(T * ldy)), *y = malloc(sizeof(float) * (size_t)(T * ldy));
                for (int64_t i = 0; i < N * K; i++) /* row 0: all -128 */
                    qw[i] = i < K ? -128 : (int8_t)(lcg_normalish() * 120.0f);
                for (int64_t i = 0; i < T * K; i++) /* token 0: all -128, token 1: all 127 */
                    qx[i] = i < K ? -128 : i < 2 * K ? 127 : (int8_t)(lcg_normalish() * 120.0f);
                for (int64_t n = 0; n < N; n++)
                    sw[n] = 1e-3f * (1.0f + fabsf(lcg_normalish())), bias[n] = lcg_normalish();
                for (int64_t t = 0; t < T; t++)
                    sx[t] = 1e-2f * (1.0f + fabsf(lcg_normalish()));
                for (int64_t i = 0; i < T * ldy; i++)
                    y0[i] = lcg_normalish();
                clef_int8_gemm_ref(qw, sw, N, K, qx, sx, T, ref);
                const int64_t mid = N / 3 + (int64_t)(ki % 2); /* two ranges, any split */
                for (int k = 0; k < CLEF_INT8_KERNEL_COUNT; k++) {
                    if (!clef_int8_kernel_supported((clef_int8_kernel)k))
                        continue;
                    for (int accumulate = 0; accumulate < 2; accumulate++) {
                        memcpy(y, y0, sizeof(float) * (size_t)(T * ldy));
                        clef_int8_matmul_rows_kernel((clef_int8_kernel)k, qw, sw, K, 0, mid, T, qx,
                                                     sx, bias, y, ldy, accumulate, scratch);
                        clef_int8_matmul_rows_kernel((clef_int8_kernel)k, qw, sw, K, mid, N, T, qx,
                                                     sx, bias, y, ldy, accumulate, scratch);
                        int bad = compare(ref, bias, y0, y, T, N, ldy, accumulate), touched = 0;
                        for (int64_t t = 0; t < T; t++)
                            for (int64_t p = N; p < ldy; p++)
                                touched += memcmp(&y[t * ldy + p], &y0[t * ldy + p], sizeof(float)) != 0;
                        CHECK_MSG(bad == 0 && touched == 0,
                                  "int8 %s N=%lld K=%lld T=%lld accumulate=%d: %d outputs differ "
                                  "from clef_int8_gemm_ref, %d padding values written",
                                  clef_int8_kernel_name((clef_int8_kernel)k), (long long)N,
                                  (long long)K, (long long)T, accumulate, bad, touched);
                        cases++;
                    }
                }
                free(qw), free(qx), free(sw), free(sx), free(bias), free(ref), free(y0), free(y);
            }
    printf("int8 kernels:");
    for (int k = 0; k < CLEF_INT8_KERNEL_COUNT; k++)
        if (clef_int8_kernel_supported((clef_int8_kernel)k))
            printf(" %s", clef_int8_kernel_name((clef_int8_kernel)k));
    printf(" (active: %s); %d shape cases checked\n", clef_int8_kernel_name(clef_int8_kernel_active()),
           cases);
    free(scratch);
}

/* The INT8 quantizer's vector forms against its C form on rows the fixtures lack: zeros (scale
 * 1e-30), one spike, subnormal inputs, huge ones, and values at code midpoints. */
static void check_int8_quantizer_edges(void) {
    enum { K = 512, T = 6 };
    static float x[T * K], sx_c[T], sx_v[T], rot[K];
    static int8_t q_c[T * K], q_v[T * K];
    for (int k = 0; k < K; k++) {
        x[0 * K + k] = 0.0f;                                  /* all zero */
        x[1 * K + k] = k == 77 ? 3.0f : 0.0f;                 /* one spike: +-3/16 everywhere */
        x[2 * K + k] = lcg_normalish() * 1e-39f;              /* subnormal */
        x[3 * K + k] = lcg_normalish() * 1e30f;               /* huge */
        x[4 * K + k] = (float)((k * 37) % 255 - 127) / 16.0f; /* rotated: many exact ties */
        x[5 * K + k] = k % 2 ? -0.0f : 0.5f;                  /* negative zeros */
    }
    cpu_isa saved = cpu_isa_set_limit(CPU_ISA_SCALAR);
    clef_convrot_quantize_tokens(x, K, T, K, CLEF_QUANT_ACT_F32, q_c, sx_c, rot);
    for (int level = CPU_ISA_AVX2; level <= (int)cpu_isa_best(); level++) {
        cpu_isa_set_limit((cpu_isa)level);
        clef_convrot_quantize_tokens(x, K, T, K, CLEF_QUANT_ACT_F32, q_v, sx_v, rot);
        CHECK_MSG(memcmp(q_c, q_v, sizeof q_c) == 0 && memcmp(sx_c, sx_v, sizeof sx_c) == 0,
                  "int8 quantizer edge rows: %s differs from C", cpu_isa_name(cpu_isa_active()));
    }
    cpu_isa_set_limit(saved);
}

int main(void) {
    check_int8_shapes();
    check_int8_quantizer_edges();
    check_precision(QF_NF4);
    check_precision(QF_FP8);
    check_precision(QF_INT8);
    return test_summary();
}
