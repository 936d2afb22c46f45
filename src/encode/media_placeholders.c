/*
 * media_placeholders.c — the placeholder ids of a record's images and videos (see
 * media_placeholders.h).
 */
#include "encode/media_placeholders.h"

#include "core/error.h"

#include <stdio.h>

static int push(tok_ids *out, int32_t id) {
    return tok_ids_push(out, id) == 0 ? CLEF_OK
                                      : clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory for media ids");
}

static int push_run(tok_ids *out, int32_t start, int32_t pad, int64_t n, int32_t end) {
    int st = push(out, start);
    for (int64_t k = 0; st == CLEF_OK && k < n; k++)
        st = push(out, pad);
    return st == CLEF_OK ? push(out, end) : st;
}

int clef_media_placeholder_ids(void *ctx, const clef_request *request, tok_ids *out) {
    const clef_media_placeholders *p = ctx;
    if (request->n_images != p->n_images || request->n_videos != p->n_videos)
        return clef_fail(CLEF_ERR_INTERNAL, "the request has %d image(s) and %d video(s), %d and "
                         "%d were processed", (int)request->n_images, (int)request->n_videos,
                         (int)p->n_images, (int)p->n_videos);
    int st = CLEF_OK;
    /* "<|vision_start|><|image_pad|><|vision_end|>" per image, the pad expanded to the grid */
    for (int32_t i = 0; st == CLEF_OK && i < p->n_images; i++)
        st = push_run(out, p->vision_start, p->image_pad, p->image_tokens[i], p->vision_end);
    /* per video: <|vision_start|>, then per temporal patch its timestamp text and one
     * vision_start / pads / vision_end run, then <|vision_end|> */
    for (int32_t v = 0; st == CLEF_OK && v < p->n_videos; v++) {
        const clef_video_placeholder *vp = &p->videos[v];
        st = push(out, p->vision_start);
        for (int64_t g = 0; st == CLEF_OK && g < vp->groups; g++) {
            char text[64]; /* Python's f"<{t:.1f} seconds>": both round the binary value exactly */
            int n = snprintf(text, sizeof text, "<%.1f seconds>", vp->timestamps[g]);
            if (n <= 0 || n >= (int)sizeof text)
                return clef_fail(CLEF_ERR_INTERNAL, "videos[%d]: timestamp %g out of range",
                                 (int)v, vp->timestamps[g]);
            st = p->tokenize(p->tokenize_ctx, text, (size_t)n, out);
            if (st == CLEF_OK)
                st = push_run(out, p->vision_start, p->video_pad, vp->tokens_per_group,
                              p->vision_end);
        }
        if (st == CLEF_OK)
            st = push(out, p->vision_end);
    }
    if (st == CLEF_OK)
        st = p->tokenize(p->tokenize_ctx, "\n", 1, out);
    return st;
}
