/*
 * quant_weights.c — the weight loader's path for quantized linears (weight_loader.h calls it
 * when a matrix is stored as NF4 U8, F8_E4M3 or I8): the stored data and its companions, read
 * from the release as they are and placed once in backend memory in the typed formats of
 * weight_format.h — no dequantized copy is ever made (resident bytes = the quantized size).
 *
 *   NF4   P.weight U8 [(n+1)/2, 1] + .absmax U8 (double quant) or F32, .quant_map F32 [16]
 *         (must be bitsandbytes' NF4 table), .nested_absmax F32, .nested_quant_map F32 [256],
 *         .quant_state.bitsandbytes__nf4 (JSON: shape must be [rows, cols])
 *   FP8   P.weight F8_E4M3 [rows, cols] + P.weight_scale BF16/F32 [rows, 1] (widened to fp32)
 *   INT8  P.weight I8 [rows, cols] + P.weight_scale F32/BF16 [rows, 1]; ConvRot group 256
 *         (the release reader has checked comfy_quant and cols % 256)
 * It is the loader's plug point (clef_weight_quant_fn, weight_loader.h; installed by
 * clef_weight_loader_init): the loader then checks the backend runs the format, slices parts
 * and prepares. Tensors are read whole through host memory and written with the backend's
 * write (no staging in pieces yet); the descriptor comes from clef_weight_new_quant and lives
 * with the weights.
 */
#include "model/quant_weights.h"

#include "core/convert.h"
#include "core/error.h"
#include "quant/nf4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* read a tensor by full name into malloc'd host memory; a status naming it */
static int read_host(clef_weight_loader *L, const char *full, clef_dtype want1, clef_dtype want2,
                     const clef_tensor_info **info, void **out) {
    const clef_tensor_info *t = L->src->find(L->src->ctx, full);
    if (!t)
        return clef_fail(CLEF_ERR_TENSOR_MISSING, "tensor '%s' is missing", full);
    if (t->dtype != want1 && t->dtype != want2)
        return clef_fail(CLEF_ERR_TENSOR_DTYPE, "tensor '%s' has dtype %s, expected %s", full,
                         clef_dtype_name(t->dtype), clef_dtype_name(want1));
    void *buf = malloc((size_t)t->n_bytes + 1);
    if (!buf)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': no memory to read it", full);
    int st = L->src->read(L->src->ctx, t, buf);
    if (st) {
        free(buf);
        return clef_fail_prefix(st, "reading tensor '%s'", full);
    }
    *info = t;
    *out = buf;
    return CLEF_OK;
}

/* host bytes -> new backend buffer of the owner's set */
static int place(clef_weight_loader *L, const void *host, size_t bytes, const char *full,
                 void **out) {
    void *dst = clef_buffer_set_alloc(L->buffers, bytes ? bytes : 1);
    if (!dst)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory for %zu bytes", full,
                         bytes);
    int st = bytes ? clef_backend_write(L->be, dst, host, bytes) : CLEF_OK;
    if (st)
        return clef_fail_prefix(st, "placing tensor '%s'", full);
    *out = dst;
    return CLEF_OK;
}

/* a companion read and placed as is; *n_elements its element count */
static int companion(clef_weight_loader *L, const char *full_weight, const char *suffix,
                     clef_dtype want, size_t *n_elements, void **out) {
    char full[320];
    snprintf(full, sizeof full, "%s%s", full_weight, suffix);
    const clef_tensor_info *t = NULL;
    void *host = NULL;
    int st = read_host(L, full, want, want, &t, &host);
    if (st)
        return st;
    *n_elements = (size_t)(t->n_bytes / clef_dtype_size(t->dtype));
    st = place(L, host, (size_t)t->n_bytes, full, out);
    free(host);
    return st;
}

/* per-row scales [rows] or [rows, 1], BF16 or F32, as fp32 in backend memory */
static int row_scales(clef_weight_loader *L, const char *full_weight, int64_t rows,
                      const float **out) {
    char full[320];
    snprintf(full, sizeof full, "%s_scale", full_weight); /* P.weight -> P.weight_scale */
    const clef_tensor_info *t = NULL;
    void *host = NULL;
    int st = read_host(L, full, CLEF_DTYPE_F32, CLEF_DTYPE_BF16, &t, &host);
    if (st)
        return st;
    size_t n = (size_t)(t->n_bytes / clef_dtype_size(t->dtype));
    if (n != (size_t)rows) {
        free(host);
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s' has %zu scales, the weight %lld rows",
                         full, n, (long long)rows);
    }
    float *f = malloc(sizeof(float) * n + 1);
    if (!f) {
        free(host);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': no memory", full);
    }
    clef_convert_to_f32(t->dtype == CLEF_DTYPE_BF16 ? CLEF_SCALAR_BF16 : CLEF_SCALAR_F32, host, n, f);
    void *dst = NULL;
    st = place(L, f, sizeof(float) * n, full, &dst);
    free(host);
    free(f);
    *out = dst;
    return st;
}

static int load_nf4(clef_weight_loader *L, const char *full, const clef_tensor_info *t,
                    int64_t rows, int64_t cols, clef_quant *q, clef_matrix *m) {
    char name[320];
    snprintf(name, sizeof name, "%s.quant_state.bitsandbytes__nf4", full);
    const clef_tensor_info *ts = NULL;
    void *json = NULL;
    int st = read_host(L, name, CLEF_DTYPE_U8, CLEF_DTYPE_U8, &ts, &json);
    if (st)
        return st;
    clef_nf4_quant_state qs;
    st = clef_nf4_parse_quant_state(json, (size_t)ts->n_bytes, name, &qs);
    free(json);
    if (st)
        return st;
    if (qs.shape[0] != rows || qs.shape[1] != cols)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s': quant_state shape [%lld, %lld], "
                         "config says [%lld, %lld]", full, (long long)qs.shape[0],
                         (long long)qs.shape[1], (long long)rows, (long long)cols);
    if (qs.blocksize != 64 || cols % 64 != 0 || !qs.nested)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "tensor '%s': NF4 with blocksize %lld, %lld "
                         "columns, double quant %d: only blocksize 64, columns a multiple of 64, "
                         "double quant are run", full, (long long)qs.blocksize, (long long)cols,
                         qs.nested);
    const int64_t n = rows * cols, blocks = (n + 63) / 64;
    size_t count = 0;
    void *absmax = NULL, *code = NULL, *nested_absmax = NULL, *nested_code = NULL;
    if ((st = companion(L, full, ".absmax", CLEF_DTYPE_U8, &count, &absmax)))
        return st;
    if (count != (size_t)blocks)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s.absmax' has %zu blocks, expected %lld",
                         full, count, (long long)blocks);
    if ((st = companion(L, full, ".quant_map", CLEF_DTYPE_F32, &count, &code)))
        return st;
    if (count != 16)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s.quant_map' has %zu entries, expected 16",
                         full, count);
    if ((st = companion(L, full, ".nested_absmax", CLEF_DTYPE_F32, &count, &nested_absmax)))
        return st;
    if (count != (size_t)((blocks + qs.nested_blocksize - 1) / qs.nested_blocksize))
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s.nested_absmax' has %zu entries", full,
                         count);
    if ((st = companion(L, full, ".nested_quant_map", CLEF_DTYPE_F32, &count, &nested_code)))
        return st;
    if (count != 256)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s.nested_quant_map' has %zu entries, "
                         "expected 256", full, count);
    q->u.nf4 = (clef_quant_nf4){.block = 64, .absmax_q = absmax, .nested_absmax = nested_absmax,
                                .nested_block = qs.nested_blocksize,
                                .nested_offset = qs.nested_offset, .code = code,
                                .nested_code = nested_code};
    if (t->n_bytes != (uint64_t)((n + 1) / 2))
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s' holds %llu bytes, [%lld, %lld] NF4 "
                         "needs %lld", full, (unsigned long long)t->n_bytes, (long long)rows,
                         (long long)cols, (long long)((n + 1) / 2));
    m->type = CLEF_WTYPE_NF4;
    return CLEF_OK;
}

int clef_weight_load_quantized(void *ctx, clef_weight_loader *L, const char *name,
                               const clef_tensor_info *t, int64_t rows, int64_t cols,
                               clef_matrix *out) {
    (void)ctx;
    char full[256];
    snprintf(full, sizeof full, "%s%s", L->name_prefix, name);
    clef_matrix m = {.rows = rows, .cols = cols, .ld = cols};
    clef_quant *q = clef_weight_new_quant(L); /* host memory, lives with the weights */
    if (!q)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': no memory for its descriptor", full);
    int st;
    if (t->dtype == CLEF_DTYPE_U8) {
        st = load_nf4(L, full, t, rows, cols, q, &m);
    } else {
        if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols)
            return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s' is not [%lld, %lld]", full,
                             (long long)rows, (long long)cols);
        if (t->dtype == CLEF_DTYPE_F8_E4M3) {
            m.type = CLEF_WTYPE_FP8_E4M3;
            st = row_scales(L, full, rows, &q->u.fp8.weight_scale);
        } else if (t->dtype == CLEF_DTYPE_I8) {
            if (cols % 256 != 0)
                return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s': INT8 ConvRot needs in "
                                 "features a multiple of 256, got %lld", full, (long long)cols);
            m.type = CLEF_WTYPE_INT8_CONVROT;
            q->u.int8_convrot.rotation_group = 256;
            st = row_scales(L, full, rows, &q->u.int8_convrot.weight_scale);
        } else {
            return clef_fail(CLEF_ERR_TENSOR_DTYPE, "tensor '%s' has dtype %s: not a weight "
                             "format", full, clef_dtype_name(t->dtype));
        }
    }
    if (st)
        return st;
    /* the stored data, as is */
    void *host = NULL;
    const clef_tensor_info *ti = NULL;
    if ((st = read_host(L, full, t->dtype, t->dtype, &ti, &host)))
        return st;
    void *data = NULL;
    st = place(L, host, (size_t)t->n_bytes, full, &data);
    free(host);
    if (st)
        return st;
    m.data = data;
    m.quant = q;
    *out = m;
    return CLEF_OK;
}
