/*
 * io.h — reading release files: open, exact-length pread, read-only mmap, small whole files.
 *
 * Tensors are read straight into their final buffer (pread) or mapped read-only, so a weight
 * is never copied twice on its way to where it lives. All functions return a clef_status and
 * name the path in their message.
 */
#ifndef CLEF_CORE_IO_H
#define CLEF_CORE_IO_H

#include <stddef.h>
#include <stdint.h>

typedef struct clef_file {
    int fd;          /* -1 when closed */
    uint64_t size;   /* bytes, from fstat at open */
    char *path;      /* owned copy, for messages */
} clef_file;

/* Open path read-only, never blocking (a FIFO is refused, not waited on). Fails with
 * CLEF_ERR_FILE_MISSING if absent, CLEF_ERR_NOT_REGULAR for a FIFO, device, directory or
 * socket (nothing is read from it), CLEF_ERR_IO otherwise. */
int clef_file_open(clef_file *f, const char *path);
/* clef_file_open of a path already resolved by realpath (no symlink in it): a final component
 * that became a symlink since is refused (O_NOFOLLOW). display is the name used in messages
 * and kept in f->path. */
int clef_file_open_nofollow(clef_file *f, const char *real_path, const char *display);
/* Accepts NULL and a closed file (fd -1: what clef_file_open leaves on failure and close
 * leaves behind). Not a zeroed struct: fd 0 is a real descriptor (stdin). */
void clef_file_close(clef_file *f);

/* Read exactly len bytes at offset into dst; a short file is CLEF_ERR_ST_TRUNCATED. */
int clef_file_pread(const clef_file *f, void *dst, size_t len, uint64_t offset);

/* Map [offset, offset+len) read-only. base and map_len are what to pass to clef_file_unmap;
 * *data points at offset inside the mapping. */
int clef_file_map(const clef_file *f, uint64_t offset, size_t len, void **base, size_t *map_len,
                  const void **data);
void clef_file_unmap(void *base, size_t map_len);

/* Read a whole file of at most cap bytes into a malloc'd, NUL-terminated buffer. */
int clef_read_file(const char *path, size_t cap, char **out, size_t *out_len);

/* snprintf-style join of dir and name; returns a malloc'd string or NULL on OOM. */
char *clef_path_join(const char *dir, const char *name);

#endif /* CLEF_CORE_IO_H */
