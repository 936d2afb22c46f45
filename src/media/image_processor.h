/*
 * image_processor.h — from an image file to the pixel rows the vision tower consumes.
 *
 * This is the hand-off between media decoding (src/media) and the vision tower (src/model):
 * the tower needs nothing from an image but the float rows and the grid below.
 *
 * The steps are those of the Qwen2-VL / Qwen3.5 image processor in transformers:
 *   1. decode (PNG / JPEG / WebP), apply the EXIF orientation, convert to RGB exactly as PIL's
 *      Image.convert("RGB") does (alpha dropped, not composited);
 *   2. smart_resize the size to multiples of patch_size * merge_size within
 *      [min_pixels, max_pixels], resize with an antialiased bicubic filter to uint8;
 *   3. rescale and normalize: (x * rescale_factor - mean[c]) / std[c], rescale_factor = 1/255;
 * with the arithmetic of one of transformers' two backends for this processor (`backend`):
 *   - torchvision (Qwen2VLImageProcessor; what AutoProcessor builds whenever torchvision is
 *     installed, as in the pinned requirements, and what a release naming
 *     Qwen2VLImageProcessorFast asks for): torch's uint8 resize (torch_resize.h) and the fused
 *     normalization (x - mean * 255) / (std * 255) in float32;
 *   - PIL (Qwen2VLImageProcessorPil; transformers without torchvision): Pillow's resize
 *     (pil_resize.h) and x * rescale_factor in float64, then the float32 subtract and divide.
 * The two differ by one uint8 step in a few percent of the resized values.
 *   4. repeat the frame temporal_patch_size times (an image fills every temporal slot) and
 *      patchify in merge-block order.
 *
 * Output layout (the same as the reference's `pixel_values`): rows ordered
 *   for t in grid_t, for bh in grid_h/merge, for bw in grid_w/merge, for mh in merge, for mw in merge
 * (each merge x merge block of patches is contiguous, so the 2x2 merger reads 4 adjacent rows);
 * each row holds in_channels * temporal_patch_size * patch_size * patch_size floats ordered
 *   [channel][temporal][py][px].
 * grid = (grid_t, grid_h, grid_w) in patches; n_rows = grid_t * grid_h * grid_w; the number of
 * vision tokens after merging is n_rows / (merge * merge).
 */
#ifndef CLEF_MEDIA_IMAGE_PROCESSOR_H
#define CLEF_MEDIA_IMAGE_PROCESSOR_H

#include "clef_release.h"
#include "media/image_source.h"
#include "media/rgb_image.h"

#include <stdint.h>

/* Which transformers backend's arithmetic the image processor reproduces (see above). */
typedef enum clef_image_backend {
    CLEF_IMAGE_BACKEND_TORCHVISION = 0, /* the default */
    CLEF_IMAGE_BACKEND_PIL = 1,
} clef_image_backend;

/* The processor's settings. Sizes come from the release's vision config, pixel bounds and
 * normalization from its preprocessor_config.json when present (else the defaults below). */
typedef struct clef_image_processor_params {
    int64_t patch_size;          /* pixels per patch side (16; the tiny test release uses 4) */
    int64_t temporal_patch_size; /* frames per patch (2); an image is repeated to fill them */
    int64_t merge_size;          /* patches per merger side (2) */
    int64_t min_pixels;          /* smart_resize lower bound on h*w (size.shortest_edge) */
    int64_t max_pixels;          /* smart_resize upper bound on h*w (size.longest_edge) */
    float image_mean[3];         /* per channel, after x / 255 (0.5) */
    float image_std[3];          /* per channel (0.5) */
    double rescale_factor;       /* x * rescale_factor before normalizing (1/255) */
    clef_image_backend backend;  /* images only (videos always run on torchvision's) */
} clef_image_processor_params;

/* The pixel rows of one image (or one video clip). Free with clef_image_pixels_free. */
typedef struct clef_image_pixels {
    float *rows;              /* [n_rows, row_len], malloc'd; layout in the comment above */
    int64_t n_rows;           /* grid_t * grid_h * grid_w */
    int64_t row_len;          /* 3 * temporal_patch_size * patch_size * patch_size */
    int64_t grid_t, grid_h, grid_w;  /* in patches (grid_thw of the reference) */
    int64_t source_w, source_h;      /* decoded size after EXIF orientation */
    int64_t resized_w, resized_h;    /* smart_resize result = grid_w * patch, grid_h * patch */
} clef_image_pixels;

/* Qwen3.5's defaults: patch 16, temporal 2, merge 2, min_pixels 65,536 (256 * 256),
 * max_pixels 16,777,216 (4096 * 4096), mean = std = 0.5, rescale 1/255. A release's own
 * settings: clef_processor_config_load (media/processor_config.h). */
void clef_image_processor_default_params(clef_image_processor_params *params);

/* Takes patch_size, temporal_patch_size and spatial_merge_size from the release's vision
 * config (the rest of *params unchanged). Returns CLEF_OK, or CLEF_ERR_UNSUPPORTED when the
 * release has no vision tower or its in_channels is not 3. */
int clef_image_processor_params_from_vision(const clef_vision_config *vision,
                                            clef_image_processor_params *params);

/* Decodes, converts, resizes, normalizes and patchifies one image file (as returned by
 * clef_image_from_data_url / clef_image_from_base64). `what` names the field in messages
 * ("images[1]"). Returns CLEF_OK, CLEF_ERR_REQUEST_INVALID (corrupt or truncated file, 0 side,
 * aspect over 200), CLEF_ERR_REQUEST_TOO_LONG (over the probe's pixel cap, refused before
 * decoding), CLEF_ERR_UNSUPPORTED (clef built without media decoding),
 * CLEF_ERR_INVALID_ARG (bad params) or CLEF_ERR_OUT_OF_MEMORY. On failure *out is zeroed. */
int clef_image_process(const clef_image_file *file, const clef_image_processor_params *params,
                       const char *what, clef_image_pixels *out);

/* The same from decoded frames: one image (n_frames = 1, repeated into every temporal slot)
 * or a video clip (n_frames a multiple of temporal_patch_size, all the same size; grid_t =
 * n_frames / temporal_patch_size). Each frame is resized and normalized as above. Returns
 * CLEF_OK, CLEF_ERR_REQUEST_INVALID (smart_resize refusals), CLEF_ERR_INVALID_ARG or
 * CLEF_ERR_OUT_OF_MEMORY. */
int clef_image_pixels_from_frames(const clef_rgb_image *frames, int64_t n_frames,
                                  const clef_image_processor_params *params, const char *what,
                                  clef_image_pixels *out);

/* Frees out->rows and zeroes *out. Accepts NULL and a zeroed struct. */
void clef_image_pixels_free(clef_image_pixels *pixels);

#endif /* CLEF_MEDIA_IMAGE_PROCESSOR_H */
