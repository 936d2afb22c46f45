/*
 * image_decode.c — probe, decode, orient (see image_decode.h). The decoders themselves are in
 * codec_*.c, compiled only with CLEF_MEDIA.
 */
#include "media/image_decode.h"

#include "core/error.h"
#include "media/image_orient.h"
#include "media/image_probe.h"

#ifdef CLEF_HAVE_MEDIA
#include "media/codec.h"
#endif

#include <string.h>

int clef_image_decoding_available(void) {
#ifdef CLEF_HAVE_MEDIA
    return 1;
#else
    return 0;
#endif
}

#ifdef CLEF_HAVE_MEDIA
static const char *format_name(clef_image_format format) {
    return format == CLEF_IMAGE_PNG ? "PNG" : format == CLEF_IMAGE_JPEG ? "JPEG" : "WebP";
}
#endif

int clef_image_decode(const clef_image_file *file, const char *what, clef_rgb_image *out) {
    memset(out, 0, sizeof *out);
    int64_t width, height;
    int rc = clef_image_probe(file, what, &width, &height);
    if (rc != CLEF_OK)
        return rc;
#ifndef CLEF_HAVE_MEDIA
    return clef_fail(CLEF_ERR_UNSUPPORTED,
                     "%s: this clef was built without image decoding (CMake CLEF_MEDIA=OFF)",
                     what);
#else
    int orientation = 1;
    switch (file->format) {
    case CLEF_IMAGE_PNG:
        rc = clef_codec_png_decode(file->bytes, file->size, what, out, &orientation);
        break;
    case CLEF_IMAGE_JPEG:
        rc = clef_codec_jpeg_decode(file->bytes, file->size, what, out, &orientation);
        break;
    case CLEF_IMAGE_WEBP:
        rc = clef_codec_webp_decode(file->bytes, file->size, what, out, &orientation);
        break;
    default:
        return clef_fail(CLEF_ERR_INVALID_ARG, "%s: unknown image format %d", what,
                         (int)file->format);
    }
    if (rc != CLEF_OK)
        return rc;
    /* The caps were checked on the probed size: the pixels must be that size. */
    if (out->width != width || out->height != height) {
        int64_t got_w = out->width, got_h = out->height;
        clef_rgb_image_free(out);
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: %s header says %lldx%lld but the image data is %lldx%lld", what,
                         format_name(file->format), (long long)width, (long long)height,
                         (long long)got_w, (long long)got_h);
    }
    rc = clef_rgb_image_orient(out, orientation, what);
    if (rc != CLEF_OK)
        clef_rgb_image_free(out);
    return rc;
#endif
}
