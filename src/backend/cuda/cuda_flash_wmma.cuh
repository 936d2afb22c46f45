/*
 * cuda_flash_wmma.cuh — the WMMA register-accumulator flash attention of cuda_flash_wmma.cu
 * (head dims 65..80 today; one sequence per call), for cuda_attention.cu's dispatch.
 */
#ifndef CLEF_BACKEND_CUDA_FLASH_WMMA_CUH
#define CLEF_BACKEND_CUDA_FLASH_WMMA_CUH

#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

/* 1 when the kernel ran args (head_dim 64, 65..80, 128 or 256; one sequence; scratch of
 * cuda_flash_wmma_workspace_size bytes, 16-byte aligned), else 0 and nothing ran. */
int cuda_flash_wmma_attention(clef_backend *be, const clef_attention_args *args, void *scratch);
size_t cuda_flash_wmma_workspace_size(int64_t n_kv, int64_t n_kv_heads, int64_t head_dim);

#endif
