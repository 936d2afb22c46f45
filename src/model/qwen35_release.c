/*
 * qwen35_release.c — load the text backbone from an opened, validated release: the release's
 * text config and its tensor table (clef_tensor_source_of_release) as the tensor source of
 * qwen35_load.
 */
#include "model/qwen35.h"

#include "core/error.h"

int qwen35_load_release(const clef_release *rel, clef_backend *be, qwen35_model **out) {
    if (!rel)
        return clef_fail(CLEF_ERR_INVALID_ARG, "qwen35_load_release: release is NULL");
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    return qwen35_load(&clef_release_get_config(rel)->text, &src, be, out);
}
