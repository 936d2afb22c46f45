/*
 * test_cli_inspect.c — `clef inspect` as a user runs it, output checked (not only the exit
 * status): for every fixture release (with the demo's tokenizer files copied in, since
 * `clef run` needs them) --json must parse and say ok, the precision, whether this build runs
 * it, and list exactly the files and tensor counts the library reports; the table must say
 * what was checked and what was not; --verify on a release without complete.json must say it
 * had nothing to check hashes against; a NaN weight is found by --verify only (and the table
 * says values were not checked without it); a FIFO config.json is refused at once; a missing
 * tokenizer is a problem. The clef binary's path is argv[1].
 */
#include "test.h"

#include "clef_release.h"
#include "damage_cases.h"
#include "fixture_util.h"
#include "json/json.h"
#include "run_cmd.h"

#include <stdlib.h>
#include <string.h>

static const char *clef_bin;

static json_doc *inspect_json(const char *dir, const char *flags, int *rc) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect %s --json %s", clef_bin, dir, flags);
    char *out = NULL;
    *rc = run_cmd(cmd, &out, NULL);
    json_doc *doc = NULL;
    CHECK_MSG(json_parse(out, strlen(out), NULL, &doc, NULL) == 0, "%s: --json output is not JSON: %.300s",
              cmd, out);
    free(out);
    return doc;
}

static int get_bool(const json_value *obj, const char *key) {
    const json_value *v = json_object_get(obj, key);
    return v && v->type == JSON_TRUE;
}

static int add_tokenizer(scratch *s) {
    return file_copy_in(s, "demo/clef-demo/tokenizer.json", "tokenizer.json") ||
           file_copy_in(s, "demo/clef-demo/tokenizer_config.json", "tokenizer_config.json");
}

typedef struct fixture_case {
    const char *fixture;
    const char *precision;
    int runnable;
    int has_manifest;
} fixture_case;

static void check_sound_release(const fixture_case *c) {
    scratch s = {{0}, {0}};
    CHECK(scratch_copy(&s, c->fixture) == 0);
    if (!strchr(c->fixture, '/'))
        CHECK(add_tokenizer(&s) == 0);
    int rc = -1;
    json_doc *doc = inspect_json(s.rel, "", &rc);
    CHECK_MSG(rc == 0, "%s: clef inspect exit %d", c->fixture, rc);
    const json_value *root = doc ? json_doc_root(doc) : NULL;
    if (root) {
        CHECK_MSG(get_bool(root, "ok"), "%s: ok is not true", c->fixture);
        CHECK_EQ_STR(json_get_string(json_object_get(root, "precision")), c->precision);
        CHECK_EQ_INT(get_bool(root, "runnable"), c->runnable);
        CHECK(get_bool(root, "tokenizer") && get_bool(root, "tokenizer_config"));
        const json_value *checked = json_object_get(root, "checked");
        CHECK(get_bool(checked, "configs") && get_bool(checked, "headers") &&
              get_bool(checked, "tokenizer"));
        CHECK_EQ_INT(get_bool(checked, "sizes"), c->has_manifest);
        CHECK(!get_bool(checked, "sha256") && !get_bool(checked, "values")); /* not without --verify */
        const json_value *problems = json_object_get(root, "problems");
        CHECK_MSG(problems && problems->type == JSON_ARRAY && problems->u.arr.count == 0,
                  "%s: problems listed for a sound release", c->fixture);
        /* The files and tensor counts are the library's. */
        clef_release *rel = NULL;
        CHECK(clef_release_open(s.rel, NULL, &rel) == CLEF_OK);
        const json_value *files = json_object_get(root, "files");
        CHECK(files && files->type == JSON_ARRAY);
        if (rel && files && files->type == JSON_ARRAY) {
            CHECK_EQ_INT(files->u.arr.count, clef_release_file_count(rel));
            for (size_t i = 0; i < files->u.arr.count && i < clef_release_file_count(rel); i++) {
                const json_value *f = files->u.arr.items[i];
                int64_t n = -1, size = -1;
                json_get_int64(json_object_get(f, "tensors"), &n);
                json_get_int64(json_object_get(f, "size"), &size);
                CHECK_EQ_STR(json_get_string(json_object_get(f, "name")), clef_release_file_name(rel, i));
                CHECK_EQ_INT(n, clef_release_file_tensor_count(rel, i));
                CHECK_EQ_INT(size, clef_release_file_size(rel, i));
            }
        }
        clef_release_free(rel);
    }
    json_doc_free(doc);
    /* --verify reads everything and says so */
    doc = inspect_json(s.rel, "--verify", &rc);
    CHECK_EQ_INT(rc, 0);
    root = doc ? json_doc_root(doc) : NULL;
    if (root) {
        const json_value *checked = json_object_get(root, "checked");
        CHECK(get_bool(checked, "values"));
        CHECK_EQ_INT(get_bool(checked, "sha256"), c->has_manifest);
    }
    json_doc_free(doc);
    printf("clef inspect %-16s ok, precision %s, runnable %d, verified\n", c->fixture, c->precision,
           c->runnable);
    scratch_remove(&s);
}

/* text may be NULL (a JSON field that is not a string): then it contains nothing */
static int contains(const char *text, const char *what) { return strstr(text ? text : "", what) != NULL; }

static void check_table_statements(void) {
    char cmd[1024], *out = NULL;
    /* demo: no complete.json */
    snprintf(cmd, sizeof cmd, "%s inspect demo/clef-demo", clef_bin);
    CHECK_EQ_INT(run_cmd(cmd, &out, NULL), 0);
    CHECK_MSG(contains(out, "unchecked  SHA-256 (no complete.json), weights' values: NaN/Inf (--verify)"),
              "table does not say what was not checked:\n%s", out);
    CHECK(contains(out, "status     OK"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect demo/clef-demo --verify", clef_bin);
    CHECK_EQ_INT(run_cmd(cmd, &out, NULL), 0);
    CHECK_MSG(contains(out, "--verify had nothing to check them against"), "%s", out);
    CHECK(contains(out, "every weight's values (NaN/Inf)"));
    free(out);

    /* A NaN weight: found by --verify, with a per-tensor message; not claimed checked without. */
    scratch s = {{0}, {0}};
    CHECK(scratch_copy(&s, "demo/clef-demo") == 0);
    char file[256];
    uint64_t off = 0;
    CHECK(locate(&s, "text.norm.weight", file, sizeof file, &off) == 0);
    CHECK(file_write_at(&s, file, off + 2, "\xc0\x7f", 2) == 0); /* element 1 = BF16 NaN */
    snprintf(cmd, sizeof cmd, "%s inspect %s", clef_bin, s.rel);
    CHECK_EQ_INT(run_cmd(cmd, &out, NULL), 0);
    CHECK(contains(out, "weights' values: NaN/Inf (--verify)"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect %s --verify", clef_bin, s.rel);
    CHECK_EQ_INT(run_cmd(cmd, &out, NULL), 1);
    CHECK_MSG(contains(out, "[-128 weight holds NaN or Inf] file 'model.safetensors': weight "
                            "'model.language_model.norm.weight' holds NaN at element 1"),
              "%s", out);
    free(out);
    scratch_remove(&s);

    /* A FIFO config.json is refused, not waited on (run_cmd's timeout turns a hang into 124). */
    CHECK(scratch_copy(&s, "demo/clef-demo") == 0);
    CHECK(file_make_fifo(&s, "config.json") == 0);
    int rc = -1;
    json_doc *doc = inspect_json(s.rel, "", &rc);
    CHECK_EQ_INT(rc, 1);
    const json_value *root = doc ? json_doc_root(doc) : NULL;
    if (root) {
        int64_t status = 0;
        json_get_int64(json_object_get(root, "status"), &status);
        CHECK_EQ_INT(status, CLEF_ERR_NOT_REGULAR);
        CHECK(contains(json_get_string(json_object_get(root, "error")), "config.json' is a FIFO"));
        CHECK(!get_bool(root, "ok"));
    }
    json_doc_free(doc);
    scratch_remove(&s);

    /* No tokenizer: a problem, exit 1 (clef run could not load it). */
    CHECK(scratch_copy(&s, "bf16-single") == 0);
    doc = inspect_json(s.rel, "", &rc);
    CHECK_EQ_INT(rc, 1);
    root = doc ? json_doc_root(doc) : NULL;
    if (root) {
        CHECK(!get_bool(root, "ok"));
        const json_value *problems = json_object_get(root, "problems");
        const json_value *first = problems && problems->type == JSON_ARRAY && problems->u.arr.count
                                      ? problems->u.arr.items[0]
                                      : NULL;
        int64_t status = 0;
        json_get_int64(json_object_get(first, "status"), &status);
        CHECK_EQ_INT(status, CLEF_ERR_FILE_MISSING);
        CHECK(contains(json_get_string(json_object_get(first, "message")), "has no tokenizer.json"));
    }
    json_doc_free(doc);
    scratch_remove(&s);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_inspect PATH_TO_CLEF\n");
        return 2;
    }
    clef_bin = argv[1];
    static const fixture_case fixtures[] = {
        {"demo/clef-demo", "bf16", 1, 0}, {"bf16-single", "bf16", 1, 1},
        {"bf16-sharded", "bf16", 1, 0},   {"nf4", "nf4", 1, 1},
        {"fp8", "fp8-w8a8", 1, 0},        {"int8", "int8-convrot", 1, 0},
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        check_sound_release(&fixtures[i]);
    check_table_statements();
    return test_summary();
}
