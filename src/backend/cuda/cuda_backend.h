/*
 * cuda_backend.h — the CUDA backend (NVIDIA GPUs, built for sm_90a): every op of the table in
 * backend.h on one device and one stream. Only builds that found nvcc (CLEF_CUDA) have it; the
 * CPU-only build never includes this header. Plain C interface, callable from C11.
 *
 * Numerics (what the parity tests hold it to, see tests/cuda/):
 *  - BF16 weights: the fp32 activation rows are rounded to bf16 by a conversion kernel (or,
 *    the same bits, by the norm / SwiGLU / gate that produced them), then cuBLASLt multiplies
 *    bf16 x bf16 with fp32 accumulation and fp32 output (bf16-input bound).
 *  - F32 weights (and activation matrices wrapped as F32): cuBLASLt in plain fp32 (no TF32).
 *  - Every other op computes in fp32 as the CPU reference does (reductions in fp32 trees
 *    instead of the CPU's double sums: far under 1e-5 relative).
 *  - The gated delta rule runs its exact recurrence (fp32 state in registers) for both
 *    CLEF_GDN_CHUNKED and CLEF_GDN_RECURRENT.
 *  - Attention is flash style (online softmax, no T x T matrix in memory): by default on the
 *    tensor cores with Q, K, V and the probabilities rounded to bf16 (fp32 scores, sums and
 *    output; bf16-input bound), or fully fp32 (clef_backend_cuda_set_attention_fp32).
 */
#ifndef CLEF_BACKEND_CUDA_BACKEND_H
#define CLEF_BACKEND_CUDA_BACKEND_H

#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GPUs the CUDA runtime sees; 0 when there is no GPU or no driver (never an error). */
int clef_backend_cuda_device_count(void);

/* The CUDA backend on device `device` (0-based) with its own stream. Returns CLEF_OK and
 * *out, CLEF_ERR_UNSUPPORTED when the device does not exist, or CLEF_ERR_OUT_OF_MEMORY. */
int clef_backend_cuda_create(int device, clef_backend **out);

/* Device memory this backend holds: resident = bytes now allocated (buffers + its own
 * workspaces), peak = the most it ever held. Either pointer may be NULL. */
void clef_backend_cuda_memory(const clef_backend *be, size_t *resident, size_t *peak);

/* Start a new peak: the peak of clef_backend_cuda_memory becomes the bytes resident now (a bench
 * measures each of its cases' own peak this way). */
void clef_backend_cuda_memory_reset_peak(clef_backend *be);

/* Fill n bf16 values at dst (device memory of be) with N(0, std^2) samples from a counter-based
 * generator seeded by seed: the bench makes 9B/27B-shaped random weights on the device. */
int clef_backend_cuda_fill_normal_bf16(clef_backend *be, void *dst, size_t n, float std, uint64_t seed);

/* on = 1: attention runs the fp32 kernel (CUDA cores) instead of the bf16 tensor-core one:
 * slower, fp32-exact; for parity checks. */
void clef_backend_cuda_set_attention_fp32(clef_backend *be, int on);

/* The gated delta rule's kernel for CLEF_GDN_CHUNKED: the chunked WY/UT form on the tensor
 * cores (cuda_gdn.cu) runs by default (the faster form at the Qwen3.5 shapes, bench/RESULTS.md),
 * for key and value head dims <= 128, so this switch no longer changes anything; it stays
 * for callers that set it. CLEF_GDN_RECURRENT (the model's gdn_mode) runs the token-by-token
 * kernel, the reference form. Both compute the same function within the op's tolerance. */
void clef_backend_cuda_set_gdn_chunked(clef_backend *be, int on);

/* Recordings (backend.h's capture_begin ..., cuda_graph.cu): on = 1 lets the model record a
 * forward as a CUDA graph per batch layout and replay it; 0 (the default unless the
 * environment sets CLEF_CUDA_GRAPHS=1 when the handle is created) makes capture_begin refuse
 * and held recordings stale, so every forward runs its ops directly. Off by default because
 * the forward that records is slower (~25%) than a direct one and a replay saves only 3-7%
 * at 16-298 tokens (bench/RESULTS.md, run16_graph). Forks inherit it. */
void clef_backend_cuda_set_graphs(clef_backend *be, int on);

/* Bench-only tuning of the chunked gated delta rule, process-wide: seg_chunks chunks of 64
 * per segment (its scratch; 0 = the default, 16), slice_cols value columns per walk block
 * (32 or 64; 0 = chosen from the head count and the device). Set before sizing workspaces. */
void clef_backend_cuda_tune_gdn(int seg_chunks, int slice_cols);

/* The chunked gated delta rule's tensor-core products, process-wide (tests and benches; the
 * environment's CLEF_GDN_PRODUCTS = tf32x3 | bf16x3 | bf16x3-planes[-wide] | bf16x3-prep[-wide]
 * does the same for a whole program): 0 = the default (CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE,
 * run18, below), CLEF_GDN_PRODUCTS_BF16X3_PLANES = run17's (3xBF16 with the operands split
 * once into bf16 hi / lo planes and read by ldmatrix), CLEF_GDN_PRODUCTS_BF16X3 = the
 * run16 form (the same products, operands split in every product loop: ~8e-6 vs a float64
 * recurrence), CLEF_GDN_PRODUCTS_TF32X3 = the run15 form (~3e-6). Set before a call. */
#define CLEF_GDN_PRODUCTS_TF32X3 1
#define CLEF_GDN_PRODUCTS_BF16X3 2
#define CLEF_GDN_PRODUCTS_BF16X3_PLANES 3
/* The planes form with the parallel pass's plane stores 8 bytes a lane instead of 4
 * (`bf16x3-planes-wide`; the same bits): 0.65 ms per 27B layer at 2,270 tokens vs 0.69
 * (run18_gdn3). */
#define CLEF_GDN_PRODUCTS_BF16X3_PLANES_WIDE 4
/* The planes form whose parallel pass also splits T' = (I + A)^-1 diag(beta) and -P once into
 * plane pairs in shared memory (read by ldmatrix) and applies the decay masks where K K^T and
 * Q K^T are stored (`bf16x3-prep`, and with the 8-byte plane stores `bf16x3-prep-wide`, the
 * default since run18: 0.64 ms per 27B layer at 2,270 tokens): the same bits as the planes
 * form, 11% fewer instructions in the parallel pass. */
#define CLEF_GDN_PRODUCTS_BF16X3_PREP 5
#define CLEF_GDN_PRODUCTS_BF16X3_PREP_WIDE 6
void clef_backend_cuda_tune_gdn_products(int form);

/* Bench-only: the chunked delta rule launches only its parallel passes (parts = 1) or only
 * its walks (2; over whatever the scratch holds), so that a bench can time each kind of
 * kernel alone; 0 = both (the default). The outputs are garbage unless both run. */
void clef_backend_cuda_tune_gdn_parts(int parts);

/* 1 when tensor-core attention (head_dim 64, 65-80, 128, 256, with scratch) runs the register-
 * accumulator flash kernel (cuda_flash.cu: its accumulator layout was checked on this
 * device), 0 when it runs the shared-memory kernel. Tests label their checks with it. */
int clef_backend_cuda_flash_attention(const clef_backend *be);

/* Bench support (bench/gpu): a bf16 x bf16 -> fp32 cuBLASLt GEMM of m x n x k on random
 * data, timed with CUDA events (median of reps after warm-up): the ceiling the bench divides
 * by. Writes TFLOP/s to *tflops. */
int clef_backend_cuda_gemm_ceiling(clef_backend *be, int64_t m, int64_t n, int64_t k, int reps, double *tflops);

/* Per-op GPU times (cuda_profile.cu): on = 1 wraps every op with CUDA events, 0 restores
 * the plain table. report prints a markdown table of the ms per forward (totals / runs) of
 * every op kind since the last report, then starts over. One profiled backend at a time. */
int clef_backend_cuda_profile(clef_backend *be, int on);
int clef_backend_cuda_profile_report(clef_backend *be, FILE *out, double runs);

/* The choice of cuBLASLt algorithm for BF16 layouts (cuda_matmul.cu): on = 1 (the default),
 * the first matmul of each new layout times the heuristic's candidates at 2,048 rows and keeps
 * the fastest (the heuristic's first unless another is 2% faster); 0: the heuristic's first,
 * untimed. Either way one algorithm per layout, whatever the row count, so a row's result
 * does not depend on the batch around it. Set before the first matmul; forks inherit it.
 * The report prints a markdown table of the timed layouts (bench support). */
void clef_backend_cuda_set_gemm_tuning(clef_backend *be, int on);
void clef_backend_cuda_gemm_tuning_report(clef_backend *be, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* CLEF_BACKEND_CUDA_BACKEND_H */
