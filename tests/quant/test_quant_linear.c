/*
 * test_quant_linear.c — every quantized linear of the three quantized fixture releases run by
 * src/quant's reference kernels on the oracle's inputs (6 tokens, and 1 token), against the
 * library's own forward on the same inputs (tests/quant/fixtures, scripts/quant/make_oracle.py):
 *
 * NF4   vs bitsandbytes Linear4bit.forward on CPU (bf16). Both sides multiply the same bf16
 *       weights (dequantization is bit-identical: test_quant_dequant) by the same bf16 inputs
 *       with fp32 accumulation, in different orders; the library rounds its sum to bf16. So
 *       |ours - lib| <= u_bf16 |lib| / (1 - u_bf16) + 2 gamma_{K+1} S,  S = sum_k |x_k w_k|,
 *       u_bf16 = 2^-8, gamma_n = n 2^-24 / (1 - n 2^-24) (fp32 accumulation error bounds).
 *
 * FP8   activation quantizer BIT-IDENTICAL to compressed-tensors' (quantize() with the dynamic
 *       per-token scale), for bf16 and for fp32 activations: fp8 codes and scales.
 *       Outputs vs compressed-tensors' forward: the library multiplies the fp8 codes out to
 *       bf16 (x_k = bf16(qx_k sx), w_k = bf16(qw_k sw): relative errors <= u_bf16 each) and
 *       runs a bf16 linear; W8A8 (ours) sums qx_k qw_k in fp32 and scales once. With S =
 *       sum_k |qx_k sx qw_k sw|:
 *       |ours - lib| <= u_bf16 |lib| / (1 - u_bf16) + (2 u_bf16 + u_bf16^2) (1 + 2 gamma_{K+1}) S
 *                       + 2 gamma_{K+1} S + 2^-23 S
 *       (operand roundings, both accumulations, our two epilogue multiplies).
 *       And the QDQ reference (clef_fp8_gemm_qdq_ref: the library's own arithmetic on the
 *       same operands, bit-identical codes and scales) within the NF4 bound: same bf16
 *       operands, fp32 accumulation in another order, the library's rounding to bf16.
 *
 * INT8  activation quantizer (ConvRot rotation + per-token int8) BIT-IDENTICAL to
 *       comfy-kitchen's eager quantize_and_rotate_rowwise, for bf16 and fp32 activations; and
 *       since int32 accumulation is exact and the epilogue is the same two fp32 multiplies,
 *       outputs rounded to bf16 BIT-IDENTICAL to comfy-kitchen's eager int8_linear.
 *
 * The set of linears checked is the oracle's, and must equal the release's quantized set.
 */
#include "quant_fixture.h"
#include "test.h"

#include "core/numeric.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U_BF16 (1.0 / 256.0)

static double gamma_n(int64_t n) {
    double nu = (double)n * ldexp(1.0, -24);
    return nu / (1.0 - nu);
}

/* per-output bound check; returns the worst |ours - lib| / bound and counts violations */
typedef struct bound_stats {
    double worst_ratio, sum_sq_err, sum_sq_ref;
    size_t violations, n, bf16_equal;
} bound_stats;

static void bound_add(bound_stats *st, double ours, double lib, double bound) {
    double err = fabs(ours - lib);
    double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
    if (ratio > st->worst_ratio)
        st->worst_ratio = ratio;
    st->violations += err > bound;
    st->sum_sq_err += err * err;
    st->sum_sq_ref += lib * lib;
    st->bf16_equal += clef_f32_to_bf16((float)ours) == clef_f32_to_bf16((float)lib);
    st->n++;
}

/* oracle tensor of any float dtype (BF16, F32) widened, or F8/I8 raw bytes */
static float *oracle_floats(const qf_case *c, const char *name, size_t *n) {
    const clef_tensor_info *t = st_fixture_find(&c->oracle, name);
    if (!t)
        return NULL;
    if (t->dtype == CLEF_DTYPE_BF16)
        return qf_oracle_bf16(c, name, n);
    size_t bytes;
    float *f = qf_oracle_copy(c, name, &bytes);
    *n = bytes / 4;
    return f;
}

typedef struct linear_case {
    const char *module;    /* stored module name */
    const char *x_key, *y_key, *aq_key, *as_key;
    int64_t M;
} linear_case;

static void check_nf4(const qf_case *c, const qf_linear *w, const float *x, int64_t M,
                      const float *lib, bound_stats *st) {
    float *ours = malloc((size_t)(M * w->N) * sizeof *ours);
    float *tile = malloc((size_t)w->K * sizeof *tile);
    float *wf = malloc((size_t)(w->N * w->K) * sizeof *wf);
    clef_nf4_gemm_ref(&w->nf4, w->data, w->N, w->K, x, M, CLEF_QUANT_ACT_BF16, ours, tile);
    clef_nf4_dequant_f32(&w->nf4, w->data, 0, w->N * w->K, wf);
    double g = gamma_n(w->K + 1);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < w->N; n++) {
            double S = 0;
            for (int64_t k = 0; k < w->K; k++)
                S += fabs((double)x[m * w->K + k] * wf[n * w->K + k]);
            double l = lib[m * w->N + n];
            bound_add(st, ours[m * w->N + n], l, U_BF16 / (1 - U_BF16) * fabs(l) + 2 * g * S);
        }
    (void)c;
    free(ours);
    free(tile);
    free(wf);
}

static void check_fp8(const qf_case *c, const qf_linear *w, const linear_case *lc,
                      const float *x, const float *lib, bound_stats *st, bound_stats *st_qdq) {
    int64_t M = lc->M, K = w->K, N = w->N;
    uint8_t *q = malloc((size_t)(M * K));
    float *s = malloc((size_t)M * sizeof *s);
    /* the quantizer, both activation dtypes (6-token inputs only: the oracle's aq/as) */
    if (lc->aq_key) {
        for (int mode = 0; mode < 2; mode++) {
            char aq[600], as[600];
            snprintf(aq, sizeof aq, "aq%s.%s", mode ? "32" : "", lc->module);
            snprintf(as, sizeof as, "as%s.%s", mode ? "32" : "", lc->module);
            clef_fp8_quantize_tokens(x, K, M, K, mode ? CLEF_QUANT_ACT_F32 : CLEF_QUANT_ACT_BF16,
                                     q, s);
            size_t nq = 0, ns = 0;
            uint8_t *eq = qf_oracle_copy(c, aq, &nq);
            float *es = oracle_floats(c, as, &ns);
            CHECK_MSG(eq && es && nq == (size_t)(M * K) && ns == (size_t)M,
                      "%s: oracle %s / %s missing or mis-sized", c->name, aq, as);
            if (eq && es && nq == (size_t)(M * K) && ns == (size_t)M) {
                size_t bad = 0;
                for (int64_t i = 0; i < M * K; i++)
                    bad += q[i] != eq[i];
                CHECK_MSG(bad == 0, "%s: %zu of %lld fp8 codes differ from compressed-tensors",
                          aq, bad, (long long)(M * K));
                for (int64_t m = 0; m < M; m++)
                    CHECK_MSG(s[m] == es[m], "%s[%lld]: scale %a, library %a", as, (long long)m,
                              (double)s[m], (double)es[m]);
            }
            free(eq);
            free(es);
        }
    }
    /* the GEMM on bf16 activations, as the library's forward ran */
    clef_fp8_quantize_tokens(x, K, M, K, CLEF_QUANT_ACT_BF16, q, s);
    float *ours = malloc((size_t)(M * N) * sizeof *ours);
    clef_fp8_gemm_ref(w->data, w->scale, N, K, q, s, M, ours);
    double g = gamma_n(K + 1);
    double operand = (2 * U_BF16 + U_BF16 * U_BF16) * (1 + 2 * g) + 2 * g + ldexp(1.0, -23);
    const uint8_t *qw = w->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double S = 0;
            for (int64_t k = 0; k < K; k++)
                S += fabs((double)clef_fp8e4m3_to_f32(q[m * K + k]) * s[m] *
                          clef_fp8e4m3_to_f32(qw[n * K + k]) * w->scale[n]);
            double l = lib[m * N + n];
            bound_add(st, ours[m * N + n], l, U_BF16 / (1 - U_BF16) * fabs(l) + operand * S);
        }
    /* the library's own arithmetic: QDQ operands, S over those operands */
    clef_fp8_gemm_qdq_ref(w->data, w->scale, N, K, q, s, M, CLEF_QUANT_ACT_BF16, ours);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double S = 0;
            for (int64_t k = 0; k < K; k++) {
                float xq = clef_bf16_to_f32(
                    clef_f32_to_bf16(clef_fp8e4m3_to_f32(q[m * K + k]) * s[m]));
                float wq = clef_bf16_to_f32(
                    clef_f32_to_bf16(clef_fp8e4m3_to_f32(qw[n * K + k]) * w->scale[n]));
                S += fabs((double)xq * wq);
            }
            double l = lib[m * N + n];
            bound_add(st_qdq, ours[m * N + n], l, U_BF16 / (1 - U_BF16) * fabs(l) + 2 * g * S);
        }
    free(q);
    free(s);
    free(ours);
}

static void check_int8(const qf_case *c, const qf_linear *w, const linear_case *lc,
                       const float *x, const float *lib, bound_stats *st) {
    int64_t M = lc->M, K = w->K, N = w->N;
    int8_t *q = malloc((size_t)(M * K));
    float *s = malloc((size_t)M * sizeof *s);
    float *rot = malloc((size_t)K * sizeof *rot);
    if (lc->aq_key) {
        for (int mode = 0; mode < 2; mode++) {
            char aq[600], as[600];
            snprintf(aq, sizeof aq, "aq%s.%s", mode ? "32" : "", lc->module);
            snprintf(as, sizeof as, "as%s.%s", mode ? "32" : "", lc->module);
            clef_convrot_quantize_tokens(x, K, M, K, mode ? CLEF_QUANT_ACT_F32 : CLEF_QUANT_ACT_BF16,
                                         q, s, rot);
            size_t nq = 0, ns = 0;
            int8_t *eq = qf_oracle_copy(c, aq, &nq);
            float *es = oracle_floats(c, as, &ns);
            CHECK_MSG(eq && es && nq == (size_t)(M * K) && ns == (size_t)M,
                      "%s: oracle %s / %s missing or mis-sized", c->name, aq, as);
            if (eq && es && nq == (size_t)(M * K) && ns == (size_t)M) {
                size_t bad = 0, first = 0;
                for (int64_t i = 0; i < M * K; i++)
                    if (q[i] != eq[i] && bad++ == 0)
                        first = (size_t)i;
                CHECK_MSG(bad == 0,
                          "%s: %zu of %lld int8 codes differ from comfy-kitchen; first [%zu] "
                          "ours %d library %d",
                          aq, bad, (long long)(M * K), first, q[first], eq[first]);
                for (int64_t m = 0; m < M; m++)
                    CHECK_MSG(s[m] == es[m], "%s[%lld]: scale %a, library %a", as, (long long)m,
                              (double)s[m], (double)es[m]);
            }
            free(eq);
            free(es);
        }
    }
    clef_convrot_quantize_tokens(x, K, M, K, CLEF_QUANT_ACT_BF16, q, s, rot);
    float *ours = malloc((size_t)(M * N) * sizeof *ours);
    clef_int8_gemm_ref(w->data, w->scale, N, K, q, s, M, ours);
    for (int64_t i = 0; i < M * N; i++) /* exact: bound 0 */
        bound_add(st, clef_bf16_to_f32(clef_f32_to_bf16(ours[i])), lib[i], 0.0);
    free(q);
    free(s);
    free(rot);
    free(ours);
}

static void check_precision(qf_precision p) {
    qf_case c;
    if (qf_open(&c, p) != 0) {
        CHECK_MSG(0, "cannot open the fixture release or its oracle");
        return;
    }
    bound_stats st = {0}, st_qdq = {0};
    size_t n_linears = 0;
    for (size_t i = 0; i < c.oracle.n_tensors; i++) {
        const char *key = c.oracle.tensors[i].name;
        int single = !strncmp(key, "y1.", 3);
        if (strncmp(key, "y.", 2) != 0 && !single)
            continue;
        linear_case lc = {.module = key + (single ? 3 : 2), .M = single ? 1 : 6};
        char weight[600], x_key[64], aq[600];
        snprintf(weight, sizeof weight, "%s.weight", qf_engine_name(lc.module));
        qf_linear w;
        if (qf_linear_load(&c, weight, &w) != 0) {
            CHECK_MSG(0, "%s: cannot read %s", c.name, weight);
            qf_linear_free(&w);
            continue;
        }
        snprintf(x_key, sizeof x_key, "%s.%lld", single ? "x1" : "x", (long long)w.K);
        snprintf(aq, sizeof aq, "aq.%s", lc.module);
        lc.aq_key = single || p == QF_NF4 ? NULL : aq;
        size_t nx = 0, ny = 0;
        float *x = qf_oracle_bf16(&c, x_key, &nx);
        float *lib = qf_oracle_bf16(&c, key, &ny);
        CHECK_MSG(x && lib && nx == (size_t)(lc.M * w.K) && ny == (size_t)(lc.M * w.N),
                  "%s: oracle %s / %s missing or mis-sized", c.name, x_key, key);
        if (x && lib && nx == (size_t)(lc.M * w.K) && ny == (size_t)(lc.M * w.N)) {
            n_linears += !single;
            size_t before = st.violations + st_qdq.violations;
            if (p == QF_NF4)
                check_nf4(&c, &w, x, lc.M, lib, &st);
            else if (p == QF_FP8)
                check_fp8(&c, &w, &lc, x, lib, &st, &st_qdq);
            else
                check_int8(&c, &w, &lc, x, lib, &st);
            size_t after = st.violations + st_qdq.violations;
            CHECK_MSG(after == before, "%s %s: %zu outputs outside the bound", c.name, key,
                      after - before);
        }
        free(x);
        free(lib);
        qf_linear_free(&w);
    }
    size_t n_quantized = 0;
    for (size_t i = 0; i < clef_release_tensor_count(c.rel); i++)
        n_quantized += qf_is_quantized(&c, clef_release_tensor_at(c.rel, i));
    CHECK_MSG(n_linears > 0 && n_linears == n_quantized,
              "%s: %zu linears in the oracle, %zu quantized in the release", c.name, n_linears,
              n_quantized);
    printf("%s: %zu linears, %zu outputs: worst |ours - lib| / bound %.3g, rel L2 %.3g, "
           "bf16-equal %zu/%zu\n",
           c.name, n_linears, st.n, st.worst_ratio,
           st.sum_sq_ref > 0 ? sqrt(st.sum_sq_err / st.sum_sq_ref) : 0.0, st.bf16_equal, st.n);
    if (st_qdq.n)
        printf("%s QDQ (the library's arithmetic): worst |ours - lib| / bound %.3g, rel L2 %.3g, "
               "bf16-equal %zu/%zu\n",
               c.name, st_qdq.worst_ratio,
               sqrt(st_qdq.sum_sq_err / (st_qdq.sum_sq_ref > 0 ? st_qdq.sum_sq_ref : 1)),
               st_qdq.bf16_equal, st_qdq.n);
    qf_close(&c);
}

int main(void) {
    check_precision(QF_NF4);
    check_precision(QF_FP8);
    check_precision(QF_INT8);
    return test_summary();
}
