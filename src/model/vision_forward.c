/*
 * vision_forward.c — the vision tower's forward, top to bottom, against the op table, with the
 * transformers line each step matches (models/qwen3_5/modeling_qwen3_5.py,
 * Qwen3_5VisionModel.forward, and vision_utils.py for the per-patch tables).
 *
 * What depends only on the grids is made on the host, in the processor's merge-block order,
 * and written to the state: the 4 bilinear taps and weights of each patch into the learned
 * position table, each patch's 2-D RoPE cos/sin row, the frame offsets of the attention.
 * The tables follow transformers' fp32 arithmetic step by step (same operations, same
 * order), so the weights and angles are the same floats.
 */
#include "model/vision_internal.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

/* Row and column (in patches) of patch k of a frame of grid_w patch columns, in merge-block
 * order: blocks of 2x2 patches row-major, the patches of a block row-major
 * (vision_utils.get_vision_position_ids / get_vision_interpolation_indices_and_weights). */
static void patch_row_col(int64_t k, int64_t grid_w, int64_t *row, int64_t *col) {
    const int64_t blocks_w = grid_w / 2;
    const int64_t in_col = k % 2, in_row = (k / 2) % 2;
    const int64_t block_col = (k / 4) % blocks_w, block_row = k / (4 * blocks_w);
    *row = block_row * 2 + in_row;
    *col = block_col * 2 + in_col;
}

/* Bilinear taps (align_corners) of target index `index` of an axis of `size` into a table
 * side of `side` (_interpolation_axis_taps_weights, mode "bilinear"): src = index * (side -
 * 1) / max(size - 1, 1) in fp32, taps floor and floor + 1 clamped to the table, weights
 * max(1 - |src - floor - offset|, 0). */
static void axis_taps(int64_t index, int64_t size, int64_t side, int64_t taps[2], float w[2]) {
    float src = (float)index * (float)(side - 1) / (float)(size - 1 > 1 ? size - 1 : 1);
    float fl = floorf(src);
    for (int o = 0; o < 2; o++) {
        int64_t t = (int64_t)fl + o;
        taps[o] = t < 0 ? 0 : t > side - 1 ? side - 1 : t;
        float d = fabsf(src - fl - (float)o);
        float wt = 1.0f - d;
        w[o] = wt > 0.0f ? wt : 0.0f;
    }
}

/* The host tables of one forward: taps, RoPE rows, frame offsets. Returns the frame count. */
static int64_t build_tables(const vision_model *m, vision_state *s, int64_t n,
                            const vision_input *in) {
    const int64_t S = m->side, hd = m->head_dim, F = hd / 4, half = hd / 2;
    int64_t r = 0, frames = 0;
    s->host_start64[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t gh = in[i].grid_h, gw = in[i].grid_w;
        for (int64_t t = 0; t < in[i].grid_t; t++) {
            for (int64_t k = 0; k < gh * gw; k++, r++) {
                int64_t row, col, th[2], tw[2];
                float wh[2], ww[2];
                patch_row_col(k, gw, &row, &col);
                /* pos_embeds = (pos_embed(interp_indices) * interp_weights[:, :, None]).sum(1) */
                axis_taps(row, gh, S, th, wh);
                axis_taps(col, gw, S, tw, ww);
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        s->host_idx[4 * r + 2 * a + b] = (int32_t)(th[a] * S + tw[b]);
                        s->host_w[4 * r + 2 * a + b] = wh[a] * ww[b];
                    }
                s->host_segs[r] = (clef_segment){.dst = (int32_t)r, .begin = (int32_t)(4 * r),
                                                 .end = (int32_t)(4 * r + 4), .count = 1,
                                                 .accumulate = 1};
                /* rotary_pos_emb(position_ids): freqs = pos * inv_freq in fp32, the row laid out
                 * [row freqs | col freqs | row freqs | col freqs] (recomposition_frequencies) */
                float *cr = s->host_cos + r * hd, *sr = s->host_sin + r * hd;
                for (int64_t j = 0; j < F; j++) {
                    /* inv_freq = 1 / theta^(arange(0, hd/2, 2) / (hd/2)) in fp32 */
                    float exponent = (float)(2 * j) / (float)half;
                    float inv_freq = 1.0f / (float)pow(m->cfg.rope_theta, (double)exponent);
                    float ph = (float)row * inv_freq, pw = (float)col * inv_freq;
                    cr[j] = cr[half + j] = cosf(ph);
                    sr[j] = sr[half + j] = sinf(ph);
                    cr[F + j] = cr[half + F + j] = cosf(pw);
                    sr[F + j] = sr[half + F + j] = sinf(pw);
                }
            }
            /* get_vision_cu_seqlens: one attention sequence per frame */
            frames++;
            s->host_start64[frames] = r;
        }
    }
    for (int64_t q = 0; q <= frames; q++)
        s->host_start32[q] = (int32_t)s->host_start64[q];
    return frames;
}

int vision_forward(const vision_model *m, vision_state *s, int64_t n, const vision_input *in) {
    if (!m || !s || !in || n <= 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision_forward: NULL argument or %lld inputs",
                         (long long)n);
    if (s->model != m)
        return clef_fail(CLEF_ERR_INVALID_ARG, "vision_forward: the state was planned for another model");
    const clef_vision_config *c = &m->cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size, M = c->out_hidden_size;
    const int64_t heads = c->num_heads, hd = m->head_dim, Pd = m->patch_dim;
    int64_t N = 0, max_frame = 0;
    for (int64_t i = 0; i < n; i++) {
        const vision_input *v = &in[i];
        if (!v->pixels || v->grid_t <= 0 || v->grid_h <= 0 || v->grid_w <= 0 || v->grid_h % 2 ||
            v->grid_w % 2)
            return clef_fail(CLEF_ERR_INVALID_ARG,
                             "vision input %lld: grid (%lld, %lld, %lld) must be positive with even "
                             "h and w, and pixels non-NULL", (long long)i, (long long)v->grid_t,
                             (long long)v->grid_h, (long long)v->grid_w);
        /* in double first: a grid from a bad caller must not overflow the count */
        const double patches = (double)N + (double)v->grid_t * (double)v->grid_h * (double)v->grid_w;
        if (patches > (double)s->max_patches)
            return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                             "the images and videos make %.0f patches, the vision tower was planned "
                             "for at most %lld", patches, (long long)s->max_patches);
        const int64_t frame = v->grid_h * v->grid_w;
        N += v->grid_t * frame;
        if (frame > max_frame)
            max_frame = frame;
    }
    clef_backend *be = s->be;
    const vision_weights *w = &m->w;
    const float eps = 1e-6f; /* nn.LayerNorm(..., eps=1e-6) in the blocks and the merger */
    const int64_t frames = build_tables(m, s, n, in);

    /* the forward's inputs on the backend: pixel rows, then the per-patch tables */
    int st = CLEF_OK;
    int64_t r0 = 0;
    for (int64_t i = 0; st == CLEF_OK && i < n; i++) {
        const int64_t rows = in[i].grid_t * in[i].grid_h * in[i].grid_w;
        st = clef_backend_write(be, s->pixels + r0 * Pd, in[i].pixels,
                                sizeof(float) * (size_t)(rows * Pd));
        r0 += rows;
    }
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->pos_idx, s->host_idx, sizeof(int32_t) * (size_t)(4 * N));
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->pos_w, s->host_w, sizeof(float) * (size_t)(4 * N));
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->pos_segs, s->host_segs, sizeof(clef_segment) * (size_t)N);
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->rope_cos, s->host_cos, sizeof(float) * (size_t)(N * hd));
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->rope_sin, s->host_sin, sizeof(float) * (size_t)(N * hd));
    if (st == CLEF_OK)
        st = clef_backend_write(be, s->frame_start, s->host_start32,
                                sizeof(int32_t) * (size_t)(frames + 1));
    if (st != CLEF_OK)
        return st;
    const clef_seqs seqs = {.n_seqs = frames, .start = s->host_start64,
                            .start_dev = s->frame_start, .max_len = max_frame};

    /* hidden_states = patch_embed(pixel_values)  (Conv3d, stride = kernel: one matmul + bias) */
    clef_matmul(be, N, s->pixels, Pd, &w->patch, w->patch_b, s->x, H, 0);
    /* hidden_states += (pos_embed(interp_indices) * interp_weights[..., None]).sum(1) */
    clef_get_rows(be, &w->pos, 4 * N, s->pos_idx, s->work, H);
    clef_segment_sum(be, N, H, s->pos_segs, s->work, H, s->pos_w, s->x, H);

    float *qkv = s->work;          /* (N, 3H): per patch [q | k | v], each head-major */
    float *o = s->work + N * 3 * H; /* (N, H) */
    for (int64_t b = 0; b < c->depth; b++) {
        const vision_block *B = &w->blocks[b];
        /* hidden_states += attn(norm1(hidden_states)) */
        clef_layernorm(be, N, H, s->x, H, B->norm1_w, B->norm1_b, eps, s->xn, H);
        /* q, k, v = qkv(x).reshape(N, 3, heads, hd) */
        clef_matmul(be, N, s->xn, H, &B->qkv, B->qkv_b, qkv, 3 * H, 0);
        /* apply_rotary_pos_emb_vision(q, k, cos, sin): the whole head rotates */
        clef_rope_apply(be, N, heads, qkv, 3 * H, hd, hd, s->rope_cos, s->rope_sin);
        clef_rope_apply(be, N, heads, qkv + H, 3 * H, hd, hd, s->rope_cos, s->rope_sin);
        /* non-causal softmax attention within each frame (cu_seqlens), scale hd^-1/2 */
        clef_attention_args aa = {
            .n_q = N, .n_kv = N, .n_q_heads = heads, .n_kv_heads = heads, .head_dim = hd,
            .q = qkv, .ldq = 3 * H, .q_head_stride = hd,
            .k = qkv + H, .ldk = 3 * H, .k_head_stride = hd,
            .v = qkv + 2 * H, .ldv = 3 * H, .v_head_stride = hd,
            .o = o, .ldo = H, .o_head_stride = hd,
            .scale = 1.0f / sqrtf((float)hd), .causal = 0, .seqs = &seqs,
        };
        clef_attention(be, &aa, s->scratch);
        clef_matmul(be, N, o, H, &B->proj, B->proj_b, s->x, H, 1);
        /* hidden_states += mlp(norm2(hidden_states)): fc2(act(fc1(x))) */
        clef_layernorm(be, N, H, s->x, H, B->norm2_w, B->norm2_b, eps, s->xn, H);
        clef_matmul(be, N, s->xn, H, &B->fc1, B->fc1_b, s->work, I, 0);
        clef_unary(be, c->gelu_tanh ? CLEF_UNARY_GELU_TANH : CLEF_UNARY_GELU_ERF, N * I, s->work,
                   s->work);
        clef_matmul(be, N, s->work, I, &B->fc2, B->fc2_b, s->x, H, 1);
    }
    /* merger: norm(x) per patch, then view(-1, 4H): a 2x2 block is 4 consecutive rows */
    const int64_t Nm = N / 4;
    clef_layernorm(be, N, H, s->x, H, w->merger_norm_w, w->merger_norm_b, eps, s->xn, H);
    /* linear_fc2(GELU(linear_fc1(x)))  (exact GELU) */
    clef_matmul(be, Nm, s->xn, 4 * H, &w->merger_fc1, w->merger_fc1_b, s->work, 4 * H, 0);
    clef_unary(be, CLEF_UNARY_GELU_ERF, Nm * 4 * H, s->work, s->work);
    clef_matmul(be, Nm, s->work, 4 * H, &w->merger_fc2, w->merger_fc2_b, s->out, M, 0);
    s->n_out = Nm;
    return clef_backend_synchronize(be);
}
