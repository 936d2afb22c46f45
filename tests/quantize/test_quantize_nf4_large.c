/*
 * test_quantize_nf4_large.c — the NF4 quantizer of `clef quantize` on weights of millions of
 * elements, against bitsandbytes' quantize_4bit (double quant, CPU) run by
 * scripts/quantize/make_fixtures.py with torch on 1 and 4 threads: packed codes, absmax codes
 * and nested absmax identical (FNV-1a hashes), the double-quant offset bit-identical — the
 * range where torch splits the absmax mean across its threads, which the fixture releases
 * (all under 32,768 blocks) never reach. Also clef_torch_sum_f32 against torch.sum on 1 to
 * 100,000 values with 1, 2, 3 and 8 threads. Inputs come from a 32-bit LCG the script runs
 * too (tests/quantize/fixtures/nf4_large.json holds only hashes and bits).
 */
#include "test.h"

#include "core/io.h"
#include "core/numeric.h"
#include "json/json.h"
#include "quant/nf4_quantize.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* make_fixtures.py's lcg_floats: floats in [-0.05, 0.05). */
static void lcg_floats(float *out, int64_t n, uint32_t seed) {
    uint32_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float f = (float)(s >> 8) * 0x1p-24f;
        out[i] = (f - 0.5f) * 0.1f;
    }
}

static uint64_t fnv1a64(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static int64_t get_int(const json_value *o, const char *key) {
    int64_t v = -1;
    json_get_int64(json_object_get(o, key), &v);
    return v;
}

static void check_nf4_case(const json_value *c, int lanes) {
    const int64_t rows = get_int(c, "rows"), cols = get_int(c, "cols"), n = rows * cols;
    const int threads = (int)get_int(c, "threads");
    const int64_t blocks = (n + 63) / 64;
    float *f = malloc((size_t)n * sizeof *f);
    uint16_t *w = malloc((size_t)n * sizeof *w);
    uint8_t *packed = malloc((size_t)(n + 1) / 2), *codes = malloc((size_t)blocks);
    float *absmax = malloc((size_t)blocks * sizeof *absmax);
    float *nested = malloc((size_t)((blocks + 255) / 256) * sizeof *nested);
    lcg_floats(f, n, (uint32_t)get_int(c, "seed"));
    for (int64_t i = 0; i < n; i++)
        w[i] = clef_f32_to_bf16(f[i]);
    clef_nf4_quantize_blocks(w, 0, n, n, 64, packed, absmax);
    float offset = 0.0f;
    clef_torch_sum_mode mode = {lanes, threads};
    CHECK_EQ_INT(clef_nf4_double_quant(absmax, blocks, 256, mode, codes, nested, &offset), 0);
    char hex[3][17];
    snprintf(hex[0], sizeof hex[0], "%016llx", (unsigned long long)fnv1a64(packed, (size_t)(n + 1) / 2));
    snprintf(hex[1], sizeof hex[1], "%016llx", (unsigned long long)fnv1a64(codes, (size_t)blocks));
    snprintf(hex[2], sizeof hex[2], "%016llx",
             (unsigned long long)fnv1a64(nested, (size_t)((blocks + 255) / 256) * sizeof *nested));
    CHECK_EQ_STR(hex[0], json_get_string(json_object_get(c, "packed")));
    CHECK_EQ_STR(hex[1], json_get_string(json_object_get(c, "absmax")));
    CHECK_EQ_STR(hex[2], json_get_string(json_object_get(c, "nested_absmax")));
    CHECK_EQ_INT(clef_f32_to_bits(offset), get_int(c, "offset_bits"));
    printf("nf4 [%lld, %lld] (%lld blocks), torch threads %d: offset %.9g\n", (long long)rows,
           (long long)cols, (long long)blocks, threads, (double)offset);
    free(f), free(w), free(packed), free(codes), free(absmax), free(nested);
}

int main(void) {
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    if (clef_read_file("tests/quantize/fixtures/nf4_large.json", 1 << 20, &text, &len) != 0 ||
        json_parse(text, len, NULL, &doc, NULL) != 0) {
        CHECK_MSG(0, "cannot read tests/quantize/fixtures/nf4_large.json");
        return test_summary();
    }
    const json_value *root = json_doc_root(doc);
    const int lanes = (int)get_int(root, "lanes");
    const json_value *cases = json_object_get(root, "nf4"), *sums = json_object_get(root, "sums");
    CHECK(cases && sums && cases->type == JSON_ARRAY && sums->type == JSON_ARRAY);
    for (size_t i = 0; cases && i < cases->u.arr.count; i++)
        check_nf4_case(cases->u.arr.items[i], lanes);
    size_t same = 0, n_sums = sums ? sums->u.arr.count : 0;
    for (size_t i = 0; i < n_sums; i++) {
        const json_value *c = sums->u.arr.items[i];
        const int64_t n = get_int(c, "n");
        float *x = malloc((size_t)n * sizeof *x);
        lcg_floats(x, n, (uint32_t)get_int(c, "seed"));
        for (int64_t k = 0; k < n; k++)
            x[k] = x[k] + 0.05f;
        clef_torch_sum_mode mode = {lanes, (int)get_int(c, "threads")};
        const uint32_t got = clef_f32_to_bits(clef_torch_sum_f32(x, n, mode));
        CHECK_MSG((int64_t)got == get_int(c, "sum_bits"), "sum of %lld values, %d threads: bits "
                  "%08x, torch %08llx", (long long)n, mode.threads, got,
                  (unsigned long long)get_int(c, "sum_bits"));
        same += (int64_t)got == get_int(c, "sum_bits");
        free(x);
    }
    printf("torch.sum: %zu of %zu sums bit-identical\n", same, n_sums);
    json_doc_free(doc);
    free(text);
    return test_summary();
}
