/*
 * nf4.h — bitsandbytes NF4 weights (4-bit NormalFloat, blockwise absmax, optionally with
 * double quantization of the absmax), decoded the way bitsandbytes' own dequantize_4bit does
 * on CPU, and a reference GEMM that computes in that format.
 *
 * Layout of one quantized [out, in] weight (n = out * in elements, flattened row-major):
 *   packed  U8 [(n + 1) / 2]  element 2j in the HIGH nibble of byte j, 2j + 1 in the LOW one
 *   absmax  one per block of `blocksize` elements: U8 codes into nested_quant_map (double
 *           quant) or F32 values (no double quant)
 *   nested_absmax F32 [ceil(n_blocks / nested_blocksize)], nested_quant_map F32 [256],
 *   nested_offset (a float of the quant_state JSON), quant_map F32 [16] (the NF4 code table)
 *
 * Arithmetic (what the library computes, fp32 multiplies, no fused multiply-add):
 *   block absmax  a[b] = nested_quant_map[absmax[b]] * nested_absmax[b / nested_blocksize]
 *                 a[b] = a[b] + nested_offset                       (double quant)
 *   element       W[i] = bf16_rne(quant_map[nibble(i)] * a[i / blocksize])
 * The weight's dtype in the library is bf16, so the decoded values are bf16 numbers; the f32
 * decoders return those bf16 numbers widened (exact).
 *
 * Nothing here allocates or reads files: the descriptor points at tensors that live elsewhere
 * (the release's bytes, mapped or read once).
 */
#ifndef CLEF_QUANT_NF4_H
#define CLEF_QUANT_NF4_H

#include "quant/quant_act.h"

#include <stddef.h>
#include <stdint.h>

/* The NF4 code table of bitsandbytes (index = nibble); a release's quant_map must equal it. */
extern const float clef_nf4_table[16];

typedef struct clef_nf4_desc {
    int64_t n_elements;             /* out * in */
    int64_t blocksize;              /* elements per absmax block (64 in the releases) */
    const float *quant_map;         /* [16] */
    /* double quant (absmax_code != NULL) ... */
    const uint8_t *absmax_code;     /* [n_blocks] codes into nested_quant_map */
    const float *nested_quant_map;  /* [256] */
    const float *nested_absmax;     /* [ceil(n_blocks / nested_blocksize)] */
    int64_t nested_blocksize;       /* 256 */
    float nested_offset;
    /* ... or plain absmax (absmax_code == NULL) */
    const float *absmax;            /* [n_blocks] */
} clef_nf4_desc;

static inline int64_t clef_nf4_block_count(const clef_nf4_desc *d) {
    return (d->n_elements + d->blocksize - 1) / d->blocksize;
}

/* The `quant_state.bitsandbytes__nf4` tensor: UTF-8 JSON {"quant_type":"nf4","blocksize":64,
 * "dtype":"bfloat16","shape":[out,in],"nested_blocksize":256,"nested_dtype":"float32",
 * "nested_offset":<float>} (the nested_* keys only with double quant). */
typedef struct clef_nf4_quant_state {
    int64_t blocksize;
    int64_t shape[2];          /* [out, in] */
    int nested;                /* 1: double quant */
    int64_t nested_blocksize;
    float nested_offset;       /* the JSON number rounded to fp32, as bitsandbytes loads it */
} clef_nf4_quant_state;

/* Parse and check it (quant_type nf4, dtype bfloat16, a 2-D positive shape, blocksize and
 * nested_blocksize positive powers of two). tensor names it in the error message. Returns 0
 * or a negative clef_status with the message set. */
int clef_nf4_parse_quant_state(const char *json, size_t len, const char *tensor,
                               clef_nf4_quant_state *out);

/* The absmax of block b, decoded (the double-quant step). */
float clef_nf4_block_absmax(const clef_nf4_desc *d, int64_t b);

/* Elements [first, first + count) of the flattened weight as bf16 bits (out) or as the same
 * bf16 values widened to fp32 (out_f32). */
void clef_nf4_dequant_bf16(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                           int64_t count, uint16_t *out);
void clef_nf4_dequant_f32(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                          int64_t count, float *out);
/* Element i to out[i * stride] (a column of a k-major panel), in the dtype the library
 * dequantizes to for activations of dtype act: bitsandbytes' inference matmul dequantizes to
 * the input's dtype, so an fp32 model multiplies fp32(code * absmax) (CLEF_QUANT_ACT_F32,
 * no bf16 rounding) and a bf16 one bf16(code * absmax). */
void clef_nf4_dequant_f32_strided(const clef_nf4_desc *d, const uint8_t *packed, int64_t first,
                                  int64_t count, float *out, int64_t stride, clef_quant_act act);

/* Reference GEMM in the format's arithmetic: y[M, N] = x[M, K] W[N, K]^T, W decoded block by
 * block (in act's dtype, see above) into a tile of `tile` floats (caller's scratch, >= K
 * floats: one weight row) and never as a whole; one fused multiply-add per k, ascending
 * (fmaf: the same bits on every ISA). */
void clef_nf4_gemm_ref(const clef_nf4_desc *d, const uint8_t *packed, int64_t N, int64_t K,
                       const float *x, int64_t M, clef_quant_act act, float *y, float *tile);

#endif /* CLEF_QUANT_NF4_H */
