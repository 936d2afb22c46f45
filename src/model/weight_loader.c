/*
 * weight_loader.c — find, check, stage, place and prepare weights (see weight_loader.h).
 *
 * Staging: a tensor's bytes come from the source in pieces of at most
 * staging_limit (CLEF_WEIGHT_STAGING_BYTES; a whole number of format blocks, or of elements for vectors) into
 * two host buffers used in turn for every tensor (the backend's host staging memory:
 * page-locked on a GPU), and each piece of a matrix goes to its final backend buffer with
 * clef_backend_write_async: the GPU copies piece k out of one buffer while the source reads
 * piece k + 1 into the other (reading from the page cache and the DMA overlap instead of
 * adding up). Before a copy is queued, the one before it has finished (synchronize), so the
 * buffer read next is never one a copy still reads. Matrices
 * are written in their stored format to a buffer of the owner's set, then offered to the
 * backend's prepare step; when every part of the matrix has a prepared form, the stored
 * buffer is released at once (the peak is one stored matrix).
 */
#include "model/weight_loader.h"

#include "model/quant_weights.h"

#include "core/error.h"
#include "core/shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clef_weight_loader clef_weight_loader_init(clef_backend *be, const clef_tensor_source *src,
                                           clef_buffer_set *buffers, const char *owner,
                                           const char *name_prefix, const char *config_name) {
    clef_weight_loader L = {.be = be, .src = src, .buffers = buffers, .owner = owner,
                            .name_prefix = name_prefix ? name_prefix : "",
                            .config_name = config_name ? config_name : "config",
                            .staging_limit = CLEF_WEIGHT_STAGING_BYTES,
                            /* the quantized formats of src/quant (model/quant_weights.c) */
                            .load_quantized = clef_weight_load_quantized};
    return L;
}

/* Frees both staging buffers once no queued copy reads them. */
static void free_staging(clef_weight_loader *L) {
    if ((L->staging[0] || L->staging[1]) && L->be)
        (void)clef_backend_synchronize(L->be); /* a failed copy was reported by its write */
    for (int i = 0; i < 2; i++) {
        if (L->staging[i])
            clef_backend_host_free(L->be, L->staging[i]);
        L->staging[i] = NULL;
    }
    L->staging_bytes = 0;
}

void clef_weight_loader_free(clef_weight_loader *L) { free_staging(L); }

int clef_scalar_kind_of_dtype(clef_dtype dtype, clef_scalar_kind *out) {
    switch (dtype) {
    case CLEF_DTYPE_F32: *out = CLEF_SCALAR_F32; return 1;
    case CLEF_DTYPE_BF16: *out = CLEF_SCALAR_BF16; return 1;
    case CLEF_DTYPE_F16: *out = CLEF_SCALAR_F16; return 1;
    case CLEF_DTYPE_F8_E4M3: *out = CLEF_SCALAR_FP8_E4M3; return 1;
    default: return 0;
    }
}

int clef_wtype_of_dtype(clef_dtype dtype, clef_wtype *out) {
    switch (dtype) {
    case CLEF_DTYPE_F32: *out = CLEF_WTYPE_F32; return 1;
    case CLEF_DTYPE_BF16: *out = CLEF_WTYPE_BF16; return 1;
    case CLEF_DTYPE_F16: *out = CLEF_WTYPE_F16; return 1;
    default: return 0;
    }
}

/* "joint head: " or "" */
static const char *who(const clef_weight_loader *L) { return L->owner ? L->owner : ""; }
static const char *who_sep(const clef_weight_loader *L) { return L->owner ? ": " : ""; }

static void full_name(const clef_weight_loader *L, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s", L->name_prefix, name);
}

int clef_weight_find(clef_weight_loader *L, const char *name, int n_dims, const int64_t *dims,
                     const clef_tensor_info **out) {
    char full[256], want[96], got[96];
    full_name(L, name, full, sizeof full);
    const clef_tensor_info *t = L->src->find(L->src->ctx, full);
    if (!t)
        return clef_fail(CLEF_ERR_TENSOR_MISSING, "%s%stensor '%s' is missing", who(L), who_sep(L),
                         full);
    int same = t->n_dims == n_dims;
    for (int i = 0; same && i < n_dims; i++)
        same = t->shape[i] == dims[i];
    if (!same)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "%s%stensor '%s' has shape %s, %s says %s", who(L),
                         who_sep(L), full, clef_shape_str(t->shape, t->n_dims, got, sizeof got),
                         L->config_name, clef_shape_str(dims, n_dims, want, sizeof want));
    *out = t;
    return CLEF_OK;
}

/* The staging buffers are the backend's host staging memory (page-locked on a GPU, so each
 * piece is read from the file straight into memory the device DMAs from; malloc on the CPU).
 * Their old contents never matter, so growing them is a free (after the last copy) and new
 * allocations: n of them (2: pieces in turn; 1: whole tensors, see stream_tensor). */
static int ensure_staging(clef_weight_loader *L, size_t bytes, int n) {
    if (bytes <= L->staging_bytes && (n == 1 || L->staging[1]))
        return CLEF_OK;
    if (bytes < L->staging_bytes)
        bytes = L->staging_bytes;
    free_staging(L);
    for (int i = 0; i < n; i++)
        if (!(L->staging[i] = clef_backend_host_alloc(L->be, bytes))) {
            free_staging(L);
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s%sno memory for %d %zu-byte staging "
                             "buffer(s)", who(L), who_sep(L), n, bytes);
        }
    L->staging_bytes = bytes;
    L->staging_next = 0;
    return CLEF_OK;
}

/* Called for each staged piece: bytes [offset, offset + n) of the tensor at `piece`. */
typedef int (*piece_fn)(void *user, const void *piece, uint64_t offset, size_t n);

/* Bring t's bytes through the staging buffers in pieces that are whole multiples of unit. A
 * source without read_range gives whole tensors: one buffer of the largest, and each piece's
 * copy finished before the next tensor is read into it (a second buffer of that size would
 * double the host memory of a load for nothing). */
static int stream_tensor(clef_weight_loader *L, const clef_tensor_info *t, size_t unit,
                         piece_fn fn, void *user) {
    const uint64_t total = t->n_bytes;
    if (total > SIZE_MAX)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tensor '%s' is too large for this platform", t->name);
    uint64_t piece = L->staging_limit / unit * unit;
    if (!L->src->read_range || piece == 0 || piece > total)
        piece = total;
    /* pieces: both buffers at the limit at once (growing pinned memory tensor by tensor would
     * free and allocate it again and again) */
    const int two = L->src->read_range != NULL;
    size_t want = two && L->staging_limit > piece ? L->staging_limit : (size_t)piece;
    int st = ensure_staging(L, want ? want : 1, two ? 2 : 1);
    if (st)
        return st;
    for (uint64_t off = 0; off < total; off += piece) {
        size_t n = (size_t)(total - off < piece ? total - off : piece);
        /* no copy reads this buffer now: only the last piece's can still run, from the other */
        void *buf = L->staging[two ? L->staging_next : 0];
        L->staging_next ^= two;
        st = L->src->read_range ? L->src->read_range(L->src->ctx, t, off, n, buf)
                                : L->src->read(L->src->ctx, t, buf);
        if (st)
            return clef_fail_prefix(st, "%s%sreading tensor '%s'", who(L), who_sep(L), t->name);
        if ((st = fn(user, buf, off, n)))
            return st;
        if (!two && (st = clef_backend_synchronize(L->be)))
            return st;
    }
    return CLEF_OK;
}

/* ---- matrices -------------------------------------------------------------------------- */

typedef struct write_target {
    clef_backend *be;
    char *dst;
} write_target;

/* Queue the piece's copy once the previous one (out of the other staging buffer, which the
 * next piece is read into) has finished. */
static int write_piece(void *user, const void *piece, uint64_t offset, size_t n) {
    write_target *w = user;
    int st = clef_backend_synchronize(w->be);
    return st ? st : clef_backend_write_async(w->be, w->dst + offset, piece, n);
}

/* A quantized matrix from the plug point; its buffers stay (prepared forms are added). */
static int load_quantized(clef_weight_loader *L, const char *name, const clef_tensor_info *t,
                          int64_t rows, int64_t cols, clef_matrix *whole) {
    if (!L->load_quantized)
        return clef_fail(CLEF_ERR_TENSOR_DTYPE, "%s%stensor '%s' has dtype %s, expected BF16, F16 "
                         "or F32", who(L), who_sep(L), t->name, clef_dtype_name(t->dtype));
    size_t before = L->buffers->bytes;
    int st = L->load_quantized(L->load_quantized_ctx, L, name, t, rows, cols, whole);
    if (st)
        return st;
    CLEF_ASSERT(whole->rows == rows && whole->cols == cols && whole->data);
    L->bytes += L->buffers->bytes - before;
    if (!clef_backend_supports_format(L->be, whole->type))
        return clef_fail(CLEF_ERR_UNSUPPORTED, "%s%stensor '%s' is %s: backend '%s' does not run "
                         "%s weights", who(L), who_sep(L), t->name, clef_wtype_name(whole->type),
                         L->be->ops->name, clef_wtype_name(whole->type));
    return CLEF_OK;
}

/* load_matrix_parts of a tensor stored with n_dims dims (dims: their sizes, product rows x
 * cols): the matrix view of a tensor like a Conv3d kernel [out, C, T, P, P]. prepare 0: a
 * lookup table (clef_weight_load_table), kept as stored. */
static int load_matrix_view(clef_weight_loader *L, const char *name, int n_dims,
                            const int64_t *stored_dims, int64_t rows, int64_t cols, int n_parts,
                            const int64_t *part_rows, int prepare, clef_matrix *out);

int clef_weight_load_matrix_parts(clef_weight_loader *L, const char *name, int64_t rows,
                                  int64_t cols, int n_parts, const int64_t *part_rows,
                                  clef_matrix *out) {
    const int64_t dims[2] = {rows, cols};
    return load_matrix_view(L, name, 2, dims, rows, cols, n_parts, part_rows, 1, out);
}

int clef_weight_load_table(clef_weight_loader *L, const char *name, int64_t rows, int64_t cols,
                           clef_matrix *out) {
    const int64_t dims[2] = {rows, cols};
    return load_matrix_view(L, name, 2, dims, rows, cols, 1, &rows, 0, out);
}

int clef_weight_load_matrix_nd(clef_weight_loader *L, const char *name, int n_dims,
                               const int64_t *dims, clef_matrix *out) {
    CLEF_ASSERT(n_dims >= 2 && n_dims <= CLEF_MAX_DIMS);
    int64_t cols = 1;
    for (int i = 1; i < n_dims; i++)
        cols *= dims[i];
    return load_matrix_view(L, name, n_dims, dims, dims[0], cols, 1, &dims[0], 1, out);
}

static int load_matrix_view(clef_weight_loader *L, const char *name, int n_dims,
                            const int64_t *stored_dims, int64_t rows, int64_t cols, int n_parts,
                            const int64_t *part_rows, int prepare, clef_matrix *out) {
    int64_t sum = 0;
    for (int i = 0; i < n_parts; i++)
        sum += part_rows[i];
    CLEF_ASSERT(n_parts > 0 && sum == rows); /* the model's own bookkeeping */
    char full[256];
    full_name(L, name, full, sizeof full);
    const clef_tensor_info *t = L->src->find(L->src->ctx, full);
    clef_wtype type = CLEF_WTYPE_COUNT; /* set below whenever t exists (a missing t returns) */
    clef_matrix whole;
    void *stored = NULL; /* the stored form, when the loader placed it (plain formats) */
    size_t bytes = 0;
    int st;
    if (t && !clef_wtype_of_dtype(t->dtype, &type)) {
        if ((st = load_quantized(L, name, t, rows, cols, &whole)))
            return st;
    } else {
        if ((st = clef_weight_find(L, name, n_dims, stored_dims, &t)))
            return st;
        if (!clef_backend_supports_format(L->be, type))
            return clef_fail(CLEF_ERR_UNSUPPORTED, "%s%stensor '%s' is %s: backend '%s' does not "
                             "run %s weights", who(L), who_sep(L), t->name, clef_wtype_name(type),
                             L->be->ops->name, clef_wtype_name(type));
        if ((st = clef_weight_place_bytes(L, name, n_dims, stored_dims, t->dtype, &stored, &bytes)))
            return st;
        whole = (clef_matrix){.type = type, .rows = rows, .cols = cols, .ld = cols, .data = stored};
    }
    int stored_used = 0;
    size_t placed = 0;
    int64_t r0 = 0;
    for (int i = 0; i < n_parts; r0 += part_rows[i], i++) {
        clef_matrix part = n_parts == 1 ? whole : clef_matrix_slice_rows(&whole, r0, part_rows[i]);
        size_t need = prepare ? clef_backend_prepared_size(L->be, &part) : 0;
        if (need == 0) {
            out[i] = part;
            stored_used = 1;
            continue;
        }
        void *dst = clef_buffer_set_alloc(L->buffers, need);
        if (!dst)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s%stensor '%s': out of memory for its "
                             "%zu-byte prepared form", who(L), who_sep(L), t->name, need);
        if ((st = clef_backend_prepare_matrix(L->be, &part, dst, &out[i])))
            return clef_fail_prefix(st, "%s%spreparing tensor '%s'", who(L), who_sep(L), t->name);
        placed += need;
    }
    /* a plain stored form is kept only while a part still runs from it */
    if (stored && !stored_used)
        clef_buffer_set_release_one(L->buffers, stored);
    else
        placed += bytes;
    L->bytes += placed;
    return CLEF_OK;
}

int clef_weight_place_bytes(clef_weight_loader *L, const char *name, int n_dims,
                            const int64_t *dims, clef_dtype dtype, void **out, size_t *bytes) {
    const clef_tensor_info *t;
    int st = clef_weight_find(L, name, n_dims, dims, &t);
    if (st)
        return st;
    if (t->dtype != dtype)
        return clef_fail(CLEF_ERR_TENSOR_DTYPE, "%s%stensor '%s' has dtype %s, expected %s", who(L),
                         who_sep(L), t->name, clef_dtype_name(t->dtype), clef_dtype_name(dtype));
    size_t n = 1;
    for (int i = 0; i < n_dims; i++)
        n *= (size_t)dims[i];
    const size_t want = n * clef_dtype_size(dtype);
    if (t->n_bytes != want)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "%s%stensor '%s' holds %llu bytes, its shape and "
                         "dtype say %zu", who(L), who_sep(L), t->name,
                         (unsigned long long)t->n_bytes, want);
    void *dst = clef_buffer_set_alloc(L->buffers, want);
    if (!dst)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s%stensor '%s': out of memory for %zu bytes",
                         who(L), who_sep(L), t->name, want);
    write_target wt = {L->be, dst};
    if ((st = stream_tensor(L, t, clef_dtype_size(dtype), write_piece, &wt)))
        return st;
    *out = dst;
    *bytes = want;
    return CLEF_OK;
}

clef_quant *clef_weight_new_quant(clef_weight_loader *L) {
    clef_quant *q = clef_buffer_set_host_alloc(L->buffers, sizeof *q);
    if (!q)
        clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s%sno memory for a quantization descriptor", who(L),
                  who_sep(L));
    return q;
}

int clef_weight_load_matrix(clef_weight_loader *L, const char *name, int64_t rows, int64_t cols,
                            clef_matrix *out) {
    return clef_weight_load_matrix_parts(L, name, rows, cols, 1, &rows, out);
}

/* ---- fp32 vectors ---------------------------------------------------------------------- */

typedef struct convert_target {
    clef_scalar_kind kind;
    size_t esize;
    clef_backend *be;  /* NULL: host destination */
    float *dst;        /* backend or host */
    float *conv;       /* host conversion buffer (backend destination) */
} convert_target;

static int convert_piece(void *user, const void *piece, uint64_t offset, size_t n) {
    convert_target *c = user;
    size_t first = (size_t)(offset / c->esize), count = n / c->esize;
    if (!c->be) {
        clef_convert_to_f32(c->kind, piece, count, c->dst + first);
        return CLEF_OK;
    }
    clef_convert_to_f32(c->kind, piece, count, c->conv);
    return clef_backend_write(c->be, c->dst + first, c->conv, count * sizeof(float));
}

/* Check name as a float tensor of the given shape; n = its element count. */
static int find_vector(clef_weight_loader *L, const char *name, const int64_t *shape, int n_dims,
                       const clef_tensor_info **t, clef_scalar_kind *kind, size_t *n) {
    int st = clef_weight_find(L, name, n_dims, shape, t);
    if (st)
        return st;
    if ((*t)->dtype == CLEF_DTYPE_F8_E4M3 || !clef_scalar_kind_of_dtype((*t)->dtype, kind))
        return clef_fail(CLEF_ERR_TENSOR_DTYPE, "%s%stensor '%s' has dtype %s, expected BF16, F16 "
                         "or F32", who(L), who_sep(L), (*t)->name, clef_dtype_name((*t)->dtype));
    *n = 1;
    for (int i = 0; i < n_dims; i++)
        *n *= (size_t)shape[i];
    if ((*t)->n_bytes != *n * clef_scalar_size(*kind))
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "%s%stensor '%s' holds %llu bytes, its shape and "
                         "dtype say %zu", who(L), who_sep(L), (*t)->name,
                         (unsigned long long)(*t)->n_bytes, *n * clef_scalar_size(*kind));
    return CLEF_OK;
}

int clef_weight_load_vector(clef_weight_loader *L, const char *name, const int64_t *shape,
                            int n_dims, float **out) {
    const clef_tensor_info *t = NULL;
    clef_scalar_kind kind = CLEF_SCALAR_F32;
    size_t n = 0;
    int st = find_vector(L, name, shape, n_dims, &t, &kind, &n);
    if (st)
        return st;
    float *dst = clef_buffer_set_alloc(L->buffers, n * sizeof(float));
    size_t esize = clef_scalar_size(kind);
    size_t piece_elems = L->staging_limit / esize;
    if (!L->src->read_range || piece_elems == 0 || piece_elems > n)
        piece_elems = n;
    float *conv = malloc(piece_elems * sizeof(float) + 1);
    if (!dst || !conv) {
        free(conv);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s%stensor '%s': out of memory", who(L),
                         who_sep(L), t->name);
    }
    convert_target c = {kind, esize, L->be, dst, conv};
    st = stream_tensor(L, t, esize, convert_piece, &c);
    free(conv);
    if (st)
        return st;
    L->bytes += n * sizeof(float);
    *out = dst;
    return CLEF_OK;
}

int clef_weight_read_host_f32(clef_weight_loader *L, const char *name, const int64_t *shape,
                              int n_dims, float *dst) {
    const clef_tensor_info *t = NULL;
    clef_scalar_kind kind = CLEF_SCALAR_F32;
    size_t n = 0;
    int st = find_vector(L, name, shape, n_dims, &t, &kind, &n);
    if (st)
        return st;
    convert_target c = {kind, clef_scalar_size(kind), NULL, dst, NULL};
    return stream_tensor(L, t, c.esize, convert_piece, &c);
}
