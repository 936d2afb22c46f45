/*
 * qwen35_internal.h — the Qwen3.5 text model's Config, Weights and RunState, shared by
 * qwen35_load.c (validation, placement), qwen35_state.c (planning) and qwen35_forward.c (the
 * math).
 * Shape comments use: D hidden, F MLP, V vocab, Hq/Hkv/d attention heads and head dim,
 * Hk/Hv/dk/dv GDN heads and dims, K = Hk*dk, Vd = Hv*dv, Cc = 2K + Vd, Kc conv kernel,
 * N tokens of one forward (all sequences), Tm longest sequence, rot rotary dims.
 */
#ifndef CLEF_MODEL_QWEN35_INTERNAL_H
#define CLEF_MODEL_QWEN35_INTERNAL_H

#include "backend/buffer_set.h"
#include "model/qwen35.h"

typedef struct qwen35_layer {
    clef_layer_type type;
    float *input_norm;          /* (D) fp32, zero-centred (1 + w) */
    float *post_norm;           /* (D) */
    clef_matrix mlp_gate;       /* (F, D) */
    clef_matrix mlp_up;         /* (F, D) */
    clef_matrix mlp_down;       /* (D, F) */
    /* Gated DeltaNet (linear_attn.) */
    clef_matrix in_qkv;         /* (Cc, D): rows q, k, v, each head-major */
    clef_matrix in_z;           /* (Vd, D) */
    clef_matrix in_b;           /* (Hv, D) */
    clef_matrix in_a;           /* (Hv, D) */
    float *conv_w;              /* (Cc, Kc) */
    float *dt_bias;             /* (Hv) */
    float *a_log;               /* (Hv) */
    float *gdn_norm;            /* (dv) plain weight */
    clef_matrix out_proj;       /* (D, Vd) */
    /* gated full attention (self_attn.) */
    clef_matrix q_proj;         /* (Hq*2d, D): per head [query d | gate d] */
    clef_matrix k_proj;         /* (Hkv*d, D) */
    clef_matrix v_proj;         /* (Hkv*d, D) */
    clef_matrix o_proj;         /* (D, Hq*d) */
    float *q_norm;              /* (d) zero-centred */
    float *k_norm;              /* (d) zero-centred */
} qwen35_layer;

typedef struct qwen35_weights {
    clef_matrix embed;          /* (V, D) */
    float *final_norm;          /* (D) zero-centred */
    qwen35_layer *layers;       /* (n_layers) */
} qwen35_weights;

/* A run of whole sequences the token mixers take in one call: rows [r0, r0 + n) of the
 * batch; seqs' offsets count from r0. */
typedef struct qwen35_group {
    int64_t r0, n;
    clef_seqs seqs;
} qwen35_group;

/* A batch layout the state has run (qwen35_forward.c): the key a recording is replayed for
 * (sequence offsets, given embeddings' buffer and count) and what is known about it. */
typedef struct qwen35_layout {
    int64_t n_seqs;             /* 0: a free slot */
    int64_t *seq_start;         /* (n_seqs + 1) */
    int64_t n_embeds;
    const float *features;
    int direct_runs;            /* forwards of it that ran their ops directly */
    int failures;               /* recordings that failed (QWEN35_GRAPH_TRIES: stop trying) */
    clef_graph *graph;          /* its recording, or NULL */
    uint64_t last_used;         /* s->graph_clock at its last forward (least recently used goes) */
} qwen35_layout;

/* Layouts one state keeps recordings for, and the failed recordings after which a layout
 * runs directly for good. */
#define QWEN35_GRAPHS 16
#define QWEN35_GRAPH_TRIES 2

/* qwen35_graphs.c: the layout of a forward (seq_start of n_seqs sequences, embeds NULL or
 * given), found or made (the least recently used slot gives way, its recording freed);
 * NULL when recordings are off for s or the host is out of memory. */
qwen35_layout *qwen35_layout_of(qwen35_state *s, int64_t n_seqs, const int64_t *seq_start,
                                const qwen35_embeds *embeds);
/* Forget layout l (frees its recording). */
void qwen35_layout_clear(qwen35_state *s, qwen35_layout *l);

/* A RunState: every buffer one forward writes, planned at creation for (N, Tm). */
struct qwen35_state {
    const qwen35_model *model;  /* the weights it runs (read-only) */
    clef_backend *be;           /* the backend (fork) its ops run on */
    qwen35_params params;       /* max_tokens (N), max_seq_len (Tm), gdn_mode */
    clef_buffer_set buffers;    /* every backend buffer below */
    int32_t *ids;               /* (N) token ids of the forward */
    int32_t *pos;               /* (3, N) T/H/W positions of the rows */
    int32_t *seq_start;         /* (2N) each mixer group's sequence offsets from its first row,
                                   back to back, for device kernels (clef_seqs) */
    float *h;                   /* (N, D) residual stream */
    float *xn;                  /* (N, D) normed input of a mixer / MLP */
    float *out;                 /* (N, D) final-norm hidden states: the output; the same buffer
                                   as xn (the final norm is the last thing written) */
    float *work;                /* the mixer's or the MLP's buffers, in turn, for at most
                                   mixer_rows rows (qwen35_work_floats) */
    int64_t mixer_rows;         /* G: the most rows one mixer call runs over (qwen35_mixer_rows) */
    float *rope_cos, *rope_sin; /* (N, rot) per row of the forward, from pos */
    void *scratch;              /* max of the GDN and attention workspaces for G rows of
                                   sequences of at most Tm, and the quantized matmuls' at G */
    int32_t *host_pos;          /* (3, N) host staging of text positions */
    int32_t *host_start;        /* (2N) host staging of the int32 group offsets (seq_start) */
    int64_t *group_start;       /* (2N) the same offsets as int64, the host's copy */
    qwen35_group *groups;       /* (N) the mixer groups of the last forward */
    clef_backend *embed_be;     /* a fork of the model's embed_be (host embedding), or NULL */
    float *embed_stage;         /* (QWEN35_EMBED_CHUNK, D) host rows gathered there, then
                                   copied to h (clef_backend_host_alloc of be: pinned) */
    clef_segment *embed_segs;   /* (N) rows replaced by given embeddings (media features) */
    clef_segment *host_segs;    /* (N) host staging of embed_segs */
    size_t bytes;               /* backend bytes of the buffers */
    int64_t n_tokens;           /* rows of the last forward */
    qwen35_layout layouts[QWEN35_GRAPHS]; /* recorded or seen batch layouts (qwen35_forward.c) */
    uint64_t graph_clock;       /* forwards that looked a layout up */
    int64_t graphs_recorded, graphs_replayed;
};

struct qwen35_model {
    clef_text_config cfg;       /* layer_types points at our own copy */
    clef_layer_type *layer_types;
    clef_backend *be;           /* where the weights live */
    qwen35_weights w;
    int64_t rot_dims;           /* rotary dims of a head (head_dim * partial_rotary_factor) */
    clef_buffer_set buffers;    /* every weight buffer we own */
    clef_backend *embed_be;     /* where w.embed lives when it is not be (host embedding) */
    clef_buffer_set embed_buffers; /* w.embed's buffer on embed_be */
    size_t weight_bytes;
};

/* Rows of a host-embedding gather copied to the device at once (qwen35_load_placed). */
#define QWEN35_EMBED_CHUNK 256

/* The MLP runs over at most this many rows at a time, so its two [rows, intermediate] buffers
 * do not grow with the batch (a 12k-token batch of the 27B would need 1.7 GB for them). */
#define QWEN35_MLP_ROWS 4096

/* The token mixers (GDN, attention) run over groups of whole sequences of at most this many
 * rows when the batch is larger (and its sequences allow: a group holds at least one whole
 * sequence), so their per-token buffers are planned for a group, not for the whole batch
 * (12,016 rows of the 27B need 1.0 GiB for them, 8,192 rows 0.7 GiB). */
#define QWEN35_MIXER_ROWS 8192

/* G, the most rows one mixer call takes for a state planned with params p: max_seq_len, or
 * QWEN35_MIXER_ROWS when the batch may be larger than both (qwen35_state.c). */
int64_t qwen35_mixer_rows(const qwen35_params *p);

/* Floats of RunState.work for mixer calls of up to G rows (and MLP chunks of at most
 * QWEN35_MLP_ROWS of them; qwen35_state.c). */
size_t qwen35_work_floats(const clef_text_config *c, int64_t G);

#endif /* CLEF_MODEL_QWEN35_INTERNAL_H */
