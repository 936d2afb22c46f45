/*
 * manifest.c — parse and check complete.json (see manifest.h).
 */
#include "release/manifest.h"

#include "core/error.h"
#include "core/io.h"
#include "core/sha256.h"
#include "json/json.h"
#include "release/json_file.h"
#include "release/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_NAME "complete.json"

void clef_manifest_free(clef_manifest *m) {
    if (!m)
        return;
    free(m->files);
    json_doc_free(m->doc);
    memset(m, 0, sizeof *m);
}

static int is_sha256_hex(const char *s) {
    if (!s || strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

int clef_manifest_parse(const char *text, size_t len, const char *file, clef_manifest *out) {
    memset(out, 0, sizeof *out);
    int prc = clef_release_json_parse(text, len, file, CLEF_ERR_MANIFEST_JSON, &out->doc);
    if (prc != CLEF_OK)
        return prc;
    const json_value *root = json_doc_root(out->doc);
    const json_value *files = json_object_get(root, "files");
    int rc = CLEF_OK;
    if (!files || files->type != JSON_ARRAY) {
        rc = clef_fail(CLEF_ERR_MANIFEST_JSON, "file '%s': expected an object with a \"files\" array",
                       file);
        goto fail;
    }
    out->precision = json_get_string(json_object_get(root, "precision"));
    size_t n = files->u.arr.count;
    out->files = calloc(n ? n : 1, sizeof *out->files);
    if (!out->files) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", file);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const json_value *e = files->u.arr.items[i];
        clef_manifest_file *f = &out->files[i];
        int64_t size;
        f->path = json_get_string(json_object_get(e, "path"));
        f->sha256 = json_get_string(json_object_get(e, "sha256"));
        if (!f->path || !json_get_int64(json_object_get(e, "size"), &size) || size < 0 ||
            !is_sha256_hex(f->sha256)) {
            rc = clef_fail(CLEF_ERR_MANIFEST_JSON,
                           "file '%s': files[%zu] (%.200s) needs a path string, a non-negative "
                           "integer size and a 64-hex-digit lowercase sha256",
                           file, i, f->path ? f->path : "no path");
            goto fail;
        }
        f->size = (uint64_t)size;
        if (i > 0 && strcmp(out->files[i - 1].path, f->path) >= 0) {
            rc = clef_fail(CLEF_ERR_MANIFEST_JSON,
                           "file '%s': files[%zu] '%.200s' is out of order or repeated (the list is "
                           "sorted by path)",
                           file, i, f->path);
            goto fail;
        }
    }
    out->count = n;
    return CLEF_OK;
fail:
    clef_manifest_free(out);
    return rc;
}

int clef_manifest_check(const clef_manifest *m, const char *dir, const char *dir_real, int verify,
                        clef_progress_fn progress, void *progress_user) {
    for (size_t i = 0; i < m->count; i++) {
        const clef_manifest_file *f = &m->files[i];
        clef_file file;
        int rc = clef_release_open_file(dir, dir_real, f->path, MANIFEST_NAME,
                                        CLEF_ERR_MANIFEST_FILE, &file);
        if (rc == CLEF_ERR_NOT_REGULAR) {
            char why[512]; /* clef_fail would overwrite the message it formats from */
            snprintf(why, sizeof why, "%s", clef_last_error());
            return clef_fail(CLEF_ERR_MANIFEST_FILE, "file '%s' lists '%s': %s", MANIFEST_NAME,
                             f->path, why);
        }
        if (rc != CLEF_OK)
            return rc;
        if (file.size != f->size)
            rc = clef_fail(CLEF_ERR_MANIFEST_SIZE,
                           "file '%s' is %llu bytes, complete.json says %llu (truncated or "
                           "corrupted download?)",
                           f->path, (unsigned long long)file.size, (unsigned long long)f->size);
        clef_file_close(&file);
        if (rc != CLEF_OK)
            return rc;
    }
    if (!verify)
        return CLEF_OK;
    for (size_t i = 0; i < m->count; i++) {
        const clef_manifest_file *f = &m->files[i];
        if (progress)
            progress(progress_user, f->path, i, m->count, f->size);
        clef_file file;
        int rc = clef_release_open_file(dir, dir_real, f->path, MANIFEST_NAME,
                                        CLEF_ERR_MANIFEST_FILE, &file);
        char hex[65];
        if (rc == CLEF_OK)
            rc = clef_sha256_open_file(&file, hex);
        clef_file_close(&file);
        if (rc != CLEF_OK)
            return rc;
        if (strcmp(hex, f->sha256) != 0)
            return clef_fail(CLEF_ERR_MANIFEST_HASH, "file '%s' has SHA-256 %s, complete.json says %s",
                             f->path, hex, f->sha256);
    }
    if (progress)
        progress(progress_user, NULL, m->count, m->count, 0);
    return CLEF_OK;
}
