/*
 * st_fixture.c — see st_fixture.h.
 */
#include "st_fixture.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensor table from the parsed header. */
static int build_table(st_fixture *f) {
    f->tensors = calloc(f->header.n_tensors + 1, sizeof *f->tensors);
    if (!f->tensors)
        return -1;
    for (size_t i = 0; i < f->header.n_tensors; i++) {
        const st_tensor *s = &f->header.tensors[i];
        clef_tensor_info *t = &f->tensors[i];
        t->name = t->stored_name = s->name;
        t->dtype = s->dtype;
        t->n_dims = s->n_dims;
        memcpy(t->shape, s->shape, sizeof t->shape);
        t->offset = f->header.data_start + s->begin;
        t->n_bytes = s->end - s->begin;
    }
    f->n_tensors = f->header.n_tensors;
    return 0;
}

int st_fixture_load(st_fixture *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->file.fd = -1;
    if (clef_read_file(path, (size_t)1 << 30, &f->bytes, &f->size) != CLEF_OK ||
        st_parse_bytes((const uint8_t *)f->bytes, f->size, path, &f->header) != CLEF_OK ||
        build_table(f)) {
        fprintf(stderr, "st_fixture: %s\n", clef_last_error());
        st_fixture_free(f);
        return -1;
    }
    return 0;
}

int st_fixture_open(st_fixture *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->file.fd = -1;
    if (clef_file_open(&f->file, path) != CLEF_OK ||
        st_read_header(&f->file, path, &f->header) != CLEF_OK || build_table(f)) {
        fprintf(stderr, "st_fixture: %s\n", clef_last_error());
        st_fixture_free(f);
        return -1;
    }
    return 0;
}

void st_fixture_free(st_fixture *f) {
    clef_file_close(&f->file);
    st_header_free(&f->header);
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
    if (!t || !f->bytes)
        return NULL;
    if (n_bytes)
        *n_bytes = (size_t)t->n_bytes;
    return f->bytes + t->offset;
}

const char *st_fixture_meta(const st_fixture *f, const char *key) {
    const json_value *root = json_doc_root(f->header.doc);
    return json_get_string(json_object_get(json_object_get(root, "__metadata__"), key));
}

static const clef_tensor_info *source_find(void *ctx, const char *name) {
    return st_fixture_find(ctx, name);
}

static int source_read(void *ctx, const clef_tensor_info *t, void *dst) {
    const st_fixture *f = ctx;
    if (!f->bytes)
        return clef_file_pread(&f->file, dst, (size_t)t->n_bytes, t->offset);
    memcpy(dst, f->bytes + t->offset, (size_t)t->n_bytes);
    return CLEF_OK;
}

clef_tensor_source st_fixture_source(st_fixture *f) {
    return (clef_tensor_source){.ctx = f, .find = source_find, .read = source_read};
}
