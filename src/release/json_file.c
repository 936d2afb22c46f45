/*
 * json_file.c — the release's small JSON files (see json_file.h).
 */
#include "release/json_file.h"

#include "core/error.h"

int clef_release_json_parse(const char *text, size_t len, const char *file, int bad_status,
                            json_doc **doc) {
    json_error err;
    json_parse_opts opts = {.max_depth = 64};
    int rc = json_parse(text, len, &opts, doc, &err);
    if (rc == JSON_PARSE_NOMEM)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", file);
    if (rc != 0)
        return clef_fail(bad_status, "file '%s' is not valid JSON: %s at line %d column %d (byte %zu)",
                         file, err.msg, err.line, err.column, err.offset);
    json_type type = json_doc_root(*doc)->type;
    if (type != JSON_OBJECT) {
        json_doc_free(*doc);
        *doc = NULL;
        return clef_fail(bad_status, "file '%s' holds a JSON %s, expected an object", file,
                         json_type_name(type));
    }
    return CLEF_OK;
}
