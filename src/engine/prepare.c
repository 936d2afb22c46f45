/*
 * prepare.c — the first step of a decision (engine.h): a request body to a prepared record,
 * on the caller's thread and without any lock. The body is parsed and validated, encoded to
 * token ids and spans, and the lm_head rows its options need (the head's lexical vectors)
 * are read from the release file now, so a run never touches a file. Rows are kept as stored
 * (BF16, F16 or F32), one per distinct token id, and widened to fp32 when the head asks.
 */
#include "engine/engine_internal.h"
#include "engine/engine.h"

#include "core/error.h"
#include "core/numeric.h"

#include <stdlib.h>
#include <string.h>

void clef_prepared_free(clef_prepared *p) {
    if (!p)
        return;
    clef_request_free(p->request);
    clef_encoded_record_free(&p->encoded);
    free(p->logits);
    free(p->probs);
    free(p->probs_d);
    free(p->row_ids);
    free(p->rows);
    clef_media_free(p);
    free(p);
}

int64_t clef_prepared_tokens(const clef_prepared *p) { return p ? p->encoded.n_tokens : 0; }

static int compare_id(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Read the lm_head row of every distinct token id inside an option span. */
static int read_option_rows(const clef_lm_source *lm, clef_prepared *p) {
    const clef_encoded_record *rec = &p->encoded;
    int64_t n = 0;
    for (int32_t q = 0; q < rec->n_questions; q++)
        for (int32_t o = 0; o < rec->questions[q].n_options; o++) {
            clef_span sp = rec->questions[q].options[o];
            if (sp.begin < 0 || sp.end > rec->n_tokens || sp.begin >= sp.end)
                return clef_fail(CLEF_ERR_INTERNAL, "question %d option %d: span [%d, %d) outside "
                                 "the record's %d tokens", q, o, sp.begin, sp.end, rec->n_tokens);
            n += sp.end - sp.begin;
        }
    p->row_ids = malloc((size_t)(n ? n : 1) * sizeof *p->row_ids);
    if (!p->row_ids)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "prepare: out of memory for %lld row ids",
                         (long long)n);
    int64_t k = 0;
    for (int32_t q = 0; q < rec->n_questions; q++)
        for (int32_t o = 0; o < rec->questions[q].n_options; o++)
            for (int32_t t = rec->questions[q].options[o].begin; t < rec->questions[q].options[o].end; t++) {
                int32_t id = rec->ids[t];
                if (id < 0 || id >= lm->vocab_size)
                    return clef_fail(CLEF_ERR_REQUEST_INVALID, "token %d has id %d, outside the "
                                     "vocabulary [0, %lld)", t, id, (long long)lm->vocab_size);
                p->row_ids[k++] = id;
            }
    qsort(p->row_ids, (size_t)n, sizeof *p->row_ids, compare_id);
    int64_t distinct = 0;
    for (int64_t i = 0; i < n; i++)
        if (!distinct || p->row_ids[distinct - 1] != p->row_ids[i])
            p->row_ids[distinct++] = p->row_ids[i];
    p->n_rows = distinct;
    const size_t row_bytes = (size_t)lm->hidden_size * clef_dtype_size(lm->tensor->dtype);
    p->rows = malloc(row_bytes * (size_t)(distinct ? distinct : 1));
    if (!p->rows)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "prepare: out of memory for %lld lm_head rows",
                         (long long)distinct);
    for (int64_t i = 0; i < distinct; i++) {
        int st = clef_release_read_range(lm->rel, lm->tensor, (uint64_t)p->row_ids[i] * row_bytes,
                                         row_bytes, (char *)p->rows + (size_t)i * row_bytes);
        if (st)
            return clef_fail_prefix(st, "lm_head row %d", p->row_ids[i]);
    }
    p->lm = lm;
    return CLEF_OK;
}

int clef_engine_prepare(const clef_model *m, clef_request_kind kind, const char *path_model,
                        const char *body, size_t len, clef_request_errors *errors,
                        clef_prepared **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_engine_prepare: out is NULL");
    *out = NULL;
    if (!m || (!body && len))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_decide: NULL model or request");
    clef_prepared *p = calloc(1, sizeof *p);
    if (!p)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide: out of memory");
    clef_request_errors local = {0};
    int st = clef_request_parse(body ? body : "", len, kind, path_model, &m->limits, &p->request,
                                errors ? errors : &local);
    clef_request_errors_free(&local); /* clef_last_error() keeps the first as "loc: msg" */
    if (st)
        goto err;

    clef_encode_params ep = clef_encode_default_params();
    ep.max_length = m->params.max_length;
    ep.policy = m->params.truncation == CLEF_TRUNCATION_REFUSE ? CLEF_TRUNCATE_REFUSE
                                                               : CLEF_TRUNCATE_STATE;
    ep.tokenize = clef_tokenize_tok;
    ep.tokenize_ctx = m->tokenizer;
    if ((st = clef_media_prepare(m, p, &ep))) /* images: pixels, and the placeholder hook */
        goto err;
    if ((st = clef_record_encode(p->request, &ep, &p->encoded)))
        goto err;
    if ((st = clef_media_positions(m, p)))
        goto err;

    for (int32_t q = 0; q < p->encoded.n_questions; q++)
        p->n_options += p->encoded.questions[q].n_options;
    p->logits = malloc((size_t)p->n_options * sizeof(float));
    p->probs = malloc((size_t)p->n_options * sizeof(float));
    p->probs_d = malloc((size_t)p->n_options * sizeof(double));
    if (!p->logits || !p->probs || !p->probs_d) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_decide: out of memory");
        goto err;
    }
    if ((st = read_option_rows(&m->lm, p)))
        goto err;
    *out = p;
    return CLEF_OK;
err:
    clef_prepared_free(p);
    return st;
}
