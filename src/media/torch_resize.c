/*
 * torch_resize.c — torch's uint8 antialiased bicubic resample (see torch_resize.h).
 *
 * Written from the steps of ATen's `_compute_indices_min_size_weights_aa` and
 * `_compute_index_ranges_int16_weights` (weights) and its uint8 separable loops (integer
 * accumulation, arithmetic shift, clamp); test_media_video checks the bytes against
 * torchvision on frames of many sizes and scales.
 */
#include "media/torch_resize.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torch's aa_filter for bicubic: Keys' cubic with a = -0.5, in ATen's evaluation order
 * (cubic_convolution1 / cubic_convolution2; the second differs from Pillow's order, which can
 * move the last bit of a weight). */
static double aa_bicubic(double x) {
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0)
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

/* The taps of one axis: output i reads input [first[i], first[i] + count[i]) with weights
 * w[i * ksize ...] in fixed point of `precision` bits. */
typedef struct axis_taps {
    int ksize, precision;
    int64_t *first, *count;
    int16_t *w;
} axis_taps;

static void axis_taps_free(axis_taps *t) {
    free(t->first);
    free(t->count);
    free(t->w);
}

static int axis_taps_compute(int64_t in_size, int64_t out_size, axis_taps *t) {
    memset(t, 0, sizeof *t);
    const double scale = (double)in_size / (double)out_size; /* align_corners = false */
    const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
    const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    const int ksize = (int)ceil(support) * 2 + 1;
    double *wf = calloc((size_t)out_size * (size_t)ksize, sizeof *wf);
    t->first = malloc(sizeof *t->first * (size_t)out_size);
    t->count = malloc(sizeof *t->count * (size_t)out_size);
    t->w = malloc(sizeof *t->w * (size_t)out_size * (size_t)ksize);
    if (!wf || !t->first || !t->count || !t->w) {
        free(wf);
        axis_taps_free(t);
        return -1;
    }
    t->ksize = ksize;
    double wt_max = 0.0;
    for (int64_t i = 0; i < out_size; i++) {
        const double center = scale * ((double)i + 0.5);
        int64_t xmin = (int64_t)(center - support + 0.5); /* truncation, as the C++ casts */
        if (xmin < 0)
            xmin = 0;
        int64_t xend = (int64_t)(center + support + 0.5);
        if (xend > in_size)
            xend = in_size;
        int64_t xsize = xend - xmin;
        if (xsize < 0) /* ATen clamps to [0, ksize]: rounding can give one too many */
            xsize = 0;
        if (xsize > ksize)
            xsize = ksize;
        double *k = wf + i * ksize, total = 0.0;
        for (int64_t j = 0; j < xsize; j++) {
            k[j] = aa_bicubic(((double)(j + xmin) - center + 0.5) * invscale);
            total += k[j];
        }
        if (total != 0.0)
            for (int64_t j = 0; j < xsize; j++) {
                k[j] /= total;
                if (k[j] > wt_max)
                    wt_max = k[j];
            }
        t->first[i] = xmin;
        t->count[i] = xsize;
    }
    /* the most bits (< 22) for which 2 * wt_max still fits an int16 */
    int precision = 0;
    for (; precision < 22; precision++)
        if ((int)(0.5 + wt_max * (double)(1 << (precision + 1))) >= (1 << 15))
            break;
    t->precision = precision;
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++) {
        const double v = wf[i] * (double)(1 << precision);
        t->w[i] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
    free(wf);
    return 0;
}

/* ATen: (sum + half) >> precision (arithmetic), then saturated to 0..255. */
static uint8_t to_u8(int32_t acc, int precision) {
    const int32_t v = acc >> precision;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

static void resample_horizontal(const clef_rgb_image *in, const axis_taps *t,
                                clef_rgb_image *out) {
    const int64_t ow = out->width;
    const int32_t half = t->precision > 0 ? 1 << (t->precision - 1) : 0;
#pragma omp parallel for schedule(static) if (out->height * ow > 65536)
    for (int64_t y = 0; y < out->height; y++) {
        const uint8_t *src = in->rgb + (size_t)(y * in->width) * 3;
        uint8_t *dst = out->rgb + (size_t)(y * ow) * 3;
        for (int64_t x = 0; x < ow; x++) {
            const int16_t *k = t->w + (size_t)x * t->ksize;
            const uint8_t *p = src + (size_t)t->first[x] * 3;
            int32_t s0 = half, s1 = half, s2 = half;
            for (int64_t j = 0; j < t->count[x]; j++, p += 3) {
                s0 += p[0] * k[j];
                s1 += p[1] * k[j];
                s2 += p[2] * k[j];
            }
            dst[x * 3] = to_u8(s0, t->precision);
            dst[x * 3 + 1] = to_u8(s1, t->precision);
            dst[x * 3 + 2] = to_u8(s2, t->precision);
        }
    }
}

static void resample_vertical(const clef_rgb_image *in, const axis_taps *t,
                              clef_rgb_image *out) {
    const size_t row_bytes = (size_t)out->width * 3;
    const int32_t half = t->precision > 0 ? 1 << (t->precision - 1) : 0;
#pragma omp parallel for schedule(static) if (out->height * out->width > 65536)
    for (int64_t y = 0; y < out->height; y++) {
        const int16_t *k = t->w + (size_t)y * t->ksize;
        const uint8_t *base = in->rgb + (size_t)t->first[y] * row_bytes;
        uint8_t *dst = out->rgb + (size_t)y * row_bytes;
        for (size_t i = 0; i < row_bytes; i++) {
            int32_t s = half;
            const uint8_t *p = base + i;
            for (int64_t j = 0; j < t->count[y]; j++, p += row_bytes)
                s += *p * k[j];
            dst[i] = to_u8(s, t->precision);
        }
    }
}

int clef_torch_resize_bicubic(const clef_rgb_image *in, int64_t out_width, int64_t out_height,
                              const char *what, clef_rgb_image *out) {
    memset(out, 0, sizeof *out);
    if (out_width <= 0 || out_height <= 0 || out_width > INT32_MAX || out_height > INT32_MAX ||
        in->width <= 0 || in->height <= 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "%s: resize %lldx%lld -> %lldx%lld out of range",
                         what, (long long)in->width, (long long)in->height,
                         (long long)out_width, (long long)out_height);
    const int need_horizontal = out_width != in->width;
    const int need_vertical = out_height != in->height;
    axis_taps horiz = {0}, vert = {0};
    clef_rgb_image tmp = {0};
    int rc = CLEF_OK;
    if ((need_horizontal && axis_taps_compute(in->width, out_width, &horiz) != 0) ||
        (need_vertical && axis_taps_compute(in->height, out_height, &vert) != 0)) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory for the resize", what);
        goto done;
    }
    const clef_rgb_image *src = in;
    if (need_horizontal) {
        rc = clef_rgb_image_alloc(&tmp, out_width, in->height, what);
        if (rc != CLEF_OK)
            goto done;
        resample_horizontal(in, &horiz, &tmp);
        src = &tmp;
    }
    if (need_vertical) {
        rc = clef_rgb_image_alloc(out, out_width, out_height, what);
        if (rc == CLEF_OK)
            resample_vertical(src, &vert, out);
    } else if (need_horizontal) {
        *out = tmp;
        tmp.rgb = NULL;
    } else {
        rc = clef_rgb_image_alloc(out, out_width, out_height, what);
        if (rc == CLEF_OK)
            memcpy(out->rgb, in->rgb, (size_t)out_width * (size_t)out_height * 3);
    }
done:
    clef_rgb_image_free(&tmp);
    axis_taps_free(&horiz);
    axis_taps_free(&vert);
    return rc;
}
