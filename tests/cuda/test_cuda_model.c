/*
 * test_cuda_model.c — the whole Qwen3.5 backbone on the CUDA backend against the CPU fp32
 * reference (and the transformers fixtures behind it):
 *  - the backbone fixture releases (tests/backbone/fixtures, from scripts/backbone/
 *    make_fixtures.py): every record alone and all in one packed batch; last-hidden relative
 *    L2 vs the CPU backend <= 1e-2 and vs transformers' fp32 hidden states <= 1e-2; the batch
 *    equals the records alone bit for bit (rows never depend on each other);
 *  - a random release at the 9B's widths (random_release.h; 4 layers = 3 GDN + 1 attention
 *    and a 32,768-token vocabulary, so the CPU reference stays quick) at 97, 300 and 777
 *    tokens and a packed batch: <= 1e-2.
 * The bound: activations are rounded to bf16 before every BF16 GEMM (cuda_backend.h); the
 * measured errors are printed.
 * Exits 77 (ctest: SKIPPED) when no GPU is visible.
 */
#include "clef.h"
#include "backbone_records.h"
#include "gpu_loaded_model.h"
#include "gpu_test_util.h"
#include "model/qwen35.h"
#include "random_release.h"
#include "test.h"

#include <stdio.h>

static clef_backend *cpu, *gpu;


static void check_fixture(const char *name) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/backbone/fixtures/%s", name);
    snprintf(path, sizeof path, "%s/parity.bin", dir);
    int64_t n = 0, D = 0;
    record *r = NULL;
    clef_release *rel = NULL;
    CHECK_MSG(clef_release_open(dir, NULL, &rel) == CLEF_OK, "%s: %s", dir, clef_last_error());
    CHECK_MSG(load_records(path, &n, &D, &r), "cannot read %s", path);
    if (!rel || !r)
        return;
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
    if (!lc.s || !lg.s)
        goto out;
    float *hc = malloc(sizeof(float) * (size_t)(total * D)), *hg = malloc(sizeof(float) * (size_t)(total * D));
    float *alone = malloc(sizeof(float) * (size_t)(total * D)), *sel = NULL;
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t seq[2] = {0, r[i].T};
        CHECK_EQ_INT(run(&lc, 1, seq, r[i].ids, hc), CLEF_OK);
        CHECK_EQ_INT(run(&lg, 1, seq, r[i].ids, hg), CLEF_OK);
        double e_cpu = rel_l2(hg, hc, (size_t)(r[i].T * D));
        /* vs transformers on the stored rows */
        sel = realloc(sel, sizeof(float) * (size_t)(r[i].n_rows * D));
        for (int64_t j = 0; j < r[i].n_rows; j++)
            memcpy(sel + j * D, hg + (int64_t)r[i].rows[j] * D, sizeof(float) * (size_t)D);
        double e_tf = rel_l2(sel, r[i].hidden, (size_t)(r[i].n_rows * D));
        printf("fixture %-13s T=%5lld  CUDA vs CPU rel L2 %.3g   CUDA vs transformers %.3g\n", name, (long long)r[i].T,
               e_cpu, e_tf);
        CHECK_MSG(e_cpu <= 1e-2, "%s T=%lld: CUDA vs CPU %.3g > 1e-2", name, (long long)r[i].T, e_cpu);
        CHECK_MSG(e_tf <= 1e-2, "%s T=%lld: CUDA vs transformers %.3g > 1e-2", name, (long long)r[i].T, e_tf);
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
    CHECK_MSG(memcmp(hg, alone, sizeof(float) * (size_t)(total * D)) == 0, "%s: CUDA batch differs from records alone", name);
    free(seq), free(ids), free(hc), free(hg), free(alone), free(sel);
out:
    loaded_free(&lc);
    loaded_free(&lg);
    records_free(r, n);
    clef_release_free(rel);
}

/* ---- random release at the 9B's widths --------------------------------------------------- */

static void check_random_9b(void) {
    clef_layer_type types[4];
    clef_text_config cfg = config_9b(4, types);
    cfg.vocab_size = 32768; /* the lookup table only: keeps the two host-side random loads short */
    random_release rr = {.cfg = &cfg, .seed = 9};
    clef_tensor_source src = random_release_source(&rr);
    const int64_t lens[3] = {300, 777, 97};
    const int64_t total = lens[0] + lens[1] + lens[2], D = cfg.hidden_size;
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = 777, p.max_tokens = total;
    loaded lc = {NULL, NULL, cpu}, lg = {NULL, NULL, gpu};
    CHECK_MSG(qwen35_load(&cfg, &src, cpu, &lc.m) == CLEF_OK, "9B-shaped CPU load: %s", clef_last_error());
    CHECK_MSG(qwen35_load(&cfg, &src, gpu, &lg.m) == CLEF_OK, "9B-shaped CUDA load: %s", clef_last_error());
    if (lc.m)
        CHECK_EQ_INT(qwen35_state_create(lc.m, cpu, &p, &lc.s), CLEF_OK);
    if (lg.m)
        CHECK_EQ_INT(qwen35_state_create(lg.m, gpu, &p, &lg.s), CLEF_OK);
    if (!lc.s || !lg.s) {
        loaded_free(&lc), loaded_free(&lg);
        return;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
    for (int64_t i = 0; i < total; i++)
        ids[i] = (int32_t)(rnd_uniform() * (double)cfg.vocab_size);
    float *hc = malloc(sizeof(float) * (size_t)(total * D)), *hg = malloc(sizeof(float) * (size_t)(total * D));
    float *alone = malloc(sizeof(float) * (size_t)(total * D));
    int64_t off = 0;
    for (int i = 0; i < 3; i++) {
        int64_t seq[2] = {0, lens[i]};
        CHECK_EQ_INT(run(&lc, 1, seq, ids + off, hc), CLEF_OK);
        CHECK_EQ_INT(run(&lg, 1, seq, ids + off, hg), CLEF_OK);
        double e = rel_l2(hg, hc, (size_t)(lens[i] * D));
        double maxd = 0;
        for (int64_t j = 0; j < lens[i] * D; j++)
            maxd = fabs((double)hg[j] - hc[j]) > maxd ? fabs((double)hg[j] - hc[j]) : maxd;
        printf("random 9B-width (4 layers) T=%5lld  CUDA vs CPU rel L2 %.3g  max |diff| %.3g\n", (long long)lens[i], e, maxd);
        CHECK_MSG(e <= 1e-2, "9B-shaped T=%lld: CUDA vs CPU %.3g > 1e-2", (long long)lens[i], e);
        memcpy(alone + off * D, hg, sizeof(float) * (size_t)(lens[i] * D));
        off += lens[i];
    }
    int64_t seq[4] = {0, lens[0], lens[0] + lens[1], total};
    CHECK_EQ_INT(run(&lg, 3, seq, ids, hg), CLEF_OK);
    CHECK_MSG(memcmp(hg, alone, sizeof(float) * (size_t)(total * D)) == 0, "9B-shaped: CUDA batch differs from alone");
    free(ids), free(hc), free(hg), free(alone);
    loaded_free(&lc), loaded_free(&lg);
}

int main(void) {
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
    const char *fixtures[] = {"a_pattern", "b_real_heads", "c_odd"};
    for (int i = 0; i < 3; i++)
        check_fixture(fixtures[i]);
    check_random_9b();
    clef_backend_free(gpu);
    clef_backend_free(cpu);
    return test_summary();
}
