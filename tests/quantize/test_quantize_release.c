/*
 * test_quantize_release.c — clef_quantize_release against the producers' own releases.
 *
 * For each precision, the release written from a committed BF16 source is compared with the
 * release the real producer wrote from the same source (scripts/fixtures/make_quantized.py):
 *   nf4   tests/release/fixtures/bf16-single -> tests/release/fixtures/nf4 (bitsandbytes
 *         0.50 quantize_4bit + double quant on CPU, through transformers save_pretrained)
 *   fp8   tests/release/fixtures/bf16-single -> tests/release/fixtures/fp8 (compressed-tensors
 *         FP8_DYNAMIC, llm-compressor's min-max scales)
 *   int8  tests/quantize/fixtures/int8-src -> tests/release/fixtures/int8 (comfy-kitchen
 *         TensorWiseINT8Layout.quantize, convrot; scripts/quantize/make_fixtures.py checks
 *         that this source is the one the int8 fixture was made from)
 * Every tensor of the producer's release exists in ours with the same dtype, shape and bytes
 * and ours has no other; config.json is byte-identical; the written release opens under the
 * strict validator with every complete.json SHA-256 verified. NF4 is also written in small
 * shards (index + lm-head.safetensors). Then the refusals: a non-empty destination, a
 * quantized source, a source with nothing to quantize, a missing source — each with its
 * status, and nothing left behind.
 */
#include "test.h"

#include "clef_quantize.h"
#include "core/io.h"
#include "release/release.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_root[256];

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static int files_equal(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int eq = clef_read_file(a, 64 << 20, &x, &nx) == 0 && clef_read_file(b, 64 << 20, &y, &ny) == 0 &&
             nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return eq;
}

/* Every tensor of ref (by stored name) in got with the same dtype, shape and bytes. */
static void compare_tensors(const char *label, clef_release *got, clef_release *ref) {
    size_t same = 0, n_ref = clef_release_tensor_count(ref);
    CHECK_EQ_INT(clef_release_tensor_count(got), n_ref);
    for (size_t i = 0; i < n_ref; i++) {
        const clef_tensor_info *r = clef_release_tensor_at(ref, i);
        const clef_tensor_info *g = clef_release_find(got, r->name);
        if (!g) {
            CHECK_MSG(0, "%s: tensor '%s' missing", label, r->stored_name);
            continue;
        }
        int meta = g->dtype == r->dtype && g->n_dims == r->n_dims &&
                   memcmp(g->shape, r->shape, sizeof r->shape[0] * (size_t)r->n_dims) == 0 &&
                   strcmp(g->stored_name, r->stored_name) == 0;
        CHECK_MSG(meta, "%s: tensor '%s': %s vs the producer's %s (or another shape)", label,
                  r->stored_name, clef_dtype_name(g->dtype), clef_dtype_name(r->dtype));
        if (!meta)
            continue;
        uint8_t *a = malloc((size_t)g->n_bytes + 1), *b = malloc((size_t)r->n_bytes + 1);
        int ok = clef_release_read(got, g, a) == 0 && clef_release_read(ref, r, b) == 0;
        size_t first_diff = SIZE_MAX;
        for (uint64_t k = 0; ok && k < r->n_bytes && first_diff == SIZE_MAX; k++)
            if (a[k] != b[k])
                first_diff = (size_t)k;
        CHECK_MSG(ok && first_diff == SIZE_MAX, "%s: tensor '%s' differs from the producer's at "
                  "byte %zu of %llu", label, r->stored_name, first_diff,
                  (unsigned long long)r->n_bytes);
        same += ok && first_diff == SIZE_MAX;
        free(a);
        free(b);
    }
    printf("%-5s %zu of %zu tensors byte-identical to the producer's release\n", label, same, n_ref);
}

static clef_release *open_verified(const char *dir) {
    clef_release_opts o = clef_release_default_opts();
    o.verify_hashes = 1;
    clef_release *rel = NULL;
    int rc = clef_release_open(dir, &o, &rel);
    CHECK_MSG(rc == CLEF_OK, "validator refuses %s: %s", dir, clef_last_error());
    if (rel) {
        clef_release_summary s;
        clef_release_get_summary(rel, &s);
        CHECK_MSG(s.has_manifest && s.manifest_verified, "%s: complete.json not verified", dir);
    }
    return rel;
}

static void check_target(const char *label, clef_quantize_target target, const char *src,
                         const char *ref_dir, uint64_t max_shard) {
    char dst[512], a[600], b[600];
    snprintf(dst, sizeof dst, "%s/%s-%llu", tmp_root, label, (unsigned long long)max_shard);
    clef_quantize_params p = clef_quantize_default_params();
    p.target = target;
    p.max_shard_bytes = max_shard;
    int rc = clef_quantize_release(src, dst, &p);
    CHECK_MSG(rc == CLEF_OK, "%s: clef_quantize_release: %s", label, clef_last_error());
    if (rc != CLEF_OK)
        return;
    clef_release *got = open_verified(dst), *ref = NULL;
    clef_release_opts o = clef_release_default_opts();
    CHECK(clef_release_open(ref_dir, &o, &ref) == CLEF_OK);
    if (got && ref) {
        CHECK_EQ_INT(clef_release_get_config(got)->quant.method,
                     clef_release_get_config(ref)->quant.method);
        compare_tensors(label, got, ref);
    }
    snprintf(a, sizeof a, "%s/config.json", dst);
    snprintf(b, sizeof b, "%s/config.json", ref_dir);
    CHECK_MSG(files_equal(a, b), "%s: config.json differs from the producer's", label);
    if (target == CLEF_QUANTIZE_NF4) {
        snprintf(a, sizeof a, "%s/lm-head.safetensors", dst);
        snprintf(b, sizeof b, "%s/lm-head.safetensors", ref_dir);
        CHECK_MSG(files_equal(a, b), "%s: lm-head.safetensors differs from the producer's", label);
        clef_release_summary s;
        clef_release_get_summary(got, &s);
        CHECK_MSG(s.sharded, "%s: no model.safetensors.index.json", label);
        if (max_shard)
            CHECK_MSG(clef_release_file_count(got) > 3, "%s: %zu files, expected several shards",
                      label, clef_release_file_count(got));
    } else {
        /* one model.safetensors, as the producers wrote: the same file, byte for byte */
        snprintf(a, sizeof a, "%s/model.safetensors", dst);
        snprintf(b, sizeof b, "%s/model.safetensors", ref_dir);
        CHECK_MSG(files_equal(a, b), "%s: model.safetensors differs from the producer's", label);
    }
    clef_release_free(got);
    clef_release_free(ref);
}

static void check_refusals(void) {
    clef_quantize_params p = clef_quantize_default_params();
    char dst[512], file[600];

    /* a non-empty destination is never written over */
    snprintf(dst, sizeof dst, "%s/full", tmp_root);
    mkdir(dst, 0755);
    snprintf(file, sizeof file, "%s/keep.txt", dst);
    FILE *f = fopen(file, "w");
    if (f) {
        fputs("mine\n", f);
        fclose(f);
    }
    int rc = clef_quantize_release("tests/release/fixtures/bf16-single", dst, &p);
    CHECK_EQ_INT(rc, CLEF_ERR_INVALID_ARG);
    CHECK_MSG(strstr(clef_last_error(), "not empty") != NULL, "message: %s", clef_last_error());
    CHECK_EQ_INT(count_entries(dst), 1);

    /* an empty destination directory is fine (the finished release replaces it) */
    snprintf(dst, sizeof dst, "%s/empty", tmp_root);
    mkdir(dst, 0755);
    p.target = CLEF_QUANTIZE_FP8;
    CHECK_EQ_INT(clef_quantize_release("tests/release/fixtures/bf16-single", dst, &p), CLEF_OK);
    CHECK(count_entries(dst) >= 5);

    /* a quantized source */
    snprintf(dst, sizeof dst, "%s/from-fp8", tmp_root);
    rc = clef_quantize_release("tests/release/fixtures/fp8", dst, &p);
    CHECK_EQ_INT(rc, CLEF_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(clef_last_error(), "fp8-w8a8 release") != NULL, "message: %s",
              clef_last_error());

    /* nothing to quantize: no in_features divisible by 256 in the tiny release */
    snprintf(dst, sizeof dst, "%s/int8-none", tmp_root);
    p.target = CLEF_QUANTIZE_INT8_CONVROT;
    rc = clef_quantize_release("tests/release/fixtures/bf16-single", dst, &p);
    CHECK_EQ_INT(rc, CLEF_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(clef_last_error(), "256") != NULL, "message: %s", clef_last_error());

    /* a missing source */
    snprintf(dst, sizeof dst, "%s/from-nothing", tmp_root);
    rc = clef_quantize_release("tests/release/fixtures/no-such-release", dst, &p);
    CHECK(rc < 0);

    /* unknown targets and bad parameters */
    clef_quantize_target t;
    CHECK_EQ_INT(clef_quantize_target_parse("int4", &t), 0);
    CHECK_EQ_INT(clef_quantize_target_parse("int8-convrot", &t), 1);
    CHECK_EQ_INT(t, CLEF_QUANTIZE_INT8_CONVROT);
    p.target = (clef_quantize_target)7;
    CHECK_EQ_INT(clef_quantize_release("tests/release/fixtures/bf16-single", dst, &p),
                 CLEF_ERR_INVALID_ARG);
    p = clef_quantize_default_params();
    p.torch_sum_lanes = 4;
    CHECK_EQ_INT(clef_quantize_release("tests/release/fixtures/bf16-single", dst, &p),
                 CLEF_ERR_INVALID_ARG);

    /* nothing left behind by the failures: only full/ and empty/ */
    CHECK_EQ_INT(count_entries(tmp_root), 2);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/clef-quantize-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    char refusals[300];
    snprintf(refusals, sizeof refusals, "%s/refusals", tmp_root);
    check_target("nf4", CLEF_QUANTIZE_NF4, "tests/release/fixtures/bf16-single",
                 "tests/release/fixtures/nf4", 0);
    check_target("nf4", CLEF_QUANTIZE_NF4, "tests/release/fixtures/bf16-single",
                 "tests/release/fixtures/nf4", 100000);
    check_target("fp8", CLEF_QUANTIZE_FP8, "tests/release/fixtures/bf16-single",
                 "tests/release/fixtures/fp8", 0);
    check_target("int8", CLEF_QUANTIZE_INT8_CONVROT, "tests/quantize/fixtures/int8-src",
                 "tests/release/fixtures/int8", 0);
    /* refusals in a directory of their own, so that leftovers can be counted */
    mkdir(refusals, 0755);
    char saved[256];
    memcpy(saved, tmp_root, sizeof saved);
    memcpy(tmp_root, refusals, sizeof tmp_root < sizeof refusals ? sizeof tmp_root : sizeof refusals);
    check_refusals();
    memcpy(tmp_root, saved, sizeof saved);
    remove_tree(tmp_root);
    return test_summary();
}
