/*
 * test_release_hf_cache.c — a release inside the Hugging Face hub cache opens, and nothing
 * else that escapes the release directory does.
 *
 * huggingface_hub's cache keeps a downloaded revision as
 *     models--<org>--<name>/blobs/<sha256>               (the bytes, one file per content)
 *     models--<org>--<name>/snapshots/<rev>/<file>  ->  ../../blobs/<sha256>
 * Each case builds such a tree at test time from a committed fixture (the NF4 one: sharded,
 * lm-head.safetensors, complete.json), opens snapshots/<rev> with SHA-256 verification, and
 * compares every tensor's bytes with the plain fixture. Then each escape that must stay
 * refused: a shard linked to a file outside the blob store (caught by complete.json, and by
 * the index when there is no complete.json), to another repository's blobs, to a
 * subdirectory of the (flat) blob store, and the whole tree under a directory not named
 * "snapshots".
 */
#include "test.h"

#include "core/sha256.h"
#include "fixture_util.h"
#include "release/release.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE "nf4"
#define REPO "models--cloudflare--clef-tiny"
#define REV "0123456789abcdef0123456789abcdef01234567"
#define SHARD "model-00002-of-00003.safetensors"

/* The tree's paths, all under the scratch root. */
typedef struct hf_tree {
    char repo[320];     /* root/<REPO> */
    char snapshot[400]; /* root/<REPO>/<snapshots_dir>/<REV>: the release directory */
} hf_tree;

/* Move every file of s->rel into <root>/<REPO>/blobs/<sha256> and link it from
 * <root>/<REPO>/<snapshots_dir>/<REV>/<name> as ../../blobs/<sha256>, as the hub does. */
static int build_tree(const scratch *s, const char *snapshots_dir, hf_tree *t) {
    char blobs[340], snaps[340];
    snprintf(t->repo, sizeof t->repo, "%s/%s", s->root, REPO);
    snprintf(blobs, sizeof blobs, "%s/blobs", t->repo);
    snprintf(snaps, sizeof snaps, "%s/%s", t->repo, snapshots_dir);
    snprintf(t->snapshot, sizeof t->snapshot, "%s/%s", snaps, REV);
    if (mkdir(t->repo, 0700) || mkdir(blobs, 0700) || mkdir(snaps, 0700) || mkdir(t->snapshot, 0700))
        return -1;
    DIR *d = opendir(s->rel);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char file[1024], blob[1024], link[1024], target[200], hex[65];
        snprintf(file, sizeof file, "%s/%s", s->rel, e->d_name);
        rc = clef_sha256_file(file, hex);
        snprintf(blob, sizeof blob, "%s/%s", blobs, hex);
        snprintf(link, sizeof link, "%s/%s", t->snapshot, e->d_name);
        snprintf(target, sizeof target, "../../blobs/%s", hex);
        if (rc == 0)
            rc = rename(file, blob) || symlink(target, link);
    }
    closedir(d);
    return rc;
}

/* Point snapshot/<name> at `target` instead (the symlink is replaced). */
static int relink(const hf_tree *t, const char *name, const char *target) {
    char link[1024];
    snprintf(link, sizeof link, "%s/%s", t->snapshot, name);
    return unlink(link) || symlink(target, link);
}

/* The blob a snapshot file links to, moved to `dest` (a path under the scratch root). */
static int move_blob(const hf_tree *t, const char *name, const char *dest) {
    char link[1024];
    snprintf(link, sizeof link, "%s/%s", t->snapshot, name);
    char *real = realpath(link, NULL);
    int rc = real ? rename(real, dest) : -1;
    free(real);
    return rc;
}

/* Every tensor of `got` has the bytes of the same tensor in `want`. */
static void check_same_tensors(const clef_release *want, const clef_release *got) {
    size_t n = clef_release_tensor_count(want), identical = 0;
    CHECK_EQ_INT(clef_release_tensor_count(got), n);
    for (size_t i = 0; i < n; i++) {
        const clef_tensor_info *a = clef_release_tensor_at(want, i);
        const clef_tensor_info *b = clef_release_find(got, a->name);
        CHECK_MSG(b && b->n_bytes == a->n_bytes, "tensor %s missing or resized", a->name);
        if (!b || b->n_bytes != a->n_bytes)
            continue;
        unsigned char *x = malloc(a->n_bytes ? a->n_bytes : 1), *y = malloc(a->n_bytes ? a->n_bytes : 1);
        int ok = x && y && clef_release_read(want, a, x) == CLEF_OK &&
                 clef_release_read(got, b, y) == CLEF_OK && memcmp(x, y, a->n_bytes) == 0;
        identical += ok;
        CHECK_MSG(ok, "tensor %s differs through the cache", a->name);
        free(x);
        free(y);
    }
    printf("hub cache layout: %zu of %zu tensors identical to the plain fixture\n", identical, n);
}

static void check_accepted(void) {
    scratch s = {{0}, {0}};
    hf_tree t;
    CHECK(scratch_copy(&s, FIXTURE) == 0 && build_tree(&s, "snapshots", &t) == 0);
    clef_release_opts opts = clef_release_default_opts();
    opts.verify_hashes = 1; /* complete.json's SHA-256 read through the links */
    clef_release *plain = NULL, *cached = NULL;
    CHECK(clef_release_open(FIXTURES "/" FIXTURE, &opts, &plain) == CLEF_OK);
    int rc = clef_release_open(t.snapshot, &opts, &cached);
    CHECK_MSG(rc == CLEF_OK, "hub cache snapshot refused: %s", clef_last_error());
    if (plain && cached)
        check_same_tensors(plain, cached);
    clef_release_free(cached);
    cached = NULL;

    /* Opened through another symlink to the snapshot: its real path is what counts. */
    char alias[600];
    snprintf(alias, sizeof alias, "%s/alias", s.root);
    CHECK(symlink(t.snapshot, alias) == 0);
    rc = clef_release_open(alias, &opts, &cached);
    CHECK_MSG(rc == CLEF_OK, "snapshot through a symlinked directory refused: %s", clef_last_error());
    clef_release_free(cached);
    clef_release_free(plain);
    scratch_remove(&s);
}

typedef struct escape_case {
    const char *name;
    const char *snapshots_dir;
    int (*escape)(const scratch *s, const hf_tree *t);
    const char *must_name; /* the refused file, named in the message */
} escape_case;

static int to_outside_file(const scratch *s, const hf_tree *t) {
    char dest[600];
    snprintf(dest, sizeof dest, "%s/elsewhere.safetensors", s->root);
    return move_blob(t, SHARD, dest) || relink(t, SHARD, dest);
}
static int to_other_repo_blobs(const scratch *s, const hf_tree *t) {
    char dir[600], blobs[640], dest[700];
    snprintf(dir, sizeof dir, "%s/models--someone--else", s->root);
    snprintf(blobs, sizeof blobs, "%s/blobs", dir);
    snprintf(dest, sizeof dest, "%s/feedface", blobs);
    return mkdir(dir, 0700) || mkdir(blobs, 0700) || move_blob(t, SHARD, dest) ||
           relink(t, SHARD, dest);
}
static int to_nested_blob(const scratch *s, const hf_tree *t) {
    (void)s;
    char sub[600], dest[700];
    snprintf(sub, sizeof sub, "%s/blobs/sub", t->repo);
    snprintf(dest, sizeof dest, "%s/feedface", sub);
    return mkdir(sub, 0700) || move_blob(t, SHARD, dest) || relink(t, SHARD, "../../blobs/sub/feedface");
}
static int to_outside_file_no_manifest(const scratch *s, const hf_tree *t) {
    /* Without complete.json the index's shard list is the first to resolve it. */
    char manifest[600];
    snprintf(manifest, sizeof manifest, "%s/complete.json", t->snapshot);
    return to_outside_file(s, t) || unlink(manifest);
}
static int no_change(const scratch *s, const hf_tree *t) {
    (void)s;
    (void)t;
    return 0;
}

static const escape_case escapes[] = {
    {"shard linked outside the blob store", "snapshots", to_outside_file, SHARD},
    {"same, found through the index", "snapshots", to_outside_file_no_manifest, "index.json' names '" SHARD},
    {"shard linked into another repo's blobs", "snapshots", to_other_repo_blobs, SHARD},
    {"shard linked into a blobs subdirectory", "snapshots", to_nested_blob, SHARD},
    /* config.json is the first file read: every release file is held to the same rules */
    {"blob links from a dir not named snapshots", "snapshotz", no_change, "file 'config.json' of release"},
};

static void check_refused(const escape_case *c) {
    scratch s = {{0}, {0}};
    hf_tree t;
    int setup = scratch_copy(&s, FIXTURE) == 0 && build_tree(&s, c->snapshots_dir, &t) == 0 &&
                c->escape(&s, &t) == 0;
    CHECK_MSG(setup, "%s: could not build the tree", c->name);
    if (setup) {
        clef_release *rel = NULL;
        int rc = clef_release_open(t.snapshot, NULL, &rel);
        const char *msg = clef_last_error();
        CHECK_MSG(rc == CLEF_ERR_SHARD_PATH, "%s: got %d (%s): %s", c->name, rc, clef_status_str(rc), msg);
        CHECK_MSG(rel == NULL, "%s: a refused open must not return a release", c->name);
        CHECK_MSG(strstr(msg, "symlink out") != NULL && strstr(msg, c->must_name) != NULL,
                  "%s: message does not name '%s' as a symlink out: %s", c->name, c->must_name, msg);
        printf("%-44s %5d %.120s\n", c->name, rc, msg);
        clef_release_free(rel);
    }
    scratch_remove(&s);
}

int main(void) {
    check_accepted();
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++)
        check_refused(&escapes[i]);
    return test_summary();
}
