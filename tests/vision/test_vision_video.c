/*
 * test_vision_video.c — records with videos (and images + a video) through the engine, against
 * the release's reference pipeline on the demo release: joint_schema_model.py's encode_record
 * with transformers' Qwen3VLProcessor (the real Qwen3VLVideoProcessor, torchvision backend),
 * the Qwen3.5 backbone with its vision tower, JointSchemaHead, systemone(). Fixture:
 * tests/vision/fixtures/e2e_videos.json (scripts/vision/make_e2e_fixtures.py): uncompressed-RGB
 * AVIs sent as data URLs / {content_type, base64}, so FFmpeg's frames are the oracle's exactly.
 *
 * The whole engine path from the AVI bytes (decode, sampling, torchvision's resize, temporal
 * patches, placeholders with timestamps, 3-D positions, per-frame attention in the tower,
 * features at the video_pad rows, backbone, head). Per record:
 *   - the videos' pixel rows bit-identical (SHA-256) to the reference's pixel_values_videos;
 *   - token ids equal encode_record()'s (timestamps "<t seconds>" and the nested
 *     vision_start / vision_end included), 3-D positions get_rope_index()'s (exact);
 *   - logits relative L2 error <= 1e-4 against the oracle evaluated in float64 (the issue's
 *     bound; the value reached is printed);
 *   - the answers equal systemone()'s byte for byte, usage.input_tokens equal, and usage
 *     reports each video's processed size, sampled frames and vision tokens;
 * and all records in one batch give exactly the answers each gets alone. Refusals, each with
 * its status and the field named: a truncated AVI, an image sent as a video, a content type
 * not accepted, a remote URL, five videos (the API takes 4).
 * SKIPPED (77) in a build without video decoding (CMake CLEF_MEDIA_VIDEO).
 */
#include "test.h"
#include "json_compact.h"
#include "record_check.h"
#include "sha256_hex.h"

#include "clef.h"
#include "core/error.h"
#include "core/io.h"
#include "core/strbuf.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "json/json.h"
#include "media/base64.h"
#include "media/video_source.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t get_int(const json_value *v) {
    int64_t x = -1;
    json_get_int64(v, &x);
    return x;
}

/* Pixel rows, ids, positions and usage of the prepared record against the reference. */
static void check_prepared(const clef_model *m, const char *name, const char *body,
                           const json_value *rec) {
    clef_prepared *p = NULL;
    int st = clef_engine_prepare(m, CLEF_REQUEST_RECORD, NULL, body, strlen(body), NULL, &p);
    CHECK_MSG(st == CLEF_OK, "%s: prepare: %s", name, clef_last_error());
    if (!p)
        return;
    /* the videos' rows, concatenated as the reference's pixel_values_videos */
    const json_value *grids = json_object_get(rec, "video_grids");
    CHECK_EQ_INT((int64_t)p->n_videos, (int64_t)grids->u.arr.count);
    size_t floats = 0;
    for (int32_t j = 0; j < p->n_videos; j++) {
        const clef_image_pixels *px = &p->videos[j].pixels;
        const json_value *g = json_array_at(grids, (size_t)j);
        CHECK_MSG(px->grid_t == get_int(json_array_at(g, 0)) &&
                  px->grid_h == get_int(json_array_at(g, 1)) &&
                  px->grid_w == get_int(json_array_at(g, 2)),
                  "%s: video %d grid (%lld, %lld, %lld) differs from the reference's", name,
                  (int)j, (long long)px->grid_t, (long long)px->grid_h, (long long)px->grid_w);
        floats += (size_t)(px->n_rows * px->row_len);
    }
    float *all = malloc(floats * sizeof(float) + 1);
    size_t at = 0;
    for (int32_t j = 0; all && j < p->n_videos; j++) {
        const clef_image_pixels *px = &p->videos[j].pixels;
        memcpy(all + at, px->rows, (size_t)(px->n_rows * px->row_len) * sizeof(float));
        at += (size_t)(px->n_rows * px->row_len);
    }
    char got[65];
    sha256_hex(all, floats * sizeof(float), got);
    const char *want = json_get_string(json_object_get(rec, "video_pixels_sha256"));
    CHECK_MSG(want && !strcmp(got, want), "%s: video pixel rows differ from the reference's "
              "pixel_values_videos", name);
    free(all);
    /* ids and positions */
    const json_value *ids = json_object_get(rec, "ids");
    const json_value *pos = json_object_get(rec, "positions");
    CHECK_EQ_INT((int64_t)p->encoded.n_tokens, (int64_t)ids->u.arr.count);
    int same = p->encoded.n_tokens == (int32_t)ids->u.arr.count;
    for (int32_t t = 0; same && t < p->encoded.n_tokens; t++)
        same = get_int(json_array_at(ids, (size_t)t)) == p->encoded.ids[t];
    CHECK_MSG(same, "%s: token ids differ from encode_record()'s", name);
    int same_pos = same && p->pos != NULL;
    for (int a = 0; same_pos && a < 3; a++)
        for (int32_t t = 0; same_pos && t < p->encoded.n_tokens; t++)
            same_pos = get_int(json_array_at(json_array_at(pos, (size_t)a), (size_t)t)) ==
                       p->pos[a * p->encoded.n_tokens + t];
    CHECK_MSG(same_pos, "%s: 3-D positions differ from get_rope_index()'s", name);
    clef_prepared_free(p);
}

/* Our answer body against systemone()'s: answers byte for byte, input_tokens, and usage's
 * per-video report (processed size = grid x patch, tokens = t * h * w / 4). */
static void check_answer(const char *name, const char *ours, const json_value *rec) {
    json_doc *doc = NULL;
    int ok = ours && json_parse(ours, strlen(ours), NULL, &doc, NULL) == 0;
    CHECK_MSG(ok, "%s: our body does not parse: %s", name, ours ? ours : "(null)");
    if (!ok)
        return;
    const json_value *got = json_doc_root(doc), *want = json_object_get(rec, "answer");
    char *a = render_compact(json_object_get(got, "answers"));
    char *b = render_compact(json_object_get(want, "answers"));
    CHECK_MSG(a && b && !strcmp(a, b), "%s: answers differ\n  ours: %s\n  want: %s", name, a, b);
    free(a), free(b);
    const json_value *gu = json_object_get(got, "usage"), *wu = json_object_get(want, "usage");
    CHECK_EQ_INT(get_int(json_object_get(gu, "input_tokens")),
                 get_int(json_object_get(wu, "input_tokens")));
    const json_value *vids = json_object_get(gu, "videos");
    const json_value *grids = json_object_get(rec, "video_grids");
    CHECK_MSG(vids && vids->type == JSON_ARRAY && vids->u.arr.count == grids->u.arr.count,
              "%s: usage.videos has one entry per video", name);
    int64_t tokens = 0;
    for (size_t j = 0; vids && j < vids->u.arr.count && j < grids->u.arr.count; j++) {
        const json_value *u = json_array_at(vids, j), *g = json_array_at(grids, j);
        const int64_t t = get_int(json_array_at(g, 0)), h = get_int(json_array_at(g, 1)),
                      w = get_int(json_array_at(g, 2));
        CHECK_EQ_INT(get_int(json_object_get(u, "width")), w * 4); /* demo patch 4 */
        CHECK_EQ_INT(get_int(json_object_get(u, "height")), h * 4);
        CHECK_EQ_INT(get_int(json_object_get(u, "vision_tokens")), t * h * w / 4);
        const int64_t frames = get_int(json_object_get(u, "frames"));
        CHECK_MSG(frames > 2 * (t - 1) && frames <= 2 * t, "%s: %lld frames for %lld temporal "
                  "patches", name, (long long)frames, (long long)t);
        tokens += t * h * w / 4;
    }
    const json_value *imgs = json_object_get(gu, "images");
    for (size_t i = 0; imgs && i < imgs->u.arr.count; i++)
        tokens += get_int(json_object_get(json_array_at(imgs, i), "vision_tokens"));
    CHECK_EQ_INT(get_int(json_object_get(gu, "vision_tokens")), tokens);
    json_doc_free(doc);
}

static void check_records(clef_model *m, const json_value *records) {
    const size_t n = records->u.arr.count;
    char **bodies = calloc(n, sizeof *bodies), **alone = calloc(n, sizeof *alone);
    for (size_t r = 0; r < n; r++) {
        const json_value *rec = json_array_at(records, r);
        const char *name = json_get_string(json_object_get(rec, "name"));
        bodies[r] = render_compact(json_object_get(rec, "request"));
        check_prepared(m, name, bodies[r], rec);
        clef_result *res = NULL;
        int st = clef_model_decide_result(m, bodies[r], strlen(bodies[r]), &res);
        CHECK_MSG(st == CLEF_OK, "%s: decide_result: %s", name, clef_last_error());
        const json_value *logits = json_object_get(rec, "logits");
        if (res) {
            double worst = record_worst_logits(res, logits);
            printf("%s: %d tokens, logits relative L2 %.3g\n", name, res->input_tokens, worst);
            CHECK_MSG(worst <= 1e-4, "%s: logits relative L2 error %.3g > 1e-4", name, worst);
        }
        clef_result_free(res);
        st = clef_model_decide(m, bodies[r], strlen(bodies[r]), &alone[r]);
        CHECK_MSG(st == CLEF_OK, "%s: decide: %s", name, clef_last_error());
        check_answer(name, alone[r], rec);
    }
    record_check_batch(m, n, bodies, alone); /* all records in one batch: each answer as alone */
    printf("%zu records with videos compared, and in one batch\n", n);
}

/* One record with the given "videos" list text; decided, expecting status `want` and `field`
 * (and `words`, if given) in the message. */
static void refuse(clef_model *m, const char *videos, int want, const char *field,
                   const char *words, const char *what) {
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "{\"state\":\"x\",\"questions\":{\"q\":{\"type\":\"noul\"}},"
                               "\"videos\":");
    clef_strbuf_append_str(&b, videos);
    clef_strbuf_append_char(&b, '}');
    size_t len = 0;
    char *body = clef_strbuf_take(&b, &len), *out = NULL;
    int st = body ? clef_model_decide(m, body, len, &out) : -1;
    const char *msg = clef_last_error();
    CHECK_MSG(st == want && out == NULL && strstr(msg, field) && (!words || strstr(msg, words)),
              "%s: status %d (%s), want %d naming %s", what, st, msg, want, field);
    printf("refused, %s: %s\n", what, msg);
    clef_string_free(out);
    free(body);
}

static void check_refusals(clef_model *m, const json_value *records) {
    /* the first record's video, cut in its last frame */
    const json_value *v = json_array_at(json_object_get(json_object_get(json_array_at(records, 0),
                                                                        "request"), "videos"), 0);
    const char *url = json_get_string(v);
    const char *comma = url ? strchr(url, ',') : NULL;
    if (comma) {
        uint8_t *bytes = NULL;
        size_t size = 0;
        CHECK_EQ_INT(clef_base64_decode(comma + 1, strlen(comma + 1), "fixture", &bytes, &size),
                     CLEF_OK);
        clef_strbuf b = {0};
        clef_strbuf_append_str(&b, "[\"data:video/x-msvideo;base64,");
        static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const size_t n = size - 400; /* into the last frame, a multiple of 3 is not needed */
        for (size_t i = 0; bytes && i < n; i += 3) {
            unsigned x = (unsigned)bytes[i] << 16 | (i + 1 < n ? (unsigned)bytes[i + 1] << 8 : 0) |
                         (i + 2 < n ? bytes[i + 2] : 0);
            clef_strbuf_append_char(&b, abc[x >> 18 & 63]);
            clef_strbuf_append_char(&b, abc[x >> 12 & 63]);
            clef_strbuf_append_char(&b, i + 1 < n ? abc[x >> 6 & 63] : '=');
            clef_strbuf_append_char(&b, i + 2 < n ? abc[x & 63] : '=');
        }
        clef_strbuf_append_str(&b, "\"]");
        size_t len = 0;
        char *list = clef_strbuf_take(&b, &len);
        if (list)
            refuse(m, list, CLEF_ERR_REQUEST_INVALID, "videos[0]", NULL, "a truncated AVI");
        free(list);
        free(bytes);
    }
    refuse(m, "[{\"content_type\":\"video/mp4\",\"base64\":\"iVBORw0KGgoAAAANSUhEUgAA\"}]",
           CLEF_ERR_REQUEST_INVALID, "videos[0]", "not an MP4", "a PNG sent as video/mp4");
    refuse(m, "[\"data:video/ogg;base64,AAAA\"]", CLEF_ERR_REQUEST_INVALID, "videos[0]",
           "not accepted", "video/ogg");
    refuse(m, "[\"https://example.com/a.mp4\"]", CLEF_ERR_REQUEST_INVALID, "videos", "remote",
           "a remote URL");
    refuse(m, "[\"data:video/mp4;base64,AAAA\",\"data:video/mp4;base64,AAAA\","
              "\"data:video/mp4;base64,AAAA\",\"data:video/mp4;base64,AAAA\","
              "\"data:video/mp4;base64,AAAA\"]",
           CLEF_ERR_REQUEST_INVALID, "videos", NULL, "five videos");
}

int main(void) {
    if (!clef_video_decoding_available()) {
        printf("SKIPPED: built without video decoding (CLEF_MEDIA_VIDEO=OFF)\n");
        return 77;
    }
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    int ok = clef_read_file("tests/vision/fixtures/e2e_videos.json", 16u << 20, &text, &len) ==
                 CLEF_OK && json_parse(text, len, NULL, &doc, NULL) == 0;
    free(text);
    CHECK_MSG(ok, "cannot read tests/vision/fixtures/e2e_videos.json");
    const json_value *root = ok ? json_doc_root(doc) : NULL;
    const json_value *records = root ? json_object_get(root, "records") : NULL;
    clef_model_params mp = clef_model_default_params();
    mp.max_length = 1024;
    clef_model *m = NULL;
    if (records)
        CHECK_EQ_INT(clef_model_load("demo/clef-demo", &mp, &m), CLEF_OK);
    if (m) {
        /* the fixture's processor bounds (the demo release ships no processor files) */
        m->image_params.min_pixels = get_int(json_object_get(root, "image_min_pixels"));
        m->image_params.max_pixels = get_int(json_object_get(root, "image_max_pixels"));
        m->video_params.image.min_pixels = get_int(json_object_get(root, "video_min_pixels"));
        m->video_params.image.max_pixels = get_int(json_object_get(root, "video_max_pixels"));
        check_records(m, records);
        check_refusals(m, records);
    }
    clef_model_free(m);
    json_doc_free(doc);
    return test_summary();
}
