/*
 * release_files.h — the files of a quantized release beside its tensors: config.json (with
 * the precision's quantization_config, or unchanged for INT8 ConvRot), the shard index, the
 * files copied from the source (tokenizer, joint head, processor configs, ...) and
 * complete.json (sizes and SHA-256 of every file), all written as the producers write them
 * (docs/quant.md, "Making quantized releases").
 */
#ifndef CLEF_QUANTIZE_RELEASE_FILES_H
#define CLEF_QUANTIZE_RELEASE_FILES_H

#include "quantize/quantize_plan.h"

/* Write a whole file in dir (created, never replaced) and flush it. */
int q_write_file(const char *dir, const char *name, const char *data, size_t len);

/* config.json for the plan's target, from the source's. */
int q_write_config(const char *src_dir, const char *dst_dir, const q_plan *plan);

/* model.safetensors.index.json (plan->indexed only). */
int q_write_index(const char *dst_dir, const q_plan *plan);

/* Copy every regular file of src_dir that is not a model shard, index, config.json or
 * complete.json (nor a hidden file) into dst_dir. */
int q_copy_other_files(const clef_release *rel, const char *dst_dir);

/* complete.json listing every file of dst_dir, fields taken from the source's complete.json
 * when it has one. */
int q_write_complete(const char *src_dir, const char *dst_dir, const q_plan *plan);

/* Remove the files of dir (written by us: regular files only) and dir itself. */
void q_remove_dir(const char *dir);

#endif /* CLEF_QUANTIZE_RELEASE_FILES_H */
