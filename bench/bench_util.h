/*
 * bench_util.h — what every bench program needs to time itself: a monotonic clock (seconds,
 * or milliseconds for benches that report ms) and the median of a set of run times (benches
 * report the median of N runs, warm-up excluded; for even N the mean of the middle two).
 * Header-only; include as "../bench_util.h" from bench/<name>/.
 */
#ifndef CLEF_BENCH_UTIL_H
#define CLEF_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double bench_now_ms(void) {
    return 1e3 * bench_now_s();
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (n > 0); sorts v in place. */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* CLEF_BENCH_UTIL_H */
