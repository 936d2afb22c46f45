/*
 * pil_resize.h — Pillow's Image.resize(size, Image.BICUBIC) on 8-bit RGB, bit for bit.
 *
 * This is the resize of the reference processor (transformers' Qwen2-VL PIL image processor
 * hands the uint8 image to Pillow). Pillow's algorithm (libImaging/Resample.c), reproduced:
 * a separable convolution, horizontal pass first, then vertical, each rounding to uint8;
 * the bicubic kernel (a = -0.5) with support 2 stretched by the scale when shrinking (the
 * antialiasing), weights normalized to sum 1 in double, then turned into 22-bit fixed point
 * and accumulated in 32-bit integers with rounding at half. A pass whose size does not change
 * is skipped, as in Pillow.
 */
#ifndef CLEF_MEDIA_PIL_RESIZE_H
#define CLEF_MEDIA_PIL_RESIZE_H

#include "media/rgb_image.h"

/* Resizes `in` to out_width x out_height into *out (allocated here; free with
 * clef_rgb_image_free). Returns CLEF_OK, CLEF_ERR_INVALID_ARG (a size <= 0) or
 * CLEF_ERR_OUT_OF_MEMORY. */
int clef_pil_resize_bicubic(const clef_rgb_image *in, int64_t out_width, int64_t out_height,
                            const char *what, clef_rgb_image *out);

#endif /* CLEF_MEDIA_PIL_RESIZE_H */
