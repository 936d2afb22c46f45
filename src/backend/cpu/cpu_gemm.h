/*
 * cpu_gemm.h — the CPU backend's one matrix-multiply kernel, shared by matmul, attention and
 * the chunked gated delta rule: C[M, N] (+)= A[M, K] B[K, N], A fp32 row-major, B typed (F32
 * or BF16) in one of three layouts:
 *   CPU_GEMM_B_NK: element (k, n) at data[n * ld + k]   (a weight W[N, K]: y = x W^T)
 *   CPU_GEMM_B_KN: element (k, n) at data[k * ld + n]   (a plain right operand, e.g. V)
 *   CPU_GEMM_B_PANELS: a weight pre-packed once at load by cpu_gemm_pack_panels: panels of
 *       CPU_GEMM_PANEL columns, element (k, n) at data[((n / P) * ld + k) * P + n % P] with
 *       P = CPU_GEMM_PANEL and ld = K (the rows of a panel); columns past N are zeros.
 *
 * BLIS-style: B is packed per (KC x NC) block into CPU_GEMM_PANEL-wide fp32 panels (BF16
 * converted while packing) — unless it is pre-packed F32, which the kernel reads in place —
 * A per (MC x KC) block into MR-tall panels, and an MR x NR register-tile kernel does the
 * arithmetic: AVX-512 8 x 32, AVX2 6 x 16 (half a panel, panel rows as its stride) or
 * portable fmaf 8 x 32 (cpu_isa.h picks). One panel width for every instruction set keeps a
 * pre-packed weight valid whatever level runs it (the level may be capped after load).
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

/* Columns per B panel, packed or pre-packed (a multiple of every tile's NR). */
#define CPU_GEMM_PANEL 32

typedef enum cpu_gemm_b_layout {
    CPU_GEMM_B_NK = 0,
    CPU_GEMM_B_KN = 1,
    CPU_GEMM_B_PANELS = 2
} cpu_gemm_b_layout;

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

/* The operand B restricted to columns [n0, ...) (for splitting N between threads; a multiple
 * of CPU_GEMM_PANEL for pre-packed panels). */
cpu_gemm_b cpu_gemm_b_cols(const cpu_gemm_b *B, int64_t n0);

/* Bytes of the pre-packed panels of an [N, K] weight whose elements take elem_bytes (4 for
 * F32 panels, 2 for BF16): N rounded up to whole panels. */
size_t cpu_gemm_panels_bytes(int64_t N, int64_t K, size_t elem_bytes);

/* Pre-pack panels [p0, p1) of the weight W [N, K] (row n at W + n * ldw elements, of type
 * src_type: F32, BF16 or F16) into dst (cpu_gemm_panels_bytes of the whole weight) as
 * CPU_GEMM_B_PANELS of out_type: F32 (from F32 or F16, exact) or BF16 (from BF16, as is).
 * Single-threaded; callers split panels between threads. */
void cpu_gemm_pack_panels(const void *W, int64_t ldw, clef_wtype src_type, int64_t N, int64_t K,
                          clef_wtype out_type, int64_t p0, int64_t p1, void *dst);

/* Row n of pre-packed panels (out_type F32 or BF16) as K floats (an embedding lookup). */
void cpu_gemm_panels_row(const void *panels, clef_wtype type, int64_t K, int64_t n, float *out);

#endif /* CLEF_BACKEND_CPU_GEMM_H */
