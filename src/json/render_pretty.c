/*
 * render_pretty.c — Python's json.dumps(indent=N) layout over the scalar rendering of
 * render.c (see render_pretty.h).
 */
#include "json/render_pretty.h"

#include "clef.h"
#include "json/render.h"

#include <stdlib.h>
#include <string.h>

static void newline_indent(clef_strbuf *out, int indent, int level) {
    clef_strbuf_append_char(out, '\n');
    for (int i = 0; i < indent * level; i++)
        clef_strbuf_append_char(out, ' ');
}

/* Members by key, compared as Python compares str: by code point, which is UTF-8 byte order. */
static int compare_members(const void *a, const void *b) {
    const json_member *x = *(const json_member *const *)a, *y = *(const json_member *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c != 0)
        return c;
    return x->key_len < y->key_len ? -1 : x->key_len > y->key_len ? 1 : 0;
}

static int render_level(const json_value *v, int indent, int sort_keys, int level,
                        clef_strbuf *out) {
    if (v->type == JSON_ARRAY) {
        if (v->u.arr.count == 0) {
            clef_strbuf_append_str(out, "[]");
            return CLEF_OK;
        }
        clef_strbuf_append_char(out, '[');
        for (size_t i = 0; i < v->u.arr.count; i++) {
            if (i)
                clef_strbuf_append_char(out, ',');
            newline_indent(out, indent, level + 1);
            int rc = render_level(v->u.arr.items[i], indent, sort_keys, level + 1, out);
            if (rc != CLEF_OK)
                return rc;
        }
        newline_indent(out, indent, level);
        clef_strbuf_append_char(out, ']');
        return CLEF_OK;
    }
    if (v->type == JSON_OBJECT) {
        size_t n = v->u.obj.count;
        if (n == 0) {
            clef_strbuf_append_str(out, "{}");
            return CLEF_OK;
        }
        const json_member **order = malloc(n * sizeof *order);
        if (!order)
            return CLEF_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++)
            order[i] = &v->u.obj.members[i];
        if (sort_keys)
            qsort(order, n, sizeof *order, compare_members);
        clef_strbuf_append_char(out, '{');
        int rc = CLEF_OK;
        for (size_t i = 0; i < n && rc == CLEF_OK; i++) {
            if (i)
                clef_strbuf_append_char(out, ',');
            newline_indent(out, indent, level + 1);
            json_render_string(order[i]->key, order[i]->key_len, out);
            clef_strbuf_append_str(out, ": ");
            rc = render_level(order[i]->value, indent, sort_keys, level + 1, out);
        }
        free(order);
        if (rc != CLEF_OK)
            return rc;
        newline_indent(out, indent, level);
        clef_strbuf_append_char(out, '}');
        return CLEF_OK;
    }
    json_render_opts opts = {.sort_keys = sort_keys, .allow_nonfinite = 0};
    return json_render(v, &opts, out);
}

int json_render_pretty(const json_value *v, int indent, int sort_keys, clef_strbuf *out) {
    return render_level(v, indent, sort_keys, 0, out);
}

int json_render_pretty_level(const json_value *v, int indent, int sort_keys, int level,
                             clef_strbuf *out) {
    return render_level(v, indent, sort_keys, level, out);
}
