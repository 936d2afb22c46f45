/*
 * io.c — POSIX file access for release loading (see io.h).
 */
#include "core/io.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* O_NONBLOCK: opening a FIFO with no writer would otherwise block forever; the descriptor is
 * checked to be a regular file before a byte is read, and for a regular file O_NONBLOCK
 * changes nothing. */
static int open_regular(clef_file *f, const char *open_path, const char *display, int extra) {
    f->fd = -1;
    f->size = 0;
    f->path = NULL;
    int fd = open(open_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra);
    if (fd < 0) {
        if (errno == ENOENT)
            return clef_fail(CLEF_ERR_FILE_MISSING, "file '%s' does not exist", display);
        if (errno == ELOOP && (extra & O_NOFOLLOW))
            return clef_fail(CLEF_ERR_SHARD_PATH, "file '%s' became a symlink while it was opened",
                             display);
        return clef_fail(CLEF_ERR_IO, "cannot open '%s': %s", display, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return clef_fail(CLEF_ERR_IO, "cannot stat '%s': %s", display, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return clef_fail(CLEF_ERR_NOT_REGULAR, "file '%s' is %s, not a regular file", display,
                         file_kind(st.st_mode));
    }
    f->path = strdup(display);
    if (!f->path) {
        close(fd);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory opening '%s'", display);
    }
    f->fd = fd;
    f->size = (uint64_t)st.st_size;
    return CLEF_OK;
}

int clef_file_open(clef_file *f, const char *path) { return open_regular(f, path, path, 0); }

int clef_file_open_nofollow(clef_file *f, const char *real_path, const char *display) {
    return open_regular(f, real_path, display, O_NOFOLLOW);
}

void clef_file_close(clef_file *f) {
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    f->fd = -1;
    f->path = NULL;
    f->size = 0;
}

int clef_file_pread(const clef_file *f, void *dst, size_t len, uint64_t offset) {
    if (offset > f->size || len > f->size - offset)
        return clef_fail(CLEF_ERR_ST_TRUNCATED,
                         "file '%s': read of %zu bytes at offset %llu past its end (%llu bytes)",
                         f->path, len, (unsigned long long)offset, (unsigned long long)f->size);
    char *p = dst;
    while (len > 0) {
        /* Linux caps one read at ~2 GiB; loop for big tensors and on EINTR. */
        size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t n = pread(f->fd, p, chunk, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return clef_fail(CLEF_ERR_IO, "read of '%s' failed: %s", f->path, strerror(errno));
        }
        if (n == 0)
            return clef_fail(CLEF_ERR_ST_TRUNCATED, "file '%s' ended early at offset %llu",
                             f->path, (unsigned long long)offset);
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return CLEF_OK;
}

int clef_file_map(const clef_file *f, uint64_t offset, size_t len, void **base, size_t *map_len,
                  const void **data) {
    if (offset > f->size || len > f->size - offset)
        return clef_fail(CLEF_ERR_ST_TRUNCATED, "file '%s': map of %zu bytes at %llu past its end",
                         f->path, len, (unsigned long long)offset);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t aligned = offset - offset % (uint64_t)page;
    size_t total = (size_t)(offset - aligned) + len;
    if (total == 0)
        total = 1; /* mmap refuses zero length; a 1-byte map of a non-empty file is harmless */
    void *m = mmap(NULL, total, PROT_READ, MAP_PRIVATE, f->fd, (off_t)aligned);
    if (m == MAP_FAILED)
        return clef_fail(CLEF_ERR_IO, "mmap of '%s' failed: %s", f->path, strerror(errno));
    *base = m;
    *map_len = total;
    *data = (const char *)m + (offset - aligned);
    return CLEF_OK;
}

void clef_file_unmap(void *base, size_t map_len) {
    if (base)
        munmap(base, map_len);
}

int clef_read_file(const char *path, size_t cap, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len)
        *out_len = 0;
    clef_file f;
    int rc = clef_file_open(&f, path);
    if (rc != CLEF_OK)
        return rc;
    if (f.size > cap) {
        clef_file_close(&f);
        return clef_fail(CLEF_ERR_IO, "file '%s' is %llu bytes, over the %zu-byte limit", path,
                         (unsigned long long)f.size, cap);
    }
    char *buf = malloc((size_t)f.size + 1);
    if (!buf) {
        clef_file_close(&f);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    }
    rc = clef_file_pread(&f, buf, (size_t)f.size, 0);
    if (rc == CLEF_OK) {
        buf[f.size] = '\0';
        *out = buf;
        if (out_len)
            *out_len = (size_t)f.size;
    } else {
        free(buf);
    }
    clef_file_close(&f);
    return rc;
}

char *clef_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a > 0 && dir[a - 1] != '/')
        p[n++] = '/';
    memcpy(p + n, name, b + 1);
    return p;
}
