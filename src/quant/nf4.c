/*
 * nf4.c — NF4 (bitsandbytes 4-bit, double quant) decode and reference GEMM; see nf4.h for the
 * layout and the arithmetic.
 */
#include "quant/nf4.h"

#include "core/error.h"
#include "core/numeric.h"
#include "json/json.h"

#include <math.h>
#include <string.h>

const float clef_nf4_table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

static int is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int clef_nf4_parse_quant_state(const char *json, size_t len, const char *tensor,
                               clef_nf4_quant_state *out) {
    memset(out, 0, sizeof *out);
    json_doc *doc = NULL;
    if (json_parse(json, len, NULL, &doc, NULL) != 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tensor '%s': quant_state is not valid JSON",
                         tensor);
    const json_value *root = json_doc_root(doc);
    const json_value *shape = json_object_get(root, "shape");
    const char *quant_type = json_get_string(json_object_get(root, "quant_type"));
    const char *dtype = json_get_string(json_object_get(root, "dtype"));
    int status = CLEF_ERR_INVALID_ARG;
    if (!quant_type || strcmp(quant_type, "nf4") != 0) {
        clef_fail(status, "tensor '%s': quant_state quant_type is '%s', expected 'nf4'", tensor,
                  quant_type ? quant_type : "(missing)");
        goto done;
    }
    if (!dtype || strcmp(dtype, "bfloat16") != 0) {
        clef_fail(status, "tensor '%s': quant_state dtype is '%s', expected 'bfloat16'", tensor,
                  dtype ? dtype : "(missing)");
        goto done;
    }
    if (!json_get_int64(json_object_get(root, "blocksize"), &out->blocksize) ||
        !is_pow2(out->blocksize)) {
        clef_fail(status, "tensor '%s': quant_state blocksize missing or not a power of two",
                  tensor);
        goto done;
    }
    if (!shape || json_array_at(shape, 2) || !json_array_at(shape, 1) ||
        !json_get_int64(json_array_at(shape, 0), &out->shape[0]) ||
        !json_get_int64(json_array_at(shape, 1), &out->shape[1]) || out->shape[0] <= 0 ||
        out->shape[1] <= 0) {
        clef_fail(status, "tensor '%s': quant_state shape is not [out, in] with positive sizes",
                  tensor);
        goto done;
    }
    const json_value *offset = json_object_get(root, "nested_offset");
    if (offset) {
        double v;
        if (!json_get_double(offset, &v) ||
            !json_get_int64(json_object_get(root, "nested_blocksize"), &out->nested_blocksize) ||
            !is_pow2(out->nested_blocksize)) {
            clef_fail(status, "tensor '%s': quant_state nested_offset / nested_blocksize invalid",
                      tensor);
            goto done;
        }
        out->nested = 1;
        out->nested_offset = (float)v;
    }
    status = 0;
done:
    json_doc_free(doc);
    return status;
}

float clef_nf4_block_absmax(const clef_nf4_desc *d, int64_t b) {
    if (!d->absmax_code)
        return d->absmax[b];
    /* bitsandbytes multiplies in fp32 and then adds the offset in a second fp32 operation.
     * The product is formed exactly in double and rounded once to fp32, which is the fp32
     * product, and keeps the compiler from fusing it with the add (-ffp-contract). */
    float product = (float)((double)d->nested_quant_map[d->absmax_code[b]] *
                            (double)d->nested_absmax[b / d->nested_blocksize]);
    return product + d->nested_offset;
}

static inline uint8_t nf4_nibble(const uint8_t *packed, int64_t i) {
    uint8_t byte = packed[i >> 1];
    return (i & 1) ? (uint8_t)(byte & 0x0f) : (uint8_t)(byte >> 4);
}

void clef_nf4_dequant_bf16(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                           int64_t count, uint16_t *out) {
    int64_t i = first, end = first + count;
    while (i < end) {
        int64_t b = i / d->blocksize;
        int64_t block_end = (b + 1) * d->blocksize;
        if (block_end > end)
            block_end = end;
        float absmax = clef_nf4_block_absmax(d, b);
        for (; i < block_end; i++)
            *out++ = clef_f32_to_bf16(d->quant_map[nf4_nibble(packed, i)] * absmax);
    }
}

void clef_nf4_dequant_f32(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                          int64_t count, float *out) {
    clef_nf4_dequant_f32_strided(d, packed, first, count, out, 1, CLEF_QUANT_ACT_BF16);
}

void clef_nf4_dequant_f32_strided(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                                  int64_t count, float *out, int64_t stride, clef_quant_act act) {
    int64_t i = first, end = first + count;
    while (i < end) {
        int64_t b = i / d->blocksize;
        int64_t block_end = (b + 1) * d->blocksize;
        if (block_end > end)
            block_end = end;
        float absmax = clef_nf4_block_absmax(d, b);
        if (act == CLEF_QUANT_ACT_F32) {
            for (; i < block_end; i++, out += stride)
                *out = d->quant_map[nf4_nibble(packed, i)] * absmax;
        } else {
            for (; i < block_end; i++, out += stride)
                *out = clef_bf16_to_f32(
                    clef_f32_to_bf16(d->quant_map[nf4_nibble(packed, i)] * absmax));
        }
    }
}

void clef_nf4_gemm_ref(const clef_nf4_desc *d, const uint8_t *packed, int64_t N, int64_t K,
                       const float *x, int64_t M, clef_quant_act act, float *y, float *tile) {
    for (int64_t n = 0; n < N; n++) {
        /* one weight row, decoded from its blocks into the tile; the model never holds more */
        clef_nf4_dequant_f32_strided(d, packed, n * K, K, tile, 1, act);
        for (int64_t m = 0; m < M; m++) {
            const float *xm = x + m * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc = fmaf(xm[k], tile[k], acc);
            y[m * N + n] = acc;
        }
    }
}
