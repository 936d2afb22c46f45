/*
 * qwen35_release.c — load the text backbone from an opened, validated release: the release's
 * text config and its tensor table (clef_release_find / clef_release_read) as the tensor
 * source of qwen35_load.
 */
#include "model/qwen35.h"

#include "core/error.h"

static const clef_tensor_info *release_find(void *user, const char *name) {
    return clef_release_find((const clef_release *)user, name);
}

static int release_read(void *user, const clef_tensor_info *t, void *dst) {
    return clef_release_read((const clef_release *)user, t, dst);
}

int qwen35_load_release(const clef_release *rel, clef_backend *be, const qwen35_params *params,
                        qwen35_model **out) {
    if (!rel)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_load_release: release is NULL");
    qwen35_tensor_source src = {release_find, release_read, (void *)rel};
    return qwen35_load(&clef_release_get_config(rel)->text, &src, be, params, out);
}
