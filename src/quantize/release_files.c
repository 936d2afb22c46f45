/*
 * release_files.c — config.json, the index, complete.json and the copied files of a release
 * written by `clef quantize` (see release_files.h). JSON is written the way Python writes
 * it: transformers saves config.json and the index with json.dumps(indent=2,
 * sort_keys=True) (compressed-tensors rewrites config.json the same way, without the final
 * newline), the release scripts write complete.json with json.dumps(indent=2).
 */
#include "quantize/release_files.h"

#include "core/error.h"
#include "core/io.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "json/json.h"
#include "json/render.h"
#include "json/render_pretty.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CONFIG_MAX = 16 << 20, COPY_CHUNK = 16 << 20 };

int q_write_file(const char *dir, const char *name, const char *data, size_t len) {
    char *path = clef_path_join(dir, name);
    if (!path)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    int rc = CLEF_OK;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = clef_fail(CLEF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto done;
    }
    while (len > 0) {
        ssize_t k = write(fd, data, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            rc = clef_fail(CLEF_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            break;
        }
        data += k;
        len -= (size_t)k;
    }
    if (rc == CLEF_OK && fsync(fd) != 0)
        rc = clef_fail(CLEF_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    close(fd);
done:
    free(path);
    return rc;
}

/* ---- config.json ------------------------------------------------------------------------ */

/* bitsandbytes' BitsAndBytesConfig as transformers saves it for the NF4 release. */
static const char nf4_quantization_config[] =
    "{\"_load_in_4bit\":true,\"_load_in_8bit\":false,\"bnb_4bit_compute_dtype\":\"bfloat16\","
    "\"bnb_4bit_quant_storage\":\"uint8\",\"bnb_4bit_quant_type\":\"nf4\","
    "\"bnb_4bit_use_double_quant\":true,\"llm_int8_enable_fp32_cpu_offload\":false,"
    "\"llm_int8_has_fp16_weight\":false,\"llm_int8_skip_modules\":[\"lm_head\",\"model.visual\","
    "\"mtp\"],\"llm_int8_threshold\":6.0,\"load_in_4bit\":true,\"load_in_8bit\":false,"
    "\"quant_method\":\"bitsandbytes\"}";

/* compressed-tensors' config for the FP8_DYNAMIC scheme (version 0.20), with the plan's
 * ignore list. */
static void fp8_quantization_config(const q_plan *plan, clef_strbuf *out) {
    clef_strbuf_append_str(out,
        "{\"config_groups\":{\"group_0\":{\"format\":\"float-quantized\",\"input_activations\":"
        "{\"dynamic\":true,\"group_size\":null,\"num_bits\":8,\"strategy\":\"token\","
        "\"symmetric\":true,\"type\":\"float\"},\"output_activations\":null,\"targets\":"
        "[\"Linear\"],\"weights\":{\"dynamic\":false,\"group_size\":null,\"num_bits\":8,"
        "\"strategy\":\"channel\",\"symmetric\":true,\"type\":\"float\"}}},\"format\":"
        "\"float-quantized\",\"global_compression_ratio\":null,\"ignore\":[");
    for (size_t i = 0; i < plan->n_ignore; i++) {
        if (i)
            clef_strbuf_append_char(out, ',');
        json_render_string(plan->ignore[i], strlen(plan->ignore[i]), out);
    }
    clef_strbuf_append_str(out,
        "],\"kv_cache_scheme\":null,\"moe_sparsity_config\":null,\"quant_method\":"
        "\"compressed-tensors\",\"quantization_status\":\"compressed\",\"sparsity_config\":{},"
        "\"transform_config\":{},\"version\":\"0.20.0\"}");
}

/* A copy of object obj with member key set to value (replaced in place, or appended). The
 * members array is malloc'd into *storage (free it after use). */
static int object_with(const json_value *obj, const char *key, json_value *value,
                       json_value *out, json_member **storage) {
    size_t n = obj->u.obj.count;
    json_member *m = malloc((n + 1) * sizeof *m);
    if (!m)
        return CLEF_ERR_OUT_OF_MEMORY;
    memcpy(m, obj->u.obj.members, n * sizeof *m);
    size_t i = 0;
    while (i < n && strcmp(m[i].key, key) != 0)
        i++;
    if (i == n) {
        m[n].key = key;
        m[n].key_len = strlen(key);
        n++;
    }
    m[i].value = value;
    *out = *obj;
    out->u.obj.members = m;
    out->u.obj.count = n;
    *storage = m;
    return CLEF_OK;
}

int q_write_config(const char *src_dir, const char *dst_dir, const q_plan *plan) {
    char *path = clef_path_join(src_dir, "config.json");
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL, *qdoc = NULL;
    json_member *m_root = NULL, *m_text = NULL, *m_vision = NULL, *m_tmp = NULL;
    clef_strbuf q = {0}, out = {0};
    int rc;
    if (!path)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    if ((rc = clef_read_file(path, CONFIG_MAX, &text, &len)) != CLEF_OK)
        goto done;
    if (plan->target == CLEF_QUANTIZE_INT8_CONVROT) { /* comfy-kitchen leaves it as it is */
        rc = q_write_file(dst_dir, "config.json", text, len);
        goto done;
    }
    if (json_parse(text, len, NULL, &doc, NULL) != 0 ||
        json_doc_root(doc)->type != JSON_OBJECT) {
        rc = clef_fail(CLEF_ERR_CONFIG_JSON, "%s: not a JSON object", path);
        goto done;
    }
    if (plan->target == CLEF_QUANTIZE_NF4)
        clef_strbuf_append_str(&q, nf4_quantization_config);
    else
        fp8_quantization_config(plan, &q);
    if ((rc = clef_strbuf_status(&q)) != CLEF_OK)
        goto done;
    if (json_parse(q.data, q.len, NULL, &qdoc, NULL) != 0) {
        rc = clef_fail(CLEF_ERR_INTERNAL, "quantization_config text does not parse");
        goto done;
    }
    /* transformers, loading in bf16, records the dtype in each sub-config it saves. */
    static json_value bf16_string = {.type = JSON_STRING, .u.str = {"bfloat16", 8}};
    const json_value *root = json_doc_root(doc);
    json_value new_root, new_text, new_vision, tmp;
    if ((rc = object_with(root, "quantization_config", (json_value *)json_doc_root(qdoc),
                          &new_root, &m_root)) != CLEF_OK)
        goto oom;
    const json_value *text_cfg = json_object_get(root, "text_config");
    if (text_cfg && text_cfg->type == JSON_OBJECT && !json_object_get(text_cfg, "dtype")) {
        if ((rc = object_with(text_cfg, "dtype", &bf16_string, &new_text, &m_text)) != CLEF_OK)
            goto oom;
        tmp = new_root;
        if ((rc = object_with(&tmp, "text_config", &new_text, &new_root, &m_tmp)) != CLEF_OK)
            goto oom;
        free(m_root);
        m_root = m_tmp;
        m_tmp = NULL;
    }
    const json_value *vision_cfg = json_object_get(root, "vision_config");
    if (vision_cfg && vision_cfg->type == JSON_OBJECT && !json_object_get(vision_cfg, "dtype")) {
        if ((rc = object_with(vision_cfg, "dtype", &bf16_string, &new_vision, &m_vision)) !=
            CLEF_OK)
            goto oom;
        tmp = new_root;
        if ((rc = object_with(&tmp, "vision_config", &new_vision, &new_root, &m_tmp)) != CLEF_OK)
            goto oom;
        free(m_root);
        m_root = m_tmp;
        m_tmp = NULL;
    }
    if ((rc = json_render_pretty(&new_root, 2, 1, &out)) != CLEF_OK) {
        clef_fail_prefix(rc, "%s", path);
        goto done;
    }
    /* transformers ends the file with a newline; compressed-tensors' rewrite (FP8) does not */
    if (plan->target == CLEF_QUANTIZE_NF4)
        clef_strbuf_append_char(&out, '\n');
    if ((rc = clef_strbuf_status(&out)) != CLEF_OK)
        goto done;
    rc = q_write_file(dst_dir, "config.json", out.data, out.len);
    goto done;
oom:
    rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
done:
    free(m_root);
    free(m_text);
    free(m_vision);
    free(m_tmp);
    clef_strbuf_free(&q);
    clef_strbuf_free(&out);
    json_doc_free(doc);
    json_doc_free(qdoc);
    free(text);
    free(path);
    return rc;
}

/* ---- model.safetensors.index.json ------------------------------------------------------- */

typedef struct index_entry {
    const char *tensor, *file;
} index_entry;

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const index_entry *)a)->tensor, ((const index_entry *)b)->tensor);
}

int q_write_index(const char *dst_dir, const q_plan *plan) {
    size_t n = 0;
    for (size_t i = 0; i < plan->n_items; i++)
        n += plan->items[i].n_out;
    index_entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    n = 0;
    for (size_t i = 0; i < plan->n_items; i++)
        for (size_t k = 0; k < plan->items[i].n_out; k++)
            e[n++] = (index_entry){plan->items[i].out[k].name, plan->files[plan->items[i].file]};
    qsort(e, n, sizeof *e, compare_entries);
    clef_strbuf s = {0};
    clef_strbuf_appendf(&s, "{\n  \"metadata\": {\n    \"total_parameters\": %llu,\n"
                        "    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                        (unsigned long long)plan->total_parameters,
                        (unsigned long long)plan->total_size);
    for (size_t i = 0; i < n; i++) {
        clef_strbuf_append_str(&s, i ? ",\n    " : "\n    ");
        json_render_string(e[i].tensor, strlen(e[i].tensor), &s);
        clef_strbuf_append_str(&s, ": ");
        json_render_string(e[i].file, strlen(e[i].file), &s);
    }
    clef_strbuf_append_str(&s, n ? "\n  }\n}\n" : "}\n}\n");
    free(e);
    int rc = clef_strbuf_status(&s);
    if (rc == CLEF_OK)
        rc = q_write_file(dst_dir, "model.safetensors.index.json", s.data, s.len);
    clef_strbuf_free(&s);
    return rc;
}

/* ---- copied files ----------------------------------------------------------------------- */

static int copy_file(const char *src_path, const char *dst_dir, const char *name) {
    clef_file in;
    int rc = clef_file_open(&in, src_path);
    if (rc != CLEF_OK)
        return rc;
    char *dst = clef_path_join(dst_dir, name);
    char *buf = malloc(COPY_CHUNK);
    int fd = -1;
    if (!dst || !buf) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = clef_fail(CLEF_ERR_IO, "%s: cannot create: %s", dst, strerror(errno));
        goto done;
    }
    for (uint64_t at = 0; at < in.size;) {
        size_t k = in.size - at < COPY_CHUNK ? (size_t)(in.size - at) : COPY_CHUNK;
        if ((rc = clef_file_pread(&in, buf, k, at)) != CLEF_OK)
            goto done;
        for (size_t w = 0; w < k;) {
            ssize_t r = write(fd, buf + w, k - w);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                rc = clef_fail(CLEF_ERR_IO, "%s: write failed: %s", dst, strerror(errno));
                goto done;
            }
            w += (size_t)r;
        }
        at += k;
    }
    if (fsync(fd) != 0)
        rc = clef_fail(CLEF_ERR_IO, "%s: fsync failed: %s", dst, strerror(errno));
done:
    if (fd >= 0)
        close(fd);
    clef_file_close(&in);
    free(buf);
    free(dst);
    return rc;
}

/* Files of the source that the quantized release writes anew. */
static int replaced_file(const clef_release *rel, const char *name) {
    static const char *const written[] = {"config.json", "complete.json", "model.safetensors",
                                          "model.safetensors.index.json", "lm-head.safetensors"};
    for (size_t i = 0; i < sizeof written / sizeof written[0]; i++)
        if (strcmp(name, written[i]) == 0)
            return 1;
    for (size_t i = 0; i < clef_release_file_count(rel); i++) /* the model's shards */
        if (strcmp(name, clef_release_file_name(rel, i)) == 0 &&
            strcmp(name, "joint_head.safetensors") != 0)
            return 1;
    return 0;
}

int q_copy_other_files(const clef_release *rel, const char *dst_dir) {
    const char *src_dir = clef_release_dir(rel);
    DIR *d = opendir(src_dir);
    if (!d)
        return clef_fail(CLEF_ERR_IO, "%s: cannot list: %s", src_dir, strerror(errno));
    int rc = CLEF_OK;
    struct dirent *e;
    while (rc == CLEF_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || replaced_file(rel, e->d_name))
            continue;
        char *path = clef_path_join(src_dir, e->d_name);
        struct stat st;
        if (!path) {
            rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        } else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            rc = copy_file(path, dst_dir, e->d_name);
        }
        free(path);
    }
    closedir(d);
    return rc;
}

/* ---- complete.json ---------------------------------------------------------------------- */

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The value of key in the source's complete.json, or fallback (JSON text) when absent. */
static int append_field(clef_strbuf *s, const json_value *src_root, const char *key,
                        const char *fallback) {
    clef_strbuf_appendf(s, "  \"%s\": ", key);
    const json_value *v = src_root ? json_object_get(src_root, key) : NULL;
    if (!v) {
        clef_strbuf_append_str(s, fallback);
        return CLEF_OK;
    }
    return json_render_pretty_level(v, 2, 0, 1, s);
}

int q_write_complete(const char *src_dir, const char *dst_dir, const q_plan *plan) {
    char *src_path = clef_path_join(src_dir, "complete.json");
    char *text = NULL, **names = NULL;
    size_t len = 0, n = 0, cap = 0;
    json_doc *doc = NULL;
    clef_strbuf s = {0};
    int rc = CLEF_OK;
    DIR *d = NULL;
    if (!src_path)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    const json_value *root = NULL;
    if (clef_read_file(src_path, CONFIG_MAX, &text, &len) == CLEF_OK) {
        if (json_parse(text, len, NULL, &doc, NULL) == 0 &&
            json_doc_root(doc)->type == JSON_OBJECT)
            root = json_doc_root(doc);
    }
    clef_error_clear(); /* a source without complete.json is fine */
    if (!(d = opendir(dst_dir))) {
        rc = clef_fail(CLEF_ERR_IO, "%s: cannot list: %s", dst_dir, strerror(errno));
        goto done;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "complete.json") == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown)
                goto oom;
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name)))
            goto oom;
        n++;
    }
    qsort(names, n, sizeof *names, compare_names);

    static const char *const precision[] = {"\"nf4\"", "\"fp8-w8a8\"", "\"int8-convrot\""};
    clef_strbuf_append_str(&s, "{\n");
    append_field(&s, root, "repo", "null");
    clef_strbuf_append_str(&s, ",\n");
    append_field(&s, root, "revision", "null");
    clef_strbuf_appendf(&s, ",\n  \"precision\": %s,\n", precision[plan->target]);
    append_field(&s, root, "format", "\"safetensors\"");
    clef_strbuf_append_str(&s, ",\n");
    append_field(&s, root, "transformers", "null");
    /* the bitsandbytes whose quantizer the NF4 bytes reproduce */
    clef_strbuf_appendf(&s, ",\n  \"bitsandbytes\": %s,\n",
                        plan->target == CLEF_QUANTIZE_NF4 ? "\"0.50.2\"" : "null");
    append_field(&s, root, "vision", "true");
    clef_strbuf_append_str(&s, ",\n");
    append_field(&s, root, "bundle_format", "1");
    clef_strbuf_append_str(&s, ",\n");
    append_field(&s, root, "preprocessing", "{}");
    clef_strbuf_append_str(&s, ",\n  \"files\": [");
    for (size_t i = 0; i < n; i++) {
        char *path = clef_path_join(dst_dir, names[i]);
        char hex[65];
        struct stat st;
        if (!path)
            goto oom;
        if (stat(path, &st) != 0) {
            rc = clef_fail(CLEF_ERR_IO, "%s: %s", path, strerror(errno));
            free(path);
            goto done;
        }
        rc = clef_sha256_file(path, hex);
        free(path);
        if (rc != CLEF_OK)
            goto done;
        clef_strbuf_append_str(&s, i ? ",\n    {\n      \"path\": " : "\n    {\n      \"path\": ");
        json_render_string(names[i], strlen(names[i]), &s);
        clef_strbuf_appendf(&s, ",\n      \"size\": %llu,\n      \"sha256\": \"%s\"\n    }",
                            (unsigned long long)st.st_size, hex);
    }
    clef_strbuf_append_str(&s, n ? "\n  ]\n}\n" : "]\n}\n");
    if ((rc = clef_strbuf_status(&s)) == CLEF_OK)
        rc = q_write_file(dst_dir, "complete.json", s.data, s.len);
    goto done;
oom:
    rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
done:
    if (d)
        closedir(d);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    clef_strbuf_free(&s);
    json_doc_free(doc);
    free(text);
    free(src_path);
    return rc;
}

void q_remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char *path = clef_path_join(dir, e->d_name);
            if (path)
                unlink(path);
            free(path);
        }
        closedir(d);
    }
    rmdir(dir);
}
