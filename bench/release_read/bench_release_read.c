/*
 * bench_release_read.c — how fast a release's tensors get from the page cache into memory,
 * next to `cat shards > /dev/null` in the same run.
 *
 * It writes a synthetic sharded release of --gb GB (default 3.5) into a fresh temporary
 * directory (after checking free disk and memory), warms the page cache, then per run times
 *   cat     `cat <every shard> > /dev/null` (the peer: the kernel's copy-out, one process)
 *   clef    clef_release_open + clef_release_read of every tensor into one planned arena
 *           (each tensor at its final place, one pread each): into 4 KiB pages with 1 thread,
 *           and into a huge-page arena (MADV_HUGEPAGE) with 1 and --threads threads
 * and prints one table (median of --runs runs; the first run of each is a warm-up and is
 * excluded; it also faults the arena in, as a loader's allocation would once) plus peak RSS,
 * and the same rows as JSON. The temporary release is deleted at the end.
 *
 * usage: bench_release_read [--gb 3.5] [--runs 5] [--threads N] [--dir TMP] [--keep]
 */
#include "../bench_util.h"

#include "release/release.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define N_SHARDS 4

static int write_text(const char *dir, const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* One shard: tensors of 64 MiB plus a few small ones (norm-sized), BF16, filled with a
 * pattern so no page is a shared zero page. Returns bytes of tensor data. */
static uint64_t write_shard(const char *dir, int shard, uint64_t target, FILE *index, int *first,
                            size_t *n_big_total) {
    const uint64_t big = (uint64_t)64 << 20, small = 8192;
    int n_big = (int)(target / big);
    if (n_big < 1)
        n_big = 1;
    const int n_small = 16;
    *n_big_total += (size_t)n_big;
    char *header = malloc((size_t)(n_big + n_small) * 160 + 64);
    size_t h = (size_t)sprintf(header, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < n_big + n_small; i++) {
        uint64_t n = i < n_big ? big : small;
        h += (size_t)sprintf(header + h, ",\"bench.s%d.t%d.weight\":{\"dtype\":\"BF16\",\"shape\":[%llu],"
                             "\"data_offsets\":[%llu,%llu]}",
                             shard, i, (unsigned long long)(n / 2), (unsigned long long)off,
                             (unsigned long long)(off + n));
        fprintf(index, "%s\n    \"bench.s%d.t%d.weight\": \"shard-%d.safetensors\"", *first ? "" : ",",
                shard, i, shard);
        *first = 0;
        off += n;
    }
    h += (size_t)sprintf(header + h, "}");
    while (h % 8)
        header[h++] = ' ';
    char path[1200];
    snprintf(path, sizeof path, "%s/shard-%d.safetensors", dir, shard);
    FILE *f = fopen(path, "wb");
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)h >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, h, f);
    size_t chunk = 8 << 20;
    unsigned char *buf = malloc(chunk);
    for (size_t i = 0; i < chunk; i++)
        buf[i] = (unsigned char)(i * 2654435761u >> 13);
    for (uint64_t w = 0; w < off;) {
        size_t n = off - w < chunk ? (size_t)(off - w) : chunk;
        fwrite(buf, 1, n, f);
        w += n;
    }
    free(buf);
    fclose(f);
    free(header);
    return off;
}

typedef struct reader {
    const clef_release *rel;
    unsigned char *arena;
    const uint64_t *placement;
    atomic_size_t next;
    atomic_int failed;
} reader;

static void *read_worker(void *arg) {
    reader *r = arg;
    size_t n = clef_release_tensor_count(r->rel);
    for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < n;) {
        const clef_tensor_info *t = clef_release_tensor_at(r->rel, i);
        if (clef_release_read(r->rel, t, r->arena + r->placement[i]) != CLEF_OK)
            atomic_store(&r->failed, 1);
    }
    return NULL;
}

/* Open the release and read every tensor into its planned place; returns seconds. */
/* The weights' arena: anonymous memory, 2 MiB aligned; with huge pages the kernel's copy
 * into it takes a TLB miss per 2 MiB instead of per 4 KiB (what a loader should do too). */
static unsigned char *alloc_arena(uint64_t size, int use_hugepages) {
    size_t len = (size_t)((size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1));
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("bench: mmap arena");
        exit(1);
    }
    if (use_hugepages)
        madvise(p, len, MADV_HUGEPAGE);
    return p;
}

static void free_arena(unsigned char *arena, uint64_t size) {
    if (arena)
        munmap(arena, (size_t)((size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1)));
}

static double clef_read_all(const char *dir, unsigned char **arena, uint64_t *arena_size, int threads,
                            int use_hugepages) {
    double t0 = bench_now_s();
    clef_release_opts opts = clef_release_default_opts();
    opts.skip_model_checks = 1; /* synthetic tensor names: file-level checks only */
    clef_release *rel = NULL;
    if (clef_release_open(dir, &opts, &rel) != CLEF_OK) {
        fprintf(stderr, "bench: open failed: %s\n", clef_last_error());
        exit(1);
    }
    size_t n = clef_release_tensor_count(rel);
    uint64_t *placement = malloc(n * sizeof *placement), total = 0;
    for (size_t i = 0; i < n; i++) {
        placement[i] = total;
        total += (clef_release_tensor_at(rel, i)->n_bytes + 63) & ~(uint64_t)63;
    }
    if (!*arena) {
        *arena = alloc_arena(total, use_hugepages);
        *arena_size = total;
    }
    reader r = {rel, *arena, placement, 0, 0};
    pthread_t tid[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, read_worker, &r);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    double dt = bench_now_s() - t0;
    if (atomic_load(&r.failed)) {
        fprintf(stderr, "bench: a read failed: %s\n", clef_last_error());
        exit(1);
    }
    free(placement);
    clef_release_free(rel);
    return dt;
}

static double cat_all(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cat '%s'/shard-*.safetensors > /dev/null", dir);
    double t0 = bench_now_s();
    if (system(cmd) != 0) {
        fprintf(stderr, "bench: cat failed\n");
        exit(1);
    }
    return bench_now_s() - t0;
}

int main(int argc, char **argv) {
    double gb = 3.5;
    int runs = 5, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), keep = 0;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gb") && i + 1 < argc)
            gb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            base = argv[++i];
        else if (!strcmp(argv[i], "--keep"))
            keep = 1;
        else {
            fprintf(stderr, "usage: %s [--gb 3.5] [--runs 5] [--threads N] [--dir TMP] [--keep]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1)
        threads = 1;
    if (threads > 64)
        threads = 64;
    if (runs < 1)
        runs = 1;
    uint64_t bytes = (uint64_t)(gb * 1e9);
    struct statvfs vfs;
    struct sysinfo si;
    if (statvfs(base, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < bytes + bytes / 5) {
        fprintf(stderr, "bench: %s has %.1f GB free, needs %.1f\n", base,
                (double)vfs.f_bavail * vfs.f_frsize / 1e9, (double)bytes * 1.2 / 1e9);
        return 1;
    }
    /* page cache (the release) + the arena must fit in memory, or we would time the disk */
    if (sysinfo(&si) == 0 && (uint64_t)si.totalram * si.mem_unit < bytes * 3 + bytes / 2) {
        fprintf(stderr, "bench: %.1f GB of RAM is too little for a %.1f GB release + arena; use --gb\n",
                (double)si.totalram * si.mem_unit / 1e9, (double)bytes / 1e9);
        return 1;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/clef-bench-release-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    fprintf(stderr, "bench: writing a %.2f GB synthetic release in %s ...\n", (double)bytes / 1e9, dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *index = fopen(path, "w");
    fprintf(index, "{\n  \"metadata\": {\"total_size\": TOTAL_SIZE_PLACEHOLDER},\n  \"weight_map\": {");
    int first = 1;
    uint64_t total = 0;
    size_t n_tensors_written = 0;
    for (int s = 0; s < N_SHARDS; s++)
        total += write_shard(dir, s, bytes / N_SHARDS, index, &first, &n_tensors_written);
    fprintf(index, "\n  }\n}\n");
    fclose(index);
    /* patch total_size (written last because it is only known now) */
    {
        char *text = NULL;
        FILE *f = fopen(path, "r");
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        text = malloc((size_t)n + 64);
        size_t got = fread(text, 1, (size_t)n, f);
        text[got] = '\0';
        fclose(f);
        char *at = strstr(text, "TOTAL_SIZE_PLACEHOLDER");
        char num[32];
        snprintf(num, sizeof num, "%llu", (unsigned long long)total);
        f = fopen(path, "w");
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(num, f);
        fputs(at + strlen("TOTAL_SIZE_PLACEHOLDER"), f);
        fclose(f);
        free(text);
    }
    write_text(dir, "config.json",
               "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"text_config\": {"
               "\"vocab_size\": 1024, \"hidden_size\": 64, \"intermediate_size\": 128, "
               "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
               "\"head_dim\": 16, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, "
               "\"linear_key_head_dim\": 16, \"linear_value_head_dim\": 16, "
               "\"linear_conv_kernel_dim\": 4, \"rope_parameters\": {\"mrope_section\": [1, 1, 0]}}}\n");

    /* Rows: the peer, then clef into a 4 KiB-page arena and into a huge-page arena (1 and N
     * threads). Each arena is faulted in by its warm-up call, as a loader's allocation would be
     * once; the timed runs then measure open + validation + the copies. */
    enum { ROW_CAT, ROW_SMALL_1, ROW_HUGE_1, ROW_HUGE_N, N_ROWS };
    double *t[N_ROWS];
    for (int i = 0; i < N_ROWS; i++)
        t[i] = calloc((size_t)runs, sizeof(double));
    unsigned char *arena_small = NULL, *arena_huge = NULL;
    uint64_t arena_size = 0;
    cat_all(dir); /* warm the page cache */
    cat_all(dir);
    clef_read_all(dir, &arena_small, &arena_size, 1, 0);
    clef_read_all(dir, &arena_huge, &arena_size, 1, 1);
    clef_read_all(dir, &arena_huge, &arena_size, threads, 1);
    for (int r = 0; r < runs; r++) {
        t[ROW_CAT][r] = cat_all(dir);
        t[ROW_SMALL_1][r] = clef_read_all(dir, &arena_small, &arena_size, 1, 0);
        t[ROW_HUGE_1][r] = clef_read_all(dir, &arena_huge, &arena_size, 1, 1);
        t[ROW_HUGE_N][r] = clef_read_all(dir, &arena_huge, &arena_size, threads, 1);
    }
    double m[N_ROWS];
    for (int i = 0; i < N_ROWS; i++)
        m[i] = bench_median(t[i], runs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double gbs = (double)total / 1e9;
    static const char *const labels[N_ROWS] = {
        "cat shards > /dev/null",
        "clef open+pread, 4 KiB-page arena",
        "clef open+pread, huge-page arena",
        "clef open+pread, huge-page arena",
    };
    const int row_threads[N_ROWS] = {1, 1, 1, threads};
    printf("\nrelease_read: %.2f GB in %d shards (%zu tensors of 64 MiB + small ones), page cache warm,\n"
           "median of %d runs (warm-up excluded: cache warm-up, arena first touch)\n\n",
           gbs, N_SHARDS, n_tensors_written, runs);
    printf("| %-34s | %7s | %9s | %8s | %9s |\n", "method", "threads", "time (s)", "GB/s", "vs cat");
    printf("|------------------------------------|---------|-----------|----------|-----------|\n");
    for (int i = 0; i < N_ROWS; i++)
        printf("| %-34s | %7d | %9.3f | %8.2f | %8.2fx |\n", labels[i], row_threads[i], m[i], gbs / m[i],
               m[ROW_CAT] / m[i]);
    printf("\npeak RSS of the bench process: %.2f GB (two arenas of %.2f GB)\n", ru.ru_maxrss / 1e6,
           (double)arena_size / 1e9);
    printf("{\"bench\": \"release_read\", \"gb\": %.3f, \"runs\": %d, \"threads\": %d, \"cat_gbs\": %.3f, "
           "\"clef_small_pages_gbs\": %.3f, \"clef_huge_pages_gbs\": %.3f, \"clef_huge_pages_nt_gbs\": %.3f, "
           "\"best_ratio\": %.3f, \"peak_rss_gb\": %.3f}\n",
           gbs, runs, threads, gbs / m[ROW_CAT], gbs / m[ROW_SMALL_1], gbs / m[ROW_HUGE_1],
           gbs / m[ROW_HUGE_N],
           m[ROW_CAT] / (m[ROW_HUGE_1] < m[ROW_HUGE_N] ? m[ROW_HUGE_1] : m[ROW_HUGE_N]),
           ru.ru_maxrss / 1e6);
    free_arena(arena_small, arena_size);
    free_arena(arena_huge, arena_size);
    for (int i = 0; i < N_ROWS; i++)
        free(t[i]);
    if (!keep) {
        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        if (system(path) != 0)
            fprintf(stderr, "bench: could not remove %s\n", dir);
    } else {
        fprintf(stderr, "bench: kept %s\n", dir);
    }
    return 0;
}
