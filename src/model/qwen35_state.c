/*
 * qwen35_state.c — the RunState of the Qwen3.5 backbone: every buffer one forward writes,
 * planned once for (max_tokens, max_seq_len) on the backend (fork) of one context, so the
 * forward never allocates and several states can run over one model's weights at once.
 * Per-token buffers: the residual stream h and the normed input xn for all max_tokens rows
 * (the output is written over xn); the mixers' and the MLP's buffers for one mixer group of
 * G = qwen35_mixer_rows rows (the forward runs the mixers group by group).
 */
#include "model/qwen35_internal.h"

#include "core/error.h"

#include <stdlib.h>

qwen35_params qwen35_default_params(void) {
    qwen35_params p = {.max_seq_len = 4096, .max_tokens = 0, .gdn_mode = CLEF_GDN_CHUNKED};
    return p;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

int64_t qwen35_mixer_rows(const qwen35_params *p) {
    const int64_t most = p->max_tokens < QWEN35_MIXER_ROWS ? p->max_tokens : QWEN35_MIXER_ROWS;
    return max64(p->max_seq_len, most);
}

/* Floats of the work region for mixer calls of G rows: the largest of the MLP's
 * (QWEN35_MLP_ROWS rows at a time), the GDN's and the attention's buffers (they are used in
 * turn, never at once). qwen35_forward.c carves it the same way; the GDN's output gate z is
 * projected after the delta rule, into the conv output it has consumed, so it takes no room
 * of its own. */
size_t qwen35_work_floats(const clef_text_config *c, int64_t G) {
    const int64_t Hv = c->linear_num_value_heads, Vd = Hv * c->linear_value_head_dim;
    const int64_t Cc = 2 * c->linear_num_key_heads * c->linear_key_head_dim + Vd;
    const int64_t Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim;
    const int64_t mlp_rows = G < QWEN35_MLP_ROWS ? G : QWEN35_MLP_ROWS;
    int64_t mlp = mlp_rows * 2 * c->intermediate_size;
    int64_t gdn = G * (Cc /* P, then o */ + Cc /* conv, then z */ + 4 * Hv /* a, b, g, beta */);
    int64_t attn = G * (Hq * 2 * d /* q|gate */ + 2 * Hkv * d /* k, v */ + Hq * d /* o */);
    return (size_t)max64(mlp, max64(gdn, attn));
}

/* Scratch of the token-mixing ops: the larger of the delta rule's and the attention's, each
 * asked for G rows of packed sequences of at most Tm rows. */
static size_t mixer_scratch_bytes(const qwen35_model *m, clef_backend *be, const qwen35_params *p,
                                  int64_t G) {
    const clef_text_config *c = &m->cfg;
    const clef_seqs shape = {.n_seqs = G, .max_len = p->max_seq_len};
    clef_gdn_args ga = {.T = G, .n_k_heads = c->linear_num_key_heads,
                        .n_v_heads = c->linear_num_value_heads, .dk = c->linear_key_head_dim,
                        .dv = c->linear_value_head_dim,
                        .ldq = c->linear_num_key_heads * c->linear_key_head_dim,
                        .ldk = c->linear_num_key_heads * c->linear_key_head_dim,
                        .ldv = c->linear_num_value_heads * c->linear_value_head_dim,
                        .ldo = c->linear_num_value_heads * c->linear_value_head_dim,
                        .mode = p->gdn_mode, .seqs = &shape};
    const int64_t d = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    clef_attention_args aa = {.n_q = G, .n_kv = G, .n_q_heads = Hq,
                              .n_kv_heads = Hkv, .head_dim = d, .ldq = Hq * 2 * d,
                              .q_head_stride = 2 * d, .ldk = Hkv * d, .k_head_stride = d,
                              .ldv = Hkv * d, .v_head_stride = d, .ldo = Hq * d,
                              .o_head_stride = d, .causal = 1, .seqs = &shape};
    size_t gdn = clef_gdn_workspace_size(be, &ga), attn = clef_attention_workspace_size(be, &aa);
    return gdn > attn ? gdn : attn;
}

/* Scratch of the quantized matmuls (NF4, FP8, INT8 ConvRot): the backend's answer for the
 * largest of the layers' quantized matrices at the rows each takes (the mixers' projections
 * G, the MLP's QWEN35_MLP_ROWS <= G or all of a smaller batch: qwen35_forward.c) (0 for a
 * BF16 model). The forward hands it to those matmuls only (qwen35_forward.c), so no call
 * allocates its own; the backend sizes it for the path its settings take now. */
static size_t quant_matmul_scratch_bytes(const qwen35_model *m, clef_backend *be, int64_t G) {
    const int64_t mlp_rows = G < QWEN35_MLP_ROWS ? G : QWEN35_MLP_ROWS;
    size_t most = 0;
    for (int64_t l = 0; l < m->cfg.num_hidden_layers; l++) {
        const qwen35_layer *L = &m->w.layers[l];
        const clef_matrix *mats[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->in_qkv,
                                     &L->in_z,     &L->in_b,   &L->in_a,     &L->out_proj,
                                     &L->q_proj,   &L->k_proj, &L->v_proj,   &L->o_proj};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (mats[i]->quant) {
                size_t b = clef_matmul_workspace_size(be, i < 3 ? mlp_rows : G, mats[i]); /* 0..2: the MLP's */
                most = b > most ? b : most;
            }
    }
    return most;
}

int qwen35_state_create(const qwen35_model *m, clef_backend *be, const qwen35_params *params,
                        qwen35_state **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_state_create: out is NULL");
    *out = NULL;
    if (!m || !be)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_state_create: NULL model or backend");
    qwen35_params p = params ? *params : qwen35_default_params();
    if (p.max_seq_len <= 0 || p.max_tokens < 0)
        return clef_fail(CLEF_ERR_INVALID_ARG,
                         "qwen35 state: max_seq_len %lld must be > 0, max_tokens %lld >= 0",
                         (long long)p.max_seq_len, (long long)p.max_tokens);
    if (p.max_tokens == 0)
        p.max_tokens = p.max_seq_len;
    if (p.max_tokens < p.max_seq_len)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35 state: max_tokens %lld < max_seq_len %lld",
                         (long long)p.max_tokens, (long long)p.max_seq_len);
    if (p.gdn_mode != CLEF_GDN_CHUNKED && p.gdn_mode != CLEF_GDN_RECURRENT)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35 state: unknown gdn_mode %d", (int)p.gdn_mode);
    qwen35_state *s = calloc(1, sizeof *s);
    if (!s)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "qwen35 state: out of memory");
    s->model = m;
    s->be = be;
    s->params = p;
    s->buffers = clef_buffer_set_init(be);
    const int64_t N = p.max_tokens, D = m->cfg.hidden_size, rot = m->rot_dims;
    const int64_t G = s->mixer_rows = qwen35_mixer_rows(&p);
    const size_t f = sizeof(float), i32 = sizeof(int32_t);
    /* one scratch for the ops that take one, used in turn */
    size_t scratch_bytes = mixer_scratch_bytes(m, be, &p, G);
    size_t quant_bytes = quant_matmul_scratch_bytes(m, be, G);
    if (quant_bytes > scratch_bytes)
        scratch_bytes = quant_bytes;
    struct {
        void **dst;
        size_t bytes;
    } plan[] = {
        {(void **)&s->ids, i32 * (size_t)N},
        {(void **)&s->pos, i32 * (size_t)(3 * N)},
        {(void **)&s->seq_start, i32 * (size_t)(2 * N)},
        {(void **)&s->h, f * (size_t)(N * D)},
        {(void **)&s->xn, f * (size_t)(N * D)},
        {(void **)&s->work, f * qwen35_work_floats(&m->cfg, G)},
        {(void **)&s->rope_cos, f * (size_t)(N * rot)},
        {(void **)&s->rope_sin, f * (size_t)(N * rot)},
        {&s->scratch, scratch_bytes},
        {(void **)&s->embed_segs, sizeof(clef_segment) * (size_t)N},
    };
    int st = CLEF_OK;
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        if (!(*plan[i].dst = clef_buffer_set_alloc(&s->buffers, plan[i].bytes))) {
            st = clef_fail(CLEF_ERR_OUT_OF_MEMORY,
                           "out of memory planning the run state for %lld tokens (%zu bytes)",
                           (long long)N, plan[i].bytes);
            goto err;
        }
        s->bytes += plan[i].bytes;
    }
    s->out = s->xn; /* read after the forward, when no mixer or MLP input is left to keep */
    s->host_pos = malloc(i32 * (size_t)(3 * N));
    s->host_start = malloc(i32 * (size_t)(2 * N));
    s->group_start = malloc(sizeof(int64_t) * (size_t)(2 * N));
    s->groups = malloc(sizeof(qwen35_group) * (size_t)N);
    s->host_segs = malloc(sizeof(clef_segment) * (size_t)N);
    if (m->embed_be) { /* host embedding: a fork to gather on, pinned rows to copy from */
        if ((st = clef_backend_fork(m->embed_be, &s->embed_be)))
            goto err;
        s->embed_stage = clef_backend_host_alloc(
            be, sizeof(float) * (size_t)QWEN35_EMBED_CHUNK * (size_t)m->cfg.hidden_size);
    }
    if (!s->host_pos || !s->host_start || !s->group_start || !s->groups || !s->host_segs || (m->embed_be && !s->embed_stage)) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "qwen35 state: out of memory");
        goto err;
    }
    *out = s;
    return CLEF_OK;
err:
    qwen35_state_free(s);
    return st;
}

void qwen35_state_free(qwen35_state *s) {
    if (!s)
        return;
    for (int i = 0; i < QWEN35_GRAPHS; i++) /* the recordings use the buffers */
        qwen35_layout_clear(s, &s->layouts[i]);
    clef_buffer_set_release(&s->buffers);
    if (s->embed_stage)
        clef_backend_host_free(s->be, s->embed_stage);
    clef_backend_free(s->embed_be);
    free(s->host_pos);
    free(s->host_start);
    free(s->group_start);
    free(s->groups);
    free(s->host_segs);
    free(s);
}

const float *qwen35_state_output(const qwen35_state *s) { return s->out; }
size_t qwen35_state_bytes(const qwen35_state *s) { return s ? s->bytes : 0; }
