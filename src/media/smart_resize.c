/*
 * smart_resize.c — Qwen2-VL's smart_resize in double arithmetic, step for step as the
 * reference computes it in Python floats (true division, round half-to-even, math.sqrt,
 * floor, ceil), so the grid is identical, not merely close.
 */
#include "media/smart_resize.h"

#include "core/error.h"

#include <math.h>

int clef_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                      int64_t max_pixels, const char *what, int64_t *out_h, int64_t *out_w) {
    if (!out_h || !out_w || factor <= 0 || min_pixels < 0 || max_pixels <= 0 ||
        height > ((int64_t)1 << 26) || width > ((int64_t)1 << 26))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_smart_resize: argument out of range");
    if (!what)
        what = "image";
    if (height <= 0 || width <= 0)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: image is %lldx%lld (an empty image)",
                         what, (long long)width, (long long)height);
    double hi = (double)(height > width ? height : width);
    double lo = (double)(height > width ? width : height);
    if (hi / lo > 200.0)
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: image is %lldx%lld, aspect ratio %.1f is over 200", what,
                         (long long)width, (long long)height, hi / lo);
    double f = (double)factor;
    /* nearbyint in the default rounding mode is round-half-even, as Python's round(). */
    int64_t h_bar = (int64_t)nearbyint((double)height / f) * factor;
    int64_t w_bar = (int64_t)nearbyint((double)width / f) * factor;
    if (h_bar * w_bar > max_pixels) {
        double beta = sqrt((double)(height * width) / (double)max_pixels);
        h_bar = (int64_t)floor((double)height / beta / f) * factor;
        w_bar = (int64_t)floor((double)width / beta / f) * factor;
        if (h_bar < factor)
            h_bar = factor;
        if (w_bar < factor)
            w_bar = factor;
    } else if (h_bar * w_bar < min_pixels) {
        double beta = sqrt((double)min_pixels / (double)(height * width));
        h_bar = (int64_t)ceil((double)height * beta / f) * factor;
        w_bar = (int64_t)ceil((double)width * beta / f) * factor;
    }
    *out_h = h_bar;
    *out_w = w_bar;
    return CLEF_OK;
}
