/*
 * media_placeholders.c — the placeholder ids of a record's images (see media_placeholders.h).
 */
#include "encode/media_placeholders.h"

#include "core/error.h"

static int push(tok_ids *out, int32_t id) {
    return tok_ids_push(out, id) == 0 ? CLEF_OK
                                      : clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory for media ids");
}

int clef_media_placeholder_ids(void *ctx, const clef_request *request, tok_ids *out) {
    const clef_media_placeholders *p = ctx;
    if (request->n_videos > 0)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "videos: %d video(s) in the request; this engine "
                         "reads images only so far", (int)request->n_videos);
    if (request->n_images != p->n_images)
        return clef_fail(CLEF_ERR_INTERNAL, "the request has %d image(s), %d were processed",
                         (int)request->n_images, (int)p->n_images);
    int st = CLEF_OK;
    /* "<|vision_start|><|image_pad|><|vision_end|>" per image, the pad expanded to the grid */
    for (int32_t i = 0; st == CLEF_OK && i < p->n_images; i++) {
        st = push(out, p->vision_start);
        for (int64_t k = 0; st == CLEF_OK && k < p->image_tokens[i]; k++)
            st = push(out, p->image_pad);
        if (st == CLEF_OK)
            st = push(out, p->vision_end);
    }
    if (st == CLEF_OK)
        st = p->tokenize(p->tokenize_ctx, "\n", 1, out);
    return st;
}
