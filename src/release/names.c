/*
 * names.c — release name -> engine name, engine name -> group (see names.h).
 */
#include "release/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *stored_prefix;
    const char *engine_prefix;
} prefix_table[] = {
    {"model.language_model.", "text."},
    {"language_model.", "text."},
    {"model.visual.", "vision."},
    {"visual.", "vision."},
};

static const char *const ignored_prefixes[] = {"mtp.", "model.mtp."};

static char *concat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

static int starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

clef_name_kind clef_name_to_engine(const char *stored, int in_head_file, char **engine) {
    if (in_head_file) {
        *engine = concat("head.", stored);
        return CLEF_NAME_HEAD;
    }
    for (size_t i = 0; i < sizeof prefix_table / sizeof prefix_table[0]; i++)
        if (starts_with(stored, prefix_table[i].stored_prefix)) {
            *engine = concat(prefix_table[i].engine_prefix,
                             stored + strlen(prefix_table[i].stored_prefix));
            return CLEF_NAME_MODEL;
        }
    if (strcmp(stored, "lm_head.weight") == 0) {
        *engine = concat("", stored);
        return CLEF_NAME_MODEL;
    }
    *engine = concat("", stored);
    for (size_t i = 0; i < sizeof ignored_prefixes / sizeof ignored_prefixes[0]; i++)
        if (starts_with(stored, ignored_prefixes[i]))
            return CLEF_NAME_IGNORED;
    return CLEF_NAME_UNKNOWN;
}

clef_tensor_group clef_tensor_group_of(const char *name) {
    if (starts_with(name, "head."))
        return CLEF_GROUP_HEAD;
    if (starts_with(name, "vision."))
        return CLEF_GROUP_VISION;
    if (starts_with(name, "lm_head."))
        return CLEF_GROUP_LM_HEAD;
    if (starts_with(name, "text.embed_tokens."))
        return CLEF_GROUP_EMBEDDINGS;
    if (starts_with(name, "text.norm."))
        return CLEF_GROUP_NORMS;
    if (starts_with(name, "text.layers.")) {
        if (strstr(name, ".linear_attn."))
            return CLEF_GROUP_GDN;
        if (strstr(name, ".self_attn."))
            return CLEF_GROUP_ATTENTION;
        if (strstr(name, ".mlp."))
            return CLEF_GROUP_MLP;
        if (strstr(name, "layernorm."))
            return CLEF_GROUP_NORMS;
    }
    return CLEF_GROUP_OTHER;
}

const char *clef_tensor_group_name(clef_tensor_group g) {
    static const char *const names[CLEF_GROUP_COUNT] = {
        "embeddings", "gdn", "attention", "mlp", "norms", "vision", "lm_head", "head", "other",
    };
    return (unsigned)g < CLEF_GROUP_COUNT ? names[g] : "?";
}

/* ---- precision and quantization companions ------------------------------------------------- */

const char *clef_quant_method_name(clef_quant_method m) {
    switch (m) {
    case CLEF_QUANT_NONE: return "bf16";
    case CLEF_QUANT_BNB_NF4: return "nf4";
    case CLEF_QUANT_FP8_W8A8: return "fp8-w8a8";
    case CLEF_QUANT_INT8_CONVROT: return "int8-convrot";
    }
    return "unknown";
}

/* The suffixes of formats.md's quantized layouts: NF4 (bitsandbytes), FP8 (compressed-tensors),
 * INT8 ConvRot (comfy). */
static const char *const companion_suffixes[] = {
    ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
    ".quant_state.bitsandbytes__nf4", ".weight_scale", ".input_scale", ".comfy_quant",
};

int clef_tensor_is_quant_companion(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof companion_suffixes / sizeof companion_suffixes[0]; i++) {
        size_t k = strlen(companion_suffixes[i]);
        if (n >= k && strcmp(name + n - k, companion_suffixes[i]) == 0)
            return 1;
    }
    return 0;
}

uint64_t clef_tensor_param_count(const clef_tensor_info *t, clef_quant_method m) {
    if (!t || clef_tensor_is_quant_companion(t->name))
        return 0;
    uint64_t n = t->n_bytes / clef_dtype_size(t->dtype);
    if (m == CLEF_QUANT_BNB_NF4 && t->dtype == CLEF_DTYPE_U8)
        n *= 2; /* two 4-bit values per byte */
    return n;
}
