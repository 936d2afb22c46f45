/*
 * test_release_readback.c — the fixture releases written by the real writers (transformers
 * save_pretrained, safetensors save_file, bitsandbytes, compressed-tensors, comfy-kitchen;
 * see scripts/fixtures/) open, and every tensor reads back bit-identical to what the Python
 * safetensors library loads: same file, dtype, shape, byte count and SHA-256 of the bytes
 * (tests/release/fixtures/<name>.manifest.json, written by make_test_fixtures.py), both
 * through clef_release_read (pread) and clef_release_map (read-only mapping).
 */
#include "test.h"
#include "sha256_hex.h"

#include "core/io.h"
#include "json/json.h"
#include "release/config.h"
#include "release/names.h"
#include "release/release.h"

#include <stdlib.h>

#define FIXTURES "tests/release/fixtures"

/* Open the fixture, compare it with its manifest tensor by tensor. */
static void check_fixture(const char *name, clef_quant_method want_method) {
    char dir[256], manifest_path[256];
    snprintf(dir, sizeof dir, FIXTURES "/%s", name);
    snprintf(manifest_path, sizeof manifest_path, FIXTURES "/%s.manifest.json", name);
    clef_release *rel = NULL;
    int rc = clef_release_open(dir, NULL, &rel);
    CHECK_MSG(rc == CLEF_OK, "%s: open failed: %s", name, clef_last_error());
    if (rc != CLEF_OK)
        return;
    CHECK_EQ_INT(clef_release_get_config(rel)->quant.method, want_method);
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    CHECK(clef_read_file(manifest_path, 1 << 24, &text, &len) == CLEF_OK);
    CHECK(text && json_parse(text, len, NULL, &doc, NULL) == 0);
    const json_value *tensors = doc ? json_object_get(json_doc_root(doc), "tensors") : NULL;
    CHECK(tensors && tensors->type == JSON_OBJECT);
    size_t matched = 0, identical = 0, ignored = 0;
    for (size_t i = 0; tensors && i < tensors->u.obj.count; i++) {
        const char *stored = tensors->u.obj.members[i].key;
        const json_value *m = tensors->u.obj.members[i].value;
        const char *file = json_get_string(json_object_get(m, "file"));
        char *engine = NULL;
        clef_name_kind kind = clef_name_to_engine(stored, strcmp(file, "joint_head.safetensors") == 0,
                                                  &engine);
        if (kind == CLEF_NAME_IGNORED) {
            ignored++;
            free(engine);
            continue;
        }
        const clef_tensor_info *t = clef_release_find(rel, engine);
        CHECK_MSG(t != NULL, "%s: tensor '%s' (engine '%s') not in the table", name, stored, engine);
        free(engine);
        if (!t)
            continue;
        matched++;
        CHECK_EQ_STR(t->stored_name, stored);
        CHECK_EQ_STR(clef_release_file_name(rel, (size_t)t->file), file);
        CHECK_EQ_STR(clef_dtype_name(t->dtype), json_get_string(json_object_get(m, "dtype")));
        const json_value *shape = json_object_get(m, "shape");
        CHECK_EQ_INT(t->n_dims, shape->u.arr.count);
        for (int d = 0; d < t->n_dims && (size_t)d < shape->u.arr.count; d++) {
            int64_t want = -1;
            json_get_int64(shape->u.arr.items[d], &want);
            CHECK_EQ_INT(t->shape[d], want);
        }
        int64_t n_bytes = -1;
        json_get_int64(json_object_get(m, "n_bytes"), &n_bytes);
        CHECK_EQ_INT(t->n_bytes, n_bytes);
        void *buf = malloc(t->n_bytes ? t->n_bytes : 1);
        CHECK(clef_release_read(rel, t, buf) == CLEF_OK);
        char hex[65];
        sha256_hex(buf, t->n_bytes, hex);
        const char *want_hex = json_get_string(json_object_get(m, "sha256"));
        CHECK_MSG(strcmp(hex, want_hex) == 0, "%s: tensor '%s' bytes differ from Python's", name,
                  stored);
        identical += strcmp(hex, want_hex) == 0;
        free(buf);
        clef_tensor_map map;
        CHECK(clef_release_map(rel, t, &map) == CLEF_OK);
        sha256_hex(map.data, t->n_bytes, hex);
        CHECK_MSG(strcmp(hex, want_hex) == 0, "%s: mapped tensor '%s' differs from Python's", name,
                  stored);
        clef_release_unmap(&map);
    }
    CHECK_EQ_INT(matched + ignored, tensors ? tensors->u.obj.count : 0);
    CHECK_EQ_INT(matched, clef_release_tensor_count(rel));
    printf("%-13s %4zu tensors, %4zu bit-identical to Python safetensors\n", name, matched, identical);
    json_doc_free(doc);
    free(text);
    clef_release_free(rel);
}

/* The sharded and single-file BF16 fixtures hold the same model (same seed): the reader must
 * produce the same bytes for every engine name through either layout. */
static void check_sharded_equals_single(void) {
    clef_release *a = NULL, *b = NULL;
    CHECK(clef_release_open(FIXTURES "/bf16-single", NULL, &a) == CLEF_OK);
    CHECK(clef_release_open(FIXTURES "/bf16-sharded", NULL, &b) == CLEF_OK);
    if (!a || !b) {
        clef_release_free(a);
        clef_release_free(b);
        return;
    }
    CHECK_EQ_INT(clef_release_tensor_count(a), clef_release_tensor_count(b));
    CHECK(clef_release_file_count(b) > 2); /* several shards + joint_head.safetensors */
    size_t same = 0;
    for (size_t i = 0; i < clef_release_tensor_count(a); i++) {
        const clef_tensor_info *ta = clef_release_tensor_at(a, i);
        const clef_tensor_info *tb = clef_release_find(b, ta->name);
        CHECK_MSG(tb && tb->n_bytes == ta->n_bytes, "tensor '%s' differs between layouts", ta->name);
        if (!tb || tb->n_bytes != ta->n_bytes)
            continue;
        unsigned char *x = malloc(ta->n_bytes + 1), *y = malloc(tb->n_bytes + 1);
        CHECK(clef_release_read(a, ta, x) == CLEF_OK && clef_release_read(b, tb, y) == CLEF_OK);
        same += memcmp(x, y, ta->n_bytes) == 0;
        free(x);
        free(y);
    }
    CHECK_EQ_INT(same, clef_release_tensor_count(a));
    clef_release_free(a);
    clef_release_free(b);
}

/* Engine names and configs of the BF16 fixture, against config.json as json.loads reads it. */
static void check_names_and_config(void) {
    clef_release *rel = NULL;
    CHECK(clef_release_open(FIXTURES "/bf16-sharded", NULL, &rel) == CLEF_OK);
    if (!rel)
        return;
    CHECK(clef_release_find(rel, "text.layers.3.self_attn.q_proj.weight") != NULL);
    CHECK(clef_release_find(rel, "text.layers.0.linear_attn.A_log") != NULL);
    CHECK(clef_release_find(rel, "vision.patch_embed.proj.weight") != NULL);
    CHECK(clef_release_find(rel, "lm_head.weight") != NULL);
    CHECK(clef_release_find(rel, "head.residual_gate") != NULL);
    CHECK(clef_release_find(rel, "model.language_model.norm.weight") == NULL);
    /* stable order: sorted by engine name */
    for (size_t i = 1; i < clef_release_tensor_count(rel); i++)
        CHECK(strcmp(clef_release_tensor_at(rel, i - 1)->name, clef_release_tensor_at(rel, i)->name) < 0);
    const clef_release_config *c = clef_release_get_config(rel);
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    CHECK(clef_read_file(FIXTURES "/bf16-sharded/config.json", 1 << 20, &text, &len) == CLEF_OK);
    CHECK(json_parse(text, len, NULL, &doc, NULL) == 0);
    const json_value *tc = json_object_get(json_doc_root(doc), "text_config");
    int64_t v;
    CHECK(json_get_int64(json_object_get(tc, "hidden_size"), &v) && v == c->text.hidden_size);
    CHECK(json_get_int64(json_object_get(tc, "num_hidden_layers"), &v) && v == c->text.num_hidden_layers);
    CHECK(json_get_int64(json_object_get(tc, "linear_num_value_heads"), &v) &&
          v == c->text.linear_num_value_heads);
    const json_value *lt = json_object_get(tc, "layer_types");
    for (size_t i = 0; i < lt->u.arr.count; i++)
        CHECK_EQ_INT(c->text.layer_types[i], strcmp(json_get_string(lt->u.arr.items[i]), "full_attention") == 0
                                                  ? CLEF_LAYER_FULL_ATTENTION
                                                  : CLEF_LAYER_LINEAR_ATTENTION);
    CHECK(c->vision.present && c->head.present);
    /* transformers wrote metadata.total_parameters (the backbone's parameter count) into the
     * index: the table's text + vision + lm_head tensors must hold exactly that many. */
    char *itext = NULL;
    size_t ilen = 0;
    json_doc *idoc = NULL;
    int64_t want_params = -1;
    CHECK(clef_read_file(FIXTURES "/bf16-sharded/model.safetensors.index.json", 1 << 20, &itext,
                         &ilen) == CLEF_OK);
    CHECK(itext && json_parse(itext, ilen, NULL, &idoc, NULL) == 0);
    CHECK(idoc && json_get_int64(json_object_get(json_object_get(json_doc_root(idoc), "metadata"),
                                                 "total_parameters"),
                                 &want_params));
    uint64_t params = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (strncmp(t->name, "head.", 5) != 0)
            params += t->n_bytes / clef_dtype_size(t->dtype);
    }
    CHECK_EQ_INT(params, want_params);
    json_doc_free(idoc);
    free(itext);
    CHECK_EQ_INT(c->head.width, 32);
    json_doc_free(doc);
    free(text);
    clef_release_free(rel);
}

int main(void) {
    check_fixture("bf16-single", CLEF_QUANT_NONE);
    check_fixture("bf16-sharded", CLEF_QUANT_NONE);
    check_fixture("nf4", CLEF_QUANT_BNB_NF4);
    check_fixture("fp8", CLEF_QUANT_FP8_W8A8);
    check_fixture("int8", CLEF_QUANT_INT8_CONVROT);
    check_sharded_equals_single();
    check_names_and_config();
    return test_summary();
}
