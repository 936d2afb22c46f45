/*
 * media.c — images and videos in records, through the engine. At prepare (caller's thread):
 * each image of the request becomes pixel rows (clef_model.image_pixels: src/media's decoder
 * and image processor, media/image_processor.h), each video too (media/video_processor.h:
 * FFmpeg decoding, frame sampling, resize, temporal patches of 2), their grids give the
 * placeholders the encoder puts after the prompt prefix (encode/media_placeholders.h: a video
 * gets one run per temporal patch, after its timestamp text), and the record's 3-D RoPE
 * positions are computed from its ids and grids (model/mrope_positions.h; a video's runs are
 * one grid (1, h, w) each, as transformers splits video grids). At run (the context): the tower
 * runs once over the images and videos of every record of the batch (attention within each
 * frame), and its features replace the placeholder rows of the backbone's input
 * (qwen35_forward_embeds), in order: the k-th placeholder (image_pad or video_pad) of the
 * batch takes the k-th feature row — images first, then videos, as the prompt holds them.
 *
 * The tower's workspace belongs to the context and is planned on the first batch with
 * media, for 4 patches per token of the context (every placeholder is one merged 2x2 block
 * of patches, and placeholders are tokens), so text-only use costs no memory for it.
 */
#include "engine/engine_internal.h"

#include "core/error.h"
#include "media/image_source.h"
#include "media/video_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clef_media_free(clef_prepared *p) {
    for (int32_t i = 0; p->media && i < p->n_images; i++)
        clef_image_pixels_free(&p->media[i]);
    for (int32_t i = 0; p->videos && i < p->n_videos; i++)
        clef_video_pixels_free(&p->videos[i]);
    free(p->media);
    free(p->videos);
    free(p->media_tokens);
    free(p->video_placeholders);
    free(p->pos);
    p->media = NULL;
    p->videos = NULL;
    p->media_tokens = NULL;
    p->video_placeholders = NULL;
    p->pos = NULL;
    p->n_media = p->n_images = p->n_videos = 0;
}

/* The pixel rows of medium i: images first, then videos. */
static const clef_image_pixels *medium(const clef_prepared *p, int32_t i) {
    return i < p->n_images ? &p->media[i] : &p->videos[i - p->n_images].pixels;
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

/* Bytes the base64 text of an image or video field decodes to (its length less padding, x 3/4): the
 * request-wide caps are checked on this before any medium is decoded. Text that is not valid
 * base64 counts as what it would be; the field's own decoding refuses it by name. */
static size_t field_decoded_bytes(const json_value *image) {
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

/* The video file of a request's video field: the same two forms as images. */
static int video_file(const json_value *video, const char *what, clef_video_file *file) {
    if (video->type == JSON_STRING)
        return clef_video_from_data_url(video->u.str.ptr, video->u.str.len, what, file);
    const json_value *type = video->type == JSON_OBJECT ? json_object_get(video, "content_type") : NULL;
    const json_value *b64 = video->type == JSON_OBJECT ? json_object_get(video, "base64") : NULL;
    if (!type || type->type != JSON_STRING || !b64 || b64->type != JSON_STRING)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: expected a data URL or {\"content_type\", "
                         "\"base64\"} with string values", what);
    return clef_video_from_base64(type->u.str.ptr, type->u.str.len, b64->u.str.ptr,
                                  b64->u.str.len, what, file);
}

/* Pixel rows the tower cannot read are a processor bug, not a bad request. */
static int check_rows(const clef_model *m, const clef_image_pixels *px, const char *what) {
    if (px->row_len != vision_patch_dim(m->vision) ||
        px->n_rows != px->grid_t * px->grid_h * px->grid_w)
        return clef_fail(CLEF_ERR_INTERNAL, "%s: the processor made %lld rows of %lld floats for "
                         "a grid (%lld, %lld, %lld); the tower reads rows of %lld", what,
                         (long long)px->n_rows, (long long)px->row_len, (long long)px->grid_t,
                         (long long)px->grid_h, (long long)px->grid_w,
                         (long long)vision_patch_dim(m->vision));
    return CLEF_OK;
}

static int prepare_videos(const clef_model *m, clef_prepared *p) {
    const clef_request *r = p->request;
    size_t total = 0;
    for (int32_t i = 0; i < r->n_videos; i++)
        total += field_decoded_bytes(r->videos->u.arr.items[i]);
    if (total > CLEF_VIDEOS_TOTAL_MAX_BYTES)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "videos: %d videos of %zu bytes in all, over "
                         "the %zu-byte total a record may carry", (int)r->n_videos, total,
                         (size_t)CLEF_VIDEOS_TOTAL_MAX_BYTES);
    const int64_t merge = vision_merge_size(m->vision);
    for (int32_t j = 0; j < r->n_videos; j++) {
        char what[32];
        snprintf(what, sizeof what, "videos[%d]", (int)j);
        clef_video_file file = {0};
        int st = video_file(r->videos->u.arr.items[j], what, &file);
        if (st == CLEF_OK)
            st = clef_video_process(file.bytes, file.size, &m->video_params, what, &p->videos[j]);
        clef_video_file_free(&file);
        if (st != CLEF_OK)
            return st;
        p->n_videos = j + 1; /* owned from here, freed by clef_media_free */
        const clef_image_pixels *px = &p->videos[j].pixels;
        if ((st = check_rows(m, px, what)))
            return st;
        vision_input in = {.pixels = px->rows, .grid_t = px->grid_t, .grid_h = px->grid_h,
                           .grid_w = px->grid_w};
        p->media_tokens[p->n_images + j] = vision_tokens(m->vision, &in);
        p->video_placeholders[j] = (clef_video_placeholder){
            .groups = px->grid_t,
            .tokens_per_group = px->grid_h * px->grid_w / (merge * merge),
            .timestamps = p->videos[j].timestamps};
    }
    return CLEF_OK;
}

int clef_media_prepare(const clef_model *m, clef_prepared *p, clef_encode_params *ep) {
    const clef_request *r = p->request;
    if (r->n_images == 0 && r->n_videos == 0)
        return CLEF_OK;
    if (!m->vision)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "%s: the release '%s' has no vision tower "
                         "(no vision_config), so records with images or videos cannot be read",
                         r->n_images ? "images" : "videos", m->name);
    const int32_t n = r->n_images, nv = r->n_videos;
    if (n < 0 || nv < 0)
        return clef_fail(CLEF_ERR_INTERNAL, "media: %d images, %d videos", (int)n, (int)nv);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += field_decoded_bytes(r->images->u.arr.items[i]);
    if (total > CLEF_IMAGES_TOTAL_MAX_BYTES)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "images: %d images of %zu bytes in all, over "
                         "the %zu-byte total a record may carry", (int)n, total,
                         (size_t)CLEF_IMAGES_TOTAL_MAX_BYTES);
    p->media = calloc((size_t)n + 1, sizeof *p->media);
    p->videos = calloc((size_t)nv + 1, sizeof *p->videos);
    p->media_tokens = calloc((size_t)(n + nv), sizeof *p->media_tokens);
    p->video_placeholders = calloc((size_t)nv + 1, sizeof *p->video_placeholders);
    if (!p->media || !p->videos || !p->media_tokens || !p->video_placeholders)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "media: out of memory");
    for (int32_t i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "images[%d]", (int)i);
        clef_image_pixels *px = &p->media[i];
        int st = m->image_pixels(m->image_pixels_ctx, m, r->images->u.arr.items[i], what, px);
        p->n_images = i + 1; /* owned from here (zeroed on failure), freed by clef_media_free */
        if (st == CLEF_OK)
            st = check_rows(m, px, what);
        if (st != CLEF_OK)
            return st;
        vision_input in = {.pixels = px->rows, .grid_t = px->grid_t, .grid_h = px->grid_h,
                           .grid_w = px->grid_w};
        p->media_tokens[i] = vision_tokens(m->vision, &in);
    }
    int st = prepare_videos(m, p);
    if (st != CLEF_OK)
        return st;
    p->n_media = n + nv;
    const clef_release_config *cfg = clef_release_get_config(m->release);
    p->placeholders = (clef_media_placeholders){
        .vision_start = (int32_t)cfg->vision_start_token_id,
        .vision_end = (int32_t)cfg->vision_end_token_id,
        .image_pad = (int32_t)cfg->image_token_id,
        .video_pad = (int32_t)cfg->video_token_id,
        .n_images = n,
        .image_tokens = p->media_tokens,
        .n_videos = nv,
        .videos = p->video_placeholders,
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
    /* one grid per placeholder run: an image's (t, h, w); a video's (1, h, w) per temporal
     * patch (transformers: repeat_interleave(video_grid_thw, t) with t set to 1) */
    int64_t n_grids = p->n_images;
    for (int32_t j = 0; j < p->n_videos; j++)
        n_grids += p->videos[j].pixels.grid_t;
    clef_media_grid *grids = malloc(sizeof *grids * (size_t)n_grids);
    p->pos = malloc(sizeof(int32_t) * 3 * (size_t)e->n_tokens);
    if (!grids || !p->pos) {
        free(grids);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "media: out of memory for positions");
    }
    int64_t g = 0;
    for (int32_t i = 0; i < p->n_images; i++)
        grids[g++] = (clef_media_grid){p->media[i].grid_t, p->media[i].grid_h, p->media[i].grid_w};
    for (int32_t j = 0; j < p->n_videos; j++)
        for (int64_t t = 0; t < p->videos[j].pixels.grid_t; t++)
            grids[g++] = (clef_media_grid){1, p->videos[j].pixels.grid_h, p->videos[j].pixels.grid_w};
    int st = clef_mrope_positions(e->ids, e->n_tokens, (int32_t)cfg->image_token_id,
                                  (int32_t)cfg->video_token_id, grids, n_grids,
                                  vision_merge_size(m->vision), p->pos, e->n_tokens);
    free(grids);
    if (st != CLEF_OK)
        return st;
    /* usage: each medium's processed size (and a video's sampled frames) and its tokens */
    if (p->n_images > 0) {
        p->encoded.image_usage = malloc(sizeof(int32_t) * 3 * (size_t)p->n_images);
        if (!p->encoded.image_usage)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "images: out of memory");
        p->encoded.n_images = p->n_images;
        for (int32_t i = 0; i < p->n_images; i++) {
            p->encoded.image_usage[3 * i] = (int32_t)p->media[i].resized_w;
            p->encoded.image_usage[3 * i + 1] = (int32_t)p->media[i].resized_h;
            p->encoded.image_usage[3 * i + 2] = (int32_t)p->media_tokens[i];
        }
    }
    if (p->n_videos > 0) {
        p->encoded.video_usage = malloc(sizeof(int32_t) * 4 * (size_t)p->n_videos);
        if (!p->encoded.video_usage)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "videos: out of memory");
        p->encoded.n_videos = p->n_videos;
        for (int32_t j = 0; j < p->n_videos; j++) {
            int32_t *u = p->encoded.video_usage + 4 * j;
            u[0] = (int32_t)p->videos[j].pixels.resized_w;
            u[1] = (int32_t)p->videos[j].pixels.resized_h;
            u[2] = (int32_t)p->videos[j].n_frames;
            u[3] = (int32_t)p->media_tokens[p->n_images + j];
        }
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
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "media: out of memory");
    /* the tower's inputs in batch order, and the batch rows of their placeholders */
    const clef_release_config *cfg = clef_release_get_config(m->release);
    const int32_t image_pad = (int32_t)cfg->image_token_id, video_pad = (int32_t)cfg->video_token_id;
    int64_t k = 0, rows = 0;
    for (size_t i = 0; i < n; i++) {
        const clef_prepared *p = recs[i];
        for (int32_t j = 0; j < p->n_media; j++) {
            const clef_image_pixels *px = medium(p, j);
            in[k++] = (vision_input){.pixels = px->rows, .grid_t = px->grid_t,
                                     .grid_h = px->grid_h, .grid_w = px->grid_w};
        }
        if (p->n_media == 0)
            continue;
        const clef_encoded_record *e = &p->encoded;
        for (int32_t t = e->media_offset; t < e->media_offset + e->n_media_tokens; t++)
            if (e->ids[t] == image_pad || e->ids[t] == video_pad)
                c->media_rows[rows++] = (int32_t)(c->seq_start[i] + t);
    }
    int64_t features = 0;
    for (int64_t i = 0; i < n_inputs; i++)
        features += vision_tokens(m->vision, &in[i]);
    int st = CLEF_OK;
    if (features != rows)
        st = clef_fail(CLEF_ERR_INTERNAL, "media: %lld placeholder tokens for %lld feature rows",
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
