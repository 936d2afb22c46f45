/*
 * st_source.h — a test-only tensor source for qwen35_load over a single-file release
 * (config.json + model.safetensors, as transformers' save_pretrained writes it).
 *
 * TEMPORARY: the release module (src/release, clef_release_open) is the real reader; once it
 * lands in main, the backbone tests switch to it and this file goes away. It checks only
 * what the fixtures need (it is not a validator).
 */
#ifndef CLEF_TESTS_BACKBONE_ST_SOURCE_H
#define CLEF_TESTS_BACKBONE_ST_SOURCE_H

#include "model/qwen35.h"

typedef struct st_source st_source;

/* Open dir/config.json and dir/model.safetensors; NULL on failure (message printed). */
st_source *st_source_open(const char *dir);
void st_source_free(st_source *s);
const clef_text_config *st_source_config(const st_source *s);
qwen35_tensor_source st_source_as_tensor_source(st_source *s);

#endif
