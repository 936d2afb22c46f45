/*
 * bench_cpu_decide.c — time one whole decision through the public API, as a program using
 * libclef runs it: clef_model_load once (timed apart), then 1 warm-up + RUNS timed
 * clef_model_decide calls on the same request body (parse, validate, tokenize, backbone,
 * joint schema head, softmax, answer JSON). Prints one JSON line for bench/cpu_decide/run.sh:
 *   {"load_s", "ms" (median wall ms of a decision), "cpu_s" (median CPU seconds of a decision,
 *    all threads), "runs", "threads", "peak_rss" (bytes: the process's peak, load included),
 *    "weight_bytes", "workspace_bytes", "answer": <the response body of the last decision>}
 *
 *   bench_cpu_decide RELEASE_DIR RECORD_FILE RUNS THREADS MAX_LENGTH
 */
#include "../bench_util.h"
#include "backend/cpu/cpu_isa.h"
#include "clef.h"
#include "core/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* CPU seconds of the whole process (all threads): steadier than wall time when other jobs
 * share the machine. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s RELEASE_DIR RECORD_FILE RUNS THREADS MAX_LENGTH\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *record_path = argv[2];
    int runs = atoi(argv[3]), threads = atoi(argv[4]), max_length = atoi(argv[5]);
    if (runs <= 0 || runs > 1000 || threads <= 0 || max_length <= 0) {
        fprintf(stderr, "RUNS (1..1000), THREADS and MAX_LENGTH must be > 0\n");
        return 2;
    }
    char *request = NULL;
    size_t request_len = 0;
    if (clef_read_file(record_path, (size_t)64 << 20, &request, &request_len) != CLEF_OK) {
        fprintf(stderr, "record: %s\n", clef_last_error());
        return 1;
    }

    clef_model_params mp = clef_model_default_params();
    mp.n_threads = threads;
    mp.max_length = max_length;
    clef_model *model = NULL;
    double t0 = bench_now_s();
    if (clef_model_load(dir, &mp, &model) != CLEF_OK) {
        fprintf(stderr, "load failed: %s\n", clef_last_error());
        free(request);
        return 1;
    }
    double load_s = bench_now_s() - t0;

    double *wall = malloc(sizeof(double) * (size_t)runs), *cpu = malloc(sizeof(double) * (size_t)runs);
    char *answer = NULL;
    int st = CLEF_OK;
    for (int i = 0; i <= runs && st == CLEF_OK; i++) {
        clef_string_free(answer);
        answer = NULL;
        double w0 = bench_now_s(), c0 = cpu_s();
        st = clef_model_decide(model, request, request_len, &answer);
        if (i > 0) { /* decision 0 is the warm-up */
            wall[i - 1] = bench_now_s() - w0;
            cpu[i - 1] = cpu_s() - c0;
        }
    }
    if (st != CLEF_OK) {
        fprintf(stderr, "decide failed: %s: %s\n", clef_status_str(st), clef_last_error());
    } else {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("{\"load_s\": %.3f, \"ms\": %.3f, \"cpu_s\": %.3f, \"runs\": %d, \"threads\": %d, "
               "\"isa\": \"%s\", \"peak_rss\": %lld, \"weight_bytes\": %llu, \"workspace_bytes\": %llu, "
               "\"answer\": %s}\n",
               load_s, bench_median(wall, runs) * 1e3, bench_median(cpu, runs), runs, threads,
               cpu_isa_name(cpu_isa_active()),
               (long long)ru.ru_maxrss * 1024, (unsigned long long)clef_model_weight_bytes(model),
               (unsigned long long)clef_model_workspace_bytes(model), answer);
    }
    clef_string_free(answer);
    free(wall);
    free(cpu);
    free(request);
    clef_model_free(model);
    return st == CLEF_OK ? 0 : 1;
}
