/*
 * hidden.c — clef_context_hidden (include/clef.h): the last hidden state of a record of a
 * context's last backbone forward, read back from the state's output rows. It exists for
 * evaluations that compare precisions on their hidden states (`clef eval`): the decide path
 * itself never copies the rows out.
 */
#include "engine/engine_internal.h"

#include "core/error.h"

int clef_context_hidden(const clef_context *c, size_t record, float *out, size_t cap,
                        int32_t *n_tokens, int32_t *hidden_size) {
    if (n_tokens)
        *n_tokens = 0;
    if (hidden_size)
        *hidden_size = 0;
    if (!c)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_context_hidden: ctx is NULL");
    if ((int64_t)record >= c->last_forward_records)
        return clef_fail(CLEF_ERR_MODEL_STATE, "clef_context_hidden: record %zu is not in the "
                         "context's last forward (%lld records)", record,
                         (long long)c->last_forward_records);
    const int64_t D = qwen35_hidden_size(c->model->backbone);
    const int64_t row0 = c->seq_start[record], T = c->seq_start[record + 1] - row0;
    if (n_tokens)
        *n_tokens = (int32_t)T;
    if (hidden_size)
        *hidden_size = (int32_t)D;
    if (!out)
        return CLEF_OK;
    if (cap < (size_t)(T * D))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_context_hidden: out holds %zu floats, the "
                         "record's hidden state is %lld x %lld", cap, (long long)T, (long long)D);
    const float *rows = qwen35_state_output(c->state) + row0 * D;
    return clef_backend_read(c->be, out, rows, (size_t)(T * D) * sizeof(float));
}
