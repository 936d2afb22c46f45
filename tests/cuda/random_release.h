/*
 * random_release.h — a tensor source of random weights for a Qwen3.5 text config, so the GPU
 * tests and bench can load real model shapes (the 9B's widths) without weight files: every
 * tensor the loader asks for exists with the shape qwen35_load expects, matrices BF16
 * N(0, 0.02) as transformers initialises them, A_log = log(U[1, 16]) and dt_bias = 1 as the
 * Qwen3.5 GDN layer does, other vectors N(0, 0.02) (norms are zero-centred: 1 + w).
 * Values depend only on (seed, tensor name), so two loads see the same model.
 */
#ifndef CLEF_TESTS_RANDOM_RELEASE_H
#define CLEF_TESTS_RANDOM_RELEASE_H

#include "core/numeric.h"
#include "model/tensor_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct random_release {
    const clef_text_config *cfg;
    uint64_t seed;
    clef_tensor_info info; /* the last tensor found (the loader uses it before the next find) */
    char name[160];
} random_release;

static inline int rr_shape(const clef_text_config *c, const char *name, int64_t *shape, int *n_dims, int *is_matrix) {
    const int64_t D = c->hidden_size, F = c->intermediate_size, Hv = c->linear_num_value_heads;
    const int64_t K = c->linear_num_key_heads * c->linear_key_head_dim, Vd = Hv * c->linear_value_head_dim;
    const int64_t Cc = 2 * K + Vd, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim;
    *is_matrix = 1, *n_dims = 2;
    if (!strcmp(name, "text.embed_tokens.weight"))
        return shape[0] = c->vocab_size, shape[1] = D, 1;
    if (!strcmp(name, "text.norm.weight"))
        return *is_matrix = 0, *n_dims = 1, shape[0] = D, 1;
    long long layer;
    int used = 0;
    if (sscanf(name, "text.layers.%lld.%n", &layer, &used) != 1 || used == 0 || layer < 0 || layer >= c->num_hidden_layers)
        return 0;
    const char *s = name + used;
    const int gdn = c->layer_types[layer] == CLEF_LAYER_LINEAR_ATTENTION;
    struct { const char *suffix; int gdn; int64_t r, cols; int matrix; } table[] = {
        {"input_layernorm.weight", -1, D, 0, 0}, {"post_attention_layernorm.weight", -1, D, 0, 0},
        {"mlp.gate_proj.weight", -1, F, D, 1}, {"mlp.up_proj.weight", -1, F, D, 1}, {"mlp.down_proj.weight", -1, D, F, 1},
        {"linear_attn.in_proj_qkv.weight", 1, Cc, D, 1}, {"linear_attn.in_proj_z.weight", 1, Vd, D, 1},
        {"linear_attn.in_proj_b.weight", 1, Hv, D, 1}, {"linear_attn.in_proj_a.weight", 1, Hv, D, 1},
        {"linear_attn.dt_bias", 1, Hv, 0, 0}, {"linear_attn.A_log", 1, Hv, 0, 0},
        {"linear_attn.norm.weight", 1, c->linear_value_head_dim, 0, 0}, {"linear_attn.out_proj.weight", 1, D, Vd, 1},
        {"self_attn.q_proj.weight", 0, Hq * 2 * d, D, 1}, {"self_attn.k_proj.weight", 0, Hkv * d, D, 1},
        {"self_attn.v_proj.weight", 0, Hkv * d, D, 1}, {"self_attn.o_proj.weight", 0, D, Hq * d, 1},
        {"self_attn.q_norm.weight", 0, d, 0, 0}, {"self_attn.k_norm.weight", 0, d, 0, 0},
    };
    if (gdn && !strcmp(s, "linear_attn.conv1d.weight"))
        return *is_matrix = 0, *n_dims = 3, shape[0] = Cc, shape[1] = 1, shape[2] = c->linear_conv_kernel_dim, 1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(s, table[i].suffix) || (table[i].gdn >= 0 && table[i].gdn != gdn))
            continue;
        *is_matrix = table[i].matrix;
        *n_dims = table[i].matrix ? 2 : 1;
        shape[0] = table[i].r, shape[1] = table[i].cols;
        return 1;
    }
    return 0;
}

/* Describe tensor `name` of the given shape in *info (the name copied into namebuf, which the
 * info points at): BF16 for matrices, F32 for vectors, as both random sources store them. */
static inline const clef_tensor_info *rr_describe(clef_tensor_info *info, char *namebuf, size_t namebuf_size,
                                                  const char *name, const int64_t *shape, int n_dims,
                                                  int is_matrix) {
    snprintf(namebuf, namebuf_size, "%s", name);
    memset(info, 0, sizeof *info);
    info->name = info->stored_name = namebuf;
    info->dtype = is_matrix ? CLEF_DTYPE_BF16 : CLEF_DTYPE_F32;
    info->n_dims = n_dims;
    uint64_t n = 1;
    for (int i = 0; i < n_dims; i++)
        info->shape[i] = shape[i], n *= (uint64_t)shape[i];
    info->n_bytes = n * (is_matrix ? 2 : 4);
    return info;
}

static inline const clef_tensor_info *rr_find(void *ctx, const char *name) {
    random_release *r = ctx;
    int64_t shape[CLEF_MAX_DIMS] = {0};
    int n_dims, is_matrix;
    if (!rr_shape(r->cfg, name, shape, &n_dims, &is_matrix))
        return NULL;
    return rr_describe(&r->info, r->name, sizeof r->name, name, shape, n_dims, is_matrix);
}

static inline uint64_t rr_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float rr_normal(uint64_t *s) {
    double u1 = ((rr_next(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0), u2 = (rr_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static inline int rr_read(void *ctx, const clef_tensor_info *t, void *dst) {
    random_release *r = ctx;
    uint64_t s = r->seed;
    for (const char *p = t->name; *p; p++)
        s = s * 1099511628211ull + (unsigned char)*p;
    const int is_alog = strstr(t->name, "A_log") != NULL, is_dt = strstr(t->name, "dt_bias") != NULL;
    if (t->dtype == CLEF_DTYPE_BF16) {
        /* billions of values: draw from a table of 65,536 N(0, 0.02) bf16 samples by hash
         * (a few ns per value instead of a Box-Muller pair) */
        static uint16_t table[65536];
        static int table_ready;
        if (!table_ready) {
            uint64_t ts = 0x5eed;
            for (int i = 0; i < 65536; i++)
                table[i] = clef_f32_to_bf16(rr_normal(&ts) * 0.02f);
            table_ready = 1;
        }
        uint16_t *o = dst;
        for (uint64_t i = 0; i < t->n_bytes / 2; i += 4) {
            uint64_t r = rr_next(&s);
            for (uint64_t j = 0; j < 4 && i + j < t->n_bytes / 2; j++)
                o[i + j] = table[(r >> (16 * j)) & 0xffff];
        }
    } else {
        float *o = dst;
        for (uint64_t i = 0; i < t->n_bytes / 4; i++)
            o[i] = is_alog ? logf(1.0f + 15.0f * (float)((rr_next(&s) >> 11) * (1.0 / 9007199254740992.0)))
                 : is_dt ? 1.0f : rr_normal(&s) * 0.02f;
    }
    return CLEF_OK;
}

static inline clef_tensor_source random_release_source(random_release *r) {
    clef_tensor_source src = {.ctx = r, .find = rr_find, .read = rr_read};
    return src;
}

/* The text config of Clef-flash 9B (spec shapes), with n_layers layers (full attention at
 * i % 4 == 3). types must hold n_layers entries. */
static inline clef_text_config config_9b(int64_t n_layers, clef_layer_type *types) {
    clef_text_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 248320, c.hidden_size = 4096, c.intermediate_size = 12288, c.num_hidden_layers = n_layers;
    c.num_attention_heads = 16, c.num_key_value_heads = 4, c.head_dim = 256;
    c.linear_num_key_heads = 16, c.linear_num_value_heads = 32, c.linear_key_head_dim = 128, c.linear_value_head_dim = 128;
    c.linear_conv_kernel_dim = 4, c.rms_norm_eps = 1e-6, c.rope_theta = 1e7, c.partial_rotary_factor = 0.25;
    c.mrope_section[0] = 11, c.mrope_section[1] = 11, c.mrope_section[2] = 10, c.mrope_interleaved = 1;
    for (int64_t i = 0; i < n_layers; i++)
        types[i] = i % 4 == 3 ? CLEF_LAYER_FULL_ATTENTION : CLEF_LAYER_LINEAR_ATTENTION;
    c.layer_types = types;
    return c;
}

/* Clef 27B (spec shapes). */
static inline clef_text_config config_27b(int64_t n_layers, clef_layer_type *types) {
    clef_text_config c = config_9b(n_layers, types);
    c.hidden_size = 5120, c.intermediate_size = 17408, c.num_attention_heads = 24, c.linear_num_value_heads = 48;
    return c;
}

#endif /* CLEF_TESTS_RANDOM_RELEASE_H */
