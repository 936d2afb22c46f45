/*
 * request.h — a request body parsed and validated into questions and options, ready to be
 * encoded (encode.h) and answered (answers.h).
 *
 * Three shapes share one validator (api.md):
 *   CLEF_REQUEST_RECORD      a record for the library/CLI: {id?, model?, state, questions,
 *                            images?, videos?}
 *   CLEF_REQUEST_SYSTEMONE   POST /v1/systemone: {model, state, questions, images?, videos?}
 *   CLEF_REQUEST_WORKERS_AI  the Workers AI route: the same body, model "clef" | "clef-flash"
 *                            and equal to the model named in the path
 * The reference systemone() checks are the floor (model a string, state present, at least
 * one question, a known type, non-empty criteria); api.md's limits come on top and are
 * configurable through clef_request_limits. Every problem found is reported (up to
 * CLEF_REQUEST_MAX_ERRORS) as a FastAPI/pydantic-style field error {loc, msg, type}; the
 * render functions write them as TypeSafe's 422 body or as the Workers AI error envelope.
 *
 * Lifetime: a clef_request owns its parsed JSON document; every pointer inside it (ids,
 * descriptions, state) is valid until clef_request_free.
 */
#ifndef CLEF_ENCODE_REQUEST_H
#define CLEF_ENCODE_REQUEST_H

#include "core/strbuf.h"
#include "encode/encoded.h"
#include "json/json.h"

#include <stddef.h>
#include <stdint.h>

typedef enum clef_request_kind {
    CLEF_REQUEST_RECORD = 0,
    CLEF_REQUEST_SYSTEMONE = 1,
    CLEF_REQUEST_WORKERS_AI = 2,
} clef_request_kind;

/* api.md's limits (Workers AI's); clef_request_default_limits() fills them. */
typedef struct clef_request_limits {
    size_t max_body_bytes;      /* body cap in bytes (13 MiB); 0 = no cap. Over it: HTTP 413 */
    int32_t max_questions;      /* 64; at least one question is always required */
    int32_t max_id_chars;       /* 100: longest question or option id, in code points */
    int question_id_charset;    /* 1: question ids only of [A-Za-z0-9_.-] */
    int32_t min_choice_options; /* 2 */
    int32_t max_choice_options; /* 255 */
    int32_t min_score_levels;   /* 2 */
    int32_t max_score_levels;   /* 10 */
    int32_t max_images;         /* 4 */
    int32_t max_videos;         /* 4 */
    int reject_unknown_fields;  /* 1: an unknown top-level field is a 422 (extra_forbidden) */
    int max_json_depth;         /* nesting limit of the body (64) */
} clef_request_limits;

clef_request_limits clef_request_default_limits(void);

/* One option as presented to the model. */
typedef struct clef_option {
    const char *id;                 /* NUL-terminated UTF-8: "true"/"false", the choice key, "0".."n-1" */
    size_t id_len;
    const json_value *description;  /* NULL when null/absent: "description" is then omitted */
    int32_t request_index;          /* position of this option in the request's criteria */
    char index_text[12];            /* storage of a score option's id */
} clef_option;

typedef struct clef_question {
    const char *id;                   /* NUL-terminated UTF-8, the key in "questions" */
    size_t id_len;
    clef_question_type type;
    const char *type_name;            /* "noul" | "choice" | "score" */
    const json_value *instructions;   /* NULL when missing, null or "" (the id is used) */
    const json_value *criteria;       /* as sent (NULL for a noul without criteria) */
    int32_t n_options;
    clef_option *options;             /* [n_options], PRESENTATION order (choice: sorted by id) */
    int32_t *request_to_presented;    /* [n_options]: request position -> index in options */
} clef_question;

typedef struct clef_request {
    clef_request_kind kind;
    json_doc *doc;                    /* owns every pointer below */
    const json_value *root;
    const char *model;                /* NULL only for a record without "model" */
    const json_value *state;          /* any JSON value (null included) */
    const json_value *record_id;      /* "id" of a record, or NULL */
    const json_value *images;         /* array or NULL */
    const json_value *videos;         /* array or NULL */
    int32_t n_images, n_videos;
    int32_t n_questions;
    clef_question *questions;         /* [n_questions], document order */
} clef_request;

/* ---- field errors ---------------------------------------------------------------------- */

#define CLEF_REQUEST_MAX_ERRORS 32

typedef struct clef_field_error {
    char *loc;          /* a JSON array, e.g. ["body","questions","q1","type"] */
    char *path;         /* the same loc for people: body.questions.q1.type */
    char *msg;          /* one sentence naming what is wrong and what is allowed */
    const char *type;   /* pydantic-style: missing, extra_forbidden, string_type, ... */
} clef_field_error;

typedef struct clef_request_errors {
    clef_field_error *items;
    size_t count, cap;
    size_t dropped;     /* errors not kept beyond CLEF_REQUEST_MAX_ERRORS */
    int http_status;    /* 422 validation / malformed JSON, 413 body over the cap; 0 if none */
} clef_request_errors;

void clef_request_errors_free(clef_request_errors *errors); /* accepts NULL; leaves it empty */

/* ---- parsing --------------------------------------------------------------------------- */

/*
 * Parse and validate body[0..len) as a request of the given kind. path_model is the model
 * named by a Workers AI route ("clef" | "clef-flash"; NULL elsewhere). limits NULL =
 * defaults. On success *out owns the request. On failure returns CLEF_ERR_REQUEST_JSON
 * (malformed JSON, 422), CLEF_ERR_REQUEST_INVALID (validation, 422), CLEF_ERR_REQUEST_TOO_LONG
 * (body over the cap, 413) or CLEF_ERR_OUT_OF_MEMORY, fills *errors (if given) with every
 * problem found, and clef_last_error() holds the first as "loc: msg".
 */
int clef_request_parse(const char *body, size_t len, clef_request_kind kind, const char *path_model,
                       const clef_request_limits *limits, clef_request **out,
                       clef_request_errors *errors);

void clef_request_free(clef_request *request); /* accepts NULL */

/* ---- error bodies ---------------------------------------------------------------------- */

/* TypeSafe/FastAPI 422 body: {"detail":[{"loc":[...],"msg":"...","type":"..."}, ...]} */
int clef_request_errors_render_detail(const clef_request_errors *errors, clef_strbuf *out);

/* Workers AI error envelope: {"success":false,"result":{},"errors":[{"code":N,"message":
 * "loc: msg"}, ...],"messages":[]}. Codes: 3006 request too large (413), 5006 invalid
 * input (everything else). */
int clef_request_errors_render_workers_ai(const clef_request_errors *errors, clef_strbuf *out);

/* The Workers AI code of a field error type (see clef_request_errors_render_workers_ai). */
int clef_workers_ai_error_code(const clef_field_error *error);

#endif /* CLEF_ENCODE_REQUEST_H */
