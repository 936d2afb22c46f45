/*
 * image_probe.h — an image's width and height read from its file header, before any pixel is
 * decoded, so decompression bombs (a small file declaring a huge image), empty images and
 * absurd aspect ratios are refused without allocating a frame.
 *
 * PNG: the IHDR chunk (which must come first). JPEG: the first SOFn marker, skipping the
 * segments before it by their lengths. WebP: the VP8 (lossy) frame header, the VP8L
 * (lossless) bit-packed size, or the VP8X canvas size. The declared size is what the decoder
 * would allocate; EXIF orientation only swaps the sides, it does not change the area.
 */
#ifndef CLEF_MEDIA_IMAGE_PROBE_H
#define CLEF_MEDIA_IMAGE_PROBE_H

#include "media/image_source.h"

#include <stdint.h>

#define CLEF_IMAGE_MAX_PIXELS ((int64_t)16 * 1000 * 1000) /* 16 MP per image (api.md) */

/* Reads the declared width x height of the image file. Returns CLEF_OK,
 * CLEF_ERR_REQUEST_INVALID (header truncated or malformed, a 0 side, aspect ratio over 200;
 * the message names `what`) or CLEF_ERR_REQUEST_TOO_LONG (over CLEF_IMAGE_MAX_PIXELS). */
int clef_image_probe(const clef_image_file *file, const char *what, int64_t *width,
                     int64_t *height);

#endif /* CLEF_MEDIA_IMAGE_PROBE_H */
