/*
 * fp8.h — FP8 W8A8 of compressed-tensors ("float-quantized": e4m3fn weights with one scale per
 * output channel, activations quantized per token at run time): weight decode bit-exact to
 * compressed-tensors' dequantize, the dynamic per-token activation quantizer exactly as
 * compressed-tensors' forward computes it, and a reference GEMM in W8A8 arithmetic.
 *
 * e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinities, 0x7f / 0xff NaN,
 * largest finite 448. Decoding is clef_fp8e4m3_to_f32 (core/numeric.h).
 *
 * Weight:       W[n, k] = bf16_rne(float(q[n, k]) * s_w[n])          (s_w BF16 or F32)
 * Activations, per token t (row of x), in the dtype the activations flow in (act):
 *   amax  = max_k |x[t, k]|
 *   s_t   = amax / 448             (rounded to act; 896 / 2 in the library, the same number)
 *   s_t   = eps(act) if s_t == 0   (torch.finfo(act).eps: 2^-23 for F32, 2^-7 for BF16)
 *   q     = e4m3_rne(clamp(x / s_t, -448, 448))   (x / s_t rounded to act first)
 * GEMM (what a W8A8 kernel computes): acc = sum_k float(qx[t, k]) * float(qw[n, k]) in fp32,
 *   y[t, n] = acc * s_t * s_w[n].
 * compressed-tensors' own forward (transformers) instead multiplies the codes back out in the
 * model's dtype and runs an ordinary linear (QDQ); the weights are decompressed in that dtype
 * too (a bf16 model holds bf16(q * s), an fp32 one fp32(q * s)):
 *   xq[t, k] = act(float(q[t, k]) * s_t),  W[n, k] = act(float(qw) * s_w[n]),
 *   y[t, n] = sum_k xq * W  (fp32 accumulation)
 * clef_fp8_gemm_qdq_ref computes that; it and W8A8 differ by the rounding of xq and W (about
 * 2.6e-3 relative L2 per linear on the fixtures, test_quant_linear).
 */
#ifndef CLEF_QUANT_FP8_H
#define CLEF_QUANT_FP8_H

#include "quant/quant_act.h"

#include <stddef.h>
#include <stdint.h>

/* fp32 -> e4m3fn, round to nearest even, as torch's cast: |x| >= 480 (and what rounds past
 * 448) gives NaN, not saturation; NaN stays NaN. Callers clamp first when they mean to
 * saturate. */
uint8_t clef_f32_to_fp8e4m3(float f);

/* Weight rows [first_row, first_row + n_rows) of a [N, K] e4m3 weight, dequantized: bf16
 * bits (out) or the same bf16 values widened (out_f32). scale[n] is the row's scale as fp32
 * (a BF16 scale widened exactly). */
void clef_fp8_dequant_bf16(const uint8_t *q, const float *scale, int64_t K, int64_t first_row,
                           int64_t n_rows, uint16_t *out);
void clef_fp8_dequant_f32(const uint8_t *q, const float *scale, int64_t K, int64_t first_row,
                          int64_t n_rows, float *out);

/* Per-token dynamic quantization of x[M, K] (row stride ldx; fp32 holding values of act's
 * dtype: for CLEF_QUANT_ACT_BF16 every x must be a bf16 number): q[M, K] e4m3 (dense) and
 * scale[M] (a number of act's dtype). */
void clef_fp8_quantize_tokens(const float *x, int64_t ldx, int64_t M, int64_t K,
                              clef_quant_act act, uint8_t *q, float *scale);

/* Reference W8A8 GEMM: y[M, N] = (sum_k qx * qw) * sx[m] * sw[n], fp32 accumulation, k
 * ascending. */
void clef_fp8_gemm_ref(const uint8_t *qw, const float *sw, int64_t N, int64_t K,
                       const uint8_t *qx, const float *sx, int64_t M, float *y);

/* Quantize a BF16 weight [N, K] (bf16 bits) the way the FP8_DYNAMIC releases are made
 * (llm-compressor's min-max observer, then compressed-tensors' compressor): per row
 *   s = bf16(max(amax / 448, FLT_EPSILON))            (amax, / 448 and the clamp in fp32)
 *   q = e4m3_rne(clamp(bf16(w / s), -448, 448))      (w / s rounded to bf16 first)
 * q [N, K] e4m3, scale [N] (bf16 numbers; the release stores them BF16 [N, 1]). */
void clef_fp8_quantize_weight(const uint16_t *w, int64_t N, int64_t K, uint8_t *q, float *scale);

/* Reference QDQ GEMM (compressed-tensors' forward): y[M, N] = sum_k act(qx * sx) *
 * act(qw * sw), one fused multiply-add per k, ascending. */
void clef_fp8_gemm_qdq_ref(const uint8_t *qw, const float *sw, int64_t N, int64_t K,
                           const uint8_t *qx, const float *sx, int64_t M, clef_quant_act act,
                           float *y);

#endif /* CLEF_QUANT_FP8_H */
