/*
 * vision.h — the Qwen3.5 vision tower and its 2x2 merger, written once against the backend op
 * table (transformers: Qwen3_5VisionModel, its pooler_output). It turns the pixel rows of the
 * image processor (src/media/image_processor.h: rows of C*Tp*P*P floats in merge-block order,
 * one grid (t, h, w) per image or video) into one feature row of the text width per 2x2 block
 * of patches: the rows that replace a record's image_pad / video_pad tokens.
 *
 * The math, top to bottom (vision_forward.c):
 *   x = patches W_patch^T + b                       (the Conv3d with stride = kernel, as a matmul)
 *   x += bilinear(pos_table)                        (the side x side learned table resampled to
 *                                                    (h, w) with align_corners, per frame)
 *   per block: x += proj(attn(LN1 x)); x += fc2(act(fc1(LN2 x)))
 *     attention non-causal within each frame (t frames of h*w patches are t sequences), with a
 *     2-D RoPE over the whole head: a quarter of the dims take the patch row, a quarter its
 *     column, the table [row | col | row | col] (base rope_theta, fp32)
 *   merger: LN per patch, 4 consecutive rows (one 2x2 block) as one row, fc1, exact GELU, fc2
 *
 * Weights vs state, as the backbone (qwen35.h): a vision_model is read-only after vision_load,
 * so several vision_state (each on its own backend fork) may run over one model at once.
 * The per-patch tables (resampling taps and weights, RoPE cos/sin, frame offsets) are made on
 * the host from the grids alone and written to the state's buffers, so the tower runs on any
 * backend; the forward allocates nothing.
 */
#ifndef CLEF_MODEL_VISION_H
#define CLEF_MODEL_VISION_H

#include "backend/backend.h"
#include "model/tensor_source.h"
#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

typedef struct vision_model vision_model;
typedef struct vision_state vision_state;

/* One image (grid_t = 1) or video clip of a forward: its pixel rows in host memory,
 * [grid_t * grid_h * grid_w, vision_patch_dim(m)] in the processor's merge-block order. */
typedef struct vision_input {
    const float *pixels;
    int64_t grid_t, grid_h, grid_w; /* in patches; grid_h, grid_w multiples of the merge size */
} vision_input;

/* Validate cfg and every model.visual.* tensor against it and place the weights on be
 * (matrices in their stored F32/BF16/F16 format, vectors fp32). Errors:
 * CLEF_ERR_UNSUPPORTED (cfg->present is 0, or a format the backend does not run),
 * CLEF_ERR_CONFIG_INVALID, CLEF_ERR_TENSOR_MISSING / _SHAPE / _DTYPE (the message names the
 * tensor, expected vs got), CLEF_ERR_OUT_OF_MEMORY. cfg is copied; be outlives the model. */
int vision_load(const clef_vision_config *cfg, const clef_tensor_source *src, clef_backend *be,
                vision_model **out);
/* vision_load with the release's vision config and tensor table. */
int vision_load_release(const clef_release *rel, clef_backend *be, vision_model **out);
void vision_free(vision_model *m); /* accepts NULL; after every state of it */

/* Plan a state for forwards of at most max_patches patch rows in all (before merging).
 * Errors: CLEF_ERR_INVALID_ARG (max_patches < 4 or too large), CLEF_ERR_OUT_OF_MEMORY. */
int vision_state_create(const vision_model *m, clef_backend *be, int64_t max_patches,
                        vision_state **out);
void vision_state_free(vision_state *s); /* accepts NULL */

/* Run the tower over n inputs packed back to back. On success the merged features of input
 * i follow those of input i-1 at vision_state_output(s): vision_tokens(m, in[i]) rows each,
 * out_hidden_size wide. Errors: CLEF_ERR_INVALID_ARG (a grid that is empty or not a multiple
 * of the merge size, NULL pixels), CLEF_ERR_REQUEST_TOO_LONG (more patches than the state was
 * planned for; the message gives both counts), or a backend status. */
int vision_forward(const vision_model *m, vision_state *s, int64_t n, const vision_input *in);

/* [sum of vision_tokens, out_hidden_size] fp32 in backend memory; valid until the next
 * forward on s or vision_state_free. */
const float *vision_state_output(const vision_state *s);

int64_t vision_patch_dim(const vision_model *m);   /* floats per pixel row: C * Tp * P * P */
int64_t vision_out_dim(const vision_model *m);     /* out_hidden_size (the text width) */
int64_t vision_merge_size(const vision_model *m);  /* spatial_merge_size */
/* Feature rows (= placeholder tokens) of one input: t * h * w / merge^2. */
int64_t vision_tokens(const vision_model *m, const vision_input *in);
int64_t vision_state_max_patches(const vision_state *s);
size_t vision_weight_bytes(const vision_model *m);  /* backend bytes of all weights */
size_t vision_state_bytes(const vision_state *s);   /* backend bytes of one state */

#endif /* CLEF_MODEL_VISION_H */
