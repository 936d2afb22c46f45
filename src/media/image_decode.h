/*
 * image_decode.h — an image file (PNG / JPEG / WebP bytes) to the 8-bit RGB pixels the
 * reference processor starts from: transformers' load_image, i.e. Pillow's
 * ImageOps.exif_transpose(Image.open(f)).convert("RGB").
 *
 * In order: the header probe's caps (image_probe.h: 0 side, over 16,000,000 pixels, aspect
 * over 200, truncated header — all refused before any decoder runs), the file's decoder, a
 * check that the decoder saw the size the probe did, then the EXIF orientation.
 */
#ifndef CLEF_MEDIA_IMAGE_DECODE_H
#define CLEF_MEDIA_IMAGE_DECODE_H

#include "media/image_source.h"
#include "media/rgb_image.h"

/* 1 when this build decodes pixels (CMake CLEF_MEDIA), 0 when images are refused. */
int clef_image_decoding_available(void);

/* Decodes `file` into *out (free with clef_rgb_image_free). Returns CLEF_OK,
 * CLEF_ERR_REQUEST_INVALID (corrupt, truncated, empty, aspect over 200, unsupported variant
 * such as animated WebP; the message names `what`), CLEF_ERR_REQUEST_TOO_LONG (over the pixel
 * cap), CLEF_ERR_UNSUPPORTED (built without CLEF_MEDIA) or CLEF_ERR_OUT_OF_MEMORY. On failure
 * *out is zeroed. */
int clef_image_decode(const clef_image_file *file, const char *what, clef_rgb_image *out);

#endif /* CLEF_MEDIA_IMAGE_DECODE_H */
