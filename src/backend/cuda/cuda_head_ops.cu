/*
 * cuda_head_ops.cu — the head ops of backend.h on the GPU (segment sums, row dots and
 * cosines, segmented softmax, gathered row adds, the scorer's pair features, axpy): the
 * reductions of the joint schema head.
 *
 * Each output element is computed by one thread in the CPU reference's order
 * (cpu_head_ops.c), in double with explicitly rounded operations (no FMA contraction), so the
 * results equal the CPU's bit for bit except where CUDA's exp differs from the host's in the
 * last bit of a double (segment_softmax). These ops are small (the head's rows, not the
 * prompt's), so the simple mapping costs little.
 */
#include "backend/cuda/cuda_internal.cuh"

#define HEAD_THREADS 128

/* one thread per (segment, column) */
__global__ void k_segment_sum(int64_t n_seg, int64_t dim, const clef_segment *segs, const float *x, int64_t ldx,
                              const float *row_weight, float *y, int64_t ldy) {
    const int64_t s = blockIdx.y;
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_seg || c >= dim)
        return;
    const clef_segment g = segs[s];
    double acc = 0.0;
    for (int64_t r = g.begin; r < g.end; r++) {
        const double v = x[r * ldx + c];
        acc = row_weight ? __dadd_rn(acc, __dmul_rn((double)row_weight[r], v)) : __dadd_rn(acc, v);
    }
    const double inv = row_weight ? 1.0 : __drcp_rn((double)g.count);
    float out = (float)__dmul_rn(acc, inv);
    float *dst = y + (int64_t)g.dst * ldy + c;
    *dst = g.accumulate ? __fadd_rn(*dst, out) : out;
}

void cuda_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs, const float *x,
                      int64_t ldx, const float *row_weight, float *y, int64_t ldy) {
    if (cuda_ctx(be)->status != CLEF_OK || n_seg <= 0 || dim <= 0)
        return;
    dim3 grid(cuda_blocks(dim, HEAD_THREADS), (unsigned)n_seg);
    k_segment_sum<<<grid, HEAD_THREADS, 0, cuda_ctx(be)->stream>>>(n_seg, dim, segs, x, ldx, row_weight, y, ldy);
    CUDA_CHECK_LAUNCH(be, "segment_sum kernel");
}

__global__ void k_row_dot(int64_t n, int64_t dim, const float *a, int64_t lda, const int32_t *ia, const float *b,
                          int64_t ldb, const int32_t *ib, float scale, float eps, float *out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const float *ar = a + (ia ? (int64_t)ia[i] : i) * lda, *br = b + (ib ? (int64_t)ib[i] : i) * ldb;
    double dot = 0.0, na = 0.0, nb = 0.0;
    for (int64_t j = 0; j < dim; j++) {
        const double x = ar[j], y = br[j];
        dot = __dadd_rn(dot, __dmul_rn(x, y));
        na = __dadd_rn(na, __dmul_rn(x, x));
        nb = __dadd_rn(nb, __dmul_rn(y, y));
    }
    double v = __dmul_rn((double)scale, dot);
    if (eps > 0.0f) {
        const double e = eps, la = sqrt(na), lb = sqrt(nb);
        v = __ddiv_rn(v, __dmul_rn(la > e ? la : e, lb > e ? lb : e));
    }
    out[i] = (float)v;
}

void cuda_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda, const int32_t *ia,
                  const float *b, int64_t ldb, const int32_t *ib, float scale, float eps, float *out) {
    if (cuda_ctx(be)->status != CLEF_OK || n <= 0)
        return;
    k_row_dot<<<cuda_blocks(n, HEAD_THREADS), HEAD_THREADS, 0, cuda_ctx(be)->stream>>>(n, dim, a, lda, ia, b, ldb, ib,
                                                                                        scale, eps, out);
    CUDA_CHECK_LAUNCH(be, "row_dot kernel");
}

__global__ void k_segment_softmax(int64_t n_seg, const int32_t *offsets, const float *x, float *y) {
    const int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_seg)
        return;
    const int64_t i0 = offsets[s], i1 = offsets[s + 1];
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = i0; i < i1; i++)
        m = x[i] > m ? x[i] : m;
    for (int64_t i = i0; i < i1; i++)
        sum = __dadd_rn(sum, exp((double)x[i] - m));
    for (int64_t i = i0; i < i1; i++)
        y[i] = (float)__ddiv_rn(exp((double)x[i] - m), sum);
}

void cuda_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets, const float *x, float *y) {
    if (cuda_ctx(be)->status != CLEF_OK || n_seg <= 0)
        return;
    k_segment_softmax<<<cuda_blocks(n_seg, HEAD_THREADS), HEAD_THREADS, 0, cuda_ctx(be)->stream>>>(n_seg, offsets, x, y);
    CUDA_CHECK_LAUNCH(be, "segment_softmax kernel");
}

__global__ void k_add_rows(int64_t rows, int64_t cols, const float *x, int64_t ldx, const float *v, int64_t ldv,
                           const int32_t *idx, float *y, int64_t ldy) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols)
        return;
    const int64_t r = i / cols, c = i - r * cols;
    const float *vr = v + (idx ? (int64_t)idx[r] * ldv : 0);
    y[r * ldy + c] = __fadd_rn(x[r * ldx + c], vr[c]);
}

void cuda_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx, const float *v,
                   int64_t ldv, const int32_t *idx, float *y, int64_t ldy) {
    if (cuda_ctx(be)->status != CLEF_OK || rows * cols <= 0)
        return;
    k_add_rows<<<cuda_blocks(rows * cols, 256), 256, 0, cuda_ctx(be)->stream>>>(rows, cols, x, ldx, v, ldv, idx, y, ldy);
    CUDA_CHECK_LAUNCH(be, "add_rows kernel");
}

__global__ void k_pair_features(int64_t rows, int64_t dim, const float *f, int64_t ldf, const int32_t *idx,
                                const float *o, int64_t ldo, float *feat, int64_t ldfeat) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * dim)
        return;
    const int64_t r = i / dim, j = i - r * dim;
    const float fv = f[(int64_t)idx[r] * ldf + j], ov = o[r * ldo + j];
    float *dst = feat + r * ldfeat;
    dst[j] = fv;
    dst[dim + j] = ov;
    dst[2 * dim + j] = __fmul_rn(fv, ov);
    dst[3 * dim + j] = fabsf(__fsub_rn(fv, ov));
}

void cuda_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f, int64_t ldf, const int32_t *idx,
                        const float *o, int64_t ldo, float *feat, int64_t ldfeat) {
    if (cuda_ctx(be)->status != CLEF_OK || rows * dim <= 0)
        return;
    k_pair_features<<<cuda_blocks(rows * dim, 256), 256, 0, cuda_ctx(be)->stream>>>(rows, dim, f, ldf, idx, o, ldo, feat,
                                                                                    ldfeat);
    CUDA_CHECK_LAUNCH(be, "pair_features kernel");
}

__global__ void k_axpy(int64_t n, float alpha, const float *x, float *y) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i])); /* one rounding per product and per sum */
}

void cuda_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y) {
    if (cuda_ctx(be)->status != CLEF_OK || n <= 0)
        return;
    k_axpy<<<cuda_blocks(n, 256), 256, 0, cuda_ctx(be)->stream>>>(n, alpha, x, y);
    CUDA_CHECK_LAUNCH(be, "axpy kernel");
}
