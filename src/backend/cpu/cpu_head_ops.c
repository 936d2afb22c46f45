/*
 * cpu_head_ops.c — the CPU implementations of the head ops of backend.h (segment sums, row
 * dots and cosines, segmented softmax, gathered row adds, the scorer's pair features, axpy):
 * the reductions the joint schema head used to run as host loops over backend memory.
 *
 * Every reduction accumulates in double and rounds to fp32 once; each output element is
 * computed by one thread in a fixed order, so results do not depend on the thread count.
 */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

/* Columns a segment-sum task accumulates at once (doubles kept on the stack). */
enum { SEGMENT_COLUMNS = 64 };

void cpu_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs,
                     const float *x, int64_t ldx, const float *row_weight, float *y,
                     int64_t ldy) {
    const int64_t n_blocks = (dim + SEGMENT_COLUMNS - 1) / SEGMENT_COLUMNS;
    const int64_t tasks = n_seg * n_blocks;
#pragma omp parallel for num_threads(be->n_threads) schedule(dynamic, 1) if (tasks > 1)
    for (int64_t task = 0; task < tasks; task++) {
        const clef_segment g = segs[task / n_blocks];
        const int64_t c0 = (task % n_blocks) * SEGMENT_COLUMNS;
        const int64_t nc = dim - c0 < SEGMENT_COLUMNS ? dim - c0 : SEGMENT_COLUMNS;
        double acc[SEGMENT_COLUMNS] = {0};
        for (int64_t r = g.begin; r < g.end; r++) {
            const float *row = x + r * ldx + c0;
            if (row_weight) {
                const double c = row_weight[r];
                for (int64_t j = 0; j < nc; j++)
                    acc[j] += c * row[j];
            } else {
                for (int64_t j = 0; j < nc; j++)
                    acc[j] += row[j];
            }
        }
        const double inv = row_weight ? 1.0 : 1.0 / (double)g.count;
        float *dst = y + (int64_t)g.dst * ldy + c0;
        for (int64_t j = 0; j < nc; j++) {
            float v = (float)(acc[j] * inv);
            dst[j] = g.accumulate ? dst[j] + v : v;
        }
    }
}

void cpu_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda,
                 const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib, float scale,
                 float eps, float *out) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (n * dim > 65536)
    for (int64_t i = 0; i < n; i++) {
        const float *ar = a + (ia ? ia[i] : i) * lda, *br = b + (ib ? ib[i] : i) * ldb;
        double dot = 0.0, na = 0.0, nb = 0.0;
        for (int64_t j = 0; j < dim; j++) {
            dot += (double)ar[j] * br[j];
            na += (double)ar[j] * ar[j];
            nb += (double)br[j] * br[j];
        }
        double v = (double)scale * dot;
        if (eps > 0.0f) {
            double e = eps, la = sqrt(na), lb = sqrt(nb);
            v /= (la > e ? la : e) * (lb > e ? lb : e);
        }
        out[i] = (float)v;
    }
}

void cpu_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets,
                         const float *x, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (n_seg > 64)
    for (int64_t s = 0; s < n_seg; s++) {
        const int64_t i0 = offsets[s], i1 = offsets[s + 1];
        double m = -INFINITY, sum = 0.0;
        for (int64_t i = i0; i < i1; i++)
            m = x[i] > m ? x[i] : m;
        for (int64_t i = i0; i < i1; i++)
            sum += exp((double)x[i] - m);
        for (int64_t i = i0; i < i1; i++)
            y[i] = (float)(exp((double)x[i] - m) / sum);
    }
}

void cpu_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                  const float *v, int64_t ldv, const int32_t *idx, float *y, int64_t ldy) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) {
        const float *vr = v + (idx ? (int64_t)idx[r] * ldv : 0);
        for (int64_t c = 0; c < cols; c++)
            y[r * ldy + c] = x[r * ldx + c] + vr[c];
    }
}

void cpu_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f,
                       int64_t ldf, const int32_t *idx, const float *o, int64_t ldo,
                       float *feat, int64_t ldfeat) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (rows * dim > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *fr = f + (int64_t)idx[r] * ldf, *orow = o + r * ldo;
        float *dst = feat + r * ldfeat;
        for (int64_t j = 0; j < dim; j++) {
            dst[j] = fr[j];
            dst[dim + j] = orow[j];
            dst[2 * dim + j] = fr[j] * orow[j];
            dst[3 * dim + j] = fabsf(fr[j] - orow[j]);
        }
    }
}

void cpu_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}
