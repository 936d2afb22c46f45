/*
 * quant_matmul.h — CPU matmul kernels for the three quantized weight formats, in each
 * format's own arithmetic, for a backend's matmul to call (one call per thread, each on its
 * own range of output features [n0, n1)):
 *
 *   y[t, n] = (accumulate ? y[t, n] : 0) + (x W^T)[t, n] + bias[n]      t < T, n0 <= n < n1
 *
 * NF4   the weight rows of a range are decoded, CLEF_QMM_NR at a time, into an fp32 panel in
 *       the caller's scratch, never more: resident weights stay 4-bit. The values are
 *       fp32(code * absmax), what bitsandbytes' inference matmul multiplies for fp32
 *       activations (nf4.h). Products and sums in fp32, one fused multiply-add per k in
 *       ascending order — the same bits as clef_nf4_gemm_ref with CLEF_QUANT_ACT_F32, on every
 *       ISA (fmaf, or the vector FMA that computes the same).
 * FP8   W8A8: the activations are quantized once per call (clef_fp8_quantize_tokens, fp8.h),
 *       then fp8 x fp8 products (exact in fp32) are summed in fp32 in ascending k and scaled
 *       by s_t * s_w: the same bits as clef_fp8_gemm_ref. Or QDQ, compressed-tensors' own
 *       forward in an fp32 model: fp32(q_x * s_t) times fp32(q_w * s_w), fmaf chains: the
 *       same bits as clef_fp8_gemm_qdq_ref with fp32 activations.
 * INT8  ConvRot: the activations are rotated and quantized once per call
 *       (clef_convrot_quantize_tokens_fast: the butterfly, which may differ from the
 *       library's dense rotation in the last fp32 bit of a rotated value), int32 dot products
 *       (exact, any order), epilogue float(acc) * (s_t * s_w) as comfy-kitchen.
 *
 * NF4 and FP8 read the activations PACKED once per call (clef_qmm_pack_f32 /
 * clef_qmm_pack_fp8): blocks of CLEF_QMM_TB tokens, k-major inside a block
 * (xp[b * TB * K + k * TB + i] = value of token b * TB + i at input k; zeros past T), so the
 * vector kernels hold TB tokens of one k in a register and each output stays one chain over
 * k. Packing is split between threads by token blocks [b0, b1).
 *
 * The vector paths (AVX-512, AVX2 + FMA) are chosen per call by the CPU backend's ISA
 * dispatch (backend/cpu/cpu_isa.h; CLEF_CPU_ISA caps it); every path gives the same bits.
 * Rows n0..n1 are the matrix's own (y columns and bias entries n0..n1); weight and scale
 * pointers point at the matrix's first row, except NF4's packed data, which points at the
 * STORED tensor because bitsandbytes numbers blocks over the whole flattened tensor: an NF4
 * matrix that is a row slice passes its first stored row in row0.
 */
#ifndef CLEF_QUANT_MATMUL_H
#define CLEF_QUANT_MATMUL_H

#include "quant/nf4.h"

#include <stddef.h>
#include <stdint.h>

#define CLEF_QMM_NR 16 /* weight rows per decoded panel (threads take whole panels) */
#define CLEF_QMM_TB 16 /* tokens per block of packed activations */

/* Scratch floats one NF4 / FP8 call needs per thread: one decoded panel (CLEF_QMM_NR x K). */
size_t clef_qmm_panel_floats(int64_t K);
/* Floats of the packed activations of T tokens of K inputs (shared by the threads). */
size_t clef_qmm_xpack_floats(int64_t T, int64_t K);
/* Token blocks of T tokens. */
int64_t clef_qmm_token_blocks(int64_t T);

/* Pack token blocks [b0, b1) of x [T, K] (row stride ldx) into xp (NF4: fp32 activations). */
void clef_qmm_pack_f32(const float *x, int64_t ldx, int64_t T, int64_t K, int64_t b0, int64_t b1,
                       float *xp);

/* FP8: quantize the tokens of blocks [b0, b1) of x (clef_fp8_quantize_tokens: codes and
 * sx[t]) and pack the values the kernel multiplies: the e4m3 value (W8A8, qdq 0) or
 * fp32(q * s_t) (QDQ, qdq 1). qrow: K bytes of the calling thread's scratch. */
void clef_qmm_pack_fp8(const float *x, int64_t ldx, int64_t T, int64_t K, int qdq, int64_t b0,
                       int64_t b1, float *xp, float *sx, uint8_t *qrow);

/* xp from clef_qmm_pack_f32; panel: clef_qmm_panel_floats(K) floats. */
void clef_nf4_matmul_rows(const clef_nf4_desc *d, const uint8_t *packed, int64_t row0, int64_t K,
                          int64_t n0, int64_t n1, int64_t T, const float *xp, const float *bias,
                          float *y, int64_t ldy, int accumulate, float *panel);

/* xp and sx from clef_qmm_pack_fp8 with qdq 0; qw [rows, K] e4m3, sw [rows]. */
void clef_fp8_matmul_rows(const uint8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                          int64_t T, const float *xp, const float *sx, const float *bias,
                          float *y, int64_t ldy, int accumulate, float *panel);

/* The same, QDQ arithmetic (see above): xp from clef_qmm_pack_fp8 with qdq 1. */
void clef_fp8_matmul_rows_qdq(const uint8_t *qw, const float *sw, int64_t K, int64_t n0,
                              int64_t n1, int64_t T, const float *xp, const float *bias,
                              float *y, int64_t ldy, int accumulate, float *panel);

/* Per-token rotate (butterfly) and quantize of x[T, K] with row stride ldx, fp32 activations;
 * K a multiple of 256. rot: scratch of K floats. */
void clef_convrot_quantize_tokens_fast(const float *x, int64_t ldx, int64_t T, int64_t K,
                                       int8_t *qx, float *sx, float *rot);

/* qx [T, K] and sx [T] from clef_convrot_quantize_tokens_fast; qw [rows, K] int8, sw [rows]. */
void clef_int8_matmul_rows(const int8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                           int64_t T, const int8_t *qx, const float *sx, const float *bias,
                           float *y, int64_t ldy, int accumulate);

#endif /* CLEF_QUANT_MATMUL_H */
