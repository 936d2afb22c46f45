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
 * INT8  ConvRot: the activations are rotated and quantized once per call (the CPU backend:
 *       clef_convrot_quantize_tokens, torch's order; or clef_convrot_quantize_tokens_fast:
 *       the butterfly, which may differ from the library's dense rotation in the last fp32 bit
 *       of a rotated value), int32 dot products (exact, any order: vpdpbusd where the CPU has
 *       VNNI, int8_matmul.c), epilogue float(acc) * (s_t * s_w) as comfy-kitchen.
 *
 * NF4 and FP8 read the activations PACKED once per call (clef_qmm_pack_f32 /
 * clef_qmm_pack_fp8): blocks of CLEF_QMM_TB tokens, k-major inside a block
 * (xp[b * TB * K + k * TB + i] = value of token b * TB + i at input k; zeros past T), so the
 * vector kernels hold TB tokens of one k in a register and each output stays one chain over
 * k. Packing is split between threads by token blocks [b0, b1).
 *
 * The vector paths (AVX-512, AVX2 + FMA; INT8 also AVX-512 VNNI / AVX-VNNI) are chosen per call by the CPU backend's ISA
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

/* qx [T, K] and sx [T] from a ConvRot quantizer; qw [rows, K] int8, sw [rows]; K < 131072.
 * scratch: clef_int8_matmul_scratch_bytes(T_max >= T, K) bytes of the calling thread's own
 * (any alignment), for the VNNI kernels (a packed weight panel and the tokens' code sums);
 * without it (clef_int8_matmul_rows) the level's vpmaddwd kernel runs. Same bits either way. */
void clef_int8_matmul_rows_ws(const int8_t *qw, const float *sw, int64_t K, int64_t n0,
                              int64_t n1, int64_t T, const int8_t *qx, const float *sx,
                              const float *bias, float *y, int64_t ldy, int accumulate,
                              void *scratch);
void clef_int8_matmul_rows(const int8_t *qw, const float *sw, int64_t K, int64_t n0, int64_t n1,
                           int64_t T, const int8_t *qx, const float *sx, const float *bias,
                           float *y, int64_t ldy, int accumulate);
size_t clef_int8_matmul_scratch_bytes(int64_t T, int64_t K);

/* The INT8 kernels (int8_matmul.c), for tests and benches that run each one the CPU has. */
typedef enum clef_int8_kernel {
    CLEF_INT8_KERNEL_C,
    CLEF_INT8_KERNEL_AVX2,        /* vpmaddwd on int16-widened codes, ymm */
    CLEF_INT8_KERNEL_AVXVNNI,     /* vpdpbusd, ymm (AVX-VNNI) */
    CLEF_INT8_KERNEL_AVX512,      /* vpmaddwd, zmm */
    CLEF_INT8_KERNEL_AVX512VNNI,  /* vpdpbusd, zmm (AVX-512 VNNI) */
    CLEF_INT8_KERNEL_COUNT
} clef_int8_kernel;
const char *clef_int8_kernel_name(clef_int8_kernel k);
/* 1 if k may run here (the CPU and the build have it, CLEF_CPU_ISA permits it). */
int clef_int8_kernel_supported(clef_int8_kernel k);
/* What clef_int8_matmul_rows_ws runs now: the CPU backend's level and its VNNI extension. */
clef_int8_kernel clef_int8_kernel_active(void);
/* clef_int8_matmul_rows_ws on kernel k (one not supported here runs the C loop; a VNNI one
 * without scratch, or with K not a multiple of 4, its level's vpmaddwd kernel). */
void clef_int8_matmul_rows_kernel(clef_int8_kernel k, const int8_t *qw, const float *sw,
                                  int64_t K, int64_t n0, int64_t n1, int64_t T, const int8_t *qx,
                                  const float *sx, const float *bias, float *y, int64_t ldy,
                                  int accumulate, void *scratch);

#endif /* CLEF_QUANT_MATMUL_H */
