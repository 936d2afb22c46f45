/*
 * test_release_damaged.c — damaged and mismatched releases are refused, each with its own
 * status code and a message naming the file and the tensor or field.
 *
 * Each case copies a committed fixture release into a temporary directory, damages it in one
 * precise way (truncates a shard, rewrites a header field, edits a JSON file, moves a file out
 * through a symlink...), opens it, and checks the exact status and that the message contains
 * the name it must name. The copy is removed afterwards. Runs under ASan + UBSan in CI (no
 * crash, no leak).
 */
#include "test.h"

#include "fixture_util.h"
#include "release/release.h"

#include <stdlib.h>
#include <unistd.h>

/* Where a tensor's bytes are in the copy, found through the reader on the intact copy. */
static int locate(const scratch *s, const char *engine_name, char *file, size_t cap, uint64_t *offset) {
    clef_release *rel = NULL;
    if (clef_release_open(s->rel, NULL, &rel) != CLEF_OK)
        return -1;
    const clef_tensor_info *t = clef_release_find(rel, engine_name);
    int rc = -1;
    if (t) {
        snprintf(file, cap, "%s", clef_release_file_name(rel, (size_t)t->file));
        *offset = t->offset;
        rc = 0;
    }
    clef_release_free(rel);
    return rc;
}

static int write_u16_at(const scratch *s, const char *engine, uint16_t v) {
    char file[256];
    uint64_t off;
    if (locate(s, engine, file, sizeof file, &off))
        return -1;
    unsigned char b[2] = {(unsigned char)(v & 0xff), (unsigned char)(v >> 8)};
    return file_write_at(s, file, off, b, 2);
}

static int write_u32_at(const scratch *s, const char *engine, uint32_t v) {
    char file[256];
    uint64_t off;
    if (locate(s, engine, file, sizeof file, &off))
        return -1;
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return file_write_at(s, file, off, b, 4);
}

#define SHARD6 "model-00006-of-00006.safetensors"
#define SHARD2 "model-00002-of-00006.safetensors"
#define NORM "model.language_model.norm.weight"
#define FP8_SCALE "text.layers.0.mlp.up_proj.weight_scale"
#define INT8_SCALE "text.layers.0.linear_attn.in_proj_qkv.weight_scale"

/* ---- the damage, one function per case ------------------------------------------------------ */

static int truncated_shard(scratch *s) { return file_truncate(s, SHARD6, 49000); }
static int header_len_past_eof(scratch *s) { return st_set_header_len(s, SHARD6, 60000); }
static int header_len_absurd(scratch *s) { return st_set_header_len(s, SHARD6, (uint64_t)1 << 40); }
static int file_too_short(scratch *s) { return file_truncate(s, SHARD6, 5); }
static int header_not_json(scratch *s) { return file_write_at(s, SHARD6, 8 + 20, "\x01", 1); }
static int header_not_object(scratch *s) { return st_set_header_text(s, SHARD6, "[1, 2, 3]"); }
static int offsets_bad_type(scratch *s) { return st_set_field(s, SHARD6, NORM, "data_offsets", "[\"49408\",49536]"); }
static int offsets_overlap(scratch *s) { return st_set_field(s, SHARD6, NORM, "data_offsets", "[49344,49472]"); }
static int offsets_out_of_range(scratch *s) { return st_set_field(s, SHARD6, NORM, "data_offsets", "[90000,90128]"); }
static int offsets_begin_after_end(scratch *s) { return st_set_field(s, SHARD6, NORM, "data_offsets", "[49536,49408]"); }
static int offsets_too_big(scratch *s) { return st_set_field(s, SHARD6, NORM, "data_offsets", "[49408,99999999999999999999]"); }
static int size_shape_mismatch(scratch *s) { return st_set_field(s, SHARD6, NORM, "shape", "[65]"); }
static int unknown_dtype(scratch *s) { return st_set_field(s, SHARD6, NORM, "dtype", "\"Q4_K\""); }
static int trailing_bytes(scratch *s) { return file_append(s, SHARD6, "garbage!", 8); }
static int header_tensor_not_object(scratch *s) {
    return st_set_header_text(s, "joint_head.safetensors", "{\"residual_gate\": 7}");
}
static int duplicate_tensor(scratch *s) {
    /* Two stored names that map to the same engine name text.norm.weight. */
    return st_replace_in_header(s, "model.safetensors",
                                "\"model.language_model.layers.0.input_layernorm.weight\"",
                                "\"language_model.norm.weight\"") ||
           file_remove(s, "complete.json");
}
static int tensor_twice_in_header(scratch *s) {
    /* One header names NORM twice (JSON that Python would merge, last entry winning). */
    return st_replace_in_header(s, SHARD6, "\"model.language_model.layers.3.post_attention_layernorm.weight\"",
                                "\"" NORM "\"");
}
static int field_twice_in_entry(scratch *s) {
    return st_set_field(s, SHARD6, NORM, "dtype", "\"BF16\",\"dtype\":\"BF16\"");
}
static int missing_shard(scratch *s) { return file_remove(s, SHARD2); }
static int shard_path_dotdot(scratch *s) {
    return file_replace(s, "model.safetensors.index.json", "\"" SHARD6 "\"", "\"../" SHARD6 "\"", 1);
}
static int shard_path_absolute(scratch *s) {
    return file_replace(s, "model.safetensors.index.json", "\"" SHARD6 "\"", "\"/etc/" SHARD6 "\"", 1);
}
static int shard_symlink_out(scratch *s) {
    char *inside = scratch_path(s, SHARD6);
    char outside[512];
    snprintf(outside, sizeof outside, "%s/elsewhere.safetensors", s->root);
    int rc = rename(inside, outside) || symlink(outside, inside);
    free(inside);
    return rc;
}
static int index_total_size(scratch *s) {
    return file_replace(s, "model.safetensors.index.json", "\"total_size\": ", "\"total_size\": 1", 0);
}
static int index_lists_absent(scratch *s) {
    return file_replace(s, "model.safetensors.index.json", "\"weight_map\": {",
                        "\"weight_map\": {\n    \"model.language_model.ghost.weight\": \"" SHARD6 "\",", 0);
}
static int index_misses_tensor(scratch *s) {
    return file_replace(s, "model.safetensors.index.json",
                        "\"" NORM "\": \"" SHARD6 "\",\n", "", 0);
}
static int index_not_json(scratch *s) { return file_write(s, "model.safetensors.index.json", "{\"weight_map\": "); }
static int tensor_missing(scratch *s) {
    /* mtp.* is ignored, so the renamed tensor is simply absent. */
    return st_replace_in_header(s, "model.safetensors", "\"" NORM "\"", "\"mtp.norm.weight\"") ||
           file_remove(s, "complete.json");
}
static int tensor_unexpected(scratch *s) {
    /* With tied embeddings the model has no lm_head.weight: the file's one is unknown. */
    return file_replace(s, "config.json", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true", 1);
}
static int tensor_shape_vs_config(scratch *s) {
    return file_replace(s, "config.json", "\"intermediate_size\": 128", "\"intermediate_size\": 96", 0);
}
static int tensor_dtype_for_role(scratch *s) {
    return st_set_field(s, SHARD6, NORM, "dtype", "\"U8\"") || st_set_field(s, SHARD6, NORM, "shape", "[128]");
}
static int scale_nan(scratch *s) { return write_u16_at(s, FP8_SCALE, 0x7fc0); }
static int scale_zero(scratch *s) { return write_u16_at(s, FP8_SCALE, 0x0000); }
static int scale_negative(scratch *s) { return write_u16_at(s, FP8_SCALE, 0xbf80); }
static int scale_inf(scratch *s) { return write_u32_at(s, INT8_SCALE, 0x7f800000u); }
static int nf4_quant_map(scratch *s) {
    return write_u32_at(s, "text.layers.0.mlp.down_proj.weight.quant_map", 0x3f000000u) ||
           file_remove(s, "complete.json");
}
static int nf4_nested_absmax_zero(scratch *s) {
    return write_u32_at(s, "text.layers.3.self_attn.q_proj.weight.nested_absmax", 0) ||
           file_remove(s, "complete.json");
}
static int quant_method_unknown(scratch *s) {
    return file_replace(s, "config.json", "\"quant_method\": \"compressed-tensors\"", "\"quant_method\": \"gptq\"", 0);
}
static int fp8_wrong_strategy(scratch *s) {
    return file_replace(s, "config.json", "\"strategy\": \"channel\"", "\"strategy\": \"tensor\"", 0);
}
static int manifest_size(scratch *s) { return file_append(s, "config.json", "\n", 1); }
static int manifest_hash(scratch *s) {
    /* Same size, one byte of tensor data changed: only --verify can see it. */
    char file[256];
    uint64_t off;
    return locate(s, "text.embed_tokens.weight", file, sizeof file, &off) ||
           file_write_at(s, file, off + 100, "\x55", 1);
}
static int manifest_missing_file(scratch *s) { return file_remove(s, "generation_config.json"); }
static int manifest_not_json(scratch *s) { return file_write(s, "complete.json", "{\"files\": [{]}"); }
static int manifest_escapes(scratch *s) {
    return file_replace(s, "complete.json", "\"path\": \"config.json\"", "\"path\": \"../config.json\"", 0);
}
static int layer_types_length(scratch *s) {
    return file_replace(s, "config.json", "\"full_attention\"", "\"full_attention\", \"linear_attention\"", 0);
}
static int layer_types_value(scratch *s) {
    return file_replace(s, "config.json", "\"full_attention\"", "\"sliding_attention\"", 0);
}
static int heads_not_dividing(scratch *s) {
    return file_replace(s, "config.json", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", 0);
}
static int head_config_missing_field(scratch *s) {
    return file_replace(s, "joint_head_config.json", ",\n  \"feedforward\": 64", "", 0);
}
static int head_config_unknown_field(scratch *s) {
    return file_replace(s, "joint_head_config.json", "\"width\"", "\"widht\": 3, \"width\"", 0);
}
static int head_hidden_mismatch(scratch *s) {
    return file_replace(s, "joint_head_config.json", "\"hidden_size\": 64", "\"hidden_size\": 128", 0);
}
static int config_not_json(scratch *s) { return file_write(s, "config.json", "{\"text_config\": {,}"); }
static int config_missing(scratch *s) { return file_remove(s, "config.json"); }
static int config_field_type(scratch *s) {
    return file_replace(s, "config.json", "\"hidden_size\": 64", "\"hidden_size\": \"64\"", 0);
}
static int mrope_mismatch(scratch *s) {
    return file_replace(s, "config.json", "\"mrope_section\": [\n        1,", "\"mrope_section\": [\n        2,", 0);
}
static int head_weights_missing(scratch *s) { return file_remove(s, "joint_head.safetensors"); }
static int head_tensor_shape(scratch *s) {
    return st_set_field(s, "joint_head.safetensors", "residual_gate", "shape", "[1]");
}

typedef struct damage_case {
    const char *name;
    const char *fixture;
    int (*damage)(scratch *s);
    int verify;
    int expected;
    const char *must_name; /* the message names this file / tensor / field */
} damage_case;

static const damage_case cases[] = {
    {"truncated shard", "bf16-sharded", truncated_shard, 0, CLEF_ERR_ST_TRUNCATED, SHARD6},
    {"header length past EOF", "bf16-sharded", header_len_past_eof, 0, CLEF_ERR_ST_HEADER_SIZE, SHARD6},
    {"absurd header length", "bf16-sharded", header_len_absurd, 0, CLEF_ERR_ST_HEADER_SIZE, SHARD6},
    {"file shorter than 8 bytes", "bf16-sharded", file_too_short, 0, CLEF_ERR_ST_TRUNCATED, SHARD6},
    {"header not JSON", "bf16-sharded", header_not_json, 0, CLEF_ERR_ST_HEADER_JSON, SHARD6},
    {"header not an object", "bf16-sharded", header_not_object, 0, CLEF_ERR_ST_HEADER_SCHEMA, SHARD6},
    {"header entry not an object", "bf16-sharded", header_tensor_not_object, 0, CLEF_ERR_ST_HEADER_SCHEMA, "residual_gate"},
    {"data_offsets of wrong type", "bf16-sharded", offsets_bad_type, 0, CLEF_ERR_ST_HEADER_SCHEMA, NORM},
    {"overlapping offsets", "bf16-sharded", offsets_overlap, 0, CLEF_ERR_ST_OFFSETS_OVERLAP, NORM},
    {"offsets out of range", "bf16-sharded", offsets_out_of_range, 0, CLEF_ERR_ST_OFFSETS_RANGE, NORM},
    {"offsets begin > end", "bf16-sharded", offsets_begin_after_end, 0, CLEF_ERR_ST_OFFSETS_RANGE, NORM},
    {"offset past 2^63", "bf16-sharded", offsets_too_big, 0, CLEF_ERR_ST_OFFSETS_RANGE, NORM},
    {"size/shape mismatch", "bf16-sharded", size_shape_mismatch, 0, CLEF_ERR_ST_SIZE_MISMATCH, NORM},
    {"unknown dtype", "bf16-sharded", unknown_dtype, 0, CLEF_ERR_ST_UNKNOWN_DTYPE, NORM},
    {"bytes after the last tensor", "bf16-sharded", trailing_bytes, 0, CLEF_ERR_ST_OFFSETS_RANGE, SHARD6},
    {"duplicate tensor", "bf16-single", duplicate_tensor, 0, CLEF_ERR_ST_DUPLICATE_TENSOR, "language_model.norm.weight"},
    {"tensor listed twice in one header", "bf16-sharded", tensor_twice_in_header, 0, CLEF_ERR_ST_DUPLICATE_TENSOR, SHARD6 "': tensor '" NORM "'"},
    {"field repeated in a header entry", "bf16-sharded", field_twice_in_entry, 0, CLEF_ERR_ST_HEADER_SCHEMA, "duplicate key \"dtype\""},
    {"missing shard", "bf16-sharded", missing_shard, 0, CLEF_ERR_SHARD_MISSING, SHARD2},
    {"shard path with ..", "bf16-sharded", shard_path_dotdot, 0, CLEF_ERR_SHARD_PATH, "../" SHARD6},
    {"absolute shard path", "bf16-sharded", shard_path_absolute, 0, CLEF_ERR_SHARD_PATH, "/etc/" SHARD6},
    {"symlink out of the directory", "bf16-sharded", shard_symlink_out, 0, CLEF_ERR_SHARD_PATH, SHARD6},
    {"index total_size wrong", "bf16-sharded", index_total_size, 0, CLEF_ERR_INDEX_TOTAL_SIZE, "total_size"},
    {"index lists tensor absent from shard", "bf16-sharded", index_lists_absent, 0, CLEF_ERR_INDEX_TENSOR_ABSENT, "model.language_model.ghost.weight"},
    {"shard holds unlisted tensor", "bf16-sharded", index_misses_tensor, 0, CLEF_ERR_INDEX_UNLISTED, NORM},
    {"index not JSON", "bf16-sharded", index_not_json, 0, CLEF_ERR_INDEX_JSON, "model.safetensors.index.json"},
    {"missing tensor", "bf16-single", tensor_missing, 0, CLEF_ERR_TENSOR_MISSING, "text.norm.weight"},
    {"unexpected tensor", "bf16-sharded", tensor_unexpected, 0, CLEF_ERR_TENSOR_UNEXPECTED, "lm_head.weight"},
    {"tensor shape vs config", "bf16-sharded", tensor_shape_vs_config, 0, CLEF_ERR_TENSOR_SHAPE, "mlp."},
    {"head tensor shape", "bf16-sharded", head_tensor_shape, 0, CLEF_ERR_TENSOR_SHAPE, "residual_gate"},
    {"wrong dtype for role", "bf16-sharded", tensor_dtype_for_role, 0, CLEF_ERR_TENSOR_DTYPE, NORM},
    {"NaN scale (FP8)", "fp8", scale_nan, 0, CLEF_ERR_SCALE_INVALID, "up_proj.weight_scale"},
    {"zero scale (FP8)", "fp8", scale_zero, 0, CLEF_ERR_SCALE_INVALID, "up_proj.weight_scale"},
    {"negative scale (FP8)", "fp8", scale_negative, 0, CLEF_ERR_SCALE_INVALID, "up_proj.weight_scale"},
    {"Inf scale (INT8)", "int8", scale_inf, 0, CLEF_ERR_SCALE_INVALID, "in_proj_qkv.weight_scale"},
    {"zero nested_absmax (NF4)", "nf4", nf4_nested_absmax_zero, 0, CLEF_ERR_SCALE_INVALID, "nested_absmax"},
    {"NF4 quant_map not NF4", "nf4", nf4_quant_map, 0, CLEF_ERR_QUANT_CONFIG, "quant_map"},
    {"unknown quant_method", "fp8", quant_method_unknown, 0, CLEF_ERR_QUANT_CONFIG, "gptq"},
    {"FP8 scheme not per-channel", "fp8", fp8_wrong_strategy, 0, CLEF_ERR_QUANT_CONFIG, "strategy"},
    {"complete.json size mismatch", "bf16-single", manifest_size, 0, CLEF_ERR_MANIFEST_SIZE, "config.json"},
    {"complete.json hash mismatch (--verify)", "bf16-single", manifest_hash, 1, CLEF_ERR_MANIFEST_HASH, "model.safetensors"},
    {"complete.json lists a missing file", "bf16-single", manifest_missing_file, 0, CLEF_ERR_MANIFEST_FILE, "generation_config.json"},
    {"complete.json not JSON", "bf16-single", manifest_not_json, 0, CLEF_ERR_MANIFEST_JSON, "complete.json"},
    {"complete.json path escapes", "bf16-single", manifest_escapes, 0, CLEF_ERR_SHARD_PATH, "../config.json"},
    {"layer_types wrong length", "bf16-sharded", layer_types_length, 0, CLEF_ERR_CONFIG_INVALID, "layer_types"},
    {"layer_types unknown value", "bf16-sharded", layer_types_value, 0, CLEF_ERR_CONFIG_INVALID, "sliding_attention"},
    {"heads not dividing", "bf16-sharded", heads_not_dividing, 0, CLEF_ERR_CONFIG_INVALID, "num_key_value_heads"},
    {"config field of wrong type", "bf16-sharded", config_field_type, 0, CLEF_ERR_CONFIG_INVALID, "text_config.hidden_size"},
    {"mrope_section vs rotary dims", "bf16-sharded", mrope_mismatch, 0, CLEF_ERR_CONFIG_INVALID, "mrope_section"},
    {"config.json not JSON", "bf16-sharded", config_not_json, 0, CLEF_ERR_CONFIG_JSON, "config.json"},
    {"config.json missing", "bf16-sharded", config_missing, 0, CLEF_ERR_FILE_MISSING, "config.json"},
    {"joint_head_config missing field", "bf16-sharded", head_config_missing_field, 0, CLEF_ERR_CONFIG_INVALID, "feedforward"},
    {"joint_head_config unknown field", "bf16-sharded", head_config_unknown_field, 0, CLEF_ERR_CONFIG_INVALID, "widht"},
    {"head hidden_size vs text", "bf16-sharded", head_hidden_mismatch, 0, CLEF_ERR_CONFIG_INVALID, "joint_head_config.json"},
    {"joint_head.safetensors missing", "bf16-sharded", head_weights_missing, 0, CLEF_ERR_FILE_MISSING, "joint_head.safetensors"},
};

static void run_case(const damage_case *c) {
    scratch s = {{0}, {0}};
    int setup = scratch_copy(&s, c->fixture);
    CHECK_MSG(setup == 0, "%s: cannot copy fixture %s", c->name, c->fixture);
    if (setup == 0) {
        /* The intact copy opens: the damage below is what makes it fail. */
        clef_release *rel = NULL;
        clef_release_opts opts = clef_release_default_opts();
        opts.verify_hashes = c->verify;
        CHECK_MSG(clef_release_open(s.rel, &opts, &rel) == CLEF_OK, "%s: intact copy refused: %s",
                  c->name, clef_last_error());
        clef_release_free(rel);
        rel = NULL;
        int damaged = c->damage(&s);
        CHECK_MSG(damaged == 0, "%s: could not damage the copy", c->name);
        int rc = clef_release_open(s.rel, &opts, &rel);
        const char *msg = clef_last_error();
        CHECK_MSG(rc == c->expected, "%s: got %d (%s), expected %d (%s): %s", c->name, rc,
                  clef_status_str(rc), c->expected, clef_status_str(c->expected), msg);
        CHECK_MSG(rel == NULL, "%s: a refused open must not return a release", c->name);
        CHECK_MSG(strstr(msg, c->must_name) != NULL, "%s: message does not name '%s': %s", c->name,
                  c->must_name, msg);
        printf("%-40s %5d %-42s %.110s\n", c->name, rc, clef_status_str(rc), msg);
        clef_release_free(rel);
    }
    scratch_remove(&s);
}

/* keep_going collects every model-level problem; allow_unknown lets an unknown tensor pass. */
static void check_keep_going_and_allow_unknown(void) {
    scratch s = {{0}, {0}};
    CHECK(scratch_copy(&s, "bf16-sharded") == 0);
    CHECK(tensor_shape_vs_config(&s) == 0);
    clef_release_opts opts = clef_release_default_opts();
    opts.keep_going = 1;
    clef_release *rel = NULL;
    CHECK(clef_release_open(s.rel, &opts, &rel) == CLEF_OK);
    /* gate, up, down of 4 layers */
    CHECK_EQ_INT(clef_release_problem_count(rel), 12);
    for (size_t i = 0; i < clef_release_problem_count(rel); i++)
        CHECK_EQ_INT(clef_release_problem_at(rel, i)->status, CLEF_ERR_TENSOR_SHAPE);
    clef_release_free(rel);
    scratch_remove(&s);

    CHECK(scratch_copy(&s, "bf16-sharded") == 0);
    CHECK(tensor_unexpected(&s) == 0);
    opts = clef_release_default_opts();
    opts.allow_unknown_tensors = 1;
    rel = NULL;
    CHECK_MSG(clef_release_open(s.rel, &opts, &rel) == CLEF_OK, "%s", clef_last_error());
    clef_release_summary sum;
    clef_release_get_summary(rel, &sum);
    CHECK_EQ_INT(sum.n_unknown, 1);
    clef_release_free(rel);
    scratch_remove(&s);
}

int main(void) {
    size_t n = sizeof cases / sizeof cases[0];
    printf("%-40s %5s %-42s %s\n", "damage", "code", "status", "message");
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i]);
    printf("%zu damaged variants\n", n);
    CHECK(n >= 25);
    check_keep_going_and_allow_unknown();
    return test_summary();
}
