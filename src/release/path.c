/*
 * path.c — keep release file names inside the release directory (see path.h), with the one
 * exception of the Hugging Face hub cache layout, whose snapshot files are symlinks into the
 * repository's blob store.
 */
#include "release/path.h"

#include "core/error.h"
#include "core/io.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Any "..", "." or empty component, or a leading '/', or a backslash (a Windows-style
 * separator would mean something else on another platform) is refused outright. */
static int name_is_plain(const char *name) {
    if (!name[0] || name[0] == '/' || strchr(name, '\\'))
        return 0;
    const char *p = name;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += n;
        if (*p == '/')
            p++;
    }
    return 1;
}

/* The Hugging Face hub cache (huggingface_hub's `snapshot_download` without `local_dir`)
 * stores a revision as <repo>/snapshots/<rev>/<name> -> ../../blobs/<sha>. When the release
 * directory's real path is <repo>/snapshots/<rev>, a name whose real path is a regular file
 * directly inside <repo>/blobs/ stays within the same downloaded repository: accept it.
 * Both paths are realpath()s, so no "..", "." or symlink can fake the prefixes. */
static int is_hf_cache_blob(const char *dir_real, const char *real) {
    const char *rev = strrchr(dir_real, '/');
    if (!rev || rev == dir_real || rev[1] == '\0')
        return 0; /* "/" or "/<rev>": no room for <repo>/snapshots */
    static const char snapshots[] = "/snapshots";
    size_t n_snap = sizeof snapshots - 1;
    size_t repo_len = (size_t)(rev - dir_real);
    if (repo_len < n_snap || memcmp(rev - n_snap, snapshots, n_snap) != 0)
        return 0;
    repo_len -= n_snap; /* dir_real[0..repo_len) is <repo> ("" for the root directory) */
    static const char blobs[] = "/blobs/";
    size_t n_blobs = sizeof blobs - 1;
    if (strncmp(real, dir_real, repo_len) != 0 || strncmp(real + repo_len, blobs, n_blobs) != 0)
        return 0;
    const char *blob = real + repo_len + n_blobs;
    if (!blob[0] || strchr(blob, '/'))
        return 0; /* the blob store is flat */
    struct stat st;
    return stat(real, &st) == 0 && S_ISREG(st.st_mode);
}

int clef_release_resolve(const char *dir, const char *dir_real, const char *name,
                         const char *source, int missing_status, char **full) {
    *full = NULL;
    if (!name_is_plain(name))
        return clef_fail(CLEF_ERR_SHARD_PATH,
                         "file '%s' names '%.200s', which is not a plain relative path inside the "
                         "release (absolute, '..' or empty component)",
                         source ? source : dir, name);
    char *joined = clef_path_join(dir, name);
    if (!joined)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    char *real = realpath(joined, NULL);
    if (!real) {
        int e = errno;
        int rc;
        if (e != ENOENT)
            rc = clef_fail(CLEF_ERR_IO, "cannot resolve '%s' (named by '%s'): %s", joined,
                           source ? source : dir, strerror(e));
        else if (source)
            rc = clef_fail(missing_status, "file '%s' names '%s', which does not exist in '%s'",
                           source, name, dir);
        else
            rc = clef_fail(missing_status, "release '%s' has no %s", dir, name);
        free(joined);
        return rc;
    }
    size_t n = strlen(dir_real);
    int inside = strncmp(real, dir_real, n) == 0 && (real[n] == '/' || (n == 1 && dir_real[0] == '/'));
    if (!inside && !is_hf_cache_blob(dir_real, real)) {
        int rc = clef_fail(CLEF_ERR_SHARD_PATH,
                           "file '%s' names '%s', which resolves to '%s' outside the release "
                           "directory '%s' (symlink out)",
                           source ? source : dir, name, real, dir_real);
        free(real);
        free(joined);
        return rc;
    }
    free(real);
    *full = joined;
    return CLEF_OK;
}
