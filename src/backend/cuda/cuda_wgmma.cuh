/*
 * cuda_wgmma.cuh — the Hopper (sm_90a) machinery the wgmma GEMM kernels share
 * (cuda_quant_wgmma.cu: INT8 and exact FP8; cuda_quant_fp8_wgmma.cu: FP8 with fp32 promotion):
 * mbarriers, bulk tensor copies (TMA, with multicast over a cluster), wgmma's shared-memory
 * descriptor and its fence / commit / wait, and on the host the tensor maps (128-byte swizzle)
 * and the check whether a device and operands can take these kernels. cuda_quant_wgmma.cu's
 * header comment describes the pipeline they make.
 */
#ifndef CLEF_BACKEND_CUDA_WGMMA_CUH
#define CLEF_BACKEND_CUDA_WGMMA_CUH

#include "backend/cuda/cuda_quant_internal.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#define WG_ROW 128      /* bytes of K per stage: one 128-byte swizzle row */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

/* Waits for the phase of the given parity to complete. A pipeline bug would hang here; past
 * ~10 s of waiting the kernel traps instead, so the backend reports a failed launch. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done = 0;
    long long start = 0;
    for (int tries = 0;; tries++) {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(smem_u32(bar)), "r"(parity)
                     : "memory");
        if (done)
            return;
        if (tries == 0)
            start = clock64();
        else if ((tries & 1023) == 0 && clock64() - start > 20000000000ll)
            __trap();
    }
}

/* box at coordinates (c0 = byte of K, c1 = row) of the tensor map into dst, counted on bar */
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}

/* The same box, multicast: written at dst (and its barrier at bar) in every block of the
 * cluster that mask names */
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1,
                                                      uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;"
                 ::"r"(smem_u32(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
}

/* arrive on the barrier at the same place in block `rank` of the cluster */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* wgmma shared-memory descriptor: 128-byte swizzle (mode 1, bits 62-63), stride byte offset
 * 1,024 (8 rows of 128 bytes, bits 32-45, in 16-byte units), leading byte offset unused for
 * swizzled K-major operands (1), start address in 16-byte units (bits 0-13). */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3ffff) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* The driver's tensor-map encoder, looked up once. Threads of several contexts may race here:
 * each stores the same pointer, and one that finds none yet only takes cuBLASLt this once. */
static PFN_cuTensorMapEncodeTiled_v12000 wg_encode_fn(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    static int failed = 0;
    if (!fn && !failed) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess && p)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        else {
            cudaGetLastError(); /* not this backend's failure: the caller falls back */
            failed = 1;
        }
    }
    return fn;
}

/* [rows, K] row-major elements of elem bytes at p, boxes of box_rows x box_bytes (128 or 64)
 * bytes, swizzled at that width */
static int wg_map(CUtensorMap *map, const void *p, int elem, int64_t rows, int64_t K, int box_rows,
                  int box_bytes = WG_ROW) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = wg_encode_fn();
    if (!enc)
        return 0;
    cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)(K * elem)};
    cuuint32_t box[2] = {(cuuint32_t)(box_bytes / elem), (cuuint32_t)box_rows}, one[2] = {1, 1};
    return enc(map, elem == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dims,
               strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
               box_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* Whether this device and these operands can take a wgmma kernel: sm_90 (the code is built
 * for sm_90a only), K a multiple of 16 and 16-byte aligned operands (TMA), sizes in int. */
static int wg_usable(clef_backend *be, int64_t T, int64_t N, int64_t K, const void *x, const void *w) {
    cuda_context *ctx = cuda_ctx(be);
    static int major = -1, minor = -1, dev = -1;
    if (dev != ctx->device) {
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx->device);
        dev = ctx->device;
    }
    return major == 9 && minor == 0 && K % 16 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0 &&
           T < INT32_MAX / 2 && N < INT32_MAX / 2 && K < INT32_MAX / 2;
}

#endif /* CLEF_BACKEND_CUDA_WGMMA_CUH */
