/*
 * tensor_source.c — a release as a clef_tensor_source (see tensor_source.h).
 */
#include "model/tensor_source.h"

#include "core/error.h"

static const clef_tensor_info *release_find(void *ctx, const char *name) {
    return clef_release_find((const clef_release *)ctx, name);
}

static int release_read(void *ctx, const clef_tensor_info *t, void *dst) {
    return clef_release_read((const clef_release *)ctx, t, dst);
}

int clef_tensor_source_read_range_by_copy(int (*read)(void *ctx, const clef_tensor_info *t, void *dst),
                                          void *ctx, const clef_tensor_info *t, uint64_t offset,
                                          uint64_t n, void *dst) {
    if (offset > t->n_bytes || n > t->n_bytes - offset)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tensor '%s': range [%llu, +%llu) outside its %llu bytes",
                         t->name, (unsigned long long)offset, (unsigned long long)n,
                         (unsigned long long)t->n_bytes);
    clef_tensor_info part = *t;
    part.offset = t->offset + offset;
    part.n_bytes = n;
    return read(ctx, &part, dst);
}

static int release_read_range(void *ctx, const clef_tensor_info *t, uint64_t offset, uint64_t n,
                              void *dst) {
    return clef_tensor_source_read_range_by_copy(release_read, ctx, t, offset, n, dst);
}

clef_tensor_source clef_tensor_source_of_release(const clef_release *rel) {
    return (clef_tensor_source){.ctx = (void *)rel, .find = release_find, .read = release_read,
                                .read_range = release_read_range};
}
