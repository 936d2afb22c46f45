/*
 * test_quant_dequant.c — every quantized weight of the three quantized fixture releases
 * (tests/release/fixtures/{nf4,fp8,int8}, written by bitsandbytes, compressed-tensors and
 * comfy-kitchen themselves) dequantized by src/quant and compared BIT FOR BIT with what the
 * library's own dequantizer gives for the same stored bytes (tests/quant/fixtures, made by
 * scripts/quant/make_oracle.py): bitsandbytes dequantize_4bit on CPU, compressed-tensors
 * dequantize, comfy-kitchen TensorWiseINT8Layout.dequantize (ConvRot).
 *
 * Also: the release's NF4 code tables equal bitsandbytes' NF4 table, and the set of tensors
 * compared is exactly the set the oracle holds (none skipped on either side).
 */
#include "quant_fixture.h"
#include "test.h"

#include "core/numeric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_precision(qf_precision p) {
    qf_case c;
    if (qf_open(&c, p) != 0) {
        CHECK_MSG(0, "cannot open the fixture release or its oracle");
        return;
    }
    size_t n_quantized = 0, n_identical = 0;
    uint64_t n_elements = 0;
    for (size_t i = 0; i < clef_release_tensor_count(c.rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(c.rel, i);
        if (!qf_is_quantized(&c, t))
            continue;
        n_quantized++;
        qf_linear w;
        if (qf_linear_load(&c, t->name, &w) != 0) {
            CHECK_MSG(0, "%s: cannot read %s", c.name, t->name);
            qf_linear_free(&w);
            continue;
        }
        if (p == QF_NF4)
            CHECK_MSG(!memcmp(w.nf4.quant_map, clef_nf4_table, sizeof clef_nf4_table),
                      "%s: quant_map is not the NF4 table", t->name);
        char key[600];
        snprintf(key, sizeof key, "dequant.%s", t->stored_name);
        size_t n_bytes = 0;
        uint16_t *expected = qf_oracle_copy(&c, key, &n_bytes);
        CHECK_MSG(expected != NULL, "%s: oracle has no %s", c.name, key);
        uint16_t *ours = qf_linear_dequant_bf16(&c, &w);
        size_t n = (size_t)(w.N * w.K);
        if (expected && n_bytes == n * 2) {
            size_t mismatches = 0, first = 0;
            for (size_t k = 0; k < n; k++)
                if (ours[k] != expected[k] && mismatches++ == 0)
                    first = k;
            CHECK_MSG(mismatches == 0,
                      "%s: %zu of %zu elements differ; first [%zu]: ours %a (0x%04x), "
                      "library %a (0x%04x)",
                      t->stored_name, mismatches, n, first,
                      (double)clef_bf16_to_f32(ours[first]), ours[first],
                      (double)clef_bf16_to_f32(expected[first]), expected[first]);
            n_identical += mismatches == 0;
            n_elements += n;
        } else if (expected) {
            CHECK_MSG(0, "%s: oracle has %zu bytes, weight is [%lld, %lld]", key, n_bytes,
                      (long long)w.N, (long long)w.K);
        }
        free(expected);
        free(ours);
        qf_linear_free(&w);
    }
    size_t n_oracle = 0;
    for (size_t i = 0; i < c.oracle.n_tensors; i++)
        n_oracle += !strncmp(c.oracle.tensors[i].name, "dequant.", 8);
    CHECK_MSG(n_quantized > 0 && n_quantized == n_oracle,
              "%s: %zu quantized tensors in the release, %zu in the oracle", c.name, n_quantized,
              n_oracle);
    printf("%s: %zu of %zu quantized tensors (%llu elements) bit-identical to the library\n",
           c.name, n_identical, n_quantized, (unsigned long long)n_elements);
    qf_close(&c);
}

int main(void) {
    check_precision(QF_NF4);
    check_precision(QF_FP8);
    check_precision(QF_INT8);
    return test_summary();
}
