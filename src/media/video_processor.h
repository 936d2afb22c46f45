/*
 * video_processor.h — a video file to the pixel rows the vision tower consumes, the steps of
 * transformers' Qwen3-VL video processor (the one Qwen3.5 releases name):
 *   1. frames sampled at `fps` per second of video: n = int(total / video_fps * fps), clamped
 *      to [min_frames, max_frames] and to total; indices = round(linspace(0, total - 1, n))
 *      (numpy's linspace and round half to even);
 *   2. each sampled frame decoded to RGB (video_codec.h);
 *   3. the video smart_resize: the same rounding as images but on the area of all frames
 *      (t x h x w within [min_pixels, max_pixels], t rounded to temporal_patch_size), sides
 *      under patch * merge first scaled up;
 *   4. each frame resized (torchvision's uint8 antialiased bicubic, torch_resize.h — the
 *      reference runs on transformers' torchvision backend) and normalized in torch's fused
 *      order ((x - mean * 255) / (std * 255) in float32);
 *   5. the frame count padded to a multiple of temporal_patch_size by repeating the last
 *      frame, then patchified as images are (image_processor.h layout), grid_t = frames / 2.
 * Timestamps, one per temporal patch: the mean of the first and last frame time
 * (index / video_fps) of the patch, as the Qwen3-VL processor puts them in the prompt.
 *
 * What is matched exactly: sampling, sizes, grid and timestamps are the reference's integer
 * and float steps; for the same decoded frames the pixel rows are bit-identical to
 * Qwen3VLVideoProcessor's. Decoding is FFmpeg's (the reference reads files with PyAV's own
 * FFmpeg build, whose lossy decoders may differ in the last bits).
 */
#ifndef CLEF_MEDIA_VIDEO_PROCESSOR_H
#define CLEF_MEDIA_VIDEO_PROCESSOR_H

#include "media/image_processor.h"

#include <stddef.h>
#include <stdint.h>

typedef struct clef_video_params {
    clef_image_processor_params image; /* patch, temporal, merge, mean, std, rescale; min /
                                          max_pixels = the video's size.shortest_edge /
                                          longest_edge, over all sampled frames */
    double fps;                        /* frames sampled per second of video (2) */
    int64_t min_frames, max_frames;    /* bounds on the sampled count (4, 768) */
} clef_video_params;

typedef struct clef_video_pixels {
    clef_image_pixels pixels; /* grid_t = padded frame count / temporal_patch_size */
    int64_t n_frames;         /* frames sampled (before padding) */
    int64_t *frame_indices;   /* [n_frames], into the video's frames */
    double *timestamps;       /* [pixels.grid_t], seconds */
    int64_t total_frames;     /* in the video */
    double video_fps;         /* the video's average frame rate */
} clef_video_pixels;

/* Qwen3-VL's video processor defaults: patch 16, temporal 2, merge 2, min_pixels 131,072
 * (128 * 32 * 32), max_pixels 786,432 (768 * 32 * 32), mean = std = 0.5, fps 2, frames 4..768. */
void clef_video_default_params(clef_video_params *params);

/* Step 1 alone: writes at most params->max_frames indices. Returns CLEF_OK or
 * CLEF_ERR_REQUEST_INVALID (no frames, frame rate not positive). */
int clef_video_sample_indices(int64_t total_frames, double video_fps,
                              const clef_video_params *params, const char *what,
                              int64_t *indices, int64_t *n_indices);

/* Step 3 alone. Returns CLEF_OK or CLEF_ERR_REQUEST_INVALID (fewer frames than
 * temporal_patch_size, aspect ratio over 200, a 0 side). */
int clef_video_smart_resize(int64_t n_frames, int64_t height, int64_t width, int64_t factor,
                            int64_t temporal_factor, int64_t min_pixels, int64_t max_pixels,
                            const char *what, int64_t *out_h, int64_t *out_w);

/* The whole chain on a video file in memory. Returns CLEF_OK, CLEF_ERR_REQUEST_INVALID,
 * CLEF_ERR_REQUEST_TOO_LONG (video_codec.h caps), CLEF_ERR_UNSUPPORTED (built without
 * CLEF_MEDIA_VIDEO), CLEF_ERR_INVALID_ARG or CLEF_ERR_OUT_OF_MEMORY. On failure *out is
 * zeroed. */
int clef_video_process(const uint8_t *bytes, size_t size, const clef_video_params *params,
                       const char *what, clef_video_pixels *out);

/* 1 when this build decodes video (CMake CLEF_MEDIA_VIDEO). */
int clef_video_decoding_available(void);

void clef_video_pixels_free(clef_video_pixels *video); /* accepts NULL and a zeroed struct */

#endif /* CLEF_MEDIA_VIDEO_PROCESSOR_H */
