/*
 * st_fixture.c — see st_fixture.h. Test code: trusts the fixture files the scripts wrote and
 * only checks enough to fail cleanly if one is missing or malformed.
 */
#include "st_fixture.h"

#include "core/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    clef_dtype dtype;
} st_dtypes[] = {{"BF16", CLEF_DTYPE_BF16}, {"F16", CLEF_DTYPE_F16}, {"F32", CLEF_DTYPE_F32},
                 {"I32", CLEF_DTYPE_I32},   {"I64", CLEF_DTYPE_I64}, {"U8", CLEF_DTYPE_U8}};

static int parse(st_fixture *f, const char *path);

int st_fixture_load(st_fixture *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->file.fd = -1;
    if (clef_read_file(path, (size_t)1 << 30, &f->bytes, &f->size) != CLEF_OK) {
        fprintf(stderr, "st_fixture: %s\n", clef_last_error());
        return -1;
    }
    return parse(f, path);
}

int st_fixture_open(st_fixture *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->file.fd = -1;
    uint8_t len8[8];
    uint64_t header_len = 0;
    if (clef_file_open(&f->file, path) != CLEF_OK ||
        clef_file_pread(&f->file, len8, 8, 0) != CLEF_OK) {
        fprintf(stderr, "st_fixture: %s\n", clef_last_error());
        clef_file_close(&f->file);
        return -1;
    }
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | len8[i];
    if (header_len > f->file.size - 8 || !(f->bytes = malloc((size_t)header_len + 8)) ||
        clef_file_pread(&f->file, f->bytes, (size_t)header_len + 8, 0) != CLEF_OK) {
        fprintf(stderr, "st_fixture: %s: bad header\n", path);
        st_fixture_free(f);
        return -1;
    }
    f->size = (size_t)f->file.size; /* offsets are checked against the file, not bytes */
    return parse(f, path);
}

static int parse(st_fixture *f, const char *path) {
    uint64_t header_len = 0;
    if (f->size < 8)
        goto bad;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | (uint8_t)f->bytes[i];
    if (header_len > f->size - 8)
        goto bad;
    f->data = f->bytes + 8 + header_len;
    if (json_parse(f->bytes + 8, (size_t)header_len, NULL, &f->header, NULL) != 0)
        goto bad;
    const json_value *root = json_doc_root(f->header);
    if (root->type != JSON_OBJECT)
        goto bad;
    f->tensors = calloc(root->u.obj.count, sizeof *f->tensors);
    for (size_t i = 0; i < root->u.obj.count; i++) {
        const json_member *m = &root->u.obj.members[i];
        if (!strcmp(m->key, "__metadata__"))
            continue;
        clef_tensor_info *t = &f->tensors[f->n_tensors];
        const char *dtype = json_get_string(json_object_get(m->value, "dtype"));
        const json_value *shape = json_object_get(m->value, "shape");
        const json_value *offs = json_object_get(m->value, "data_offsets");
        int64_t b, e;
        if (!dtype || !shape || !offs || !json_get_int64(json_array_at(offs, 0), &b) ||
            !json_get_int64(json_array_at(offs, 1), &e) || e < b ||
            (uint64_t)e > f->size - 8 - header_len || shape->u.arr.count > CLEF_MAX_DIMS)
            goto bad;
        t->dtype = CLEF_DTYPE_COUNT;
        for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
            if (!strcmp(dtype, st_dtypes[k].name))
                t->dtype = st_dtypes[k].dtype;
        if (t->dtype == CLEF_DTYPE_COUNT)
            goto bad;
        t->name = t->stored_name = m->key;
        t->n_dims = (int)shape->u.arr.count;
        for (int d = 0; d < t->n_dims; d++)
            if (!json_get_int64(json_array_at(shape, (size_t)d), &t->shape[d]))
                goto bad;
        t->offset = 8 + header_len + (uint64_t)b;
        t->n_bytes = (uint64_t)(e - b);
        f->n_tensors++;
    }
    return 0;
bad:
    fprintf(stderr, "st_fixture: %s is not a safetensors file this helper reads\n", path);
    st_fixture_free(f);
    return -1;
}

void st_fixture_free(st_fixture *f) {
    clef_file_close(&f->file);
    json_doc_free(f->header);
    free(f->tensors);
    free(f->bytes);
    memset(f, 0, sizeof *f);
    f->file.fd = -1; /* not 0: clef_file_close would close stdin */
}

const clef_tensor_info *st_fixture_find(const st_fixture *f, const char *name) {
    for (size_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

const void *st_fixture_data(const st_fixture *f, const char *name, size_t *n_bytes) {
    const clef_tensor_info *t = st_fixture_find(f, name);
    if (!t || f->file.fd >= 0)
        return NULL;
    if (n_bytes)
        *n_bytes = (size_t)t->n_bytes;
    return f->bytes + t->offset;
}

const char *st_fixture_meta(const st_fixture *f, const char *key) {
    return json_get_string(json_object_get(json_object_get(json_doc_root(f->header),
                                                           "__metadata__"), key));
}

static const clef_tensor_info *source_find(void *ctx, const char *name) {
    return st_fixture_find(ctx, name);
}

static int source_read(void *ctx, const clef_tensor_info *t, void *dst) {
    const st_fixture *f = ctx;
    if (f->file.fd >= 0)
        return clef_file_pread(&f->file, dst, (size_t)t->n_bytes, t->offset);
    memcpy(dst, f->bytes + t->offset, (size_t)t->n_bytes);
    return CLEF_OK;
}

clef_tensor_source st_fixture_source(st_fixture *f) {
    return (clef_tensor_source){.ctx = f, .find = source_find, .read = source_read};
}
