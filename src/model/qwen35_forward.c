/*
 * qwen35_forward.c — the Qwen3.5 text forward, top to bottom, against the op table. Each step
 * names what it computes and, where it helps, the transformers line it matches
 * (models/qwen3_5/modeling_qwen3_5.py). Rows are the tokens of all sequences packed back to
 * back and every op runs once over all of them, except that the token mixers run over groups
 * of whole sequences of at most the state's mixer_rows rows (one group unless the batch is
 * larger than that: the mixers' buffers are planned for a group); the token-mixing ops (conv,
 * delta rule, attention) take the sequence offsets so no sequence sees another, and RoPE takes its
 * cos/sin rows from a table built at the start of the forward from each row's position.
 * The weights come from the read-only model; everything written is the state's.
 * The host writes the batch (ids, positions, offsets) first; every op after them is in
 * forward_ops, which a backend that can record runs once directly per batch layout, then
 * records, then replays (qwen35_graphs.c keeps the layouts; qwen35.h, "Recordings").
 */
#include "model/qwen35_internal.h"

#include "core/error.h"
#include "core/log.h"

#include <math.h>

/* y (+)= x W^T over n rows. A quantized W gets the state's scratch, planned for it at
 * creation (qwen35_state.c); the others the backend handle's own. */
static void project(qwen35_state *s, int64_t n, const float *x, int64_t ldx, const clef_matrix *w,
                    float *y, int64_t ldy, int accumulate) {
    clef_matmul_scratch(s->be, n, x, ldx, w, NULL, y, ldy, accumulate, w->quant ? s->scratch : NULL);
}

/* Gated DeltaNet mixer: h += GDN(xn), over the n rows of group g. */
static void gdn_mixer(const qwen35_model *m, qwen35_state *s, const qwen35_layer *L,
                      const qwen35_group *g) {
    clef_backend *be = s->be;
    const clef_text_config *c = &m->cfg;
    const int64_t n = g->n;
    const clef_seqs *seqs = &g->seqs;
    const int64_t D = c->hidden_size, Hk = c->linear_num_key_heads, Hv = c->linear_num_value_heads;
    const int64_t dk = c->linear_key_head_dim, dv = c->linear_value_head_dim, Kc = c->linear_conv_kernel_dim;
    const int64_t K = Hk * dk, Vd = Hv * dv, Cc = 2 * K + Vd;
    const float eps = (float)c->rms_norm_eps;
    const float *xn = s->xn + g->r0 * D;
    /* carve the work region (qwen35_work_floats counts the same buffers) */
    float *P = s->work;                  /* (n, Cc) projected q|k|v before the conv */
    float *Cv = P + n * Cc;              /* (n, Cc) after conv + silu */
    float *Z = Cv;                       /* (n, Vd) output gate, over Cv once the delta rule has read it */
    float *A = Cv + n * Cc;              /* (n, Hv) */
    float *B = A + n * Hv;               /* (n, Hv) */
    float *G = B + n * Hv;               /* (n, Hv) log decay */
    float *Beta = G + n * Hv;            /* (n, Hv) */
    float *O = P;                        /* (n, Vd) over P, which the conv has consumed */

    /* 1. projections  mixed_qkv = in_proj_qkv(x); b = in_proj_b(x); a = in_proj_a(x) (z at 5) */
    project(s, n, xn, D, &L->in_qkv, P, Cc, 0);
    project(s, n, xn, D, &L->in_b, B, Hv, 0);
    project(s, n, xn, D, &L->in_a, A, Hv, 0);
    /* 2. gates  beta = b.sigmoid(); g = -A_log.exp() * softplus(a + dt_bias) */
    clef_gdn_gates(be, n, Hv, A, Hv, B, Hv, L->a_log, L->dt_bias, G, Beta);
    /* 3. causal depthwise conv + silu on q|k|v, per sequence  (causal_conv1d_fn(mixed_qkv, conv1d.weight, activation="silu")) */
    clef_conv1d_causal_silu(be, n, Cc, Kc, P, Cc, L->conv_w, NULL, Cv, Cc, seqs);
    /* 4. gated delta rule with L2-normalised q, k, per sequence  (chunk_gated_delta_rule(..., use_qk_l2norm_in_kernel=True)) */
    clef_gdn_args ga = {
        .T = n, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv,
        .q = Cv, .ldq = Cc, .k = Cv + K, .ldk = Cc, .v = Cv + 2 * K, .ldv = Cc,
        .g = G, .beta = Beta, .state = NULL, .o = O, .ldo = Vd,
        .l2norm_qk = 1, .mode = s->params.gdn_mode, .seqs = seqs,
    };
    clef_gdn(be, &ga, s->scratch);
    /* 5. gated RMSNorm per (token, v-head)  z = in_proj_z(x); core_attn_out = norm(core_attn_out, z) */
    project(s, n, xn, D, &L->in_z, Z, Vd, 0);
    clef_rmsnorm_gated(be, n * Hv, dv, O, dv, Z, dv, L->gdn_norm, eps, O, dv);
    /* 6. h += out_proj(o) */
    project(s, n, O, Vd, &L->out_proj, s->h + g->r0 * D, D, 1);
}

/* Gated full attention mixer: h += Attn(xn), over the n rows of group g. */
static void attention_mixer(const qwen35_model *m, qwen35_state *s, const qwen35_layer *L,
                            const qwen35_group *g) {
    clef_backend *be = s->be;
    const clef_text_config *c = &m->cfg;
    const int64_t n = g->n;
    const clef_seqs *seqs = &g->seqs;
    const int64_t D = c->hidden_size, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim;
    const float eps = (float)c->rms_norm_eps;
    const float *xn = s->xn + g->r0 * D;
    const float *cos_t = s->rope_cos + g->r0 * m->rot_dims, *sin_t = s->rope_sin + g->r0 * m->rot_dims;
    float *Qg = s->work;                 /* (n, Hq, 2d): per head [query | gate] */
    float *Kb = Qg + n * Hq * 2 * d;     /* (n, Hkv*d) */
    float *Vb = Kb + n * Hkv * d;        /* (n, Hkv*d) */
    float *O = Vb + n * Hkv * d;         /* (n, Hq*d) */

    /* 1. projections  query, gate = chunk(q_proj(x).view(..., Hq, 2d), 2); k = k_proj(x); v = v_proj(x) */
    project(s, n, xn, D, &L->q_proj, Qg, Hq * 2 * d, 0);
    project(s, n, xn, D, &L->k_proj, Kb, Hkv * d, 0);
    project(s, n, xn, D, &L->v_proj, Vb, Hkv * d, 0);
    /* 2. per-head RMSNorm (1 + w) of queries and keys, in place  q_norm(query), k_norm(key) */
    clef_rmsnorm(be, n * Hq, d, Qg, 2 * d, L->q_norm, eps, 1, Qg, 2 * d);
    clef_rmsnorm(be, n * Hkv, d, Kb, d, L->k_norm, eps, 1, Kb, d);
    /* 3. partial mRoPE on the first rot dims, each row at its own position  apply_rotary_pos_emb(q, k, cos, sin) */
    clef_rope_apply(be, n, Hq, Qg, Hq * 2 * d, 2 * d, m->rot_dims, cos_t, sin_t);
    clef_rope_apply(be, n, Hkv, Kb, Hkv * d, d, m->rot_dims, cos_t, sin_t);
    /* 4. causal GQA softmax attention within each sequence, scale d^-1/2  (eager_attention_forward) */
    clef_attention_args aa = {
        .n_q = n, .n_kv = n, .n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = d,
        .q = Qg, .ldq = Hq * 2 * d, .q_head_stride = 2 * d,
        .k = Kb, .ldk = Hkv * d, .k_head_stride = d,
        .v = Vb, .ldv = Hkv * d, .v_head_stride = d,
        .o = O, .ldo = Hq * d, .o_head_stride = d,
        .scale = 1.0f / sqrtf((float)d), .causal = 1, .seqs = seqs,
    };
    clef_attention(be, &aa, s->scratch);
    /* 5. output gate  attn_output = attn_output * sigmoid(gate) */
    clef_mul_sigmoid(be, n * Hq, d, O, d, Qg + d, 2 * d);
    /* 6. h += o_proj(o) */
    project(s, n, O, Hq * d, &L->o_proj, s->h + g->r0 * D, D, 1);
}

/* SwiGLU MLP: h += down(silu(gate(xn)) * up(xn)), QWEN35_MLP_ROWS rows at a time (rows are
 * independent; the chunks bound the work region, qwen35_work_floats). */
static void mlp(const qwen35_model *m, qwen35_state *s, const qwen35_layer *L, int64_t n) {
    clef_backend *be = s->be;
    const int64_t D = m->cfg.hidden_size, F = m->cfg.intermediate_size;
    for (int64_t r0 = 0; r0 < n; r0 += QWEN35_MLP_ROWS) {
        const int64_t rows = n - r0 < QWEN35_MLP_ROWS ? n - r0 : QWEN35_MLP_ROWS;
        float *gate = s->work, *up = gate + rows * F;
        project(s, rows, s->xn + r0 * D, D, &L->mlp_gate, gate, F, 0);
        project(s, rows, s->xn + r0 * D, D, &L->mlp_up, up, F, 0);
        /* one op: the down projection is the SwiGLU's only reader, so a backend may hand it
         * the quantized codes without writing the fp32 values (backend.h) */
        clef_swiglu_matmul(be, rows, gate, up, gate, &L->mlp_down, s->h + r0 * D, D, 1,
                           L->mlp_down.quant ? s->scratch : NULL);
    }
}

/* Split the batch into mixer groups: consecutive whole sequences of at most s->mixer_rows rows
 * together (one group when the batch fits, as it does unless max_tokens exceeds both
 * max_seq_len and QWEN35_MIXER_ROWS; every sequence fits one, max_seq_len <= mixer_rows).
 * Each group's offsets, counted from its first row, go back to back into group_start (host)
 * and host_start (for the backend's seq_start); returns the number of groups. */
static int64_t plan_groups(qwen35_state *s, int64_t n_seqs, const int64_t *seq_start) {
    int64_t n_groups = 0, used = 0;
    for (int64_t q0 = 0, q1; q0 < n_seqs; q0 = q1) {
        const int64_t r0 = seq_start[q0];
        int64_t max_len = 0;
        for (q1 = q0; q1 < n_seqs && (q1 == q0 || seq_start[q1 + 1] - r0 <= s->mixer_rows); q1++)
            if (seq_start[q1 + 1] - seq_start[q1] > max_len)
                max_len = seq_start[q1 + 1] - seq_start[q1];
        for (int64_t q = q0; q <= q1; q++) {
            s->group_start[used + q - q0] = seq_start[q] - r0;
            s->host_start[used + q - q0] = (int32_t)(seq_start[q] - r0);
        }
        s->groups[n_groups++] = (qwen35_group){
            .r0 = r0, .n = seq_start[q1] - r0,
            .seqs = {.n_seqs = q1 - q0, .start = s->group_start + used,
                     .start_dev = s->seq_start + used, .max_len = max_len}};
        used += q1 - q0 + 1;
    }
    return n_groups;
}

/* Everything a forward queues after its host writes: the RoPE table, the embedding (from a
 * table on the backend), the given embeddings, the layers and the final norm. Only ops, so
 * the whole of it can be recorded (backend.h's capture_begin). */
static void forward_ops(const qwen35_model *m, qwen35_state *s, int64_t n, int64_t n_groups,
                        const qwen35_embeds *embeds) {
    clef_backend *be = s->be;
    const int64_t D = m->cfg.hidden_size;
    const float eps = (float)m->cfg.rms_norm_eps;
    /* cos, sin = rotary_emb(x, position_ids)  (one row per token of the batch) */
    clef_rope_table(be, n, s->pos, m->rot_dims, m->cfg.rope_theta, m->cfg.mrope_section, m->cfg.mrope_interleaved,
                    s->rope_cos, s->rope_sin);
    /* h = embed_tokens(input_ids)  (no scaling; a host table was gathered before) */
    if (!m->embed_be)
        clef_get_rows(be, &m->w.embed, n, s->ids, s->h, D);
    /* inputs_embeds = inputs_embeds.masked_scatter(media_mask, media_features) */
    if (embeds && embeds->n > 0)
        clef_segment_sum(be, embeds->n, D, s->embed_segs, embeds->features, D, NULL, s->h, D);
    for (int64_t i = 0; i < m->cfg.num_hidden_layers; i++) {
        const qwen35_layer *L = &m->w.layers[i];
        /* h += mixer(input_layernorm(h)) */
        clef_rmsnorm(be, n, D, s->h, D, L->input_norm, eps, 1, s->xn, D);
        for (int64_t g = 0; g < n_groups; g++) {
            if (L->type == CLEF_LAYER_LINEAR_ATTENTION)
                gdn_mixer(m, s, L, &s->groups[g]);
            else
                attention_mixer(m, s, L, &s->groups[g]);
        }
        /* h += mlp(post_attention_layernorm(h)) */
        clef_rmsnorm(be, n, D, s->h, D, L->post_norm, eps, 1, s->xn, D);
        mlp(m, s, L, n);
    }
    /* last_hidden_state = norm(h) */
    clef_rmsnorm(be, n, D, s->h, D, m->w.final_norm, eps, 1, s->out, D);
}

int qwen35_forward(const qwen35_model *m, qwen35_state *s, int64_t n_seqs,
                   const int64_t *seq_start, const int32_t *ids, const int32_t *pos) {
    return qwen35_forward_embeds(m, s, n_seqs, seq_start, ids, pos, NULL);
}

int qwen35_forward_embeds(const qwen35_model *m, qwen35_state *s, int64_t n_seqs,
                          const int64_t *seq_start, const int32_t *ids, const int32_t *pos,
                          const qwen35_embeds *embeds) {
    if (!m || !s || !seq_start || !ids || n_seqs <= 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_forward: NULL argument or n_seqs %lld <= 0", (long long)n_seqs);
    if (s->model != m)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_forward: the state was planned for another model");
    if (seq_start[0] != 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_forward: seq_start[0] = %lld, expected 0", (long long)seq_start[0]);
    for (int64_t q = 0; q < n_seqs; q++) {
        int64_t T = seq_start[q + 1] - seq_start[q];
        if (T <= 0)
            return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_forward: sequence %lld has %lld tokens", (long long)q, (long long)T);
        if (T > s->params.max_seq_len)
            return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "sequence %lld has %lld tokens, the model was loaded for at most %lld",
                             (long long)q, (long long)T, (long long)s->params.max_seq_len);
        if (seq_start[q + 1] > s->params.max_tokens)
            return clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "batch of %lld+ tokens, the model was loaded for at most %lld",
                             (long long)seq_start[q + 1], (long long)s->params.max_tokens);
    }
    const int64_t n = seq_start[n_seqs], D = m->cfg.hidden_size;
    for (int64_t t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= m->cfg.vocab_size)
            return clef_fail(CLEF_ERR_REQUEST_INVALID, "token %lld has id %d, outside the vocabulary [0, %lld)",
                             (long long)t, ids[t], (long long)m->cfg.vocab_size);
    if (embeds && embeds->n > 0) {
        if (!embeds->rows || !embeds->features || embeds->n > n)
            return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_forward: %lld embedding rows for a batch "
                             "of %lld tokens", (long long)embeds->n, (long long)n);
        for (int64_t i = 0; i < embeds->n; i++) {
            if (embeds->rows[i] < 0 || embeds->rows[i] >= n)
                return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_forward: embedding row %lld goes to "
                                 "token %d, outside the batch of %lld", (long long)i,
                                 embeds->rows[i], (long long)n);
            /* segment i copies feature row i over its token's row (a sum of one row, / 1) */
            s->host_segs[i] = (clef_segment){.dst = embeds->rows[i], .begin = (int32_t)i,
                                             .end = (int32_t)(i + 1), .count = 1, .accumulate = 0};
        }
    }
    clef_backend *be = s->be;
    /* the batch on the backend: ids, positions (text: each row's index in its own sequence on
     * all three axes), and the sequence offsets the token-mixing ops read (per mixer group) */
    const int64_t n_groups = plan_groups(s, n_seqs, seq_start);
    const int64_t n_offsets = n_seqs + n_groups;
    if (!pos) {
        for (int64_t q = 0; q < n_seqs; q++)
            for (int64_t t = seq_start[q]; t < seq_start[q + 1]; t++)
                s->host_pos[t] = s->host_pos[n + t] = s->host_pos[2 * n + t] = (int32_t)(t - seq_start[q]);
        pos = s->host_pos;
    }
    int st = clef_backend_write(be, s->ids, ids, sizeof(int32_t) * (size_t)n);
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->pos, pos, sizeof(int32_t) * (size_t)(3 * n));
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->seq_start, s->host_start, sizeof(int32_t) * (size_t)n_offsets);
    if (st == CLEF_OK && embeds && embeds->n > 0)
        st = clef_backend_write(be, s->embed_segs, s->host_segs, sizeof(clef_segment) * (size_t)embeds->n);
    if (st != CLEF_OK)
        return st;
    s->n_tokens = n;
    /* h = embed_tokens(input_ids) from a host table: gathered there and copied (host writes:
     * before the ops, which may be a recording) */
    if (m->embed_be) {
        for (int64_t t0 = 0; t0 < n && st == CLEF_OK; t0 += QWEN35_EMBED_CHUNK) {
            int64_t c = n - t0 < QWEN35_EMBED_CHUNK ? n - t0 : QWEN35_EMBED_CHUNK;
            clef_get_rows(s->embed_be, &m->w.embed, c, ids + t0, s->embed_stage, D);
            st = clef_backend_write(be, s->h + t0 * D, s->embed_stage, sizeof(float) * (size_t)(c * D));
        }
        if (st != CLEF_OK)
            return st;
    }
    /* the ops: replayed from this layout's recording, recorded at its second forward (the
     * first ran them directly: buffers grown, GEMM algorithms chosen), or run directly */
    qwen35_layout *lay = qwen35_layout_of(s, n_seqs, seq_start, embeds);
    if (lay && lay->graph) {
        st = clef_backend_graph_launch(be, lay->graph);
        if (st == CLEF_OK) {
            s->graphs_replayed++;
            return clef_backend_synchronize(be);
        }
        if (st != CLEF_GRAPH_STALE)
            return st;
        clef_backend_graph_free(be, lay->graph); /* a backend buffer moved: run, record again */
        lay->graph = NULL, lay->direct_runs = 0;
    }
    if (lay && lay->direct_runs > 0 && lay->failures < QWEN35_GRAPH_TRIES) {
        if (clef_backend_capture_begin(be) == CLEF_OK) {
            forward_ops(m, s, n, n_groups, embeds);
            clef_graph *graph = NULL;
            if (clef_backend_capture_end(be, &graph) == CLEF_OK) {
                lay->graph = graph;
                s->graphs_recorded++;
                if ((st = clef_backend_graph_launch(be, graph)) != CLEF_OK)
                    return st; /* just recorded, so not stale: a device failure */
                s->graphs_replayed++;
                return clef_backend_synchronize(be);
            }
            CLEF_LOG_W("qwen35: a forward of %lld tokens in %lld sequences runs directly: %s", (long long)n,
                       (long long)n_seqs, clef_last_error());
        }
        lay->failures++; /* nothing ran: run the ops directly below */
        clef_error_clear();
    }
    forward_ops(m, s, n, n_groups, embeds);
    if (lay)
        lay->direct_runs++;
    return clef_backend_synchronize(be);
}
