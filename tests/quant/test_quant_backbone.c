/*
 * test_quant_backbone.c — the quantized fixture releases (NF4, FP8, INT8 ConvRot, written by
 * bitsandbytes, compressed-tensors, comfy-kitchen) loaded AS STORED by the engine's weight
 * loader onto the CPU backend and run by the Qwen3.5 backbone, against the same releases run
 * by transformers + each library with fp32 activations (tests/quant/fixtures/<precision>_backbone.bin,
 * scripts/quant/make_backbone_oracle.py): last hidden state, relative L2 error over all rows.
 *
 * Tolerance. NF4: the engine multiplies the same weight values as the library (fp32(code *
 * absmax): bitsandbytes' inference matmul dequantizes to the input's dtype) in fp32: the BF16
 * backbone's 1e-5. FP8 and INT8 quantize every linear's input per token with the libraries'
 * own quantizers (bit-identical, test_quant_linear), but where the two sides' fp32
 * activations differ in a last bit (fp32 summation order in norms, attention, GDN), a value
 * on a rounding midpoint of the fp8 / int8 grid can take the neighbouring code, a jump of one
 * quantization step that the next layers carry; the whole-model target, 1e-4, is
 * their bound (measured here: <= 3.3e-6). All records in one packed forward give the same
 * bits as each alone (activation scales are per token, GEMMs per output). Resident weight
 * bytes: NF4 and FP8 (quantized from tests/release/fixtures/bf16-single) below the BF16
 * backbone's — the weights stay in their quantized size, no dequantized copy.
 */
#include "backbone_records.h"
#include "backbone_weight_bytes.h"
#include "clef.h"
#include "model/qwen35.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t resident_bytes; /* of the last precision checked */

static void check_precision(clef_backend *be, const char *name, double tolerance) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/release/fixtures/%s", name);
    snprintf(path, sizeof path, "tests/quant/fixtures/%s_backbone.bin", name);
    record *r = NULL;
    int64_t n = 0, D = 0;
    clef_release *rel = NULL;
    int st = clef_release_open(dir, NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "%s: %s", dir, clef_last_error());
    int ok = st == CLEF_OK && load_records(path, &n, &D, &r);
    CHECK_MSG(ok, "cannot read %s", path);
    if (ok) {
        int64_t max_T = 0;
        for (uint32_t i = 0; i < n; i++)
            max_T = r[i].T > max_T ? r[i].T : max_T;
        int64_t total = 0;
        for (uint32_t i = 0; i < n; i++)
            total += r[i].T;
        qwen35_params p = qwen35_default_params();
        p.max_seq_len = max_T;
        p.max_tokens = total;
        qwen35_model *m = NULL;
        qwen35_state *s = NULL;
        st = qwen35_load_release(rel, be, &m);
        if (st == CLEF_OK)
            st = qwen35_state_create(m, be, &p, &s);
        CHECK_MSG(st == CLEF_OK, "%s: load: %s", name, clef_last_error());
        for (uint32_t i = 0; st == CLEF_OK && i < n; i++) {
            int64_t seq[2] = {0, r[i].T};
            CHECK_EQ_INT(qwen35_forward(m, s, 1, seq, r[i].ids, NULL), CLEF_OK);
            const float *out = qwen35_state_output(s);
            double num = 0, den = 0;
            for (uint32_t j = 0; j < r[i].n_rows; j++)
                for (uint32_t d = 0; d < D; d++) {
                    double want = r[i].hidden[(size_t)j * D + d];
                    double got = out[(size_t)r[i].rows[j] * D + d];
                    num += (got - want) * (got - want);
                    den += want * want;
                }
            double err = sqrt(num / den);
            printf("%-4s T=%4lld  rel L2 %.3g   first: ours %+.6f %+.6f  library %+.6f %+.6f\n", name,
                   (long long)r[i].T, err, out[(size_t)r[i].rows[0] * D], out[(size_t)r[i].rows[0] * D + 1],
                   r[i].hidden[0], r[i].hidden[1]);
            CHECK_MSG(err <= tolerance, "%s T=%lld: relative L2 error %.3g > %.0e", name, (long long)r[i].T,
                      err, tolerance);
        }
        if (st == CLEF_OK) {
            /* the records packed into one forward: each row as when alone */
            float *alone = malloc(sizeof(float) * (size_t)total * D);
            int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
            int64_t *seq = malloc(sizeof(int64_t) * (n + 1));
            seq[0] = 0;
            for (uint32_t i = 0; i < n; i++) {
                int64_t one[2] = {0, r[i].T};
                CHECK_EQ_INT(qwen35_forward(m, s, 1, one, r[i].ids, NULL), CLEF_OK);
                memcpy(alone + seq[i] * D, qwen35_state_output(s), sizeof(float) * r[i].T * D);
                memcpy(ids + seq[i], r[i].ids, sizeof(int32_t) * r[i].T);
                seq[i + 1] = seq[i] + r[i].T;
            }
            CHECK_EQ_INT(qwen35_forward(m, s, n, seq, ids, NULL), CLEF_OK);
            CHECK_MSG(!memcmp(qwen35_state_output(s), alone, sizeof(float) * (size_t)total * D),
                      "%s: the %lld records packed differ from each alone", name, (long long)n);
            resident_bytes = qwen35_weight_bytes(m);
            printf("%-4s weights resident on the backend: %zu bytes\n", name, resident_bytes);
            free(alone), free(ids), free(seq);
        }
        qwen35_state_free(s);
        qwen35_free(m);
    }
    records_free(r, n);
    clef_release_free(rel);
}

int main(void) {
    clef_backend *be = NULL;
    clef_backend_params bp = clef_backend_default_params();
    bp.n_threads = 2;
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &be), CLEF_OK);
    if (be) {
        /* nf4 and fp8 were quantized from bf16-single: their backbones must be resident in
         * less memory than its BF16 one (no dequantized copy anywhere) */
        size_t bf16 = weight_bytes_of(be, "tests/release/fixtures/bf16-single");
        check_precision(be, "nf4", 1e-5);
        CHECK_MSG(bf16 > 0 && resident_bytes < bf16, "nf4 resident %zu bytes, bf16 %zu",
                  resident_bytes, bf16);
        check_precision(be, "fp8", 1e-4);
        CHECK_MSG(bf16 > 0 && resident_bytes < bf16, "fp8 resident %zu bytes, bf16 %zu",
                  resident_bytes, bf16);
        printf("bf16-single (the source of nf4 and fp8) resident: %zu bytes\n", bf16);
        check_precision(be, "int8", 1e-4);
    }
    clef_backend_free(be);
    return test_summary();
}
