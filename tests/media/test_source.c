/*
 * test_source.c — src/media's input side against oracles nobody here wrote:
 *  - base64: every case of base64.txt decoded exactly as Python's b64decode(validate=True)
 *    does, accepted or refused alike ("strict" cases: '=' after a complete group, accepted
 *    by CPython 3.11 only, refused);
 *  - smart_resize: every case of smart_resize.txt gives transformers' (h, w), or is refused
 *    where transformers raises (aspect over 200, empty sides);
 *  - data URLs / {content_type, base64}: remote URLs, unknown types, a signature of another
 *    format, truncated base64 and the 4 MiB cap are refused with a status and a message
 *    naming the field; well-formed sources give back the bytes sent.
 */
#include "clef.h"
#include "media/base64.h"
#include "media/image_source.h"
#include "media/smart_resize.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

static int hex_value(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decodes hex text ("-" = empty) into buf; returns the byte count. */
static size_t from_hex(const char *hex, uint8_t *buf) {
    if (strcmp(hex, "-") == 0)
        return 0;
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
    return n;
}

static void check_base64_fixture(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    static char verdict[8], in_hex[16384], out_hex[16384];
    static uint8_t in[8192], want[8192];
    int cases = 0, refused = 0;
    while (fscanf(f, "%7s %16383s %16383s", verdict, in_hex, out_hex) == 3) {
        size_t in_len = from_hex(in_hex, in);
        size_t want_len = from_hex(out_hex, want);
        uint8_t *got = NULL;
        size_t got_len = 0;
        int st = clef_base64_decode((const char *)in, in_len, "case", &got, &got_len);
        if (strcmp(verdict, "ok") == 0) {
            CHECK_MSG(st == CLEF_OK, "line %d: Python accepts, clef refuses: %s", cases + 1,
                      clef_last_error());
            CHECK_MSG(st != CLEF_OK || (got_len == want_len && memcmp(got, want, want_len) == 0),
                      "line %d: decoded bytes differ from Python's", cases + 1);
        } else {
            refused++;
            CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID, "line %d: Python refuses, clef gives %d",
                      cases + 1, st);
            CHECK(st == CLEF_OK || strstr(clef_last_error(), "case") != NULL);
        }
        free(got);
        cases++;
    }
    fclose(f);
    CHECK_MSG(cases > 100 && refused > 20, "base64 fixture too small: %d cases", cases);
}

static void check_smart_resize_fixture(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    long long h, w, factor, lo, hi;
    char oh[32], ow[32];
    int cases = 0, refused = 0, mismatches = 0;
    while (fscanf(f, "%lld %lld %lld %lld %lld %31s %31s", &h, &w, &factor, &lo, &hi, oh, ow) ==
           7) {
        int64_t gh = 0, gw = 0;
        int st = clef_smart_resize(h, w, factor, lo, hi, "image", &gh, &gw);
        if (strcmp(oh, "refused") == 0) {
            refused++;
            CHECK_MSG(st == CLEF_ERR_REQUEST_INVALID, "%lldx%lld: transformers refuses, clef %d",
                      h, w, st);
        } else {
            int ok = st == CLEF_OK && gh == atoll(oh) && gw == atoll(ow);
            if (!ok && mismatches++ < 10)
                CHECK_MSG(0, "%lld x %lld (min %lld max %lld): clef %lld x %lld, transformers %s x %s",
                          h, w, lo, hi, (long long)gh, (long long)gw, oh, ow);
            else
                CHECK(ok);
        }
        cases++;
    }
    fclose(f);
    CHECK_MSG(cases > 1000 && refused > 10, "smart_resize fixture too small: %d cases", cases);
    /* The messages name the problem. */
    int64_t gh, gw;
    CHECK_EQ_INT(clef_smart_resize(1, 100000, 32, 65536, 16777216, "images[0]", &gh, &gw),
                 CLEF_ERR_REQUEST_INVALID);
    CHECK(strstr(clef_last_error(), "images[0]") && strstr(clef_last_error(), "aspect ratio"));
    CHECK_EQ_INT(clef_smart_resize(0, 0, 32, 65536, 16777216, "images[1]", &gh, &gw),
                 CLEF_ERR_REQUEST_INVALID);
    CHECK(strstr(clef_last_error(), "images[1]") && strstr(clef_last_error(), "empty"));
}

/* Base64 text of bytes (test-side encoder; the decoder under test checks it round-trips). */
static char *encode(const uint8_t *b, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc((n + 2) / 3 * 4 + 1), *p = s;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        *p++ = a[v >> 18 & 63];
        *p++ = a[v >> 12 & 63];
        *p++ = i + 1 < n ? a[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? a[v & 63] : '=';
    }
    *p = 0;
    return s;
}

static int from_url(const char *url, clef_image_file *file) {
    return clef_image_from_data_url(url, strlen(url), "images[0]", file);
}

static void check_sources(void) {
    static const uint8_t png[16] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a,
                                    0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    static const uint8_t jpeg[6] = {0xff, 0xd8, 0xff, 0xe0, 0, 16};
    static const uint8_t webp[16] = {'R', 'I', 'F', 'F', 8, 0, 0, 0,
                                     'W', 'E', 'B', 'P', 'V', 'P', '8', ' '};
    char *png64 = encode(png, sizeof png), *jpeg64 = encode(jpeg, sizeof jpeg),
         *webp64 = encode(webp, sizeof webp);
    char url[256];
    clef_image_file file;

    snprintf(url, sizeof url, "data:image/png;base64,%s", png64);
    CHECK_EQ_INT(from_url(url, &file), CLEF_OK);
    CHECK(file.format == CLEF_IMAGE_PNG && file.size == sizeof png &&
          memcmp(file.bytes, png, sizeof png) == 0);
    clef_image_file_free(&file);
    snprintf(url, sizeof url, "DATA:Image/JPEG;BASE64,%s", jpeg64);
    CHECK_EQ_INT(from_url(url, &file), CLEF_OK);
    CHECK(file.format == CLEF_IMAGE_JPEG && file.size == sizeof jpeg);
    clef_image_file_free(&file);
    CHECK_EQ_INT(clef_image_from_base64("image/webp", 10, webp64, strlen(webp64), "images[3]",
                                        &file),
                 CLEF_OK);
    CHECK(file.format == CLEF_IMAGE_WEBP && file.size == sizeof webp);
    clef_image_file_free(&file);

    /* Refusals, each naming the field. */
    const char *bad[] = {"https://example.com/cat.png", "http://x/y.jpg", "ftp://x/y.png",
                         "data:image/gif;base64,R0lGODlh", "data:image/png,iVBORw0KGgo=",
                         "data:image/png;base64", "data:;base64,iVBORw0KGgo=", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(from_url(bad[i], &file) == CLEF_ERR_REQUEST_INVALID, "'%s' accepted", bad[i]);
        CHECK_MSG(strstr(clef_last_error(), "images[0]") != NULL, "'%s': %s", bad[i],
                  clef_last_error());
        CHECK(file.bytes == NULL);
    }
    CHECK_EQ_INT(from_url("https://example.com/cat.png", &file), CLEF_ERR_REQUEST_INVALID);
    CHECK(strstr(clef_last_error(), "remote") != NULL);
    /* A PNG declared as JPEG: wrong content type, named. */
    snprintf(url, sizeof url, "data:image/jpeg;base64,%s", png64);
    CHECK_EQ_INT(from_url(url, &file), CLEF_ERR_REQUEST_INVALID);
    CHECK(strstr(clef_last_error(), "wrong content type") != NULL);
    /* Truncated base64 (a character lost). */
    snprintf(url, sizeof url, "data:image/png;base64,%s", png64);
    url[strlen(url) - 1] = 0;
    CHECK_EQ_INT(from_url(url, &file), CLEF_ERR_REQUEST_INVALID);
    /* Not an image at all. */
    CHECK_EQ_INT(from_url("data:image/png;base64,aGVsbG8gd29ybGQh", &file),
                 CLEF_ERR_REQUEST_INVALID);

    /* The 4 MiB cap: exactly 4 MiB passes, one more byte is refused (413-style status). */
    size_t cap = CLEF_IMAGE_MAX_BYTES;
    uint8_t *big = calloc(cap + 1, 1);
    memcpy(big, png, sizeof png);
    char *b64 = encode(big, cap);
    CHECK_EQ_INT(clef_image_from_base64("image/png", 9, b64, strlen(b64), "images[0]", &file),
                 CLEF_OK);
    CHECK(file.size == cap);
    clef_image_file_free(&file);
    free(b64);
    b64 = encode(big, cap + 1);
    CHECK_EQ_INT(clef_image_from_base64("image/png", 9, b64, strlen(b64), "images[0]", &file),
                 CLEF_ERR_REQUEST_TOO_LONG);
    CHECK(strstr(clef_last_error(), "4 MiB") != NULL);
    free(b64);
    free(big);
    free(png64);
    free(jpeg64);
    free(webp64);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s base64.txt smart_resize.txt\n", argv[0]);
        return 2;
    }
    check_base64_fixture(argv[1]);
    check_smart_resize_fixture(argv[2]);
    check_sources();
    return test_summary();
}
