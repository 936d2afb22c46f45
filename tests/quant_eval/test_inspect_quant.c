/*
 * test_inspect_quant.c — the quantization section of `clef inspect --json` against an oracle
 * the engine did not write: tests/quant_eval/fixtures/inspect_expected.json, made by
 * scripts/quant_eval/inspect_oracle.py from the safetensors headers (the `safetensors`
 * package), config.json and the libraries' own ignore-list matchers (transformers for
 * bitsandbytes' llm_int8_skip_modules, compressed-tensors for `ignore`). Every count, byte sum
 * and format parameter must be EQUAL (they are integers and strings: no tolerance), and every
 * linear must have the oracle's state and rule. Variants (a fixture with another ignore list,
 * the oracle's config.json written into a temporary copy) exercise the matchers: "re:"
 * patterns, and bitsandbytes skip modules as a regex from the start or a name suffix.
 *
 * Then the resident bytes are checked against what a real load holds: for the releases that
 * carry a tokenizer, clef_model_weight_bytes on the CPU must be at least inspect's total and
 * exceed it by no more than the CPU backend's GEMM panel padding (each prepared float matrix
 * is padded to a whole panel of 32 rows: at most 31 rows of row-bytes, per part).
 * The clef binary's path is argv[1].
 */
#include "test.h"

#include "clef.h"
#include "clef_release.h"
#include "json/json.h"
#include "json_compact.h"
#include "release/fixture_util.h"
#include "run_cmd.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPECTED "tests/quant_eval/fixtures/inspect_expected.json"
#define PANEL_ROWS 32 /* CPU_GEMM_PANEL (src/backend/cpu/cpu_gemm.h) */

static const char *clef_bin;

static json_doc *parse_text(const char *what, const char *text) {
    json_doc *doc = NULL;
    json_error err;
    json_parse_opts o = {.max_depth = 64};
    int rc = json_parse(text, strlen(text), &o, &doc, &err);
    CHECK_MSG(rc == 0, "%s is not JSON (%s): %.300s", what, err.msg, text);
    return rc == 0 ? doc : NULL;
}

/* Two JSON values equal: same type, numbers as integers or text, strings, members in any order. */
static int json_equal(const json_value *a, const json_value *b) {
    if (!a || !b)
        return a == b;
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case JSON_NULL:
    case JSON_TRUE:
    case JSON_FALSE: return 1;
    case JSON_NUMBER: return strcmp(a->u.num.text, b->u.num.text) == 0;
    case JSON_STRING: return a->u.str.len == b->u.str.len && !memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len);
    case JSON_ARRAY:
        if (a->u.arr.count != b->u.arr.count)
            return 0;
        for (size_t i = 0; i < a->u.arr.count; i++)
            if (!json_equal(a->u.arr.items[i], b->u.arr.items[i]))
                return 0;
        return 1;
    case JSON_OBJECT:
        if (a->u.obj.count != b->u.obj.count)
            return 0;
        for (size_t i = 0; i < a->u.obj.count; i++)
            if (!json_equal(a->u.obj.members[i].value, json_object_get(b, a->u.obj.members[i].key)))
                return 0;
        return 1;
    }
    return 0;
}

static const json_value *find_linear(const json_value *list, const char *name, const char *group) {
    for (size_t i = 0; list && i < list->u.arr.count; i++) {
        const json_value *x = list->u.arr.items[i];
        if (!strcmp(json_get_string(json_object_get(x, "name")), name) &&
            !strcmp(json_get_string(json_object_get(x, "group")), group))
            return x;
    }
    return NULL;
}

static void check_release(const char *key, const json_value *want) {
    const char *dir = json_get_string(json_object_get(want, "dir"));
    const char *config = json_get_string(json_object_get(want, "config_json"));
    scratch s = {{0}, {0}};
    if (config) { /* a variant: the fixture with the oracle's config.json */
        CHECK_MSG(scratch_copy(&s, dir) == 0 && file_write(&s, "config.json", config) == 0,
                  "%s: cannot make the variant of %s", key, dir);
        /* complete.json lists the original config.json's size and hash */
        char *manifest = scratch_path(&s, "complete.json");
        if (manifest && access(manifest, F_OK) == 0)
            CHECK(file_remove(&s, "complete.json") == 0);
        free(manifest);
        dir = s.rel;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect %s --json", clef_bin, dir);
    char *out = NULL;
    int rc = run_cmd(cmd, &out, NULL);
    CHECK_MSG(rc == 0 || rc == 1, "%s: exit %d", cmd, rc); /* 1: fixtures without a tokenizer */
    json_doc *doc = parse_text(cmd, out);
    free(out);
    if (!doc) {
        if (config)
            scratch_remove(&s);
        return;
    }
    const json_value *got = json_object_get(json_doc_root(doc), "quantization");
    CHECK_MSG(got != NULL, "%s: no \"quantization\" member", key);
    if (!got) {
        json_doc_free(doc);
        if (config)
            scratch_remove(&s);
        return;
    }
    CHECK_MSG(!strcmp(json_get_string(json_object_get(got, "method")),
                      json_get_string(json_object_get(want, "method"))),
              "%s: method %s, oracle %s", key, json_get_string(json_object_get(got, "method")),
              json_get_string(json_object_get(want, "method")));
    static const char *const members[] = {"groups", "total", "params"};
    for (size_t i = 0; i < 3; i++) {
        int eq = json_equal(json_object_get(got, members[i]), json_object_get(want, members[i]));
        CHECK_MSG(eq, "%s: \"%s\" differs from the oracle", key, members[i]);
        if (!eq) {
            char *g = render_compact(json_object_get(got, members[i]));
            char *w = render_compact(json_object_get(want, members[i]));
            fprintf(stderr, "  clef:   %s\n  oracle: %s\n", g ? g : "?", w ? w : "?");
            free(g);
            free(w);
        }
    }
    const json_value *gl = json_object_get(got, "linears"), *wl = json_object_get(want, "linears");
    CHECK_MSG(gl && wl && gl->u.arr.count == wl->u.arr.count, "%s: %zu linears, oracle %zu", key,
              gl ? gl->u.arr.count : 0, wl ? wl->u.arr.count : 0);
    for (size_t i = 0; wl && i < wl->u.arr.count; i++) {
        const json_value *w = wl->u.arr.items[i];
        const char *name = json_get_string(json_object_get(w, "name"));
        const json_value *g = find_linear(gl, name, json_get_string(json_object_get(w, "group")));
        CHECK_MSG(g && json_equal(g, w), "%s: linear %s: clef says %s (rule %s), oracle %s (rule %s)",
                  key, name, g ? json_get_string(json_object_get(g, "state")) : "nothing",
                  g ? json_get_string(json_object_get(g, "rule")) : "-",
                  json_get_string(json_object_get(w, "state")),
                  json_get_string(json_object_get(w, "rule")));
    }
    json_doc_free(doc);
    if (config)
        scratch_remove(&s);
}

/* Padding the CPU's panels may add to the format-level bytes of rel: at most 31 rows of every
 * prepared float matrix, twice for the head's in_proj_weight (two parts: q, kv). */
static uint64_t panel_padding_bound(const clef_release *rel) {
    uint64_t bound = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (t->n_dims < 2 || t->dtype == CLEF_DTYPE_U8 || t->dtype == CLEF_DTYPE_I8 ||
            t->dtype == CLEF_DTYPE_F8_E4M3 || clef_release_resident_bytes(rel, t) != t->n_bytes)
            continue; /* quantized, a vector held as fp32, or not held */
        const uint64_t row = t->n_bytes / (uint64_t)t->shape[0];
        bound += (PANEL_ROWS - 1) * row * (strstr(t->name, "in_proj_weight") ? 2 : 1);
    }
    return bound;
}

static void check_against_load(const char *dir) {
    clef_release *rel = NULL;
    CHECK_MSG(clef_release_open(dir, NULL, &rel) == CLEF_OK, "%s: %s", dir, clef_last_error());
    if (!rel)
        return;
    uint64_t resident = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++)
        resident += clef_release_resident_bytes(rel, clef_release_tensor_at(rel, i));
    const uint64_t bound = panel_padding_bound(rel);
    clef_release_free(rel);
    clef_model_params p = clef_model_default_params();
    p.n_threads = 1;
    p.max_length = 256;
    clef_model *m = NULL;
    CHECK_MSG(clef_model_load(dir, &p, &m) == CLEF_OK, "%s: %s", dir, clef_last_error());
    if (!m)
        return;
    const uint64_t held = clef_model_weight_bytes(m);
    printf("%-36s inspect %10llu  loaded %10llu  (+%llu, panel bound %llu)\n", dir,
           (unsigned long long)resident, (unsigned long long)held,
           (unsigned long long)(held - resident), (unsigned long long)bound);
    CHECK_MSG(held >= resident && held - resident <= bound,
              "%s: inspect says %llu resident bytes, the CPU load holds %llu (padding bound %llu)",
              dir, (unsigned long long)resident, (unsigned long long)held, (unsigned long long)bound);
    clef_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_inspect_quant CLEF_BINARY\n");
        return 2;
    }
    clef_bin = argv[1];
    clef_log_set(NULL, NULL);
    char *text = run_cmd_slurp(EXPECTED);
    json_doc *doc = parse_text(EXPECTED, text);
    free(text);
    const json_value *releases = json_object_get(json_doc_root(doc), "releases");
    CHECK_MSG(releases && releases->type == JSON_OBJECT && releases->u.obj.count >= 4,
              "%s: no releases", EXPECTED);
    for (size_t i = 0; releases && i < releases->u.obj.count; i++)
        check_release(releases->u.obj.members[i].key, releases->u.obj.members[i].value);
    static const char *const loadable[] = {"tests/quant/fixtures/decide/bf16",
                                           "tests/quant/fixtures/decide/nf4",
                                           "tests/quant/fixtures/decide/fp8",
                                           "tests/quant/fixtures/decide/int8"};
    for (size_t i = 0; i < sizeof loadable / sizeof loadable[0]; i++)
        check_against_load(loadable[i]);
    json_doc_free(doc);
    return test_summary();
}
