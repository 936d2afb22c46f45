/*
 * patchify.h — the two steps of the processors that images and video frames share:
 * uint8 -> float normalization tables and writing one resized frame into pixel rows in
 * merge-block order (the layout of image_processor.h).
 */
#ifndef CLEF_MEDIA_PATCHIFY_H
#define CLEF_MEDIA_PATCHIFY_H

#include "media/image_processor.h"
#include "media/rgb_image.h"

#include <stdint.h>

typedef enum clef_normalize_order {
    /* numpy (transformers' PIL image processor): f32(x * rescale) then (v - mean) / std in
     * float32 */
    CLEF_NORMALIZE_RESCALE_THEN_NORMALIZE = 0,
    /* torch (transformers' video processors): rescale folded into mean and std,
     * (f32(x) - f32(mean / rescale)) / f32(std / rescale) in float32 */
    CLEF_NORMALIZE_FUSED = 1,
} clef_normalize_order;

/* table[c][v] = the float value uint8 v of channel c becomes. */
void clef_normalize_table(const clef_image_processor_params *params, clef_normalize_order order,
                          float table[3][256]);

/* Writes `frame` (resized to grid_h x grid_w patches) into temporal slots
 * [slot_first, slot_end) of temporal group t of `rows` ([grid_t * grid_h * grid_w, row_len]). */
void clef_patchify_frame(const clef_rgb_image *frame, const float table[3][256],
                         const clef_image_processor_params *params, int64_t grid_h,
                         int64_t grid_w, int64_t t, int64_t slot_first, int64_t slot_end,
                         float *rows);

#endif /* CLEF_MEDIA_PATCHIFY_H */
