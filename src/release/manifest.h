/*
 * manifest.h — complete.json, the release's own list of its files:
 * {..., "files": [{"path", "size", "sha256"}, ...]} sorted by path, not listing itself.
 * Sizes are always checked (a truncated download is caught before any header is read);
 * SHA-256 only when asked (it reads every byte: --verify).
 */
#ifndef CLEF_RELEASE_MANIFEST_H
#define CLEF_RELEASE_MANIFEST_H

#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

typedef struct clef_manifest_file {
    const char *path;
    uint64_t size;
    const char *sha256;   /* 64 lowercase hex digits */
} clef_manifest_file;

typedef struct clef_manifest {
    clef_manifest_file *files;
    size_t count;
    const char *precision;   /* NULL when absent */
    struct json_doc *doc;
} clef_manifest;

/* Parse complete.json text. Failure: CLEF_ERR_MANIFEST_JSON naming the bad entry. */
int clef_manifest_parse(const char *text, size_t len, const char *file, clef_manifest *out);
void clef_manifest_free(clef_manifest *m); /* accepts zeroed */

/* Check every listed file's size (and SHA-256 when verify) inside the release at dir.
 * progress (may be NULL) is called before each file is hashed. */
int clef_manifest_check(const clef_manifest *m, const char *dir, const char *dir_real, int verify,
                        clef_progress_fn progress, void *progress_user);

#endif /* CLEF_RELEASE_MANIFEST_H */
