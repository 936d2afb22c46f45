/*
 * st_writer.c — a safetensors file written tensor by tensor (see st_writer.h): the header
 * first, in the layout of the safetensors library's serializer, then data at any offset.
 */
#include "release/st_writer.h"

#include "core/error.h"
#include "core/strbuf.h"
#include "json/render.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The safetensors library sorts a file's tensors by its Dtype enum, largest first; this is
 * that enum's order (BOOL < U8 < I8 < F8_E5M2 < F8_E4M3 < I16 < U16 < F16 < BF16 < I32 <
 * U32 < F32 < F64 < I64) for the dtypes the engine knows. */
static int dtype_rank(clef_dtype t) {
    switch (t) {
    case CLEF_DTYPE_BOOL: return 0;
    case CLEF_DTYPE_U8: return 1;
    case CLEF_DTYPE_I8: return 2;
    case CLEF_DTYPE_F8_E4M3: return 3;
    case CLEF_DTYPE_F16: return 4;
    case CLEF_DTYPE_BF16: return 5;
    case CLEF_DTYPE_I32: return 6;
    case CLEF_DTYPE_F32: return 7;
    case CLEF_DTYPE_I64: return 8;
    default: return -1;
    }
}

uint64_t st_tensor_bytes(clef_dtype dtype, const int64_t *shape, int n_dims, int *overflow) {
    uint64_t n = clef_dtype_size(dtype);
    *overflow = 0;
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && n > (UINT64_MAX >> 1) / (uint64_t)shape[d])) {
            *overflow = 1;
            return 0;
        }
        n *= (uint64_t)shape[d];
    }
    return n;
}

/* qsort over pointers: the library's order. */
static int compare_tensors(const void *a, const void *b) {
    const st_write_tensor *x = *(const st_write_tensor *const *)a;
    const st_write_tensor *y = *(const st_write_tensor *const *)b;
    int rx = dtype_rank(x->dtype), ry = dtype_rank(y->dtype);
    if (rx != ry)
        return rx > ry ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int write_all(int fd, const void *src, size_t len, uint64_t offset, const char *path) {
    const char *p = src;
    while (len > 0) {
        ssize_t k = pwrite(fd, p, len, (off_t)offset);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return clef_fail(CLEF_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        }
        p += k;
        len -= (size_t)k;
        offset += (uint64_t)k;
    }
    return CLEF_OK;
}

int st_writer_create(st_writer *w, const char *path, st_write_tensor *const *tensors, size_t n,
                     const char *const *metadata, size_t n_meta) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    int rc = CLEF_OK;
    clef_strbuf h = {0};
    st_write_tensor **order = malloc((n ? n : 1) * sizeof *order);
    w->path = strdup(path);
    if (!order || !w->path) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto err;
    }
    for (size_t i = 0; i < n; i++) {
        st_write_tensor *t = tensors[i];
        int overflow;
        if (dtype_rank(t->dtype) < 0 || t->n_dims < 0 || t->n_dims > CLEF_MAX_DIMS) {
            rc = clef_fail(CLEF_ERR_INVALID_ARG, "%s: tensor '%s': dtype or rank not writable",
                           path, t->name);
            goto err;
        }
        t->n_bytes = st_tensor_bytes(t->dtype, t->shape, t->n_dims, &overflow);
        if (overflow) {
            rc = clef_fail(CLEF_ERR_INVALID_ARG, "%s: tensor '%s': size overflows", path, t->name);
            goto err;
        }
        order[i] = t;
    }
    qsort(order, n, sizeof *order, compare_tensors);
    for (size_t i = 1; i < n; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0) {
            rc = clef_fail(CLEF_ERR_ST_DUPLICATE_TENSOR, "%s: tensor '%s' given twice", path,
                           order[i]->name);
            goto err;
        }

    /* {"__metadata__":{...},"name":{"dtype":"BF16","shape":[..],"data_offsets":[b,e]},...} */
    clef_strbuf_append_char(&h, '{');
    int first = 1;
    if (n_meta > 0) {
        clef_strbuf_append_str(&h, "\"__metadata__\":{");
        for (size_t m = 0; m < n_meta; m++) {
            if (m)
                clef_strbuf_append_char(&h, ',');
            json_render_string(metadata[2 * m], strlen(metadata[2 * m]), &h);
            clef_strbuf_append_char(&h, ':');
            json_render_string(metadata[2 * m + 1], strlen(metadata[2 * m + 1]), &h);
        }
        clef_strbuf_append_char(&h, '}');
        first = 0;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        st_write_tensor *t = order[i];
        t->begin = at;
        at += t->n_bytes;
        if (!first)
            clef_strbuf_append_char(&h, ',');
        first = 0;
        json_render_string(t->name, strlen(t->name), &h);
        clef_strbuf_appendf(&h, ":{\"dtype\":\"%s\",\"shape\":[", clef_dtype_name(t->dtype));
        for (int d = 0; d < t->n_dims; d++)
            clef_strbuf_appendf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        clef_strbuf_appendf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
                            (unsigned long long)at);
    }
    clef_strbuf_append_char(&h, '}');
    while (h.len % 8 != 0)
        clef_strbuf_append_char(&h, ' ');
    if ((rc = clef_strbuf_status(&h)) != CLEF_OK)
        goto err;
    w->data_start = 8 + (uint64_t)h.len;
    w->data_size = at;

    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = clef_fail(CLEF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto err;
    }
    uint8_t len_le[8];
    for (int b = 0; b < 8; b++)
        len_le[b] = (uint8_t)((uint64_t)h.len >> (8 * b));
    if ((rc = write_all(w->fd, len_le, 8, 0, path)) != CLEF_OK ||
        (rc = write_all(w->fd, h.data, h.len, 8, path)) != CLEF_OK)
        goto err;
    if (ftruncate(w->fd, (off_t)(w->data_start + w->data_size)) != 0) {
        rc = clef_fail(CLEF_ERR_IO, "%s: cannot size the file to %llu bytes: %s", path,
                       (unsigned long long)(w->data_start + w->data_size), strerror(errno));
        goto err;
    }
    free(order);
    clef_strbuf_free(&h);
    return CLEF_OK;
err:
    free(order);
    clef_strbuf_free(&h);
    st_writer_abort(w);
    return rc;
}

int st_writer_write(st_writer *w, const st_write_tensor *t, uint64_t offset, const void *src,
                    size_t len) {
    if (offset > t->n_bytes || len > t->n_bytes - offset)
        return clef_fail(CLEF_ERR_INTERNAL, "%s: tensor '%s': write of %zu bytes at %llu past its "
                         "%llu bytes", w->path, t->name, len, (unsigned long long)offset,
                         (unsigned long long)t->n_bytes);
    return write_all(w->fd, src, len, w->data_start + t->begin + offset, w->path);
}

int st_writer_close(st_writer *w) {
    int rc = CLEF_OK;
    if (w->fd >= 0) {
        if (fsync(w->fd) != 0)
            rc = clef_fail(CLEF_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
        if (close(w->fd) != 0 && rc == CLEF_OK)
            rc = clef_fail(CLEF_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
        w->fd = -1;
    }
    free(w->path);
    w->path = NULL;
    return rc;
}

void st_writer_abort(st_writer *w) {
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    free(w->path);
    w->path = NULL;
}
