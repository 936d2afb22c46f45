/*
 * pil_resize.c — Pillow's antialiased bicubic resample of 8-bit images (see pil_resize.h).
 *
 * Written from the algorithm Pillow documents in libImaging/Resample.c; every arithmetic step
 * (double coefficients, their normalization, the fixed-point conversion, the integer
 * accumulation and the clamp) is the same, so the result is identical, which
 * test_media_processor checks against Pillow on images of many sizes and scales.
 */
#include "media/pil_resize.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Pillow's fixed point for 8-bit images: 32 bits - 8 (pixel) - 2 (headroom for overshoot). */
#define PRECISION_BITS (32 - 8 - 2)
#define BICUBIC_SUPPORT 2.0

static double bicubic_filter(double x) {
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* The taps of one axis: for output index i, input [bounds[2i], bounds[2i] + bounds[2i+1])
 * weighted by kk[i * ksize ...]. */
typedef struct axis_taps {
    int ksize;
    int *bounds;  /* [out_size, 2] */
    int32_t *kk;  /* [out_size, ksize] fixed point */
} axis_taps;

static void axis_taps_free(axis_taps *t) {
    free(t->bounds);
    free(t->kk);
}

static int axis_taps_compute(int in_size, int out_size, axis_taps *t) {
    memset(t, 0, sizeof *t);
    const double in0 = 0.0, in1 = (double)in_size; /* the whole image as the box */
    double scale = (in1 - in0) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = BICUBIC_SUPPORT * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *prekk = malloc((size_t)out_size * (size_t)ksize * sizeof(double));
    t->kk = malloc((size_t)out_size * (size_t)ksize * sizeof(int32_t));
    t->bounds = malloc((size_t)out_size * 2 * sizeof(int));
    if (!prekk || !t->kk || !t->bounds) {
        free(prekk);
        axis_taps_free(t);
        return -1;
    }
    t->ksize = ksize;
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale;
        double ww = 0.0;
        double ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5); /* truncation, as in Pillow */
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double *k = prekk + (size_t)xx * ksize;
        int x;
        for (x = 0; x < xmax; x++) {
            double w = bicubic_filter((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++) {
            if (ww != 0.0)
                k[x] /= ww;
        }
        for (; x < ksize; x++)
            k[x] = 0;
        t->bounds[xx * 2] = xmin;
        t->bounds[xx * 2 + 1] = xmax;
    }
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++) {
        double v = prekk[i] * (1 << PRECISION_BITS);
        t->kk[i] = prekk[i] < 0 ? (int32_t)(-0.5 + v) : (int32_t)(0.5 + v);
    }
    free(prekk);
    return 0;
}

static uint8_t clip8(int32_t v) {
    if (v < 0)
        return 0;
    v >>= PRECISION_BITS;
    return v > 255 ? 255 : (uint8_t)v;
}

/* out rows [0, out->height) from in rows [row0, row0 + out->height), horizontal taps. */
static void resample_horizontal(const clef_rgb_image *in, int64_t row0, const axis_taps *t,
                                clef_rgb_image *out) {
    const int64_t ow = out->width;
#pragma omp parallel for schedule(static) if (out->height * ow > 65536)
    for (int64_t y = 0; y < out->height; y++) {
        const uint8_t *src = in->rgb + (size_t)((row0 + y) * in->width) * 3;
        uint8_t *dst = out->rgb + (size_t)(y * ow) * 3;
        for (int64_t xx = 0; xx < ow; xx++) {
            const int xmin = t->bounds[xx * 2], xmax = t->bounds[xx * 2 + 1];
            const int32_t *k = t->kk + (size_t)xx * t->ksize;
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            const uint8_t *p = src + (size_t)xmin * 3;
            for (int x = 0; x < xmax; x++, p += 3) {
                s0 += p[0] * k[x];
                s1 += p[1] * k[x];
                s2 += p[2] * k[x];
            }
            dst[xx * 3] = clip8(s0);
            dst[xx * 3 + 1] = clip8(s1);
            dst[xx * 3 + 2] = clip8(s2);
        }
    }
}

/* out rows from in rows bounds[2y] - row0 ..., vertical taps. */
static void resample_vertical(const clef_rgb_image *in, int64_t row0, const axis_taps *t,
                              clef_rgb_image *out) {
    const size_t row_bytes = (size_t)out->width * 3;
#pragma omp parallel for schedule(static) if (out->height * out->width > 65536)
    for (int64_t yy = 0; yy < out->height; yy++) {
        const int ymin = t->bounds[yy * 2] - (int)row0, ymax = t->bounds[yy * 2 + 1];
        const int32_t *k = t->kk + (size_t)yy * t->ksize;
        uint8_t *dst = out->rgb + (size_t)yy * row_bytes;
        for (size_t i = 0; i < row_bytes; i++) {
            int32_t s = 1 << (PRECISION_BITS - 1);
            const uint8_t *p = in->rgb + (size_t)ymin * row_bytes + i;
            for (int y = 0; y < ymax; y++, p += row_bytes)
                s += *p * k[y];
            dst[i] = clip8(s);
        }
    }
}

int clef_pil_resize_bicubic(const clef_rgb_image *in, int64_t out_width, int64_t out_height,
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
    if (axis_taps_compute((int)in->width, (int)out_width, &horiz) != 0 ||
        axis_taps_compute((int)in->height, (int)out_height, &vert) != 0) {
        axis_taps_free(&horiz);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory for the resize", what);
    }
    /* Only the source rows the vertical pass reads go through the horizontal pass. */
    const int64_t row_first = vert.bounds[0];
    const int64_t row_last = vert.bounds[out_height * 2 - 2] + vert.bounds[out_height * 2 - 1];
    clef_rgb_image tmp = {0};
    const clef_rgb_image *src = in;
    int64_t src_row0 = 0;
    int rc = CLEF_OK;
    if (need_horizontal) {
        rc = clef_rgb_image_alloc(&tmp, out_width, row_last - row_first, what);
        if (rc != CLEF_OK)
            goto done;
        resample_horizontal(in, row_first, &horiz, &tmp);
        src = &tmp;
        src_row0 = row_first;
    }
    if (need_vertical) {
        rc = clef_rgb_image_alloc(out, out_width, out_height, what);
        if (rc != CLEF_OK)
            goto done;
        resample_vertical(src, src_row0, &vert, out);
    } else if (need_horizontal) {
        *out = tmp; /* row_first = 0 and all rows were resampled */
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
