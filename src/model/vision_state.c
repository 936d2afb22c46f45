/*
 * vision_state.c — planning a vision State: every backend buffer a forward of up to N patch
 * rows writes, plus the host staging of the per-patch tables (position taps, RoPE cos/sin,
 * frame offsets), allocated once so the forward allocates nothing.
 */
#include "model/vision_internal.h"

#include "core/error.h"

#include <stdlib.h>

/* Floats per patch row of the work region: attention's q|k|v (3H) and o (H), the MLP's fc1
 * (I), the 4 position taps (4H), the merger's fc1 (4H per merged row = H per patch). */
static int64_t work_cols(const clef_vision_config *c) {
    int64_t attn = 4 * c->hidden_size;
    return attn > c->intermediate_size ? attn : c->intermediate_size;
}

int vision_state_create(const vision_model *m, clef_backend *be, int64_t max_patches,
                        vision_state **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision_state_create: out is NULL");
    *out = NULL;
    if (!m || !be)
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision_state_create: NULL model or backend");
    if (max_patches < 4 || max_patches > ((int64_t)1 << 26))
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision state: max_patches %lld not in [4, 2^26]",
                         (long long)max_patches);
    vision_state *s = calloc(1, sizeof *s);
    if (!s)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "vision state: out of memory");
    const clef_vision_config *c = &m->cfg;
    const int64_t N = max_patches, H = c->hidden_size, hd = m->head_dim;
    s->model = m;
    s->be = be;
    s->max_patches = N;
    s->buffers = clef_buffer_set_init(be);
    s->work_cols = work_cols(c);
    const clef_seqs shape = {.n_seqs = N, .max_len = N};
    clef_attention_args aa = {.n_q = N, .n_kv = N, .n_q_heads = c->num_heads,
                              .n_kv_heads = c->num_heads, .head_dim = hd, .ldq = 3 * H,
                              .q_head_stride = hd, .ldk = 3 * H, .k_head_stride = hd,
                              .ldv = 3 * H, .v_head_stride = hd, .ldo = H, .o_head_stride = hd,
                              .causal = 0, .seqs = &shape};
    const size_t f = sizeof(float), i32 = sizeof(int32_t), n = (size_t)N;
    struct {
        void **dst;
        size_t bytes;
    } plan[] = {
        {(void **)&s->pixels, f * n * (size_t)m->patch_dim},
        {(void **)&s->x, f * n * (size_t)H},
        {(void **)&s->xn, f * n * (size_t)H},
        {(void **)&s->work, f * n * (size_t)s->work_cols},
        {(void **)&s->out, f * (n / 4) * (size_t)c->out_hidden_size},
        {(void **)&s->rope_cos, f * n * (size_t)hd},
        {(void **)&s->rope_sin, f * n * (size_t)hd},
        {(void **)&s->pos_idx, i32 * 4 * n},
        {(void **)&s->pos_w, f * 4 * n},
        {(void **)&s->pos_segs, sizeof(clef_segment) * n},
        {(void **)&s->frame_start, i32 * (n + 1)},
        {&s->scratch, clef_attention_workspace_size(be, &aa)},
    };
    int st = CLEF_OK;
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        if (!(*plan[i].dst = clef_buffer_set_alloc(&s->buffers, plan[i].bytes ? plan[i].bytes : 64))) {
            st = clef_fail(CLEF_ERR_OUT_OF_MEMORY,
                           "out of memory planning the vision state for %lld patches (%zu bytes)",
                           (long long)N, plan[i].bytes);
            goto err;
        }
        s->bytes += plan[i].bytes;
    }
    s->host_cos = malloc(f * n * (size_t)hd);
    s->host_sin = malloc(f * n * (size_t)hd);
    s->host_idx = malloc(i32 * 4 * n);
    s->host_w = malloc(f * 4 * n);
    s->host_segs = malloc(sizeof(clef_segment) * n);
    s->host_start64 = malloc(sizeof(int64_t) * (n + 1));
    s->host_start32 = malloc(i32 * (n + 1));
    if (!s->host_cos || !s->host_sin || !s->host_idx || !s->host_w || !s->host_segs ||
        !s->host_start64 || !s->host_start32) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "vision state: out of memory");
        goto err;
    }
    *out = s;
    return CLEF_OK;
err:
    vision_state_free(s);
    return st;
}

void vision_state_free(vision_state *s) {
    if (!s)
        return;
    clef_buffer_set_release(&s->buffers);
    free(s->host_cos);
    free(s->host_sin);
    free(s->host_idx);
    free(s->host_w);
    free(s->host_segs);
    free(s->host_start64);
    free(s->host_start32);
    free(s);
}

const float *vision_state_output(const vision_state *s) { return s->out; }
int64_t vision_state_max_patches(const vision_state *s) { return s->max_patches; }
size_t vision_state_bytes(const vision_state *s) { return s->bytes; }
