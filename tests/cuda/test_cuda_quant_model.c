/*
 * test_cuda_quant_model.c — the quantized fixture releases (tests/release/fixtures/{nf4,fp8,
 * int8}: written by bitsandbytes, compressed-tensors and comfy-kitchen) loaded as stored onto
 * the CUDA backend and run by the whole Qwen3.5 backbone, against the same releases on the CPU
 * backend (the reference of the same precision) and against the libraries' own forward
 * (tests/quant/fixtures/<precision>_backbone.bin, scripts/quant/make_backbone_oracle.py):
 *  - last-hidden relative L2, GPU vs CPU, <= 1e-2 on every record (the bound), and GPU
 *    vs the library <= 1e-2. Where the GPU path's arithmetic differs from the CPU's, and by
 *    how much per linear: activations rounded to bf16 before every BF16 / NF4 GEMM (the NF4
 *    weights as bf16(code x absmax), bitsandbytes' bf16 model, against the CPU's fp32 product),
 *    FP8 as W8A8 summed in fp32 (the default exact path) against the CPU's QDQ form (equal in
 *    fp32 to ~1e-7: scripts/cuda/fp8_gpu_sensitivity.py), INT8's
 *    butterfly rotation against the CPU's torch-order one (a code can move by one step; the
 *    exact mode is run too and printed), tensor-core attention in bf16 (docs/cuda.md);
 *    Printed, not checked: FP8 on the fp8 tensor cores (clef_backend_cuda_set_fp8_tensor_cores,
 *    the speed modes: cuBLASLt promoting its partial sums, and its fast accumulation), whose ~14-bit partial sums move activations across e4m3 rounding
 *    midpoints of the next layer's quantizer on this hidden-64 fixture: 1e-2 to 3e-2 from the
 *    CPU on the 1- and 7-token records (run12; fp8_gpu_sensitivity.py reproduces it on a CPU
 *    from that rounding alone), which is why it is not the default; beside it each FP8 path
 *    that is not the default, among the exact path and our fp8 wgmma kernel promoting its
 *    partial sums to fp32 every 128 or every 32 of K (clef_backend_cuda_set_fp8_promoted;
 *    run16: 3.3e-2 resp. 5.8e-5 at one token, 1.1e-2 at seven, so not the default either);
 *  - all records in one packed forward equal each record alone, bit for bit;
 *  - the weights stay quantized on the GPU: NF4 and FP8 resident below their BF16 source
 *    (bf16-single) on the same backend.
 * Exits 77 (ctest: SKIPPED) when no GPU is visible.
 */
#include "backend/cuda/cuda_quant.h"
#include "clef.h"
#include "backbone_records.h"
#include "backbone_weight_bytes.h"
#include "gpu_loaded_model.h"
#include "gpu_test_util.h"
#include "model/qwen35.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

static clef_backend *cpu, *gpu;


/* Returns the GPU's resident weight bytes of the release (0 if it did not load). */
static size_t check_precision(const char *name) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/release/fixtures/%s", name);
    snprintf(path, sizeof path, "tests/quant/fixtures/%s_backbone.bin", name);
    int64_t n = 0, D = 0;
    record *r = NULL;
    clef_release *rel = NULL;
    size_t resident = 0;
    CHECK_MSG(clef_release_open(dir, NULL, &rel) == CLEF_OK, "%s: %s", dir, clef_last_error());
    int have = load_records(path, &n, &D, &r);
    CHECK_MSG(have, "cannot read %s", path);
    if (!rel || !have) {
        clef_release_free(rel);
        return 0;
    }
    int64_t total = 0, max_T = 0;
    for (int64_t i = 0; i < n; i++)
        total += r[i].T, max_T = r[i].T > max_T ? r[i].T : max_T;
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = max_T, p.max_tokens = total;
    loaded lc = {NULL, NULL, cpu}, lg = {NULL, NULL, gpu};
    CHECK_EQ_INT(qwen35_load_release(rel, cpu, &lc.m), CLEF_OK);
    int st = qwen35_load_release(rel, gpu, &lg.m);
    CHECK_MSG(st == CLEF_OK, "%s: CUDA load: %s", name, clef_last_error());
    if (lc.m)
        CHECK_EQ_INT(qwen35_state_create(lc.m, cpu, &p, &lc.s), CLEF_OK);
    if (lg.m)
        CHECK_EQ_INT(qwen35_state_create(lg.m, gpu, &p, &lg.s), CLEF_OK);
    if (lc.s && lg.s) {
        float *hc = malloc(sizeof(float) * (size_t)(total * D)), *hg = malloc(sizeof(float) * (size_t)(total * D));
        float *he = malloc(sizeof(float) * (size_t)(total * D)), *alone = malloc(sizeof(float) * (size_t)(total * D));
        float *sel = malloc(sizeof(float) * (size_t)(max_T * D)), *alone_fp32 = malloc(sizeof(float) * (size_t)(max_T * D));
        int64_t off = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t seq[2] = {0, r[i].T};
            CHECK_EQ_INT(run(&lc, 1, seq, r[i].ids, hc), CLEF_OK);
            CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, hg), CLEF_OK);
            clef_backend_cuda_set_convrot_exact(gpu, 1);
            CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, he), CLEF_OK);
            clef_backend_cuda_set_convrot_exact(gpu, 0);
            /* where the GPU's difference comes from: the same with fp32 attention */
            clef_backend_cuda_set_attention_fp32(gpu, 1);
            CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, alone_fp32), CLEF_OK);
            clef_backend_cuda_set_attention_fp32(gpu, 0);
            double e_tc = -1, e_fast = -1, e_fp8[3] = {-1, -1, -1}; /* exact, promoted 128, promoted 32 */
            if (!strcmp(name, "fp8")) { /* the fp8 tensor cores: printed (the header says why) */
                clef_backend_cuda_set_fp8_tensor_cores(gpu, CLEF_CUDA_FP8_TC_PROMOTED);
                CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, he), CLEF_OK);
                e_tc = rel_l2(he, hc, (size_t)(r[i].T * D));
                clef_backend_cuda_set_fp8_tensor_cores(gpu, CLEF_CUDA_FP8_TC_FAST);
                CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, he), CLEF_OK);
                e_fast = rel_l2(he, hc, (size_t)(r[i].T * D));
                clef_backend_cuda_set_fp8_tensor_cores(gpu, CLEF_CUDA_FP8_TC_OFF);
                /* each FP8 path that is not the fp8 tensor cores, whichever is the default */
                const int fp8_default = clef_backend_cuda_fp8_promoted(gpu);
                for (int v = 0; v < 3; v++) {
                    clef_backend_cuda_set_fp8_promoted(gpu, v == 0   ? CLEF_CUDA_FP8_PROMOTE_OFF
                                                            : v == 1 ? CLEF_CUDA_FP8_PROMOTE_128
                                                                     : CLEF_CUDA_FP8_PROMOTE_32);
                    CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, he), CLEF_OK);
                    e_fp8[v] = rel_l2(he, hc, (size_t)(r[i].T * D));
                }
                clef_backend_cuda_set_fp8_promoted(gpu, fp8_default);
                clef_backend_cuda_set_convrot_exact(gpu, 1); /* he back to the INT8-exact run */
                CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, he), CLEF_OK);
                clef_backend_cuda_set_convrot_exact(gpu, 0);
            }
            double e_att = rel_l2(alone_fp32, hc, (size_t)(r[i].T * D));
            double e_cpu = rel_l2(hg, hc, (size_t)(r[i].T * D)), e_exact = rel_l2(he, hc, (size_t)(r[i].T * D));
            for (int64_t j = 0; j < r[i].n_rows; j++)
                memcpy(sel + j * D, hg + (int64_t)r[i].rows[j] * D, sizeof(float) * (size_t)D);
            double e_lib = rel_l2(sel, r[i].hidden, (size_t)(r[i].n_rows * D));
            for (int64_t j = 0; j < r[i].n_rows; j++)
                memcpy(sel + j * D, hc + (int64_t)r[i].rows[j] * D, sizeof(float) * (size_t)D);
            double e_cpu_lib = rel_l2(sel, r[i].hidden, (size_t)(r[i].n_rows * D));
            printf("%-4s T=%4lld  GPU vs CPU rel L2 %.3g (INT8 exact rotation: %.3g, fp32 attention: %.3g)   GPU vs "
                   "library %.3g   (CPU vs library %.3g)",
                   name, (long long)r[i].T, e_cpu, e_exact, e_att, e_lib, e_cpu_lib);
            if (e_tc >= 0)
                printf("   [GPU vs CPU, the default checked above: exact %.3g, promoted-128 %.3g, promoted-32 %.3g; "
                       "fp8 tensor cores (cuBLASLt) %.3g, with fast accumulation %.3g, not checked]",
                       e_fp8[0], e_fp8[1], e_fp8[2], e_tc, e_fast);
            printf("\n");
            CHECK_MSG(e_cpu <= 1e-2, "%s T=%lld: GPU vs CPU %.3g > 1e-2", name, (long long)r[i].T, e_cpu);
            CHECK_MSG(e_lib <= 1e-2, "%s T=%lld: GPU vs library %.3g > 1e-2", name, (long long)r[i].T, e_lib);
            memcpy(alone + off * D, hg, sizeof(float) * (size_t)(r[i].T * D));
            off += r[i].T;
        }
        /* one packed batch: equal to the records alone */
        int64_t *seq = malloc(sizeof(int64_t) * (size_t)(n + 1));
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
        seq[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            memcpy(ids + seq[i], r[i].ids, sizeof(int32_t) * (size_t)r[i].T);
            seq[i + 1] = seq[i] + r[i].T;
        }
        CHECK_EQ_INT(run(&lg, n, seq, ids, hg), CLEF_OK);
        CHECK_MSG(memcmp(hg, alone, sizeof(float) * (size_t)(total * D)) == 0,
                  "%s: GPU batch of %lld records differs from the records alone", name, (long long)n);
        resident = qwen35_weight_bytes(lg.m);
        printf("%-4s weights resident on the GPU: %zu bytes; FP8 matmuls: %s\n", name, resident,
               clef_cuda_fp8_gemm_path(gpu));
        free(seq), free(ids), free(hc), free(hg), free(he), free(alone), free(sel), free(alone_fp32);
    }
    loaded_free(&lc);
    loaded_free(&lg);
    records_free(r, n);
    clef_release_free(rel);
    return resident;
}

int main(void) {
    if (clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return GPU_TEST_SKIPPED;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    clef_backend_params p = clef_backend_default_params();
    if (clef_backend_cpu_create(&p, &cpu) != CLEF_OK || clef_backend_cuda_create(0, &gpu) != CLEF_OK) {
        fprintf(stderr, "backend creation failed: %s\n", clef_last_error());
        return 1;
    }
    size_t bf16 = weight_bytes_of(gpu, "tests/release/fixtures/bf16-single");
    size_t nf4 = check_precision("nf4");
    size_t fp8 = check_precision("fp8");
    check_precision("int8");
    printf("GPU resident: bf16-single %zu bytes, nf4 %zu, fp8 %zu\n", bf16, nf4, fp8);
    CHECK_MSG(bf16 > 0 && nf4 > 0 && nf4 < bf16, "nf4 resident %zu bytes, bf16 %zu", nf4, bf16);
    CHECK_MSG(bf16 > 0 && fp8 > 0 && fp8 < bf16, "fp8 resident %zu bytes, bf16 %zu", fp8, bf16);
    clef_backend_free(gpu);
    clef_backend_free(cpu);
    return test_summary();
}
