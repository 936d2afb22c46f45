/*
 * image_processor.c — the Qwen3.5 image processor's entry points (see image_processor.h):
 * parameters from the release, and the decode -> RGB -> resize -> normalize -> patchify chain.
 */
#include "media/image_processor.h"

#include "core/error.h"

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

int clef_image_process(const clef_image_file *file, const clef_image_processor_params *params,
                       const char *what, clef_image_pixels *out) {
    (void)file;
    (void)params;
    memset(out, 0, sizeof *out);
    return clef_fail(CLEF_ERR_UNSUPPORTED, "%s: image decoding is not implemented yet", what);
}

void clef_image_pixels_free(clef_image_pixels *pixels) {
    if (!pixels)
        return;
    free(pixels->rows);
    memset(pixels, 0, sizeof *pixels);
}
