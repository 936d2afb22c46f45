/*
 * vision_load.c — the vision tower's weights: the config checked for what the forward indexes
 * memory by, then every vision.* tensor (model.visual.* in the release) through the one weight
 * loader, each against the shape the config gives it. Matrices keep their stored format
 * (a quantized release keeps its tower in BF16, so only plain formats arrive here); biases,
 * norms and the patch bias become fp32 vectors.
 */
#include "model/vision_internal.h"
#include "model/weight_loader.h"

#include "core/error.h"
#include "core/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The invariants the forward relies on. clef_release_open has checked most of them already;
 * a tensor source of a test has not. */
static int check_config(const clef_vision_config *c, int64_t *side) {
    if (!c->present)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "the release has no vision tower (no vision_config)");
#define REQUIRE_POSITIVE(field)                                                              \
    if (c->field <= 0)                                                                       \
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "vision_config.%s = %lld, expected > 0", \
                         #field, (long long)c->field);
    REQUIRE_POSITIVE(depth);
    REQUIRE_POSITIVE(hidden_size);
    REQUIRE_POSITIVE(intermediate_size);
    REQUIRE_POSITIVE(num_heads);
    REQUIRE_POSITIVE(out_hidden_size);
    REQUIRE_POSITIVE(patch_size);
    REQUIRE_POSITIVE(temporal_patch_size);
    REQUIRE_POSITIVE(spatial_merge_size);
    REQUIRE_POSITIVE(in_channels);
    REQUIRE_POSITIVE(num_position_embeddings);
#undef REQUIRE_POSITIVE
    if (c->hidden_size % c->num_heads != 0 || (c->hidden_size / c->num_heads) % 4 != 0)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "vision_config: hidden_size %lld / num_heads %lld must be a whole multiple "
                         "of 4 (the 2-D RoPE)", (long long)c->hidden_size, (long long)c->num_heads);
    if (c->spatial_merge_size != 2)
        return clef_fail(CLEF_ERR_UNSUPPORTED,
                         "vision_config.spatial_merge_size = %lld, this engine runs the 2x2 merger "
                         "of Qwen3.5 only", (long long)c->spatial_merge_size);
    if (!(c->rope_theta > 0))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "vision_config: rope_theta %g must be > 0",
                         c->rope_theta);
    int64_t s = (int64_t)llround(sqrt((double)c->num_position_embeddings));
    if (s * s != c->num_position_embeddings)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "vision_config.num_position_embeddings = %lld is not a square",
                         (long long)c->num_position_embeddings);
    *side = s;
    return CLEF_OK;
}

/* nn.Linear(in, out) with bias: weight (out, in), bias (out). */
static int load_affine(clef_weight_loader *L, const char *prefix, int64_t out, int64_t in,
                       clef_matrix *w, float **b) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int st = clef_weight_load_matrix(L, name, out, in, w);
    if (st != CLEF_OK)
        return st;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return clef_weight_load_vector(L, name, &out, 1, b);
}

/* nn.LayerNorm(n): weight and bias (n). */
static int load_norm(clef_weight_loader *L, const char *prefix, int64_t n, float **w, float **b) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int st = clef_weight_load_vector(L, name, &n, 1, w);
    if (st != CLEF_OK)
        return st;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return clef_weight_load_vector(L, name, &n, 1, b);
}

static int load_block(const clef_vision_config *c, clef_weight_loader *L, int64_t i,
                      vision_block *B) {
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    char p[96];
    int st;
#define PREFIX(suffix) (snprintf(p, sizeof p, "vision.blocks.%lld.%s", (long long)i, suffix), p)
    if ((st = load_norm(L, PREFIX("norm1"), H, &B->norm1_w, &B->norm1_b)) ||
        (st = load_norm(L, PREFIX("norm2"), H, &B->norm2_w, &B->norm2_b)) ||
        (st = load_affine(L, PREFIX("attn.qkv"), 3 * H, H, &B->qkv, &B->qkv_b)) ||
        (st = load_affine(L, PREFIX("attn.proj"), H, H, &B->proj, &B->proj_b)) ||
        (st = load_affine(L, PREFIX("mlp.linear_fc1"), I, H, &B->fc1, &B->fc1_b)) ||
        (st = load_affine(L, PREFIX("mlp.linear_fc2"), H, I, &B->fc2, &B->fc2_b)))
        return st;
#undef PREFIX
    return CLEF_OK;
}

int vision_load(const clef_vision_config *cfg, const clef_tensor_source *src, clef_backend *be,
                vision_model **out) {
    if (!out || !cfg || !src || !src->find || !src->read || !be)
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision_load: NULL argument");
    *out = NULL;
    int64_t side = 0;
    int st = check_config(cfg, &side);
    if (st != CLEF_OK)
        return st;
    vision_model *m = calloc(1, sizeof *m);
    if (!m)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "vision_load: out of memory");
    m->cfg = *cfg;
    m->be = be;
    m->buffers = clef_buffer_set_init(be);
    m->head_dim = cfg->hidden_size / cfg->num_heads;
    m->side = side;
    const int64_t H = cfg->hidden_size, P = cfg->patch_size, merged = 4 * H;
    const int64_t patch_dims[5] = {H, cfg->in_channels, cfg->temporal_patch_size, P, P};
    m->patch_dim = cfg->in_channels * cfg->temporal_patch_size * P * P;
    m->w.blocks = calloc((size_t)cfg->depth, sizeof(vision_block));
    if (!m->w.blocks) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "vision_load: out of memory");
        goto err;
    }
    clef_weight_loader wl = clef_weight_loader_init(be, src, &m->buffers, NULL, "", "config");
    vision_weights *w = &m->w;
    st = clef_weight_load_matrix_nd(&wl, "vision.patch_embed.proj.weight", 5, patch_dims, &w->patch);
    if (st == CLEF_OK)
        st = clef_weight_load_vector(&wl, "vision.patch_embed.proj.bias", &H, 1, &w->patch_b);
    if (st == CLEF_OK)
        /* only looked up (get_rows): kept as stored, no prepared copy */
        st = clef_weight_load_table(&wl, "vision.pos_embed.weight", side * side, H, &w->pos);
    for (int64_t i = 0; st == CLEF_OK && i < cfg->depth; i++)
        st = load_block(cfg, &wl, i, &w->blocks[i]);
    if (st == CLEF_OK)
        st = load_norm(&wl, "vision.merger.norm", H, &w->merger_norm_w, &w->merger_norm_b);
    if (st == CLEF_OK)
        st = load_affine(&wl, "vision.merger.linear_fc1", merged, merged, &w->merger_fc1,
                         &w->merger_fc1_b);
    if (st == CLEF_OK)
        st = load_affine(&wl, "vision.merger.linear_fc2", cfg->out_hidden_size, merged,
                         &w->merger_fc2, &w->merger_fc2_b);
    m->weight_bytes = wl.bytes;
    clef_weight_loader_free(&wl);
    if (st != CLEF_OK)
        goto err;
    CLEF_LOG_I("vision: %lld blocks, hidden %lld, patch %lld, weights %.1f MiB",
               (long long)cfg->depth, (long long)H, (long long)P, m->weight_bytes / 1048576.0);
    *out = m;
    return CLEF_OK;
err:
    vision_free(m);
    return st;
}

int vision_load_release(const clef_release *rel, clef_backend *be, vision_model **out) {
    if (!rel)
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision_load_release: release is NULL");
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    return vision_load(&clef_release_get_config(rel)->vision, &src, be, out);
}

void vision_free(vision_model *m) {
    if (!m)
        return;
    clef_buffer_set_release(&m->buffers);
    free(m->w.blocks);
    free(m);
}

int64_t vision_patch_dim(const vision_model *m) { return m->patch_dim; }
int64_t vision_out_dim(const vision_model *m) { return m->cfg.out_hidden_size; }
int64_t vision_merge_size(const vision_model *m) { return m->cfg.spatial_merge_size; }
size_t vision_weight_bytes(const vision_model *m) { return m->weight_bytes; }

int64_t vision_tokens(const vision_model *m, const vision_input *in) {
    const int64_t ms = m->cfg.spatial_merge_size;
    return in->grid_t * in->grid_h * in->grid_w / (ms * ms);
}
