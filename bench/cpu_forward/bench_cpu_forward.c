/*
 * bench_cpu_forward.c — time the engine's Qwen3.5 text forward on a release directory:
 * load once, 1 warm-up + RUNS timed forwards over T random tokens, print the median wall time,
 * tokens/s, the median CPU seconds of a forward (all threads) and the process's peak RSS as
 * one JSON line (run.sh puts it in a table next to PyTorch).
 * Excluded from the time: loading, the warm-up. Included: the whole forward to the final norm.
 * The release is opened and validated with clef_release_open and the backbone loaded with
 * qwen35_load_release, as the engine does.
 *
 *   bench_cpu_forward DIR T RUNS THREADS
 */
#include "../bench_util.h"
#include "backend/cpu/cpu_isa.h"
#include "clef.h"
#include "model/qwen35.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* CPU seconds of the whole process (all threads): less sensitive than wall time to other
 * jobs on a shared machine (spin-waiting threads still count). */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR T RUNS THREADS\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int64_t T = atoll(argv[2]);
    int runs = atoi(argv[3]), threads = atoi(argv[4]);
    if (T <= 0 || runs <= 0 || threads <= 0) {
        fprintf(stderr, "T, RUNS and THREADS must be > 0\n");
        return 2;
    }
    clef_release *rel = NULL;
    if (clef_release_open(dir, NULL, &rel) != CLEF_OK) {
        fprintf(stderr, "release refused: %s\n", clef_last_error());
        return 1;
    }
    const int64_t vocab = clef_release_get_config(rel)->text.vocab_size;
    clef_backend_params bp = clef_backend_default_params();
    bp.n_threads = threads;
    clef_backend *be = NULL;
    qwen35_model *m = NULL;
    qwen35_state *s = NULL;
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = T;
    if (clef_backend_cpu_create(&bp, &be) != CLEF_OK || qwen35_load_release(rel, be, &m) != CLEF_OK ||
        qwen35_state_create(m, be, &p, &s) != CLEF_OK) {
        fprintf(stderr, "load failed: %s\n", clef_last_error());
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
    uint64_t x = 1;
    for (int64_t t = 0; t < T; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[t] = (int32_t)((x >> 33) % (uint64_t)vocab);
    }
    int64_t seq[2] = {0, T};
    double *times = malloc(sizeof(double) * (size_t)runs), *cpu = malloc(sizeof(double) * (size_t)runs);
    for (int i = 0; i <= runs; i++) {
        double t0 = bench_now_s(), c0 = cpu_s();
        if (qwen35_forward(m, s, 1, seq, ids, NULL) != CLEF_OK) {
            fprintf(stderr, "forward failed: %s\n", clef_last_error());
            return 1;
        }
        if (i > 0) { /* the first run is the warm-up */
            times[i - 1] = bench_now_s() - t0;
            cpu[i - 1] = cpu_s() - c0;
        }
    }
    double med = bench_median(times, runs), med_cpu = bench_median(cpu, runs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"ms\": %.3f, \"tok_s\": %.1f, \"cpu_s\": %.3f, \"peak_rss\": %lld, \"runs\": %d, \"weight_bytes\": %zu, \"state_bytes\": %zu, \"isa\": \"%s\"}\n",
           med * 1e3, (double)T / med, med_cpu, (long long)ru.ru_maxrss * 1024, runs, qwen35_weight_bytes(m),
           qwen35_state_bytes(s), cpu_isa_name(cpu_isa_active())); /* the GEMM tile that ran */
    free(times);
    free(cpu);
    free(ids);
    qwen35_state_free(s);
    qwen35_free(m);
    clef_backend_free(be);
    clef_release_free(rel);
    return 0;
}
