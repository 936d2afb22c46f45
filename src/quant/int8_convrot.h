/*
 * int8_convrot.h — INT8 ConvRot weights (comfy-kitchen "int8_tensorwise" with convrot, group
 * 256, one scale per output channel): weight decode bit-exact to comfy-kitchen's dequantizer,
 * the dynamic per-token activation quantizer of its eager int8 linear, and a reference GEMM
 * with int32 accumulation and the scales in the epilogue.
 *
 * Stored: q = clamp(rne(W H / s_w), -128, 127) I8 [N, K] (W rotated per 256-group), s_w F32
 * [N, 1] (calibrated: loaded, never recomputed).
 * Weight decode (dequantize_int8_convrot_weight, then .to(bf16)):
 *   W = bf16( fp32( (fp32(q * s_w)) H ) )        per group of 256 along K
 * Activations, per token t, in the dtype the activations flow in (act):
 *   r   = x H                    per group (rounded to act)
 *   s_t = max(amax_k |r| / 127, 1e-30)           fp32
 *   q   = clamp(rne(r / act(s_t)), -128, 127)    (r / s rounded to act first)
 * GEMM (eager int8_linear): acc = sum_k qx * qw in int32 (exact), then
 *   y[t, n] = float(acc) * (s_t * s_w[n])        (the scale product first, as the library)
 * The library then rounds y to its output dtype (bf16) and adds a bias in that dtype.
 */
#ifndef CLEF_QUANT_INT8_CONVROT_H
#define CLEF_QUANT_INT8_CONVROT_H

#include "quant/hadamard.h"
#include "quant/quant_act.h"

#include <stdint.h>

/* Rows [first_row, first_row + n_rows) of an [N, K] ConvRot weight (K a multiple of 256),
 * dequantized and rotated back: bf16 bits (out) or those bf16 values widened (out_f32). */
void clef_convrot_dequant_bf16(const int8_t *q, const float *scale, int64_t K, int64_t first_row,
                               int64_t n_rows, uint16_t *out);
void clef_convrot_dequant_f32(const int8_t *q, const float *scale, int64_t K, int64_t first_row,
                              int64_t n_rows, float *out);

/* Rotate and quantize x[M, K] (row stride ldx) per token (K a multiple of 256; for
 * CLEF_QUANT_ACT_BF16 every x must be a bf16 number): q[M, K] (dense), scale[M]. The rotation is torch's matmul
 * (clef_hadamard256_torch_f32). rot is scratch of K floats. */
void clef_convrot_quantize_tokens(const float *x, int64_t ldx, int64_t M, int64_t K,
                                  clef_quant_act act, int8_t *q, float *scale, float *rot);

/* Quantize a BF16 weight [N, K] (bf16 bits, K a multiple of 256) as comfy-kitchen's
 * TensorWiseINT8Layout.quantize(per_channel, convrot) does: rotate each 256-group with a bf16
 * matmul (torch order, rounded to bf16), then per row s = max(amax / 127, 1e-30) (fp32) and
 * q = clamp(rne(bf16(r / bf16(s))), -128, 127) — the activation quantizer in bf16 mode, one
 * row per output feature. q [N, K], scale [N] (stored F32 [N, 1]). rot: scratch of 2 K floats. */
void clef_convrot_quantize_weight(const uint16_t *w, int64_t N, int64_t K, int8_t *q,
                                  float *scale, float *rot);

/* Reference GEMM: y[M, N] = float(sum_k qx * qw) * (sx[m] * sw[n]), int32 accumulation. */
void clef_int8_gemm_ref(const int8_t *qw, const float *sw, int64_t N, int64_t K,
                        const int8_t *qx, const float *sx, int64_t M, float *y);

#endif /* CLEF_QUANT_INT8_CONVROT_H */
