/*
 * context.c — the public context object of include/clef.h: what one concurrent forward
 * needs apart from the model's weights. A context forks the model's backend (own queue and
 * scratch, same memory: backend.h), plans the backbone's RunState for its packed batches
 * (max_tokens together, max_length per record) and a head workspace for one record, and
 * keeps host staging for the packed token ids. Creating a context costs its workspace, never
 * a copy of the weights.
 */
#include "engine/engine_internal.h"

#include "core/error.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

clef_context_params clef_context_default_params(void) {
    clef_context_params p;
    memset(&p, 0, sizeof p);
    return p;
}

int clef_context_make(clef_model *m, const clef_context_params *params, clef_context **out) {
    clef_context_params p = params ? *params : clef_context_default_params();
    if (p.max_tokens < 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_context_create: max_tokens %d < 0",
                         p.max_tokens);
    if (!p.max_tokens)
        p.max_tokens = m->params.max_length;
    clef_context *c = calloc(1, sizeof *c);
    if (!c)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_context_create: out of memory");
    c->model = m;
    c->params = p;
    int st = clef_backend_fork(m->backend, &c->be);
    if (st)
        goto err;
    /* the backbone: packed batches of max_tokens, each record at most max_length of them */
    qwen35_params qp = qwen35_default_params();
    qp.max_tokens = p.max_tokens;
    qp.max_seq_len = p.max_tokens < m->params.max_length ? p.max_tokens : m->params.max_length;
    if ((st = qwen35_state_create(m->backbone, c->be, &qp, &c->state)))
        goto err;
    /* the head runs one record at a time */
    clef_head_limits hl = {.max_tokens = qp.max_seq_len, .max_questions = m->params.max_questions,
                           .max_options = m->params.max_options};
    if ((st = clef_joint_head_fork(m->head, c->be, &hl, &c->head)))
        goto err;
    c->ids = malloc((size_t)p.max_tokens * sizeof *c->ids);
    c->seq_start = malloc(((size_t)p.max_tokens + 1) * sizeof *c->seq_start);
    c->pos = malloc(3 * (size_t)p.max_tokens * sizeof *c->pos);
    c->media_rows = malloc((size_t)p.max_tokens * sizeof *c->media_rows);
    if (!c->ids || !c->seq_start || !c->pos || !c->media_rows) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_context_create: out of memory");
        goto err;
    }
    /* the 24gb / 16gb profiles: refused here, never an out-of-memory failure mid-record */
    if ((st = clef_profile_check(m, c, "clef_context_create")))
        goto err;
    CLEF_LOG_I("context on '%s': %d tokens per forward, workspace %llu bytes", m->name,
               p.max_tokens, (unsigned long long)clef_context_workspace_bytes(c));
    *out = c;
    return CLEF_OK;
err:
    clef_context_free(c);
    return st;
}

int clef_context_create(clef_model *model, const clef_context_params *params,
                        clef_context **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_context_create: out is NULL");
    *out = NULL;
    if (!model)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_context_create: model is NULL");
    return clef_context_make(model, params, out);
}

void clef_context_free(clef_context *c) {
    if (!c)
        return;
    clef_joint_head_free(c->head);
    vision_state_free(c->vision);
    qwen35_state_free(c->state);
    clef_backend_free(c->be);
    free(c->ids);
    free(c->seq_start);
    free(c->pos);
    free(c->media_rows);
    free(c);
}

uint64_t clef_context_workspace_bytes(const clef_context *c) {
    return c ? (uint64_t)qwen35_state_bytes(c->state) + clef_joint_head_workspace_bytes(c->head) +
                   (c->vision ? vision_state_bytes(c->vision) : 0)
             : 0;
}

int32_t clef_context_max_tokens(const clef_context *c) { return c ? c->params.max_tokens : 0; }
