/*
 * media_placeholders.h — the media piece of a prompt: the ids transformers' Qwen3-VL
 * processor makes of IMAGE_PLACEHOLDER * n_images + VIDEO_PLACEHOLDER * n_videos + "\n" once
 * each medium's grid is known (the reference's _encode_media). IMAGE_PLACEHOLDER is
 * <|vision_start|><|image_pad|><|vision_end|>, the pad repeated once per merged 2x2 block of
 * patches. VIDEO_PLACEHOLDER is <|vision_start|><|video_pad|><|vision_end|> where the processor
 * replaces the one <|video_pad|> by, per temporal patch of the video (grid_t of them),
 * "<{t:.1f} seconds>" + <|vision_start|> + <|video_pad|> x (h * w / merge^2) + <|vision_end|>
 * (t = the patch's timestamp) — so the outer <|vision_start|> / <|vision_end|> stay around the
 * whole video. Then the ids of "\n". A clef_media_fn for clef_encode_params.media (encode.h);
 * the encoder places the result after the prompt prefix, before the state. The timestamp text
 * is tokenized alone: the tokenizer splits special tokens out first, so each text run between
 * them is a separate piece, as here.
 */
#ifndef CLEF_ENCODE_MEDIA_PLACEHOLDERS_H
#define CLEF_ENCODE_MEDIA_PLACEHOLDERS_H

#include "encode/encode.h"

#include <stdint.h>

/* One video's placeholder shape. */
typedef struct clef_video_placeholder {
    int64_t groups;            /* temporal patches (grid_t) */
    int64_t tokens_per_group;  /* grid_h * grid_w / merge^2 */
    const double *timestamps;  /* [groups], seconds */
} clef_video_placeholder;

typedef struct clef_media_placeholders {
    int32_t vision_start, vision_end, image_pad, video_pad; /* ids from the release's config */
    int32_t n_images;                             /* must equal the request's image count */
    const int64_t *image_tokens;                  /* [n_images] placeholder tokens of each */
    int32_t n_videos;                             /* must equal the request's video count */
    const clef_video_placeholder *videos;         /* [n_videos] */
    clef_tokenize_fn tokenize;                    /* for the timestamps and the closing "\n" */
    const void *tokenize_ctx;
} clef_media_placeholders;

/* clef_media_fn with ctx a const clef_media_placeholders *. Returns CLEF_OK,
 * CLEF_ERR_INTERNAL (image or video count differs from the request's), the tokenizer's
 * status or CLEF_ERR_OUT_OF_MEMORY. */
int clef_media_placeholder_ids(void *ctx, const clef_request *request, tok_ids *out);

#endif /* CLEF_ENCODE_MEDIA_PLACEHOLDERS_H */
