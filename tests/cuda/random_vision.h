/*
 * random_vision.h — a tensor source of random weights for a Qwen3.5 vision config, so the GPU
 * vision test and bench can load the real tower's shape (27 blocks x 1152, patch 16) without
 * weight files: every vision.* tensor vision_load asks for exists with the shape it expects,
 * matrices (and the learned position table) BF16 N(0, 0.02) as transformers initialises them,
 * LayerNorm weights 1 + N(0, 0.02), biases N(0, 0.02). Values depend only on (seed, tensor
 * name), so two loads (one per backend) see the same tower. The draws themselves are
 * random_release.h's.
 */
#ifndef CLEF_TESTS_RANDOM_VISION_H
#define CLEF_TESTS_RANDOM_VISION_H

#include "random_release.h"

typedef struct random_vision {
    const clef_vision_config *cfg;
    uint64_t seed;
    clef_tensor_info info; /* the last tensor found (the loader uses it before the next find) */
    char name[160];
    random_release draw;   /* rr_read's generator, keyed by the same seed */
} random_vision;

/* Shape of vision tensor `name` under cfg; 0 when the tower has no such tensor. */
static inline int rv_shape(const clef_vision_config *c, const char *name, int64_t *shape, int *n_dims,
                           int *is_matrix) {
    const int64_t H = c->hidden_size, I = c->intermediate_size, P = c->patch_size, merged = 4 * H;
    *is_matrix = 0, *n_dims = 1;
    if (!strcmp(name, "vision.patch_embed.proj.weight"))
        return *is_matrix = 1, *n_dims = 5, shape[0] = H, shape[1] = c->in_channels,
               shape[2] = c->temporal_patch_size, shape[3] = P, shape[4] = P, 1;
    if (!strcmp(name, "vision.pos_embed.weight"))
        return *is_matrix = 1, *n_dims = 2, shape[0] = c->num_position_embeddings, shape[1] = H, 1;
    struct { const char *name; int64_t r, cols; } top[] = {
        {"vision.patch_embed.proj.bias", H, 0}, {"vision.merger.norm.weight", H, 0},
        {"vision.merger.norm.bias", H, 0}, {"vision.merger.linear_fc1.weight", merged, merged},
        {"vision.merger.linear_fc1.bias", merged, 0}, {"vision.merger.linear_fc2.weight", c->out_hidden_size, merged},
        {"vision.merger.linear_fc2.bias", c->out_hidden_size, 0},
    };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(name, top[i].name)) {
            *is_matrix = top[i].cols > 0, *n_dims = *is_matrix ? 2 : 1;
            shape[0] = top[i].r, shape[1] = top[i].cols;
            return 1;
        }
    long long block;
    int used = 0;
    if (sscanf(name, "vision.blocks.%lld.%n", &block, &used) != 1 || used == 0 || block < 0 || block >= c->depth)
        return 0;
    struct { const char *suffix; int64_t r, cols; } table[] = {
        {"norm1.weight", H, 0}, {"norm1.bias", H, 0}, {"norm2.weight", H, 0}, {"norm2.bias", H, 0},
        {"attn.qkv.weight", 3 * H, H}, {"attn.qkv.bias", 3 * H, 0}, {"attn.proj.weight", H, H},
        {"attn.proj.bias", H, 0}, {"mlp.linear_fc1.weight", I, H}, {"mlp.linear_fc1.bias", I, 0},
        {"mlp.linear_fc2.weight", H, I}, {"mlp.linear_fc2.bias", H, 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(name + used, table[i].suffix)) {
            *is_matrix = table[i].cols > 0, *n_dims = *is_matrix ? 2 : 1;
            shape[0] = table[i].r, shape[1] = table[i].cols;
            return 1;
        }
    return 0;
}

static inline const clef_tensor_info *rv_find(void *ctx, const char *name) {
    random_vision *r = ctx;
    int64_t shape[CLEF_MAX_DIMS] = {0};
    int n_dims, is_matrix;
    if (!rv_shape(r->cfg, name, shape, &n_dims, &is_matrix))
        return NULL;
    return rr_describe(&r->info, r->name, sizeof r->name, name, shape, n_dims, is_matrix);
}

/* rr_read's draws (BF16 N(0, 0.02), fp32 N(0, 0.02)); LayerNorm weights shifted to 1 + w. */
static inline int rv_read(void *ctx, const clef_tensor_info *t, void *dst) {
    random_vision *r = ctx;
    r->draw.seed = r->seed;
    int st = rr_read(&r->draw, t, dst);
    const size_t len = strlen(t->name);
    const int norm_weight = strstr(t->name, "norm") && len > 7 && !strcmp(t->name + len - 7, ".weight");
    if (st == CLEF_OK && norm_weight && t->dtype == CLEF_DTYPE_F32)
        for (uint64_t i = 0; i < t->n_bytes / 4; i++)
            ((float *)dst)[i] += 1.0f;
    return st;
}

static inline clef_tensor_source random_vision_source(random_vision *r) {
    clef_tensor_source src = {.ctx = r, .find = rv_find, .read = rv_read};
    return src;
}

/* The Qwen3.5 vision tower of the 9B and 27B releases (spec shapes: 27 blocks x 1152, 16 heads
 * of 72, MLP 4304, patch 16, temporal 2, merge 2, a 48 x 48 position table, gelu_tanh) with
 * `depth` blocks and out_hidden_size `out` (the text width: 4096 for the 9B, 5120 for the 27B). */
static inline clef_vision_config config_vision_qwen35(int64_t depth, int64_t out) {
    clef_vision_config c;
    memset(&c, 0, sizeof c);
    c.present = 1;
    c.depth = depth, c.hidden_size = 1152, c.intermediate_size = 4304, c.num_heads = 16;
    c.out_hidden_size = out, c.patch_size = 16, c.temporal_patch_size = 2, c.spatial_merge_size = 2;
    c.in_channels = 3, c.num_position_embeddings = 2304, c.rope_theta = 10000.0, c.gelu_tanh = 1;
    return c;
}

#endif /* CLEF_TESTS_RANDOM_VISION_H */
