/*
 * config.h — config.json and joint_head_config.json into plain structs, with invariants.
 *
 * Field names and defaults follow transformers 5.x Qwen3_5Config / Qwen3_5TextConfig /
 * Qwen3_5VisionConfig; the fields that fix a tensor shape are required (a release without
 * them is not a Clef release), the others take transformers' defaults. Invariants checked:
 * every size positive, attention heads divide (Hq % Hkv, Hv % Hk), layer_types has
 * num_hidden_layers entries of "linear_attention" / "full_attention", the rotary part of
 * head_dim is even and matches sum(mrope_section) * 2, vision heads divide its width and its
 * position table is square, vision out_hidden_size == text hidden_size, the head's
 * hidden_size == text hidden_size and its heads divide its width. quantization_config is
 * recognised for the four precisions of formats.md. Failures: CLEF_ERR_CONFIG_JSON (syntax),
 * CLEF_ERR_CONFIG_INVALID (a field), CLEF_ERR_QUANT_CONFIG (quantization metadata).
 */
#ifndef CLEF_RELEASE_CONFIG_H
#define CLEF_RELEASE_CONFIG_H

#include "release/release.h"

#include <stddef.h>

/* Parse config.json text; file names it in messages. On failure cfg is freed and zeroed. */
int clef_config_parse(const char *text, size_t len, const char *file, clef_release_config *cfg);

/* Parse joint_head_config.json text into cfg->head and check it against cfg->text. */
int clef_head_config_parse(const char *text, size_t len, const char *file,
                           clef_release_config *cfg);

void clef_config_free(clef_release_config *cfg); /* frees owned arrays; accepts zeroed */

/* clef_text_rotary_dim is public (clef_release.h). */

#endif /* CLEF_RELEASE_CONFIG_H */
