/*
 * joint_head.h — the joint schema head: final hidden states of one record in, one logit and
 * one probability per allowed option of every question out.
 *
 * The math is the release's JointSchemaHead (joint_schema_model.py, see
 * shared/spec/clef-model.md "Joint schema head"), evaluated in fp32 on the backend op table:
 *   N = LayerNorm(H)                          memory M = N W_mem^T          [T, width]
 *   qv = mean N over the instruction span     g = N[T-1]
 *   option query = W_ctx mean(N over span) + W_lex mean(lm_head rows of span ids) + W_optq qv
 *   routing: x += MHA(LN_q x, LN_m M, LN_m M); x += FF(LN_ff x)          (routing_layers)
 *   field f = W_q qv + LN_sum(sum_o softmax_o(o . W_q qv / sqrt(width)) o) + W_glob g + type
 *   decoder: f += SA(LN1 f); f += MHA(LN2 f, M, M); f += FF(LN3 f); f = LN_field(f)  (layers)
 *   logit = prior + sigmoid(gate) * (exp(min(s_joint, ln 100)) cos(f, LN_opt o) + MLP(...))
 *   prior = exp(min(s_prior, ln 100)) * normalize(lexical) . normalize(qv + g)
 * Dropout is an identity (inference). Every LayerNorm uses eps 1e-5 (torch's default).
 *
 * Memory is planned, not discovered: clef_joint_head_load (or clef_joint_head_fork, for each
 * context over shared weights) sizes one workspace for the
 * largest record the model accepts (max_tokens, max_questions, max_options), and
 * clef_joint_head_forward allocates nothing. Option work that scales with D (span means, the
 * lm_head rows) is done in chunks of CLEF_HEAD_OPTION_CHUNK options, and the hidden states are
 * normalised in row chunks as they are read, so the workspace holds no [options, D] or [T, D]
 * array; the feed-forward layers run in row chunks for the same reason.
 * The lm_head matrix is never resident: the caller supplies a row reader, and only the rows of
 * option-span token ids are read, CLEF_HEAD_FF_CHUNK at a time into a host staging buffer
 * that is uploaded to the backend, where a segment_sum op takes their means.
 *
 * The head never dereferences backend memory on the host (any backend works, including one
 * whose memory the host cannot read): every computation is an op of the table, the index
 * arrays it needs are uploaded with clef_backend_write, and the logits and probabilities
 * come back with clef_backend_read after clef_backend_synchronize.
 *
 * Thread safety: a loaded head's weights are read-only, its workspace is not: one forward at
 * a time per clef_joint_head. For concurrent forwards, clef_joint_head_fork gives each
 * context a head that shares the weights and has its own backend fork and workspace.
 */
#ifndef CLEF_MODEL_JOINT_HEAD_H
#define CLEF_MODEL_JOINT_HEAD_H

#include "backend/backend.h"
#include "encode/encoded.h"
#include "model/tensor_source.h"
#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

/* Options whose span means and lexical vectors are gathered at once (bounds the [chunk, D]
 * buffers of the workspace). */
#define CLEF_HEAD_OPTION_CHUNK 64
/* Rows of a feed-forward layer evaluated at once (bounds the [chunk, feedforward] buffer). */
#define CLEF_HEAD_FF_CHUNK 256

/* Rows of the output embedding (lm_head.weight [vocab, hidden]) on demand. */
typedef struct clef_lm_row_reader {
    void *ctx;
    int64_t vocab_size;
    /* Write row id (0 <= id < vocab_size) as fp32 into dst[hidden_size]; a clef_status. */
    int (*read_row)(void *ctx, int32_t id, float *dst);
} clef_lm_row_reader;

/* The largest record the workspace is planned for. */
typedef struct clef_head_limits {
    int64_t max_tokens;     /* tokens of one record */
    int64_t max_questions;  /* questions of one record */
    int64_t max_options;    /* options of all questions of one record together */
} clef_head_limits;

typedef struct clef_joint_head clef_joint_head;

/* Load and check every head tensor from src for config cfg, place it on backend be (which
 * must outlive the head), and plan the workspace for limits (NULL: weights only, no
 * workspace; such a head only serves clef_joint_head_fork). Matrices keep their stored type
 * (BF16 or F32); norms, biases, the type embedding and the three scalars become fp32.
 * Failure: CLEF_ERR_TENSOR_MISSING / _SHAPE / _DTYPE naming the tensor, CLEF_ERR_CONFIG_INVALID
 * for a config the head cannot run (width not divisible by heads, ...), CLEF_ERR_OUT_OF_MEMORY;
 * *out is NULL then. */
int clef_joint_head_load(clef_backend *be, const clef_head_config *cfg,
                         const clef_tensor_source *src, const clef_head_limits *limits,
                         clef_joint_head **out);
void clef_joint_head_free(clef_joint_head *head); /* accepts NULL; forks before their weights */

/* A head that runs the weights of `weights` (shared, read-only; it must outlive the fork) on
 * backend be (a fork of the weights' backend) with a workspace of its own planned for limits.
 * Errors: CLEF_ERR_INVALID_ARG (NULL, bad limits), CLEF_ERR_OUT_OF_MEMORY; *out NULL then. */
int clef_joint_head_fork(const clef_joint_head *weights, clef_backend *be,
                         const clef_head_limits *limits, clef_joint_head **out);

/* Bytes of weights and of workspace the head holds on its backend (a fork holds no weights
 * of its own: 0). */
size_t clef_joint_head_weight_bytes(const clef_joint_head *head);
size_t clef_joint_head_workspace_bytes(const clef_joint_head *head);

/* Run the head over one record.
 *   hidden [rec->n_tokens, hidden_size] fp32 (backend memory, row stride ld_hidden): the
 *     backbone's final hidden states; only read, by ops (LayerNorm'd CLEF_HEAD_FF_CHUNK rows
 *     at a time, so no normalised [T, D] copy is ever held).
 *   rec: token ids and spans (checked here: spans inside [0, n_tokens), begin < end, ids in
 *     the vocabulary, counts within the planned limits).
 *   lm: reader of lm_head rows.
 *   logits, probs: [total options] host arrays, questions in document order, options in
 *     presented order; probs = softmax of each question's logits. Either may be NULL. The
 *     forward synchronizes the backend before it returns.
 * Failure: CLEF_ERR_REQUEST_INVALID (bad span or id), CLEF_ERR_REQUEST_TOO_LONG (over the
 * planned limits), or the status of the row reader. */
int clef_joint_head_forward(clef_joint_head *head, const float *hidden, int64_t ld_hidden,
                            const clef_encoded_record *rec, const clef_lm_row_reader *lm,
                            float *logits, float *probs);

#endif /* CLEF_MODEL_JOINT_HEAD_H */
