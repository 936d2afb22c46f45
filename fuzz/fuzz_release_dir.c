/*
 * fuzz_release_dir.c — libFuzzer target: whole release DIRECTORIES, built from the input and
 * opened the way `clef inspect --verify` opens them. Each input rebuilds the demo release
 * (demo/clef-demo, read once from the repository root) in a fresh temporary directory and
 * applies a list of file operations to it: remove a file, truncate it, change a byte, replace
 * its contents, turn it into a FIFO or a directory, a symlink out of the release, a symlink
 * to another file of the release, a dangling symlink, a link to a device, or move it into a
 * subdirectory behind a symlink; files the demo lacks (a shard index, shards, complete.json)
 * can be created the same way. Then clef_release_open (strict or keep_going, with or without
 * SHA-256 checks), clef_release_check_tokenizer and clef_release_scan_values run on it.
 * Invariants: no hang (a FIFO is never opened for reading in a blocking way), no crash or
 * sanitizer report, every refusal a negative status with a message; an accepted release's
 * tensors all lie inside their files.
 *
 * Input: byte 0 = flags (bit 0 keep_going, bit 1 verify hashes, bit 2 open through a
 * symlink to the directory), then records of [name index][op][arg lo][arg hi][len][len bytes
 * of payload]. Corpus: fuzz/corpus/release_dir/ (scripts/fuzz/make_release_dir_corpus.py).
 * Run from the repository root (ctest and docs/fuzzing.md do).
 */
#define _XOPEN_SOURCE 700 /* nftw with FTW_DEPTH / FTW_PHYS */
#include "clef_release.h"
#include "core/error.h"
#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BASE "demo/clef-demo"

static const char *const names[] = {
    "config.json", "joint_head_config.json", "model.safetensors", "joint_head.safetensors",
    "tokenizer.json", "tokenizer_config.json", "generation_config.json",
    "model.safetensors.index.json", "complete.json", "model-00001-of-00002.safetensors",
};
enum { N_NAMES = sizeof names / sizeof names[0], N_BASE = 7 };

typedef struct base_file {
    char *data;
    size_t len;
} base_file;

static base_file base[N_BASE];
static int base_loaded;

static void load_base(void) {
    if (base_loaded)
        return;
    base_loaded = 1;
    for (int i = 0; i < N_BASE; i++) {
        char *p = clef_path_join(BASE, names[i]);
        if (!p || clef_read_file(p, (size_t)16 << 20, &base[i].data, &base[i].len) != CLEF_OK) {
            fprintf(stderr, "fuzz_release_dir: cannot read %s (run from the repository root)\n",
                    p ? p : BASE);
            abort();
        }
        free(p);
    }
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    if (len)
        fwrite(data, 1, len, f);
    fclose(f);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* Remove whatever is at path: a file, a link, a FIFO or a directory tree (links not followed). */
static void remove_any(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode))
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    else
        unlink(path);
}

static long file_size(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? (long)st.st_size : -1;
}

static void apply(const char *root, const char *rel, int name, int op, unsigned arg,
                  const uint8_t *payload, size_t len) {
    char path[1024], other[1024];
    snprintf(path, sizeof path, "%s/%s", rel, names[name]);
    switch (op) {
    case 0: /* remove */
        remove_any(path);
        break;
    case 1: { /* truncate */
        long n = file_size(path);
        if (n > 0 && truncate(path, (off_t)(arg % (unsigned long)n)) != 0)
            return;
        break;
    }
    case 2: { /* overwrite bytes at arg * 37 (reaches into headers and data) */
        long n = file_size(path);
        if (n <= 0 || !len)
            return;
        int fd = open(path, O_WRONLY);
        if (fd < 0)
            return;
        off_t at = (off_t)(((unsigned long)arg * 37u) % (unsigned long)n);
        if (pwrite(fd, payload, len, at) < 0)
            (void)0;
        close(fd);
        break;
    }
    case 3: /* replace the contents */
        remove_any(path);
        write_file(path, payload, len);
        break;
    case 4: /* FIFO */
        remove_any(path);
        mkfifo(path, 0600);
        break;
    case 5: /* directory */
        remove_any(path);
        mkdir(path, 0700);
        break;
    case 6: { /* the same bytes, outside, through a symlink */
        snprintf(other, sizeof other, "%s/outside-%d", root, name);
        if (rename(path, other) == 0 && symlink(other, path) != 0)
            return;
        break;
    }
    case 7: /* a symlink to another file of the release (inside: allowed) */
        remove_any(path);
        if (symlink(names[arg % N_NAMES], path) != 0)
            return;
        break;
    case 8: /* dangling */
        remove_any(path);
        snprintf(other, sizeof other, "%s/nothing-%d", root, name);
        if (symlink(other, path) != 0)
            return;
        break;
    case 9: /* a link to a device */
        remove_any(path);
        if (symlink("/dev/zero", path) != 0)
            return;
        break;
    case 10: { /* moved into a subdirectory, reached through a symlink (inside: allowed) */
        snprintf(other, sizeof other, "%s/sub", rel);
        mkdir(other, 0700);
        snprintf(other, sizeof other, "%s/sub/%s", rel, names[name]);
        char target[300];
        snprintf(target, sizeof target, "sub/%s", names[name]);
        if (rename(path, other) == 0 && symlink(target, path) != 0)
            return;
        break;
    }
    default:
        break;
    }
}

static void check(int rc) {
    if (rc != CLEF_OK)
        CLEF_ASSERT(rc < 0 && clef_last_error()[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_base();
    if (size == 0)
        return 0;
    char root[] = "/tmp/clef-fuzz-release-XXXXXX";
    if (!mkdtemp(root))
        return 0;
    char rel[128], link[128];
    snprintf(rel, sizeof rel, "%s/rel", root);
    snprintf(link, sizeof link, "%s/link", root);
    mkdir(rel, 0700);
    for (int i = 0; i < N_BASE; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", rel, names[i]);
        write_file(p, base[i].data, base[i].len);
    }
    const uint8_t flags = data[0];
    size_t pos = 1;
    for (int n_ops = 0; pos + 5 <= size && n_ops < 16; n_ops++) {
        int name = data[pos] % N_NAMES, op = data[pos + 1] % 12;
        unsigned arg = (unsigned)data[pos + 2] | (unsigned)data[pos + 3] << 8;
        size_t len = data[pos + 4];
        pos += 5;
        if (len > size - pos)
            len = size - pos;
        apply(root, rel, name, op, arg, data + pos, len);
        pos += len;
    }
    if (flags & 4)
        if (symlink(rel, link) != 0)
            (void)0;

    clef_release_opts o = clef_release_default_opts();
    o.keep_going = flags & 1;
    o.verify_hashes = (flags >> 1) & 1;
    clef_release *r = NULL;
    int rc = clef_release_open((flags & 4) ? link : rel, &o, &r);
    check(rc);
    CLEF_ASSERT((rc == CLEF_OK) == (r != NULL));
    if (r) {
        for (size_t i = 0; i < clef_release_tensor_count(r); i++) {
            const clef_tensor_info *t = clef_release_tensor_at(r, i);
            CLEF_ASSERT(t->file >= 0 && (size_t)t->file < clef_release_file_count(r));
            CLEF_ASSERT(t->offset + t->n_bytes <= clef_release_file_size(r, (size_t)t->file));
        }
        check(clef_release_check_tokenizer(r));
        check(clef_release_scan_values(r, flags & 1, NULL, NULL));
        clef_release_free(r);
    }
    remove_any(root);
    return 0;
}
