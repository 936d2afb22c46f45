/*
 * smart_resize.h — the size an image is resized to before patchifying (Qwen2-VL's
 * smart_resize): both sides multiples of `factor` (patch 16 x merge 2 = 32), the area within
 * [min_pixels, max_pixels], the aspect ratio kept as closely as that allows.
 */
#ifndef CLEF_MEDIA_SMART_RESIZE_H
#define CLEF_MEDIA_SMART_RESIZE_H

#include <stdint.h>

/* Computes *out_h, *out_w for an image of height x width. Returns CLEF_OK, or
 * CLEF_ERR_REQUEST_INVALID (message names `what`) for a 0 side or an aspect ratio over 200,
 * or CLEF_ERR_INVALID_ARG for factor/min/max out of range. */
int clef_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                      int64_t max_pixels, const char *what, int64_t *out_h, int64_t *out_w);

#endif /* CLEF_MEDIA_SMART_RESIZE_H */
