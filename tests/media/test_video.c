/*
 * test_video.c — the video processor against transformers' Qwen3-VL video processor pieces
 * (fixtures from scripts/media/make_video_fixtures.py):
 *   - 200 frame samplings (totals 1..99,999, NTSC and integer frame rates, fps 0.5..3,
 *     min / max frames) identical to Qwen3VLVideoProcessor.sample_frames;
 *   - 400 video smart_resize results (tiny sides scaled up first, aspect over 200 refused)
 *     identical to qwen3_vl's smart_resize;
 *   - 60 resizes (up, down, mixed, 1x1, 4000x30 -> 640x32, video-like downscales) of a
 *     synthetic image bit-identical (SHA-256) to torchvision's resize(BICUBIC, antialias=True)
 *     on uint8 tensors, the resize the reference video processor applies to frames;
 *   - 4 decoded videos (an uncompressed-RGB AVI of 12 frames at 6 fps under three settings,
 *     a Motion-JPEG AVI): sampled indices, grid, resized size and timestamps identical to the
 *     reference; for the lossless video the pixel rows are bit-identical (SHA-256, so the
 *     bound on pixel values is 0) to the real Qwen3VLVideoProcessor's pixel_values_videos
 *     (torchvision backend) over the same frames;
 *   - refusals: not a video, a truncated video, an image sent as a video.
 * SKIPPED (77) in a build without CLEF_MEDIA_VIDEO.
 */
#include "clef.h"
#include "media/torch_resize.h"
#include "media/video_processor.h"
#include "media_fixture.h"
#include "test.h"
#include "sha256_hex.h"

#include <stdlib.h>

static void check_sampling(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/sampling.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    long long total, mn, mx, n;
    double vfps, fps;
    int cases = 0;
    while (fscanf(f, "%lld %lf %lf %lld %lld %lld", &total, &vfps, &fps, &mn, &mx, &n) == 6) {
        clef_video_params p;
        clef_video_default_params(&p);
        p.fps = fps;
        p.min_frames = mn;
        p.max_frames = mx;
        int64_t got[64], got_n = 0;
        int st = clef_video_sample_indices(total, vfps, &p, "videos[0]", got, &got_n);
        CHECK_EQ_INT(st, CLEF_OK);
        CHECK_MSG(got_n == n, "total %lld at %g fps, sampling %g: %lld frames, reference %lld",
                  total, vfps, fps, (long long)got_n, n);
        for (long long i = 0; i < n; i++) {
            long long want = -1;
            CHECK(fscanf(f, "%lld", &want) == 1);
            if (i < got_n && got[i] != want) {
                CHECK_MSG(0, "total %lld at %g fps: index %lld is %lld, reference %lld", total,
                          vfps, i, (long long)got[i], want);
                break;
            }
        }
        cases++;
    }
    fclose(f);
    CHECK_EQ_INT(cases, 200);
    printf("sampling: %d cases compared\n", cases);
}

static void check_resize(const char *dir) {
    char path[1024], a[32], b[32];
    snprintf(path, sizeof path, "%s/video_resize.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    long long n, h, w, factor, temporal, mn, mx;
    int cases = 0, refused = 0;
    while (fscanf(f, "%lld %lld %lld %lld %lld %lld %lld %31s", &n, &h, &w, &factor, &temporal,
                  &mn, &mx, a) == 8) {
        int want_refused = strcmp(a, "refused") == 0;
        if (!want_refused)
            CHECK(fscanf(f, "%31s", b) == 1);
        int64_t oh = 0, ow = 0;
        int st = clef_video_smart_resize(n, h, w, factor, temporal, mn, mx, "videos[0]", &oh, &ow);
        if (want_refused) {
            CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID, "%lldx%lldx%lld: accepted, reference refuses",
                      n, h, w);
            refused++;
        } else {
            CHECK_MSG(st == CLEF_OK && oh == atoll(a) && ow == atoll(b),
                      "%lld frames %lldx%lld factor %lld: %lldx%lld (status %d), reference %sx%s",
                      n, h, w, factor, (long long)oh, (long long)ow, st, a, b);
        }
        cases++;
    }
    fclose(f);
    CHECK_EQ_INT(cases, 400);
    printf("video smart_resize: %d cases (%d refusals) compared\n", cases, refused);
}

static void check_torch_resizes(const char *dir) {
    char path[1024], want[65], got[65];
    snprintf(path, sizeof path, "%s/torch_resize.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    int w, h, dw, dh, n = 0;
    while (fscanf(f, "%d %d %d %d %64s", &w, &h, &dw, &dh, want) == 5) {
        clef_rgb_image src, dst;
        CHECK(clef_rgb_image_alloc(&src, w, h, "synthetic") == CLEF_OK);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    src.rgb[((size_t)y * w + x) * 3 + c] =
                        (uint8_t)((x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256);
        int st = clef_torch_resize_bicubic(&src, dw, dh, "synthetic", &dst);
        CHECK_EQ_INT(st, CLEF_OK);
        if (st == CLEF_OK) {
            sha256_hex(dst.rgb, (size_t)dw * dh * 3, got);
            CHECK_MSG(strcmp(got, want) == 0, "resize %dx%d -> %dx%d differs from torchvision's",
                      w, h, dw, dh);
        }
        clef_rgb_image_free(&dst);
        clef_rgb_image_free(&src);
        n++;
    }
    fclose(f);
    CHECK_MSG(n == 60, "torch_resize.txt has %d cases, expected 60", n);
    printf("resize: %d torchvision BICUBIC antialiased resizes compared\n", n);
}

static void check_videos(const char *dir) {
    char path[1024], name[64], file[64], digest[65], got[65], fps_s[32], vfps_s[32];
    snprintf(path, sizeof path, "%s/videos.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    long long mnf, mxf, mnp, mxp, patch, temporal, merge, total, n;
    int cases = 0;
    while (fscanf(f, "%63s %63s %31s %lld %lld %lld %lld %lld %lld %lld %lld %31s %lld", name,
                  file, fps_s, &mnf, &mxf, &mnp, &mxp, &patch, &temporal, &merge, &total, vfps_s,
                  &n) == 13) {
        long long idx[64] = {0}, gt, gh, gw, rh, rw, n_ts;
        for (long long i = 0; i < n && i < 64; i++)
            CHECK(fscanf(f, "%lld", &idx[i]) == 1);
        CHECK(fscanf(f, "%lld %lld %lld %lld %lld %64s %lld", &gt, &gh, &gw, &rh, &rw, digest,
                     &n_ts) == 7);
        double ts[64] = {0};
        for (long long i = 0; i < n_ts && i < 64; i++)
            CHECK(fscanf(f, "%lf", &ts[i]) == 1);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        size_t size = 0;
        uint8_t *bytes = media_fixture_read(path, &size);
        CHECK_MSG(bytes != NULL, "cannot read %s", path);
        clef_video_params p;
        clef_video_default_params(&p);
        p.fps = atof(fps_s);
        p.min_frames = mnf;
        p.max_frames = mxf;
        p.image.min_pixels = mnp;
        p.image.max_pixels = mxp;
        p.image.patch_size = patch;
        p.image.temporal_patch_size = temporal;
        p.image.merge_size = merge;
        clef_video_pixels v;
        int st = bytes ? clef_video_process(bytes, size, &p, name, &v) : -1;
        CHECK_MSG(st == CLEF_OK, "%s: %s", name, clef_last_error());
        if (st == CLEF_OK) {
            CHECK_EQ_INT(v.total_frames, total);
            CHECK_MSG(v.video_fps == atof(vfps_s), "%s: fps %g, reference %s", name, v.video_fps,
                      vfps_s);
            CHECK_EQ_INT(v.n_frames, n);
            for (long long i = 0; i < n && i < v.n_frames; i++)
                CHECK_MSG(v.frame_indices[i] == idx[i], "%s: frame %lld is %lld, reference %lld",
                          name, i, (long long)v.frame_indices[i], idx[i]);
            CHECK_MSG(v.pixels.grid_t == gt && v.pixels.grid_h == gh && v.pixels.grid_w == gw,
                      "%s: grid (%lld, %lld, %lld), reference (%lld, %lld, %lld)", name,
                      (long long)v.pixels.grid_t, (long long)v.pixels.grid_h,
                      (long long)v.pixels.grid_w, gt, gh, gw);
            CHECK_EQ_INT(v.pixels.resized_h, rh);
            CHECK_EQ_INT(v.pixels.resized_w, rw);
            CHECK_EQ_INT(n_ts, v.pixels.grid_t);
            for (long long i = 0; i < n_ts && i < v.pixels.grid_t; i++)
                CHECK_MSG(v.timestamps[i] == ts[i], "%s: timestamp %lld %.17g, reference %.17g",
                          name, i, v.timestamps[i], ts[i]);
            if (strcmp(digest, "-") != 0) {
                sha256_hex(v.pixels.rows,
                           (size_t)(v.pixels.n_rows * v.pixels.row_len) * sizeof(float), got);
                CHECK_MSG(strcmp(got, digest) == 0, "%s: pixel rows differ from the reference",
                          name);
            }
        }
        clef_video_pixels_free(&v);
        free(bytes);
        cases++;
    }
    fclose(f);
    CHECK_EQ_INT(cases, 4);
    printf("videos: %d decoded and processed\n", cases);
}

static void check_refusals(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/raw_rgb.avi", dir);
    size_t size = 0;
    uint8_t *bytes = media_fixture_read(path, &size);
    if (!bytes) {
        CHECK_MSG(0, "cannot read %s", path);
        return;
    }
    clef_video_params p;
    clef_video_default_params(&p);
    clef_video_pixels v;
    const size_t cuts[] = {0, 10, 100, 2000, size / 2, size - 300}; /* the last: in frame 11 */
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int st = clef_video_process(bytes, cuts[i], &p, "videos[1]", &v);
        CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID && strstr(clef_last_error(), "videos[1]"),
                  "raw_rgb.avi cut to %zu bytes: status %d (%s)", cuts[i], st, clef_last_error());
        clef_video_pixels_free(&v);
    }
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                  'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0};
    int st = clef_video_process(png, sizeof png, &p, "videos[1]", &v);
    CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID, "a PNG as a video: status %d", st);
    clef_video_pixels_free(&v);
    free(bytes);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s fixtures/video\n", argv[0]);
        return 2;
    }
    check_sampling(argv[1]);
    check_resize(argv[1]);
    check_torch_resizes(argv[1]);
    if (!clef_video_decoding_available()) {
        printf("decoding SKIPPED: built without video decoding (CLEF_MEDIA_VIDEO=OFF)\n");
        return test_summary() != 0 ? 1 : 77;
    }
    check_videos(argv[1]);
    check_refusals(argv[1]);
    return test_summary();
}
