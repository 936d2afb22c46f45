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

/* resolve, keeping the real path too (for the no-follow open). */
static int resolve_both(const char *dir, const char *dir_real, const char *name, const char *source,
                        int missing_status, char **full, char **real_out) {
    *full = NULL;
    if (real_out)
        *real_out = NULL;
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
        struct stat lst;
        if (e == ENOENT && lstat(joined, &lst) == 0 && S_ISLNK(lst.st_mode))
            rc = clef_fail(missing_status, "file '%s' of release '%s' is a symlink to nothing "
                           "(dangling link)", name, dir);
        else if (e != ENOENT)
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
        int rc = source
                     ? clef_fail(CLEF_ERR_SHARD_PATH,
                                 "file '%s' names '%s', which resolves to '%s' outside the release "
                                 "directory '%s' (symlink out)",
                                 source, name, real, dir_real)
                     : clef_fail(CLEF_ERR_SHARD_PATH,
                                 "file '%s' of release '%s' resolves to '%s', outside the release "
                                 "directory '%s' (symlink out): refused, not read",
                                 name, dir, real, dir_real);
        free(real);
        free(joined);
        return rc;
    }
    if (real_out)
        *real_out = real;
    else
        free(real);
    *full = joined;
    return CLEF_OK;
}

int clef_release_resolve(const char *dir, const char *dir_real, const char *name,
                         const char *source, int missing_status, char **full) {
    return resolve_both(dir, dir_real, name, source, missing_status, full, NULL);
}

int clef_release_open_file(const char *dir, const char *dir_real, const char *name,
                           const char *source, int missing_status, clef_file *f) {
    f->fd = -1;
    f->size = 0;
    f->path = NULL;
    char *own_real_dir = NULL;
    if (!dir_real) {
        own_real_dir = realpath(dir, NULL);
        if (!own_real_dir)
            return clef_fail(errno == ENOENT ? CLEF_ERR_FILE_MISSING : CLEF_ERR_IO,
                             "release directory '%s' does not exist or cannot be resolved", dir);
        dir_real = own_real_dir;
    }
    char *full = NULL, *real = NULL;
    int rc = resolve_both(dir, dir_real, name, source, missing_status, &full, &real);
    if (rc == CLEF_OK) {
        rc = clef_file_open_nofollow(f, real, full);
        if (rc == CLEF_ERR_FILE_MISSING) /* removed since realpath: report as absent */
            rc = clef_fail(missing_status, "release '%s' has no %s", dir, name);
    }
    free(full);
    free(real);
    free(own_real_dir);
    return rc;
}

int clef_release_read_small(const char *dir, const char *dir_real, const char *name, size_t cap,
                            int missing_status, char **text, size_t *len) {
    *text = NULL;
    if (len)
        *len = 0;
    clef_file f;
    int rc = clef_release_open_file(dir, dir_real, name, NULL, missing_status, &f);
    if (rc != CLEF_OK)
        return rc;
    if (f.size > cap) {
        rc = clef_fail(CLEF_ERR_IO, "file '%s' is %llu bytes, over the %zu-byte limit", f.path,
                       (unsigned long long)f.size, cap);
        clef_file_close(&f);
        return rc;
    }
    char *buf = malloc((size_t)f.size + 1);
    if (!buf) {
        clef_file_close(&f);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", name);
    }
    size_t size = (size_t)f.size;
    rc = clef_file_pread(&f, buf, size, 0);
    clef_file_close(&f);
    if (rc != CLEF_OK) {
        free(buf);
        return rc;
    }
    buf[size] = '\0';
    *text = buf;
    if (len)
        *len = size;
    return CLEF_OK;
}

int clef_release_has_file(const char *dir, const char *name) {
    char *p = clef_path_join(dir, name);
    struct stat st;
    int ok = p && lstat(p, &st) == 0;
    free(p);
    return ok;
}
