/*
 * json_compact.h — render a parsed JSON value back to compact text in document key order
 * (the form the fixtures store requests and answers in), for the tests that send a fixture's
 * request to the engine or compare an answer with the oracle's. Header-only: one static
 * function, one copy per test program.
 */
#ifndef CLEF_TESTS_JSON_COMPACT_H
#define CLEF_TESTS_JSON_COMPACT_H

#include "clef.h"
#include "core/strbuf.h"
#include "json/json.h"
#include "json/render.h"

/* malloc'd text of v (free()), or NULL if it cannot be rendered. */
static char *render_compact(const json_value *v) {
    clef_strbuf b = {0};
    json_render_opts o = {.sort_keys = 0};
    if (json_render(v, &o, &b) != CLEF_OK) {
        clef_strbuf_free(&b);
        return NULL;
    }
    return clef_strbuf_take(&b, NULL);
}

#endif /* CLEF_TESTS_JSON_COMPACT_H */
