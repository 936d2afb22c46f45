/*
 * test_json_render.c — render() against Python's json.dumps on generated JSON texts.
 *
 * Reads a case file written by scripts/encode/gen_render_cases.py (default: the committed
 * sample tests/json/fixtures/render_cases.txt; pass another path to check a larger
 * generated set, as scripts/encode/check_render.sh does). For each JSON text the file holds
 * Python's json.dumps(json.loads(text), ensure_ascii=False, separators=(",",":")) with and
 * without sort_keys, or ERROR when json.loads refuses the text; our parse + render must give
 * the same bytes, or fail where Python fails. Non-finite numbers are rendered with
 * allow_nonfinite here because Python writes them (NaN, Infinity); requests refuse them.
 */
#include "clef.h"
#include "core/io.h"
#include "json/json.h"
#include "json/render.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static int mismatches_shown;

static void show_mismatch(size_t index, const char *what, const char *text, size_t text_len,
                          const char *got, size_t got_len, const char *want, size_t want_len) {
    if (mismatches_shown++ >= 10)
        return;
    fprintf(stderr, "case %zu (%s):\n  text: %.*s\n  got:  %.*s\n  want: %.*s\n", index, what,
            (int)(text_len > 300 ? 300 : text_len), text, (int)(got_len > 300 ? 300 : got_len),
            got ? got : "(error)", (int)(want_len > 300 ? 300 : want_len), want ? want : "(error)");
}

/* Render v with the given key order; returns a malloc'd text or NULL on failure. */
static char *render_with(const json_value *v, int sort_keys, size_t *len) {
    json_render_opts opts = {.sort_keys = sort_keys, .allow_nonfinite = 1};
    clef_strbuf out = {0};
    if (json_render(v, &opts, &out) != CLEF_OK) {
        clef_strbuf_free(&out);
        return NULL;
    }
    return clef_strbuf_take(&out, len);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/json/fixtures/render_cases.txt";
    char *data = NULL;
    size_t size = 0;
    int status = clef_read_file(path, (size_t)1 << 31, &data, &size);
    CHECK_MSG(status == CLEF_OK, "cannot read %s: %s", path, clef_last_error());
    if (status != CLEF_OK)
        return test_summary();
    size_t pos = 0, cases = 0, refused = 0, failures = 0;
    while (pos < size) {
        long n_text, n_sorted, n_unsorted;
        /* The header line ends at the first newline; the text itself may start with one. */
        const char *eol = memchr(data + pos, '\n', size - pos);
        /* strtol, not sscanf: glibc's sscanf measures the whole remaining buffer each call */
        char *cursor = data + pos;
        n_text = eol ? strtol(cursor, &cursor, 10) : -1;
        n_sorted = eol ? strtol(cursor, &cursor, 10) : -1;
        n_unsorted = eol ? strtol(cursor, &cursor, 10) : -1;
        if (!eol || cursor != eol || n_text < 0 || n_sorted < -1 || n_unsorted < -1) {
            CHECK_MSG(0, "malformed case header at byte %zu of %s", pos, path);
            break;
        }
        pos = (size_t)(eol - data) + 1;
        const char *text = data + pos;
        pos += (size_t)n_text;
        const char *want_sorted = n_sorted >= 0 ? data + pos : NULL;
        pos += n_sorted >= 0 ? (size_t)n_sorted : 0;
        const char *want_unsorted = n_unsorted >= 0 ? data + pos : NULL;
        pos += n_unsorted >= 0 ? (size_t)n_unsorted : 0;
        pos += 1; /* the newline closing the case */
        if (pos > size) {
            CHECK_MSG(0, "truncated case %zu in %s", cases, path);
            break;
        }

        json_parse_opts popts = {.allow_nonfinite = 1, .max_depth = 0};
        json_doc *doc = NULL;
        char *got_sorted = NULL, *got_unsorted = NULL;
        size_t got_sorted_len = 0, got_unsorted_len = 0;
        if (json_parse(text, (size_t)n_text, &popts, &doc, NULL) == 0) {
            got_sorted = render_with(json_doc_root(doc), 1, &got_sorted_len);
            got_unsorted = render_with(json_doc_root(doc), 0, &got_unsorted_len);
        }
        int ok;
        if (!want_sorted) {
            refused++;
            ok = got_sorted == NULL;
            if (!ok)
                show_mismatch(cases, "Python refuses", text, (size_t)n_text, got_sorted,
                              got_sorted_len, NULL, 0);
        } else {
            int sorted_ok = got_sorted && got_sorted_len == (size_t)n_sorted &&
                            memcmp(got_sorted, want_sorted, got_sorted_len) == 0;
            int unsorted_ok = got_unsorted && got_unsorted_len == (size_t)n_unsorted &&
                              memcmp(got_unsorted, want_unsorted, got_unsorted_len) == 0;
            if (!sorted_ok)
                show_mismatch(cases, "sort_keys=True", text, (size_t)n_text, got_sorted,
                              got_sorted_len, want_sorted, (size_t)n_sorted);
            if (!unsorted_ok)
                show_mismatch(cases, "sort_keys=False", text, (size_t)n_text, got_unsorted,
                              got_unsorted_len, want_unsorted, (size_t)n_unsorted);
            ok = sorted_ok && unsorted_ok;
        }
        failures += !ok;
        free(got_sorted);
        free(got_unsorted);
        json_doc_free(doc);
        cases++;
    }
    printf("render: %zu cases (%zu refused by Python), %zu differ from Python\n", cases, refused,
           failures);
    CHECK(cases > 0);
    CHECK_EQ_INT(failures, 0);
    free(data);
    return test_summary();
}
