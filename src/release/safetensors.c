/*
 * safetensors.c — parse and check one safetensors header (see safetensors.h).
 *
 * Order of checks (each failure names the file and, when there is one, the tensor):
 * header length vs file size and ST_HEADER_MAX; JSON syntax; no key twice in one object (a
 * tensor listed twice: ST_DUPLICATE_TENSOR; a repeated field or __metadata__ key: schema);
 * a top-level object; per tensor the three fields and their types, dtype known, shape sane,
 * span == elements * dtype size; then over all tensors sorted by offset: no overlap, no
 * hole, the last tensor ends where the data area ends (shorter: the file is truncated).
 */
#include "release/safetensors.h"

#include "core/error.h"
#include "json/json.h"

#include <stdlib.h>
#include <string.h>

uint64_t st_shape_elements(const int64_t *shape, int n_dims, int *overflow) {
    uint64_t n = 1;
    *overflow = 0;
    for (int i = 0; i < n_dims; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > ((uint64_t)INT64_MAX) / d) {
            *overflow = 1;
            return 0;
        }
        n *= d;
    }
    return n;
}

void st_header_free(st_header *h) {
    if (!h)
        return;
    free(h->tensors);
    json_doc_free(h->doc);
    memset(h, 0, sizeof *h);
}

/* An offset must be a non-negative JSON integer; one too large for int64 is out of range. */
static int read_offset(const json_value *v, const char *file, const char *name, uint64_t *out) {
    int64_t x;
    if (!v || v->type != JSON_NUMBER || v->u.num.kind != JSON_NUMBER_INTEGER)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                         "file '%s': tensor '%s': data_offsets must hold two integers", file, name);
    if (!json_get_int64(v, &x) || x < 0)
        return clef_fail(CLEF_ERR_ST_OFFSETS_RANGE,
                         "file '%s': tensor '%s': data_offset %s is out of range", file, name,
                         v->u.num.text);
    *out = (uint64_t)x;
    return CLEF_OK;
}

static int parse_tensor(const json_member *m, const char *file,
                        st_tensor *t) {
    const char *name = m->key;
    const json_value *v = m->value;
    if (strlen(name) != m->key_len || m->key_len == 0)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                         "file '%s': a tensor name is empty or contains a NUL byte", file);
    if (v->type != JSON_OBJECT)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                         "file '%s': tensor '%s' is a JSON %s, expected an object", file, name,
                         json_type_name(v->type));
    const json_value *dtype = json_object_get(v, "dtype");
    const json_value *shape = json_object_get(v, "shape");
    const json_value *offsets = json_object_get(v, "data_offsets");
    if (!dtype || !shape || !offsets || v->u.obj.count != 3)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                         "file '%s': tensor '%s' must have exactly dtype, shape and data_offsets",
                         file, name);
    t->name = name;
    const char *dtype_name = json_get_string(dtype);
    if (!dtype_name)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA, "file '%s': tensor '%s': dtype is not a string",
                         file, name);
    if (!clef_dtype_parse(dtype_name, &t->dtype))
        return clef_fail(CLEF_ERR_ST_UNKNOWN_DTYPE, "file '%s': tensor '%s' has unknown dtype '%.32s'",
                         file, name, dtype_name);
    if (shape->type != JSON_ARRAY)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA, "file '%s': tensor '%s': shape is not an array",
                         file, name);
    if (shape->u.arr.count > CLEF_MAX_DIMS)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                         "file '%s': tensor '%s' has %zu dimensions, the engine allows %d", file,
                         name, shape->u.arr.count, CLEF_MAX_DIMS);
    t->n_dims = (int)shape->u.arr.count;
    for (int i = 0; i < t->n_dims; i++) {
        int64_t d;
        if (!json_get_int64(shape->u.arr.items[i], &d) || d < 0)
            return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                             "file '%s': tensor '%s': shape[%d] is not a non-negative integer",
                             file, name, i);
        t->shape[i] = d;
    }
    if (offsets->type != JSON_ARRAY || offsets->u.arr.count != 2)
        return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                         "file '%s': tensor '%s': data_offsets must be [begin, end]", file, name);
    int rc = read_offset(offsets->u.arr.items[0], file, name, &t->begin);
    if (rc == CLEF_OK)
        rc = read_offset(offsets->u.arr.items[1], file, name, &t->end);
    if (rc != CLEF_OK)
        return rc;
    if (t->begin > t->end)
        return clef_fail(CLEF_ERR_ST_OFFSETS_RANGE,
                         "file '%s': tensor '%s': data_offsets [%llu, %llu] begin after end", file,
                         name, (unsigned long long)t->begin, (unsigned long long)t->end);
    int overflow;
    uint64_t n = st_shape_elements(t->shape, t->n_dims, &overflow);
    uint64_t size = overflow ? 0 : n * clef_dtype_size(t->dtype);
    if (overflow || size / clef_dtype_size(t->dtype) != n || t->end - t->begin != size)
        return clef_fail(CLEF_ERR_ST_SIZE_MISMATCH,
                         "file '%s': tensor '%s': data_offsets span %llu bytes, shape x %s needs "
                         "%llu",
                         file, name, (unsigned long long)(t->end - t->begin), clef_dtype_name(t->dtype),
                         overflow ? 0ULL : (unsigned long long)size);
    return CLEF_OK;
}

static int by_begin(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors must tile [0, data_size): sorted by begin, each starts where the previous
 * ended. A gap or overlap means a damaged or hand-edited header. */
static int check_layout(const st_header *h, const char *file) {
    size_t n = h->n_tensors;
    st_tensor *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", file);
    memcpy(sorted, h->tensors, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_begin);
    int rc = CLEF_OK;
    uint64_t at = 0;
    int contiguous = 1;
    for (size_t i = 0; i < n && rc == CLEF_OK; i++) {
        const st_tensor *t = &sorted[i];
        if (t->begin < at)
            rc = clef_fail(CLEF_ERR_ST_OFFSETS_OVERLAP,
                           "file '%s': tensor '%s' data [%llu, %llu) overlaps tensor '%s' "
                           "(ends at %llu)",
                           file, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                           sorted[i - 1].name, (unsigned long long)at);
        else if (t->begin > at)
            contiguous = 0;
        if (rc == CLEF_OK && t->end > h->data_size && !contiguous)
            rc = clef_fail(CLEF_ERR_ST_OFFSETS_RANGE,
                           "file '%s': tensor '%s' data [%llu, %llu) lies past the end of the data "
                           "area (%llu bytes)",
                           file, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                           (unsigned long long)h->data_size);
        at = t->end;
    }
    if (rc == CLEF_OK && at > h->data_size)
        rc = clef_fail(CLEF_ERR_ST_TRUNCATED,
                       "file '%s' is truncated: its header places tensor data up to byte %llu of "
                       "the data area, the file holds %llu",
                       file, (unsigned long long)at, (unsigned long long)h->data_size);
    if (rc == CLEF_OK && !contiguous) {
        uint64_t prev = 0;
        for (size_t i = 0; i < n; i++) {
            if (sorted[i].begin != prev) {
                rc = clef_fail(CLEF_ERR_ST_OFFSETS_RANGE,
                               "file '%s': tensor '%s' starts at data offset %llu, leaving a hole "
                               "after offset %llu",
                               file, sorted[i].name, (unsigned long long)sorted[i].begin,
                               (unsigned long long)prev);
                break;
            }
            prev = sorted[i].end;
        }
    }
    if (rc == CLEF_OK && at < h->data_size)
        rc = clef_fail(CLEF_ERR_ST_OFFSETS_RANGE,
                       "file '%s': %llu bytes after the last tensor's data (offset %llu) belong "
                       "to no tensor",
                       file, (unsigned long long)(h->data_size - at), (unsigned long long)at);
    free(sorted);
    return rc;
}

int st_header_parse(const char *json, size_t len, uint64_t data_size, const char *file,
                    st_header *out) {
    memset(out, 0, sizeof *out);
    out->data_size = data_size;
    out->data_start = 8 + (uint64_t)len;
    json_error jerr;
    /* A name listed twice is damage (which entry is the tensor?), not Python-style data:
     * refuse it rather than let the last entry win and its twin's bytes become a "hole". */
    json_parse_opts popts = {.max_depth = 64, .reject_duplicate_keys = 1};
    int prc = json_parse(json, len, &popts, &out->doc, &jerr);
    if (prc != 0) {
        if (prc == JSON_PARSE_NOMEM)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory parsing its header",
                             file);
        if (prc == JSON_PARSE_DUPLICATE_KEY && jerr.depth == 1 && strcmp(jerr.key, "__metadata__") != 0)
            return clef_fail(CLEF_ERR_ST_DUPLICATE_TENSOR,
                             "file '%s': tensor '%s' is listed twice in the header (line %d column "
                             "%d)",
                             file, jerr.key, jerr.line, jerr.column);
        if (prc == JSON_PARSE_DUPLICATE_KEY)
            return clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                             "file '%s': header has a %s at line %d column %d (header byte %zu)", file, jerr.msg,
                             jerr.line, jerr.column, jerr.offset);
        return clef_fail(CLEF_ERR_ST_HEADER_JSON,
                         "file '%s': header is not valid JSON: %s at line %d column %d (header byte %zu)", file,
                         jerr.msg, jerr.line, jerr.column, jerr.offset);
    }
    const json_value *root = json_doc_root(out->doc);
    int rc = CLEF_OK;
    if (root->type != JSON_OBJECT) {
        rc = clef_fail(CLEF_ERR_ST_HEADER_SCHEMA, "file '%s': header is a JSON %s, expected an object",
                       file, json_type_name(root->type));
        goto fail;
    }
    out->tensors = calloc(root->u.obj.count ? root->u.obj.count : 1, sizeof *out->tensors);
    if (!out->tensors) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", file);
        goto fail;
    }
    for (size_t i = 0; i < root->u.obj.count; i++) {
        const json_member *m = &root->u.obj.members[i];
        if (strcmp(m->key, "__metadata__") == 0 && m->key_len == 12) {
            if (m->value->type != JSON_OBJECT) {
                rc = clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                               "file '%s': __metadata__ is a JSON %s, expected an object", file,
                               json_type_name(m->value->type));
                goto fail;
            }
            for (size_t k = 0; k < m->value->u.obj.count; k++)
                if (m->value->u.obj.members[k].value->type != JSON_STRING) {
                    rc = clef_fail(CLEF_ERR_ST_HEADER_SCHEMA,
                                   "file '%s': __metadata__ entry '%s' is not a string", file,
                                   m->value->u.obj.members[k].key);
                    goto fail;
                }
            out->n_metadata = m->value->u.obj.count;
            continue;
        }
        rc = parse_tensor(m, file, &out->tensors[out->n_tensors]);
        if (rc != CLEF_OK)
            goto fail;
        out->n_tensors++;
    }
    rc = check_layout(out, file);
    if (rc != CLEF_OK)
        goto fail;
    return CLEF_OK;
fail:
    st_header_free(out);
    return rc;
}

static uint64_t read_le64(const uint8_t b[8]) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

/* The 8-byte length against the file size: shared by the file and in-memory paths. */
static int check_header_length(uint64_t n, uint64_t file_size, const char *file) {
    if (n > ST_HEADER_MAX)
        return clef_fail(CLEF_ERR_ST_HEADER_SIZE,
                         "file '%s': header length %llu is over the %llu-byte limit (not a "
                         "safetensors file, or damaged)",
                         file, (unsigned long long)n, (unsigned long long)ST_HEADER_MAX);
    if (n > file_size - 8)
        return clef_fail(CLEF_ERR_ST_HEADER_SIZE,
                         "file '%s': header length %llu runs past the end of the file (%llu bytes)",
                         file, (unsigned long long)n, (unsigned long long)file_size);
    if (n < 2)
        return clef_fail(CLEF_ERR_ST_HEADER_JSON, "file '%s': header of %llu bytes cannot be JSON",
                         file, (unsigned long long)n);
    return CLEF_OK;
}

int st_parse_bytes(const uint8_t *bytes, size_t size, const char *file, st_header *out) {
    memset(out, 0, sizeof *out);
    if (size < 8)
        return clef_fail(CLEF_ERR_ST_TRUNCATED,
                         "file '%s' is %zu bytes, shorter than the 8-byte header length", file, size);
    uint64_t n = read_le64(bytes);
    int rc = check_header_length(n, size, file);
    if (rc != CLEF_OK)
        return rc;
    return st_header_parse((const char *)bytes + 8, (size_t)n, size - 8 - n, file, out);
}

int st_read_header(const clef_file *f, const char *file, st_header *out) {
    memset(out, 0, sizeof *out);
    if (f->size < 8)
        return clef_fail(CLEF_ERR_ST_TRUNCATED,
                         "file '%s' is %llu bytes, shorter than the 8-byte header length", file,
                         (unsigned long long)f->size);
    uint8_t len_bytes[8];
    int rc = clef_file_pread(f, len_bytes, 8, 0);
    if (rc != CLEF_OK)
        return rc;
    uint64_t n = read_le64(len_bytes);
    rc = check_header_length(n, f->size, file);
    if (rc != CLEF_OK)
        return rc;
    char *text = malloc((size_t)n);
    if (!text)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory for a %llu-byte header",
                         file, (unsigned long long)n);
    rc = clef_file_pread(f, text, (size_t)n, 8);
    if (rc == CLEF_OK)
        rc = st_header_parse(text, (size_t)n, f->size - 8 - n, file, out);
    free(text);
    return rc;
}
