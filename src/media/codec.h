/*
 * codec.h — the three file decoders behind clef_image_decode, each over a well-kept system
 * library (libpng, libjpeg-turbo, libwebp) with its error and warning channels captured into
 * clef's message (nothing printed), plus the EXIF orientation read with libexif.
 *
 * Each decoder turns a whole file in memory into 8-bit RGB by Pillow's convert("RGB") rules
 * (pil_convert.h) and reports the EXIF orientation the file carries (1 when none); it does not
 * apply it. Only built with CLEF_MEDIA (the codec_*.c files need the libraries).
 */
#ifndef CLEF_MEDIA_CODEC_H
#define CLEF_MEDIA_CODEC_H

#include "media/rgb_image.h"

#include <stddef.h>
#include <stdint.h>

/* Each returns CLEF_OK, CLEF_ERR_REQUEST_INVALID (corrupt, truncated or unsupported file; the
 * message names `what` and the library's reason) or CLEF_ERR_OUT_OF_MEMORY. */
int clef_codec_png_decode(const uint8_t *bytes, size_t size, const char *what,
                          clef_rgb_image *out, int *orientation);
int clef_codec_jpeg_decode(const uint8_t *bytes, size_t size, const char *what,
                           clef_rgb_image *out, int *orientation);
int clef_codec_webp_decode(const uint8_t *bytes, size_t size, const char *what,
                           clef_rgb_image *out, int *orientation);

/* The Orientation tag (0x0112) of IFD0 of an EXIF block — TIFF data, with or without the
 * "Exif\0\0" prefix JPEG's APP1 carries — as Pillow's Image.getexif() reads it; 1 when the
 * block has none or cannot be parsed (Pillow then leaves the image as stored too). */
int clef_codec_exif_orientation(const uint8_t *data, size_t size);

#endif /* CLEF_MEDIA_CODEC_H */
