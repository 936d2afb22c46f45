/*
 * media.c — images in records, through the engine. At prepare (caller's thread): each image
 * of the request becomes pixel rows (clef_model.image_pixels: src/media's decoder and image
 * processor, media/image_processor.h), its grid gives the number of <|image_pad|> placeholders the encoder puts after
 * the prompt prefix (encode/media_placeholders.h), and the record's 3-D RoPE positions are
 * computed from its ids and grids (model/mrope_positions.h). At run (the context): the tower
 * runs once over the images of every record of the batch, and its features replace the
 * placeholder rows of the backbone's input (qwen35_forward_embeds), in order: the k-th
 * placeholder of the batch takes the k-th feature row.
 *
 * The tower's workspace belongs to the context and is planned on the first batch with
 * images, for 4 patches per token of the context (every placeholder is one merged 2x2 block
 * of patches, and placeholders are tokens), so text-only use costs no memory for it.
 */
#include "engine/engine_internal.h"

#include "core/error.h"
#include "media/image_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clef_media_free(clef_prepared *p) {
    for (int32_t i = 0; p->media && i < p->n_media; i++)
        clef_image_pixels_free(&p->media[i]);
    free(p->media);
    free(p->media_tokens);
    free(p->pos);
    p->media = NULL;
    p->media_tokens = NULL;
    p->pos = NULL;
    p->n_media = 0;
}

/* The image file of a request's image field: a data URL, or {content_type, base64}. */
static int image_file(const json_value *image, const char *what, clef_image_file *file) {
    if (image->type == JSON_STRING)
        return clef_image_from_data_url(image->u.str.ptr, image->u.str.len, what, file);
    const json_value *type = image->type == JSON_OBJECT ? json_object_get(image, "content_type") : NULL;
    const json_value *b64 = image->type == JSON_OBJECT ? json_object_get(image, "base64") : NULL;
    if (!type || type->type != JSON_STRING || !b64 || b64->type != JSON_STRING)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: expected a data URL or {\"content_type\", "
                         "\"base64\"} with string values", what);
    return clef_image_from_base64(type->u.str.ptr, type->u.str.len, b64->u.str.ptr,
                                  b64->u.str.len, what, file);
}

/* Bytes the base64 text of an image field decodes to (its length less padding, x 3/4): the
 * request-wide cap is checked on this before any image is decoded. Text that is not valid
 * base64 counts as what it would be; the image's own decoding refuses it by name. */
static size_t image_decoded_bytes(const json_value *image) {
    const char *b64 = NULL;
    size_t len = 0;
    if (image->type == JSON_STRING) {
        const char *comma = memchr(image->u.str.ptr, ',', image->u.str.len);
        if (comma) {
            b64 = comma + 1;
            len = image->u.str.len - (size_t)(b64 - image->u.str.ptr);
        }
    } else if (image->type == JSON_OBJECT) {
        const json_value *v = json_object_get(image, "base64");
        if (v && v->type == JSON_STRING)
            b64 = v->u.str.ptr, len = v->u.str.len;
    }
    while (b64 && len > 0 && b64[len - 1] == '=')
        len--;
    return len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
}

int clef_image_pixels_default(void *ctx, const clef_model *m, const json_value *image,
                              const char *what, clef_image_pixels *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
    clef_image_file file = {0};
    int st = image_file(image, what, &file);
    if (st != CLEF_OK)
        return st;
    /* the release's processor settings (clef_processor_config_load at model load) */
    st = clef_image_process(&file, &m->image_params, what, out);
    clef_image_file_free(&file);
    return st;
}

int clef_media_prepare(const clef_model *m, clef_prepared *p, clef_encode_params *ep) {
    const clef_request *r = p->request;
    if (r->n_images == 0 && r->n_videos == 0)
        return CLEF_OK;
    if (!m->vision)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "images: the release '%s' has no vision tower "
                         "(no vision_config), so records with images cannot be read", m->name);
    if (r->n_videos > 0)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "videos: %d video(s) in the record; this engine "
                         "reads images only so far", (int)r->n_videos);
    const int32_t n = r->n_images;
    if (n <= 0) /* videos only were refused above; the parser counts an array's items */
        return clef_fail(CLEF_ERR_INTERNAL, "images: %d images", (int)n);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += image_decoded_bytes(r->images->u.arr.items[i]);
    if (total > CLEF_IMAGES_TOTAL_MAX_BYTES)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "images: %d images of %zu bytes in all, over "
                         "the %zu-byte total a record may carry", (int)n, total,
                         (size_t)CLEF_IMAGES_TOTAL_MAX_BYTES);
    p->media = calloc((size_t)n, sizeof *p->media);
    p->media_tokens = calloc((size_t)n, sizeof *p->media_tokens);
    if (!p->media || !p->media_tokens)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "images: out of memory");
    p->n_media = n;
    for (int32_t i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "images[%d]", (int)i);
        clef_image_pixels *px = &p->media[i];
        int st = m->image_pixels(m->image_pixels_ctx, m, r->images->u.arr.items[i], what, px);
        if (st != CLEF_OK)
            return st;
        if (px->row_len != vision_patch_dim(m->vision) ||
            px->n_rows != px->grid_t * px->grid_h * px->grid_w)
            return clef_fail(CLEF_ERR_INTERNAL, "%s: the processor made %lld rows of %lld floats for "
                             "a grid (%lld, %lld, %lld); the tower reads rows of %lld", what,
                             (long long)px->n_rows, (long long)px->row_len, (long long)px->grid_t,
                             (long long)px->grid_h, (long long)px->grid_w,
                             (long long)vision_patch_dim(m->vision));
        vision_input in = {.pixels = px->rows, .grid_t = px->grid_t, .grid_h = px->grid_h,
                           .grid_w = px->grid_w};
        p->media_tokens[i] = vision_tokens(m->vision, &in);
    }
    const clef_release_config *cfg = clef_release_get_config(m->release);
    p->placeholders = (clef_media_placeholders){
        .vision_start = (int32_t)cfg->vision_start_token_id,
        .vision_end = (int32_t)cfg->vision_end_token_id,
        .image_pad = (int32_t)cfg->image_token_id,
        .n_images = n,
        .image_tokens = p->media_tokens,
        .tokenize = ep->tokenize,
        .tokenize_ctx = ep->tokenize_ctx,
    };
    ep->media = clef_media_placeholder_ids;
    ep->media_ctx = &p->placeholders;
    return CLEF_OK;
}

int clef_media_positions(const clef_model *m, clef_prepared *p) {
    if (p->n_media <= 0)
        return CLEF_OK;
    const clef_encoded_record *e = &p->encoded;
    const clef_release_config *cfg = clef_release_get_config(m->release);
    clef_media_grid *grids = malloc(sizeof *grids * (size_t)p->n_media);
    p->pos = malloc(sizeof(int32_t) * 3 * (size_t)e->n_tokens);
    if (!grids || !p->pos) {
        free(grids);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "images: out of memory for positions");
    }
    for (int32_t i = 0; i < p->n_media; i++)
        grids[i] = (clef_media_grid){p->media[i].grid_t, p->media[i].grid_h, p->media[i].grid_w};
    int st = clef_mrope_positions(e->ids, e->n_tokens, (int32_t)cfg->image_token_id,
                                  (int32_t)cfg->video_token_id, grids, p->n_media,
                                  vision_merge_size(m->vision), p->pos, e->n_tokens);
    free(grids);
    if (st != CLEF_OK)
        return st;
    /* usage: each image's processed size and its placeholder tokens */
    p->encoded.image_usage = malloc(sizeof(int32_t) * 3 * (size_t)p->n_media);
    if (!p->encoded.image_usage)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "images: out of memory");
    p->encoded.n_images = p->n_media;
    for (int32_t i = 0; i < p->n_media; i++) {
        p->encoded.image_usage[3 * i] = (int32_t)p->media[i].resized_w;
        p->encoded.image_usage[3 * i + 1] = (int32_t)p->media[i].resized_h;
        p->encoded.image_usage[3 * i + 2] = (int32_t)p->media_tokens[i];
    }
    return CLEF_OK;
}

int clef_media_run(clef_context *c, clef_prepared *const *recs, size_t n, qwen35_embeds *embeds) {
    const clef_model *m = c->model;
    memset(embeds, 0, sizeof *embeds);
    int64_t n_inputs = 0;
    for (size_t i = 0; i < n; i++)
        n_inputs += recs[i]->n_media;
    if (n_inputs == 0)
        return CLEF_OK;
    if (!c->vision) {
        int st = vision_state_create(m->vision, c->be, 4 * (int64_t)c->params.max_tokens, &c->vision);
        if (st != CLEF_OK)
            return clef_fail_prefix(st, "planning the vision tower's workspace");
    }
    vision_input *in = malloc(sizeof *in * (size_t)n_inputs);
    if (!in)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "images: out of memory");
    /* the tower's inputs in batch order, and the batch rows of their placeholders */
    const int32_t image_pad = (int32_t)clef_release_get_config(m->release)->image_token_id;
    int64_t k = 0, rows = 0;
    for (size_t i = 0; i < n; i++) {
        const clef_prepared *p = recs[i];
        for (int32_t j = 0; j < p->n_media; j++)
            in[k++] = (vision_input){.pixels = p->media[j].rows, .grid_t = p->media[j].grid_t,
                                     .grid_h = p->media[j].grid_h, .grid_w = p->media[j].grid_w};
        if (p->n_media == 0)
            continue;
        const clef_encoded_record *e = &p->encoded;
        for (int32_t t = e->media_offset; t < e->media_offset + e->n_media_tokens; t++)
            if (e->ids[t] == image_pad)
                c->media_rows[rows++] = (int32_t)(c->seq_start[i] + t);
    }
    int64_t features = 0;
    for (int64_t i = 0; i < n_inputs; i++)
        features += vision_tokens(m->vision, &in[i]);
    int st = CLEF_OK;
    if (features != rows)
        st = clef_fail(CLEF_ERR_INTERNAL, "images: %lld placeholder tokens for %lld feature rows",
                       (long long)rows, (long long)features);
    if (st == CLEF_OK)
        st = vision_forward(m->vision, c->vision, n_inputs, in);
    free(in);
    if (st != CLEF_OK)
        return st;
    *embeds = (qwen35_embeds){.n = rows, .rows = c->media_rows,
                              .features = vision_state_output(c->vision)};
    return CLEF_OK;
}
