/*
 * test_json_format.c — named cases of the Python float repr and of the prompt's render(),
 * each with the text Python 3.11 prints for it (repr(x) / json.dumps), so a failure reads
 * as a concrete example. The bulk comparison with Python is test_json_render.
 */
#include "clef.h"
#include "json/json.h"
#include "json/render.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_repr(double x, const char *python_repr) {
    char buf[JSON_DOUBLE_BUF];
    json_format_double(x, buf);
    CHECK_MSG(strcmp(buf, python_repr) == 0, "repr(%.17g): got %s, Python says %s", x, buf,
              python_repr);
}

/* Parse text, render it as the prompt does, compare with want (NULL: must fail). */
static void check_prompt(const char *text, const char *want) {
    json_parse_opts opts = {.allow_nonfinite = 1, .max_depth = 0};
    json_doc *doc = NULL;
    int parsed = json_parse(text, strlen(text), &opts, &doc, NULL);
    clef_strbuf out = {0};
    int status = parsed == 0 ? json_render_prompt(json_doc_root(doc), &out) : -1;
    if (want)
        CHECK_MSG(status == CLEF_OK && out.data && strcmp(out.data, want) == 0,
                  "render(%s): got %s, want %s", text, status == CLEF_OK ? out.data : "(error)", want);
    else
        CHECK_MSG(status != CLEF_OK, "render(%s) should fail, got %s", text, out.data);
    clef_strbuf_free(&out);
    json_doc_free(doc);
}

int main(void) {
    check_repr(1.0, "1.0");
    check_repr(-0.0, "-0.0");
    check_repr(0.0, "0.0");
    check_repr(1e-05, "1e-05");
    check_repr(0.0001, "0.0001");
    check_repr(1e16, "1e+16");
    check_repr(9999999999999998.0, "9999999999999998.0");
    check_repr(1.5e300, "1.5e+300");
    check_repr(5e-324, "5e-324");
    check_repr(0.1 + 0.2, "0.30000000000000004");
    check_repr(1250.0, "1250.0");
    check_repr(1e20, "1e+20");
    check_repr(123456789.125, "123456789.125");
    check_repr(1.7976931348623157e308, "1.7976931348623157e+308");
    check_repr(2.2250738585072014e-308, "2.2250738585072014e-308");
    check_repr(ldexp(1.0, 1023), "8.98846567431158e+307");  /* a lopsided interval */
    check_repr(ldexp(1.0, -1022), "2.2250738585072014e-308");
    check_repr(9007199254740993.0, "9007199254740992.0");

    check_prompt("\"plain \\\"text\\\"\\n\"", "plain \"text\"\n"); /* a string is used as is */
    check_prompt("{\"b\":1,\"a\":[1.0,-0,2.50,1E5]}", "{\"a\":[1.0,0,2.5,100000.0],\"b\":1}");
    check_prompt("9007199254740993", "9007199254740993");             /* 2**53+1 kept exactly */
    check_prompt("{\"\\ud800\\udc00\":1,\"\\uffff\":2}", "{\"\xef\xbf\xbf\":2,\"\xf0\x90\x80\x80\":1}");
    check_prompt("[\"\\u0000\\u001f\\u007f\"]", "[\"\\u0000\\u001f\x7f\"]");
    check_prompt("{\"a\":1,\"a\":2}", "{\"a\":2}");
    check_prompt("NaN", NULL);        /* Python writes NaN; a prompt refuses it */
    check_prompt("[1e400]", NULL);    /* Python reads inf */
    check_prompt("-1e-400", "-0.0");  /* underflow is fine: Python reads -0.0 */
    return test_summary();
}
