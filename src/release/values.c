/*
 * values.c — value checks of scale and NF4 metadata tensors (see values.h).
 */
#include "release/values.h"

#include "core/error.h"
#include "core/numeric.h"
#include "json/json.h"

#include <math.h>
#include <string.h>

/* bitsandbytes' NF4 code table (formats.md), index = nibble. */
static const float nf4_table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

static float element(const clef_tensor_info *t, const void *data, uint64_t i) {
    const unsigned char *p = data;
    switch (t->dtype) {
    case CLEF_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return clef_bf16_to_f32(h);
    }
    case CLEF_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return clef_f16_to_f32(h);
    }
    case CLEF_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    default:
        return NAN; /* not a float dtype: the dtype check refused it already */
    }
}

static int check_nf4_state(const clef_tensor_info *t, const void *data,
                           const clef_expected_tensor *e, const char *file) {
    json_doc *doc = NULL;
    json_error err;
    json_parse_opts opts = {.max_depth = 16};
    if (json_parse(data, (size_t)t->n_bytes, &opts, &doc, &err) != 0)
        return clef_fail(CLEF_ERR_QUANT_CONFIG,
                         "file '%s': tensor '%s' is not the UTF-8 JSON quant_state of "
                         "bitsandbytes: %s",
                         file, t->stored_name, err.msg);
    const json_value *root = json_doc_root(doc);
    const char *type = json_get_string(json_object_get(root, "quant_type"));
    const json_value *shape = json_object_get(root, "shape");
    int64_t blocksize = 0, s0 = -1, s1 = -1;
    json_get_int64(json_object_get(root, "blocksize"), &blocksize);
    if (shape && shape->type == JSON_ARRAY && shape->u.arr.count == 2) {
        json_get_int64(shape->u.arr.items[0], &s0);
        json_get_int64(shape->u.arr.items[1], &s1);
    }
    int rc = CLEF_OK;
    if (!type || strcmp(type, "nf4") != 0 || blocksize != 64 || s0 != e->weight_shape[0] ||
        s1 != e->weight_shape[1])
        rc = clef_fail(CLEF_ERR_QUANT_CONFIG,
                       "file '%s': tensor '%s' says quant_type %s, blocksize %lld, shape [%lld, "
                       "%lld]; expected nf4, 64, [%lld, %lld]",
                       file, t->stored_name, type ? type : "(missing)", (long long)blocksize,
                       (long long)s0, (long long)s1, (long long)e->weight_shape[0],
                       (long long)e->weight_shape[1]);
    json_doc_free(doc);
    return rc;
}

int clef_check_tensor_values(const clef_tensor_info *t, const void *data,
                             const clef_expected_tensor *e, const char *file) {
    uint64_t n = clef_dtype_size(t->dtype) ? t->n_bytes / clef_dtype_size(t->dtype) : 0;
    switch (e->check) {
    case CLEF_CHECK_NONE:
        return CLEF_OK;
    case CLEF_CHECK_SCALE:
    case CLEF_CHECK_FINITE:
        for (uint64_t i = 0; i < n; i++) {
            float v = element(t, data, i);
            int bad = !isfinite(v) || (e->check == CLEF_CHECK_SCALE && !(v > 0));
            if (bad)
                return clef_fail(CLEF_ERR_SCALE_INVALID,
                                 "file '%s': tensor '%s' element %llu is %g; %s", file,
                                 t->stored_name, (unsigned long long)i, (double)v,
                                 e->check == CLEF_CHECK_SCALE
                                     ? "a quantization scale must be finite and positive"
                                     : "the table must be finite");
        }
        return CLEF_OK;
    case CLEF_CHECK_NF4_QUANT_MAP:
        for (uint64_t i = 0; i < n && i < 16; i++) {
            float v = element(t, data, i);
            if (memcmp(&v, &nf4_table[i], sizeof v) != 0)
                return clef_fail(CLEF_ERR_QUANT_CONFIG,
                                 "file '%s': tensor '%s' entry %llu is %.9g, the NF4 table has %.9g",
                                 file, t->stored_name, (unsigned long long)i, (double)v,
                                 (double)nf4_table[i]);
        }
        return CLEF_OK;
    case CLEF_CHECK_NF4_STATE:
        return check_nf4_state(t, data, e, file);
    }
    return CLEF_OK;
}

/* ---- non-finite weights ---------------------------------------------------------------------- */

/* 1 if any of n elements of `bytes` bytes each has all the bits of mask set (an all-ones
 * exponent): a branch-free loop the compiler vectorizes, ~5x the speed of the counting loop
 * below, so the load's check of every weight costs little where all are finite. */
static int any_all_ones(const void *data, uint64_t n, int bytes, uint32_t mask) {
    unsigned acc = 0;
    if (bytes == 1) {
        const uint8_t *p = data;
        for (uint64_t i = 0; i < n; i++)
            acc |= (uint8_t)(p[i] & mask) == mask;
    } else if (bytes == 2) {
        const unsigned char *p = data;
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            acc |= (uint16_t)(h & mask) == mask;
        }
    } else {
        const unsigned char *p = data;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            acc |= (u & mask) == mask;
        }
    }
    return acc != 0;
}

/* Bit tests rather than conversions: an all-ones exponent is NaN or Inf in each format. */
uint64_t clef_count_nonfinite(clef_dtype dtype, const void *data, uint64_t n, uint64_t *first,
                              int *first_nan) {
    /* the common case first: nothing to count */
    switch (dtype) {
    case CLEF_DTYPE_BF16: if (!any_all_ones(data, n, 2, 0x7F80u)) return 0; break;
    case CLEF_DTYPE_F16: if (!any_all_ones(data, n, 2, 0x7C00u)) return 0; break;
    case CLEF_DTYPE_F32: if (!any_all_ones(data, n, 4, 0x7F800000u)) return 0; break;
    case CLEF_DTYPE_F8_E4M3: if (!any_all_ones(data, n, 1, 0x7Fu)) return 0; break;
    default: return 0;
    }
    const unsigned char *p = data;
    uint64_t count = 0;
    for (uint64_t i = 0; i < n; i++) {
        int bad = 0, nan = 0;
        switch (dtype) {
        case CLEF_DTYPE_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            bad = (h & 0x7F80u) == 0x7F80u;
            nan = bad && (h & 0x007Fu);
            break;
        }
        case CLEF_DTYPE_F16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            bad = (h & 0x7C00u) == 0x7C00u;
            nan = bad && (h & 0x03FFu);
            break;
        }
        case CLEF_DTYPE_F32: {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            bad = (u & 0x7F800000u) == 0x7F800000u;
            nan = bad && (u & 0x007FFFFFu);
            break;
        }
        case CLEF_DTYPE_F8_E4M3:
            bad = nan = (p[i] & 0x7Fu) == 0x7Fu;
            break;
        default:
            return 0;
        }
        if (bad && count++ == 0) {
            *first = i;
            *first_nan = nan;
        }
    }
    return count;
}

int clef_check_weight_finite(const clef_tensor_info *t, const char *file, const void *data,
                             uint64_t n_bytes, uint64_t offset_elems) {
    /* the count is not reported: a piece-wise check sees only part of the tensor */
    size_t esize = clef_dtype_size(t->dtype);
    uint64_t first = 0;
    int nan = 0;
    uint64_t bad = clef_count_nonfinite(t->dtype, data, esize ? n_bytes / esize : 0, &first, &nan);
    if (!bad)
        return CLEF_OK;
    return clef_fail(CLEF_ERR_TENSOR_VALUES,
                     "file '%s': weight '%s' holds %s at element %llu: the release is damaged "
                     "(a weight must be finite)",
                     file, t->stored_name, nan ? "NaN" : "Inf",
                     (unsigned long long)(offset_elems + first));
}
