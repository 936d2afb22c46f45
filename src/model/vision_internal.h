/*
 * vision_internal.h — the vision tower's Config, Weights and State, shared by vision_load.c
 * (validation, placement), vision_state.c (planning) and vision_forward.c (the math).
 * Shape comments use: H hidden, I MLP, hd head dim, Pd = C*Tp*P*P pixel row, M out (text
 * width), S = side of the learned position table, N patch rows of one forward (all inputs).
 */
#ifndef CLEF_MODEL_VISION_INTERNAL_H
#define CLEF_MODEL_VISION_INTERNAL_H

#include "backend/buffer_set.h"
#include "model/vision.h"

typedef struct vision_block {
    float *norm1_w, *norm1_b;   /* (H) LayerNorm */
    float *norm2_w, *norm2_b;   /* (H) */
    clef_matrix qkv;            /* (3H, H): rows q, k, v, each head-major */
    float *qkv_b;               /* (3H) */
    clef_matrix proj;           /* (H, H) */
    float *proj_b;              /* (H) */
    clef_matrix fc1;            /* (I, H) */
    float *fc1_b;               /* (I) */
    clef_matrix fc2;            /* (H, I) */
    float *fc2_b;               /* (H) */
} vision_block;

typedef struct vision_weights {
    clef_matrix patch;          /* (H, Pd): the Conv3d kernel [H, C, Tp, P, P] flattened */
    float *patch_b;             /* (H) */
    clef_matrix pos;            /* (S*S, H) learned position table, rows in raster order */
    vision_block *blocks;       /* (depth) */
    float *merger_norm_w, *merger_norm_b; /* (H) */
    clef_matrix merger_fc1;     /* (4H, 4H) */
    float *merger_fc1_b;        /* (4H) */
    clef_matrix merger_fc2;     /* (M, 4H) */
    float *merger_fc2_b;        /* (M) */
} vision_weights;

struct vision_model {
    clef_vision_config cfg;
    clef_backend *be;           /* where the weights live */
    vision_weights w;
    int64_t head_dim;           /* hd = H / heads, a multiple of 4 */
    int64_t patch_dim;          /* Pd */
    int64_t side;               /* S */
    clef_buffer_set buffers;
    size_t weight_bytes;
};

/* A State: every buffer one forward writes, planned for N patch rows. */
struct vision_state {
    const vision_model *model;
    clef_backend *be;
    int64_t max_patches;        /* N */
    clef_buffer_set buffers;
    float *pixels;              /* (N, Pd) the forward's pixel rows */
    float *x;                   /* (N, H) residual stream */
    float *xn;                  /* (N, H) normed input of attention / MLP / merger */
    float *work;                /* (N, work_cols): qkv | o, the MLP's fc1, the 4 position taps
                                 * per patch, the merger's fc1 */
    int64_t work_cols;
    float *out;                 /* (N/4, M) merged features: the output */
    float *rope_cos, *rope_sin; /* (N, hd) per patch */
    int32_t *pos_idx;           /* (4N) table rows of the 4 bilinear taps of each patch */
    float *pos_w;               /* (4N) their weights */
    clef_segment *pos_segs;     /* (N) patch r sums taps [4r, 4r+4) into x[r] */
    int32_t *frame_start;       /* (N + 1) frame offsets for the attention (clef_seqs) */
    void *scratch;              /* attention workspace */
    /* host staging of the tables above */
    float *host_cos, *host_sin;
    int32_t *host_idx;
    float *host_w;
    clef_segment *host_segs;
    int64_t *host_start64;
    int32_t *host_start32;
    size_t bytes;
    int64_t n_out;              /* merged rows of the last forward */
};

#endif /* CLEF_MODEL_VISION_INTERNAL_H */
