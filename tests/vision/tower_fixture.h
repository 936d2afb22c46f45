/*
 * tower_fixture.h — the reader of the vision tower fixtures (tower.bin, written by
 * scripts/vision/make_tower_fixtures.py with transformers fp32): the inputs (grid and pixel
 * rows of each image or clip) and the cases (which inputs run packed in one forward, and the
 * merged features transformers gives them). Layout, little-endian:
 *   "CLEFVT02", u32 n_inputs, u32 patch_dim Pd, u32 out_dim M,
 *   per input: u32 t, h, w, then t*h*w*Pd f32 pixels,
 *   u32 n_cases, per case: u32 n, n x u32 input index, u32 n_out, n_out*M f32 features.
 * Shared by tests/vision/test_vision_tower.c (CPU vs transformers) and
 * tests/cuda/test_cuda_vision.c (CUDA vs CPU).
 */
#ifndef CLEF_TESTS_VISION_TOWER_FIXTURE_H
#define CLEF_TESTS_VISION_TOWER_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tower_input {
    uint32_t t, h, w;
    float *pixels;
} tower_input;

typedef struct tower_case {
    uint32_t n;
    uint32_t *idx;
    uint32_t n_out;
    float *out;
} tower_case;

typedef struct tower_fixture {
    uint32_t n_inputs, Pd, M, n_cases;
    tower_input *in;
    tower_case *cases;
} tower_fixture;

static inline int tower_fixture_read(FILE *f, void *p, size_t size, size_t n) { return fread(p, size, n, f) == n; }

static inline int tower_fixture_load(const char *path, tower_fixture *fx) {
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "rb");
    char magic[8];
    int ok = f && tower_fixture_read(f, magic, 8, 1) && !memcmp(magic, "CLEFVT02", 8) && tower_fixture_read(f, &fx->n_inputs, 4, 1) &&
             tower_fixture_read(f, &fx->Pd, 4, 1) && tower_fixture_read(f, &fx->M, 4, 1);
    if (ok) {
        fx->in = calloc(fx->n_inputs, sizeof(tower_input));
        for (uint32_t i = 0; ok && i < fx->n_inputs; i++) {
            tower_input *x = &fx->in[i];
            ok = tower_fixture_read(f, &x->t, 4, 1) && tower_fixture_read(f, &x->h, 4, 1) && tower_fixture_read(f, &x->w, 4, 1);
            size_t n = ok ? (size_t)x->t * x->h * x->w * fx->Pd : 0;
            ok = ok && (x->pixels = malloc(4 * n)) && tower_fixture_read(f, x->pixels, 4, n);
        }
        ok = ok && tower_fixture_read(f, &fx->n_cases, 4, 1);
        if (ok)
            fx->cases = calloc(fx->n_cases, sizeof(tower_case));
        for (uint32_t c = 0; ok && c < fx->n_cases; c++) {
            tower_case *k = &fx->cases[c];
            ok = tower_fixture_read(f, &k->n, 4, 1) && (k->idx = malloc(4 * (size_t)k->n)) && tower_fixture_read(f, k->idx, 4, k->n) &&
                 tower_fixture_read(f, &k->n_out, 4, 1) && (k->out = malloc(4 * (size_t)k->n_out * fx->M)) &&
                 tower_fixture_read(f, k->out, 4, (size_t)k->n_out * fx->M);
            for (uint32_t j = 0; ok && j < k->n; j++)
                ok = k->idx[j] < fx->n_inputs;
        }
    }
    if (f)
        fclose(f);
    return ok;
}

static inline void tower_fixture_free(tower_fixture *fx) {
    for (uint32_t i = 0; fx->in && i < fx->n_inputs; i++)
        free(fx->in[i].pixels);
    for (uint32_t c = 0; fx->cases && c < fx->n_cases; c++)
        free(fx->cases[c].idx), free(fx->cases[c].out);
    free(fx->in);
    free(fx->cases);
}

#endif /* CLEF_TESTS_VISION_TOWER_FIXTURE_H */
