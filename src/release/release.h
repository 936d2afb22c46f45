/*
 * release.h — a Clef release directory, opened and validated (the public part, shared with
 * tools and other programs, is include/clef_release.h: dtypes, configs, the tensor table,
 * open/free, problems, summary). This header adds what only the engine uses: reading a
 * tensor's bytes into its final buffer (pread, several threads) or mapping them.
 *
 * After a successful open, every listed tensor is known to lie inside its file with a size
 * that matches its shape and dtype, and to have the shape the config says. No tensor data is
 * read by open (scale and NF4 table checks excepted); the model reads each tensor once,
 * straight into its final buffer, with clef_release_read().
 *
 * Thread safety: clef_release_read may be called from several threads at once (pread).
 */
#ifndef CLEF_RELEASE_RELEASE_H
#define CLEF_RELEASE_RELEASE_H

#include "clef_release.h" /* the public part: dtypes, configs, tensors, open, summary */

#include <stddef.h>
#include <stdint.h>

/* ---- internal: reading tensor bytes (the model's loader) ----------------------------------- */

/* Read a tensor's bytes (exactly t->n_bytes) into dst with pread: the one copy on its way to
 * its final place. */
int clef_release_read(const clef_release *rel, const clef_tensor_info *t, void *dst);

/* Bytes [offset, offset + n) of a tensor (e.g. one row of lm_head), with pread on the file the
 * release opened and contained at open: no path is opened again. A range outside the tensor
 * is CLEF_ERR_INVALID_ARG naming it. */
int clef_release_read_range(const clef_release *rel, const clef_tensor_info *t, uint64_t offset,
                            size_t n, void *dst);

/* clef_release_read with the tensor split into contiguous pieces read by up to n_threads
 * threads at once (0 = all available). A tensor under 16 MiB is read by one thread. Same
 * bytes, same errors (a failed piece is re-read by the calling thread for the message). */
int clef_release_read_threads(const clef_release *rel, const clef_tensor_info *t, void *dst,
                              int n_threads);

/* clef_release_read that also tells whether the values are all finite (clef_count_nonfinite
 * finds none: *finite = 1), in one pass: the tensor is read in chunks of chunk_bytes (0 = 4 MiB;
 * a whole number of elements) by up to n_threads threads (0 = all available), each scanning its
 * chunk right after reading it, while it is in that core's cache. Same bytes and errors as
 * clef_release_read (after a failed chunk the calling thread reads and scans the whole tensor
 * again, for the message); a tensor of one chunk is read and scanned by the caller. */
int clef_release_read_checked(const clef_release *rel, const clef_tensor_info *t, void *dst,
                              int n_threads, uint64_t chunk_bytes, int *finite);

/* A tensor's bytes mapped read-only (no copy at all: for weights used in place, e.g. the CPU
 * backend's BF16 matrices). data is valid until clef_release_unmap; the mapping outlives
 * neither the release nor its files. */
typedef struct clef_tensor_map {
    const void *data;   /* t->n_bytes bytes */
    void *base;         /* page-aligned mapping, for unmap */
    size_t map_len;
} clef_tensor_map;
int clef_release_map(const clef_release *rel, const clef_tensor_info *t, clef_tensor_map *out);
void clef_release_unmap(clef_tensor_map *m); /* accepts a zeroed map */

#endif /* CLEF_RELEASE_RELEASE_H */
