/*
 * image_source.h — from a request's image field to the image file's bytes.
 *
 * An image arrives as a data URL ("data:image/png;base64,...") or as a content type plus
 * base64 text ({content_type, base64}). Only image/png, image/jpeg and image/webp are taken;
 * remote URLs (http:, https:, anything not data:) are refused: the engine never downloads.
 * The caps of the API apply before any pixel is decoded: at most CLEF_IMAGE_MAX_BYTES decoded
 * bytes per image (checked on the base64 length first, so an oversized text is not decoded),
 * and the bytes must start with the signature of the declared type (a PNG sent as image/jpeg
 * is refused by name, not handed to the wrong decoder).
 */
#ifndef CLEF_MEDIA_IMAGE_SOURCE_H
#define CLEF_MEDIA_IMAGE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#define CLEF_IMAGE_MAX_BYTES ((size_t)4 << 20)       /* per image, decoded file bytes */
#define CLEF_IMAGES_TOTAL_MAX_BYTES ((size_t)8 << 20) /* all images of a request */

typedef enum {
    CLEF_IMAGE_PNG = 1,
    CLEF_IMAGE_JPEG = 2,
    CLEF_IMAGE_WEBP = 3,
} clef_image_format;

typedef struct {
    clef_image_format format;
    uint8_t *bytes; /* the image file, malloc'd */
    size_t size;
} clef_image_file;

/* Content type (case-insensitive, parameters after ';' not allowed) to a format. Returns
 * CLEF_OK or CLEF_ERR_REQUEST_INVALID naming the type and the accepted ones. */
int clef_image_content_type(const char *type, size_t len, const char *what,
                            clef_image_format *format);

/* Parse a data URL. `what` names the field in messages (e.g. "images[2]"). Returns CLEF_OK,
 * CLEF_ERR_REQUEST_INVALID (not a data URL, remote URL, wrong type, bad base64, signature
 * not of the declared type), CLEF_ERR_REQUEST_TOO_LONG (over CLEF_IMAGE_MAX_BYTES) or
 * CLEF_ERR_OUT_OF_MEMORY. On success free file->bytes with clef_image_file_free. */
int clef_image_from_data_url(const char *url, size_t len, const char *what,
                             clef_image_file *file);

/* The same from the {content_type, base64} form. */
int clef_image_from_base64(const char *content_type, size_t type_len, const char *b64,
                           size_t b64_len, const char *what, clef_image_file *file);

/* Which format the bytes' signature says, or 0 when none of the three. */
clef_image_format clef_image_sniff(const uint8_t *bytes, size_t size);

void clef_image_file_free(clef_image_file *file);

#endif /* CLEF_MEDIA_IMAGE_SOURCE_H */
