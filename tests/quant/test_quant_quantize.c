/*
 * test_quant_quantize.c — src/quant's weight quantizers (for `clef quantize`) against the
 * quantizers of the libraries:
 *  - FP8: every FP8 weight of tests/release/fixtures/fp8 re-made from its BF16 source
 *    (tests/release/fixtures/bf16-single, the release scripts/fixtures/make_quantized.py
 *    quantized with compressed-tensors): fp8 codes and BF16 scales bit-identical to the
 *    release's stored bytes;
 *  - INT8 ConvRot: comfy-kitchen's TensorWiseINT8Layout.quantize(per_channel, convrot) run by
 *    scripts/quant/make_oracle.py on bf16 weights (the fixture's dequantized ones): int8 codes
 *    and F32 scales bit-identical.
 */
#include "quant_fixture.h"
#include "test.h"

#include "core/numeric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *read_all(const clef_release *rel, const char *name, const clef_tensor_info **t) {
    *t = clef_release_find(rel, name);
    if (!*t)
        return NULL;
    void *buf = malloc((size_t)(*t)->n_bytes + 1);
    if (clef_release_read(rel, *t, buf) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void check_fp8(void) {
    qf_case c;
    clef_release *src = NULL;
    clef_release_opts opts = clef_release_default_opts();
    if (qf_open(&c, QF_FP8) != 0 ||
        clef_release_open("tests/release/fixtures/bf16-single", &opts, &src) != 0) {
        CHECK_MSG(0, "cannot open the fp8 fixture or its bf16 source");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < clef_release_tensor_count(c.rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(c.rel, i), *ts, *tsc;
        if (!qf_is_quantized(&c, t))
            continue;
        char scale_name[512];
        snprintf(scale_name, sizeof scale_name, "%s_scale", t->name);
        uint16_t *w = read_all(src, t->name, &ts);
        uint8_t *stored = read_all(c.rel, t->name, &ts);
        uint16_t *stored_scale = read_all(c.rel, scale_name, &tsc);
        CHECK_MSG(w && stored && stored_scale && tsc->dtype == CLEF_DTYPE_BF16,
                  "%s: source or stored tensors missing", t->name);
        if (w && stored && stored_scale && tsc->dtype == CLEF_DTYPE_BF16) {
            int64_t N = t->shape[0], K = t->shape[1];
            uint8_t *q = malloc((size_t)(N * K));
            float *s = malloc(sizeof(float) * (size_t)N);
            clef_fp8_quantize_weight(w, N, K, q, s);
            size_t bad_q = 0, bad_s = 0;
            for (int64_t k = 0; k < N * K; k++)
                bad_q += q[k] != stored[k];
            for (int64_t r = 0; r < N; r++)
                bad_s += clef_f32_to_bf16(s[r]) != stored_scale[r];
            CHECK_MSG(bad_q == 0 && bad_s == 0, "%s: %zu codes and %zu scales differ", t->name,
                      bad_q, bad_s);
            free(q);
            free(s);
            n++;
        }
        free(w);
        free(stored);
        free(stored_scale);
    }
    CHECK_MSG(n > 0, "no FP8 weight checked");
    printf("fp8: %zu weights re-quantized from bf16-single, bit-identical to the release\n", n);
    clef_release_free(src);
    qf_close(&c);
}

static void check_int8(void) {
    qf_case c;
    if (qf_open(&c, QF_INT8) != 0) {
        CHECK_MSG(0, "cannot open the int8 fixture");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < c.oracle.n_tensors; i++) {
        const char *key = c.oracle.tensors[i].name;
        if (strncmp(key, "qw.", 3) != 0)
            continue;
        char deq[600], qs[600];
        snprintf(deq, sizeof deq, "dequant.%s.weight", key + 3);
        snprintf(qs, sizeof qs, "qs.%s", key + 3);
        const clef_tensor_info *t = st_fixture_find(&c.oracle, deq);
        size_t nw = 0, nq = 0, ns = 0;
        uint16_t *w = qf_oracle_copy(&c, deq, &nw);
        int8_t *expected = qf_oracle_copy(&c, key, &nq);
        float *expected_s = qf_oracle_copy(&c, qs, &ns);
        CHECK_MSG(t && w && expected && expected_s, "%s: oracle tensors missing", key);
        if (t && w && expected && expected_s) {
            int64_t N = t->shape[0], K = t->shape[1];
            int8_t *q = malloc((size_t)(N * K));
            float *s = malloc(sizeof(float) * (size_t)N);
            float *rot = malloc(sizeof(float) * (size_t)(2 * K));
            clef_convrot_quantize_weight(w, N, K, q, s, rot);
            size_t bad_q = 0, bad_s = 0;
            for (int64_t k = 0; k < N * K; k++)
                bad_q += q[k] != expected[k];
            for (int64_t r = 0; r < N; r++)
                bad_s += memcmp(&s[r], &expected_s[r], sizeof(float)) != 0;
            CHECK_MSG(nq == (size_t)(N * K) && ns == (size_t)N * 4 && bad_q == 0 && bad_s == 0,
                      "%s: %zu codes and %zu scales differ from comfy-kitchen", key, bad_q, bad_s);
            free(q);
            free(s);
            free(rot);
            n++;
        }
        free(w);
        free(expected);
        free(expected_s);
    }
    size_t n_quantized = 0;
    for (size_t i = 0; i < clef_release_tensor_count(c.rel); i++)
        n_quantized += qf_is_quantized(&c, clef_release_tensor_at(c.rel, i));
    CHECK_MSG(n > 0 && n == n_quantized, "int8: %zu weights checked, the release has %zu", n,
              n_quantized);
    printf("int8: %zu weights quantized bit-identical to comfy-kitchen\n", n);
    qf_close(&c);
}

int main(void) {
    check_fp8();
    check_int8();
    return test_summary();
}
