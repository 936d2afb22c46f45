/*
 * encoded.h — what the encoder hands the model: a record as token ids plus the spans the
 * joint schema head reads. This is the boundary between src/encode (which builds it, see
 * the encoder's own header for the full result with ids, descriptions and limits) and
 * src/model (which only reads these fields).
 *
 * Spans are half-open token ranges [begin, end) into ids. Options are in the order they
 * were PRESENTED to the model (choice options sorted by id; noul true, false; score 0..n-1);
 * the model returns probabilities in that order and src/encode maps them back to the
 * request's order for answers.
 */
#ifndef CLEF_ENCODE_ENCODED_H
#define CLEF_ENCODE_ENCODED_H

#include <stdint.h>

typedef enum clef_question_type {
    CLEF_QUESTION_NOUL = 0,   /* the head's type_embedding row 0 */
    CLEF_QUESTION_CHOICE = 1,
    CLEF_QUESTION_SCORE = 2,
} clef_question_type;

typedef struct clef_span {
    int32_t begin, end;       /* token indices, begin < end */
} clef_span;

typedef struct clef_encoded_question {
    clef_question_type type;
    clef_span instruction;    /* the rendered instruction */
    int32_t n_options;
    clef_span *options;       /* [n_options], presentation order */
} clef_encoded_question;

typedef struct clef_encoded_record {
    int32_t *ids;             /* [n_tokens] */
    int32_t n_tokens;
    int32_t n_questions;
    clef_encoded_question *questions; /* [n_questions], document order */
    int32_t truncated_tokens; /* state tokens cut to fit max_length (0 if none) */
    /* Added by src/encode (the fields above are the model's contract and stay as they are): */
    int32_t media_offset;     /* first media placeholder token (= the prefix length) */
    int32_t n_media_tokens;   /* placeholder tokens reserved for images/videos (0 if none) */
    int32_t state_offset;     /* first state token */
    int32_t n_state_tokens;   /* state tokens kept */
    /* Set by whoever processed the media (the engine), reported in usage: */
    int32_t n_images;         /* images processed */
    int32_t *image_usage;     /* [n_images][3]: processed width, height, vision tokens; owned
                               * (freed by clef_encoded_record_free), NULL when none */
    int32_t n_videos;         /* videos processed */
    int32_t *video_usage;     /* [n_videos][4]: processed width, height, sampled frames, vision
                               * tokens; owned like image_usage, NULL when none */
} clef_encoded_record;

#endif /* CLEF_ENCODE_ENCODED_H */
