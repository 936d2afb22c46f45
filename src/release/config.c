/*
 * config.c — parse config.json / joint_head_config.json (see config.h for what is checked).
 *
 * Every message names the file and the JSON path of the field ("text_config.head_dim") and
 * says what was expected and what was found.
 */
#include "release/config.h"

#include "release/json_file.h"

#include "core/error.h"
#include "json/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Context for the field readers: file name and section ("text_config") for messages. */
typedef struct field_ctx {
    const char *file;
    const char *section;
} field_ctx;

#define FIELD_FMT "file '%s': %s%s%s"
#define FIELD_ARGS(c, key) (c)->file, (c)->section, (c)->section[0] ? "." : "", (key)

/* Read an integer field. required: absent is an error; else *out = dflt. min: lower bound. */
static int get_int(const field_ctx *c, const json_value *obj, const char *key, int required,
                   int64_t dflt, int64_t min, int64_t *out) {
    const json_value *v = json_object_get(obj, key);
    if (!v || v->type == JSON_NULL) {
        if (required)
            return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " is missing", FIELD_ARGS(c, key));
        *out = dflt;
        return CLEF_OK;
    }
    if (!json_get_int64(v, out))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be an integer, got %s",
                         FIELD_ARGS(c, key),
                         v->type == JSON_NUMBER ? v->u.num.text : json_type_name(v->type));
    if (*out < min)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " is %lld, must be >= %lld",
                         FIELD_ARGS(c, key), (long long)*out, (long long)min);
    return CLEF_OK;
}

static int get_real(const field_ctx *c, const json_value *obj, const char *key, double dflt,
                    double *out) {
    const json_value *v = json_object_get(obj, key);
    if (!v || v->type == JSON_NULL) {
        *out = dflt;
        return CLEF_OK;
    }
    if (!json_get_double(v, out) || !isfinite(*out))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be a finite number",
                         FIELD_ARGS(c, key));
    return CLEF_OK;
}

static int get_bool(const field_ctx *c, const json_value *obj, const char *key, int dflt,
                    int *out) {
    const json_value *v = json_object_get(obj, key);
    if (!v || v->type == JSON_NULL) {
        *out = dflt;
        return CLEF_OK;
    }
    if (!json_get_bool(v, out))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be true or false",
                         FIELD_ARGS(c, key));
    return CLEF_OK;
}

static int parse_layer_types(const field_ctx *c, const json_value *text, clef_text_config *t) {
    t->layer_types = calloc((size_t)t->num_hidden_layers, sizeof *t->layer_types);
    if (!t->layer_types)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", c->file);
    const json_value *lt = json_object_get(text, "layer_types");
    if (!lt || lt->type == JSON_NULL) {
        /* transformers' default: full attention every 4th layer (full_attention_interval). */
        int64_t interval;
        int rc = get_int(c, text, "full_attention_interval", 0, 4, 1, &interval);
        if (rc != CLEF_OK)
            return rc;
        for (int64_t i = 0; i < t->num_hidden_layers; i++)
            t->layer_types[i] = (i + 1) % interval ? CLEF_LAYER_LINEAR_ATTENTION
                                                   : CLEF_LAYER_FULL_ATTENTION;
        return CLEF_OK;
    }
    if (lt->type != JSON_ARRAY)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be an array",
                         FIELD_ARGS(c, "layer_types"));
    if ((int64_t)lt->u.arr.count != t->num_hidden_layers)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         FIELD_FMT " has %zu entries, num_hidden_layers is %lld",
                         FIELD_ARGS(c, "layer_types"), lt->u.arr.count,
                         (long long)t->num_hidden_layers);
    for (size_t i = 0; i < lt->u.arr.count; i++) {
        const char *s = json_get_string(lt->u.arr.items[i]);
        /* "attention" is transformers' legacy spelling of full_attention (remap_legacy_layer_types). */
        if (s && strcmp(s, "linear_attention") == 0)
            t->layer_types[i] = CLEF_LAYER_LINEAR_ATTENTION;
        else if (s && (strcmp(s, "full_attention") == 0 || strcmp(s, "attention") == 0))
            t->layer_types[i] = CLEF_LAYER_FULL_ATTENTION;
        else
            return clef_fail(CLEF_ERR_CONFIG_INVALID,
                             FIELD_FMT "[%zu] is %s%.40s%s, expected \"linear_attention\" or "
                             "\"full_attention\"",
                             FIELD_ARGS(c, "layer_types"), i, s ? "\"" : "",
                             s ? s : "not a string", s ? "\"" : "");
    }
    return CLEF_OK;
}

int64_t clef_text_rotary_dim(const clef_text_config *t) {
    return (int64_t)((double)t->head_dim * t->partial_rotary_factor);
}

static int parse_rope(const field_ctx *c, const json_value *text, clef_text_config *t) {
    const json_value *rp = json_object_get(text, "rope_parameters");
    if (rp && rp->type == JSON_NULL)
        rp = NULL;
    if (rp && rp->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be an object",
                         FIELD_ARGS(c, "rope_parameters"));
    /* Older configs keep rope_theta / partial_rotary_factor beside the other fields. */
    double theta_default, partial_default;
    int rc = get_real(c, text, "rope_theta", 10000.0, &theta_default);
    if (rc == CLEF_OK)
        rc = get_real(c, text, "partial_rotary_factor", 0.25, &partial_default);
    field_ctx rc_ctx = {c->file, "text_config.rope_parameters"};
    const json_value *src = rp ? rp : text;
    if (rc == CLEF_OK)
        rc = get_real(&rc_ctx, src, "rope_theta", theta_default, &t->rope_theta);
    if (rc == CLEF_OK)
        rc = get_real(&rc_ctx, src, "partial_rotary_factor", partial_default,
                      &t->partial_rotary_factor);
    if (rc == CLEF_OK)
        rc = get_bool(&rc_ctx, src, "mrope_interleaved", 1, &t->mrope_interleaved);
    if (rc != CLEF_OK)
        return rc;
    if (!(t->rope_theta > 0))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be positive",
                         FIELD_ARGS(&rc_ctx, "rope_theta"));
    if (!(t->partial_rotary_factor > 0 && t->partial_rotary_factor <= 1))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " is %g, must be in (0, 1]",
                         FIELD_ARGS(&rc_ctx, "partial_rotary_factor"), t->partial_rotary_factor);
    const json_value *ms = json_object_get(src, "mrope_section");
    int64_t defaults[3] = {11, 11, 10}; /* transformers' default for Qwen3.5 */
    if (!ms || ms->type == JSON_NULL) {
        memcpy(t->mrope_section, defaults, sizeof defaults);
    } else {
        if (ms->type != JSON_ARRAY || ms->u.arr.count != 3)
            return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be 3 integers (T, H, W)",
                             FIELD_ARGS(&rc_ctx, "mrope_section"));
        for (int i = 0; i < 3; i++)
            if (!json_get_int64(ms->u.arr.items[i], &t->mrope_section[i]) ||
                t->mrope_section[i] < 0)
                return clef_fail(CLEF_ERR_CONFIG_INVALID,
                                 FIELD_FMT "[%d] must be a non-negative integer",
                                 FIELD_ARGS(&rc_ctx, "mrope_section"), i);
    }
    int64_t rot = clef_text_rotary_dim(t);
    int64_t sections = t->mrope_section[0] + t->mrope_section[1] + t->mrope_section[2];
    if (rot % 2 != 0 || sections * 2 != rot)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "file '%s': text_config: rotary dims head_dim x partial_rotary_factor = "
                         "%lld, but mrope_section [%lld, %lld, %lld] covers %lld",
                         c->file, (long long)rot, (long long)t->mrope_section[0],
                         (long long)t->mrope_section[1], (long long)t->mrope_section[2],
                         (long long)(sections * 2));
    return CLEF_OK;
}

static int divides(const field_ctx *c, const char *a_name, int64_t a, const char *b_name,
                   int64_t b) {
    if (a % b != 0)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': %s: %s (%lld) is not a multiple of %s (%lld)",
                         c->file, c->section, a_name, (long long)a, b_name, (long long)b);
    return CLEF_OK;
}

static int parse_text(const char *file, const json_value *root, clef_text_config *t) {
    field_ctx c = {file, "text_config"};
    const json_value *text = json_object_get(root, "text_config");
    if (!text || text->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "file '%s': text_config is missing or not an object (not a "
                         "Qwen3_5ForConditionalGeneration config)",
                         file);
    struct {
        const char *key;
        int64_t *dst;
    } sizes[] = {
        {"vocab_size", &t->vocab_size},
        {"hidden_size", &t->hidden_size},
        {"intermediate_size", &t->intermediate_size},
        {"num_hidden_layers", &t->num_hidden_layers},
        {"num_attention_heads", &t->num_attention_heads},
        {"num_key_value_heads", &t->num_key_value_heads},
        {"head_dim", &t->head_dim},
        {"linear_num_key_heads", &t->linear_num_key_heads},
        {"linear_num_value_heads", &t->linear_num_value_heads},
        {"linear_key_head_dim", &t->linear_key_head_dim},
        {"linear_value_head_dim", &t->linear_value_head_dim},
        {"linear_conv_kernel_dim", &t->linear_conv_kernel_dim},
    };
    /* Upper bound: keeps every product of two sizes far from int64 overflow. */
    const int64_t max_size = (int64_t)1 << 24;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int rc = get_int(&c, text, sizes[i].key, 1, 0, 1, sizes[i].dst);
        if (rc != CLEF_OK)
            return rc;
        if (*sizes[i].dst > max_size)
            return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " is %lld, over the limit %lld",
                             FIELD_ARGS(&c, sizes[i].key), (long long)*sizes[i].dst,
                             (long long)max_size);
    }
    int rc = divides(&c, "num_attention_heads", t->num_attention_heads, "num_key_value_heads",
                     t->num_key_value_heads);
    if (rc == CLEF_OK)
        rc = divides(&c, "linear_num_value_heads", t->linear_num_value_heads,
                     "linear_num_key_heads", t->linear_num_key_heads);
    if (rc == CLEF_OK)
        rc = get_real(&c, text, "rms_norm_eps", 1e-6, &t->rms_norm_eps);
    if (rc == CLEF_OK && !(t->rms_norm_eps > 0))
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be positive",
                       FIELD_ARGS(&c, "rms_norm_eps"));
    if (rc == CLEF_OK) {
        /* transformers ties lm_head to the embeddings on the composite config's flag (default
         * false); text_config's own copy must still be a boolean when present. */
        int tied_text;
        rc = get_bool(&c, text, "tie_word_embeddings", 0, &tied_text);
        field_ctx top = {file, ""};
        if (rc == CLEF_OK)
            rc = get_bool(&top, root, "tie_word_embeddings", 0, &t->tie_word_embeddings);
    }
    if (rc == CLEF_OK)
        rc = parse_rope(&c, text, t);
    if (rc == CLEF_OK)
        rc = parse_layer_types(&c, text, t);
    return rc;
}

static int parse_vision(const char *file, const json_value *root, const clef_text_config *t,
                        clef_vision_config *v) {
    field_ctx c = {file, "vision_config"};
    const json_value *vis = json_object_get(root, "vision_config");
    if (!vis || vis->type == JSON_NULL) {
        v->present = 0;
        return CLEF_OK;
    }
    if (vis->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': vision_config is not an object", file);
    v->present = 1;
    struct {
        const char *key;
        int64_t *dst;
        int64_t dflt; /* transformers' Qwen3_5VisionConfig default */
    } sizes[] = {
        {"depth", &v->depth, 27},
        {"hidden_size", &v->hidden_size, 1152},
        {"intermediate_size", &v->intermediate_size, 4304},
        {"num_heads", &v->num_heads, 16},
        {"out_hidden_size", &v->out_hidden_size, 3584},
        {"patch_size", &v->patch_size, 16},
        {"temporal_patch_size", &v->temporal_patch_size, 2},
        {"spatial_merge_size", &v->spatial_merge_size, 2},
        {"in_channels", &v->in_channels, 3},
        {"num_position_embeddings", &v->num_position_embeddings, 2304},
    };
    const int64_t max_size = (int64_t)1 << 24;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int rc = get_int(&c, vis, sizes[i].key, 0, sizes[i].dflt, 1, sizes[i].dst);
        if (rc != CLEF_OK)
            return rc;
        if (*sizes[i].dst > max_size)
            return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " is %lld, over the limit %lld",
                             FIELD_ARGS(&c, sizes[i].key), (long long)*sizes[i].dst,
                             (long long)max_size);
    }
    int rc = divides(&c, "hidden_size", v->hidden_size, "num_heads", v->num_heads);
    if (rc != CLEF_OK)
        return rc;
    /* the 2-D RoPE: a quarter of each head's dims per axis and half (sin/cos pairs) */
    if ((v->hidden_size / v->num_heads) % 4 != 0)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         FIELD_FMT " / num_heads = %lld is not a multiple of 4 (the 2-D RoPE "
                         "gives a quarter of each head's dims to each of row and column)",
                         FIELD_ARGS(&c, "hidden_size"),
                         (long long)(v->hidden_size / v->num_heads));
    const json_value *rp = json_object_get(vis, "rope_parameters");
    if (rp && rp->type != JSON_NULL && rp->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be an object",
                         FIELD_ARGS(&c, "rope_parameters"));
    field_ctx rc_ctx = {file, "vision_config.rope_parameters"};
    rc = get_real(&rc_ctx, rp && rp->type == JSON_OBJECT ? rp : vis, "rope_theta", 10000.0,
                  &v->rope_theta);
    if (rc != CLEF_OK)
        return rc;
    if (!(v->rope_theta > 0))
        return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be positive",
                         FIELD_ARGS(&rc_ctx, "rope_theta"));
    const json_value *act = json_object_get(vis, "hidden_act");
    v->gelu_tanh = 1;
    if (act && act->type != JSON_NULL) {
        if (act->type == JSON_STRING && !strcmp(act->u.str.ptr, "gelu_pytorch_tanh"))
            v->gelu_tanh = 1;
        else if (act->type == JSON_STRING && !strcmp(act->u.str.ptr, "gelu"))
            v->gelu_tanh = 0;
        else
            return clef_fail(CLEF_ERR_CONFIG_INVALID, FIELD_FMT " must be \"gelu_pytorch_tanh\" "
                             "or \"gelu\"", FIELD_ARGS(&c, "hidden_act"));
    }
    int64_t side = (int64_t)llround(sqrt((double)v->num_position_embeddings));
    if (side * side != v->num_position_embeddings)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         FIELD_FMT " is %lld, not a square (the position table is side x side)",
                         FIELD_ARGS(&c, "num_position_embeddings"),
                         (long long)v->num_position_embeddings);
    if (v->out_hidden_size != t->hidden_size)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         FIELD_FMT " is %lld, text_config.hidden_size is %lld (the merger feeds "
                         "the text model)",
                         FIELD_ARGS(&c, "out_hidden_size"), (long long)v->out_hidden_size,
                         (long long)t->hidden_size);
    return CLEF_OK;
}

static const char *const int8_convrot_methods[] = {
    /* The public INT8 ConvRot release's quant_method could not be read (formats.md); these are
     * the spellings the comfy-kitchen convention uses. One table, so it is one edit. */
    "int8_convrot", "convrot", "comfy_int8", "int8_tensorwise",
};

static int copy_string_list(const field_ctx *c, const json_value *list, const char *key,
                            clef_quant_config *q) {
    if (!list || list->type == JSON_NULL)
        return CLEF_OK;
    if (list->type != JSON_ARRAY)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, FIELD_FMT " must be an array of strings",
                         FIELD_ARGS(c, key));
    q->ignore = calloc(list->u.arr.count ? list->u.arr.count : 1, sizeof *q->ignore);
    if (!q->ignore)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", c->file);
    for (size_t i = 0; i < list->u.arr.count; i++) {
        const char *s = json_get_string(list->u.arr.items[i]);
        if (!s)
            return clef_fail(CLEF_ERR_QUANT_CONFIG, FIELD_FMT "[%zu] is not a string",
                             FIELD_ARGS(c, key), i);
        q->ignore[i] = strdup(s);
        if (!q->ignore[i])
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", c->file);
        q->n_ignore = i + 1;
    }
    return CLEF_OK;
}

/* Expect obj[key] to be the given string / integer / boolean (compressed-tensors scheme). */
static int expect_str(const field_ctx *c, const json_value *obj, const char *key, const char *want) {
    const char *s = json_get_string(json_object_get(obj, key));
    if (!s || strcmp(s, want) != 0)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, FIELD_FMT " is %s%.40s%s, expected \"%s\"",
                         FIELD_ARGS(c, key), s ? "\"" : "", s ? s : "missing", s ? "\"" : "", want);
    return CLEF_OK;
}

static int expect_int(const field_ctx *c, const json_value *obj, const char *key, int64_t want) {
    int64_t x;
    if (!json_get_int64(json_object_get(obj, key), &x) || x != want)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, FIELD_FMT " must be %lld", FIELD_ARGS(c, key),
                         (long long)want);
    return CLEF_OK;
}

static int expect_bool(const field_ctx *c, const json_value *obj, const char *key, int want) {
    int x;
    if (!json_get_bool(json_object_get(obj, key), &x) || x != want)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, FIELD_FMT " must be %s", FIELD_ARGS(c, key),
                         want ? "true" : "false");
    return CLEF_OK;
}

static int parse_fp8_scheme(const char *file, const json_value *qc) {
    field_ctx c = {file, "quantization_config"};
    int rc = expect_str(&c, qc, "format", "float-quantized");
    if (rc != CLEF_OK)
        return rc;
    const json_value *groups = json_object_get(qc, "config_groups");
    if (!groups || groups->type != JSON_OBJECT || groups->u.obj.count != 1)
        return clef_fail(CLEF_ERR_QUANT_CONFIG,
                         "file '%s': quantization_config.config_groups must hold exactly one "
                         "group (one FP8 scheme for every quantized linear)",
                         file);
    const json_value *g = groups->u.obj.members[0].value;
    const json_value *w = json_object_get(g, "weights");
    const json_value *a = json_object_get(g, "input_activations");
    field_ctx cw = {file, "quantization_config.config_groups.*.weights"};
    field_ctx ca = {file, "quantization_config.config_groups.*.input_activations"};
    if (!w || w->type != JSON_OBJECT || !a || a->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_QUANT_CONFIG,
                         "file '%s': quantization_config group needs weights and "
                         "input_activations objects (W8A8)",
                         file);
    if ((rc = expect_int(&cw, w, "num_bits", 8)) || (rc = expect_str(&cw, w, "type", "float")) ||
        (rc = expect_str(&cw, w, "strategy", "channel")) ||
        (rc = expect_bool(&cw, w, "symmetric", 1)) || (rc = expect_int(&ca, a, "num_bits", 8)) ||
        (rc = expect_str(&ca, a, "type", "float")) || (rc = expect_str(&ca, a, "strategy", "token")) ||
        (rc = expect_bool(&ca, a, "dynamic", 1)))
        return rc;
    return CLEF_OK;
}

/* A bad field inside quantization_config is a quantization problem, message unchanged. */
static int as_quant_status(int rc) {
    return rc == CLEF_ERR_CONFIG_INVALID ? CLEF_ERR_QUANT_CONFIG : rc;
}

static int parse_quant(const char *file, const json_value *root, clef_quant_config *q) {
    field_ctx c = {file, "quantization_config"};
    const json_value *qc = json_object_get(root, "quantization_config");
    if (!qc || qc->type == JSON_NULL) {
        q->method = CLEF_QUANT_NONE;
        return CLEF_OK;
    }
    if (qc->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, "file '%s': quantization_config is not an object",
                         file);
    const char *method = json_get_string(json_object_get(qc, "quant_method"));
    if (!method)
        return clef_fail(CLEF_ERR_QUANT_CONFIG, "file '%s': quantization_config.quant_method is missing",
                         file);
    int rc;
    if (strcmp(method, "bitsandbytes") == 0) {
        int in4 = 0, in8 = 0;
        if ((rc = get_bool(&c, qc, "load_in_4bit", 0, &in4)) ||
            (rc = get_bool(&c, qc, "load_in_8bit", 0, &in8)))
            return as_quant_status(rc);
        if (!in4 || in8)
            return clef_fail(CLEF_ERR_QUANT_CONFIG,
                             "file '%s': quantization_config: bitsandbytes releases must be "
                             "load_in_4bit (NF4); got load_in_4bit=%d load_in_8bit=%d",
                             file, in4, in8);
        if ((rc = expect_str(&c, qc, "bnb_4bit_quant_type", "nf4")))
            return rc;
        if ((rc = get_bool(&c, qc, "bnb_4bit_use_double_quant", 0, &q->double_quant)))
            return as_quant_status(rc);
        q->method = CLEF_QUANT_BNB_NF4;
        q->group_size = 64;
        const char *compute = json_get_string(json_object_get(qc, "bnb_4bit_compute_dtype"));
        if (compute) /* reported by `clef inspect`; the engine computes in fp32 on the CPU */
            snprintf(q->compute_dtype, sizeof q->compute_dtype, "%s", compute);
        return copy_string_list(&c, json_object_get(qc, "llm_int8_skip_modules"),
                                "llm_int8_skip_modules", q);
    }
    if (strcmp(method, "compressed-tensors") == 0) {
        if ((rc = parse_fp8_scheme(file, qc)))
            return rc;
        q->method = CLEF_QUANT_FP8_W8A8;
        return copy_string_list(&c, json_object_get(qc, "ignore"), "ignore", q);
    }
    for (size_t i = 0; i < sizeof int8_convrot_methods / sizeof int8_convrot_methods[0]; i++)
        if (strcmp(method, int8_convrot_methods[i]) == 0) {
            q->method = CLEF_QUANT_INT8_CONVROT;
            if ((rc = get_int(&c, qc, "convrot_groupsize", 0, 256, 1, &q->group_size)))
                return as_quant_status(rc);
            if (q->group_size != 256)
                return clef_fail(CLEF_ERR_QUANT_CONFIG,
                                 "file '%s': quantization_config.convrot_groupsize is %lld; the "
                                 "engine implements 256",
                                 file, (long long)q->group_size);
            return copy_string_list(&c, json_object_get(qc, "ignore"), "ignore", q);
        }
    return clef_fail(CLEF_ERR_QUANT_CONFIG,
                     "file '%s': quantization_config.quant_method \"%.40s\" is not one the engine "
                     "loads (bitsandbytes NF4, compressed-tensors FP8, INT8 ConvRot)",
                     file, method);
}

static int parse_token_ids(const char *file, const json_value *root, clef_release_config *cfg) {
    field_ctx c = {file, ""};
    int rc;
    if ((rc = get_int(&c, root, "image_token_id", 0, 248056, 0, &cfg->image_token_id)) ||
        (rc = get_int(&c, root, "video_token_id", 0, 248057, 0, &cfg->video_token_id)) ||
        (rc = get_int(&c, root, "vision_start_token_id", 0, 248053, 0, &cfg->vision_start_token_id)) ||
        (rc = get_int(&c, root, "vision_end_token_id", 0, 248054, 0, &cfg->vision_end_token_id)))
        return rc;
    return CLEF_OK;
}

void clef_config_free(clef_release_config *cfg) {
    if (!cfg)
        return;
    free(cfg->text.layer_types);
    for (size_t i = 0; i < cfg->quant.n_ignore; i++)
        free(cfg->quant.ignore[i]);
    free(cfg->quant.ignore);
    memset(cfg, 0, sizeof *cfg);
}

int clef_config_parse(const char *text, size_t len, const char *file, clef_release_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    json_doc *doc = NULL;
    int rc = clef_release_json_parse(text, len, file, CLEF_ERR_CONFIG_JSON, &doc);
    if (rc != CLEF_OK)
        return rc;
    const json_value *root = json_doc_root(doc);
    if ((rc = parse_text(file, root, &cfg->text)) || (rc = parse_vision(file, root, &cfg->text, &cfg->vision)) ||
        (rc = parse_quant(file, root, &cfg->quant)) || (rc = parse_token_ids(file, root, cfg)))
        clef_config_free(cfg);
    json_doc_free(doc);
    return rc;
}

int clef_head_config_parse(const char *text, size_t len, const char *file,
                           clef_release_config *cfg) {
    clef_head_config *h = &cfg->head;
    memset(h, 0, sizeof *h);
    json_doc *doc = NULL;
    int rc = clef_release_json_parse(text, len, file, CLEF_ERR_CONFIG_JSON, &doc);
    if (rc != CLEF_OK)
        return rc;
    const json_value *root = json_doc_root(doc);
    field_ctx c = {file, ""};
    /* The reference loads it as JointSchemaHead(**config): an unknown key is a TypeError. */
    static const char *const known[] = {"hidden_size", "width",      "routing_layers", "layers",
                                        "heads",       "feedforward", "dropout"};
    for (size_t i = 0; i < root->u.obj.count && rc == CLEF_OK; i++) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(root->u.obj.members[i].key, known[k]))
            k++;
        if (k == sizeof known / sizeof known[0])
            rc = clef_fail(CLEF_ERR_CONFIG_INVALID,
                           "file '%s': unknown field '%.60s' (JointSchemaHead takes hidden_size, "
                           "width, routing_layers, layers, heads, feedforward, dropout)",
                           file, root->u.obj.members[i].key);
    }
    const int64_t max_size = (int64_t)1 << 24;
    if (rc != CLEF_OK)
        goto done;
    if (((rc = get_int(&c, root, "hidden_size", 1, 0, 1, &h->hidden_size)) ||
         (rc = get_int(&c, root, "width", 1, 0, 1, &h->width)) ||
         (rc = get_int(&c, root, "routing_layers", 1, 0, 0, &h->routing_layers)) ||
         (rc = get_int(&c, root, "layers", 1, 0, 0, &h->layers)) ||
         (rc = get_int(&c, root, "heads", 1, 0, 1, &h->heads)) ||
         (rc = get_int(&c, root, "feedforward", 1, 0, 1, &h->feedforward)) ||
         (rc = get_real(&c, root, "dropout", 0.0, &h->dropout))))
        goto done;
    if (h->hidden_size > max_size || h->width > max_size || h->feedforward > max_size ||
        h->routing_layers > 1024 || h->layers > 1024) {
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': a size is over the engine's limits", file);
        goto done;
    }
    if (h->width % h->heads != 0) {
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': width (%lld) is not a multiple of heads (%lld)",
                       file, (long long)h->width, (long long)h->heads);
        goto done;
    }
    if (cfg->text.hidden_size && h->hidden_size != cfg->text.hidden_size) {
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID,
                       "file '%s': hidden_size is %lld, config.json text_config.hidden_size is %lld",
                       file, (long long)h->hidden_size, (long long)cfg->text.hidden_size);
        goto done;
    }
    h->present = 1;
done:
    if (rc != CLEF_OK)
        memset(h, 0, sizeof *h);
    json_doc_free(doc);
    return rc;
}
