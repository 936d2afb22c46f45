/*
 * st_writer.h — writing one safetensors file tensor by tensor, without holding its data.
 *
 * The caller declares every tensor up front (name, dtype, shape); the writer orders them the
 * way the safetensors library's own serializer does (dtype descending in the library's dtype
 * order — F32 before BF16 before F8_E4M3 before I8 before U8 —, then name), lays their data
 * out back to back, writes the 8-byte length and the JSON header (`__metadata__` first,
 * padded with spaces to a multiple of 8) at once, and sizes the file. Data is then written
 * at any offset of any tensor, in any order (pwrite), so a quantizer can stream a weight in
 * pieces. A file whose tensors are written completely is byte-identical to what
 * `safetensors.torch.save_file(tensors, path, metadata)` writes for the same tensors.
 */
#ifndef CLEF_RELEASE_ST_WRITER_H
#define CLEF_RELEASE_ST_WRITER_H

#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

typedef struct st_write_tensor {
    const char *name;               /* borrowed until st_writer_close */
    clef_dtype dtype;
    int n_dims;
    int64_t shape[CLEF_MAX_DIMS];
    uint64_t begin;                 /* set by st_writer_create: offset in the data area */
    uint64_t n_bytes;               /* set by st_writer_create: product(shape) * dtype size */
} st_write_tensor;

typedef struct st_writer {
    int fd;                         /* -1 when closed */
    char *path;                     /* owned, for messages */
    uint64_t data_start;            /* 8 + header length */
    uint64_t data_size;
} st_writer;

/* Bytes a tensor of that dtype and shape holds; 0 with *overflow set past 2^63. */
uint64_t st_tensor_bytes(clef_dtype dtype, const int64_t *shape, int n_dims, int *overflow);

/* Create path (it must not exist: O_EXCL), with the header for tensors[0..n) and the data
 * area sized (zeros until written). Sets each tensor's begin and n_bytes. metadata is
 * n_meta key/value pairs of strings written in `__metadata__` in that order (n_meta 0: none).
 * tensors is an array of n pointers. Names must be distinct. Returns 0 or a negative clef_status naming the file. */
int st_writer_create(st_writer *w, const char *path, st_write_tensor *const *tensors, size_t n,
                     const char *const *metadata, size_t n_meta);

/* Write len bytes at offset inside tensor t (one of the tensors given to create). */
int st_writer_write(st_writer *w, const st_write_tensor *t, uint64_t offset, const void *src,
                    size_t len);

/* Flush to disk (fsync) and close. Returns the first error. Accepts a closed writer. */
int st_writer_close(st_writer *w);

/* Close without flushing (after a failure; the caller removes the file). */
void st_writer_abort(st_writer *w);

#endif /* CLEF_RELEASE_ST_WRITER_H */
