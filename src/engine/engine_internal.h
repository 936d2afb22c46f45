/*
 * engine_internal.h — the objects behind the public handles of include/clef.h, shared by the
 * files of src/engine/: the model (weights once, read-only after load), the context (one
 * workspace and backend fork per concurrent forward), and a prepared record.
 *
 * Invariants:
 *  - After clef_model_load returns, nothing in a clef_model is written except through
 *    default_lock (the lazily created default context the clef_model_decide* calls share).
 *    Contexts only read their model, so they run concurrently without a lock between them.
 *  - A context writes only its own workspace (qwen35_state, head fork) and runs its ops on its
 *    own backend fork.
 */
#ifndef CLEF_ENGINE_INTERNAL_H
#define CLEF_ENGINE_INTERNAL_H

#include "clef.h"

#include "backend/backend.h"
#include "core/io.h"
#include "encode/encode.h"
#include "engine/engine.h"
#include "encode/media_placeholders.h"
#include "media/image_processor.h"
#include "media/video_processor.h"
#include "encode/request.h"
#include "model/joint_head.h"
#include "model/mrope_positions.h"
#include "model/qwen35.h"
#include "model/vision.h"
#include "release/release.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>

/* Where lm_head rows come from: lm_head.weight (or the tied embedding) [vocab, hidden] in the
 * release, read by row with clef_release_read_range (pread on the file the release opened and
 * contained; safe from any thread). */
typedef struct clef_lm_source {
    const clef_release *rel;
    const clef_tensor_info *tensor;
    int64_t vocab_size, hidden_size;
} clef_lm_source;

/* An image field of a request (a data URL string or {content_type, base64}) to the pixel
 * rows the vision tower reads (media/image_processor.h: decode, resize, normalize, patchify).
 * `what` names the field ("images[1]") in messages. A clef_status; on failure *out is zeroed
 * (clef_image_pixels_free accepts it either way). */
typedef int (*clef_image_pixels_fn)(void *ctx, const clef_model *m, const json_value *image,
                                    const char *what, clef_image_pixels *out);

struct clef_model {
    char *name;                     /* the release directory's base name */
    clef_model_params params;       /* with defaults filled in */
    clef_release *release;
    tok_tokenizer *tokenizer;
    char device[24];                /* "cpu" or "cuda:N" (clef_model_device) */
    clef_backend *backend;          /* where the weights live; contexts fork it */
    clef_backend *host_backend;     /* CLEF_PROFILE_HOST_EMBED on a GPU: the CPU backend the
                                       embedding table lives on (qwen35_load_placed), or NULL */
    qwen35_model *backbone;         /* weights only */
    clef_joint_head *head;          /* weights only (no workspace) */
    vision_model *vision;           /* weights only; NULL when the release has no tower */
    clef_image_pixels_fn image_pixels; /* images to pixel rows (media.c; tests replace it) */
    void *image_pixels_ctx;
    clef_image_processor_params image_params; /* the release's processor settings (vision) */
    clef_video_params video_params; /* the release's video processor settings (vision) */
    clef_lm_source lm;
    clef_request_limits limits;
    uint64_t load_done, load_total; /* weight bytes read so far / in all, for progress */
    pthread_mutex_t default_lock;   /* guards default_ctx and every use of it */
    int lock_ready;
    clef_context *default_ctx;      /* created by the first clef_model_decide* call */
};

/* The device bytes a placement profile allows (24 / 16 GiB), 0 for none. */
uint64_t clef_profile_budget(clef_profile profile);
/* CLEF_OK, or CLEF_ERR_OUT_OF_MEMORY (message prefixed by `what`) when the model's device memory
 * plus c's (c may be NULL) exceeds m's profile budget. Always CLEF_OK on the CPU. */
int clef_profile_check(const clef_model *m, const clef_context *c, const char *what);

struct clef_context {
    clef_model *model;
    clef_context_params params;     /* with defaults filled in */
    clef_backend *be;               /* a fork of model->backend */
    qwen35_state *state;            /* the backbone's RunState */
    clef_joint_head *head;          /* a fork of model->head: own workspace */
    int32_t *ids;                   /* (max_tokens) host staging of a packed batch */
    int64_t *seq_start;             /* (max_tokens + 1) */
    int32_t *pos;                   /* (3, max_tokens) host staging of the batch's positions */
    int32_t *media_rows;            /* (max_tokens) batch rows of the media placeholders */
    vision_state *vision;           /* the tower's workspace, planned on the first image */
    int64_t last_forward_records;   /* records of the last backbone forward whose output is
                                       still in the state (rows seq_start[i]..seq_start[i+1]);
                                       0 before any or after a failed one (clef_context_hidden) */
};

struct clef_prepared {
    clef_request *request;
    clef_encoded_record encoded;
    int64_t n_options;
    float *logits, *probs;          /* [n_options], questions in order, presented order */
    double *probs_d;                /* probs widened, as the reference's .tolist() does */
    /* the lm_head rows of the option tokens, read at prepare: row_ids sorted, rows in the
     * stored dtype of lm_head, one row of hidden_size elements each */
    int32_t *row_ids;
    int64_t n_rows;
    void *rows;
    const clef_lm_source *lm;       /* how to widen rows (dtype, hidden size) */
    /* media (engine/media.c): the images' and videos' pixel rows, and the record's 3-D
     * positions. Media are numbered images first, then videos (the prompt's order). */
    int32_t n_media;                /* n_images + n_videos */
    int32_t n_images, n_videos;
    clef_image_pixels *media;       /* [n_images] */
    clef_video_pixels *videos;      /* [n_videos] (their rows in videos[j].pixels) */
    int64_t *media_tokens;          /* [n_media] placeholder tokens of each */
    clef_video_placeholder *video_placeholders; /* [n_videos] */
    clef_media_placeholders placeholders; /* the encoder's media hook context */
    int32_t *pos;                   /* (3, n_tokens) when n_media > 0, else NULL (text: 0..T-1) */
};

/* media.c: the images of p->request processed and the encoder's media hook set on ep;
 * after encoding, clef_media_positions fills p->pos. clef_media_run runs the tower over the
 * media of a batch and gives the rows their features replace. */
int clef_media_prepare(const clef_model *m, clef_prepared *p, clef_encode_params *ep);
int clef_media_positions(const clef_model *m, clef_prepared *p);
void clef_media_free(clef_prepared *p);
int clef_media_run(clef_context *c, clef_prepared *const *recs, size_t n, qwen35_embeds *embeds);
/* The default clef_image_pixels_fn: src/media's decoder and image processor. */
int clef_image_pixels_default(void *ctx, const clef_model *m, const json_value *image,
                              const char *what, clef_image_pixels *out);

/* A context for model (context.c); the default context uses it too. */
int clef_context_make(clef_model *model, const clef_context_params *params, clef_context **out);

#endif /* CLEF_ENGINE_INTERNAL_H */
