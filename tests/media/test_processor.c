/*
 * test_processor.c — pixel decoding and the image processor against transformers' Qwen2-VL
 * PIL image processor and Pillow (fixtures from scripts/media/make_processor_fixtures.py).
 *
 * For every case of cases.txt (49 files: PNG in every color type and bit depth, palettes with
 * tRNS and short palettes, interlaced, eXIf before and after the image data; JPEG 4:2:0 /
 * 4:2:2 / 4:4:4, gray, Adobe CMYK, progressive, EXIF orientations 1..8; WebP lossy, lossless,
 * with alpha, with EXIF; orientation from XMP only (JPEG APP1, WebP XMP chunk, PNG iTXt and
 * tEXt) and EXIF 1 overriding XMP 6; 1x1, 3x2, 200x1, 1x200, 3x577, 4000x4000 = the 16 MP cap; processor
 * settings of Qwen3.5, patch 14, the demo's patch 4, small and large pixel bounds), three
 * stages are compared, each BIT-EXACT (SHA-256 of the bytes):
 *   1. the decoded RGB image (EXIF orientation applied) = Pillow's
 *      exif_transpose(open(f)).convert("RGB") as transformers' load_image returns it;
 *   2. the resize to the smart_resize size = Pillow's resize(..., BICUBIC);
 *   3. pixel_values (float32) and image_grid_thw = Qwen2VLImageProcessorPil's output.
 * The bound is 0 — identical bytes — and it is justified: every step of the reference is
 * integer arithmetic (libpng / libjpeg-turbo islow / libwebp, Pillow's conversions and
 * fixed-point resample) followed by one float64 multiply and two float32 operations, which
 * clef performs in the same order and precision. A mismatch prints sampled values side by
 * side. resize.txt adds 45 resizes (up, down, mixed, 1x1, 1000x10 -> 3x900) of a synthetic
 * image built here, against Pillow. Stage 3 runs with the PIL backend's arithmetic
 * (CLEF_IMAGE_BACKEND_PIL).
 *
 * cases_torchvision.txt: the same 54 cases through the default, torchvision backend
 * (Qwen2VLImageProcessor, what AutoProcessor builds with torchvision installed): grid and
 * pixel_values bit-identical too (torch's uint8 resize, torch_resize.h, and the fused
 * normalization — again integer steps, then two float32 operations in the reference's order).
 */
#include "clef.h"
#include "media/image_decode.h"
#include "media/image_processor.h"
#include "media/image_source.h"
#include "media/pil_resize.h"
#include "media_fixture.h"
#include "test.h"
#include "sha256_hex.h"

#include <stdlib.h>

static void check_resizes(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/resize.txt", dir);
    FILE *list = fopen(path, "r");
    CHECK_MSG(list != NULL, "cannot open %s", path);
    if (!list)
        return;
    int w, h, dw, dh, n = 0;
    char want[65], got[65];
    while (fscanf(list, "%d %d %d %d %64s", &w, &h, &dw, &dh, want) == 5) {
        clef_rgb_image src, dst;
        CHECK(clef_rgb_image_alloc(&src, w, h, "synthetic") == CLEF_OK);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    src.rgb[((size_t)y * w + x) * 3 + c] =
                        (uint8_t)((x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256);
        int st = clef_pil_resize_bicubic(&src, dw, dh, "synthetic", &dst);
        CHECK_EQ_INT(st, CLEF_OK);
        if (st == CLEF_OK) {
            sha256_hex(dst.rgb, (size_t)dw * dh * 3, got);
            CHECK_MSG(strcmp(got, want) == 0, "resize %dx%d -> %dx%d differs from Pillow", w, h,
                      dw, dh);
        }
        clef_rgb_image_free(&dst);
        clef_rgb_image_free(&src);
        n++;
    }
    fclose(list);
    CHECK_MSG(n == 45, "resize.txt has %d cases, expected 45", n);
    printf("resize: %d Pillow BICUBIC resizes compared\n", n);
}

/* One line of cases.txt; returns 0 at the end of the file. */
static int check_case(FILE *list, const char *dir) {
    char name[128], file_name[128], want_decoded[65], want_resized[65], want_pixels[65], got[65];
    long long patch, temporal, merge, min_px, max_px, w, h, rw, rh, gt, gh, gw;
    int n_samples;
    if (fscanf(list, "%127s %127s %lld %lld %lld %lld %lld %lld %lld %64s %lld %lld %64s %lld %lld "
                     "%lld %64s %d",
               name, file_name, &patch, &temporal, &merge, &min_px, &max_px, &w, &h, want_decoded,
               &rw, &rh, want_resized, &gt, &gh, &gw, want_pixels, &n_samples) != 18)
        return 0;
    long long sample_index[32];
    double sample_value[32];
    CHECK(n_samples > 0 && n_samples <= 32);
    for (int i = 0; i < n_samples && i < 32; i++)
        CHECK(fscanf(list, "%lld %lf", &sample_index[i], &sample_value[i]) == 2);

    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file_name);
    size_t size = 0;
    uint8_t *bytes = media_fixture_read(path, &size);
    CHECK_MSG(bytes != NULL, "cannot read %s", path);
    if (!bytes)
        return 1;
    clef_image_file file = {clef_image_sniff(bytes, size), bytes, size};

    /* 1. decoded RGB */
    clef_rgb_image decoded;
    int st = clef_image_decode(&file, name, &decoded);
    CHECK_MSG(st == CLEF_OK, "%s: decode failed: %s", name, clef_last_error());
    if (st == CLEF_OK) {
        CHECK_MSG(decoded.width == w && decoded.height == h, "%s: decoded %lldx%lld, Pillow %lldx%lld",
                  name, (long long)decoded.width, (long long)decoded.height, w, h);
        sha256_hex(decoded.rgb, (size_t)(decoded.width * decoded.height * 3), got);
        CHECK_MSG(strcmp(got, want_decoded) == 0, "%s: decoded RGB differs from Pillow's", name);
        /* 2. the resize alone */
        clef_rgb_image resized;
        st = clef_pil_resize_bicubic(&decoded, rw, rh, name, &resized);
        CHECK_EQ_INT(st, CLEF_OK);
        if (st == CLEF_OK) {
            sha256_hex(resized.rgb, (size_t)(rw * rh * 3), got);
            CHECK_MSG(strcmp(got, want_resized) == 0, "%s: resize to %lldx%lld differs from Pillow's",
                      name, rw, rh);
        }
        clef_rgb_image_free(&resized);
    }
    clef_rgb_image_free(&decoded);

    /* 3. the whole processor */
    clef_image_processor_params params;
    clef_image_processor_default_params(&params);
    params.backend = CLEF_IMAGE_BACKEND_PIL;
    params.patch_size = patch;
    params.temporal_patch_size = temporal;
    params.merge_size = merge;
    params.min_pixels = min_px;
    params.max_pixels = max_px;
    clef_image_pixels px;
    st = clef_image_process(&file, &params, name, &px);
    CHECK_MSG(st == CLEF_OK, "%s: process failed: %s", name, clef_last_error());
    if (st == CLEF_OK) {
        CHECK_MSG(px.grid_t == gt && px.grid_h == gh && px.grid_w == gw,
                  "%s: grid (%lld, %lld, %lld), reference (%lld, %lld, %lld)", name,
                  (long long)px.grid_t, (long long)px.grid_h, (long long)px.grid_w, gt, gh, gw);
        CHECK_EQ_INT(px.row_len, 3 * temporal * patch * patch);
        CHECK_EQ_INT(px.n_rows, gt * gh * gw);
        CHECK_EQ_INT(px.resized_w, rw);
        CHECK_EQ_INT(px.resized_h, rh);
        size_t n = (size_t)(px.n_rows * px.row_len);
        /* pixel_values bytes as little-endian float32: the host order on x86-64 / arm64 */
        sha256_hex(px.rows, n * sizeof(float), got);
        int same = strcmp(got, want_pixels) == 0;
        CHECK_MSG(same, "%s: pixel_values differ from the reference (bound: identical)", name);
        double max_diff = 0;
        for (int i = 0; i < n_samples && i < 32; i++) {
            if (sample_index[i] < 0 || (size_t)sample_index[i] >= n) {
                CHECK_MSG(0, "%s: sample index %lld outside %zu values", name, sample_index[i], n);
                continue;
            }
            double d = fabs((double)px.rows[sample_index[i]] - sample_value[i]);
            if (d > max_diff)
                max_diff = d;
            if (!same)
                fprintf(stderr, "  %s[%lld]: clef %.9g reference %.9g\n", name, sample_index[i],
                        (double)px.rows[sample_index[i]], sample_value[i]);
        }
        CHECK_MSG(max_diff == 0, "%s: sampled values differ by up to %g", name, max_diff);
    }
    clef_image_pixels_free(&px);
    free(bytes);
    return 1;
}

/* cases_torchvision.txt: the whole processor with the default (torchvision) backend. */
static void check_torchvision_cases(const char *dir) {
    char path[1024], name[128], file_name[128], want[65], got[65];
    snprintf(path, sizeof path, "%s/cases_torchvision.txt", dir);
    FILE *list = fopen(path, "r");
    CHECK_MSG(list != NULL, "cannot open %s", path);
    if (!list)
        return;
    long long patch, temporal, merge, min_px, max_px, gt, gh, gw;
    int n = 0;
    while (fscanf(list, "%127s %127s %lld %lld %lld %lld %lld %lld %lld %lld %64s", name,
                  file_name, &patch, &temporal, &merge, &min_px, &max_px, &gt, &gh, &gw,
                  want) == 11) {
        snprintf(path, sizeof path, "%s/%s", dir, file_name);
        size_t size = 0;
        uint8_t *bytes = media_fixture_read(path, &size);
        CHECK_MSG(bytes != NULL, "cannot read %s", path);
        if (!bytes)
            continue;
        clef_image_file file = {clef_image_sniff(bytes, size), bytes, size};
        clef_image_processor_params params;
        clef_image_processor_default_params(&params);
        CHECK_EQ_INT(params.backend, CLEF_IMAGE_BACKEND_TORCHVISION);
        params.patch_size = patch;
        params.temporal_patch_size = temporal;
        params.merge_size = merge;
        params.min_pixels = min_px;
        params.max_pixels = max_px;
        clef_image_pixels px;
        int st = clef_image_process(&file, &params, name, &px);
        CHECK_MSG(st == CLEF_OK, "%s: process failed: %s", name, clef_last_error());
        if (st == CLEF_OK) {
            CHECK_MSG(px.grid_t == gt && px.grid_h == gh && px.grid_w == gw,
                      "%s (torchvision): grid (%lld, %lld, %lld), reference (%lld, %lld, %lld)",
                      name, (long long)px.grid_t, (long long)px.grid_h, (long long)px.grid_w, gt,
                      gh, gw);
            sha256_hex(px.rows, (size_t)(px.n_rows * px.row_len) * sizeof(float), got);
            CHECK_MSG(strcmp(got, want) == 0, "%s: pixel_values differ from the torchvision "
                      "processor's (bound: identical)", name);
        }
        clef_image_pixels_free(&px);
        free(bytes);
        n++;
    }
    fclose(list);
    CHECK_MSG(n == 54, "cases_torchvision.txt has %d cases, expected 54", n);
    printf("torchvision backend: %d cases compared\n", n);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s fixtures/processor\n", argv[0]);
        return 2;
    }
    if (!clef_image_decoding_available()) {
        printf("SKIPPED: built without media decoding (CLEF_MEDIA=OFF)\n");
        return 77;
    }
    check_resizes(argv[1]);
    check_torchvision_cases(argv[1]);
    char path[1024];
    snprintf(path, sizeof path, "%s/cases.txt", argv[1]);
    FILE *list = fopen(path, "r");
    CHECK_MSG(list != NULL, "cannot open %s", path);
    int cases = 0;
    if (list) {
        while (check_case(list, argv[1]))
            cases++;
        fclose(list);
    }
    CHECK_MSG(cases == 54, "cases.txt has %d cases, expected 54", cases);
    printf("processor: %d cases (decode, resize, pixel_values) compared bit for bit\n", cases);
    return test_summary();
}
