/*
 * test_vision_tower.c — the vision tower + merger against transformers (fp32, eager):
 * fixtures from scripts/vision/make_tower_fixtures.py for three configs (the demo release;
 * the real head width hd 72 with patch 16; F32 weights, hd 12, exact GELU, a 3x3 table),
 * each with images of several grids and one two-frame input, given the same pixel values.
 *  - every case (all inputs packed in one forward, and each input alone): relative L2 error
 *    of the merged features <= 1e-5 (fp32 on both sides; the difference is summation order)
 *  - packed == alone, bit for bit (no input sees another)
 *  - the same on a guarded backend (the model never touches backend memory from the host)
 *  - refusals: more patches than planned, a grid not a multiple of the merge size, a
 *    missing or reshaped tensor named in the message, a release without a tower
 * Run from the repository root (ctest does).
 */
#include "clef.h"
#include "model/vision.h"
#include "test.h"
#include "tower_fixture.h"

#include <stdlib.h>
#include <string.h>

static double rel_l2(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Run every case of the fixture on be; alone[i] keeps input i's features for the
 * packed == alone check. */
static void check_release(const char *name, const char *dir, clef_backend *be) {
    char path[256];
    snprintf(path, sizeof path, "tests/vision/fixtures/%s/tower.bin", name);
    tower_fixture fx;
    int ok = tower_fixture_load(path, &fx);
    CHECK_MSG(ok, "cannot read fixture %s", path);
    clef_release *rel = NULL;
    int st = clef_release_open(dir, NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "%s: release refused: %s", dir, clef_last_error());
    vision_model *m = NULL;
    if (ok && st == CLEF_OK) {
        st = vision_load_release(rel, be, &m);
        CHECK_MSG(st == CLEF_OK, "%s: load failed: %s", name, clef_last_error());
    }
    if (!m) {
        tower_fixture_free(&fx);
        clef_release_free(rel);
        return;
    }
    CHECK_EQ_INT(vision_patch_dim(m), fx.Pd);
    CHECK_EQ_INT(vision_out_dim(m), fx.M);
    int64_t max_patches = 0;
    for (uint32_t i = 0; i < fx.n_inputs; i++)
        max_patches += (int64_t)fx.in[i].t * fx.in[i].h * fx.in[i].w;
    vision_state *s = NULL;
    CHECK_EQ_INT(vision_state_create(m, be, max_patches, &s), CLEF_OK);
    float *out = malloc(sizeof(float) * (size_t)(max_patches / 4) * fx.M);
    float **alone = calloc(fx.n_inputs, sizeof(float *));
    /* the cases each alone first (cases 1..), then the packed one (case 0) */
    for (uint32_t pass = 0; s && pass < 2; pass++)
        for (uint32_t c = 0; c < fx.n_cases; c++) {
            tower_case *k = &fx.cases[c];
            if ((pass == 0) != (k->n == 1))
                continue;
            vision_input vin[16];
            CHECK(k->n <= 16);
            int64_t rows = 0;
            for (uint32_t j = 0; j < k->n && j < 16; j++) {
                const tower_input *x = &fx.in[k->idx[j]];
                vin[j] = (vision_input){.pixels = x->pixels, .grid_t = x->t, .grid_h = x->h, .grid_w = x->w};
                rows += vision_tokens(m, &vin[j]);
            }
            CHECK_EQ_INT(rows, k->n_out);
            st = vision_forward(m, s, k->n, vin);
            CHECK_MSG(st == CLEF_OK, "%s case %u: forward failed: %s", name, c, clef_last_error());
            if (st != CLEF_OK || rows != k->n_out)
                continue;
            const size_t n = (size_t)rows * fx.M;
            CHECK_EQ_INT(clef_backend_read(be, out, vision_state_output(s), sizeof(float) * n), CLEF_OK);
            double err = rel_l2(out, k->out, n);
            printf("%s case %u (%u inputs, %lld tokens): relative L2 %.3g; first values %.6f %.6f vs %.6f %.6f\n",
                   name, c, k->n, (long long)rows, err, out[0], out[1], k->out[0], k->out[1]);
            CHECK_MSG(err <= 1e-5, "%s case %u: relative L2 error %.3g > 1e-5", name, c, err);
            if (k->n == 1) {
                alone[k->idx[0]] = malloc(sizeof(float) * n);
                memcpy(alone[k->idx[0]], out, sizeof(float) * n);
            } else {
                size_t off = 0;
                for (uint32_t j = 0; j < k->n; j++) {
                    const size_t nj = (size_t)vision_tokens(m, &vin[j]) * fx.M;
                    CHECK_MSG(alone[k->idx[j]] && !memcmp(out + off, alone[k->idx[j]], sizeof(float) * nj),
                              "%s: input %u packed differs from alone", name, k->idx[j]);
                    off += nj;
                }
            }
        }
    /* refusals */
    if (s) {
        const tower_input *x = &fx.in[fx.n_inputs - 1];
        vision_input big = {.pixels = x->pixels, .grid_t = 1, .grid_h = 2 * max_patches, .grid_w = 2};
        CHECK_EQ_INT(vision_forward(m, s, 1, &big), CLEF_ERR_REQUEST_TOO_LONG);
        CHECK_MSG(strstr(clef_last_error(), "patches") != NULL, "message: %s", clef_last_error());
        vision_input odd = {.pixels = x->pixels, .grid_t = 1, .grid_h = 3, .grid_w = 2};
        CHECK_EQ_INT(vision_forward(m, s, 1, &odd), CLEF_ERR_INVALID_ARG);
        vision_input none = {.pixels = NULL, .grid_t = 1, .grid_h = 2, .grid_w = 2};
        CHECK_EQ_INT(vision_forward(m, s, 1, &none), CLEF_ERR_INVALID_ARG);
    }
    for (uint32_t i = 0; i < fx.n_inputs; i++)
        free(alone[i]);
    free(alone);
    free(out);
    vision_state_free(s);
    vision_free(m);
    tower_fixture_free(&fx);
    clef_release_free(rel);
}

/* A release with one tensor hidden or reshaped: the loader refuses it by name. */
typedef struct faulty_source {
    const clef_release *rel;
    const char *victim;
    int reshape;
    clef_tensor_info copy;
} faulty_source;

static const clef_tensor_info *faulty_find(void *user, const char *name) {
    faulty_source *f = user;
    const clef_tensor_info *t = clef_release_find(f->rel, name);
    if (!t || strcmp(name, f->victim) != 0)
        return t;
    if (!f->reshape)
        return NULL;
    f->copy = *t;
    f->copy.shape[f->copy.n_dims - 1] += 1;
    return &f->copy;
}

static int faulty_read(void *user, const clef_tensor_info *t, void *dst) {
    faulty_source *f = user;
    return clef_release_read(f->rel, t, dst);
}

static void check_refusals(clef_backend *be) {
    clef_release *rel = NULL;
    CHECK_EQ_INT(clef_release_open("tests/vision/fixtures/c_odd", NULL, &rel), CLEF_OK);
    if (!rel)
        return;
    const clef_vision_config *cfg = &clef_release_get_config(rel)->vision;
    const char *victims[] = {"vision.patch_embed.proj.weight", "vision.blocks.2.attn.qkv.bias",
                             "vision.merger.linear_fc1.weight"};
    for (int v = 0; v < 3; v++)
        for (int reshape = 0; reshape < 2; reshape++) {
            faulty_source f = {rel, victims[v], reshape, {0}};
            clef_tensor_source ts = {.ctx = &f, .find = faulty_find, .read = faulty_read};
            vision_model *m = NULL;
            CHECK_EQ_INT(vision_load(cfg, &ts, be, &m), reshape ? CLEF_ERR_TENSOR_SHAPE : CLEF_ERR_TENSOR_MISSING);
            CHECK_MSG(strstr(clef_last_error(), victims[v]) != NULL, "message names the tensor: %s",
                      clef_last_error());
            CHECK(m == NULL);
        }
    faulty_source none = {rel, "", 0, {0}};
    clef_tensor_source ts = {.ctx = &none, .find = faulty_find, .read = faulty_read};
    clef_vision_config absent = *cfg;
    absent.present = 0;
    vision_model *m = NULL;
    CHECK_EQ_INT(vision_load(&absent, &ts, be, &m), CLEF_ERR_UNSUPPORTED);
    clef_vision_config odd_heads = *cfg;
    odd_heads.num_heads = 8; /* 48 / 8 = 6 dims per head, not a multiple of 4 */
    CHECK_EQ_INT(vision_load(&odd_heads, &ts, be, &m), CLEF_ERR_CONFIG_INVALID);
    CHECK_EQ_INT(vision_load_release(NULL, be, &m), CLEF_ERR_INVALID_ARG);
    clef_release_free(rel);
}

int main(void) {
    clef_backend *be = NULL;
    clef_backend_params bp = clef_backend_default_params();
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &be), CLEF_OK);
    check_release("demo", "demo/clef-demo", be);
    check_release("b_real_head", "tests/vision/fixtures/b_real_head", be);
    check_release("c_odd", "tests/vision/fixtures/c_odd", be);
    check_refusals(be);
    clef_backend_free(be);
    /* the guarded backend: same results, and any host access to backend memory would fault */
    clef_backend *guarded = NULL;
    bp.guard_host_access = 1;
    bp.guard_arena_bytes = (size_t)1 << 30;
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &guarded), CLEF_OK);
    if (guarded)
        check_release("b_real_head", "tests/vision/fixtures/b_real_head", guarded);
    clef_backend_free(guarded);
    return test_summary();
}
