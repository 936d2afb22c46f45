/*
 * damage_cases.c — the damaged-release table shared by test_release_damaged (each variant
 * refused with its own status and a message naming the file) and test_inspect_run_agree
 * (whatever clef_model_load refuses, the checks of `clef inspect --verify` refuse): one
 * function per kind of damage, one row per variant.
 */
#include "damage_cases.h"

#include "clef_release.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where a tensor's bytes are in the copy, found through the reader on the intact copy. */
int locate(const scratch *s, const char *engine_name, char *file, size_t cap, uint64_t *offset) {
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

int write_u16_at(const scratch *s, const char *engine, uint16_t v) {
    char file[256];
    uint64_t off;
    if (locate(s, engine, file, sizeof file, &off))
        return -1;
    unsigned char b[2] = {(unsigned char)(v & 0xff), (unsigned char)(v >> 8)};
    return file_write_at(s, file, off, b, 2);
}

int write_u32_at(const scratch *s, const char *engine, uint32_t v) {
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
int tensor_unexpected(scratch *s) {
    /* With tied embeddings the model has no lm_head.weight: the file's one is unknown. */
    return file_replace(s, "config.json", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true", 1);
}
int tensor_shape_vs_config(scratch *s) {
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

/* ---- every file the engine reads: FIFOs, directories, links out, links to other bytes ---- */

#define DEMO "demo/clef-demo" /* the one release with tokenizer files */
#define OTHER_TEXT "ridiculous: not JSON at all"

static int fifo_config(scratch *s) { return file_make_fifo(s, "config.json"); }
static int fifo_head_config(scratch *s) { return file_make_fifo(s, "joint_head_config.json"); }
static int fifo_index(scratch *s) { return file_make_fifo(s, "model.safetensors.index.json"); }
static int fifo_shard(scratch *s) { return file_make_fifo(s, SHARD6); }
static int fifo_head_weights(scratch *s) { return file_make_fifo(s, "joint_head.safetensors"); }
static int fifo_manifest(scratch *s) { return file_make_fifo(s, "complete.json"); }
static int fifo_listed(scratch *s) { return file_make_fifo(s, "generation_config.json"); }
static int fifo_single(scratch *s) { return file_make_fifo(s, "model.safetensors") || file_remove(s, "complete.json"); }
static int fifo_tokenizer(scratch *s) { return file_make_fifo(s, "tokenizer.json"); }
static int fifo_tokenizer_config(scratch *s) { return file_make_fifo(s, "tokenizer_config.json"); }
static int dir_head_config(scratch *s) { return file_make_dir(s, "joint_head_config.json"); }
static int dir_tokenizer(scratch *s) { return file_make_dir(s, "tokenizer.json"); }
static int out_config(scratch *s) { return file_link_out(s, "config.json"); }
static int out_head_config(scratch *s) { return file_link_out(s, "joint_head_config.json"); }
static int out_index(scratch *s) { return file_link_out(s, "model.safetensors.index.json"); }
static int out_head_weights(scratch *s) { return file_link_out(s, "joint_head.safetensors"); }
static int out_manifest(scratch *s) { return file_link_out(s, "complete.json"); }
static int out_listed(scratch *s) { return file_link_out(s, "generation_config.json"); }
static int out_single(scratch *s) { return file_link_out(s, "model.safetensors") || file_remove(s, "complete.json"); }
static int out_tokenizer(scratch *s) { return file_link_out(s, "tokenizer.json"); }
static int out_tokenizer_config(scratch *s) { return file_link_out(s, "tokenizer_config.json"); }
static int other_config(scratch *s) { return file_link_to_text(s, "config.json", OTHER_TEXT); }
static int other_tokenizer(scratch *s) { return file_link_to_text(s, "tokenizer.json", OTHER_TEXT); }
static int dangling_tokenizer(scratch *s) { return file_link_dangling(s, "tokenizer.json"); }
static int tokenizer_missing(scratch *s) { return file_remove(s, "tokenizer.json"); }
static int tokenizer_garbage(scratch *s) { return file_write(s, "tokenizer.json", "[\"not\", \"a tokenizer\"]"); }
static int tokenizer_not_json(scratch *s) { return file_write(s, "tokenizer.json", "\x7f" "ELF garbage"); }
static int tokenizer_config_not_json(scratch *s) { return file_write(s, "tokenizer_config.json", "{\"added_tokens_decoder\": {"); }
static int config_bom(scratch *s) { return file_replace(s, "config.json", "{", "\xEF\xBB\xBF{", 0); }
static int weight_nan(scratch *s) { return write_u16_at(s, "text.norm.weight", 0x7fc0); }
static int weight_inf_head(scratch *s) { return write_u16_at(s, "head.residual_gate", 0x7f80); }

const damage_case damage_cases[] = {
    {"truncated shard", "bf16-sharded", truncated_shard, 0, CLEF_ERR_ST_TRUNCATED, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"header length past EOF", "bf16-sharded", header_len_past_eof, 0, CLEF_ERR_ST_HEADER_SIZE, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"absurd header length", "bf16-sharded", header_len_absurd, 0, CLEF_ERR_ST_HEADER_SIZE, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"file shorter than 8 bytes", "bf16-sharded", file_too_short, 0, CLEF_ERR_ST_TRUNCATED, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"header not JSON", "bf16-sharded", header_not_json, 0, CLEF_ERR_ST_HEADER_JSON, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"header not an object", "bf16-sharded", header_not_object, 0, CLEF_ERR_ST_HEADER_SCHEMA, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"header entry not an object", "bf16-sharded", header_tensor_not_object, 0, CLEF_ERR_ST_HEADER_SCHEMA, "residual_gate", DAMAGE_AT_OPEN, NULL},
    {"data_offsets of wrong type", "bf16-sharded", offsets_bad_type, 0, CLEF_ERR_ST_HEADER_SCHEMA, NORM, DAMAGE_AT_OPEN, NULL},
    {"overlapping offsets", "bf16-sharded", offsets_overlap, 0, CLEF_ERR_ST_OFFSETS_OVERLAP, NORM, DAMAGE_AT_OPEN, NULL},
    {"offsets out of range", "bf16-sharded", offsets_out_of_range, 0, CLEF_ERR_ST_OFFSETS_RANGE, NORM, DAMAGE_AT_OPEN, NULL},
    {"offsets begin > end", "bf16-sharded", offsets_begin_after_end, 0, CLEF_ERR_ST_OFFSETS_RANGE, NORM, DAMAGE_AT_OPEN, NULL},
    {"offset past 2^63", "bf16-sharded", offsets_too_big, 0, CLEF_ERR_ST_OFFSETS_RANGE, NORM, DAMAGE_AT_OPEN, NULL},
    {"size/shape mismatch", "bf16-sharded", size_shape_mismatch, 0, CLEF_ERR_ST_SIZE_MISMATCH, NORM, DAMAGE_AT_OPEN, NULL},
    {"unknown dtype", "bf16-sharded", unknown_dtype, 0, CLEF_ERR_ST_UNKNOWN_DTYPE, NORM, DAMAGE_AT_OPEN, NULL},
    {"bytes after the last tensor", "bf16-sharded", trailing_bytes, 0, CLEF_ERR_ST_OFFSETS_RANGE, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"duplicate tensor", "bf16-single", duplicate_tensor, 0, CLEF_ERR_ST_DUPLICATE_TENSOR, "language_model.norm.weight", DAMAGE_AT_OPEN, NULL},
    {"tensor listed twice in one header", "bf16-sharded", tensor_twice_in_header, 0, CLEF_ERR_ST_DUPLICATE_TENSOR, SHARD6 "': tensor '" NORM "'", DAMAGE_AT_OPEN, NULL},
    {"field repeated in a header entry", "bf16-sharded", field_twice_in_entry, 0, CLEF_ERR_ST_HEADER_SCHEMA, "duplicate key \"dtype\"", DAMAGE_AT_OPEN, NULL},
    {"missing shard", "bf16-sharded", missing_shard, 0, CLEF_ERR_SHARD_MISSING, SHARD2, DAMAGE_AT_OPEN, NULL},
    {"shard path with ..", "bf16-sharded", shard_path_dotdot, 0, CLEF_ERR_SHARD_PATH, "../" SHARD6, DAMAGE_AT_OPEN, NULL},
    {"absolute shard path", "bf16-sharded", shard_path_absolute, 0, CLEF_ERR_SHARD_PATH, "/etc/" SHARD6, DAMAGE_AT_OPEN, NULL},
    {"symlink out of the directory", "bf16-sharded", shard_symlink_out, 0, CLEF_ERR_SHARD_PATH, SHARD6, DAMAGE_AT_OPEN, NULL},
    {"index total_size wrong", "bf16-sharded", index_total_size, 0, CLEF_ERR_INDEX_TOTAL_SIZE, "total_size", DAMAGE_AT_OPEN, NULL},
    {"index lists tensor absent from shard", "bf16-sharded", index_lists_absent, 0, CLEF_ERR_INDEX_TENSOR_ABSENT, "model.language_model.ghost.weight", DAMAGE_AT_OPEN, NULL},
    {"shard holds unlisted tensor", "bf16-sharded", index_misses_tensor, 0, CLEF_ERR_INDEX_UNLISTED, NORM, DAMAGE_AT_OPEN, NULL},
    {"index not JSON", "bf16-sharded", index_not_json, 0, CLEF_ERR_INDEX_JSON, "model.safetensors.index.json", DAMAGE_AT_OPEN, NULL},
    {"missing tensor", "bf16-single", tensor_missing, 0, CLEF_ERR_TENSOR_MISSING, "text.norm.weight", DAMAGE_AT_OPEN, NULL},
    {"unexpected tensor", "bf16-sharded", tensor_unexpected, 0, CLEF_ERR_TENSOR_UNEXPECTED, "lm_head.weight", DAMAGE_AT_OPEN, NULL},
    {"tensor shape vs config", "bf16-sharded", tensor_shape_vs_config, 0, CLEF_ERR_TENSOR_SHAPE, "mlp.", DAMAGE_AT_OPEN, NULL},
    {"head tensor shape", "bf16-sharded", head_tensor_shape, 0, CLEF_ERR_TENSOR_SHAPE, "residual_gate", DAMAGE_AT_OPEN, NULL},
    {"wrong dtype for role", "bf16-sharded", tensor_dtype_for_role, 0, CLEF_ERR_TENSOR_DTYPE, NORM, DAMAGE_AT_OPEN, NULL},
    {"NaN scale (FP8)", "fp8", scale_nan, 0, CLEF_ERR_SCALE_INVALID, "up_proj.weight_scale", DAMAGE_AT_OPEN, NULL},
    {"zero scale (FP8)", "fp8", scale_zero, 0, CLEF_ERR_SCALE_INVALID, "up_proj.weight_scale", DAMAGE_AT_OPEN, NULL},
    {"negative scale (FP8)", "fp8", scale_negative, 0, CLEF_ERR_SCALE_INVALID, "up_proj.weight_scale", DAMAGE_AT_OPEN, NULL},
    {"Inf scale (INT8)", "int8", scale_inf, 0, CLEF_ERR_SCALE_INVALID, "in_proj_qkv.weight_scale", DAMAGE_AT_OPEN, NULL},
    {"zero nested_absmax (NF4)", "nf4", nf4_nested_absmax_zero, 0, CLEF_ERR_SCALE_INVALID, "nested_absmax", DAMAGE_AT_OPEN, NULL},
    {"NF4 quant_map not NF4", "nf4", nf4_quant_map, 0, CLEF_ERR_QUANT_CONFIG, "quant_map", DAMAGE_AT_OPEN, NULL},
    {"unknown quant_method", "fp8", quant_method_unknown, 0, CLEF_ERR_QUANT_CONFIG, "gptq", DAMAGE_AT_OPEN, NULL},
    {"FP8 scheme not per-channel", "fp8", fp8_wrong_strategy, 0, CLEF_ERR_QUANT_CONFIG, "strategy", DAMAGE_AT_OPEN, NULL},
    {"complete.json size mismatch", "bf16-single", manifest_size, 0, CLEF_ERR_MANIFEST_SIZE, "config.json", DAMAGE_AT_OPEN, NULL},
    {"complete.json hash mismatch (--verify)", "bf16-single", manifest_hash, 1, CLEF_ERR_MANIFEST_HASH, "model.safetensors", DAMAGE_AT_OPEN, NULL},
    {"complete.json lists a missing file", "bf16-single", manifest_missing_file, 0, CLEF_ERR_MANIFEST_FILE, "generation_config.json", DAMAGE_AT_OPEN, NULL},
    {"complete.json not JSON", "bf16-single", manifest_not_json, 0, CLEF_ERR_MANIFEST_JSON, "complete.json", DAMAGE_AT_OPEN, NULL},
    {"complete.json path escapes", "bf16-single", manifest_escapes, 0, CLEF_ERR_SHARD_PATH, "../config.json", DAMAGE_AT_OPEN, NULL},
    {"layer_types wrong length", "bf16-sharded", layer_types_length, 0, CLEF_ERR_CONFIG_INVALID, "layer_types", DAMAGE_AT_OPEN, NULL},
    {"layer_types unknown value", "bf16-sharded", layer_types_value, 0, CLEF_ERR_CONFIG_INVALID, "sliding_attention", DAMAGE_AT_OPEN, NULL},
    {"heads not dividing", "bf16-sharded", heads_not_dividing, 0, CLEF_ERR_CONFIG_INVALID, "num_key_value_heads", DAMAGE_AT_OPEN, NULL},
    {"config field of wrong type", "bf16-sharded", config_field_type, 0, CLEF_ERR_CONFIG_INVALID, "text_config.hidden_size", DAMAGE_AT_OPEN, NULL},
    {"mrope_section vs rotary dims", "bf16-sharded", mrope_mismatch, 0, CLEF_ERR_CONFIG_INVALID, "mrope_section", DAMAGE_AT_OPEN, NULL},
    {"config.json not JSON", "bf16-sharded", config_not_json, 0, CLEF_ERR_CONFIG_JSON, "config.json", DAMAGE_AT_OPEN, NULL},
    {"config.json missing", "bf16-sharded", config_missing, 0, CLEF_ERR_FILE_MISSING, "config.json", DAMAGE_AT_OPEN, NULL},
    {"joint_head_config missing field", "bf16-sharded", head_config_missing_field, 0, CLEF_ERR_CONFIG_INVALID, "feedforward", DAMAGE_AT_OPEN, NULL},
    {"joint_head_config unknown field", "bf16-sharded", head_config_unknown_field, 0, CLEF_ERR_CONFIG_INVALID, "widht", DAMAGE_AT_OPEN, NULL},
    {"head hidden_size vs text", "bf16-sharded", head_hidden_mismatch, 0, CLEF_ERR_CONFIG_INVALID, "joint_head_config.json", DAMAGE_AT_OPEN, NULL},
    {"joint_head.safetensors missing", "bf16-sharded", head_weights_missing, 0, CLEF_ERR_FILE_MISSING, "joint_head.safetensors", DAMAGE_AT_OPEN, NULL},
    /* issue 9: every file the engine reads, held to the same open rules */
    {"FIFO config.json", "bf16-sharded", fifo_config, 0, CLEF_ERR_NOT_REGULAR, "config.json' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO joint_head_config.json", "bf16-sharded", fifo_head_config, 0, CLEF_ERR_NOT_REGULAR, "joint_head_config.json' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO shard index", "bf16-sharded", fifo_index, 0, CLEF_ERR_NOT_REGULAR, "model.safetensors.index.json' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO shard", "bf16-sharded", fifo_shard, 0, CLEF_ERR_NOT_REGULAR, SHARD6 "' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO joint_head.safetensors", "bf16-sharded", fifo_head_weights, 0, CLEF_ERR_NOT_REGULAR, "joint_head.safetensors' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO model.safetensors", "bf16-single", fifo_single, 0, CLEF_ERR_NOT_REGULAR, "model.safetensors' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO complete.json", "bf16-single", fifo_manifest, 0, CLEF_ERR_NOT_REGULAR, "complete.json' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO file listed in complete.json", "bf16-single", fifo_listed, 0, CLEF_ERR_MANIFEST_FILE, "generation_config.json' is a FIFO", DAMAGE_AT_OPEN, NULL},
    {"FIFO tokenizer.json", DEMO, fifo_tokenizer, 0, CLEF_ERR_NOT_REGULAR, "tokenizer.json' is a FIFO", DAMAGE_AT_TOKENIZER, NULL},
    {"FIFO tokenizer_config.json", DEMO, fifo_tokenizer_config, 0, CLEF_ERR_NOT_REGULAR, "tokenizer_config.json' is a FIFO", DAMAGE_AT_TOKENIZER, NULL},
    {"directory joint_head_config.json", "bf16-sharded", dir_head_config, 0, CLEF_ERR_NOT_REGULAR, "joint_head_config.json' is a directory", DAMAGE_AT_OPEN, NULL},
    {"directory tokenizer.json", DEMO, dir_tokenizer, 0, CLEF_ERR_NOT_REGULAR, "tokenizer.json' is a directory", DAMAGE_AT_TOKENIZER, NULL},
    {"config.json linked out", "bf16-sharded", out_config, 0, CLEF_ERR_SHARD_PATH, "file 'config.json' of release", DAMAGE_AT_OPEN, NULL},
    {"joint_head_config.json linked out", "bf16-sharded", out_head_config, 0, CLEF_ERR_SHARD_PATH, "file 'joint_head_config.json' of release", DAMAGE_AT_OPEN, NULL},
    {"shard index linked out", "bf16-sharded", out_index, 0, CLEF_ERR_SHARD_PATH, "file 'model.safetensors.index.json' of release", DAMAGE_AT_OPEN, NULL},
    {"joint_head.safetensors linked out", "bf16-sharded", out_head_weights, 0, CLEF_ERR_SHARD_PATH, "file 'joint_head.safetensors' of release", DAMAGE_AT_OPEN, NULL},
    {"model.safetensors linked out", "bf16-single", out_single, 0, CLEF_ERR_SHARD_PATH, "file 'model.safetensors' of release", DAMAGE_AT_OPEN, NULL},
    {"complete.json linked out", "bf16-single", out_manifest, 0, CLEF_ERR_SHARD_PATH, "file 'complete.json' of release", DAMAGE_AT_OPEN, NULL},
    {"file listed in complete.json linked out", "bf16-single", out_listed, 0, CLEF_ERR_SHARD_PATH, "names 'generation_config.json'", DAMAGE_AT_OPEN, NULL},
    {"tokenizer.json linked out", DEMO, out_tokenizer, 0, CLEF_ERR_SHARD_PATH, "file 'tokenizer.json' of release", DAMAGE_AT_TOKENIZER, NULL},
    {"tokenizer_config.json linked out", DEMO, out_tokenizer_config, 0, CLEF_ERR_SHARD_PATH, "file 'tokenizer_config.json' of release", DAMAGE_AT_TOKENIZER, NULL},
    {"config.json linked to another file", "bf16-sharded", other_config, 0, CLEF_ERR_SHARD_PATH, "file 'config.json' of release", DAMAGE_AT_OPEN, "unexpected character"},
    {"tokenizer.json linked to another file", DEMO, other_tokenizer, 0, CLEF_ERR_SHARD_PATH, "file 'tokenizer.json' of release", DAMAGE_AT_TOKENIZER, "unexpected character"},
    {"tokenizer.json a dangling link", DEMO, dangling_tokenizer, 0, CLEF_ERR_FILE_MISSING, "tokenizer.json' of release", DAMAGE_AT_TOKENIZER, NULL},
    {"tokenizer.json missing", DEMO, tokenizer_missing, 0, CLEF_ERR_FILE_MISSING, "tokenizer.json", DAMAGE_AT_TOKENIZER, NULL},
    {"tokenizer.json not a tokenizer", DEMO, tokenizer_garbage, 0, CLEF_ERR_TOKENIZER_FORMAT, "tokenizer.json': must be a JSON object", DAMAGE_AT_TOKENIZER, NULL},
    {"tokenizer.json not JSON", DEMO, tokenizer_not_json, 0, CLEF_ERR_TOKENIZER_FORMAT, "tokenizer.json': not valid JSON at line 1 column 1 (byte 0)", DAMAGE_AT_TOKENIZER, NULL},
    {"tokenizer_config.json not JSON", DEMO, tokenizer_config_not_json, 0, CLEF_ERR_TOKENIZER_FORMAT, "tokenizer_config.json", DAMAGE_AT_TOKENIZER, NULL},
    {"config.json starts with a BOM", "bf16-sharded", config_bom, 0, CLEF_ERR_CONFIG_JSON, "byte order mark", DAMAGE_AT_OPEN, NULL},
    {"NaN in a weight", "bf16-sharded", weight_nan, 0, CLEF_ERR_TENSOR_VALUES, "weight '" NORM "' holds NaN", DAMAGE_AT_VALUES, NULL},
    {"Inf in a head weight", "bf16-sharded", weight_inf_head, 0, CLEF_ERR_TENSOR_VALUES, "weight 'residual_gate' holds Inf", DAMAGE_AT_VALUES, NULL},
};
const size_t n_damage_cases = sizeof damage_cases / sizeof damage_cases[0];

