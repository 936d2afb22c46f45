/*
 * image_source.c — data URLs and {content_type, base64} to image file bytes, with the
 * per-image byte cap and the signature check (see image_source.h).
 */
#include "media/image_source.h"

#include "core/error.h"
#include "media/base64.h"
#include "media/data_url.h"

#include <stdlib.h>
#include <string.h>

static const char *format_name(clef_image_format f) {
    switch (f) {
    case CLEF_IMAGE_PNG:
        return "image/png";
    case CLEF_IMAGE_JPEG:
        return "image/jpeg";
    case CLEF_IMAGE_WEBP:
        return "image/webp";
    }
    return "unknown";
}

int clef_image_content_type(const char *type, size_t len, const char *what,
                            clef_image_format *format) {
    static const struct {
        const char *name;
        clef_image_format format;
    } known[] = {{"image/png", CLEF_IMAGE_PNG},
                 {"image/jpeg", CLEF_IMAGE_JPEG},
                 {"image/webp", CLEF_IMAGE_WEBP}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (len == strlen(known[k].name) && clef_has_prefix_ci(type, len, known[k].name)) {
            *format = known[k].format;
            return CLEF_OK;
        }
    int shown = len > 64 ? 64 : (int)len;
    return clef_fail(CLEF_ERR_REQUEST_INVALID,
                     "%s: content type '%.*s'%s is not accepted (image/png, image/jpeg or "
                     "image/webp)",
                     what, shown, type, len > 64 ? "..." : "");
}

clef_image_format clef_image_sniff(const uint8_t *b, size_t n) {
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    if (n >= 8 && memcmp(b, png, 8) == 0)
        return CLEF_IMAGE_PNG;
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return CLEF_IMAGE_JPEG;
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0)
        return CLEF_IMAGE_WEBP;
    return (clef_image_format)0;
}

int clef_image_from_base64(const char *content_type, size_t type_len, const char *b64,
                           size_t b64_len, const char *what, clef_image_file *file) {
    if (!content_type || !b64 || !file)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_image_from_base64: NULL argument");
    if (!what)
        what = "image";
    memset(file, 0, sizeof *file);
    clef_image_format format = (clef_image_format)0;
    int st = clef_image_content_type(content_type, type_len, what, &format);
    if (st)
        return st;
    /* The cap is checked on the text length first: an oversized text is never decoded. */
    if (b64_len / 4 * 3 > CLEF_IMAGE_MAX_BYTES + 2)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                         "%s: %zu base64 characters decode to more than the %zu-byte (4 MiB) "
                         "per-image cap",
                         what, b64_len, CLEF_IMAGE_MAX_BYTES);
    uint8_t *bytes;
    size_t size;
    st = clef_base64_decode(b64, b64_len, what, &bytes, &size);
    if (st)
        return st;
    if (size > CLEF_IMAGE_MAX_BYTES) {
        free(bytes);
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                         "%s: image of %zu bytes is over the %zu-byte (4 MiB) per-image cap", what,
                         size, CLEF_IMAGE_MAX_BYTES);
    }
    clef_image_format sniffed = clef_image_sniff(bytes, size);
    if (sniffed != format) {
        free(bytes);
        if (!sniffed)
            return clef_fail(CLEF_ERR_REQUEST_INVALID,
                             "%s: declared %s but the %zu bytes are not a PNG, JPEG or WebP file",
                             what, format_name(format), size);
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: declared %s but the bytes are a %s file (wrong content type)", what,
                         format_name(format), format_name(sniffed));
    }
    file->format = format;
    file->bytes = bytes;
    file->size = size;
    return CLEF_OK;
}

int clef_image_from_data_url(const char *url, size_t len, const char *what,
                             clef_image_file *file) {
    if (!url || !file)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_image_from_data_url: NULL argument");
    if (!what)
        what = "image";
    memset(file, 0, sizeof *file);
    const char *type, *b64;
    size_t type_len, b64_len;
    int st = clef_data_url_split(url, len, what, "image", "data:image/<png|jpeg|webp>;base64,...",
                                 &type, &type_len, &b64, &b64_len);
    if (st)
        return st;
    return clef_image_from_base64(type, type_len, b64, b64_len, what, file);
}

void clef_image_file_free(clef_image_file *file) {
    if (!file)
        return;
    free(file->bytes);
    file->bytes = NULL;
    file->size = 0;
}
