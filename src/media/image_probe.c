/*
 * image_probe.c — declared image size from PNG / JPEG / WebP headers and the size caps
 * (see image_probe.h). Every read is bounds-checked against the file size: a truncated
 * header is an error, never a read past the end.
 */
#include "media/image_probe.h"

#include "core/error.h"

#include <string.h>

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t be16(const uint8_t *p) {
    return (uint32_t)p[0] << 8 | p[1];
}
static uint32_t le16(const uint8_t *p) {
    return (uint32_t)p[1] << 8 | p[0];
}
static uint32_t le24(const uint8_t *p) {
    return (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static int truncated(const char *what, const char *format) {
    return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: %s header truncated or malformed", what,
                     format);
}

static int probe_png(const uint8_t *b, size_t n, const char *what, int64_t *w, int64_t *h) {
    /* signature (8) + IHDR length (4) + "IHDR" (4) + width (4) + height (4) */
    if (n < 24 || be32(b + 8) != 13 || memcmp(b + 12, "IHDR", 4) != 0)
        return truncated(what, "PNG");
    *w = be32(b + 16);
    *h = be32(b + 20);
    return CLEF_OK;
}

static int probe_jpeg(const uint8_t *b, size_t n, const char *what, int64_t *w, int64_t *h) {
    size_t i = 2; /* after SOI */
    for (;;) {
        /* Markers may be preceded by fill bytes 0xff. */
        while (i < n && b[i] == 0xff && i + 1 < n && b[i + 1] == 0xff)
            i++;
        if (i + 4 > n || b[i] != 0xff)
            return truncated(what, "JPEG");
        uint8_t m = b[i + 1];
        if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) { /* no length field */
            i += 2;
            continue;
        }
        if (m == 0xd9 || m == 0xda) /* EOI or scan data before any frame header */
            return truncated(what, "JPEG (no frame header before the scan)");
        uint32_t len = be16(b + i + 2);
        if (len < 2)
            return truncated(what, "JPEG");
        /* SOF0..SOF15 except DHT (c4), JPG (c8) and DAC (cc) carry the frame size. */
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            if (len < 7 || i + 9 > n)
                return truncated(what, "JPEG");
            *h = be16(b + i + 5);
            *w = be16(b + i + 7);
            return CLEF_OK;
        }
        i += 2 + (size_t)len;
    }
}

static int probe_webp(const uint8_t *b, size_t n, const char *what, int64_t *w, int64_t *h) {
    if (n < 16)
        return truncated(what, "WebP");
    const uint8_t *c = b + 12; /* first chunk: fourcc, size, payload */
    if (memcmp(c, "VP8X", 4) == 0) {
        if (n < 30)
            return truncated(what, "WebP");
        *w = (int64_t)le24(c + 12) + 1;
        *h = (int64_t)le24(c + 15) + 1;
        return CLEF_OK;
    }
    if (memcmp(c, "VP8 ", 4) == 0) {
        /* frame tag (3) + start code 9d 01 2a + 14-bit width, 14-bit height */
        if (n < 30 || c[11] != 0x9d || c[12] != 0x01 || c[13] != 0x2a)
            return truncated(what, "WebP (VP8)");
        *w = le16(c + 14) & 0x3fff;
        *h = le16(c + 16) & 0x3fff;
        return CLEF_OK;
    }
    if (memcmp(c, "VP8L", 4) == 0) {
        /* signature 0x2f, then 14-bit width-1 and 14-bit height-1, little-endian bits */
        if (n < 25 || c[8] != 0x2f)
            return truncated(what, "WebP (VP8L)");
        uint32_t bits = (uint32_t)c[9] | (uint32_t)c[10] << 8 | (uint32_t)c[11] << 16 |
                        (uint32_t)c[12] << 24;
        *w = (int64_t)(bits & 0x3fff) + 1;
        *h = (int64_t)(bits >> 14 & 0x3fff) + 1;
        return CLEF_OK;
    }
    return truncated(what, "WebP (first chunk is not VP8, VP8L or VP8X)");
}

int clef_image_probe(const clef_image_file *file, const char *what, int64_t *width,
                     int64_t *height) {
    if (!file || !width || !height || (!file->bytes && file->size))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_image_probe: NULL argument");
    if (!what)
        what = "image";
    int64_t w = 0, h = 0;
    int st;
    switch (file->format) {
    case CLEF_IMAGE_PNG:
        st = probe_png(file->bytes, file->size, what, &w, &h);
        break;
    case CLEF_IMAGE_JPEG:
        st = probe_jpeg(file->bytes, file->size, what, &w, &h);
        break;
    case CLEF_IMAGE_WEBP:
        st = probe_webp(file->bytes, file->size, what, &w, &h);
        break;
    default:
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_image_probe: unknown format");
    }
    if (st)
        return st;
    if (w <= 0 || h <= 0)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: image is %lldx%lld (an empty image)",
                         what, (long long)w, (long long)h);
    /* A side over the cap is over it whatever the other side (>= 1); checking it first keeps
     * the product of two 32-bit PNG sides from overflowing. */
    if (w > CLEF_IMAGE_MAX_PIXELS || h > CLEF_IMAGE_MAX_PIXELS || w * h > CLEF_IMAGE_MAX_PIXELS)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                         "%s: image is %lldx%lld = %.0f pixels, over the 16 MP per-image cap "
                         "(refused before decoding)",
                         what, (long long)w, (long long)h, (double)w * (double)h);
    int64_t hi = w > h ? w : h, lo = w > h ? h : w;
    if ((double)hi / (double)lo > 200.0)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: image is %lldx%lld, aspect ratio %.1f "
                         "is over 200", what, (long long)w, (long long)h, (double)hi / (double)lo);
    *width = w;
    *height = h;
    return CLEF_OK;
}
