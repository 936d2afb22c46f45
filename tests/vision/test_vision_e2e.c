/*
 * test_vision_e2e.c — records with 1 to 4 images through the engine, against the release's
 * reference pipeline (joint_schema_model.py's encode_record with transformers' Qwen3VLProcessor,
 * the Qwen3.5 backbone with its vision tower, JointSchemaHead, systemone()) on the demo release.
 * Fixture: tests/vision/fixtures/e2e_images.json + e2e_pixels.bin (scripts/vision/
 * make_e2e_fixtures.py).
 *
 * Twice: first with the reference processor's pixel rows handed to the engine through its
 * image-pixels hook (everything after decoding: placeholders in the prompt, 3-D positions,
 * the tower, features at the placeholders, the backbone, the head, the answers), then through
 * the engine's own path from the PNG bytes (src/media's decoder and image processor, with the
 * fixture's pixel bounds): its pixel rows equal the reference processor's (max abs diff
 * <= 1e-6, measured 0), and every check below holds again. Per record:
 *   - the token ids equal encode_record()'s, the 3-D positions get_rope_index()'s (exact);
 *   - logits relative L2 error <= 1e-4 against the oracle evaluated in float64 (the issue's
 *     bound; the value reached is printed);
 *   - the answers equal systemone()'s byte for byte, usage.input_tokens equal, and usage
 *     reports each image's processed size and vision tokens;
 * and all records in one batch give exactly the answers each gets alone. Refusals, by name: a
 * "video" of 3 zero bytes (not a video), a truncated PNG, images over the request's 8 MiB
 * total. (Records with real videos: test_vision_video.c.)
 */
#include "test.h"
#include "json_compact.h"
#include "record_check.h"
#include "e2e_fixture.h"

#include "clef.h"
#include "core/error.h"
#include "core/io.h"
#include "core/strbuf.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "json/json.h"
#include "json/render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ids and 3-D positions of the prepared record against encode_record / get_rope_index. */
static void check_encoding(const clef_model *m, const char *name, const char *body,
                           const json_value *rec) {
    clef_prepared *p = NULL;
    int st = clef_engine_prepare(m, CLEF_REQUEST_RECORD, NULL, body, strlen(body), NULL, &p);
    CHECK_MSG(st == CLEF_OK, "%s: prepare: %s", name, clef_last_error());
    if (!p)
        return;
    const json_value *ids = json_object_get(rec, "ids");
    const json_value *pos = json_object_get(rec, "positions");
    CHECK_EQ_INT((int64_t)p->encoded.n_tokens, (int64_t)ids->u.arr.count);
    int same = p->encoded.n_tokens == (int32_t)ids->u.arr.count;
    for (int32_t t = 0; same && t < p->encoded.n_tokens; t++) {
        int64_t id = -1;
        same = json_get_int64(json_array_at(ids, (size_t)t), &id) && id == p->encoded.ids[t];
    }
    CHECK_MSG(same, "%s: token ids differ from encode_record()'s", name);
    int same_pos = same && p->pos != NULL;
    for (int a = 0; same_pos && a < 3; a++)
        for (int32_t t = 0; same_pos && t < p->encoded.n_tokens; t++) {
            int64_t v = -1;
            same_pos = json_get_int64(json_array_at(json_array_at(pos, (size_t)a), (size_t)t), &v) &&
                       v == p->pos[a * p->encoded.n_tokens + t];
        }
    CHECK_MSG(same_pos, "%s: 3-D positions differ from get_rope_index()'s", name);
    clef_prepared_free(p);
}

/* Our answer body against systemone()'s: answers and model byte for byte, input_tokens, and
 * usage's per-image report. */
static void check_answer(const char *name, const char *ours, const json_value *want,
                         const json_value *request) {
    json_doc *doc = NULL;
    int ok = ours && json_parse(ours, strlen(ours), NULL, &doc, NULL) == 0;
    CHECK_MSG(ok, "%s: our body does not parse: %s", name, ours ? ours : "(null)");
    if (!ok)
        return;
    const json_value *got = json_doc_root(doc);
    char *a = render_compact(json_object_get(got, "answers"));
    char *b = render_compact(json_object_get(want, "answers"));
    CHECK_MSG(a && b && !strcmp(a, b), "%s: answers differ\n  ours: %s\n  want: %s", name, a, b);
    free(a), free(b);
    int64_t got_in = -1, want_in = -2, vt = -1;
    const json_value *gu = json_object_get(got, "usage"), *wu = json_object_get(want, "usage");
    json_get_int64(json_object_get(gu, "input_tokens"), &got_in);
    json_get_int64(json_object_get(wu, "input_tokens"), &want_in);
    CHECK_EQ_INT(got_in, want_in);
    const json_value *imgs = json_object_get(gu, "images");
    const json_value *sent = json_object_get(request, "images");
    CHECK_MSG(imgs && sent && imgs->type == JSON_ARRAY && imgs->u.arr.count == sent->u.arr.count,
              "%s: usage.images has one entry per image", name);
    CHECK(json_get_int64(json_object_get(gu, "vision_tokens"), &vt) && vt > 0);
    json_doc_free(doc);
}

static void check_records(clef_model *m, const e2e_fixture *fx) {
    const size_t n = fx->records->u.arr.count;
    char **bodies = calloc(n, sizeof *bodies), **alone = calloc(n, sizeof *alone);
    for (size_t r = 0; r < n; r++) {
        const json_value *rec = json_array_at(fx->records, r);
        const char *name = json_get_string(json_object_get(rec, "name"));
        const json_value *request = json_object_get(rec, "request");
        bodies[r] = render_compact(request);
        check_encoding(m, name, bodies[r], rec);
        /* logits */
        clef_result *res = NULL;
        int st = clef_model_decide_result(m, bodies[r], strlen(bodies[r]), &res);
        CHECK_MSG(st == CLEF_OK, "%s: decide_result: %s", name, clef_last_error());
        const json_value *logits = json_object_get(rec, "logits");
        if (res) {
            double worst = record_worst_logits(res, logits);
            printf("%s: %d tokens, logits relative L2 %.3g (first %.6f vs %.6f)\n", name,
                   res->input_tokens, worst, res->questions[0].logits[0],
                   json_array_at(json_array_at(logits, 0), 0)->u.num.real);
            CHECK_MSG(worst <= 1e-4, "%s: logits relative L2 error %.3g > 1e-4", name, worst);
        }
        clef_result_free(res);
        /* the answer body */
        st = clef_model_decide(m, bodies[r], strlen(bodies[r]), &alone[r]);
        CHECK_MSG(st == CLEF_OK, "%s: decide: %s", name, clef_last_error());
        check_answer(name, alone[r], json_object_get(rec, "answer"), request);
    }
    record_check_batch(m, n, bodies, alone); /* all records in one batch: each answer as alone */
}

/* The engine's own decoder and image processor (src/media) on the fixture's PNG files, with
 * the fixture's pixel bounds: the same grids, and pixel rows within 1e-6 of transformers'
 * torchvision image processor (src/media's parity tests hold the processor to it; this checks that the
 * engine hands the tower what that processor makes). */
static void check_decoder_pixels(clef_model *m, const e2e_fixture *fx) {
    double worst = 0;
    for (size_t i = 0; i < fx->images->u.arr.count; i++) {
        const json_value *im = json_array_at(fx->images, i);
        clef_image_pixels want = {0}, got = {0};
        CHECK_EQ_INT(e2e_fixture_pixels((void *)fx, m, json_object_get(im, "key"), "fixture", &want), CLEF_OK);
        int st = clef_image_pixels_default(NULL, m, json_object_get(im, "key"), "images[0]", &got);
        CHECK_MSG(st == CLEF_OK, "image %zu: %s", i, clef_last_error());
        CHECK_MSG(got.grid_t == want.grid_t && got.grid_h == want.grid_h && got.grid_w == want.grid_w &&
                  got.row_len == want.row_len && got.resized_w == want.resized_w,
                  "image %zu: grid (%lld, %lld, %lld), the reference's (%lld, %lld, %lld)", i,
                  (long long)got.grid_t, (long long)got.grid_h, (long long)got.grid_w,
                  (long long)want.grid_t, (long long)want.grid_h, (long long)want.grid_w);
        if (st == CLEF_OK && got.n_rows == want.n_rows && got.row_len == want.row_len)
            for (int64_t k = 0; k < got.n_rows * got.row_len; k++) {
                double d = fabs((double)got.rows[k] - want.rows[k]);
                worst = d > worst ? d : worst;
            }
        clef_image_pixels_free(&got);
        clef_image_pixels_free(&want);
    }
    printf("engine decoder + processor vs transformers' torchvision image processor: max abs pixel diff %.3g\n", worst);
    CHECK_MSG(worst <= 1e-6, "pixel rows differ by %.3g", worst);
}

/* Refusals through the default path, each by name: a video that is not one, a corrupt image,
 * images over the request's total of decoded bytes (before any is decoded). */
static void check_refusals(clef_model *m) {
    char *out = NULL;
    const char *video = "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"noul\"}},"
                        "\"videos\":[\"data:video/mp4;base64,AAAA\"]}";
    int st = clef_model_decide(m, video, strlen(video), &out);
    CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID && out == NULL && strstr(clef_last_error(), "videos[0]"),
              "3 zero bytes as a video: %d %s", st, clef_last_error());
    /* a PNG signature and nothing else: truncated */
    const char *corrupt = "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"noul\"}},"
                          "\"images\":[{\"content_type\":\"image/png\",\"base64\":\"iVBORw0KGgo=\"}]}";
    st = clef_model_decide(m, corrupt, strlen(corrupt), &out);
    CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID && strstr(clef_last_error(), "images[0]"),
              "a truncated PNG: %d %s", st, clef_last_error());
    /* three images of 2.8 MiB each: over the 8 MiB total */
    const size_t b64_len = (size_t)(2.8 * 1048576) / 3 * 4;
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"noul\"}},\"images\":[");
    for (int i = 0; i < 3; i++) {
        clef_strbuf_append_str(&b, i ? ",\"data:image/png;base64,iVBORw0KGgo" : "\"data:image/png;base64,iVBORw0KGgo");
        for (size_t k = 12; k < b64_len; k++)
            clef_strbuf_append_char(&b, 'A');
        clef_strbuf_append_char(&b, '"');
    }
    clef_strbuf_append_str(&b, "]}");
    size_t len = 0;
    char *big = clef_strbuf_take(&b, &len);
    st = big ? clef_model_decide(m, big, len, &out) : -1;
    CHECK_MSG(st == CLEF_ERR_REQUEST_TOO_LONG && strstr(clef_last_error(), "total"),
              "images over the total: %d %s", st, clef_last_error());
    free(big);
}

int main(void) {
    e2e_fixture fx;
    int ok = e2e_fixture_load(&fx);
    CHECK_MSG(ok, "cannot read tests/vision/fixtures/e2e_images.json / e2e_pixels.bin");
    clef_model_params mp = clef_model_default_params();
    mp.max_length = 1024;
    clef_model *m = NULL;
    if (ok)
        CHECK_EQ_INT(clef_model_load("demo/clef-demo", &mp, &m), CLEF_OK);
    if (m) {
        /* 1. the reference processor's pixels: everything after decoding */
        m->image_pixels = e2e_fixture_pixels;
        m->image_pixels_ctx = &fx;
        check_records(m, &fx);
        /* 2. the engine's own path from the image files, with the fixture's pixel bounds
         * (the demo release ships no preprocessor_config.json) */
        m->image_pixels = clef_image_pixels_default;
        m->image_pixels_ctx = NULL;
        m->image_params.min_pixels = 8 * 8;
        m->image_params.max_pixels = 64 * 64;
        check_decoder_pixels(m, &fx);
        check_records(m, &fx);
        check_refusals(m);
    }
    clef_model_free(m);
    json_doc_free(fx.doc);
    free(fx.pixels);
    return test_summary();
}
