/*
 * path.h — the one way a file of a release is opened. Every file the engine reads from a
 * release directory (config.json, joint_head_config.json, the shard index, every shard,
 * joint_head.safetensors, complete.json and the files it lists, tokenizer.json,
 * tokenizer_config.json) goes through clef_release_open_file, which applies the same rules:
 *   - the name is a plain relative path: no absolute name, no "..", "." or empty component;
 *   - after resolving symlinks (realpath) the file lies under the directory's own real path,
 *     or, when that real path is <repo>/snapshots/<rev> (the Hugging Face hub cache), is a
 *     file directly in <repo>/blobs/;
 *   - the resolved path is opened without following a symlink and without blocking, and is
 *     refused unless it is a regular file (a FIFO, device, directory or socket is never read).
 * A refused file is never read, so no message can echo its bytes.
 */
#ifndef CLEF_RELEASE_PATH_H
#define CLEF_RELEASE_PATH_H

/* dir: as given; dir_real: realpath(dir). name: relative name read from file `source`
 * (NULL: a fixed name the release must have, e.g. joint_head.safetensors).
 * On success *full is a malloc'd "dir/name". Failures: CLEF_ERR_SHARD_PATH (escapes),
 * missing_status (does not exist), CLEF_ERR_IO / CLEF_ERR_OUT_OF_MEMORY. */
int clef_release_resolve(const char *dir, const char *dir_real, const char *name,
                         const char *source, int missing_status, char **full);

#include "core/io.h"

#include <stddef.h>

/* Open file `name` of the release in dir under the rules above. dir_real: realpath(dir), or
 * NULL to compute it here. source/missing_status as for clef_release_resolve. On success *f
 * is open (f->path is "dir/name", for messages). Failures: CLEF_ERR_SHARD_PATH (escapes),
 * missing_status (absent), CLEF_ERR_NOT_REGULAR (FIFO, device, directory, socket),
 * CLEF_ERR_IO, CLEF_ERR_OUT_OF_MEMORY; *f is then closed (fd -1). */
int clef_release_open_file(const char *dir, const char *dir_real, const char *name,
                           const char *source, int missing_status, clef_file *f);

/* clef_release_open_file, then the whole file (at most cap bytes) into a malloc'd,
 * NUL-terminated buffer. A file over cap is CLEF_ERR_IO naming it. */
int clef_release_read_small(const char *dir, const char *dir_real, const char *name, size_t cap,
                            int missing_status, char **text, size_t *len);

/* 1 if dir/name exists as anything (lstat: a dangling symlink or a FIFO counts, so that
 * optional files are opened and refused rather than silently skipped). */
int clef_release_has_file(const char *dir, const char *name);

#endif /* CLEF_RELEASE_PATH_H */
