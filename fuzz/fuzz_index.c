/*
 * fuzz_index.c — libFuzzer target: the release's small JSON files on arbitrary bytes. Every
 * input goes through each parser in turn: model.safetensors.index.json, config.json (then
 * joint_head_config.json against that config, or against an empty one) and complete.json.
 * Any input must give CLEF_OK or a refusal status — never a crash, hang, leak or sanitizer
 * report; an accepted config must satisfy the invariants the rest of the engine relies on.
 * Corpus: fuzz/corpus/index/ (the fixture releases' real files + edge cases).
 */
#include "core/error.h"
#include "release/config.h"
#include "release/index.h"
#include "release/manifest.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    clef_index idx;
    if (clef_index_parse(text, size, "fuzz.index.json", &idx) == CLEF_OK) {
        for (size_t i = 0; i + 1 < idx.count; i++)
            CLEF_ASSERT(strcmp(idx.entries[i].tensor, idx.entries[i + 1].tensor) < 0);
        for (size_t i = 0; i < idx.count; i++)
            CLEF_ASSERT(clef_index_find(&idx, idx.entries[i].tensor) == &idx.entries[i]);
        clef_index_free(&idx);
    }

    clef_release_config cfg;
    if (clef_config_parse(text, size, "fuzz.config.json", &cfg) == CLEF_OK) {
        const clef_text_config *t = &cfg.text;
        CLEF_ASSERT(t->num_attention_heads % t->num_key_value_heads == 0);
        CLEF_ASSERT(t->linear_num_value_heads % t->linear_num_key_heads == 0);
        CLEF_ASSERT(t->layer_types != NULL && t->num_hidden_layers > 0);
        for (int64_t i = 0; i < t->num_hidden_layers; i++)
            CLEF_ASSERT(t->layer_types[i] == CLEF_LAYER_LINEAR_ATTENTION ||
                        t->layer_types[i] == CLEF_LAYER_FULL_ATTENTION);
        if (cfg.vision.present)
            CLEF_ASSERT(cfg.vision.hidden_size % cfg.vision.num_heads == 0);
    } else {
        memset(&cfg, 0, sizeof cfg);
    }
    if (clef_head_config_parse(text, size, "fuzz.joint_head_config.json", &cfg) == CLEF_OK)
        CLEF_ASSERT(cfg.head.width % cfg.head.heads == 0);
    clef_config_free(&cfg);

    clef_manifest m;
    if (clef_manifest_parse(text, size, "fuzz.complete.json", &m) == CLEF_OK)
        clef_manifest_free(&m);
    return 0;
}
