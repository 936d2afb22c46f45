/*
 * clef_quantize.h — the public API of `clef quantize`: make an NF4, FP8 W8A8 or INT8 ConvRot
 * release from a BF16 Clef release, in the layout each precision is published in and with
 * the bytes each library's own quantizer writes (docs/quant.md, "Making quantized releases").
 *
 *     clef_quantize_params p = clef_quantize_default_params();
 *     clef_quantize_target_parse("nf4", &p.target);
 *     if (clef_quantize_release("releases/clef-27b", "releases/clef-27b-nf4", &p) != CLEF_OK)
 *         fprintf(stderr, "%s\n", clef_last_error());
 *
 * The source is opened and validated as clef_release_open does (strict) and must hold BF16
 * weights. The destination must not exist or be an empty directory; everything is written
 * into a temporary directory beside it (DST.tmp-<pid>) and renamed to DST at the end, so
 * DST is either absent or complete. Tensors are streamed: memory stays bounded by a few
 * 16 MiB buffers plus, for NF4, the block absmax of one weight (1/32 of its BF16 bytes),
 * never the model.
 *
 * Thread safety: reentrant; the callback runs on the calling thread.
 */
#ifndef CLEF_QUANTIZE_H
#define CLEF_QUANTIZE_H

#include "clef_release.h" /* clef_progress_fn, status codes */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clef_quantize_target {
    CLEF_QUANTIZE_NF4,           /* bitsandbytes NF4, double quant, blocksize 64 */
    CLEF_QUANTIZE_FP8,           /* compressed-tensors FP8_DYNAMIC (channel weights, token acts) */
    CLEF_QUANTIZE_INT8_CONVROT,  /* comfy-kitchen int8_tensorwise, ConvRot group 256 */
} clef_quantize_target;

typedef struct clef_quantize_params {
    clef_quantize_target target;
    uint64_t max_shard_bytes;    /* largest model shard; 0 = 50 GB (transformers' default) */
    int torch_sum_lanes;         /* NF4: how the torch that bitsandbytes runs on sums the
                                  * block absmax (8 or 16 float lanes); 0 = 8 (what torch
                                  * 2.11's CPU wheels do) */
    int torch_threads;           /* NF4: torch's thread count for that sum (it matters only
                                  * from 32,768 blocks on); 0 = 1 */
    clef_progress_fn progress;   /* NULL: silent. Called before each step (file = the
                                  * tensor's name, step i of n, bytes = its source size) and
                                  * once at the end with file NULL. Steps: for NF4 each
                                  * quantized weight is read once first, to measure its
                                  * double-quant offset, then every tensor is written */
    void *progress_user;
} clef_quantize_params;

/* NF4, 50 GB shards, torch sum 8 lanes x 1 thread, silent. */
CLEF_API clef_quantize_params clef_quantize_default_params(void);

/* "nf4", "fp8", "int8-convrot" -> *out; 1 if known, else 0. */
CLEF_API int clef_quantize_target_parse(const char *name, clef_quantize_target *out);
CLEF_API const char *clef_quantize_target_name(clef_quantize_target t); /* static */

/* Write the quantized release of src_dir to dst_dir. Returns CLEF_OK, or a negative status
 * with clef_last_error() naming the file or tensor: CLEF_ERR_INVALID_ARG (dst exists and is
 * not empty, unknown target), CLEF_ERR_UNSUPPORTED (src is not a BF16 release, a weight to
 * quantize is not BF16), CLEF_ERR_TENSOR_VALUES (NaN or Inf in a weight to quantize), any
 * status of clef_release_open for a bad src, CLEF_ERR_IO. On failure nothing is left at
 * dst_dir and the temporary directory is removed. */
CLEF_API int clef_quantize_release(const char *src_dir, const char *dst_dir,
                                   const clef_quantize_params *params);

#ifdef __cplusplus
}
#endif

#endif /* CLEF_QUANTIZE_H */
