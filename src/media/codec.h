/*
 * codec.h — the three file decoders behind clef_image_decode, each over a well-kept system
 * library (libpng, libjpeg-turbo, libwebp) with its error and warning channels captured into
 * clef's message (nothing printed), plus the EXIF orientation read with libexif.
 *
 * Each decoder turns a whole file in memory into 8-bit RGB by Pillow's convert("RGB") rules
 * (pil_convert.h) and reports the orientation the file carries (its EXIF tag, else its XMP
 * packet's tiff:Orientation, else 1), as Pillow's Image.getexif() finds it; it does not apply
 * it. Only built with CLEF_MEDIA (the codec_*.c files need the libraries).
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
 * "Exif\0\0" prefix JPEG's APP1 carries — as Pillow's Image.getexif() reads it; 0 when the
 * block has no such tag or cannot be parsed. */
int clef_codec_exif_orientation(const uint8_t *data, size_t size);

/* The orientation an XMP packet gives, Pillow's fallback when EXIF has no Orientation tag:
 * the first match of `tiff:Orientation="D` or `tiff:Orientation>D` (D one digit); 0 when
 * none. */
int clef_codec_xmp_orientation(const uint8_t *xmp, size_t size);

/* Pillow's choice: the EXIF tag when present (even 1), else the XMP value, else 1. */
int clef_codec_orientation(int exif_orientation, int xmp_orientation);

#endif /* CLEF_MEDIA_CODEC_H */
