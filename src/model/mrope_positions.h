/*
 * mrope_positions.h — the 3-D (T, H, W) RoPE positions of one sequence that holds media
 * placeholders, as transformers' Qwen3_5Model.get_rope_index builds them.
 *
 * Walking the tokens, with cur = 0: a run of text tokens takes cur, cur + 1, ... on all three
 * axes and advances cur by its length. A run of media placeholder tokens (image_pad or
 * video_pad; vision_start / vision_end are text) is one media grid (t, h, w) in patches,
 * merged to (t, h/m, w/m): token k of the run, in (frame, row, col) row-major order, gets
 * T = cur + frame, H = cur + row, W = cur + col; then cur advances by max(h, w) / m.
 * Text-only sequences give the plain 0..n-1 on every axis.
 */
#ifndef CLEF_MODEL_MROPE_POSITIONS_H
#define CLEF_MODEL_MROPE_POSITIONS_H

#include <stdint.h>

/* One media grid in patches (before merging), in the order its run appears. */
typedef struct clef_media_grid {
    int64_t t, h, w;
} clef_media_grid;

/* pos[axis * ld + i] for i < n (axis 0 T, 1 H, 2 W) from ids[0..n). Each maximal run of ids
 * equal to image_token or video_token consumes the next of the n_grids grids and must hold
 * exactly t * (h/merge) * (w/merge) tokens. Returns CLEF_OK, or CLEF_ERR_INTERNAL when runs and
 * grids disagree (the encoder made both, so that is a bug), with a message giving the counts. */
int clef_mrope_positions(const int32_t *ids, int64_t n, int32_t image_token, int32_t video_token,
                         const clef_media_grid *grids, int64_t n_grids, int64_t merge,
                         int32_t *pos, int64_t ld);

#endif /* CLEF_MODEL_MROPE_POSITIONS_H */
