/*
 * hadamard.h — the ConvRot rotation: a block-diagonal regular Hadamard transform of group 256
 * over the input features, in fast butterfly form.
 *
 * H256 = H4 (x) H4 (x) H4 (x) H4 / 16 with H4 = [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]]
 * (comfy-kitchen's _build_hadamard: the Kronecker power, divided by sqrt(256)). H256 is
 * symmetric and orthogonal, so it is its own inverse and x H = H x. Fast form: four radix-4
 * stages with strides 1, 4, 16, 64, each y = 0.5 * H4 . (x[b], x[b+s], x[b+2s], x[b+3s]);
 * 4 * 256 additions per group instead of 256 * 256 multiply-adds.
 */
#ifndef CLEF_QUANT_HADAMARD_H
#define CLEF_QUANT_HADAMARD_H

#include <stdint.h>

#define CLEF_CONVROT_GROUP 256

/* x[0..255] <- x H256, fp32 butterflies (each stage rounds once per output). */
void clef_fht256_f32(float *x);

/* y[0..255] = x H256 as the dense fp32 matrix product torch computes on CPU (comfy-kitchen
 * rotates with torch.matmul against the 256 x 256 matrix): the products x[k] H[k, j] are
 * exact (H = +-1/16) and torch's MKL sgemm sums them in two K-blocks of 128, each in order
 * from zero, then adds the two block sums — an order found against the library's own
 * results (tests/quant) that differs from the butterfly's in the last fp32 bit now and then.
 * The C form spends 256 x 256 multiplies and adds; the vector forms (AVX-512, AVX2) give its
 * bits with 3/8 of the adds, sharing partial sums between outputs whose signs agree
 * (hadamard.c). The CPU backend's INT8 quantizer rotates with it. */
void clef_hadamard256_torch_f32(const float *x, float *y);

/* Every 256-wide group of x[n] (n a multiple of 256), rotated in place, fp32. */
void clef_fht256_groups_f32(float *x, int64_t n);

#endif /* CLEF_QUANT_HADAMARD_H */
