/*
 * rgb_image.h — a decoded image as the processor sees it: 8-bit RGB, rows top to bottom,
 * pixels interleaved (R, G, B), no padding. This is PIL's Image.convert("RGB") result after
 * the EXIF orientation is applied, and the input and output of the resize.
 */
#ifndef CLEF_MEDIA_RGB_IMAGE_H
#define CLEF_MEDIA_RGB_IMAGE_H

#include <stdint.h>

typedef struct clef_rgb_image {
    int64_t width, height;
    uint8_t *rgb; /* [height, width, 3], malloc'd */
} clef_rgb_image;

/* Allocates a width x height image (contents undefined). Returns CLEF_OK or
 * CLEF_ERR_OUT_OF_MEMORY (message names `what`). */
int clef_rgb_image_alloc(clef_rgb_image *image, int64_t width, int64_t height, const char *what);

/* Frees image->rgb and zeroes *image. Accepts NULL and a zeroed struct. */
void clef_rgb_image_free(clef_rgb_image *image);

#endif /* CLEF_MEDIA_RGB_IMAGE_H */
