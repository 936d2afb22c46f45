/*
 * image_processor.c — the Qwen3.5 image processor's entry points (see image_processor.h):
 * parameters from the release, and the decode -> RGB -> resize -> normalize -> patchify chain.
 */
#include "media/image_processor.h"

#include "core/error.h"
#include "media/image_decode.h"
#include "media/patchify.h"
#include "media/pil_resize.h"
#include "media/torch_resize.h"
#include "media/smart_resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void clef_image_processor_default_params(clef_image_processor_params *params) {
    memset(params, 0, sizeof *params);
    params->patch_size = 16;
    params->temporal_patch_size = 2;
    params->merge_size = 2;
    params->min_pixels = 65536;    /* preprocessor_config.json size.shortest_edge */
    params->max_pixels = 16777216; /* size.longest_edge = 4096 * 4096 */
    for (int c = 0; c < 3; c++) {
        params->image_mean[c] = 0.5f;
        params->image_std[c] = 0.5f;
    }
    params->rescale_factor = 1.0 / 255.0; /* the Python float 0.00392156862745098 */
}

int clef_image_processor_params_from_vision(const clef_vision_config *vision,
                                            clef_image_processor_params *params) {
    if (!vision->present)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "the release has no vision tower");
    if (vision->in_channels != 3)
        return clef_fail(CLEF_ERR_UNSUPPORTED,
                         "vision_config.in_channels is %lld, the image processor makes 3 (RGB)",
                         (long long)vision->in_channels);
    params->patch_size = vision->patch_size;
    params->temporal_patch_size = vision->temporal_patch_size;
    params->merge_size = vision->spatial_merge_size;
    return CLEF_OK;
}

static int check_params(const clef_image_processor_params *p, const char *what) {
    if (p->patch_size < 1 || p->patch_size > 1024 || p->temporal_patch_size < 1 ||
        p->temporal_patch_size > 64 || p->merge_size < 1 || p->merge_size > 64 ||
        p->min_pixels < 1 || p->max_pixels < p->min_pixels)
        return clef_fail(CLEF_ERR_INVALID_ARG,
                         "%s: image processor settings out of range (patch %lld, temporal %lld, "
                         "merge %lld, min_pixels %lld, max_pixels %lld)",
                         what, (long long)p->patch_size, (long long)p->temporal_patch_size,
                         (long long)p->merge_size, (long long)p->min_pixels,
                         (long long)p->max_pixels);
    for (int c = 0; c < 3; c++) {
        if (!(p->image_std[c] != 0.0f) || !isfinite(p->image_std[c]) ||
            !isfinite(p->image_mean[c]))
            return clef_fail(CLEF_ERR_INVALID_ARG, "%s: image_mean / image_std[%d] invalid",
                             what, c);
    }
    if (!(p->rescale_factor > 0) || !isfinite(p->rescale_factor))
        return clef_fail(CLEF_ERR_INVALID_ARG, "%s: rescale_factor %g invalid", what,
                         p->rescale_factor);
    return CLEF_OK;
}

void clef_normalize_table(const clef_image_processor_params *p, clef_normalize_order order,
                          float table[3][256]) {
    const double rescale_factor = p->rescale_factor;
    for (int c = 0; c < 3; c++) {
        /* torch: mean * (1 / rescale) as a float32 tensor, likewise std */
        const float mean_fused = (float)((double)p->image_mean[c] * (1.0 / rescale_factor));
        const float std_fused = (float)((double)p->image_std[c] * (1.0 / rescale_factor));
        for (int v = 0; v < 256; v++) {
            if (order == CLEF_NORMALIZE_FUSED) {
                table[c][v] = ((float)v - mean_fused) / std_fused;
            } else {
                float x = (float)((double)v * rescale_factor);
                table[c][v] = (x - p->image_mean[c]) / p->image_std[c];
            }
        }
    }
}

void clef_patchify_frame(const clef_rgb_image *frame, const float table[3][256],
                         const clef_image_processor_params *params, int64_t grid_h,
                         int64_t grid_w, int64_t t, int64_t slot_first, int64_t slot_end,
                         float *rows) {
    const int64_t patch = params->patch_size, merge = params->merge_size;
    const int64_t temporal = params->temporal_patch_size;
    const int64_t row_len = 3 * temporal * patch * patch;
    const int64_t width = frame->width;
    /* Row (t, bh, bw, mh, mw) of the reference's pixel_values holds patch (gh, gw) =
     * (bh * merge + mh, bw * merge + mw) of temporal group t, as [channel][slot][py][px]. */
#pragma omp parallel for schedule(static) if (grid_h * grid_w > 256)
    for (int64_t gh = 0; gh < grid_h; gh++) {
        for (int64_t gw = 0; gw < grid_w; gw++) {
            const int64_t bh = gh / merge, mh = gh % merge, bw = gw / merge, mw = gw % merge;
            const int64_t r =
                ((t * (grid_h / merge) + bh) * (grid_w / merge) + bw) * merge * merge +
                mh * merge + mw;
            float *row = rows + (size_t)r * (size_t)row_len;
            for (int64_t c = 0; c < 3; c++) {
                for (int64_t slot = slot_first; slot < slot_end; slot++) {
                    float *dst = row + (c * temporal + slot) * patch * patch;
                    for (int64_t py = 0; py < patch; py++) {
                        const uint8_t *src =
                            frame->rgb + ((gh * patch + py) * width + gw * patch) * 3 + c;
                        for (int64_t px = 0; px < patch; px++)
                            dst[py * patch + px] = table[c][src[px * 3]];
                    }
                }
            }
        }
    }
}

int clef_image_pixels_from_frames(const clef_rgb_image *frames, int64_t n_frames,
                                  const clef_image_processor_params *params, const char *what,
                                  clef_image_pixels *out) {
    memset(out, 0, sizeof *out);
    int rc = check_params(params, what);
    if (rc != CLEF_OK)
        return rc;
    const int64_t temporal = params->temporal_patch_size;
    if (n_frames < 1 || (n_frames > 1 && n_frames % temporal != 0))
        return clef_fail(CLEF_ERR_INVALID_ARG,
                         "%s: %lld frames is not 1 or a multiple of temporal_patch_size %lld",
                         what, (long long)n_frames, (long long)temporal);
    for (int64_t f = 1; f < n_frames; f++) {
        if (frames[f].width != frames[0].width || frames[f].height != frames[0].height)
            return clef_fail(CLEF_ERR_INVALID_ARG, "%s: frames of different sizes", what);
    }
    const int64_t patch = params->patch_size, merge = params->merge_size;
    int64_t resized_h, resized_w;
    rc = clef_smart_resize(frames[0].height, frames[0].width, patch * merge, params->min_pixels,
                           params->max_pixels, what, &resized_h, &resized_w);
    if (rc != CLEF_OK)
        return rc;
    const int64_t grid_t = n_frames == 1 ? 1 : n_frames / temporal;
    const int64_t grid_h = resized_h / patch, grid_w = resized_w / patch;
    const int64_t row_len = 3 * temporal * patch * patch;
    const int64_t n_rows = grid_t * grid_h * grid_w;
    if ((uint64_t)n_rows > SIZE_MAX / sizeof(float) / (uint64_t)row_len)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "%s: %lldx%lld pixels are too many rows", what,
                         (long long)resized_w, (long long)resized_h);
    float *rows = malloc((size_t)n_rows * (size_t)row_len * sizeof(float));
    if (!rows)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory for %lld pixel rows", what,
                         (long long)n_rows);
    const int pil = params->backend == CLEF_IMAGE_BACKEND_PIL;
    float table[3][256];
    clef_normalize_table(params, pil ? CLEF_NORMALIZE_RESCALE_THEN_NORMALIZE : CLEF_NORMALIZE_FUSED,
                         table);
    clef_rgb_image resized = {0};
    for (int64_t f = 0; f < n_frames; f++) {
        rc = pil ? clef_pil_resize_bicubic(&frames[f], resized_w, resized_h, what, &resized)
                 : clef_torch_resize_bicubic(&frames[f], resized_w, resized_h, what, &resized);
        if (rc != CLEF_OK) {
            free(rows);
            return rc;
        }
        /* One image fills every temporal slot; frame f of a clip fills slot f % temporal. */
        const int64_t t = n_frames == 1 ? 0 : f / temporal;
        const int64_t slot_first = n_frames == 1 ? 0 : f % temporal;
        const int64_t slot_end = n_frames == 1 ? temporal : slot_first + 1;
        clef_patchify_frame(&resized, table, params, grid_h, grid_w, t, slot_first, slot_end,
                            rows);
        clef_rgb_image_free(&resized);
    }
    out->rows = rows;
    out->n_rows = n_rows;
    out->row_len = row_len;
    out->grid_t = grid_t;
    out->grid_h = grid_h;
    out->grid_w = grid_w;
    out->source_w = frames[0].width;
    out->source_h = frames[0].height;
    out->resized_w = resized_w;
    out->resized_h = resized_h;
    return CLEF_OK;
}

int clef_image_process(const clef_image_file *file, const clef_image_processor_params *params,
                       const char *what, clef_image_pixels *out) {
    memset(out, 0, sizeof *out);
    int rc = check_params(params, what);
    if (rc != CLEF_OK)
        return rc;
    clef_rgb_image image;
    rc = clef_image_decode(file, what, &image);
    if (rc != CLEF_OK)
        return rc;
    rc = clef_image_pixels_from_frames(&image, 1, params, what, out);
    clef_rgb_image_free(&image);
    return rc;
}

void clef_image_pixels_free(clef_image_pixels *pixels) {
    if (!pixels)
        return;
    free(pixels->rows);
    memset(pixels, 0, sizeof *pixels);
}
