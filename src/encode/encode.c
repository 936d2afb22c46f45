/*
 * encode.c — the prompt of a Clef record as token ids and spans (see encode.h).
 *
 * clef_prompt_pieces is the single place that knows the prompt's text; the encoder feeds
 * each piece to the tokenizer, collects prefix, state, schema and suffix ids in separate
 * buffers (spans are recorded relative to the schema), and only then, knowing every
 * length, decides how much state fits and lays the record out.
 */
#include "encode/encode.h"

#include "core/error.h"
#include "core/strbuf.h"
#include "json/render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT_PREFIX "<|im_start|>system\n" CLEF_SYSTEM_PROMPT "<|im_end|>\n<|im_start|>user\nSTATE:\n"
#define PROMPT_SUFFIX "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:"

clef_encode_params clef_encode_default_params(void) {
    clef_encode_params p;
    memset(&p, 0, sizeof p);
    p.max_length = CLEF_DEFAULT_MAX_LENGTH;
    p.policy = CLEF_TRUNCATE_STATE;
    return p;
}

void clef_encoded_record_free(clef_encoded_record *record) {
    if (!record)
        return;
    for (int32_t i = 0; i < record->n_questions && record->questions; i++)
        free(record->questions[i].options);
    free(record->questions);
    free(record->ids);
    free(record->image_usage);
    free(record->video_usage);
    memset(record, 0, sizeof *record);
}

/* ---- the prompt text ------------------------------------------------------------------- */

/* Emit one piece held in b, then empty b. */
static int emit(clef_piece_fn visit, void *ctx, clef_piece_role role, int32_t q, int32_t o,
                clef_strbuf *b) {
    int status = clef_strbuf_status(b);
    if (status == CLEF_OK)
        status = visit(ctx, role, q, o, b->data ? b->data : "", b->len);
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
    return status;
}

static int option_piece(const clef_option *o, clef_strbuf *b) {
    /* render({"option_id": id, "description": d}) with sort_keys: description sorts first. */
    clef_strbuf_append_char(b, '{');
    if (o->description) {
        clef_strbuf_append_str(b, "\"description\":");
        const json_render_opts opts = {.sort_keys = 1, .allow_nonfinite = 0};
        int status = json_render(o->description, &opts, b);
        if (status != CLEF_OK)
            return status;
        clef_strbuf_append_char(b, ',');
    }
    clef_strbuf_append_str(b, "\"option_id\":");
    json_render_string(o->id, o->id_len, b);
    clef_strbuf_append_char(b, '}');
    return CLEF_OK;
}

int clef_prompt_pieces(const clef_request *request, clef_piece_fn visit, void *ctx) {
    CLEF_ASSERT(request && visit);
    clef_strbuf b = {0};
    int status;
#define EMIT(role, q, o)                                   \
    do {                                                   \
        status = emit(visit, ctx, role, q, o, &b);         \
        if (status != CLEF_OK)                             \
            goto out;                                      \
    } while (0)

    clef_strbuf_append_str(&b, PROMPT_PREFIX);
    EMIT(CLEF_PIECE_PREFIX, -1, -1);
    status = json_render_prompt(request->state, &b);
    if (status != CLEF_OK)
        goto out;
    EMIT(CLEF_PIECE_STATE, -1, -1);
    clef_strbuf_append_str(&b, "\n\nSCHEMA FIELDS:\n");
    EMIT(CLEF_PIECE_SCHEMA, -1, -1);
    for (int32_t qi = 0; qi < request->n_questions; qi++) {
        const clef_question *q = &request->questions[qi];
        clef_strbuf_appendf(&b, "\nFIELD %d\nID: ", (int)qi + 1);
        clef_strbuf_append(&b, q->id, q->id_len);
        clef_strbuf_append_str(&b, "\nTYPE: ");
        clef_strbuf_append_str(&b, q->type_name);
        clef_strbuf_append_str(&b, "\nINSTRUCTION: ");
        EMIT(CLEF_PIECE_SCHEMA, qi, -1);
        if (q->instructions)
            status = json_render_prompt(q->instructions, &b);
        else
            clef_strbuf_append(&b, q->id, q->id_len); /* missing, null or "": the id */
        if (status != CLEF_OK)
            goto out;
        EMIT(CLEF_PIECE_INSTRUCTION, qi, -1);
        clef_strbuf_append_str(&b, "\nALLOWED OPTIONS:\n");
        EMIT(CLEF_PIECE_SCHEMA, qi, -1);
        for (int32_t oi = 0; oi < q->n_options; oi++) {
            clef_strbuf_appendf(&b, "OPTION %d: ", (int)oi + 1);
            EMIT(CLEF_PIECE_SCHEMA, qi, oi);
            status = option_piece(&q->options[oi], &b);
            if (status != CLEF_OK)
                goto out;
            EMIT(CLEF_PIECE_OPTION, qi, oi);
            clef_strbuf_append_char(&b, '\n');
            EMIT(CLEF_PIECE_SCHEMA, qi, oi);
        }
        clef_strbuf_append_str(&b, "END FIELD\n");
        EMIT(CLEF_PIECE_SCHEMA, qi, -1);
    }
    clef_strbuf_append_str(&b, PROMPT_SUFFIX);
    EMIT(CLEF_PIECE_SUFFIX, -1, -1);
#undef EMIT
out:
    clef_strbuf_free(&b);
    return status;
}

/* ---- tokenizing the pieces ------------------------------------------------------------- */

typedef struct encoder {
    const clef_encode_params *params;
    tok_ids prefix, state, schema, suffix;
    clef_encoded_record *out; /* question spans filled relative to the schema start */
} encoder;

static int32_t schema_length(const encoder *e) { return (int32_t)e->schema.count; }

static int encode_piece(void *ctx, clef_piece_role role, int32_t q, int32_t o, const char *text,
                        size_t len) {
    encoder *e = ctx;
    tok_ids *dst = role == CLEF_PIECE_PREFIX   ? &e->prefix
                   : role == CLEF_PIECE_STATE  ? &e->state
                   : role == CLEF_PIECE_SUFFIX ? &e->suffix
                                               : &e->schema;
    int32_t begin = schema_length(e);
    int status = e->params->tokenize(e->params->tokenize_ctx, text, len, dst);
    if (status != CLEF_OK)
        return clef_fail_prefix(status, "tokenizing the prompt");
    if (dst->count > INT32_MAX / 2)
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "prompt piece of %zu tokens", dst->count);
    clef_span span = {begin, schema_length(e)};
    if ((role == CLEF_PIECE_INSTRUCTION || role == CLEF_PIECE_OPTION) && span.begin >= span.end)
        return clef_fail(CLEF_ERR_INTERNAL,
                         "question %d: the tokenizer produced no token for a %zu-byte %s", (int)q + 1,
                         len, role == CLEF_PIECE_OPTION ? "option" : "instruction");
    if (role == CLEF_PIECE_INSTRUCTION)
        e->out->questions[q].instruction = span;
    else if (role == CLEF_PIECE_OPTION)
        e->out->questions[q].options[o] = span;
    return CLEF_OK;
}

static void append_ids(clef_encoded_record *r, const int32_t *ids, size_t n) {
    if (n == 0)
        return; /* ids may be NULL (an empty buffer) */
    memcpy(r->ids + r->n_tokens, ids, n * sizeof *ids);
    r->n_tokens += (int32_t)n;
}

int clef_record_encode(const clef_request *request, const clef_encode_params *params,
                       clef_encoded_record *out) {
    CLEF_ASSERT(request && params && params->tokenize && out);
    memset(out, 0, sizeof *out);
    int32_t max_length = params->max_length > 0 ? params->max_length : CLEF_DEFAULT_MAX_LENGTH;
    encoder e;
    memset(&e, 0, sizeof e);
    e.params = params;
    e.out = out;
    tok_ids media = {0};
    int status = CLEF_OK;

    if ((request->n_images || request->n_videos) && !params->media) {
        status = clef_fail(CLEF_ERR_UNSUPPORTED,
                           "request has %d image(s) and %d video(s) but this engine was built "
                           "without the vision module",
                           (int)request->n_images, (int)request->n_videos);
        goto fail;
    }
    out->n_questions = request->n_questions;
    out->questions = calloc((size_t)request->n_questions, sizeof *out->questions);
    if (!out->questions)
        goto oom;
    for (int32_t i = 0; i < request->n_questions; i++) {
        clef_encoded_question *eq = &out->questions[i];
        eq->type = request->questions[i].type;
        eq->n_options = request->questions[i].n_options;
        eq->options = calloc((size_t)eq->n_options, sizeof *eq->options);
        if (!eq->options)
            goto oom;
    }
    status = clef_prompt_pieces(request, encode_piece, &e);
    if (status != CLEF_OK)
        goto fail;
    if (request->n_images || request->n_videos) {
        status = params->media(params->media_ctx, request, &media);
        if (status != CLEF_OK) {
            clef_fail_prefix(status, "encoding the request's media");
            goto fail;
        }
    }

    /* How much state fits (the reference: state_ids[: max_length - fixed_length]). */
    size_t fixed = e.prefix.count + media.count + e.schema.count + e.suffix.count;
    if (fixed > (size_t)max_length) {
        status = clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                           "schema requires %zu tokens before state; maximum is %d", fixed,
                           (int)max_length);
        goto fail;
    }
    size_t room = (size_t)max_length - fixed;
    size_t keep = e.state.count < room ? e.state.count : room;
    if (keep < e.state.count && params->policy == CLEF_TRUNCATE_REFUSE) {
        status = clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                           "state has %zu tokens but only %zu fit (max_length %d, schema and "
                           "template %zu); truncation policy is refuse",
                           e.state.count, room, (int)max_length, fixed);
        goto fail;
    }

    size_t total = fixed + keep;
    out->ids = malloc((total ? total : 1) * sizeof *out->ids);
    if (!out->ids)
        goto oom;
    append_ids(out, e.prefix.ids, e.prefix.count);
    out->media_offset = out->n_tokens;
    out->n_media_tokens = (int32_t)media.count;
    append_ids(out, media.ids, media.count);
    out->state_offset = out->n_tokens;
    out->n_state_tokens = (int32_t)keep;
    out->truncated_tokens = (int32_t)(e.state.count - keep);
    append_ids(out, e.state.ids, keep);
    int32_t schema_offset = out->n_tokens;
    append_ids(out, e.schema.ids, e.schema.count);
    append_ids(out, e.suffix.ids, e.suffix.count);
    for (int32_t i = 0; i < out->n_questions; i++) {
        clef_encoded_question *eq = &out->questions[i];
        eq->instruction.begin += schema_offset;
        eq->instruction.end += schema_offset;
        for (int32_t j = 0; j < eq->n_options; j++) {
            eq->options[j].begin += schema_offset;
            eq->options[j].end += schema_offset;
        }
    }
    goto done;

oom:
    status = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory encoding a record");
fail:
    clef_encoded_record_free(out);
done:
    tok_ids_free(&e.prefix);
    tok_ids_free(&e.state);
    tok_ids_free(&e.schema);
    tok_ids_free(&e.suffix);
    tok_ids_free(&media);
    return status;
}
