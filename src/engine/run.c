/*
 * run.c — the middle step of a decision (engine.h): prepared records through ONE packed
 * backbone forward on a context (their tokens back to back, each at its own length and its
 * own positions 0..T-1), then the joint head record by record on its rows of the output.
 * Everything runs on the context's backend fork and workspace; the model is only read and
 * no file is touched (the head's lm_head rows were read at prepare), so runs on different
 * contexts go on at the same time.
 */
#include "engine/engine_internal.h"
#include "engine/engine.h"

#include "core/error.h"
#include "core/numeric.h"

#include <stdlib.h>
#include <string.h>

/* The head's row reader over the rows read at prepare (sorted ids, stored dtype). */
static int prepared_row(void *ctx, int32_t id, float *dst) {
    const clef_prepared *p = ctx;
    const int32_t *ids = p->row_ids;
    int64_t lo = 0, hi = p->n_rows;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->n_rows || ids[lo] != id)
        return clef_fail(CLEF_ERR_INTERNAL, "lm_head row %d was not read at prepare", id);
    const int64_t D = p->lm->hidden_size;
    const clef_dtype dtype = p->lm->tensor->dtype;
    const void *row = (const char *)p->rows + (size_t)lo * (size_t)D * clef_dtype_size(dtype);
    for (int64_t j = 0; j < D; j++) {
        if (dtype == CLEF_DTYPE_BF16)
            dst[j] = clef_bf16_to_f32(((const uint16_t *)row)[j]);
        else if (dtype == CLEF_DTYPE_F16)
            dst[j] = clef_f16_to_f32(((const uint16_t *)row)[j]);
        else
            dst[j] = ((const float *)row)[j];
    }
    return CLEF_OK;
}

char *clef_engine_error_copy(void) {
    const char *msg = clef_last_error();
    size_t len = strlen(msg);
    char *copy = malloc(len + 1);
    if (copy)
        memcpy(copy, msg, len + 1);
    return copy;
}

int clef_engine_run(clef_context *c, clef_prepared *const *recs, size_t n, int *statuses,
                    char **messages) {
    if (messages)
        for (size_t i = 0; i < n; i++)
            messages[i] = NULL;
    if (!c || (n && (!recs || !statuses)))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_run: NULL argument");
    if (n == 0)
        return CLEF_OK;
    const clef_model *m = c->model;
    int64_t tokens = 0;
    int with_media = 0;
    c->seq_start[0] = 0;
    int st = CLEF_OK;
    for (size_t i = 0; i < n && !st; i++) {
        if (!recs[i] || recs[i]->lm != &m->lm) {
            st = clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_run: record %zu is NULL or was "
                           "prepared on another model", i);
            break;
        }
        const clef_encoded_record *e = &recs[i]->encoded;
        if (e->n_tokens <= 0 || tokens + e->n_tokens > c->params.max_tokens) {
            st = clef_fail(CLEF_ERR_MODEL_STATE, "clef_engine_run: records 0..%zu take %lld+ "
                           "tokens, the context runs at most %d per forward", i,
                           (long long)(tokens + e->n_tokens), c->params.max_tokens);
            break;
        }
        memcpy(c->ids + tokens, e->ids, (size_t)e->n_tokens * sizeof *c->ids);
        tokens += e->n_tokens;
        c->seq_start[i + 1] = tokens;
        with_media |= recs[i]->n_media > 0;
    }
    /* positions: text records 0..T-1 on all three axes; records with images their 3-D
     * positions from prepare; all (3, tokens), axis-major */
    if (!st && with_media)
        for (size_t i = 0; i < n; i++) {
            const clef_prepared *p = recs[i];
            const int64_t s0 = c->seq_start[i], T = p->encoded.n_tokens;
            for (int axis = 0; axis < 3; axis++)
                for (int64_t t = 0; t < T; t++)
                    c->pos[axis * tokens + s0 + t] = p->pos ? p->pos[axis * T + t] : (int32_t)t;
        }
    /* the images of the batch through the vision tower; their features replace the
     * placeholders' embeddings */
    qwen35_embeds embeds = {0};
    c->last_forward_records = 0; /* the state's output is overwritten from here on */
    if (!st && with_media)
        st = clef_media_run(c, recs, n, &embeds);
    if (!st)
        st = qwen35_forward_embeds(m->backbone, c->state, (int64_t)n, c->seq_start, c->ids,
                                   with_media ? c->pos : NULL, with_media ? &embeds : NULL);
    if (st) {
        for (size_t i = 0; i < n; i++) {
            statuses[i] = st;
            if (messages)
                messages[i] = clef_engine_error_copy();
        }
        return st;
    }
    c->last_forward_records = (int64_t)n;
    const int64_t D = qwen35_hidden_size(m->backbone);
    const float *hidden = qwen35_state_output(c->state);
    int first = CLEF_OK;
    for (size_t i = 0; i < n; i++) {
        clef_prepared *p = recs[i];
        clef_lm_row_reader lm = {.ctx = p, .vocab_size = m->lm.vocab_size, .read_row = prepared_row};
        statuses[i] = clef_joint_head_forward(c->head, hidden + c->seq_start[i] * D, D,
                                              &p->encoded, &lm, p->logits, p->probs);
        if (!statuses[i])
            for (int64_t k = 0; k < p->n_options; k++)
                p->probs_d[k] = p->probs[k];
        else {
            if (messages)
                messages[i] = clef_engine_error_copy();
            if (!first)
                first = statuses[i];
        }
    }
    return first;
}
