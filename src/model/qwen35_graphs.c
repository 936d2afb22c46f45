/*
 * qwen35_graphs.c — the batch layouts a RunState has run, each with its recording (backend.h's
 * capture_begin; qwen35_forward.c records and launches). A recording replays the same
 * launches over the same buffers, so it is valid only for forwards that make the same calls:
 * the same sequence offsets (they set every op's row count, the mixer groups and the
 * token-mixing ops' launch shapes) and the same given embeddings (their buffer is an
 * operand, their count a row count). Token ids, positions and the embeddings' target rows
 * are data the host writes before the launch. The key is the exact layout: no padding to
 * buckets, so a row's result is the direct forward's, bit for bit.
 */
#include "model/qwen35_internal.h"

#include <stdlib.h>
#include <string.h>

void qwen35_layout_clear(qwen35_state *s, qwen35_layout *l) {
    clef_backend_graph_free(s->be, l->graph);
    free(l->seq_start);
    memset(l, 0, sizeof *l);
}

static int same_layout(const qwen35_layout *l, int64_t n_seqs, const int64_t *seq_start, int64_t n_embeds,
                       const float *features) {
    return l->n_seqs == n_seqs && l->n_embeds == n_embeds && l->features == features &&
           !memcmp(l->seq_start, seq_start, sizeof(int64_t) * (size_t)(n_seqs + 1));
}

qwen35_layout *qwen35_layout_of(qwen35_state *s, int64_t n_seqs, const int64_t *seq_start,
                                const qwen35_embeds *embeds) {
    if (s->params.no_graphs || !clef_backend_can_capture(s->be))
        return NULL;
    const int64_t n_embeds = embeds && embeds->n > 0 ? embeds->n : 0;
    const float *features = n_embeds ? embeds->features : NULL;
    qwen35_layout *slot = &s->layouts[0];
    s->graph_clock++;
    for (int i = 0; i < QWEN35_GRAPHS; i++) {
        qwen35_layout *l = &s->layouts[i];
        if (l->n_seqs && same_layout(l, n_seqs, seq_start, n_embeds, features)) {
            l->last_used = s->graph_clock;
            return l;
        }
        /* a free slot, else the least recently used */
        if (slot->n_seqs && (!l->n_seqs || l->last_used < slot->last_used))
            slot = l;
    }
    qwen35_layout_clear(s, slot);
    if (!(slot->seq_start = malloc(sizeof(int64_t) * (size_t)(n_seqs + 1))))
        return NULL;
    memcpy(slot->seq_start, seq_start, sizeof(int64_t) * (size_t)(n_seqs + 1));
    slot->n_seqs = n_seqs, slot->n_embeds = n_embeds, slot->features = features;
    slot->last_used = s->graph_clock;
    return slot;
}

void qwen35_state_graph_counts(const qwen35_state *s, int64_t *recorded, int64_t *replayed, int64_t *held) {
    int64_t n = 0;
    for (int i = 0; i < QWEN35_GRAPHS; i++)
        n += s->layouts[i].graph != NULL;
    if (recorded)
        *recorded = s->graphs_recorded;
    if (replayed)
        *replayed = s->graphs_replayed;
    if (held)
        *held = n;
}
