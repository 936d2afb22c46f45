/*
 * expected.c — what the model needs, per config and precision (see expected.h). The lists
 * below read like the model's parameter list in transformers / the reference head; shapes
 * are written as the module's Linear [out, in].
 */
#include "release/expected.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIT(t) (1u << (t))
#define FLOAT_MASK (BIT(CLEF_DTYPE_BF16) | BIT(CLEF_DTYPE_F16) | BIT(CLEF_DTYPE_F32))
#define SCALE_MASK (BIT(CLEF_DTYPE_BF16) | BIT(CLEF_DTYPE_F16) | BIT(CLEF_DTYPE_F32))

typedef struct builder {
    clef_expected_list *list;
    const clef_release_config *cfg;
    clef_dtype_lookup lookup;
    void *user;
    int oom;
} builder;

/* Append one tensor; shape given as n_dims values. Returns the entry (NULL on OOM). */
static clef_expected_tensor *add(builder *b, uint32_t mask, int optional, clef_value_check check,
                                 int n_dims, const int64_t *shape, const char *fmt, ...)
    CLEF_PRINTF(7, 8);

static clef_expected_tensor *add(builder *b, uint32_t mask, int optional, clef_value_check check,
                                 int n_dims, const int64_t *shape, const char *fmt, ...) {
    if (b->oom)
        return NULL;
    clef_expected_list *l = b->list;
    if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        clef_expected_tensor *p = realloc(l->items, cap * sizeof *p);
        if (!p) {
            b->oom = 1;
            return NULL;
        }
        l->items = p;
        l->cap = cap;
    }
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    clef_expected_tensor *e = &l->items[l->count];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) {
        b->oom = 1;
        return NULL;
    }
    e->n_dims = n_dims;
    for (int i = 0; i < n_dims && i < CLEF_MAX_DIMS; i++)
        e->shape[i] = shape[i];
    e->dtype_mask = mask;
    e->optional = optional;
    e->check = check;
    l->count++;
    return e;
}

#define SHAPE(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

static void float_tensor(builder *b, int n_dims, const int64_t *shape, const char *name) {
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, n_dims, shape, "%s", name);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A Linear [out, in] without bias that the method may quantize (see expected.h). */
static void linear(builder *b, int quantizable, int64_t out, int64_t in, const char *fmt, ...)
    CLEF_PRINTF(5, 6);

static void linear(builder *b, int quantizable, int64_t out, int64_t in, const char *fmt, ...) {
    char p[448];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof p, fmt, ap);
    va_end(ap);
    char w[480];
    snprintf(w, sizeof w, "%s.weight", p);
    int dt = b->lookup(b->user, w);
    clef_quant_method m = b->cfg->quant.method;
    int quantized = quantizable && dt >= 0 && !(FLOAT_MASK & BIT(dt));
    if (!quantized) {
        float_tensor(b, SHAPE(out, in), w);
        return;
    }
    int64_t n = out * in;
    if (m == CLEF_QUANT_BNB_NF4) {
        int64_t blocks = ceil_div(n, 64);
        add(b, BIT(CLEF_DTYPE_U8), 0, CLEF_CHECK_NONE, SHAPE((n + 1) / 2, 1), "%s", w);
        char absmax[480];
        snprintf(absmax, sizeof absmax, "%s.weight.absmax", p);
        int absmax_dt = b->lookup(b->user, absmax);
        if (absmax_dt == CLEF_DTYPE_F32) { /* no double quantization: absmax are the scales */
            add(b, BIT(CLEF_DTYPE_F32), 0, CLEF_CHECK_SCALE, SHAPE(blocks), "%s.weight.absmax", p);
        } else {
            add(b, BIT(CLEF_DTYPE_U8), 0, CLEF_CHECK_NONE, SHAPE(blocks), "%s.weight.absmax", p);
            add(b, BIT(CLEF_DTYPE_F32), 0, CLEF_CHECK_SCALE, SHAPE(ceil_div(blocks, 256)),
                "%s.weight.nested_absmax", p);
            add(b, BIT(CLEF_DTYPE_F32), 0, CLEF_CHECK_FINITE, SHAPE(256),
                "%s.weight.nested_quant_map", p);
        }
        add(b, BIT(CLEF_DTYPE_F32), 0, CLEF_CHECK_NF4_QUANT_MAP, SHAPE(16), "%s.weight.quant_map", p);
        clef_expected_tensor *st = add(b, BIT(CLEF_DTYPE_U8), 0, CLEF_CHECK_NF4_STATE,
                                       CLEF_SHAPE_ANY_1D, NULL,
                                       "%s.weight.quant_state.bitsandbytes__nf4", p);
        if (st) {
            st->weight_shape[0] = out;
            st->weight_shape[1] = in;
        }
    } else if (m == CLEF_QUANT_FP8_W8A8) {
        add(b, BIT(CLEF_DTYPE_F8_E4M3), 0, CLEF_CHECK_NONE, SHAPE(out, in), "%s", w);
        add(b, SCALE_MASK, 0, CLEF_CHECK_SCALE, SHAPE(out, 1), "%s.weight_scale", p);
    } else if (m == CLEF_QUANT_INT8_CONVROT) {
        add(b, BIT(CLEF_DTYPE_I8), 0, CLEF_CHECK_NONE, SHAPE(out, in), "%s", w);
        add(b, SCALE_MASK, 0, CLEF_CHECK_SCALE, SHAPE(out, 1), "%s.weight_scale", p);
        add(b, BIT(CLEF_DTYPE_U8), 1, CLEF_CHECK_NONE, CLEF_SHAPE_ANY_1D, NULL, "%s.comfy_quant", p);
        add(b, SCALE_MASK, 1, CLEF_CHECK_SCALE, CLEF_SHAPE_SCALAR, NULL, "%s.input_scale", p);
    } else {
        float_tensor(b, SHAPE(out, in), w); /* not a quantized release: the dtype check says why */
    }
}

static void text_tensors(builder *b) {
    const clef_text_config *t = &b->cfg->text;
    clef_quant_method m = b->cfg->quant.method;
    const int64_t D = t->hidden_size, F = t->intermediate_size, V = t->vocab_size;
    const int64_t d = t->head_dim, Hq = t->num_attention_heads, Hkv = t->num_key_value_heads;
    const int64_t K = t->linear_num_key_heads * t->linear_key_head_dim;
    const int64_t Vd = t->linear_num_value_heads * t->linear_value_head_dim;
    const int64_t Cc = 2 * K + Vd, Hv = t->linear_num_value_heads;
    /* Which linears each method quantizes (formats.md). */
    const int q_any = m != CLEF_QUANT_NONE;
    const int q_gdn = m == CLEF_QUANT_BNB_NF4 || m == CLEF_QUANT_INT8_CONVROT;
    const int q_gdn_small = m == CLEF_QUANT_BNB_NF4; /* in_proj_a / in_proj_b */
    char name[128];

    float_tensor(b, SHAPE(V, D), "text.embed_tokens.weight");
    float_tensor(b, SHAPE(D), "text.norm.weight");
    if (!t->tie_word_embeddings)
        float_tensor(b, SHAPE(V, D), "lm_head.weight");
    for (int64_t i = 0; i < t->num_hidden_layers; i++) {
        const long long li = (long long)i;
        snprintf(name, sizeof name, "text.layers.%lld.input_layernorm.weight", li);
        float_tensor(b, SHAPE(D), name);
        snprintf(name, sizeof name, "text.layers.%lld.post_attention_layernorm.weight", li);
        float_tensor(b, SHAPE(D), name);
        linear(b, q_any, F, D, "text.layers.%lld.mlp.gate_proj", li);
        linear(b, q_any, F, D, "text.layers.%lld.mlp.up_proj", li);
        linear(b, q_any, D, F, "text.layers.%lld.mlp.down_proj", li);
        if (t->layer_types[i] == CLEF_LAYER_FULL_ATTENTION) {
            linear(b, q_any, 2 * Hq * d, D, "text.layers.%lld.self_attn.q_proj", li);
            linear(b, q_any, Hkv * d, D, "text.layers.%lld.self_attn.k_proj", li);
            linear(b, q_any, Hkv * d, D, "text.layers.%lld.self_attn.v_proj", li);
            linear(b, q_any, D, Hq * d, "text.layers.%lld.self_attn.o_proj", li);
            snprintf(name, sizeof name, "text.layers.%lld.self_attn.q_norm.weight", li);
            float_tensor(b, SHAPE(d), name);
            snprintf(name, sizeof name, "text.layers.%lld.self_attn.k_norm.weight", li);
            float_tensor(b, SHAPE(d), name);
        } else {
            linear(b, q_gdn, Cc, D, "text.layers.%lld.linear_attn.in_proj_qkv", li);
            linear(b, q_gdn, Vd, D, "text.layers.%lld.linear_attn.in_proj_z", li);
            linear(b, q_gdn_small, Hv, D, "text.layers.%lld.linear_attn.in_proj_b", li);
            linear(b, q_gdn_small, Hv, D, "text.layers.%lld.linear_attn.in_proj_a", li);
            linear(b, q_gdn, D, Vd, "text.layers.%lld.linear_attn.out_proj", li);
            snprintf(name, sizeof name, "text.layers.%lld.linear_attn.conv1d.weight", li);
            float_tensor(b, SHAPE(Cc, 1, t->linear_conv_kernel_dim), name);
            snprintf(name, sizeof name, "text.layers.%lld.linear_attn.dt_bias", li);
            float_tensor(b, SHAPE(Hv), name);
            snprintf(name, sizeof name, "text.layers.%lld.linear_attn.A_log", li);
            float_tensor(b, SHAPE(Hv), name);
            snprintf(name, sizeof name, "text.layers.%lld.linear_attn.norm.weight", li);
            float_tensor(b, SHAPE(t->linear_value_head_dim), name);
        }
    }
}

/* weight [out, in] + bias [out], both float (vision and head linears are never quantized). */
static void affine(builder *b, int64_t out, int64_t in, const char *prefix) {
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(out, in), "%s.weight", prefix);
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(out), "%s.bias", prefix);
}

static void norm_wb(builder *b, int64_t n, const char *prefix) {
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(n), "%s.weight", prefix);
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(n), "%s.bias", prefix);
}

static void vision_tensors(builder *b) {
    const clef_vision_config *v = &b->cfg->vision;
    const int64_t H = v->hidden_size, I = v->intermediate_size, P = v->patch_size;
    const int64_t merged = H * v->spatial_merge_size * v->spatial_merge_size;
    char p[128];
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(H, v->in_channels, v->temporal_patch_size, P, P),
        "vision.patch_embed.proj.weight");
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(H), "vision.patch_embed.proj.bias");
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(v->num_position_embeddings, H),
        "vision.pos_embed.weight");
    for (int64_t i = 0; i < v->depth; i++) {
        const long long li = (long long)i;
        snprintf(p, sizeof p, "vision.blocks.%lld.norm1", li);
        norm_wb(b, H, p);
        snprintf(p, sizeof p, "vision.blocks.%lld.norm2", li);
        norm_wb(b, H, p);
        snprintf(p, sizeof p, "vision.blocks.%lld.attn.qkv", li);
        affine(b, 3 * H, H, p);
        snprintf(p, sizeof p, "vision.blocks.%lld.attn.proj", li);
        affine(b, H, H, p);
        snprintf(p, sizeof p, "vision.blocks.%lld.mlp.linear_fc1", li);
        affine(b, I, H, p);
        snprintf(p, sizeof p, "vision.blocks.%lld.mlp.linear_fc2", li);
        affine(b, H, I, p);
    }
    norm_wb(b, H, "vision.merger.norm");
    affine(b, merged, merged, "vision.merger.linear_fc1");
    affine(b, v->out_hidden_size, merged, "vision.merger.linear_fc2");
}

/* torch.nn.MultiheadAttention(width, heads) parameters under prefix. */
static void mha(builder *b, int64_t W, const char *prefix) {
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(3 * W, W), "%s.in_proj_weight", prefix);
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(3 * W), "%s.in_proj_bias", prefix);
    char p[160];
    snprintf(p, sizeof p, "%s.out_proj", prefix);
    affine(b, W, W, p);
}

static void head_tensors(builder *b) {
    const clef_head_config *h = &b->cfg->head;
    const int64_t D = h->hidden_size, W = h->width, FF = h->feedforward;
    char p[128];
    norm_wb(b, D, "head.hidden_norm");
    static const char *const projections[] = {
        "memory_projection",         "question_projection",       "option_question_projection",
        "global_projection",         "option_context_projection", "option_lexical_projection",
    };
    for (size_t i = 0; i < sizeof projections / sizeof projections[0]; i++)
        add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(W, D), "head.%s.weight", projections[i]);
    add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, SHAPE(3, W), "head.type_embedding.weight");
    for (int64_t i = 0; i < h->routing_layers; i++) {
        const long long li = (long long)i;
        static const char *const norms[] = {"query_norm", "memory_norm", "feedforward_norm"};
        for (size_t k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "head.evidence_layers.%lld.%s", li, norms[k]);
            norm_wb(b, W, p);
        }
        snprintf(p, sizeof p, "head.evidence_layers.%lld.attention", li);
        mha(b, W, p);
        snprintf(p, sizeof p, "head.evidence_layers.%lld.feedforward.0", li);
        affine(b, FF, W, p);
        snprintf(p, sizeof p, "head.evidence_layers.%lld.feedforward.3", li);
        affine(b, W, FF, p);
    }
    norm_wb(b, W, "head.option_summary_norm");
    for (int64_t i = 0; i < h->layers; i++) {
        const long long li = (long long)i;
        snprintf(p, sizeof p, "head.layers.%lld.self_attn", li);
        mha(b, W, p);
        snprintf(p, sizeof p, "head.layers.%lld.multihead_attn", li);
        mha(b, W, p);
        snprintf(p, sizeof p, "head.layers.%lld.linear1", li);
        affine(b, FF, W, p);
        snprintf(p, sizeof p, "head.layers.%lld.linear2", li);
        affine(b, W, FF, p);
        for (int k = 1; k <= 3; k++) {
            snprintf(p, sizeof p, "head.layers.%lld.norm%d", li, k);
            norm_wb(b, W, p);
        }
    }
    norm_wb(b, W, "head.field_norm");
    norm_wb(b, W, "head.option_norm");
    affine(b, W, 4 * W, "head.residual_scorer.0");
    affine(b, 1, W, "head.residual_scorer.3");
    static const char *const scalars[] = {"prior_logit_scale", "joint_logit_scale", "residual_gate"};
    for (size_t i = 0; i < 3; i++)
        add(b, FLOAT_MASK, 0, CLEF_CHECK_NONE, 0, NULL, "head.%s", scalars[i]);
}

int clef_expected_build(const clef_release_config *cfg, clef_dtype_lookup lookup, void *user,
                        clef_expected_list *out) {
    memset(out, 0, sizeof *out);
    builder b = {out, cfg, lookup, user, 0};
    text_tensors(&b);
    if (cfg->vision.present)
        vision_tensors(&b);
    if (cfg->head.present)
        head_tensors(&b);
    if (b.oom) {
        clef_expected_free(out);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory listing the model's tensors");
    }
    return CLEF_OK;
}

void clef_expected_free(clef_expected_list *list) {
    if (!list)
        return;
    for (size_t i = 0; i < list->count; i++)
        free(list->items[i].name);
    free(list->items);
    memset(list, 0, sizeof *list);
}

void clef_dtype_mask_str(uint32_t mask, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int t = 0; t < CLEF_DTYPE_COUNT; t++)
        if (mask & BIT(t)) {
            int w = snprintf(buf + n, cap - n, "%s%s", n ? "|" : "", clef_dtype_name((clef_dtype)t));
            if (w < 0 || (size_t)w >= cap - n)
                return;
            n += (size_t)w;
        }
}
