/*
 * test_decode_refusals.c — bad images through the whole pixel path (clef_image_process) are
 * refused with the right status and a message naming the field; damaged files never crash
 * (ASan + UBSan in scripts/test.sh).
 *
 *  1. refusals.txt (scripts/media/make_processor_fixtures.py): a JPEG whose frame header claims
 *     2000x1500 over 61x43 data, a JPEG without EOI, cut in half, a PNG whose IHDR claims more
 *     than its data, a broken IDAT CRC, no IEND, a palette PNG without PLTE, a WebP cut in
 *     half, an animated WebP, 0 height, 1x100000, a 60000x60000 bomb in 87 bytes, a JPEG one
 *     row over the 16,000,000-pixel cap — each with the status the file names;
 *  2. a PNG sent as JPEG and a JPEG sent as WebP (wrong content type): refused;
 *  3. 24 images of the processor fixtures (every decoder, EXIF and XMP orientation) cut at 48
 *     lengths: refused (never a partial image);
 *  4. every such image with bytes overwritten at 40 places: OK or refused, nothing else.
 */
#include "clef.h"
#include "media/image_decode.h"
#include "media/image_processor.h"
#include "media/image_source.h"
#include "media_fixture.h"
#include "test.h"

#include <stdlib.h>

/* Small processor settings: these checks are about decoding, not about big outputs. */
static int process(const uint8_t *bytes, size_t size, clef_image_format format, const char *what) {
    clef_image_processor_params params;
    clef_image_processor_default_params(&params);
    params.patch_size = 4;
    params.min_pixels = 64;
    params.max_pixels = 4096;
    clef_image_file file = {format, (uint8_t *)bytes, size};
    clef_image_pixels px;
    int st = clef_image_process(&file, &params, what, &px);
    clef_image_pixels_free(&px);
    return st;
}

static void check_refusal_list(const char *dir) {
    char path[1024], name[128], status[32], pillow[32];
    snprintf(path, sizeof path, "%s/refusals.txt", dir);
    FILE *list = fopen(path, "r");
    CHECK_MSG(list != NULL, "cannot open %s", path);
    if (!list)
        return;
    int n = 0;
    while (fscanf(list, "%127s %31s %31s", name, status, pillow) == 3) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t size = 0;
        uint8_t *bytes = media_fixture_read(path, &size);
        CHECK_MSG(bytes != NULL, "cannot read %s", path);
        if (!bytes)
            continue;
        int want = strcmp(status, "too_long") == 0 ? CLEF_ERR_REQUEST_TOO_LONG
                                                   : CLEF_ERR_REQUEST_INVALID;
        int st = process(bytes, size, clef_image_sniff(bytes, size), "images[3]");
        CHECK_MSG(st == want, "%s: status %d (%s), expected %s", name, st, clef_last_error(),
                  status);
        CHECK_MSG(strstr(clef_last_error(), "images[3]") != NULL,
                  "%s: message does not name the field: %s", name, clef_last_error());
        printf("  %-22s refused (%s; %s): %s\n", name, status, pillow, clef_last_error());
        free(bytes);
        n++;
    }
    fclose(list);
    CHECK_MSG(n == 13, "refusals.txt has %d files, expected 13", n);
}

static const char *const images[] = {
    "rgb.png", "rgba.png", "gray16.png", "rgb16.png", "palette_short.png", "palette_4bit.png",
    "gray_2bit.png", "interlaced.png", "exif6.png", "exif8_after.png", "rgb420.jpg",
    "rgb444.jpg", "gray.jpg", "cmyk.jpg", "progressive.jpg", "exif6.jpg", "lossy.webp",
    "lossless.webp", "alpha_lossy.webp", "alpha_lossless.webp", "exif6.webp", "xmp6.jpg",
    "xmp5.webp", "xmp8_itxt.png",
};

static void check_damaged(const char *dir) {
    char path[1024];
    int cuts = 0, corrupted = 0, corrupted_ok = 0;
    for (size_t f = 0; f < sizeof images / sizeof images[0]; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, images[f]);
        size_t size = 0;
        uint8_t *bytes = media_fixture_read(path, &size);
        CHECK_MSG(bytes != NULL, "cannot read %s", path);
        if (!bytes)
            continue;
        const clef_image_format format = clef_image_sniff(bytes, size);
        CHECK_MSG(process(bytes, size, format, images[f]) == CLEF_OK, "%s: %s", images[f],
                  clef_last_error());
        /* cut: every prefix length in 40 steps, and the last 8 lengths */
        for (size_t i = 0; i < 48; i++) {
            size_t len = i < 40 ? size * i / 40 : size - (48 - i);
            int st = process(bytes, len, format, images[f]);
            CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID, "%s cut to %zu of %zu bytes: status %d (%s)",
                      images[f], len, size, st, st ? clef_last_error() : "accepted");
            cuts++;
        }
        /* overwrite: 8 bytes at 40 places after the signature */
        uint8_t *copy = malloc(size);
        for (size_t i = 0; copy && i < 40; i++) {
            memcpy(copy, bytes, size);
            size_t at = 12 + (size - 12) * i / 40;
            for (size_t k = 0; k < 8 && at + k < size; k++)
                copy[at + k] ^= (uint8_t)(0x5a + 37 * k + i);
            int st = process(copy, size, format, images[f]);
            CHECK_MSG(st == CLEF_OK || st == CLEF_ERR_REQUEST_INVALID ||
                          st == CLEF_ERR_REQUEST_TOO_LONG,
                      "%s overwritten at %zu: status %d (%s)", images[f], at, st,
                      clef_last_error());
            corrupted++;
            corrupted_ok += st == CLEF_OK;
        }
        free(copy);
        free(bytes);
    }
    printf("damaged: %d truncations refused; %d overwritten files: %d decoded, %d refused, no "
           "crash\n",
           cuts, corrupted, corrupted_ok, corrupted - corrupted_ok);
}

static void check_wrong_type(const char *dir) {
    const char *cases[][2] = {{"rgb.png", "jpeg"}, {"rgb420.jpg", "webp"}, {"lossy.webp", "png"}};
    char path[1024];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, cases[i][0]);
        size_t size = 0;
        uint8_t *bytes = media_fixture_read(path, &size);
        if (!bytes) {
            CHECK_MSG(0, "cannot read %s", path);
            continue;
        }
        clef_image_format declared = strcmp(cases[i][1], "jpeg") == 0   ? CLEF_IMAGE_JPEG
                                     : strcmp(cases[i][1], "webp") == 0 ? CLEF_IMAGE_WEBP
                                                                        : CLEF_IMAGE_PNG;
        int st = process(bytes, size, declared, "images[0]");
        CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID, "%s declared %s: status %d", cases[i][0],
                  cases[i][1], st);
        free(bytes);
    }
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
    check_refusal_list(argv[1]);
    check_wrong_type(argv[1]);
    check_damaged(argv[1]);
    return test_summary();
}
