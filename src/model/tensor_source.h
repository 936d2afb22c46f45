/*
 * tensor_source.h — where a model's loader finds its weights: a tensor by engine name
 * ("text.layers.0.mlp.up_proj.weight", "head.field_norm.weight", see release.h) and a read of
 * its bytes. The backbone and the joint head load through this one interface; a release
 * provides it (clef_tensor_source_of_release), tests provide tables of their own (oracle
 * fixtures, or a release with one tensor hidden or reshaped to test a refusal).
 */
#ifndef CLEF_MODEL_TENSOR_SOURCE_H
#define CLEF_MODEL_TENSOR_SOURCE_H

#include "release/release.h"

typedef struct clef_tensor_source {
    void *ctx;
    /* The tensor called name, or NULL when there is none. */
    const clef_tensor_info *(*find)(void *ctx, const char *name);
    /* Read exactly t->n_bytes of t into dst; a clef_status. */
    int (*read)(void *ctx, const clef_tensor_info *t, void *dst);
    /* Optional: read bytes [offset, offset + n) of t into dst (within t->n_bytes); a
     * clef_status. With it the weight loader stages a big tensor through a bounded host
     * buffer; without it (NULL) the loader stages the whole tensor at once. */
    int (*read_range)(void *ctx, const clef_tensor_info *t, uint64_t offset, uint64_t n, void *dst);
} clef_tensor_source;

/* read_range for any source whose read honours t->offset and t->n_bytes (a release's
 * tensors): reads a copy of t narrowed to the range. */
int clef_tensor_source_read_range_by_copy(int (*read)(void *ctx, const clef_tensor_info *t, void *dst),
                                          void *ctx, const clef_tensor_info *t, uint64_t offset,
                                          uint64_t n, void *dst);

/* The tensors of an opened release (clef_release_find / clef_release_read). rel must outlive
 * every use of the returned source. */
clef_tensor_source clef_tensor_source_of_release(const clef_release *rel);

#endif /* CLEF_MODEL_TENSOR_SOURCE_H */
