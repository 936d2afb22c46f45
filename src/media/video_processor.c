/*
 * video_processor.c — frame sampling, the video smart_resize and the video pixel rows (see
 * video_processor.h). The decoding itself is video_codec.c (CLEF_MEDIA_VIDEO builds only).
 */
#include "media/video_processor.h"

#include "core/error.h"
#include "media/patchify.h"
#include "media/torch_resize.h"

#ifdef CLEF_HAVE_VIDEO
#include "media/video_codec.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

void clef_video_default_params(clef_video_params *params) {
    memset(params, 0, sizeof *params);
    clef_image_processor_default_params(&params->image);
    params->image.min_pixels = 128 * 32 * 32;
    params->image.max_pixels = 768 * 32 * 32;
    params->fps = 2.0;
    params->min_frames = 4;
    params->max_frames = 768;
}

int clef_video_decoding_available(void) {
#ifdef CLEF_HAVE_VIDEO
    return 1;
#else
    return 0;
#endif
}

int clef_video_sample_indices(int64_t total_frames, double video_fps,
                              const clef_video_params *params, const char *what,
                              int64_t *indices, int64_t *n_indices) {
    *n_indices = 0;
    if (total_frames <= 0 || !(video_fps > 0) || !isfinite(video_fps))
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: video has %lld frames at %g fps", what,
                         (long long)total_frames, video_fps);
    /* num_frames = int(total / video_fps * fps), then min(max(n, min), max, total) */
    double want = (double)total_frames / video_fps * params->fps;
    int64_t n = want >= 9.0e18 ? INT64_MAX : (int64_t)want;
    if (n < params->min_frames)
        n = params->min_frames;
    if (n > params->max_frames)
        n = params->max_frames;
    if (n > total_frames)
        n = total_frames;
    if (n < 1)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: no frame to sample", what);
    /* np.linspace(0, total - 1, n).round(): i * step, the last one exactly total - 1 */
    const double stop = (double)(total_frames - 1);
    const double step = n > 1 ? stop / (double)(n - 1) : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double y = (n > 1 && i == n - 1) ? stop : step == 0.0 ? 0.0 : (double)i * step;
        indices[i] = (int64_t)nearbyint(y); /* half to even, as numpy's round */
    }
    *n_indices = n;
    return CLEF_OK;
}

int clef_video_smart_resize(int64_t n_frames, int64_t height, int64_t width, int64_t factor,
                            int64_t temporal_factor, int64_t min_pixels, int64_t max_pixels,
                            const char *what, int64_t *out_h, int64_t *out_w) {
    /* min_pixels over max_pixels is not refused: the reference's arithmetic goes on (the
     * "over max" branch is tried first), and so does this one. */
    if (factor < 1 || temporal_factor < 1 || min_pixels < 1 || max_pixels < 1)
        return clef_fail(CLEF_ERR_INVALID_ARG, "%s: video resize settings out of range", what);
    if (n_frames < temporal_factor)
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: %lld frames sampled, fewer than temporal_patch_size %lld", what,
                         (long long)n_frames, (long long)temporal_factor);
    if (height <= 0 || width <= 0)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: video frames are %lldx%lld (empty)",
                         what, (long long)width, (long long)height);
    if (height < factor || width < factor) { /* scaled up first, truncated to integers */
        double a = (double)factor / (double)height, b = (double)factor / (double)width;
        double scale = a > b ? a : b;
        height = (int64_t)((double)height * scale);
        width = (int64_t)((double)width * scale);
    }
    double longer = (double)(height > width ? height : width);
    double shorter = (double)(height > width ? width : height);
    if (shorter <= 0 || longer / shorter > 200)
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: video frames %lldx%lld, aspect ratio over 200", what,
                         (long long)width, (long long)height);
    const double f = (double)factor;
    int64_t h_bar = (int64_t)nearbyint((double)height / f) * factor;
    int64_t w_bar = (int64_t)nearbyint((double)width / f) * factor;
    int64_t t_bar = (int64_t)nearbyint((double)n_frames / (double)temporal_factor) * temporal_factor;
    const double volume = (double)n_frames * (double)height * (double)width;
    if ((double)t_bar * (double)h_bar * (double)w_bar > (double)max_pixels) {
        double beta = sqrt(volume / (double)max_pixels);
        int64_t h = (int64_t)floor((double)height / beta / f) * factor;
        int64_t w = (int64_t)floor((double)width / beta / f) * factor;
        h_bar = h > factor ? h : factor;
        w_bar = w > factor ? w : factor;
    } else if ((double)t_bar * (double)h_bar * (double)w_bar < (double)min_pixels) {
        double beta = sqrt((double)min_pixels / volume);
        h_bar = (int64_t)ceil((double)height * beta / f) * factor;
        w_bar = (int64_t)ceil((double)width * beta / f) * factor;
    }
    *out_h = h_bar;
    *out_w = w_bar;
    return CLEF_OK;
}

void clef_video_pixels_free(clef_video_pixels *video) {
    if (!video)
        return;
    clef_image_pixels_free(&video->pixels);
    free(video->frame_indices);
    free(video->timestamps);
    memset(video, 0, sizeof *video);
}

#ifdef CLEF_HAVE_VIDEO
/* Decodes the sampled frames, each resized as soon as it is decoded (only the resized
 * frames are kept: their total is bounded by max_pixels). */
static int decode_sampled(clef_video_decoder *dec, const int64_t *indices, int64_t n,
                          int64_t out_w, int64_t out_h, const char *what,
                          clef_rgb_image *resized) {
    clef_rgb_image frame = {0};
    int64_t next = 0, index = 0;
    int done = 0, rc = CLEF_OK;
    while (next < n && rc == CLEF_OK) {
        rc = clef_video_decoder_next(dec, 1, &frame, &index, &done);
        if (rc != CLEF_OK)
            break;
        if (done) {
            rc = clef_fail(CLEF_ERR_REQUEST_INVALID,
                           "%s: the video ends after %lld frames, its header says more", what,
                           (long long)index + 1);
            break;
        }
        /* an index may be sampled twice (short videos): every slot asking for it gets it */
        while (next < n && indices[next] == index && rc == CLEF_OK) {
            rc = clef_torch_resize_bicubic(&frame, out_w, out_h, what, &resized[next]);
            next++;
        }
    }
    clef_rgb_image_free(&frame);
    return rc;
}
#endif

int clef_video_process(const uint8_t *bytes, size_t size, const clef_video_params *params,
                       const char *what, clef_video_pixels *out) {
    memset(out, 0, sizeof *out);
#ifndef CLEF_HAVE_VIDEO
    (void)bytes;
    (void)size;
    (void)params;
    return clef_fail(CLEF_ERR_UNSUPPORTED,
                     "%s: this clef was built without video decoding (CMake CLEF_MEDIA_VIDEO=OFF)",
                     what);
#else
    const clef_image_processor_params *ip = &params->image;
    if (ip->patch_size < 1 || ip->merge_size < 1 || ip->temporal_patch_size < 1 ||
        params->min_frames < 1 || params->max_frames < params->min_frames ||
        params->max_frames > CLEF_VIDEO_MAX_FRAMES || !(params->fps > 0))
        return clef_fail(CLEF_ERR_INVALID_ARG, "%s: video processor settings out of range", what);
    clef_video_decoder *dec = NULL;
    clef_video_info info;
    int rc = clef_video_decoder_open(bytes, size, what, &dec, &info);
    if (rc != CLEF_OK)
        return rc;
    int64_t *indices = malloc(sizeof(int64_t) * (size_t)params->max_frames);
    clef_rgb_image *resized = NULL;
    int64_t n = 0, out_h = 0, out_w = 0;
    if (!indices) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory", what);
        goto done;
    }
    rc = clef_video_sample_indices(info.total_frames, info.fps, params, what, indices, &n);
    if (rc == CLEF_OK)
        rc = clef_video_smart_resize(n, info.height, info.width, ip->patch_size * ip->merge_size,
                                     ip->temporal_patch_size, ip->min_pixels, ip->max_pixels,
                                     what, &out_h, &out_w);
    if (rc != CLEF_OK)
        goto done;
    resized = calloc((size_t)n, sizeof *resized);
    if (!resized) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory", what);
        goto done;
    }
    rc = decode_sampled(dec, indices, n, out_w, out_h, what, resized);
    if (rc != CLEF_OK)
        goto done;
    /* pixel rows: frames padded to a multiple of temporal by repeating the last */
    const int64_t temporal = ip->temporal_patch_size;
    const int64_t padded = (n + temporal - 1) / temporal * temporal;
    const int64_t grid_t = padded / temporal, grid_h = out_h / ip->patch_size,
                  grid_w = out_w / ip->patch_size;
    const int64_t row_len = 3 * temporal * ip->patch_size * ip->patch_size;
    const int64_t n_rows = grid_t * grid_h * grid_w;
    float *rows = malloc((size_t)n_rows * (size_t)row_len * sizeof(float));
    out->frame_indices = malloc(sizeof(int64_t) * (size_t)n);
    out->timestamps = malloc(sizeof(double) * (size_t)grid_t);
    if (!rows || !out->frame_indices || !out->timestamps) {
        free(rows);
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory for the video's pixel rows", what);
        goto done;
    }
    float table[3][256];
    clef_normalize_table(ip, CLEF_NORMALIZE_FUSED, table);
    for (int64_t f = 0; f < padded; f++) {
        const clef_rgb_image *frame = &resized[f < n ? f : n - 1];
        clef_patchify_frame(frame, table, ip, grid_h, grid_w, f / temporal, f % temporal,
                            f % temporal + 1, rows);
    }
    for (int64_t t = 0; t < grid_t; t++) { /* mean of the first and last frame of the patch */
        int64_t first = indices[t * temporal < n ? t * temporal : n - 1];
        int64_t last = indices[t * temporal + temporal - 1 < n ? t * temporal + temporal - 1 : n - 1];
        out->timestamps[t] = ((double)first / info.fps + (double)last / info.fps) / 2;
    }
    memcpy(out->frame_indices, indices, sizeof(int64_t) * (size_t)n);
    out->pixels.rows = rows;
    out->pixels.n_rows = n_rows;
    out->pixels.row_len = row_len;
    out->pixels.grid_t = grid_t;
    out->pixels.grid_h = grid_h;
    out->pixels.grid_w = grid_w;
    out->pixels.source_w = info.width;
    out->pixels.source_h = info.height;
    out->pixels.resized_w = out_w;
    out->pixels.resized_h = out_h;
    out->n_frames = n;
    out->total_frames = info.total_frames;
    out->video_fps = info.fps;
done:
    if (rc != CLEF_OK)
        clef_video_pixels_free(out);
    if (resized) {
        for (int64_t i = 0; i < n; i++)
            clef_rgb_image_free(&resized[i]);
        free(resized);
    }
    free(indices);
    clef_video_decoder_close(dec);
    return rc;
#endif
}
