/*
 * tensor_source.c — a release as a clef_tensor_source (see tensor_source.h).
 */
#include "model/tensor_source.h"

static const clef_tensor_info *release_find(void *ctx, const char *name) {
    return clef_release_find((const clef_release *)ctx, name);
}

static int release_read(void *ctx, const clef_tensor_info *t, void *dst) {
    return clef_release_read((const clef_release *)ctx, t, dst);
}

clef_tensor_source clef_tensor_source_of_release(const clef_release *rel) {
    return (clef_tensor_source){.ctx = (void *)rel, .find = release_find, .read = release_read};
}
