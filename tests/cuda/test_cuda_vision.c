/*
 * test_cuda_vision.c — the vision tower (patch embedding, interpolated learned positions,
 * blocks with the 2-D RoPE and per-frame attention, 2x2 merger) on the CUDA backend against the
 * CPU backend, given the same pixel values, and records with images end to end on both:
 *  - the three tower fixtures of tests/vision (demo release, BF16, head 16; b_real_head, BF16,
 *    the real head width 72 and patch 16; c_odd, F32 weights, head 12, exact GELU, a 3x3
 *    table), every case (each input alone and all packed in one forward, images and a
 *    two-frame clip): merged features CUDA vs CPU and CUDA vs transformers' fp32 features;
 *    packed == alone bit for bit on the GPU too;
 *  - a random tower at the real width (1152, 16 heads of 72, MLP 4304, patch 16, a 48x48
 *    table; 2 blocks, out 4096; random_vision.h) on a 32x48-patch image, a 20x14 one and a
 *    two-frame 8x8 clip packed: CUDA vs CPU;
 *  - the demo release loaded with device "cuda" and "cpu" (clef_model_load), the 8 records of
 *    1-4 images of tests/vision/fixtures/e2e_images.json with the reference processor's pixel
 *    rows (e2e_fixture.h's hook): every question's logits CUDA vs CPU and CUDA vs the
 *    reference pipeline (joint_schema_model.py in float64), the same decision for every
 *    question (the CPU's margin is printed), max |dp| <= 0.05, equal input_tokens; and all
 *    records in one batch on the GPU answer byte for byte as each alone.
 *
 * Bounds, from how the CUDA backend computes (cuda_backend.h): with BF16 weights the fp32
 * activation rows are rounded to bf16 before each GEMM (relative rounding 2^-9 per element),
 * then bf16 x bf16 with fp32 accumulation, so results carry the bf16-input bound of every
 * other CUDA parity test, relative L2 <= 1e-2 (tests/cuda/test_cuda_model.c). With F32 weights
 * (c_odd) cuBLASLt multiplies in plain fp32 (no TF32) and the tower's head dims (12, 16, 72)
 * run the fp32 attention kernel: fp32 arithmetic in another summation order, held to the CPU
 * tower's own bound vs transformers, 1e-5. The measured errors are printed.
 *
 * Exits 77 (ctest: SKIPPED) when no GPU is visible. Built with -DVISION_DEVICE_CPU, the
 * device under test is a second CPU backend (and "cpu" for the model): a check of the test
 * itself on a machine without a GPU, where every error is 0.
 */
#include "clef.h"
#include "engine/engine_internal.h"
#include "gpu_decide_util.h"
#include "gpu_test_util.h"
#include "json_compact.h"
#include "model/vision.h"
#include "random_vision.h"
#include "test.h"
#include "vision/e2e_fixture.h"
#include "vision/tower_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef VISION_DEVICE_CPU
#define DEVICE_NAME "cpu"
#else
#define DEVICE_NAME "cuda"
#endif

#define BF16_BOUND 1e-2 /* BF16 weights: activations rounded to bf16 before every GEMM */
#define F32_BOUND 1e-5  /* F32 weights: fp32 throughout, another summation order */
#define DP_BOUND 0.05   /* probabilities, so a broken head cannot hide behind equal argmaxes */

static clef_backend *cpu, *dev;

/* One tower on one backend with a state for max_patches. */
typedef struct tower {
    vision_model *m;
    vision_state *s;
    clef_backend *be;
} tower;

static void tower_free(tower *t) {
    vision_state_free(t->s);
    vision_free(t->m);
}

/* Load from src on be and plan max_patches; 0 on failure (the failure is checked). */
static int tower_load(const clef_vision_config *cfg, const clef_tensor_source *src, clef_backend *be,
                      int64_t max_patches, const char *what, tower *t) {
    *t = (tower){NULL, NULL, be};
    int st = vision_load(cfg, src, be, &t->m);
    CHECK_MSG(st == CLEF_OK, "%s: load on %s: %s", what, be == cpu ? "cpu" : DEVICE_NAME, clef_last_error());
    if (st == CLEF_OK) {
        st = vision_state_create(t->m, be, max_patches, &t->s);
        CHECK_MSG(st == CLEF_OK, "%s: state on %s: %s", what, be == cpu ? "cpu" : DEVICE_NAME, clef_last_error());
    }
    return st == CLEF_OK;
}

/* Forward n inputs; the merged features to out (host), *rows set. */
static int tower_run(const tower *t, int64_t n, const vision_input *in, float *out, int64_t *rows) {
    int64_t r = 0;
    for (int64_t i = 0; i < n; i++)
        r += vision_tokens(t->m, &in[i]);
    *rows = r;
    int st = vision_forward(t->m, t->s, n, in);
    if (st == CLEF_OK)
        st = clef_backend_read(t->be, out, vision_state_output(t->s),
                               sizeof(float) * (size_t)(r * vision_out_dim(t->m)));
    return st;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* ---- the tower fixtures of tests/vision --------------------------------------------------- */

static void check_fixture(const char *name, const char *dir, double bound) {
    char path[256];
    snprintf(path, sizeof path, "tests/vision/fixtures/%s/tower.bin", name);
    tower_fixture fx;
    int ok = tower_fixture_load(path, &fx);
    CHECK_MSG(ok, "cannot read fixture %s", path);
    clef_release *rel = NULL;
    int st = clef_release_open(dir, NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "%s: release refused: %s", dir, clef_last_error());
    int64_t max_patches = 0;
    for (uint32_t i = 0; ok && i < fx.n_inputs; i++)
        max_patches += (int64_t)fx.in[i].t * fx.in[i].h * fx.in[i].w;
    tower tc = {0}, tg = {0};
    if (ok && st == CLEF_OK) {
        const clef_vision_config *cfg = &clef_release_get_config(rel)->vision;
        clef_tensor_source src = clef_tensor_source_of_release(rel);
        ok = tower_load(cfg, &src, cpu, max_patches, name, &tc) && tower_load(cfg, &src, dev, max_patches, name, &tg);
    }
    if (!ok || st != CLEF_OK)
        goto out;
    CHECK_EQ_INT(vision_out_dim(tg.m), fx.M);
    const size_t cap = (size_t)(max_patches / 4) * fx.M;
    float *oc = malloc(sizeof(float) * cap), *og = malloc(sizeof(float) * cap);
    float **alone = calloc(fx.n_inputs, sizeof(float *));
    /* the cases each alone first, then the packed ones */
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t c = 0; c < fx.n_cases; c++) {
            const tower_case *k = &fx.cases[c];
            if ((pass == 0) != (k->n == 1))
                continue;
            CHECK_MSG(k->n <= 16, "%s case %u: %u inputs, the test holds 16", name, c, k->n);
            if (k->n > 16)
                continue;
            vision_input vin[16];
            for (uint32_t j = 0; j < k->n; j++) {
                const tower_input *x = &fx.in[k->idx[j]];
                vin[j] = (vision_input){.pixels = x->pixels, .grid_t = x->t, .grid_h = x->h, .grid_w = x->w};
            }
            int64_t rc = 0, rg = 0;
            int sc = tower_run(&tc, k->n, vin, oc, &rc), sg = tower_run(&tg, k->n, vin, og, &rg);
            CHECK_MSG(sc == CLEF_OK && sg == CLEF_OK, "%s case %u: forward failed: %s", name, c, clef_last_error());
            CHECK_EQ_INT(rg, k->n_out);
            if (sc != CLEF_OK || sg != CLEF_OK || rg != k->n_out)
                continue;
            const size_t n = (size_t)rg * fx.M;
            const double e_cpu = rel_l2(og, oc, n), e_tf = rel_l2(og, k->out, n);
            printf("%-12s case %u (%u inputs, %4lld tokens): %s vs cpu rel L2 %.3g (max |diff| %.3g), "
                   "%s vs transformers %.3g, cpu vs transformers %.3g\n",
                   name, c, k->n, (long long)rg, DEVICE_NAME, e_cpu, max_abs_diff(og, oc, n), DEVICE_NAME,
                   e_tf, rel_l2(oc, k->out, n));
            CHECK_MSG(e_cpu <= bound, "%s case %u: %s vs cpu rel L2 %.3g > %.0e", name, c, DEVICE_NAME, e_cpu, bound);
            CHECK_MSG(e_tf <= bound, "%s case %u: %s vs transformers rel L2 %.3g > %.0e", name, c, DEVICE_NAME,
                      e_tf, bound);
            if (k->n == 1) {
                free(alone[k->idx[0]]);
                alone[k->idx[0]] = malloc(sizeof(float) * n);
                memcpy(alone[k->idx[0]], og, sizeof(float) * n);
                continue;
            }
            size_t off = 0;
            for (uint32_t j = 0; j < k->n; j++) {
                const size_t nj = (size_t)vision_tokens(tg.m, &vin[j]) * fx.M;
                CHECK_MSG(alone[k->idx[j]] && !memcmp(og + off, alone[k->idx[j]], sizeof(float) * nj),
                          "%s case %u: input %u packed differs from alone on %s", name, c, k->idx[j], DEVICE_NAME);
                off += nj;
            }
        }
    for (uint32_t i = 0; i < fx.n_inputs; i++)
        free(alone[i]);
    free(alone), free(oc), free(og);
out:
    tower_free(&tc);
    tower_free(&tg);
    tower_fixture_free(&fx);
    clef_release_free(rel);
}

/* ---- a random tower at the real width ------------------------------------------------------ */

static void check_real_width(void) {
    const clef_vision_config cfg = config_vision_qwen35(2, 4096);
    random_vision rv = {.cfg = &cfg, .seed = 14};
    const clef_tensor_source src = random_vision_source(&rv);
    const int64_t grids[3][3] = {{1, 32, 48}, {1, 20, 14}, {2, 8, 8}};
    const int64_t Pd = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size * cfg.patch_size;
    int64_t total = 0;
    for (int i = 0; i < 3; i++)
        total += grids[i][0] * grids[i][1] * grids[i][2];
    tower tc = {0}, tg = {0};
    if (!tower_load(&cfg, &src, cpu, total, "real width", &tc) || !tower_load(&cfg, &src, dev, total, "real width", &tg)) {
        tower_free(&tc), tower_free(&tg);
        return;
    }
    /* pixel rows as the processor makes them: (x / 255 - 0.5) / 0.5 in [-1, 1] */
    float *pixels = malloc(sizeof(float) * (size_t)(total * Pd));
    for (int64_t i = 0; i < total * Pd; i++)
        pixels[i] = (float)(2.0 * rnd_uniform() - 1.0);
    vision_input in[3];
    int64_t off = 0;
    for (int i = 0; i < 3; i++) {
        in[i] = (vision_input){.pixels = pixels + off * Pd, .grid_t = grids[i][0], .grid_h = grids[i][1], .grid_w = grids[i][2]};
        off += grids[i][0] * grids[i][1] * grids[i][2];
    }
    const size_t cap = (size_t)(total / 4 * cfg.out_hidden_size);
    float *oc = malloc(sizeof(float) * cap), *og = malloc(sizeof(float) * cap);
    /* the first image alone, then all three packed */
    for (int n = 1; n <= 3; n += 2) {
        int64_t rc = 0, rg = 0;
        int sc = tower_run(&tc, n, in, oc, &rc), sg = tower_run(&tg, n, in, og, &rg);
        CHECK_MSG(sc == CLEF_OK && sg == CLEF_OK, "real width, %d inputs: forward failed: %s", n, clef_last_error());
        if (sc != CLEF_OK || sg != CLEF_OK)
            continue;
        CHECK_EQ_INT(rg, rc);
        const size_t len = (size_t)rg * (size_t)cfg.out_hidden_size;
        const double e = rel_l2(og, oc, len);
        printf("real width (1152, 16 x 72, 2 blocks, out 4096), %d input(s), %lld tokens: %s vs cpu rel L2 %.3g "
               "(max |diff| %.3g)\n", n, (long long)rg, DEVICE_NAME, e, max_abs_diff(og, oc, len));
        CHECK_MSG(e <= BF16_BOUND, "real width, %d inputs: %s vs cpu rel L2 %.3g > %.0e", n, DEVICE_NAME, e, BF16_BOUND);
    }
    free(pixels), free(oc), free(og);
    tower_free(&tc);
    tower_free(&tg);
}

/* ---- records with images, end to end ------------------------------------------------------- */

/* ||got - want|| / ||want|| against the reference's logits (float64 in the fixture). */
static double rel_l2_ref(const float *got, const json_value *want, int32_t n) {
    double num = 0, den = 0;
    for (int32_t i = 0; i < n; i++) {
        double w = 0;
        json_get_double(json_array_at(want, (size_t)i), &w);
        num += ((double)got[i] - w) * ((double)got[i] - w);
        den += w * w;
    }
    return isnan(num) ? INFINITY : den > 0 ? sqrt(num / den) : sqrt(num);
}

static void check_records(void) {
    e2e_fixture fx;
    int ok = e2e_fixture_load(&fx);
    CHECK_MSG(ok, "cannot read tests/vision/fixtures/e2e_images.json / e2e_pixels.bin");
    clef_model_params mp = clef_model_default_params();
    mp.max_length = 1024;
    clef_model *mc = NULL, *mg = NULL;
    mp.device = "cpu";
    if (ok)
        CHECK_EQ_INT(clef_model_load("demo/clef-demo", &mp, &mc), CLEF_OK);
    mp.device = DEVICE_NAME;
    if (mc) {
        int st = clef_model_load("demo/clef-demo", &mp, &mg);
        CHECK_MSG(st == CLEF_OK, "demo on %s: %s", DEVICE_NAME, clef_last_error());
    }
    if (!mc || !mg) {
        clef_model_free(mc);
        e2e_fixture_free(&fx);
        return;
    }
    /* both read the reference processor's pixel rows: everything after decoding is compared */
    mc->image_pixels = mg->image_pixels = e2e_fixture_pixels;
    mc->image_pixels_ctx = mg->image_pixels_ctx = &fx;
    const size_t n = fx.records->u.arr.count;
    char **bodies = calloc(n, sizeof *bodies), **alone = calloc(n, sizeof *alone);
    size_t *lens = calloc(n, sizeof *lens);
    double worst_cpu = 0, worst_ref = 0, worst_dp = 0;
    int questions = 0;
    for (size_t r = 0; r < n; r++) {
        const json_value *rec = json_array_at(fx.records, r);
        const char *name = json_get_string(json_object_get(rec, "name"));
        const json_value *logits = json_object_get(rec, "logits");
        bodies[r] = render_compact(json_object_get(rec, "request"));
        lens[r] = bodies[r] ? strlen(bodies[r]) : 0;
        clef_result *rc = NULL, *rg = NULL;
        int sc = clef_model_decide_result(mc, bodies[r], lens[r], &rc);
        CHECK_MSG(sc == CLEF_OK, "%s on cpu: %s", name, clef_last_error());
        int sg = clef_model_decide_result(mg, bodies[r], lens[r], &rg);
        CHECK_MSG(sg == CLEF_OK, "%s on %s: %s", name, DEVICE_NAME, clef_last_error());
        if (sc == CLEF_OK && sg == CLEF_OK) {
            CHECK_EQ_INT(rg->input_tokens, rc->input_tokens);
            CHECK_EQ_INT(rg->n_questions, rc->n_questions);
            CHECK_EQ_INT((int64_t)rg->n_questions, (int64_t)logits->u.arr.count);
            double e_cpu = 0, e_ref = 0, dp = 0, min_margin = 1;
            for (int32_t q = 0; q < rc->n_questions && q < rg->n_questions && (size_t)q < logits->u.arr.count; q++) {
                const clef_question_result *qc = &rc->questions[q], *qg = &rg->questions[q];
                CHECK_EQ_INT(qg->n_options, qc->n_options);
                if (qg->n_options != qc->n_options)
                    continue;
                questions++;
                const double ec = rel_l2(qg->logits, qc->logits, (size_t)qg->n_options);
                const double er = rel_l2_ref(qg->logits, json_array_at(logits, (size_t)q), qg->n_options);
                e_cpu = ec > e_cpu ? ec : e_cpu;
                e_ref = er > e_ref ? er : e_ref;
                for (int32_t o = 0; o < qg->n_options; o++) {
                    const double d = fabs((double)qg->probabilities[o] - (double)qc->probabilities[o]);
                    if (!(d <= dp))
                        dp = isnan(d) ? INFINITY : d;
                }
                const double mq = prob_margin(qc->probabilities, qc->n_options);
                min_margin = mq < min_margin ? mq : min_margin;
                const int bc = prob_argmax(qc->probabilities, qc->n_options), bg = prob_argmax(qg->probabilities, qg->n_options);
                CHECK_MSG(bc == bg, "%s question '%s': cpu decides '%s', %s '%s'; the cpu's margin is %.3e", name,
                          qc->id, qc->option_ids[bc], DEVICE_NAME, qg->option_ids[bg], mq);
            }
            printf("%-12s %4d tokens: logits %s vs cpu rel L2 %.3g, vs reference %.3g; max |dp| %.3g; "
                   "decisions equal (smallest cpu margin %.3g)\n",
                   name, rg->input_tokens, DEVICE_NAME, e_cpu, e_ref, dp, min_margin);
            CHECK_MSG(e_cpu <= BF16_BOUND, "%s: logits %s vs cpu rel L2 %.3g > %.0e", name, DEVICE_NAME, e_cpu, BF16_BOUND);
            CHECK_MSG(e_ref <= BF16_BOUND, "%s: logits %s vs reference rel L2 %.3g > %.0e", name, DEVICE_NAME, e_ref,
                      BF16_BOUND);
            CHECK_MSG(dp <= DP_BOUND, "%s: max |dp| %.3g > %.2f", name, dp, DP_BOUND);
            worst_cpu = e_cpu > worst_cpu ? e_cpu : worst_cpu;
            worst_ref = e_ref > worst_ref ? e_ref : worst_ref;
            worst_dp = dp > worst_dp ? dp : worst_dp;
        }
        clef_result_free(rc);
        clef_result_free(rg);
        sg = clef_model_decide(mg, bodies[r], lens[r], &alone[r]);
        CHECK_MSG(sg == CLEF_OK, "%s on %s (json): %s", name, DEVICE_NAME, clef_last_error());
    }
    /* every record in one batch on the device: the answers each got alone, byte for byte */
    char **batch = calloc(n, sizeof *batch);
    int *statuses = calloc(n, sizeof *statuses);
    int st = clef_model_decide_batch(mg, n, (const char *const *)bodies, lens, batch, statuses, NULL);
    CHECK_MSG(st == CLEF_OK, "batch on %s: %s", DEVICE_NAME, clef_last_error());
    int same = 0;
    for (size_t r = 0; r < n; r++) {
        const int eq = batch[r] && alone[r] && !strcmp(batch[r], alone[r]);
        CHECK_MSG(eq, "record %zu: the batch answer on %s differs from the one alone", r, DEVICE_NAME);
        same += eq;
        clef_string_free(batch[r]);
        clef_string_free(alone[r]);
        free(bodies[r]);
    }
    clef_memory_info mem = {0};
    clef_model_memory(mg, &mem);
    printf("records with images on %s: %zu records, %d questions, logits rel L2 max %.3g vs cpu, %.3g vs "
           "reference; max |dp| %.3g; batch = alone for %d/%zu; model weights %llu bytes, %llu resident\n",
           DEVICE_NAME, n, questions, worst_cpu, worst_ref, worst_dp, same, n, (unsigned long long)mem.weights,
           (unsigned long long)mem.resident);
    free(batch), free(statuses), free(bodies), free(alone), free(lens);
    clef_model_free(mg);
    clef_model_free(mc);
    e2e_fixture_free(&fx);
}

int main(void) {
#ifndef VISION_DEVICE_CPU
    if (clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return GPU_TEST_SKIPPED;
    }
#endif
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress survives a timeout */
    clef_backend_params p = clef_backend_default_params();
    int st = clef_backend_cpu_create(&p, &cpu);
#ifdef VISION_DEVICE_CPU
    if (st == CLEF_OK)
        st = clef_backend_cpu_create(&p, &dev);
#else
    if (st == CLEF_OK)
        st = clef_backend_cuda_create(0, &dev);
#endif
    if (st != CLEF_OK) {
        fprintf(stderr, "backend creation failed: %s\n", clef_last_error());
        return 1;
    }
    check_fixture("demo", "demo/clef-demo", BF16_BOUND);
    check_fixture("b_real_head", "tests/vision/fixtures/b_real_head", BF16_BOUND);
    check_fixture("c_odd", "tests/vision/fixtures/c_odd", F32_BOUND);
    check_real_width();
    check_records();
    clef_backend_free(dev);
    clef_backend_free(cpu);
    return test_summary();
}
