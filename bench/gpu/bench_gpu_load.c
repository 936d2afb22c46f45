/*
 * bench_gpu_load.c — a release from the page cache to a ready model on the GPU: how fast
 * (GB/s), and that no weight exists twice in host RAM on the way (peak host RSS) or on the
 * device (the backend's resident/peak counters against the weight bytes).
 *
 *   bench_gpu_load RELEASE_DIR [loads] [device]      (defaults: 3 loads, device "cuda")
 *
 * The release is one make_load_release.py writes (the Clef-flash 9B shapes, BF16). Steps:
 *  1. the release's files in the page cache: the share of their pages resident (mincore)
 *     before and after one sequential read of every file (the warm-up);
 *  2. the floors of the load's stages over the bytes a load reads (every text., head. and
 *     vision. tensor; lm_head's rows are read per record, never loaded): reading them from
 *     the page cache as the loader does (clef_release_read_threads into page-locked staging,
 *     64 MiB pieces, and 128 MiB for comparison), checking them for NaN/Inf
 *     (clef_count_nonfinite, one thread), copying 64 MiB pieces from page-locked memory to
 *     the device (clef_backend_write); then reading and copying together, the copy of each
 *     piece waited for before the next read (the loader before two buffers) and overlapped
 *     with it (the loader's schedule now);
 *  3. `loads` timed loads: clef_model_load(device) (release validated, tokenizer, backbone,
 *     head and vision tower placed) then clef_context_create for 12,016 tokens of records of
 *     at most 8,192 (the run state bench_gpu_forward plans), to a model ready to decide.
 *     Per load: seconds, GB/s of the bytes read and of the whole release, the process's host
 *     RSS before and its peak during the load (VmHWM, reset before each load through
 *     /proc/self/clear_refs), and the device bytes of the model and of the context (resident,
 *     peak). The first load prints its progress (clef_model_params.progress) every 10%.
 * Prints markdown tables. Exit 77 (SKIPPED) without a CUDA device when device is cuda.
 */
#include "../bench_util.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "clef.h"
#include "clef_release.h"
#include "release/release.h"
#include "release/values.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIECE ((size_t)64 << 20)
#define GIB 1073741824.0

/* VmRSS / VmHWM of this process in bytes (0 if /proc is missing). */
static double proc_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':')
            kb = atof(line + n + 1);
    if (f)
        fclose(f);
    return kb * 1024.0;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0: "5" to clear_refs); 1 on success. */
static int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Share of path's pages in the page cache (mincore over a mapping, which reads nothing). */
static double cached_share(const char *path, uint64_t *size) {
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) || sb.st_size == 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    *size = (uint64_t)sb.st_size;
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = ((size_t)sb.st_size + (size_t)page - 1) / (size_t)page, in = 0;
    unsigned char *vec = malloc(pages);
    if (vec && mincore(map, (size_t)sb.st_size, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            in += vec[i] & 1;
    free(vec);
    munmap(map, (size_t)sb.st_size);
    return (double)in / (double)pages;
}

/* Sequential read of the whole file (the warm-up); bytes read. */
static uint64_t read_file(const char *path, char *buf) {
    int fd = open(path, O_RDONLY);
    uint64_t total = 0;
    ssize_t k;
    while (fd >= 0 && (k = pread(fd, buf, PIECE, (off_t)total)) > 0)
        total += (uint64_t)k;
    if (fd >= 0)
        close(fd);
    return total;
}

static int loaded_tensor(const clef_tensor_info *t) {
    return !strncmp(t->name, "text.", 5) || !strncmp(t->name, "head.", 5) || !strncmp(t->name, "vision.", 7);
}

/* One pass over the loaded tensors in pieces of `piece` bytes read with
 * clef_release_read_threads into stage (2 x PIECE bytes); with be, each piece then copied to
 * dev (PIECE bytes; later pieces overwrite earlier ones): overlap 0 waits for each copy
 * before the next read (clef_backend_write), overlap 1 reads each piece into the other half
 * of stage while the last one is copied (synchronize, then clef_backend_write_async, as the
 * weight loader does). Seconds; *st a status. */
static double read_pass(const clef_release *rel, char *stage, size_t piece, clef_backend *be, void *dev,
                        int overlap, int *st) {
    double t = bench_now_s();
    int half = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel) && *st == CLEF_OK; i++) {
        const clef_tensor_info *ti = clef_release_tensor_at(rel, i);
        if (!loaded_tensor(ti))
            continue;
        for (uint64_t off = 0; off < ti->n_bytes && *st == CLEF_OK; off += piece) {
            clef_tensor_info part = *ti;
            char *buf = stage + (overlap ? (size_t)half * PIECE : 0);
            part.offset = ti->offset + off;
            part.n_bytes = ti->n_bytes - off < piece ? ti->n_bytes - off : piece;
            *st = clef_release_read_threads(rel, &part, buf, 0);
            if (*st == CLEF_OK && be && !overlap)
                *st = clef_backend_write(be, dev, buf, (size_t)part.n_bytes);
            if (*st == CLEF_OK && be && overlap && (*st = clef_backend_synchronize(be)) == CLEF_OK)
                *st = clef_backend_write_async(be, dev, buf, (size_t)part.n_bytes);
            half ^= 1;
        }
    }
    if (be && *st == CLEF_OK)
        *st = clef_backend_synchronize(be);
    return bench_now_s() - t;
}

typedef struct progress_state {
    int next_tenth;
    double t0;
} progress_state;

static void on_progress(const char *stage, uint64_t done, uint64_t total, void *user) {
    progress_state *p = user;
    if (!p || strcmp(stage, "weights") || total == 0)
        return;
    while (p->next_tenth <= 10 && done * 10 >= (uint64_t)p->next_tenth * total) {
        printf("  progress: weights %3d%% (%.2f of %.2f GB) at %.2f s\n", p->next_tenth * 10, done / 1e9,
               total / 1e9, bench_now_s() - p->t0);
        p->next_tenth++;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gpu_load RELEASE_DIR [loads] [device]\n");
        return 2;
    }
    const char *dir = argv[1];
    const int loads = argc > 2 ? atoi(argv[2]) : 3;
    const char *device = argc > 3 ? argv[3] : "cuda";
    const int on_cuda = strncmp(device, "cuda", 4) == 0;
    if (on_cuda && clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    clef_release *rel = NULL;
    if (clef_release_open(dir, NULL, &rel) != CLEF_OK) {
        fprintf(stderr, "release: %s\n", clef_last_error());
        return 1;
    }
    uint64_t release_bytes = 0, load_bytes = 0, lm_bytes = 0;
    size_t n_tensors = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (loaded_tensor(t))
            load_bytes += t->n_bytes, n_tensors++;
        else if (!strcmp(t->name, "lm_head.weight"))
            lm_bytes += t->n_bytes;
    }
    printf("# release %s: %zu files\n", clef_release_dir(rel), clef_release_file_count(rel));

    /* 1. page cache: resident share before and after a warm-up read of every file */
    char *buf = malloc(PIECE);
    double cached_before = 0, cached_after = 0, warm_s = bench_now_s();
    uint64_t warm_bytes = 0;
    for (size_t f = 0; f < clef_release_file_count(rel); f++) {
        char path[4096];
        uint64_t size = 0;
        snprintf(path, sizeof path, "%s/%s", clef_release_dir(rel), clef_release_file_name(rel, f));
        cached_before += cached_share(path, &size) * (double)size;
        release_bytes += size;
        warm_bytes += read_file(path, buf);
    }
    warm_s = bench_now_s() - warm_s;
    for (size_t f = 0; f < clef_release_file_count(rel); f++) {
        char path[4096];
        uint64_t size = 0;
        snprintf(path, sizeof path, "%s/%s", clef_release_dir(rel), clef_release_file_name(rel, f));
        cached_after += cached_share(path, &size) * (double)size;
    }
    free(buf);
    printf("tensor files %.2f GB (%zu tensors loaded: %.2f GB; lm_head %.2f GB is read by rows per record, "
           "not loaded)\n", release_bytes / 1e9, n_tensors, load_bytes / 1e9, lm_bytes / 1e9);
    printf("page cache: %.1f%% of the files' pages resident before the warm-up, %.1f%% after; warm-up read "
           "(1 thread, 64 MiB preads) %.2f GB in %.2f s = %.1f GB/s\n", 100.0 * cached_before / (double)release_bytes,
           100.0 * cached_after / (double)release_bytes, warm_bytes / 1e9, warm_s, warm_bytes / 1e9 / warm_s);

    /* 2. the stages' floors, each alone */
    clef_backend *be = NULL;
    clef_model_params mp = clef_model_default_params();
    mp.device = device;
    if (on_cuda ? clef_backend_cuda_create(device[4] == ':' ? atoi(device + 5) : 0, &be)
                : clef_backend_cpu_create(NULL, &be)) {
        fprintf(stderr, "backend: %s\n", clef_last_error());
        return 1;
    }
    char *stage = clef_backend_host_alloc(be, 2 * PIECE);
    void *dev = clef_backend_alloc(be, PIECE);
    if (!stage || !dev) {
        fprintf(stderr, "floors: no memory for a 64 MiB staging / device buffer\n");
        return 1;
    }
    int st = CLEF_OK;
    double read_s[2] = {0, 0}, pipe_s[2] = {0, 0};
    for (int v = 0; v < 2 && st == CLEF_OK; v++) /* 64 MiB pieces (8 threads), 128 MiB (16) */
        read_s[v] = read_pass(rel, stage, v ? 2 * PIECE : PIECE, NULL, NULL, 0, &st);
    for (int v = 0; v < 2 && st == CLEF_OK; v++) /* read + copy: in turn, then overlapped */
        pipe_s[v] = read_pass(rel, stage, PIECE, be, dev, v, &st);
    memset(stage, 0x3c, PIECE); /* finite bf16 values: the whole scan runs */
    double t = bench_now_s();
    uint64_t first = 0, bad = 0;
    int nan = 0, reps = 16;
    for (int r = 0; r < reps; r++)
        bad += clef_count_nonfinite(CLEF_DTYPE_BF16, stage, PIECE / 2, &first, &nan);
    const double check_s = bench_now_s() - t;
    t = bench_now_s();
    for (int r = 0; r < 32 && st == CLEF_OK; r++)
        st = clef_backend_write(be, dev, stage, PIECE);
    const double copy_s = bench_now_s() - t;
    if (st != CLEF_OK || bad) {
        fprintf(stderr, "floors: %s\n", bad ? "non-finite values in a finite buffer" : clef_last_error());
        return 1;
    }
    clef_backend_release(be, dev);
    clef_backend_host_free(be, stage);
    clef_backend_free(be); /* the CUDA context stays: the loads below do not pay for it */
    printf("\nstage floors (over the loaded tensors; check and copy over a 64 MiB buffer):\n\n| stage | GB/s |\n|---|---|\n");
    printf("| read the loaded tensors from the page cache (64 MiB pieces, clef_release_read_threads: "
           "8 MiB per thread) | %.1f |\n", load_bytes / 1e9 / read_s[0]);
    printf("| the same in 128 MiB pieces (16 threads) | %.1f |\n", load_bytes / 1e9 / read_s[1]);
    printf("| read + copy to the device, 64 MiB pieces, each copy waited for before the next read "
           "(one staging buffer) | %.1f |\n", load_bytes / 1e9 / pipe_s[0]);
    printf("| read + copy, two staging buffers: piece k+1 read while piece k is copied "
           "(clef_backend_write_async; the loader's schedule) | %.1f |\n", load_bytes / 1e9 / pipe_s[1]);
    printf("| NaN/Inf check (clef_count_nonfinite, BF16, 1 thread; the load runs it on the read's threads) | %.1f |\n",
           reps * (double)PIECE / 1e9 / check_s);
    printf("| copy 64 MiB pieces to the %s (page-locked source, clef_backend_write) | %.1f |\n", device,
           32 * (double)PIECE / 1e9 / copy_s);

    /* 3. timed loads to a ready model */
    clef_context_params cp = clef_context_default_params();
    cp.max_tokens = 8 * 1502;
    mp.max_length = 8192;
    printf("\n| load | clef_model_load s | GB/s (loaded tensors) | GB/s (release files) | + context s | ready s | "
           "host RSS before GiB | peak host RSS GiB | peak - before GiB | model device resident / peak GiB | "
           "weights GiB | context resident / peak GiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int peak_ok = reset_peak_rss();
    for (int i = 0; i < loads; i++) {
        progress_state ps = {.next_tenth = 1, .t0 = bench_now_s()};
        mp.progress = i == 0 ? on_progress : NULL;
        mp.progress_user = &ps;
        peak_ok &= reset_peak_rss();
        const double rss0 = proc_status_bytes("VmRSS");
        clef_model *m = NULL;
        clef_context *ctx = NULL;
        double t0 = bench_now_s();
        if (clef_model_load(dir, &mp, &m) != CLEF_OK) {
            fprintf(stderr, "load: %s\n", clef_last_error());
            return 1;
        }
        double t1 = bench_now_s();
        if (clef_context_create(m, &cp, &ctx) != CLEF_OK) {
            fprintf(stderr, "context: %s\n", clef_last_error());
            return 1;
        }
        double t2 = bench_now_s();
        const double hwm = proc_status_bytes("VmHWM");
        clef_memory_info mm = {0}, cm = {0};
        clef_model_memory(m, &mm);
        clef_context_memory(ctx, &cm);
        printf("| %d | %.2f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %.2f | %.2f / %.2f |\n", i + 1,
               t1 - t0, load_bytes / 1e9 / (t1 - t0), release_bytes / 1e9 / (t1 - t0), t2 - t1, t2 - t0, rss0 / GIB,
               hwm / GIB, (hwm - rss0) / GIB, mm.resident / GIB, mm.peak / GIB, mm.weights / GIB, cm.resident / GIB,
               cm.peak / GIB);
        clef_context_free(ctx);
        clef_model_free(m);
    }
    printf("\npeak host RSS: %s\n", peak_ok ? "VmHWM reset before each load (/proc/self/clear_refs), so each row's peak is "
                                              "that load's"
                                            : "VmHWM could NOT be reset: each row's peak is the process's so far");
    printf("loaded tensor bytes %.2f GB = %.2f GiB; a second host copy of the weights would show as a peak that "
           "much above the RSS before\n", load_bytes / 1e9, load_bytes / GIB);
    clef_release_free(rel);
    return 0;
}
