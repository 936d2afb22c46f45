/*
 * e2e_fixture.h — the vision end-to-end fixture (tests/vision/fixtures/e2e_images.json +
 * e2e_pixels.bin, written by scripts/vision/make_e2e_fixtures.py with the release's
 * joint_schema_model.py and transformers' Qwen3VLProcessor): the images (key, grid, resized
 * size, offset of their pixel rows in e2e_pixels.bin), the records (request, ids, 3-D
 * positions, the reference logits and answer), and e2e_fixture_pixels, an image-pixels hook
 * (engine_internal.h's clef_image_pixels_fn) that hands the engine the reference processor's
 * rows of an image instead of decoding it. Shared by tests/vision/test_vision_e2e.c (CPU vs the
 * reference pipeline) and tests/cuda/test_cuda_vision.c (CUDA vs CPU). Run from the
 * repository root.
 */
#ifndef CLEF_TESTS_VISION_E2E_FIXTURE_H
#define CLEF_TESTS_VISION_E2E_FIXTURE_H

#include "clef.h"
#include "core/error.h"
#include "core/io.h"
#include "engine/engine_internal.h"
#include "json/json.h"

#include <stdlib.h>
#include <string.h>

typedef struct e2e_fixture {
    json_doc *doc;
    const json_value *images, *records;
    float *pixels;
    size_t n_pixels;
    int64_t patch_dim;
} e2e_fixture;

/* The image field as sent: a data URL, or the base64 of {content_type, base64}. */
static inline const char *e2e_image_key(const json_value *v) {
    if (v->type == JSON_STRING)
        return v->u.str.ptr;
    return json_get_string(json_object_get(v, "base64"));
}

/* clef_image_pixels_fn over the fixture: the reference processor's rows of that image. */
static inline int e2e_fixture_pixels(void *ctx, const clef_model *m, const json_value *image,
                          const char *what, clef_image_pixels *out) {
    (void)m;
    const e2e_fixture *fx = ctx;
    memset(out, 0, sizeof *out);
    const char *key = e2e_image_key(image);
    for (size_t i = 0; key && i < fx->images->u.arr.count; i++) {
        const json_value *im = json_array_at(fx->images, i);
        const char *k = e2e_image_key(json_object_get(im, "key"));
        if (!k || strcmp(k, key))
            continue;
        int64_t g[3] = {0, 0, 0}, size[2] = {0, 0}, offset = 0, rows = 0;
        for (int a = 0; a < 3; a++)
            json_get_int64(json_array_at(json_object_get(im, "grid"), (size_t)a), &g[a]);
        for (int a = 0; a < 2; a++)
            json_get_int64(json_array_at(json_object_get(im, "size"), (size_t)a), &size[a]);
        json_get_int64(json_object_get(im, "offset"), &offset);
        json_get_int64(json_object_get(im, "rows"), &rows);
        const size_t n = (size_t)rows * (size_t)fx->patch_dim;
        if ((size_t)offset + n > fx->n_pixels)
            return clef_fail(CLEF_ERR_INTERNAL, "%s: fixture pixels out of range", what);
        out->rows = malloc(n * sizeof(float));
        if (!out->rows)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        memcpy(out->rows, fx->pixels + offset, n * sizeof(float));
        *out = (clef_image_pixels){.rows = out->rows, .n_rows = rows, .row_len = fx->patch_dim,
                                   .grid_t = g[0], .grid_h = g[1], .grid_w = g[2],
                                   .resized_w = size[0], .resized_h = size[1]};
        return CLEF_OK;
    }
    return clef_fail(CLEF_ERR_INTERNAL, "%s: not an image of the fixture", what);
}

static inline int e2e_fixture_load(e2e_fixture *fx) {
    memset(fx, 0, sizeof *fx);
    char *text = NULL, *bin = NULL;
    size_t len = 0, bin_len = 0;
    if (clef_read_file("tests/vision/fixtures/e2e_images.json", 64u << 20, &text, &len) != CLEF_OK ||
        clef_read_file("tests/vision/fixtures/e2e_pixels.bin", 64u << 20, &bin, &bin_len) != CLEF_OK) {
        free(text);
        return 0;
    }
    int ok = json_parse(text, len, NULL, &fx->doc, NULL) == 0;
    free(text);
    if (ok) {
        const json_value *root = json_doc_root(fx->doc);
        fx->images = json_object_get(root, "images");
        fx->records = json_object_get(root, "records");
        ok = fx->images && fx->records;
    }
    fx->pixels = (float *)bin;
    fx->n_pixels = bin_len / sizeof(float);
    fx->patch_dim = 3 * 2 * 4 * 4; /* the demo tower: 3 channels, temporal 2, patch 4 */
    return ok;
}

/* Frees what e2e_fixture_load read (accepts a zeroed struct). */
static inline void e2e_fixture_free(e2e_fixture *fx) {
    json_doc_free(fx->doc);
    free(fx->pixels);
    memset(fx, 0, sizeof *fx);
}

#endif /* CLEF_TESTS_VISION_E2E_FIXTURE_H */
