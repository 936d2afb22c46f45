/*
 * test_packed_ops.c — the token-mixing ops over packed sequences (clef_seqs) and backend
 * forks. For the causal conv1d + SiLU, the gated delta rule (chunked and recurrent, with and
 * without carried state) and attention (causal and not), one call over several sequences
 * packed back to back must give, bit for bit, what one call per sequence gives (the
 * single-sequence ops are held to float64 references in test_cpu_ops.c). The packed calls run
 * on forks of the backend, two of them at the same time on two threads, so the test also shows
 * that forks share the parent's memory and run concurrently without disturbing each other;
 * a fork of the guarded CPU backend (host access to buffers faults) shares its parent's arena.
 */
#include "backend/backend.h"
#include "clef.h"
#include "test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *rand_buf(clef_backend *be, size_t n, float amp) {
    float *p = clef_backend_alloc(be, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * amp;
    return p;
}

/* Sequence lengths around the GDN chunk (64) and attention block (64) edges, and a 1-row one. */
static const int64_t lens[] = {1, 70, 5, 129, 64, 33};
#define N_SEQS ((int64_t)(sizeof lens / sizeof lens[0]))

typedef struct packed {
    int64_t start[N_SEQS + 1];
    int32_t *start_dev;
    clef_seqs seqs;
    int64_t T;
} packed;

static void make_packed(clef_backend *be, packed *p) {
    p->start[0] = 0;
    int64_t max_len = 0;
    for (int64_t s = 0; s < N_SEQS; s++) {
        p->start[s + 1] = p->start[s] + lens[s];
        max_len = lens[s] > max_len ? lens[s] : max_len;
    }
    p->T = p->start[N_SEQS];
    p->start_dev = clef_backend_alloc(be, sizeof(int32_t) * (N_SEQS + 1));
    for (int64_t s = 0; s <= N_SEQS; s++)
        p->start_dev[s] = (int32_t)p->start[s];
    p->seqs = (clef_seqs){.n_seqs = N_SEQS, .start = p->start, .start_dev = p->start_dev, .max_len = max_len};
}

/* ---- the three ops, packed (one call) and alone (one call per sequence) ---- */

typedef struct conv_case {
    int64_t C, K, ld;
    float *x, *w, *prev, *y;
} conv_case;

static void conv_run(clef_backend *be, const conv_case *c, const packed *p, int packed_call, int with_prev) {
    if (packed_call) {
        clef_conv1d_causal_silu(be, p->T, c->C, c->K, c->x, c->ld, c->w, with_prev ? c->prev : NULL, c->y, c->C, &p->seqs);
        return;
    }
    for (int64_t s = 0; s < N_SEQS; s++)
        clef_conv1d_causal_silu(be, lens[s], c->C, c->K, c->x + p->start[s] * c->ld, c->ld, c->w,
                                with_prev ? c->prev + s * (c->K - 1) * c->C : NULL, c->y + p->start[s] * c->C, c->C, NULL);
}

typedef struct gdn_case {
    clef_gdn_args a;    /* over all rows, seqs unset */
    float *state0;      /* [N_SEQS, Hv, dk, dv] */
    float *state;       /* working copy */
    void *scratch;
} gdn_case;

static void gdn_run(clef_backend *be, gdn_case *g, const packed *p, int packed_call, int with_state) {
    const size_t per_seq = (size_t)(g->a.n_v_heads * g->a.dk * g->a.dv);
    if (with_state)
        memcpy(g->state, g->state0, sizeof(float) * per_seq * N_SEQS);
    if (packed_call) {
        clef_gdn_args a = g->a;
        a.seqs = &p->seqs;
        a.state = with_state ? g->state : NULL;
        clef_gdn(be, &a, g->scratch);
        return;
    }
    for (int64_t s = 0; s < N_SEQS; s++) {
        const int64_t r0 = p->start[s];
        clef_gdn_args a = g->a;
        a.T = lens[s];
        a.q += r0 * a.ldq;
        a.k += r0 * a.ldk;
        a.v += r0 * a.ldv;
        a.g += r0 * a.n_v_heads;
        a.beta += r0 * a.n_v_heads;
        a.o += r0 * a.ldo;
        a.state = with_state ? g->state + (size_t)s * per_seq : NULL;
        clef_gdn(be, &a, g->scratch);
    }
}

typedef struct attn_case {
    clef_attention_args a; /* over all rows, seqs unset */
    void *scratch;
} attn_case;

static void attn_run(clef_backend *be, attn_case *c, const packed *p, int packed_call) {
    if (packed_call) {
        clef_attention_args a = c->a;
        a.seqs = &p->seqs;
        clef_attention(be, &a, c->scratch);
        return;
    }
    for (int64_t s = 0; s < N_SEQS; s++) {
        const int64_t r0 = p->start[s];
        clef_attention_args a = c->a;
        a.n_q = a.n_kv = lens[s];
        a.q += r0 * a.ldq;
        a.k += r0 * a.ldk;
        a.v += r0 * a.ldv;
        a.o += r0 * a.ldo;
        clef_attention(be, &a, c->scratch);
    }
}

/* ---- two forks at once ---- */

typedef struct job {
    clef_backend *be;
    const packed *p;
    gdn_case *g;
    attn_case *att;
} job;

static void *run_gdn(void *arg) {
    job *j = arg;
    gdn_run(j->be, j->g, j->p, 1, 1);
    return NULL;
}

static void *run_attn(void *arg) {
    job *j = arg;
    attn_run(j->be, j->att, j->p, 1);
    return NULL;
}

int main(void) {
    clef_backend_params bp = clef_backend_default_params();
    bp.n_threads = 2;
    clef_backend *be = NULL, *fork1 = NULL, *fork2 = NULL, *none = NULL;
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &be), CLEF_OK);
    CHECK_EQ_INT(clef_backend_fork(be, &fork1), CLEF_OK);
    CHECK_EQ_INT(clef_backend_fork(be, &fork2), CLEF_OK);
    CHECK_EQ_INT(clef_backend_fork(NULL, &none), CLEF_ERR_INVALID_ARG);
    CHECK(none == NULL);
    if (!be || !fork1 || !fork2)
        return test_summary();
    packed p;
    make_packed(be, &p);
    const int64_t T = p.T;

    /* conv: x in a wider buffer (ld > C), carried rows per sequence or none */
    conv_case cv = {.C = 24, .K = 4, .ld = 29};
    cv.x = rand_buf(be, (size_t)(T * cv.ld), 1.0f);
    cv.w = rand_buf(be, (size_t)(cv.C * cv.K), 1.0f);
    cv.prev = rand_buf(be, (size_t)(N_SEQS * (cv.K - 1) * cv.C), 1.0f);
    cv.y = clef_backend_alloc(be, sizeof(float) * (size_t)(T * cv.C));
    float *conv_alone = malloc(sizeof(float) * (size_t)(T * cv.C));
    for (int with_prev = 0; with_prev < 2; with_prev++) {
        conv_run(be, &cv, &p, 0, with_prev);
        memcpy(conv_alone, cv.y, sizeof(float) * (size_t)(T * cv.C));
        memset(cv.y, 0, sizeof(float) * (size_t)(T * cv.C));
        conv_run(fork1, &cv, &p, 1, with_prev);
        CHECK_MSG(!memcmp(cv.y, conv_alone, sizeof(float) * (size_t)(T * cv.C)),
                  "conv1d (prev %d): packed differs from per sequence", with_prev);
    }

    /* gated delta rule: q|k|v interleaved in one buffer, GQA 2 -> 4 heads */
    const int64_t Hk = 2, Hv = 4, dk = 16, dv = 8, ldqkv = 2 * Hk * dk + Hv * dv + 3;
    gdn_case g = {0};
    float *qkv = rand_buf(be, (size_t)(T * ldqkv), 1.0f);
    float *gates = clef_backend_alloc(be, sizeof(float) * (size_t)(T * Hv));
    float *beta = clef_backend_alloc(be, sizeof(float) * (size_t)(T * Hv));
    for (int64_t i = 0; i < T * Hv; i++) {
        gates[i] = -0.5f * (frand() + 1.0f); /* log decay <= 0 */
        beta[i] = 0.5f * (frand() + 1.0f);   /* in [0, 1) */
    }
    float *gdn_o = clef_backend_alloc(be, sizeof(float) * (size_t)(T * Hv * dv));
    g.a = (clef_gdn_args){.T = T, .n_k_heads = Hk, .n_v_heads = Hv, .dk = dk, .dv = dv,
                          .q = qkv, .ldq = ldqkv, .k = qkv + Hk * dk, .ldk = ldqkv,
                          .v = qkv + 2 * Hk * dk, .ldv = ldqkv, .g = gates, .beta = beta,
                          .o = gdn_o, .ldo = Hv * dv, .l2norm_qk = 1};
    const size_t n_state = (size_t)(N_SEQS * Hv * dk * dv);
    g.state0 = rand_buf(be, n_state, 0.5f);
    g.state = clef_backend_alloc(be, sizeof(float) * n_state);
    float *gdn_alone = malloc(sizeof(float) * (size_t)(T * Hv * dv));
    float *state_alone = malloc(sizeof(float) * n_state);
    for (int mode = 0; mode < 2; mode++)
        for (int with_state = 0; with_state < 2; with_state++) {
            g.a.mode = mode ? CLEF_GDN_RECURRENT : CLEF_GDN_CHUNKED;
            clef_gdn_args shape = g.a;
            shape.seqs = &p.seqs;
            free(g.scratch);
            g.scratch = malloc(clef_gdn_workspace_size(be, &shape));
            gdn_run(be, &g, &p, 0, with_state);
            memcpy(gdn_alone, gdn_o, sizeof(float) * (size_t)(T * Hv * dv));
            memcpy(state_alone, g.state, sizeof(float) * n_state);
            memset(gdn_o, 0, sizeof(float) * (size_t)(T * Hv * dv));
            gdn_run(fork1, &g, &p, 1, with_state);
            CHECK_MSG(!memcmp(gdn_o, gdn_alone, sizeof(float) * (size_t)(T * Hv * dv)),
                      "gdn (%s, state %d): packed output differs from per sequence",
                      mode ? "recurrent" : "chunked", with_state);
            if (with_state)
                CHECK_MSG(!memcmp(g.state, state_alone, sizeof(float) * n_state),
                          "gdn (%s): packed final states differ from per sequence", mode ? "recurrent" : "chunked");
        }

    /* attention: [q | gate] interleaved queries as the backbone lays them out, GQA 4 -> 2 */
    const int64_t Hq = 4, Hkv = 2, d = 16;
    float *q = rand_buf(be, (size_t)(T * Hq * 2 * d), 1.0f);
    float *kv = rand_buf(be, (size_t)(T * 2 * Hkv * d), 1.0f);
    float *attn_o = clef_backend_alloc(be, sizeof(float) * (size_t)(T * Hq * d));
    attn_case at = {.a = {.n_q = T, .n_kv = T, .n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = d,
                          .q = q, .ldq = Hq * 2 * d, .q_head_stride = 2 * d,
                          .k = kv, .ldk = 2 * Hkv * d, .k_head_stride = d,
                          .v = kv + Hkv * d, .ldv = 2 * Hkv * d, .v_head_stride = d,
                          .o = attn_o, .ldo = Hq * d, .o_head_stride = d, .scale = 0.25f}};
    float *attn_alone = malloc(sizeof(float) * (size_t)(T * Hq * d));
    for (int causal = 0; causal < 2; causal++) {
        at.a.causal = causal;
        clef_attention_args shape = at.a;
        shape.seqs = &p.seqs;
        free(at.scratch);
        at.scratch = malloc(clef_attention_workspace_size(be, &shape));
        attn_run(be, &at, &p, 0);
        memcpy(attn_alone, attn_o, sizeof(float) * (size_t)(T * Hq * d));
        memset(attn_o, 0, sizeof(float) * (size_t)(T * Hq * d));
        attn_run(fork1, &at, &p, 1);
        CHECK_MSG(!memcmp(attn_o, attn_alone, sizeof(float) * (size_t)(T * Hq * d)),
                  "attention (causal %d): packed differs from per sequence", causal);
    }

    /* two forks at once: the delta rule on one thread, attention on another (each with its own
     * scratch, as two contexts have), same bits as alone */
    memset(gdn_o, 0, sizeof(float) * (size_t)(T * Hv * dv));
    memset(attn_o, 0, sizeof(float) * (size_t)(T * Hq * d));
    job j1 = {.be = fork1, .p = &p, .g = &g}, j2 = {.be = fork2, .p = &p, .att = &at};
    pthread_t t1, t2;
    CHECK_EQ_INT(pthread_create(&t1, NULL, run_gdn, &j1), 0);
    CHECK_EQ_INT(pthread_create(&t2, NULL, run_attn, &j2), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_MSG(!memcmp(gdn_o, gdn_alone, sizeof(float) * (size_t)(T * Hv * dv)),
              "gdn on fork 1 next to attention on fork 2 differs from alone");
    CHECK_MSG(!memcmp(attn_o, attn_alone, sizeof(float) * (size_t)(T * Hq * d)),
              "attention on fork 2 next to gdn on fork 1 differs from alone");

    /* a fork of the guarded CPU backend (buffers the host cannot touch) shares its parent's
     * arena: data written through the parent, a packed op on the fork, read back through the
     * fork, gives the same bits */
    {
        clef_backend_params gp = bp;
        gp.guard_host_access = 1;
        gp.guard_arena_bytes = (size_t)64 << 20;
        clef_backend *gbe = NULL, *gfork = NULL;
        CHECK_EQ_INT(clef_backend_cpu_create(&gp, &gbe), CLEF_OK);
        CHECK_EQ_INT(clef_backend_fork(gbe, &gfork), CLEF_OK);
        if (gbe && gfork) {
            CHECK(gfork->host_visible == 0 && gfork->ops == gbe->ops);
            const size_t xb = sizeof(float) * (size_t)(T * cv.ld), wb = sizeof(float) * (size_t)(cv.C * cv.K);
            const size_t yb = sizeof(float) * (size_t)(T * cv.C), sb = sizeof(int32_t) * (N_SEQS + 1);
            float *gx = clef_backend_alloc(gbe, xb), *gw = clef_backend_alloc(gbe, wb);
            float *gy = clef_backend_alloc(gbe, yb);
            int32_t *gs = clef_backend_alloc(gbe, sb);
            CHECK_EQ_INT(clef_backend_write(gbe, gx, cv.x, xb), CLEF_OK);
            CHECK_EQ_INT(clef_backend_write(gbe, gw, cv.w, wb), CLEF_OK);
            CHECK_EQ_INT(clef_backend_write(gbe, gs, p.start_dev, sb), CLEF_OK);
            clef_seqs gseqs = p.seqs;
            gseqs.start_dev = gs;
            clef_conv1d_causal_silu(gfork, T, cv.C, cv.K, gx, cv.ld, gw, NULL, gy, cv.C, &gseqs);
            CHECK_EQ_INT(clef_backend_synchronize(gfork), CLEF_OK);
            float *back = malloc(yb);
            CHECK_EQ_INT(clef_backend_read(gfork, back, gy, yb), CLEF_OK);
            conv_run(be, &cv, &p, 0, 0);
            CHECK_MSG(!memcmp(back, cv.y, yb), "conv1d packed on a guarded fork differs");
            free(back);
            clef_backend_free(gfork);
            clef_backend_release(gbe, gx), clef_backend_release(gbe, gw);
            clef_backend_release(gbe, gy), clef_backend_release(gbe, gs);
        }
        clef_backend_free(gbe);
    }

    free(conv_alone);
    free(gdn_alone);
    free(state_alone);
    free(attn_alone);
    free(g.scratch);
    free(at.scratch);
    /* buffers allocated through the parent are released through it, after the forks */
    clef_backend_free(fork1);
    clef_backend_free(fork2);
    void *bufs[] = {p.start_dev, cv.x, cv.w, cv.prev, cv.y, qkv, gates, beta, gdn_o, g.state0,
                    g.state, q, kv, attn_o};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        clef_backend_release(be, bufs[i]);
    clef_backend_free(be);
    return test_summary();
}
