/*
 * test_vision_cli.c — `clef run --image FILE` (argv[1]: the clef binary), on the demo release
 * with images of tests/vision/fixtures/e2e_images.json written out as PNG files:
 *  - one and two --image flags reach the engine as the record's images: the answer (exit 0)
 *    reports one usage.images entry per flag, with its processed size and vision tokens;
 *  - a file that is not PNG / JPEG / WebP is refused by name before the release is opened;
 *  - five --image flags are refused by the record's validation (at most 4 images), also
 *    before the release is opened (the message does not mention loading);
 *  - a missing file is refused by name;
 *  - --min-pixels 64 --max-pixels 4096 (the bounds the e2e fixture's reference processor used)
 *    give each image the processed size transformers' image processor gave it;
 *  - --video with the first video record of tests/vision/fixtures/e2e_videos.json (its AVI
 *    written out, --video-min-pixels / --video-max-pixels = the fixture's bounds): the answers
 *    and usage.input_tokens equal systemone()'s, usage.videos the reference's grid;
 *  - --max-pixels under the release's minimum is refused naming both; a file that is not a
 *    video is refused by name before the release is opened.
 * Run from the repository root (ctest does).
 */
#include "test.h"

#include "clef.h"
#include "core/io.h"
#include "json_compact.h"
#include "json/json.h"
#include "media/base64.h"
#include "media/video_processor.h"
#include "run_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *clef_bin;

static int run2(const char *args, char **out, char **err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s run %s", clef_bin, args);
    return run_cmd(cmd, out, err);
}

static int has(const char *text, const char *what) { return strstr(text ? text : "", what) != NULL; }

/* Image i of the e2e fixture (a PNG sent as a data URL or {content_type, base64}) to path. */
static int write_png(const json_value *images, size_t i, const char *path) {
    const json_value *key = json_object_get(json_array_at(images, i), "key");
    const char *b64 = key->type == JSON_STRING ? strchr(key->u.str.ptr, ',') + 1
                                               : json_get_string(json_object_get(key, "base64"));
    uint8_t *bytes = NULL;
    size_t n = 0;
    if (!b64 || clef_base64_decode(b64, strlen(b64), "fixture", &bytes, &n) != CLEF_OK)
        return 0;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(bytes, 1, n, f) == n;
    if (f)
        ok = fclose(f) == 0 && ok;
    free(bytes);
    return ok;
}

static int64_t get_int(const json_value *v) {
    int64_t x = -1;
    json_get_int64(v, &x);
    return x;
}

/* The base64 payload of a data URL or {content_type, base64} field, decoded to path. */
static int write_field(const json_value *key, const char *path) {
    const char *b64 = key->type == JSON_STRING ? strchr(key->u.str.ptr, ',') + 1
                                               : json_get_string(json_object_get(key, "base64"));
    uint8_t *bytes = NULL;
    size_t n = 0;
    if (!b64 || clef_base64_decode(b64, strlen(b64), "fixture", &bytes, &n) != CLEF_OK)
        return 0;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(bytes, 1, n, f) == n;
    if (f)
        ok = fclose(f) == 0 && ok;
    free(bytes);
    return ok;
}

/* `clef run ARGS` must succeed; its parsed answer (NULL on failure). */
static json_doc *run_json(const char *args, const char *what) {
    char *out = NULL, *err = NULL;
    int rc = run2(args, &out, &err);
    CHECK_MSG(rc == 0, "%s: exit %d: %s", what, rc, err);
    json_doc *ans = NULL;
    if (rc == 0)
        CHECK_MSG(json_parse(out, strlen(out), NULL, &ans, NULL) == 0, "%s: %s", what, out);
    free(out), free(err);
    return ans;
}

/* --min-pixels / --max-pixels: the sizes the reference processor made with those bounds. */
static void check_pixel_flags(const json_value *images, char png[2][128], const char *base) {
    char args[2048];
    snprintf(args, sizeof args, "%s --min-pixels 64 --max-pixels 4096 --image %s --image %s",
             base, png[0], png[1]);
    json_doc *ans = run_json(args, "--min-pixels / --max-pixels");
    const json_value *u = ans ? json_object_get(json_object_get(json_doc_root(ans), "usage"),
                                                "images") : NULL;
    for (size_t i = 0; u && i < 2; i++) {
        const json_value *got = json_array_at(u, i);
        const json_value *size = json_object_get(json_array_at(images, i), "size");
        CHECK_MSG(get_int(json_object_get(got, "width")) == get_int(json_array_at(size, 0)) &&
                  get_int(json_object_get(got, "height")) == get_int(json_array_at(size, 1)),
                  "image %zu: processed %lldx%lld, the reference's %lldx%lld", i,
                  (long long)get_int(json_object_get(got, "width")),
                  (long long)get_int(json_object_get(got, "height")),
                  (long long)get_int(json_array_at(size, 0)),
                  (long long)get_int(json_array_at(size, 1)));
    }
    json_doc_free(ans);
    char *err = NULL;
    snprintf(args, sizeof args, "%s --max-pixels 1000 --image %s", base, png[0]);
    CHECK_EQ_INT(run2(args, NULL, &err), 1);
    CHECK_MSG(has(err, "max_pixels 1000") && has(err, "min_pixels 65536"), "stderr: %s", err);
    free(err);
}

/* --video: the first video record of the video fixture, through the command line. */
static void check_video_flag(const char *dir, const char *base) {
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    CHECK_EQ_INT(clef_read_file("tests/vision/fixtures/e2e_videos.json", 16u << 20, &text, &len),
                 CLEF_OK);
    CHECK(text && json_parse(text, len, NULL, &doc, NULL) == 0);
    free(text);
    if (!doc)
        return;
    const json_value *root = json_doc_root(doc);
    const json_value *rec = json_array_at(json_object_get(root, "records"), 0);
    char avi[256], args[2048];
    snprintf(avi, sizeof avi, "%s/video0.avi", dir);
    CHECK(write_field(json_array_at(json_object_get(json_object_get(rec, "request"), "videos"), 0),
                      avi));
    snprintf(args, sizeof args, "%s --video %s --video-min-pixels %lld --video-max-pixels %lld",
             base, avi, (long long)get_int(json_object_get(root, "video_min_pixels")),
             (long long)get_int(json_object_get(root, "video_max_pixels")));
    json_doc *ans = run_json(args, "--video");
    if (ans) {
        const json_value *got = json_doc_root(ans), *want = json_object_get(rec, "answer");
        char *a = render_compact(json_object_get(got, "answers"));
        char *b = render_compact(json_object_get(want, "answers"));
        CHECK_MSG(a && b && !strcmp(a, b), "--video: answers differ from systemone()'s\n  ours: "
                  "%s\n  want: %s", a, b);
        free(a), free(b);
        const json_value *gu = json_object_get(got, "usage");
        CHECK_EQ_INT(get_int(json_object_get(gu, "input_tokens")),
                     get_int(json_object_get(json_object_get(want, "usage"), "input_tokens")));
        const json_value *v = json_array_at(json_object_get(gu, "videos"), 0);
        const json_value *g = json_array_at(json_object_get(rec, "video_grids"), 0);
        CHECK_MSG(v && get_int(json_object_get(v, "width")) == 4 * get_int(json_array_at(g, 2)) &&
                  get_int(json_object_get(v, "height")) == 4 * get_int(json_array_at(g, 1)),
                  "--video: usage.videos[0] is not the reference's grid x patch 4");
    }
    json_doc_free(ans);
    char *err = NULL;
    snprintf(args, sizeof args, "--model /nonexistent-release --record demo/record.json "
             "--video demo/record.json");
    CHECK_EQ_INT(run2(args, NULL, &err), 1);
    CHECK_MSG(has(err, "--video 'demo/record.json'") && has(err, "not an MP4") &&
              !has(err, "nonexistent"), "stderr: %s", err);
    free(err);
    unlink(avi);
    json_doc_free(doc);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_vision_cli CLEF_BINARY\n");
        return 2;
    }
    clef_bin = argv[1];
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    CHECK_EQ_INT(clef_read_file("tests/vision/fixtures/e2e_images.json", 64u << 20, &text, &len), CLEF_OK);
    CHECK(text && json_parse(text, len, NULL, &doc, NULL) == 0);
    free(text);
    if (!doc)
        return test_summary();
    const json_value *images = json_object_get(json_doc_root(doc), "images");
    char dir[] = "/tmp/clef-vision-cli-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char png[2][128], args[2048];
    for (int i = 0; i < 2; i++) {
        snprintf(png[i], sizeof png[i], "%s/image%d.png", dir, i);
        CHECK(write_png(images, (size_t)i, png[i]));
    }
    const char *base = "--model demo/clef-demo --record demo/record.json --json --quiet";
    /* one and two images */
    for (int n = 1; n <= 2; n++) {
        char *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "%s --image %s%s%s", base, png[0], n > 1 ? " --image " : "",
                 n > 1 ? png[1] : "");
        int rc = run2(args, &out, &err);
        CHECK_MSG(rc == 0, "%d image(s): exit %d: %s", n, rc, err);
        if (rc == 0) {
            json_doc *ans = NULL;
            CHECK(json_parse(out, strlen(out), NULL, &ans, NULL) == 0);
            const json_value *u = ans ? json_object_get(json_object_get(json_doc_root(ans), "usage"), "images") : NULL;
            CHECK_MSG(u && u->type == JSON_ARRAY && u->u.arr.count == (size_t)n,
                      "%d image(s): usage.images has one entry each: %s", n, out);
            json_doc_free(ans);
        }
        free(out), free(err);
    }
    /* not an image: refused by name, before the release is opened */
    {
        char *err = NULL;
        snprintf(args, sizeof args, "--model /nonexistent-release --record demo/record.json "
                 "--image demo/record.json");
        CHECK_EQ_INT(run2(args, NULL, &err), 1);
        CHECK_MSG(has(err, "--image 'demo/record.json'") && has(err, "not a PNG, JPEG or WebP") &&
                  !has(err, "nonexistent"), "stderr: %s", err);
        free(err);
    }
    /* five images: the record's validation refuses it (at most 4), before the release */
    {
        char *err = NULL;
        snprintf(args, sizeof args, "--model /nonexistent-release --record demo/record.json "
                 "--image %s --image %s --image %s --image %s --image %s", png[0], png[1], png[0],
                 png[1], png[0]);
        CHECK_EQ_INT(run2(args, NULL, &err), 1);
        CHECK_MSG(has(err, "record refused") && has(err, "images") && !has(err, "nonexistent"),
                  "stderr: %s", err);
        free(err);
    }
    /* a missing file */
    {
        char *err = NULL;
        snprintf(args, sizeof args, "%s --image %s/missing.png", base, dir);
        CHECK_EQ_INT(run2(args, NULL, &err), 1);
        CHECK_MSG(has(err, "--image") && has(err, "missing.png"), "stderr: %s", err);
        free(err);
    }
    check_pixel_flags(images, png, base);
    if (clef_video_decoding_available())
        check_video_flag(dir, base);
    else
        printf("--video: SKIPPED (built without video decoding)\n");
    for (int i = 0; i < 2; i++)
        unlink(png[i]);
    rmdir(dir);
    json_doc_free(doc);
    return test_summary();
}
