/*
 * nf4_quantize.h — the NF4 weight quantizer of bitsandbytes (quantize_4bit, quant_type "nf4",
 * blocksize 64, compress_statistics = double quant) as it runs on the CPU, for
 * `clef quantize --to nf4`. The codes and tables written are the bytes bitsandbytes writes.
 *
 * Step by step (what the library computes; fp32 unless said):
 *   1. blocks of 64 elements of the flattened bf16 weight: absmax[b] = max |w|;
 *      full blocks: s = clamp(w * (1 / max(absmax, 1e-38)), -1, 1)   (reciprocal, then product)
 *      a last partial block: absmax = max(max |w|, 1e-38), s = clamp(w / absmax, -1, 1)
 *      code = number of NF4 midpoints (t[i] + t[i+1]) / 2 below s   (torch.bucketize);
 *      two codes per byte, element 2j in the high nibble (an odd count is padded with 0.0);
 *   2. double quant: offset = mean(absmax) as torch computes it (clef_torch_sum_f32 / n);
 *      the values absmax - offset are quantized by bitsandbytes' CPU blockwise 8-bit
 *      quantizer (quantize_blockwise, blocks of 256, the signed dynamic map):
 *      nested_absmax[c] = max |v| of the block; idx = (u16)((clamp(v / nested, -1, 1) + 1) *
 *      0.5 * 65535 + 0.5) into a 65,536-entry table of the nearest dynamic-map entry.
 * The mean is the only step whose bits depend on how torch ran: its cascade summation is
 * reproduced for a vector width (16 lanes with torch's AVX-512 kernels, 8 with AVX2) and a
 * thread count (torch splits sums of >= 32,768 values across its threads; below that, or on
 * one thread, the count does not matter).
 */
#ifndef CLEF_QUANT_NF4_QUANTIZE_H
#define CLEF_QUANT_NF4_QUANTIZE_H

#include <stdint.h>

/* bitsandbytes' create_dynamic_map(signed=True): the 256-entry nested_quant_map. */
extern const float clef_bnb_dynamic_map[256];

/* How torch summed (see above): lanes 8 or 16, threads >= 1. */
typedef struct clef_torch_sum_mode {
    int lanes;
    int threads;
} clef_torch_sum_mode;

/* x.sum() of a contiguous fp32 tensor as torch's CPU kernel computes it. */
float clef_torch_sum_f32(const float *x, int64_t n, clef_torch_sum_mode mode);

/* Step 1 on elements [first, first + count) of a weight of n elements (bf16 bits w, pointing
 * at element first): first is a multiple of blocksize (even) and count is a multiple of
 * blocksize unless the range ends at n. Writes (count + 1) / 2 bytes to packed (byte
 * first / 2 onwards of the weight's codes) and count / blocksize rounded up absmax values. */
void clef_nf4_quantize_blocks(const uint16_t *w, int64_t first, int64_t count, int64_t n,
                              int64_t blocksize, uint8_t *packed, float *absmax);

/* Step 2: absmax[n_blocks] -> codes[n_blocks] (U8), nested_absmax[ceil(n_blocks / 256)]
 * and the offset. Returns 0 or CLEF_ERR_OUT_OF_MEMORY (64 KiB of table). */
int clef_nf4_double_quant(const float *absmax, int64_t n_blocks, int64_t nested_blocksize,
                          clef_torch_sum_mode mode, uint8_t *codes, float *nested_absmax,
                          float *offset);

#endif /* CLEF_QUANT_NF4_QUANTIZE_H */
