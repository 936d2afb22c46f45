/*
 * cuda_quant.h — the quantized weight formats on the CUDA backend (NF4, FP8 W8A8, INT8
 * ConvRot): what the backend's matmul runs for them, and the pieces of those matmuls exposed
 * on their own so the GPU tests can hold each step to its CPU reference and the bench can
 * time each step. Plain C interface (callable from C11); only CLEF_CUDA builds have it.
 *
 * clef_matmul on a quantized matrix (weights stay at their stored size in device memory):
 *  - FP8_E4M3 (W8A8): the fp32 activation rows are quantized per token to e4m3 by one kernel
 *    (compressed-tensors' dynamic quantizer in fp32, bit-identical to
 *    clef_fp8_quantize_tokens with CLEF_QUANT_ACT_F32; each row read once). By default the
 *    quantizer writes the codes' values in bf16 (exact), the weight's codes are widened to bf16
 *    (exact), cuBLASLt's BF16 GEMM sums their products in fp32, then a kernel scales: the
 *    CPU's W8A8 up to summation order. With clef_backend_cuda_set_fp8_tensor_cores
 *    (for speed; ~14-bit partial sums, cuda_quant_fp8.cu says what that does to a model),
 *    cuBLASLt multiplies e4m3 x e4m3
 *    with fp32 accumulation (no fast accumulation) and applies s_t x s_w[n] in its epilogue
 *    (outer-vector scaling, CUDA >= 12.9 on sm_90). For layouts cuBLASLt refuses that mode
 *    for, the product is written unscaled and a kernel applies acc * s_t * s_w (the CPU
 *    reference's order); for layouts it refuses altogether, a CUDA-core kernel sums the
 *    products in fp32, k ascending (clef_fp8_gemm_ref's bits); clef_cuda_fp8_gemm_path
 *    says which ran. With clef_backend_cuda_set_fp8_promoted (sm_90), our e4m3 wgmma kernel
 *    with the partial sums promoted to fp32 every 128 or 32 of K and the scaling fused. Both are W8A8 arithmetic; the CPU backend runs compressed-tensors' QDQ
 *    form (docs/quant.md, "FP8: W8A8 or QDQ"), which in fp32 equals W8A8 to ~1e-7.
 *  - INT8_CONVROT: one kernel per token rotates each 256-group (the fast Hadamard butterfly,
 *    bit-identical to clef_convrot_quantize_tokens_fast, or with
 *    clef_backend_cuda_set_convrot_exact the dense product in torch's summation order,
 *    bit-identical to clef_convrot_quantize_tokens) and quantizes to int8; cuBLASLt's int8
 *    GEMM accumulates in int32 (exact: the same integers as the CPU; a dp4a kernel for the
 *    layouts cuBLASLt refuses, such as output counts not a multiple of 4); a kernel applies
 *    float(acc) * (s_t * s_w[n]) (+ bias) exactly as clef_int8_matmul_rows does. On sm_90 by
 *    default (clef_backend_cuda_set_int8_wgmma) our own wgmma kernels make the same int32 sums
 *    and apply that scaling in their epilogue, from registers: the same bits.
 *  - NF4 (weights bf16(code x absmax), bit-identical to clef_nf4_dequant_bf16: bitsandbytes'
 *    bf16 weights; activations rounded to bf16; fp32 accumulation), two GEMMs, chosen per
 *    backend (clef_backend_cuda_set_nf4_gemm), never per row count:
 *    CLEF_CUDA_NF4_FUSED: one kernel reads the 4-bit codes and absmax, dequantizes each
 *    k-slice into shared memory in its main loop and multiplies on the bf16 tensor cores
 *    (mma.sync, cuda_quant_nf4_gemm.cu; layouts with K a multiple of 64; others as below);
 *    CLEF_CUDA_NF4_DEQUANT: a kernel dequantizes the weight to bf16 into the matmul's
 *    scratch, then the BF16 path runs (cuBLASLt). The weight stays 4-bit resident either way.
 *
 * The functions below queue work on be's stream (device pointers; nothing is synchronized);
 * a failure is recorded on the backend and reported by the next clef_backend_synchronize.
 */
#ifndef CLEF_BACKEND_CUDA_QUANT_H
#define CLEF_BACKEND_CUDA_QUANT_H

#include "backend/backend.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-token FP8 quantization of x[T, K] (row stride ldx): q[T, K] e4m3 (dense), scale[T]. */
void clef_cuda_fp8_quantize_tokens(clef_backend *be, int64_t T, int64_t K, const float *x,
                                   int64_t ldx, uint8_t *q, float *scale);

/* The same, the codes written as their bf16 values qv[T, K] (exact): the exact FP8 path's input. */
void clef_cuda_fp8_quantize_tokens_bf16(clef_backend *be, int64_t T, int64_t K, const float *x, int64_t ldx,
                                        uint16_t *qv, float *scale);

/* Per-token ConvRot quantization of x[T, K]: each `group` (256, or 0 = no rotation) of a row
 * rotated by H256, then int8 codes q[T, K] (dense) and scale[T]. static_scale (device, [1])
 * or NULL: a release's static input_scale replaces the dynamic per-token one. exact: 1 = the
 * dense rotation in torch's order (256 adds per element: for parity runs), 0 = the butterfly. */
void clef_cuda_convrot_quantize_tokens(clef_backend *be, int64_t T, int64_t K, const float *x,
                                       int64_t ldx, int64_t group, const float *static_scale,
                                       int exact, int8_t *q, float *scale);

/* acc[t, n] = sum_k qx[t, k] * qw[n, k] in int32 (cuBLASLt IMMA), acc row stride ldacc
 * (a multiple of 4, >= N); K a multiple of 4. */
void clef_cuda_int8_gemm_i32(clef_backend *be, int64_t T, int64_t N, int64_t K, const int8_t *qx,
                             const int8_t *qw, int32_t *acc, int64_t ldacc);

/* The wgmma GEMM kernels (cuda_quant_wgmma.cu, sm_90a), by tile (and, INT8 only, the
 * persistent and ping-pong kernels below): 128 tokens x
 *   CLEF_CUDA_WGMMA_128        128 outputs (m64n128 instructions), one block per SM
 *   CLEF_CUDA_WGMMA_256_SPLIT  256 outputs, each slice two m64n128 instructions
 *   CLEF_CUDA_WGMMA_256        256 outputs, one m64n256 instruction per slice
 *   CLEF_CUDA_WGMMA_256_MC     256 outputs, m64n256, blocks in clusters of two sharing (TMA
 *                              multicast) the weight's slab (measured slower: ~650 TOPS)
 * CLEF_CUDA_WGMMA_OFF: cuBLASLt. All give the same sums (exact integers; for bf16, exact
 * products summed in fp32 in the kernel's order). */
enum {
    CLEF_CUDA_WGMMA_OFF = 0,
    CLEF_CUDA_WGMMA_128 = 1,
    CLEF_CUDA_WGMMA_256_SPLIT = 2,
    CLEF_CUDA_WGMMA_256 = 3,
    CLEF_CUDA_WGMMA_256_MC = 4,
    CLEF_CUDA_WGMMA_LAST = CLEF_CUDA_WGMMA_256_MC, /* the last of those both INT8 and exact FP8 take */
    /* INT8 only: one block per SM walking the tiles (the next tile's loads under the previous
     * one's epilogue, tiles in groups of 8 weight slabs for L2), 128 x 256 (m64n256) or
     * 128 x 128 tiles */
    CLEF_CUDA_WGMMA_256_PERSIST = 5,
    CLEF_CUDA_WGMMA_128_PERSIST = 6,
    /* INT8 only, persistent, ping-pong: each consumer warpgroup makes whole tiles, the two
     * taking turns, one's epilogue under the other's wgmmas; a warpgroup's tile 128 x 128 or
     * 64 x 256 */
    CLEF_CUDA_WGMMA_PP_128 = 7,
    CLEF_CUDA_WGMMA_PP_64X256 = 8,
    /* PP_128 in clusters of two blocks, each loading half of the weight's slab for both (TMA
     * multicast) */
    CLEF_CUDA_WGMMA_PP_128_MC = 9,
    /* 256_PERSIST in clusters of two blocks along the tokens, each loading half of the
     * weight's slab for both (MC), or of 2 x 2 blocks, x's slab shared by the two blocks of a
     * row as well (MC4) (TMA multicast; no faster than 256_PERSIST on the 27B / 9B shapes,
     * H200 run18_i8b) */
    CLEF_CUDA_WGMMA_256_PERSIST_MC = 10,
    CLEF_CUDA_WGMMA_256_PERSIST_MC4 = 11,
    /* 256_PERSIST with its epilogue through shared memory and TMA stores left in flight under
     * the next tile's wgmmas (results not 16-byte aligned: 256_PERSIST's epilogue) */
    CLEF_CUDA_WGMMA_256_PERSIST_TS = 12,
    CLEF_CUDA_WGMMA_INT8_LAST = CLEF_CUDA_WGMMA_256_PERSIST_TS,
    /* for INT8 (the backend's default), per call: 128 x 128 tiles where 128 x 256 ones would
     * make fewer than 2.5 waves over the SMs (few tokens, narrow outputs), else
     * CLEF_CUDA_WGMMA_256_PERSIST_TS (every INT8 variant gives the same bits); for the exact FP8 path (its default) the register-widening kernel
     * below with tiles chosen per layout, never per row count (fp32 sums: one kernel for every
     * row count keeps a row's result independent of its batch) */
    CLEF_CUDA_WGMMA_AUTO = 100,
    /* the exact FP8 path only (cuda_quant_fp8_exact_wgmma.cu): the weight's e4m3 codes widened
     * to bf16 in registers (wgmma's A operand), no widened copy of the weight; tiles of 256
     * (MIXED) or 128 (MIXED_128) weight rows x 128 tokens, two k16 steps' wgmmas in flight */
    CLEF_CUDA_WGMMA_FP8_MIXED = 101,
    CLEF_CUDA_WGMMA_FP8_MIXED_128 = 102,
    /* MIXED's tile with one (D1) or three (D3) k16 steps' wgmmas in flight instead of two */
    CLEF_CUDA_WGMMA_FP8_MIXED_D1 = 103,
    CLEF_CUDA_WGMMA_FP8_MIXED_D3 = 104,
    /* MIXED's tile in clusters of two blocks that share the tokens' values (TMA multicast) */
    CLEF_CUDA_WGMMA_FP8_MIXED_MC = 105,
    /* 128 weight rows x 256 tokens (m64n256k16 wgmmas; 64 of K a stage), alone or in clusters
     * of two as MC */
    CLEF_CUDA_WGMMA_FP8_MIXED_T256 = 106,
    CLEF_CUDA_WGMMA_FP8_MIXED_T256_MC = 107,
};

/* The int32 sums of clef_cuda_int8_gemm_i32 from a wgmma kernel (variant above): for the
 * tests and the bench. Returns CLEF_ERR_UNSUPPORTED, queuing nothing, where it cannot run (not
 * sm_90, K not a multiple of 16, operands not 16-byte aligned, an unknown variant). */
int clef_cuda_int8_gemm_i32_wgmma(clef_backend *be, int variant, int64_t T, int64_t N, int64_t K, const int8_t *qx,
                                  const int8_t *qw, int32_t *acc, int64_t ldacc);

/* INT8 ConvRot matmuls' GEMM: a wgmma variant (the scaling fused; where it cannot run,
 * cuBLASLt; default CLEF_CUDA_WGMMA_AUTO), or CLEF_CUDA_WGMMA_OFF: cuBLASLt's int8 GEMM and the
 * scaling kernel. The same bits either way. */
void clef_backend_cuda_set_int8_wgmma(clef_backend *be, int variant);

/* The exact FP8 path's GEMM (bf16 code values, fp32 sums): CLEF_CUDA_WGMMA_AUTO (the default)
 * the kernel that widens the weight's codes in registers with its tiles chosen per layout;
 * CLEF_CUDA_WGMMA_FP8_MIXED* one variant of it (MIXED_T256*: not yet run on a GPU); the other
 * wgmma variants multiply a widened copy of the weight; CLEF_CUDA_WGMMA_OFF: cuBLASLt's BF16
 * GEMM on that copy into fp32 products, then the scaling kernel. Scaling fused in all our
 * kernels; all are the exact path's arithmetic (up to fp32 summation order); where a wgmma
 * kernel cannot run (not sm_90, operands not 16-byte aligned), cuBLASLt. CLEF_CUDA_FP8_EXACT_GEMM=
 * auto|cublaslt|wgmma|mixed|mixed128|mixed-d1|mixed-d3|mixed-mc|mixed-t256|mixed-t256mc in the
 * environment overrides the default when a backend's quantized state is made (for same-run
 * comparisons). */
void clef_backend_cuda_set_fp8_exact_wgmma(clef_backend *be, int variant);
int clef_backend_cuda_fp8_exact_wgmma(clef_backend *be);

/* The NF4 matrix w (a slice keeps its quant_row0) dequantized to bf16 bits, out[rows, cols]
 * (by the kernel of the backend's NF4 mode: CLEF_CUDA_NF4_RUN15's element-wise one, else the
 * vectorized one where the layout allows; the same bits). */
void clef_cuda_nf4_dequant_bf16(clef_backend *be, const clef_matrix *w, uint16_t *out);

/* NF4 matmuls' GEMM. The default is CUDA_QUANT_NF4_DEFAULT (cuda_quant_internal.cuh says why);
 * CLEF_CUDA_NF4_GEMM=dequant|fused|run15 in the environment overrides it when a backend's
 * quantized state is made (for same-run comparisons). Each mode gives a row the same bits
 * whatever else is in the batch (one kernel per layout, a fixed summation order). */
enum {
    CLEF_CUDA_NF4_DEQUANT = 0, /* dequantize to bf16 scratch (vectorized kernel), cuBLASLt BF16 GEMM */
    CLEF_CUDA_NF4_FUSED = 1,   /* the fused kernel where the layout allows (K % 64 == 0, ...), else DEQUANT */
    CLEF_CUDA_NF4_RUN15 = 2,   /* DEQUANT with run15's element-wise dequantization kernel (the old path) */
};
void clef_backend_cuda_set_nf4_gemm(clef_backend *be, int mode);
int clef_backend_cuda_nf4_gemm(clef_backend *be);
/* 1 if the fused NF4 kernel runs w's layout (K a multiple of 64, power-of-two blocks of at
 * least 64 elements, codes 16-byte aligned), 0 if CLEF_CUDA_NF4_FUSED dequantizes it. */
int clef_cuda_nf4_fused_layout(const clef_matrix *w);

/* on = 1: INT8 ConvRot matmuls rotate in torch's summation order (the CPU backend's and
 * comfy-kitchen's rounding; slower), 0 (default): the butterfly. */
void clef_backend_cuda_set_convrot_exact(clef_backend *be, int on);

/* FP8 matmuls on the fp8 tensor cores (cuBLASLt e4m3 x e4m3, outer-vector scaling), or not: */
enum {
    CLEF_CUDA_FP8_TC_OFF = 0,      /* (default) the exact path: codes widened to bf16, bf16 tensor
                                    * cores with fp32 accumulation: the CPU reference's arithmetic */
    CLEF_CUDA_FP8_TC_PROMOTED = 1, /* cuBLASLt's fp8 GEMM with its partial sums moved to fp32
                                    * accumulators every so often (the tensor cores keep ~14 bits
                                    * of a partial sum: ~1e-4..3e-4 relative per GEMM) */
    CLEF_CUDA_FP8_TC_FAST = 2,     /* cuBLASLt's fast accumulation: the sum stays in the tensor
                                    * cores for all of K (fewer instructions, the serving stacks'
                                    * FP8 mode; its ~14-bit rounding applies at every k32 step of
                                    * the whole sum) */
};
/* on: a CLEF_CUDA_FP8_TC_* value (any other non-zero value: CLEF_CUDA_FP8_TC_PROMOTED). */
void clef_backend_cuda_set_fp8_tensor_cores(clef_backend *be, int on);

/* FP8 matmuls on our fp8 wgmma kernel (cuda_quant_fp8_wgmma.cu, sm_90): e4m3 x e4m3 on the
 * fp8 tensor cores, each partial sum of a short run of K promoted to fp32 accumulators on the
 * CUDA cores (the tensor cores' ~14-bit rounding confined to that run), scales and bias in the
 * epilogue. The run: */
enum {
    CLEF_CUDA_FP8_PROMOTE_OFF = 0, /* the exact path (or cuBLASLt fp8 with set_fp8_tensor_cores) */
    CLEF_CUDA_FP8_PROMOTE_128 = 1, /* 128 of K: 4 wgmma k32 steps per partial */
    CLEF_CUDA_FP8_PROMOTE_32 = 2,  /* 32 of K: every wgmma on a zero accumulator */
};
/* The FP8 path when fp8 tensor cores (cuBLASLt) are off: a CLEF_CUDA_FP8_PROMOTE_* variant, or
 * off: the exact path. Where the kernel cannot run (not sm_90, K not a multiple of 16,
 * misaligned operands) the exact path runs. The default: CUDA_QUANT_FP8_PROMOTED_DEFAULT
 * (cuda_quant_internal.cuh). */
void clef_backend_cuda_set_fp8_promoted(clef_backend *be, int variant);
/* The variant set (or the default): CLEF_CUDA_FP8_PROMOTE_*. */
int clef_backend_cuda_fp8_promoted(clef_backend *be);
/* The exact FP8 path on cuBLASLt widens the weight and multiplies it in slices of output
 * features of at most `bytes` of widened weight (and of fp32 products per chunk of rows, at
 * most CUDA_QUANT_PRODUCT_BYTES); 0: the default, CUDA_QUANT_SLICE_BYTES (64 MiB). Tests: a
 * few KiB makes small shapes run in many slices and row chunks; SIZE_MAX: the whole weight at
 * once (run17's path: faster at short prompts, 0.18 GiB more scratch at the 27B's widths). */
void clef_backend_cuda_set_fp8_slice_bytes(clef_backend *be, size_t bytes);

/* on = 1: FP8 matmuls on the tensor cores take the epilogue path (unscaled fp32 product, then the scaling
 * kernel) even where cuBLASLt runs outer-vector scaling: for tests and benches. */
void clef_backend_cuda_set_fp8_epilogue(clef_backend *be, int on);

/* Which FP8 paths this backend's matmuls have taken so far: "exact" (bf16 tensor cores on the
 * widened codes), "promoted" (the fp8 wgmma kernel with fp32 promotion), "outer-vector" (fp8
 * tensor cores, cuBLASLt applies s_t x s_w), "epilogue" (fp8 tensor cores, an fp32 product and
 * the scaling kernel: layouts cuBLASLt refuses outer-vector scaling for, or forced), those
 * joined by "and" when several ran, or "untried". */
const char *clef_cuda_fp8_gemm_path(clef_backend *be);

/* The quantized hand-off (cuda_quant_stage.cu): the ops producing an FP8 / INT8 ConvRot
 * matmul's input (RMSNorm, gated RMSNorm, SwiGLU, the attention output gate) write its codes and
 * scales themselves, bit-identical to the quantizers above, and the matmul skips its own
 * quantizer. on = 1 (the default unless CLEF_CUDA_FUSED_QUANT=0 is in the environment when
 * the backend's first quantized matmul runs), 0: every matmul quantizes standalone. */
void clef_backend_cuda_set_fused_quant(clef_backend *be, int on);
/* How many matmuls read a producer's codes, and how many producer launches wrote codes. */
void clef_cuda_fused_quant_counts(clef_backend *be, int64_t *matmuls_served, int64_t *producer_writes);
/* For tests: 1 and the device pointers a matmul on w would read for x [T, K = w->cols] (ldx)
 * right now instead of quantizing (codes: uint8 e4m3, bf16 values on the exact FP8 path, or
 * int8; scales: T floats); 0 when it would quantize itself. */
int clef_cuda_quant_staged(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                           const void **codes, const float **scales);

/* Bench support: device bytes of the buffers the backend's matmuls grow on demand (beside a
 * caller's planned scratch): the bf16 staging of x (BF16 and NF4 matmuls, the exact FP8
 * path's bf16 code values), the quantized matmuls' own scratch and second buffer (used where
 * the caller passed none or planned for another path), the hand-off's codes and scales. */
typedef struct clef_cuda_grown {
    size_t staging, quant_scratch, quant_extra, handoff;
} clef_cuda_grown;
void clef_cuda_grown_bytes(clef_backend *be, clef_cuda_grown *out);
/* Bench support: free those buffers (waits for queued work; each grows again on its next use,
 * the hand-off once a matmul has learnt its producer again), so a bench that runs one
 * precision after another can measure each as a process running only that one would hold. */
void clef_cuda_release_grown(clef_backend *be);

/* Bench support: random codes of format t at dst (bytes of device memory), never NaN:
 * FP8_E4M3 finite e4m3 codes of either sign, INT8_CONVROT int8 in [-127, 127], NF4 any
 * nibbles (and any other bytes, such as NF4 absmax codes). Returns a clef_status. */
int clef_cuda_fill_random_codes(clef_backend *be, clef_wtype t, void *dst, size_t bytes, uint64_t seed);
/* n floats at dst set to value (scales, code tables of a bench's weights). */
int clef_cuda_fill_f32(clef_backend *be, float *dst, size_t n, float value);

/* Bench support: CUDA events on be's stream around the work queued between start and stop;
 * stop waits for it and returns its milliseconds (negative on a failure). */
void clef_cuda_timer_start(clef_backend *be);
double clef_cuda_timer_stop(clef_backend *be);

#ifdef __cplusplus
}
#endif

#endif /* CLEF_BACKEND_CUDA_QUANT_H */
