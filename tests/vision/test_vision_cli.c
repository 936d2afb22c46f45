/*
 * test_vision_cli.c — `clef run --image FILE` (argv[1]: the clef binary), on the demo release
 * with images of tests/vision/fixtures/e2e_images.json written out as PNG files:
 *  - one and two --image flags reach the engine as the record's images: the answer (exit 0)
 *    reports one usage.images entry per flag, with its processed size and vision tokens;
 *  - a file that is not PNG / JPEG / WebP is refused by name before the release is opened;
 *  - five --image flags are refused by the record's validation (at most 4 images), also
 *    before the release is opened (the message does not mention loading);
 *  - a missing file is refused by name.
 * Run from the repository root (ctest does).
 */
#include "test.h"

#include "clef.h"
#include "core/io.h"
#include "json/json.h"
#include "media/base64.h"
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
    for (int i = 0; i < 2; i++)
        unlink(png[i]);
    rmdir(dir);
    json_doc_free(doc);
    return test_summary();
}
