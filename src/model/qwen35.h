/*
 * qwen35.h — the Qwen3.5 text backbone (Gated DeltaNet + gated attention, 3:1), written once
 * against the backend op table: config -> weights (placed once, read-only) -> RunState
 * (planned once per context) -> forward. The output is the final-norm hidden state of every
 * token, [n_tokens, D] fp32 — what the joint schema head reads (transformers:
 * Qwen3_5Model(...).last_hidden_state).
 *
 * Weights vs state: a qwen35_model holds only weights and the config, and is never written
 * after qwen35_load, so any number of qwen35_state (each with its own backend fork, see
 * backend.h) can run forwards over one model at the same time.
 *
 * Batches: a forward takes several sequences packed back to back (token t of sequence s at
 * row seq_start[s] + t). Every sequence runs at its true length (no padding): every op runs
 * once over all rows, the token-mixing ops (conv, delta rule, attention) with the sequence
 * offsets, so no sequence sees another. Results of a sequence are bit-identical whatever
 * else is in the batch.
 *
 * Positions: RoPE tables are built in each forward from the positions of its rows, pos
 * [3, n_tokens] (the T/H/W axes of mRoPE); text gives all three = the token's index in its own
 * sequence, which is what a NULL pos means.
 *
 * Recordings: on a backend that can record its ops (the CUDA backend: CUDA graphs, backend.h's
 * capture_begin), a forward's ops after the host writes are recorded per batch layout (the
 * sequence offsets, and the given embeddings' buffer and count) and replayed for later
 * forwards of the same layout: the first forward of a layout runs directly (it grows the
 * backend's buffers and picks its GEMM algorithms), the second records and launches the
 * recording, later ones launch it. The same kernels run on the same buffers, so the output is
 * the same, bit for bit. A state keeps up to QWEN35_GRAPHS layouts (the least recently used
 * makes room). The CUDA backend records only when turned on (CLEF_CUDA_GRAPHS=1 or
 * clef_backend_cuda_set_graphs); params.no_graphs keeps one state from recording.
 *
 * Memory: qwen35_load reads each weight once, straight into its backend buffer (BF16 or F32
 * kept as stored; small vectors — norms, conv taps, gates — as fp32) and validates every shape
 * against the config; qwen35_state_create allocates the RunState for (max_tokens,
 * max_seq_len). The forward allocates nothing.
 */
#ifndef CLEF_MODEL_QWEN35_H
#define CLEF_MODEL_QWEN35_H

#include "backend/backend.h"
#include "model/tensor_source.h"
#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

/* What a RunState is planned for. */
typedef struct qwen35_params {
    int64_t max_seq_len;  /* longest sequence a forward accepts (tokens); > 0 */
    int64_t max_tokens;   /* all sequences of one forward together; 0 = max_seq_len */
    clef_gdn_mode gdn_mode; /* CLEF_GDN_CHUNKED (default) or the recurrent reference */
    int no_graphs;        /* 1: every forward runs its ops directly, never recorded (see
                             "Recordings" below); 0 (default): recorded where the backend
                             records (the CUDA backend: only when turned on) */
} qwen35_params;

qwen35_params qwen35_default_params(void); /* max_seq_len 4096, chunked */

typedef struct qwen35_model qwen35_model;
typedef struct qwen35_state qwen35_state;

/* Validate cfg and every tensor against it and place the weights on be.
 * Errors: CLEF_ERR_CONFIG_INVALID, CLEF_ERR_TENSOR_MISSING / _SHAPE / _DTYPE (message names
 * the tensor, expected vs got), CLEF_ERR_OUT_OF_MEMORY, or the source's read status.
 * cfg is copied; be must outlive the model. */
int qwen35_load(const clef_text_config *cfg, const clef_tensor_source *src, clef_backend *be,
                qwen35_model **out);
void qwen35_free(qwen35_model *m); /* accepts NULL; after every state of it */

/* qwen35_load with the embedding table (text.embed_tokens) placed on embed_be instead of be:
 * a host backend (the CPU) while be is a GPU, so a large vocabulary does not take device
 * memory. Each forward then gathers its tokens' rows on embed_be (each state forks it) and
 * copies them to be through a small host staging buffer; results are identical (the rows are
 * the same fp32 values). embed_be NULL or be: qwen35_load. embed_be must outlive the model. */
int qwen35_load_placed(const clef_text_config *cfg, const clef_tensor_source *src,
                       clef_backend *be, clef_backend *embed_be, qwen35_model **out);

/* qwen35_load with the release's text config and tensor table (rel outlives the load only). */
int qwen35_load_release(const clef_release *rel, clef_backend *be, qwen35_model **out);

/* Plan a RunState for forwards of m on be (the model's backend or a fork of it; be and m
 * must outlive the state). Errors: CLEF_ERR_INVALID_ARG (bad params), CLEF_ERR_OUT_OF_MEMORY. */
int qwen35_state_create(const qwen35_model *m, clef_backend *be, const qwen35_params *params,
                        qwen35_state **out);
void qwen35_state_free(qwen35_state *s); /* accepts NULL */

/* Run n_seqs sequences on state s: ids (host, int32) rows [seq_start[s], seq_start[s+1]) are
 * sequence s; seq_start (host) has n_seqs + 1 entries, seq_start[0] = 0. pos (host, int32)
 * [3, n_tokens] gives each row's T/H/W position, or NULL for text (all three = the row's
 * index in its sequence). On success the final hidden states are at qwen35_state_output(s).
 * Errors: CLEF_ERR_INVALID_ARG (bad seq_start, empty sequence, s not of m),
 * CLEF_ERR_REQUEST_TOO_LONG (a sequence over max_seq_len or the batch over max_tokens),
 * CLEF_ERR_REQUEST_INVALID (a token id outside the vocabulary). */
int qwen35_forward(const qwen35_model *m, qwen35_state *s, int64_t n_seqs,
                   const int64_t *seq_start, const int32_t *ids, const int32_t *pos);

/* Rows of the batch whose input embedding is given instead of looked up: media features
 * that replace the image_pad / video_pad tokens (transformers: inputs_embeds.masked_scatter). */
typedef struct qwen35_embeds {
    int64_t n;                /* rows replaced */
    const int32_t *rows;      /* host [n]: row of the batch that feature i replaces, distinct */
    const float *features;    /* backend memory [n, D] (e.g. vision_state_output) */
} qwen35_embeds;

/* qwen35_forward where embeds (NULL: none) replaces the embedding of its rows. Errors as
 * qwen35_forward, and CLEF_ERR_INVALID_ARG for a row outside the batch or more rows than
 * the state's max_tokens. */
int qwen35_forward_embeds(const qwen35_model *m, qwen35_state *s, int64_t n_seqs,
                          const int64_t *seq_start, const int32_t *ids, const int32_t *pos,
                          const qwen35_embeds *embeds);

/* What the recordings of s did so far: forwards recorded (each layout once, again after a
 * backend buffer moved) and forwards that launched a recording (the recording ones too),
 * and the layouts held now. Any pointer may be NULL. */
void qwen35_state_graph_counts(const qwen35_state *s, int64_t *recorded, int64_t *replayed, int64_t *held);

/* [n_tokens, D] fp32 in backend memory, row = token of the last forward on s; valid until the
 * next forward on s or qwen35_state_free. */
const float *qwen35_state_output(const qwen35_state *s);

int64_t qwen35_hidden_size(const qwen35_model *m);
size_t qwen35_weight_bytes(const qwen35_model *m);   /* backend bytes of all weights */
size_t qwen35_state_bytes(const qwen35_state *s);    /* backend bytes of one RunState */
/* The most matmul scratch one of the model's linears asks be for at T rows (the buffers a
 * backend grows on first use, beyond the RunState; qwen35_scratch.c). */
size_t qwen35_matmul_scratch_bytes(const qwen35_model *m, clef_backend *be, int64_t T);

#endif /* CLEF_MODEL_QWEN35_H */
