/*
 * path.h — resolving a file name found inside a release (index shard names, complete.json
 * paths) without ever leaving the release directory: no absolute names, no ".." component,
 * and after resolving symlinks (realpath) the file must still lie under the directory's own
 * real path — or, when that real path is <repo>/snapshots/<rev> (the Hugging Face hub cache),
 * be a regular file directly in <repo>/blobs/.
 */
#ifndef CLEF_RELEASE_PATH_H
#define CLEF_RELEASE_PATH_H

/* dir: as given; dir_real: realpath(dir). name: relative name read from file `source`
 * (NULL: a fixed name the release must have, e.g. joint_head.safetensors).
 * On success *full is a malloc'd "dir/name". Failures: CLEF_ERR_SHARD_PATH (escapes),
 * missing_status (does not exist), CLEF_ERR_IO / CLEF_ERR_OUT_OF_MEMORY. */
int clef_release_resolve(const char *dir, const char *dir_real, const char *name,
                         const char *source, int missing_status, char **full);

#endif /* CLEF_RELEASE_PATH_H */
