/*
 * st_source.c — see st_source.h (test-only, temporary until src/release lands).
 */
#include "st_source.h"

#include "core/io.h"
#include "json/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_source {
    clef_text_config cfg;
    clef_layer_type *layer_types;
    clef_file file;
    clef_tensor_info *tensors;
    char **names;
    size_t n;
};

static int64_t get_i64(const json_value *o, const char *key) {
    int64_t v = -1;
    json_get_int64(json_object_get(o, key), &v);
    return v;
}

static double get_f64(const json_value *o, const char *key) {
    double v = -1;
    json_get_double(json_object_get(o, key), &v);
    return v;
}

static int parse_config(st_source *s, const char *dir) {
    char *path = clef_path_join(dir, "config.json"), *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    int ok = clef_read_file(path, 1 << 20, &text, &len) == 0 && json_parse(text, len, NULL, &doc, NULL) == 0;
    free(path);
    free(text);
    if (!ok)
        return -1;
    const json_value *tc = json_object_get(json_doc_root(doc), "text_config");
    const json_value *rope = json_object_get(tc, "rope_parameters");
    clef_text_config *c = &s->cfg;
    c->vocab_size = get_i64(tc, "vocab_size");
    c->hidden_size = get_i64(tc, "hidden_size");
    c->intermediate_size = get_i64(tc, "intermediate_size");
    c->num_hidden_layers = get_i64(tc, "num_hidden_layers");
    c->num_attention_heads = get_i64(tc, "num_attention_heads");
    c->num_key_value_heads = get_i64(tc, "num_key_value_heads");
    c->head_dim = get_i64(tc, "head_dim");
    c->linear_num_key_heads = get_i64(tc, "linear_num_key_heads");
    c->linear_num_value_heads = get_i64(tc, "linear_num_value_heads");
    c->linear_key_head_dim = get_i64(tc, "linear_key_head_dim");
    c->linear_value_head_dim = get_i64(tc, "linear_value_head_dim");
    c->linear_conv_kernel_dim = get_i64(tc, "linear_conv_kernel_dim");
    c->rms_norm_eps = get_f64(tc, "rms_norm_eps");
    c->rope_theta = get_f64(rope, "rope_theta");
    c->partial_rotary_factor = get_f64(rope, "partial_rotary_factor");
    const json_value *sec = json_object_get(rope, "mrope_section");
    for (size_t i = 0; i < 3; i++)
        json_get_int64(json_array_at(sec, i), &c->mrope_section[i]);
    json_get_bool(json_object_get(rope, "mrope_interleaved"), &c->mrope_interleaved);
    const json_value *lt = json_object_get(tc, "layer_types");
    s->layer_types = calloc((size_t)(c->num_hidden_layers > 0 ? c->num_hidden_layers : 1), sizeof(clef_layer_type));
    for (int64_t i = 0; i < c->num_hidden_layers; i++) {
        const char *t = json_get_string(json_array_at(lt, (size_t)i));
        s->layer_types[i] = t && strcmp(t, "full_attention") == 0 ? CLEF_LAYER_FULL_ATTENTION : CLEF_LAYER_LINEAR_ATTENTION;
    }
    c->layer_types = s->layer_types;
    json_doc_free(doc);
    return 0;
}

static int parse_dtype(const char *s, clef_dtype *out) {
    static const struct { const char *name; clef_dtype t; size_t size; } table[] = {
        {"BF16", CLEF_DTYPE_BF16, 2}, {"F16", CLEF_DTYPE_F16, 2}, {"F32", CLEF_DTYPE_F32, 4}};
    for (size_t i = 0; i < 3; i++)
        if (s && strcmp(s, table[i].name) == 0) {
            *out = table[i].t;
            return (int)table[i].size;
        }
    return 0;
}

static int parse_tensors(st_source *s, const char *dir) {
    char *path = clef_path_join(dir, "model.safetensors");
    int st = clef_file_open(&s->file, path);
    free(path);
    uint64_t hlen = 0;
    if (st || clef_file_pread(&s->file, &hlen, 8, 0) || hlen > s->file.size - 8)
        return -1;
    char *text = malloc(hlen + 1);
    json_doc *doc = NULL;
    if (clef_file_pread(&s->file, text, hlen, 8) || json_parse(text, hlen, NULL, &doc, NULL)) {
        free(text);
        return -1;
    }
    free(text);
    const json_value *root = json_doc_root(doc);
    s->tensors = calloc(root->u.obj.count, sizeof *s->tensors);
    s->names = calloc(root->u.obj.count, sizeof *s->names);
    for (size_t i = 0; i < root->u.obj.count; i++) {
        const json_member *mem = &root->u.obj.members[i];
        const char *prefix = "model.language_model.";
        if (strncmp(mem->key, prefix, strlen(prefix)) != 0)
            continue; /* vision, lm_head, metadata: not the backbone's */
        clef_tensor_info *t = &s->tensors[s->n];
        size_t nlen = strlen(mem->key) - strlen(prefix) + 6;
        s->names[s->n] = malloc(nlen);
        snprintf(s->names[s->n], nlen, "text.%s", mem->key + strlen(prefix));
        t->name = s->names[s->n];
        t->stored_name = t->name;
        int esize = parse_dtype(json_get_string(json_object_get(mem->value, "dtype")), &t->dtype);
        const json_value *shape = json_object_get(mem->value, "shape");
        const json_value *offs = json_object_get(mem->value, "data_offsets");
        int64_t b = 0, e = 0, n = 1;
        json_get_int64(json_array_at(offs, 0), &b);
        json_get_int64(json_array_at(offs, 1), &e);
        t->n_dims = (int)shape->u.arr.count;
        for (int d = 0; d < t->n_dims; d++) {
            json_get_int64(json_array_at(shape, (size_t)d), &t->shape[d]);
            n *= t->shape[d];
        }
        t->offset = 8 + hlen + (uint64_t)b;
        t->n_bytes = (uint64_t)(e - b);
        if (!esize || (uint64_t)(n * esize) != t->n_bytes || t->offset + t->n_bytes > s->file.size) {
            json_doc_free(doc);
            return -1;
        }
        s->n++;
    }
    json_doc_free(doc);
    return 0;
}

st_source *st_source_open(const char *dir) {
    st_source *s = calloc(1, sizeof *s);
    s->file.fd = -1;
    if (parse_config(s, dir) != 0 || parse_tensors(s, dir) != 0) {
        fprintf(stderr, "st_source: cannot read the release in '%s'\n", dir);
        st_source_free(s);
        return NULL;
    }
    return s;
}

void st_source_free(st_source *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    free(s->tensors);
    free(s->layer_types);
    clef_file_close(&s->file);
    free(s);
}

const clef_text_config *st_source_config(const st_source *s) { return &s->cfg; }

static const clef_tensor_info *source_find(void *user, const char *name) {
    st_source *s = user;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->tensors[i].name, name) == 0)
            return &s->tensors[i];
    return NULL;
}

static int source_read(void *user, const clef_tensor_info *t, void *dst) {
    st_source *s = user;
    return clef_file_pread(&s->file, dst, t->n_bytes, t->offset);
}

qwen35_tensor_source st_source_as_tensor_source(st_source *s) {
    qwen35_tensor_source src = {source_find, source_read, s};
    return src;
}
