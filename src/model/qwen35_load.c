/*
 * qwen35_load.c — from a text config and a tensor source to a model's weights: check the
 * config, check every tensor (present, dtype allowed for its role, shape as the config says,
 * format run by the backend) and place it once on the backend through the shared weight
 * loader. RunStates are planned apart (qwen35_state.c), one per context. Failures name the
 * tensor with expected vs got.
 */
#include "model/qwen35_internal.h"
#include "model/weight_loader.h"

#include "core/error.h"
#include "core/log.h"
#include "release/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ---------------------------------------------------------------------------- */

/* The invariants the forward indexes memory by. clef_release_open has already checked them
 * with the file's name in the message; they are checked again here because qwen35_load takes
 * a config from any caller, and a wrong one must be refused, not run. */
static int check_config(const clef_text_config *c, int64_t *rot_dims) {
#define REQUIRE_POSITIVE(field)                                                             \
    if (c->field <= 0)                                                                      \
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "text_config.%s = %lld, expected > 0", #field, \
                         (long long)c->field);
    REQUIRE_POSITIVE(vocab_size);
    REQUIRE_POSITIVE(hidden_size);
    REQUIRE_POSITIVE(intermediate_size);
    REQUIRE_POSITIVE(num_hidden_layers);
    REQUIRE_POSITIVE(num_attention_heads);
    REQUIRE_POSITIVE(num_key_value_heads);
    REQUIRE_POSITIVE(head_dim);
    REQUIRE_POSITIVE(linear_num_key_heads);
    REQUIRE_POSITIVE(linear_num_value_heads);
    REQUIRE_POSITIVE(linear_key_head_dim);
    REQUIRE_POSITIVE(linear_value_head_dim);
    REQUIRE_POSITIVE(linear_conv_kernel_dim);
#undef REQUIRE_POSITIVE
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "text_config: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                         (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if (c->linear_num_value_heads % c->linear_num_key_heads != 0)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "text_config: linear_num_value_heads %lld is not a multiple of linear_num_key_heads %lld",
                         (long long)c->linear_num_value_heads, (long long)c->linear_num_key_heads);
    if (!(c->rms_norm_eps > 0) || !(c->rope_theta > 0))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "text_config: rms_norm_eps %g and rope_theta %g must be > 0",
                         c->rms_norm_eps, c->rope_theta);
    if (!(c->partial_rotary_factor > 0 && c->partial_rotary_factor <= 1))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "text_config: partial_rotary_factor %g not in (0, 1]",
                         c->partial_rotary_factor);
    int64_t rot = clef_text_rotary_dim(c);
    if (rot < 2 || rot % 2 != 0)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "text_config: rotary dims %lld (head_dim x partial_rotary_factor) must be even and >= 2",
                         (long long)rot);
    int64_t sections = c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2];
    if (c->mrope_section[0] < 0 || c->mrope_section[1] < 0 || c->mrope_section[2] < 0 || sections != rot / 2)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "text_config: mrope_section [%lld, %lld, %lld] sums to %lld, expected rotary dims / 2 = %lld",
                         (long long)c->mrope_section[0], (long long)c->mrope_section[1],
                         (long long)c->mrope_section[2], (long long)sections, (long long)(rot / 2));
    if (!c->layer_types)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "text_config: layer_types missing");
    for (int64_t i = 0; i < c->num_hidden_layers; i++)
        if (c->layer_types[i] != CLEF_LAYER_LINEAR_ATTENTION && c->layer_types[i] != CLEF_LAYER_FULL_ATTENTION)
            return clef_fail(CLEF_ERR_CONFIG_INVALID, "text_config: layer_types[%lld] unknown", (long long)i);
    *rot_dims = rot;
    return CLEF_OK;
}

/* ---- tensors ---------------------------------------------------------------------------
 * Through the shared weight loader (weight_loader.h): matrices keep their stored format
 * (F32, BF16, F16 as the backend runs them), vectors become fp32. */

static int load_matrix(clef_weight_loader *L, const char *name, int64_t rows, int64_t cols, clef_matrix *out) {
    return clef_weight_load_matrix(L, name, rows, cols, out);
}

static int load_vector(clef_weight_loader *L, const char *name, const int64_t *shape, int n_dims, float **out) {
    return clef_weight_load_vector(L, name, shape, n_dims, out);
}

static int load_vec1(clef_weight_loader *L, const char *name, int64_t n, float **out) {
    return clef_weight_load_vector(L, name, &n, 1, out);
}

static int load_layer(qwen35_model *m, clef_weight_loader *src, int64_t i, qwen35_layer *L) {
    const clef_text_config *c = &m->cfg;
    const int64_t D = c->hidden_size, F = c->intermediate_size;
    char name[160];
    int st;
#define NAME(suffix) (snprintf(name, sizeof name, "text.layers.%lld.%s", (long long)i, suffix), name)
#define TRY(expr)                  \
    if ((st = (expr)) != CLEF_OK)  \
        return st;
    L->type = c->layer_types[i];
    TRY(load_vec1(src, NAME("input_layernorm.weight"), D, &L->input_norm));
    TRY(load_vec1(src, NAME("post_attention_layernorm.weight"), D, &L->post_norm));
    TRY(load_matrix(src, NAME("mlp.gate_proj.weight"), F, D, &L->mlp_gate));
    TRY(load_matrix(src, NAME("mlp.up_proj.weight"), F, D, &L->mlp_up));
    TRY(load_matrix(src, NAME("mlp.down_proj.weight"), D, F, &L->mlp_down));
    if (L->type == CLEF_LAYER_LINEAR_ATTENTION) {
        const int64_t Hv = c->linear_num_value_heads, dv = c->linear_value_head_dim;
        const int64_t K = c->linear_num_key_heads * c->linear_key_head_dim, Vd = Hv * dv, Cc = 2 * K + Vd;
        const int64_t conv_shape[3] = {Cc, 1, c->linear_conv_kernel_dim};
        TRY(load_matrix(src, NAME("linear_attn.in_proj_qkv.weight"), Cc, D, &L->in_qkv));
        TRY(load_matrix(src, NAME("linear_attn.in_proj_z.weight"), Vd, D, &L->in_z));
        TRY(load_matrix(src, NAME("linear_attn.in_proj_b.weight"), Hv, D, &L->in_b));
        TRY(load_matrix(src, NAME("linear_attn.in_proj_a.weight"), Hv, D, &L->in_a));
        TRY(load_vector(src, NAME("linear_attn.conv1d.weight"), conv_shape, 3, &L->conv_w));
        TRY(load_vec1(src, NAME("linear_attn.dt_bias"), Hv, &L->dt_bias));
        TRY(load_vec1(src, NAME("linear_attn.A_log"), Hv, &L->a_log));
        TRY(load_vec1(src, NAME("linear_attn.norm.weight"), dv, &L->gdn_norm));
        TRY(load_matrix(src, NAME("linear_attn.out_proj.weight"), D, Vd, &L->out_proj));
    } else {
        const int64_t Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim;
        TRY(load_matrix(src, NAME("self_attn.q_proj.weight"), Hq * 2 * d, D, &L->q_proj));
        TRY(load_matrix(src, NAME("self_attn.k_proj.weight"), Hkv * d, D, &L->k_proj));
        TRY(load_matrix(src, NAME("self_attn.v_proj.weight"), Hkv * d, D, &L->v_proj));
        TRY(load_matrix(src, NAME("self_attn.o_proj.weight"), D, Hq * d, &L->o_proj));
        TRY(load_vec1(src, NAME("self_attn.q_norm.weight"), d, &L->q_norm));
        TRY(load_vec1(src, NAME("self_attn.k_norm.weight"), d, &L->k_norm));
    }
#undef NAME
#undef TRY
    return CLEF_OK;
}

/* ---- load / free ------------------------------------------------------------------------ */

int qwen35_load(const clef_text_config *cfg, const clef_tensor_source *src, clef_backend *be,
                qwen35_model **out) {
    return qwen35_load_placed(cfg, src, be, NULL, out);
}

int qwen35_load_placed(const clef_text_config *cfg, const clef_tensor_source *src,
                       clef_backend *be, clef_backend *embed_be, qwen35_model **out) {
    if (!out || !cfg || !src || !src->find || !src->read || !be)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_load: NULL argument");
    if (embed_be == be)
        embed_be = NULL;
    *out = NULL;
    int64_t rot = 0;
    int st = check_config(cfg, &rot);
    if (st != CLEF_OK)
        return st;
    qwen35_model *m = calloc(1, sizeof *m);
    if (!m)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "qwen35_load: out of memory");
    m->cfg = *cfg;
    m->be = be;
    m->buffers = clef_buffer_set_init(be);
    m->embed_be = embed_be;
    m->embed_buffers = clef_buffer_set_init(embed_be ? embed_be : be);
    m->rot_dims = rot;
    m->layer_types = malloc(sizeof(clef_layer_type) * (size_t)cfg->num_hidden_layers);
    m->w.layers = calloc((size_t)cfg->num_hidden_layers, sizeof(qwen35_layer));
    if (!m->layer_types || !m->w.layers) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "qwen35_load: out of memory");
        goto err;
    }
    memcpy(m->layer_types, cfg->layer_types, sizeof(clef_layer_type) * (size_t)cfg->num_hidden_layers);
    m->cfg.layer_types = m->layer_types;
    clef_weight_loader wl = clef_weight_loader_init(be, src, &m->buffers, NULL, "", "config");
    /* only looked up (get_rows), never multiplied: kept as stored, no prepared copy */
    if (embed_be) { /* the table on the host backend, through its own loader */
        clef_weight_loader el = clef_weight_loader_init(embed_be, src, &m->embed_buffers, NULL, "",
                                                        "config");
        st = clef_weight_load_table(&el, "text.embed_tokens.weight", cfg->vocab_size,
                                    cfg->hidden_size, &m->w.embed);
        m->weight_bytes += el.bytes;
        clef_weight_loader_free(&el);
    } else {
        st = clef_weight_load_table(&wl, "text.embed_tokens.weight", cfg->vocab_size,
                                    cfg->hidden_size, &m->w.embed);
    }
    if (st == CLEF_OK)
        st = load_vec1(&wl, "text.norm.weight", cfg->hidden_size, &m->w.final_norm);
    for (int64_t i = 0; st == CLEF_OK && i < cfg->num_hidden_layers; i++)
        st = load_layer(m, &wl, i, &m->w.layers[i]);
    m->weight_bytes += wl.bytes;
    clef_weight_loader_free(&wl);
    if (st != CLEF_OK)
        goto err;
    CLEF_LOG_I("qwen35: %lld layers, hidden %lld, weights %.1f MiB", (long long)cfg->num_hidden_layers,
               (long long)cfg->hidden_size, m->weight_bytes / 1048576.0);
    *out = m;
    return CLEF_OK;
err:
    qwen35_free(m);
    return st;
}

void qwen35_free(qwen35_model *m) {
    if (!m)
        return;
    clef_buffer_set_release(&m->buffers);
    if (m->embed_be)
        clef_buffer_set_release(&m->embed_buffers);
    free(m->w.layers);
    free(m->layer_types);
    free(m);
}

int64_t qwen35_hidden_size(const qwen35_model *m) { return m->cfg.hidden_size; }
size_t qwen35_weight_bytes(const qwen35_model *m) { return m->weight_bytes; }
