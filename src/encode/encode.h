/*
 * encode.h — a validated request becomes token ids plus the spans the joint schema head
 * reads, exactly as the release's reference encode_record() builds them.
 *
 * Layout (api.md "Prompt layout"; each piece tokenized on its own, no special tokens added,
 * and the ids concatenated):
 *   prefix  "<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nSTATE:\n"
 *   media   placeholder ids for images/videos (the media hook; none without media)
 *   state   render(state), cut from its END when the whole does not fit max_length
 *   schema  "\n\nSCHEMA FIELDS:\n", then per question i (1-based, document order)
 *           "\nFIELD {i}\nID: {id}\nTYPE: {type}\nINSTRUCTION: ", render(instructions)
 *           [question span], "\nALLOWED OPTIONS:\n", per option j (presentation order)
 *           "OPTION {j}: ", render({"option_id": id, "description": d}) [option span;
 *           description omitted when null], "\n"; then "END FIELD\n"
 *   suffix  "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:"
 * If prefix + media + schema + suffix exceed max_length the request is refused; otherwise
 * the state keeps its first (max_length - fixed) tokens (policy TRUNCATE, the reference
 * behaviour) or, under policy REFUSE, a state that does not fit is refused.
 *
 * The tokenizer is a callback so the encoder does not depend on one implementation:
 * clef_tokenize_tok adapts src/tokenizer's tok_encode; tests also use a byte tokenizer.
 */
#ifndef CLEF_ENCODE_ENCODE_H
#define CLEF_ENCODE_ENCODE_H

#include "encode/encoded.h"
#include "encode/request.h"
#include "tokenizer/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#define CLEF_SYSTEM_PROMPT                                                                      \
    "Read the complete state and schema. Decide every field jointly. Each answer must be "     \
    "exactly one of that field's allowed options."
#define CLEF_DEFAULT_MAX_LENGTH 16384

/* Append the ids of text[0..len) (no special tokens added) to out; 0 or a clef_status. */
typedef int (*clef_tokenize_fn)(const void *ctx, const char *text, size_t len, tok_ids *out);

/*
 * The media hook (src/media fills it): append the ids the processor makes of
 * IMAGE_PLACEHOLDER * n_images + VIDEO_PLACEHOLDER * n_videos + "\n" for this request
 * (image/video pads expanded to the grid of each medium). Without a hook, a request with
 * images or videos is refused with CLEF_ERR_UNSUPPORTED.
 */
typedef int (*clef_media_fn)(void *ctx, const clef_request *request, tok_ids *out);

typedef enum clef_truncation_policy {
    CLEF_TRUNCATE_STATE = 0,  /* cut the state from its end to fit (the reference); count reported */
    CLEF_TRUNCATE_REFUSE = 1, /* refuse a state that does not fit (CLEF_ERR_REQUEST_TOO_LONG) */
} clef_truncation_policy;

typedef struct clef_encode_params {
    int32_t max_length;             /* tokens in all; 0 = CLEF_DEFAULT_MAX_LENGTH (16384) */
    clef_truncation_policy policy;  /* what to do with a state that does not fit */
    clef_tokenize_fn tokenize;      /* required */
    const void *tokenize_ctx;       /* passed to tokenize (e.g. a const tok_tokenizer *) */
    clef_media_fn media;            /* NULL: no vision; media in a request is refused */
    void *media_ctx;
} clef_encode_params;

clef_encode_params clef_encode_default_params(void);

/* tok_encode as a clef_tokenize_fn (ctx: const tok_tokenizer *). */
static inline int clef_tokenize_tok(const void *ctx, const char *text, size_t len, tok_ids *out) {
    return tok_encode((const tok_tokenizer *)ctx, text, len, out);
}

/*
 * Encode a validated request into *out (caller-owned; free with clef_encoded_record_free).
 * Fails with CLEF_ERR_REQUEST_TOO_LONG (schema over max_length, or a state over it under
 * policy REFUSE; the message gives the token counts), CLEF_ERR_UNSUPPORTED (media without a
 * hook), the tokenizer's status, or CLEF_ERR_OUT_OF_MEMORY. On failure *out is empty.
 */
int clef_record_encode(const clef_request *request, const clef_encode_params *params,
                       clef_encoded_record *out);

void clef_encoded_record_free(clef_encoded_record *record); /* accepts NULL; leaves it zeroed */

/*
 * The text pieces of the prompt in order, with the role of each, for tools and tests that
 * want to see the prompt without a tokenizer. Calls visit(ctx, role, text, len) per piece.
 */
typedef enum clef_piece_role {
    CLEF_PIECE_PREFIX,
    CLEF_PIECE_STATE,
    CLEF_PIECE_SCHEMA,       /* fixed text between spans */
    CLEF_PIECE_INSTRUCTION,  /* a question span */
    CLEF_PIECE_OPTION,       /* an option span */
    CLEF_PIECE_SUFFIX,
} clef_piece_role;

typedef int (*clef_piece_fn)(void *ctx, clef_piece_role role, int32_t question, int32_t option,
                             const char *text, size_t len);

/* Visit the pieces in the order of the final prompt (media is not a text piece). */
int clef_prompt_pieces(const clef_request *request, clef_piece_fn visit, void *ctx);

#endif /* CLEF_ENCODE_ENCODE_H */
