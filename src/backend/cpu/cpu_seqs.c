/*
 * cpu_seqs.c — packed sequences for the CPU backend's token-mixing ops (conv1d, gated delta
 * rule, attention): the op-table entries take a clef_seqs and run the single-sequence kernel
 * of cpu_conv.c / cpu_gdn.c / cpu_attention.c once per sequence on its rows, so no sequence
 * sees another and every sequence gets the bits it gets alone. The kernels themselves stay
 * single-sequence (each already uses every thread inside one call).
 */
#include "backend/cpu/cpu_internal.h"

void cpu_conv1d_causal_silu_seqs(clef_backend *be, int64_t T, int64_t C, int64_t K,
                                 const float *x, int64_t ldx, const float *w, const float *prev,
                                 float *y, int64_t ldy, const clef_seqs *seqs) {
    if (!seqs) {
        cpu_conv1d_causal_silu(be, T, C, K, x, ldx, w, prev, y, ldy);
        return;
    }
    for (int64_t s = 0; s < seqs->n_seqs; s++) {
        const int64_t r0 = seqs->start[s], n = seqs->start[s + 1] - r0;
        if (n > 0)
            cpu_conv1d_causal_silu(be, n, C, K, x + r0 * ldx, ldx, w,
                                   prev ? prev + s * (K - 1) * C : NULL, y + r0 * ldy, ldy);
    }
}

void cpu_gdn_seqs(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    if (!args->seqs) {
        cpu_gdn(be, args, scratch);
        return;
    }
    const clef_seqs *seqs = args->seqs;
    const int64_t Hv = args->n_v_heads;
    for (int64_t s = 0; s < seqs->n_seqs; s++) {
        const int64_t r0 = seqs->start[s], n = seqs->start[s + 1] - r0;
        if (n == 0)
            continue;
        clef_gdn_args one = *args;
        one.seqs = NULL;
        one.T = n;
        one.q = args->q + r0 * args->ldq;
        one.k = args->k + r0 * args->ldk;
        one.v = args->v + r0 * args->ldv;
        one.g = args->g + r0 * Hv;
        one.beta = args->beta + r0 * Hv;
        one.o = args->o + r0 * args->ldo;
        one.state = args->state ? args->state + s * Hv * args->dk * args->dv : NULL;
        cpu_gdn(be, &one, scratch);
    }
}

size_t cpu_gdn_workspace_size_seqs(clef_backend *be, const clef_gdn_args *args) {
    clef_gdn_args one = *args;
    if (args->seqs) {
        one.T = args->seqs->max_len;
        one.seqs = NULL;
    }
    return cpu_gdn_workspace_size(be, &one);
}

void cpu_attention_seqs(clef_backend *be, const clef_attention_args *args, void *scratch) {
    if (!args->seqs) {
        cpu_attention(be, args, scratch);
        return;
    }
    const clef_seqs *seqs = args->seqs;
    for (int64_t s = 0; s < seqs->n_seqs; s++) {
        const int64_t r0 = seqs->start[s], n = seqs->start[s + 1] - r0;
        if (n == 0)
            continue;
        clef_attention_args one = *args;
        one.seqs = NULL;
        one.n_q = one.n_kv = n;
        one.q = args->q + r0 * args->ldq;
        one.k = args->k + r0 * args->ldk;
        one.v = args->v + r0 * args->ldv;
        one.o = args->o + r0 * args->ldo;
        cpu_attention(be, &one, scratch);
    }
}

size_t cpu_attention_workspace_size_seqs(clef_backend *be, const clef_attention_args *args) {
    clef_attention_args one = *args;
    if (args->seqs) {
        one.n_q = one.n_kv = args->seqs->max_len;
        one.seqs = NULL;
    }
    return cpu_attention_workspace_size(be, &one);
}
