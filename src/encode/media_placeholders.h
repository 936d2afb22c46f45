/*
 * media_placeholders.h — the media piece of a prompt: the ids transformers' Qwen3-VL
 * processor makes of IMAGE_PLACEHOLDER * n_images + "\n" once each image's grid is known
 * (the reference's _encode_media): per image <|vision_start|>, <|image_pad|> repeated once per
 * merged 2x2 block of patches, <|vision_end|>; then the ids of "\n". A clef_media_fn for
 * clef_encode_params.media (encode.h); the encoder places the result after the prompt prefix,
 * before the state.
 */
#ifndef CLEF_ENCODE_MEDIA_PLACEHOLDERS_H
#define CLEF_ENCODE_MEDIA_PLACEHOLDERS_H

#include "encode/encode.h"

#include <stdint.h>

typedef struct clef_media_placeholders {
    int32_t vision_start, vision_end, image_pad;  /* token ids from the release's config */
    int32_t n_images;                             /* must equal the request's image count */
    const int64_t *image_tokens;                  /* [n_images] placeholder tokens of each */
    clef_tokenize_fn tokenize;                    /* for the closing "\n" */
    const void *tokenize_ctx;
} clef_media_placeholders;

/* clef_media_fn with ctx a const clef_media_placeholders *. Returns CLEF_OK,
 * CLEF_ERR_UNSUPPORTED (videos), CLEF_ERR_INTERNAL (image count differs from the request's),
 * the tokenizer's status or CLEF_ERR_OUT_OF_MEMORY. */
int clef_media_placeholder_ids(void *ctx, const clef_request *request, tok_ids *out);

#endif /* CLEF_ENCODE_MEDIA_PLACEHOLDERS_H */
