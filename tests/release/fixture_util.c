/*
 * fixture_util.c — temporary copies of fixture releases and precise damage (see the header).
 */
#include "fixture_util.h"

#include "core/io.h"
#include "release/safetensors.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int read_all(const char *path, char **buf, size_t *len) {
    return clef_read_file(path, (size_t)64 << 20, buf, len) == 0 ? 0 : -1;
}

static int write_all(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(buf, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

char *scratch_path(const scratch *s, const char *name) { return clef_path_join(s->rel, name); }

int scratch_copy(scratch *s, const char *fixture) {
    const char *tmp = getenv("TMPDIR");
    snprintf(s->root, sizeof s->root, "%s/clef-release-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(s->root))
        return -1;
    snprintf(s->rel, sizeof s->rel, "%s/rel", s->root);
    if (mkdir(s->rel, 0700) != 0)
        return -1;
    char src_dir[512];
    if (strchr(fixture, '/')) /* a release elsewhere in the repository, e.g. demo/clef-demo */
        snprintf(src_dir, sizeof src_dir, "%s", fixture);
    else
        snprintf(src_dir, sizeof src_dir, "%s/%s", FIXTURES, fixture);
    DIR *d = opendir(src_dir);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL && rc == 0) {
        if (e->d_name[0] == '.')
            continue;
        char src[1024], dst[1024];
        snprintf(src, sizeof src, "%s/%s", src_dir, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", s->rel, e->d_name);
        char *buf = NULL;
        size_t len = 0;
        rc = read_all(src, &buf, &len);
        if (rc == 0)
            rc = write_all(dst, buf, len);
        free(buf);
    }
    closedir(d);
    return rc;
}

static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char child[1024];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

void scratch_remove(scratch *s) {
    if (s->root[0])
        remove_tree(s->root);
    s->root[0] = '\0';
}

int file_replace(const scratch *s, const char *name, const char *old, const char *new_text, int all) {
    char *path = scratch_path(s, name), *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    if (rc == 0) {
        size_t lo = strlen(old), ln = strlen(new_text), count = 0;
        for (char *p = strstr(buf, old); p; p = strstr(p + lo, old))
            count++;
        if (count == 0) {
            rc = -1;
        } else {
            char *out = malloc(len + count * (ln + 1) + 1);
            size_t o = 0;
            const char *p = buf;
            int done = 0;
            for (const char *q = strstr(p, old); q && !(done && !all); q = strstr(p, old)) {
                memcpy(out + o, p, (size_t)(q - p));
                o += (size_t)(q - p);
                memcpy(out + o, new_text, ln);
                o += ln;
                p = q + lo;
                done = 1;
            }
            size_t rest = len - (size_t)(p - buf);
            memcpy(out + o, p, rest);
            o += rest;
            rc = write_all(path, out, o);
            free(out);
        }
    }
    free(buf);
    free(path);
    return rc;
}

int file_truncate(const scratch *s, const char *name, uint64_t size) {
    char *path = scratch_path(s, name);
    int rc = truncate(path, (off_t)size);
    free(path);
    return rc;
}

int file_append(const scratch *s, const char *name, const void *data, size_t n) {
    char *path = scratch_path(s, name);
    FILE *f = fopen(path, "ab");
    free(path);
    if (!f)
        return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int file_write_at(const scratch *s, const char *name, uint64_t offset, const void *data, size_t n) {
    char *path = scratch_path(s, name);
    FILE *f = fopen(path, "r+b");
    free(path);
    if (!f)
        return -1;
    int ok = fseek(f, (long)offset, SEEK_SET) == 0 && fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int file_remove(const scratch *s, const char *name) {
    char *path = scratch_path(s, name);
    int rc = unlink(path);
    free(path);
    return rc;
}

int file_write(const scratch *s, const char *name, const char *text) {
    char *path = scratch_path(s, name);
    int rc = write_all(path, text, strlen(text));
    free(path);
    return rc;
}

static uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

/* Split a safetensors file into header text and data; rebuild with a new header. */
int st_set_header_text(const scratch *s, const char *name, const char *json) {
    char *path = scratch_path(s, name), *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    if (rc == 0 && len >= 8) {
        uint64_t n = le64((unsigned char *)buf);
        size_t hl = strlen(json);
        size_t data = len - 8 - (size_t)n;
        unsigned char *out = malloc(8 + hl + data);
        for (int i = 0; i < 8; i++)
            out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
        memcpy(out + 8, json, hl);
        memcpy(out + 8 + hl, buf + 8 + n, data);
        rc = write_all(path, out, 8 + hl + data);
        free(out);
    }
    free(buf);
    free(path);
    return rc;
}

int st_set_header_len(const scratch *s, const char *name, uint64_t len) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(len >> (8 * i));
    return file_write_at(s, name, 0, b, 8);
}

/* The JSON header text of shard name (malloc'd, NUL-terminated), or NULL. */
static char *st_header_text(const scratch *s, const char *name) {
    char *path = scratch_path(s, name), *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    free(path);
    if (rc != 0)
        return NULL;
    char *header = len >= 8 ? strndup(buf + 8, (size_t)le64((unsigned char *)buf)) : NULL;
    free(buf);
    return header;
}

int st_set_field(const scratch *s, const char *name, const char *tensor, const char *field,
                 const char *json_value) {
    char *header = st_header_text(s, name);
    if (!header)
        return -1;
    char key[512], fkey[64];
    snprintf(key, sizeof key, "\"%s\":{", tensor);
    snprintf(fkey, sizeof fkey, "\"%s\":", field);
    char *t = strstr(header, key);
    char *f = t ? strstr(t, fkey) : NULL;
    if (!f) {
        free(header);
        return -1;
    }
    char *v = f + strlen(fkey), *e = v;
    if (*v == '[')
        e = strchr(v, ']') + 1;
    else if (*v == '"')
        e = strchr(v + 1, '"') + 1;
    else
        while (*e && *e != ',' && *e != '}')
            e++;
    size_t out_len = (size_t)(v - header) + strlen(json_value) + strlen(e) + 1;
    char *out = malloc(out_len);
    snprintf(out, out_len, "%.*s%s%s", (int)(v - header), header, json_value, e);
    int rc = st_set_header_text(s, name, out);
    free(out);
    free(header);
    return rc;
}

int st_replace_in_header(const scratch *s, const char *name, const char *old, const char *new_text) {
    char *header = st_header_text(s, name);
    if (!header)
        return -1;
    char *at = strstr(header, old);
    if (!at) {
        free(header);
        return -1;
    }
    size_t out_len = strlen(header) - strlen(old) + strlen(new_text) + 1;
    char *out = malloc(out_len);
    snprintf(out, out_len, "%.*s%s%s", (int)(at - header), header, new_text, at + strlen(old));
    int rc = st_set_header_text(s, name, out);
    free(out);
    free(header);
    return rc;
}

int st_get_offsets(const scratch *s, const char *name, const char *tensor, uint64_t *begin,
                   uint64_t *end, uint64_t *data_start) {
    char *path = scratch_path(s, name);
    clef_file f;
    int rc = clef_file_open(&f, path);
    free(path);
    if (rc != 0)
        return -1;
    st_header h;
    rc = st_read_header(&f, name, &h);
    clef_file_close(&f);
    if (rc != 0)
        return -1;
    rc = -1;
    for (size_t i = 0; i < h.n_tensors; i++)
        if (strcmp(h.tensors[i].name, tensor) == 0) {
            *begin = h.tensors[i].begin;
            *end = h.tensors[i].end;
            *data_start = h.data_start;
            rc = 0;
        }
    st_header_free(&h);
    return rc;
}

/* ---- file kinds and links ------------------------------------------------------------------ */

int file_make_fifo(const scratch *s, const char *name) {
    char *path = scratch_path(s, name);
    unlink(path);
    int rc = mkfifo(path, 0600);
    free(path);
    return rc;
}

int file_make_dir(const scratch *s, const char *name) {
    char *path = scratch_path(s, name);
    unlink(path);
    int rc = mkdir(path, 0700);
    free(path);
    return rc;
}

int file_link_out(const scratch *s, const char *name) {
    char *inside = scratch_path(s, name);
    char outside[700];
    snprintf(outside, sizeof outside, "%s/outside-%s", s->root, name);
    int rc = rename(inside, outside) || symlink(outside, inside);
    free(inside);
    return rc;
}

int file_link_to_text(const scratch *s, const char *name, const char *text) {
    char *inside = scratch_path(s, name);
    char outside[700];
    snprintf(outside, sizeof outside, "%s/other-%s", s->root, name);
    int rc = write_all(outside, text, strlen(text)) || unlink(inside) || symlink(outside, inside);
    free(inside);
    return rc;
}

int file_link_dangling(const scratch *s, const char *name) {
    char *inside = scratch_path(s, name);
    char nowhere[700];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-file", s->root);
    unlink(inside);
    int rc = symlink(nowhere, inside);
    free(inside);
    return rc;
}

int file_copy_in(const scratch *s, const char *src, const char *name) {
    char *dst = scratch_path(s, name), *buf = NULL;
    size_t len = 0;
    int rc = read_all(src, &buf, &len);
    if (rc == 0)
        rc = write_all(dst, buf, len);
    free(buf);
    free(dst);
    return rc;
}
