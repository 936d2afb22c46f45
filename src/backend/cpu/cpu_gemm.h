/*
 * cpu_gemm.h — the CPU backend's one matrix-multiply kernel, shared by matmul, attention and
 * the chunked gated delta rule: C[M, N] (+)= A[M, K] B[K, N], A fp32 row-major, B typed (F32
 * or BF16) in either of two layouts:
 *   CPU_GEMM_B_NK: element (k, n) at data[n * ld + k]   (a weight W[N, K]: y = x W^T)
 *   CPU_GEMM_B_KN: element (k, n) at data[k * ld + n]   (a plain right operand, e.g. V)
 *
 * BLIS-style: B is packed per (KC x NC) block into NR-wide fp32 panels (BF16 converted while
 * packing), A per (MC x KC) block into MR-tall panels, and an MR x NR register-tile kernel
 * does the arithmetic: AVX-512 8 x 32, AVX2 6 x 16 or portable fmaf 8 x 32 (cpu_isa.h picks).
 *
 * Determinism: every C element is the same sequence of fused multiply-adds over k (in KC
 * blocks, ascending), whatever M, the row's position, the thread split or the instruction
 * set, so a row's result does not depend on what else is in the batch, and every build and
 * CPU computes the same bits.
 */
#ifndef CLEF_BACKEND_CPU_GEMM_H
#define CLEF_BACKEND_CPU_GEMM_H

#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

/* MR, NR: the granularity callers split rows and columns between threads by (the largest
 * tile); MC: the A packing area's rows (every instruction set's row block fits). */
#define CPU_GEMM_MR 8
#define CPU_GEMM_NR 32
#define CPU_GEMM_MC 256
#define CPU_GEMM_KC 256
#define CPU_GEMM_NC 1024

/* floats of packing scratch one cpu_gemm call needs (per thread) */
#define CPU_GEMM_PACK_FLOATS ((size_t)CPU_GEMM_MC * CPU_GEMM_KC + (size_t)CPU_GEMM_KC * CPU_GEMM_NC)

typedef enum cpu_gemm_b_layout { CPU_GEMM_B_NK = 0, CPU_GEMM_B_KN = 1 } cpu_gemm_b_layout;

typedef struct cpu_gemm_b {
    clef_wtype type;
    cpu_gemm_b_layout layout;
    const void *data;
    int64_t ld;
} cpu_gemm_b;

/* Single-threaded. accumulate: C += A B, else C = A B. bias [N] or NULL is added after.
 * pack: CPU_GEMM_PACK_FLOATS floats, 64-byte aligned. */
void cpu_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const cpu_gemm_b *B,
              const float *bias, float *C, int64_t ldc, int accumulate, float *pack);

/* The operand B restricted to columns [n0, ...) (for splitting N between threads). */
cpu_gemm_b cpu_gemm_b_cols(const cpu_gemm_b *B, int64_t n0);

#endif /* CLEF_BACKEND_CPU_GEMM_H */
