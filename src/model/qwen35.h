/*
 * qwen35.h — the Qwen3.5 text backbone (Gated DeltaNet + gated attention, 3:1), written once
 * against the backend op table: config -> weights (placed once) -> RunState (planned once) ->
 * forward. The output is the final-norm hidden state of every token, [n_tokens, D] fp32 — what
 * the joint schema head reads (transformers: Qwen3_5Model(...).last_hidden_state).
 *
 * Batches: a forward takes several sequences packed back to back (token t of sequence s at
 * row seq_start[s] + t). Every sequence runs at its true length (no padding): the projections
 * and MLPs see all rows at once, convolution, delta rule and attention run per sequence.
 * Results of a sequence are bit-identical whatever else is in the batch.
 *
 * Memory: qwen35_load reads each weight once, straight into its backend buffer (BF16 or F32
 * kept as stored; small vectors — norms, conv taps, gates — as fp32), validates every shape
 * against the config, and allocates the RunState for (max_tokens, max_seq_len). The forward
 * allocates nothing.
 *
 * Thread safety: a qwen35_model holds its RunState; run one forward at a time per model.
 */
#ifndef CLEF_MODEL_QWEN35_H
#define CLEF_MODEL_QWEN35_H

#include "backend/backend.h"
#include "model/tensor_source.h"
#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

typedef struct qwen35_params {
    int64_t max_seq_len;  /* longest sequence a forward accepts (tokens); > 0 */
    int64_t max_tokens;   /* all sequences of one forward together; 0 = max_seq_len */
    clef_gdn_mode gdn_mode; /* CLEF_GDN_CHUNKED (default) or the recurrent reference */
} qwen35_params;

qwen35_params qwen35_default_params(void); /* max_seq_len 4096, chunked */

typedef struct qwen35_model qwen35_model;

/* Validate cfg and every tensor against it, place the weights on be, plan the RunState.
 * Errors: CLEF_ERR_CONFIG_INVALID, CLEF_ERR_TENSOR_MISSING / _SHAPE / _DTYPE (message names
 * the tensor, expected vs got), CLEF_ERR_OUT_OF_MEMORY, or the source's read status.
 * cfg is copied; be must outlive the model. */
int qwen35_load(const clef_text_config *cfg, const clef_tensor_source *src, clef_backend *be,
                const qwen35_params *params, qwen35_model **out);
void qwen35_free(qwen35_model *m); /* accepts NULL */

/* qwen35_load with the release's text config and tensor table (rel outlives the load only). */
int qwen35_load_release(const clef_release *rel, clef_backend *be, const qwen35_params *params,
                        qwen35_model **out);

/* Run n_seqs sequences: ids (host, int32) rows [seq_start[s], seq_start[s+1]) are sequence s;
 * seq_start (host) has n_seqs + 1 entries, seq_start[0] = 0. On success the final hidden
 * states are at qwen35_output(m). Errors: CLEF_ERR_INVALID_ARG (bad seq_start, empty
 * sequence), CLEF_ERR_REQUEST_TOO_LONG (a sequence over max_seq_len or the batch over
 * max_tokens), CLEF_ERR_REQUEST_INVALID (a token id outside the vocabulary). */
int qwen35_forward(qwen35_model *m, int64_t n_seqs, const int64_t *seq_start, const int32_t *ids);

/* [n_tokens, D] fp32 in backend memory, row = token of the last forward; valid until the
 * next forward or qwen35_free. */
const float *qwen35_output(const qwen35_model *m);

int64_t qwen35_hidden_size(const qwen35_model *m);
size_t qwen35_weight_bytes(const qwen35_model *m);   /* backend bytes of all weights */
size_t qwen35_state_bytes(const qwen35_model *m);    /* backend bytes of the RunState */

#endif /* CLEF_MODEL_QWEN35_H */
