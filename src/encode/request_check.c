/*
 * request_check.c — the public input checks of include/clef.h that need no model:
 * clef_request_check (a record validated exactly as clef_model_decide validates it, with the
 * default limits) and clef_json_check (is this text one JSON value). They let a caller refuse
 * a bad record before loading a release.
 */
#include "clef.h"

#include "core/error.h"
#include "encode/request.h"
#include "json/json.h"

int clef_request_check(const char *request_json, size_t len) {
    if (!request_json && len)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_request_check: request_json is NULL");
    clef_request *request = NULL;
    int st = clef_request_parse(request_json ? request_json : "", len, CLEF_REQUEST_RECORD, NULL,
                                NULL, &request, NULL);
    clef_request_free(request);
    return st;
}

int clef_json_check(const char *text, size_t len) {
    if (!text && len)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_json_check: text is NULL");
    json_parse_opts opts = {.max_depth = 64};
    json_doc *doc = NULL;
    json_error err;
    int rc = json_parse(text ? text : "", len, &opts, &doc, &err);
    json_doc_free(doc);
    if (rc == JSON_PARSE_NOMEM)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory parsing JSON");
    if (rc != 0)
        return clef_fail(CLEF_ERR_REQUEST_JSON, "not valid JSON at line %d column %d (byte %zu): %s",
                         err.line, err.column, err.offset, err.msg);
    return CLEF_OK;
}
