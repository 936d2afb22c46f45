/*
 * json_file.h — parse one of the release's small JSON files (config.json,
 * joint_head_config.json, model.safetensors.index.json, complete.json) into a document whose
 * root is an object, with the file's own refusal status: one spelling of "file 'x' is not
 * valid JSON: <why> at line L column C" for every such file.
 */
#ifndef CLEF_RELEASE_JSON_FILE_H
#define CLEF_RELEASE_JSON_FILE_H

#include "json/json.h"

#include <stddef.h>

/* On success *doc owns a document whose root is an object. A syntax error or a root of
 * another type returns bad_status (e.g. CLEF_ERR_INDEX_JSON) naming file; out of memory
 * returns CLEF_ERR_OUT_OF_MEMORY. Python semantics for duplicate keys (last wins). */
int clef_release_json_parse(const char *text, size_t len, const char *file, int bad_status,
                            json_doc **doc);

#endif /* CLEF_RELEASE_JSON_FILE_H */
