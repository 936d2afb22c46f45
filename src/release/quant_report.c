/*
 * quant_report.c — what a release quantizes and what the engine holds of it, for `clef
 * inspect` (the public part is in include/clef_release.h, "quantization"): the state of every
 * linear layer's weight under its format's own rules (ignore lists, the modules a format never
 * quantizes, ConvRot's rotation group), the resident bytes of every tensor, and the format
 * parameters read from the release's config and quantization metadata.
 *
 * Nothing here decides what loads: the reader (expected.c) and the weight loader do that. These
 * functions only explain a release that opened, so that a person can see why a linear stayed
 * in high precision and what the quantized model will cost in memory. The resident-bytes rules
 * mirror the weight loader (src/model/weight_loader.c, quant_weights.c) and are checked
 * against a real load by tests/quant_eval (within the CPU backend's panel padding).
 */
#include "release/release.h"

#include "core/error.h"
#include "json/json.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_quantized_dtype(clef_dtype d) {
    return d == CLEF_DTYPE_U8 || d == CLEF_DTYPE_F8_E4M3 || d == CLEF_DTYPE_I8;
}

static uint64_t element_count(const clef_tensor_info *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->n_dims; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

const char *clef_linear_state_name(clef_linear_state s) {
    static const char *const names[CLEF_LINEAR_STATE_COUNT] = {
        "quantized",  "unquantized-release", "ignore-list",
        "format-rule", "rotation-group",     "unexplained",
    };
    return (unsigned)s < CLEF_LINEAR_STATE_COUNT ? names[s] : "?";
}

/* A Linear's weight: a quantized weight, or a 2-D float "*.weight" / MHA "in_proj_weight" that
 * is no embedding table (text / vision / head embeddings are looked up, not multiplied). */
static int is_linear_weight(const clef_tensor_info *t) {
    if (clef_tensor_is_quant_companion(t->name))
        return 0;
    if (is_quantized_dtype(t->dtype))
        return ends_with(t->name, ".weight");
    return t->n_dims == 2 && (ends_with(t->name, ".weight") || ends_with(t->name, ".in_proj_weight")) &&
           !strstr(t->name, "embed");
}

/* The regex `pattern` matches `name` from its start (Python's re.match), with POSIX extended
 * syntax; a pattern POSIX cannot compile matches nothing. */
static int regex_match_from_start(const char *pattern, const char *name) {
    size_t n = strlen(pattern);
    char *anchored = malloc(n + 4);
    if (!anchored)
        return 0;
    snprintf(anchored, n + 4, "^(%s)", pattern);
    regex_t re;
    int ok = regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) == 0;
    free(anchored);
    if (!ok)
        return 0;
    int hit = regexec(&re, name, 0, NULL, 0) == 0;
    regfree(&re);
    return hit;
}

/* The ignore entry of the release's config that names module (the stored name without
 * ".weight"), or NULL. compressed-tensors (FP8, INT8 configs): the exact name or "re:" + a
 * regex matched from the start. transformers' bitsandbytes skip modules: the entry as a regex
 * matched from the start, or a suffix of the name. */
static const char *ignore_rule(const clef_quant_config *q, const char *module) {
    for (size_t i = 0; i < q->n_ignore; i++) {
        const char *e = q->ignore[i];
        if (q->method == CLEF_QUANT_BNB_NF4) {
            if (regex_match_from_start(e, module) || ends_with(module, e))
                return e;
        } else if (strncmp(e, "re:", 3) == 0) {
            if (regex_match_from_start(e + 3, module))
                return e;
        } else if (strcmp(e, module) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Modules the format never quantizes (formats.md; the linears expected.c calls quantizable). */
static int kept_by_format(clef_quant_method m, const clef_tensor_info *t) {
    clef_tensor_group g = clef_tensor_group_of(t->name);
    if (g == CLEF_GROUP_LM_HEAD || g == CLEF_GROUP_VISION || g == CLEF_GROUP_HEAD ||
        g == CLEF_GROUP_OTHER)
        return 1;
    if (m == CLEF_QUANT_FP8_W8A8)
        return g == CLEF_GROUP_GDN;
    if (m == CLEF_QUANT_INT8_CONVROT)
        return strstr(t->name, ".linear_attn.in_proj_a.") || strstr(t->name, ".linear_attn.in_proj_b.");
    return 0;
}

int clef_release_linear_state(const clef_release *rel, const clef_tensor_info *t,
                              const char **rule) {
    if (rule)
        *rule = NULL;
    if (!rel || !t || !is_linear_weight(t))
        return -1;
    const clef_quant_config *q = &clef_release_get_config(rel)->quant;
    if (is_quantized_dtype(t->dtype))
        return CLEF_LINEAR_QUANTIZED;
    if (q->method == CLEF_QUANT_NONE)
        return CLEF_LINEAR_UNQUANTIZED_RELEASE;
    if (clef_tensor_group_of(t->name) != CLEF_GROUP_HEAD) { /* the head is not in config.json */
        char module[512];
        size_t n = strlen(t->stored_name);
        const size_t suffix = ends_with(t->stored_name, ".weight") ? 7 : 0;
        snprintf(module, sizeof module, "%.*s", (int)(n - suffix), t->stored_name);
        const char *e = ignore_rule(q, module);
        if (e) {
            if (rule)
                *rule = e;
            return CLEF_LINEAR_KEPT_IGNORED;
        }
    }
    if (kept_by_format(q->method, t))
        return CLEF_LINEAR_KEPT_BY_FORMAT;
    if (q->method == CLEF_QUANT_INT8_CONVROT && q->group_size > 0 && t->shape[1] % q->group_size)
        return CLEF_LINEAR_KEPT_ROTATION_GROUP;
    return CLEF_LINEAR_KEPT_UNEXPLAINED;
}

uint64_t clef_release_resident_bytes(const clef_release *rel, const clef_tensor_info *t) {
    if (!rel || !t)
        return 0;
    const char *name = t->name;
    /* metadata parsed into the descriptor at load, and the static scale the loader does not use */
    if (ends_with(name, ".quant_state.bitsandbytes__nf4") || ends_with(name, ".comfy_quant") ||
        ends_with(name, ".input_scale"))
        return 0;
    if (ends_with(name, ".weight_scale")) /* widened to fp32 at load */
        return element_count(t) * 4;
    if (clef_tensor_is_quant_companion(name)) /* NF4 absmax and code tables, as stored */
        return t->n_bytes;
    if (clef_tensor_group_of(name) == CLEF_GROUP_LM_HEAD) /* option rows read per record */
        return 0;
    if (is_quantized_dtype(t->dtype)) /* packed quantized data, as stored */
        return t->n_bytes;
    if (t->n_dims == 0) /* the head's scalars: host copies in the head itself */
        return 0;
    if (t->n_dims == 1 || strstr(name, ".linear_attn.conv1d.") ||
        strcmp(name, "head.type_embedding.weight") == 0) /* vectors: fp32 */
        return element_count(t) * 4;
    return t->n_bytes; /* matrices and embedding tables in their stored type */
}

/* tensor `weight_name` + suffix, read whole and parsed as JSON; *doc NULL when absent */
static int read_json_tensor(const clef_release *rel, const char *weight_name, const char *suffix,
                            json_doc **doc) {
    *doc = NULL;
    char name[600];
    snprintf(name, sizeof name, "%s%s", weight_name, suffix);
    const clef_tensor_info *t = clef_release_find(rel, name);
    if (!t)
        return CLEF_OK;
    char *text = malloc((size_t)t->n_bytes + 1);
    if (!text)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': no memory to read it", name);
    int st = clef_release_read(rel, t, text);
    if (st) {
        free(text);
        return clef_fail_prefix(st, "reading tensor '%s'", name);
    }
    json_error err;
    json_parse_opts opts = {.max_depth = 16};
    int rc = json_parse(text, (size_t)t->n_bytes, &opts, doc, &err);
    free(text);
    if (rc != 0)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, "tensor '%s' is not UTF-8 JSON: %s", name, err.msg);
    return CLEF_OK;
}

static void copy_string(char *dst, size_t cap, const json_value *v) {
    const char *s = json_get_string(v);
    snprintf(dst, cap, "%s", s ? s : "");
}

int clef_release_quant_params(const clef_release *rel, clef_quant_params *out) {
    if (!rel || !out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_quant_params: NULL argument");
    memset(out, 0, sizeof *out);
    const clef_quant_config *q = &clef_release_get_config(rel)->quant;
    out->method = q->method;
    out->weight_dtype = CLEF_DTYPE_COUNT;
    out->scale_dtype = CLEF_DTYPE_COUNT;
    const clef_tensor_info *first = NULL;
    int static_input = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (clef_release_linear_state(rel, t, NULL) == CLEF_LINEAR_QUANTIZED) {
            out->n_quantized++;
            if (!first)
                first = t;
        }
        static_input |= ends_with(t->name, ".input_scale");
    }
    if (q->method == CLEF_QUANT_NONE || !first)
        return CLEF_OK;
    out->weight_dtype = first->dtype;
    json_doc *doc = NULL;
    int st;
    if (q->method == CLEF_QUANT_BNB_NF4) {
        snprintf(out->compute_dtype, sizeof out->compute_dtype, "%s", q->compute_dtype);
        if ((st = read_json_tensor(rel, first->name, ".quant_state.bitsandbytes__nf4", &doc)))
            return st;
        const json_value *root = json_doc_root(doc);
        copy_string(out->quant_type, sizeof out->quant_type, json_object_get(root, "quant_type"));
        copy_string(out->dtype, sizeof out->dtype, json_object_get(root, "dtype"));
        copy_string(out->nested_dtype, sizeof out->nested_dtype, json_object_get(root, "nested_dtype"));
        json_get_int64(json_object_get(root, "blocksize"), &out->blocksize);
        json_get_int64(json_object_get(root, "nested_blocksize"), &out->nested_blocksize);
        char absmax[600];
        snprintf(absmax, sizeof absmax, "%s.absmax", first->name);
        const clef_tensor_info *a = clef_release_find(rel, absmax);
        out->double_quant = a && a->dtype == CLEF_DTYPE_U8;
        json_doc_free(doc);
        return CLEF_OK;
    }
    /* FP8 W8A8 and INT8 ConvRot: per-channel weight scales */
    out->weight_strategy = "channel";
    out->scale_layout = "[out, 1]";
    out->activation_strategy = static_input ? "tensor, static" : "token, dynamic";
    char scale[600];
    snprintf(scale, sizeof scale, "%s_scale", first->name);
    const clef_tensor_info *s = clef_release_find(rel, scale);
    if (s)
        out->scale_dtype = s->dtype;
    if (q->method == CLEF_QUANT_INT8_CONVROT) {
        out->rotation_group = q->group_size;
        char prefix[600];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(first->name) - 7), first->name);
        if ((st = read_json_tensor(rel, prefix, ".comfy_quant", &doc)))
            return st;
        copy_string(out->comfy_format, sizeof out->comfy_format,
                    json_object_get(json_doc_root(doc), "format"));
        json_doc_free(doc);
    }
    return CLEF_OK;
}
