/*
 * render_pretty.h — JSON text as Python's `json.dumps(v, indent=N[, sort_keys=True])` writes
 * it: one member or item per line, N spaces per level, ", " never (items end with ","),
 * ": " between key and value, empty containers as {} and [], scalars exactly as json_render
 * writes them (repr floats, integers as written, non-ASCII kept: ensure_ascii=False).
 * The release files clef writes (config.json, the shard index, complete.json) are made
 * this way so that they read like the ones transformers and the release scripts write.
 */
#ifndef CLEF_JSON_RENDER_PRETTY_H
#define CLEF_JSON_RENDER_PRETTY_H

#include "core/strbuf.h"
#include "json/json.h"

/* Append the indented text of v (no trailing newline). Fails as json_render does. */
int json_render_pretty(const json_value *v, int indent, int sort_keys, clef_strbuf *out);

/* The same for a value written at nesting level `level` (its inner lines are indented
 * level + 1 steps: a member value inside a document written by hand). */
int json_render_pretty_level(const json_value *v, int indent, int sort_keys, int level,
                             clef_strbuf *out);

#endif /* CLEF_JSON_RENDER_PRETTY_H */
