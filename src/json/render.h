/*
 * render.h — JSON text exactly as Python writes it.
 *
 * The prompt of a Clef model contains `render(v)`: a string as is, anything else
 * `json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)` of the value
 * Python's `json.loads` made of the same text. Answers are written like Starlette/FastAPI
 * writes responses: the same dumps without sort_keys. Both must be byte-identical to Python,
 * so every rule here is Python's:
 *   - floats (JSON numbers with a fraction or exponent) as `repr(float)`: the shortest digit
 *     string that reads back to the same double, in fixed notation when its decimal exponent
 *     is in [-4, 16), else `d[.ddd]e+XX` / `e-XX` (at least two exponent digits); `1.0`,
 *     `1e-05`, `1e+16`, `-0.0`, `5e-324`;
 *   - integers as written (Python keeps any size), except `-0` which Python reads as 0;
 *     more than JSON_INT_MAX_DIGITS digits is refused, as Python's json.loads refuses it
 *     (ValueError: int string conversion limit);
 *   - non-finite numbers (NaN/Infinity literals, and reals like 1e400 that Python reads as
 *     inf) are refused unless allow_nonfinite, which writes `NaN`, `Infinity`, `-Infinity`;
 *   - strings: `"` and `\` escaped, \n \r \t \b \f as two-character escapes, other bytes
 *     below 0x20 as \u00xx (lowercase hex), everything else (DEL, non-ASCII) raw UTF-8;
 *   - with sort_keys, members ordered by key code point, which for UTF-8 is byte order.
 */
#ifndef CLEF_JSON_RENDER_H
#define CLEF_JSON_RENDER_H

#include "core/strbuf.h"
#include "json/json.h"

#include <stddef.h>

/* Python's default limit on the digits of an int read from text (sys.int_info); the
 * parser already refuses longer integers, render checks again for hand-built trees. */
#define JSON_INT_MAX_DIGITS JSON_PARSE_INT_MAX_DIGITS

/* Longest output of json_format_double: "-" + 17 digits + "." + "e-324" + NUL, rounded up. */
#define JSON_DOUBLE_BUF 32

typedef struct json_render_opts {
    int sort_keys;       /* 1: object members by key code point; 0: document order */
    int allow_nonfinite; /* 1: write NaN / Infinity / -Infinity; 0: refuse them */
} json_render_opts;

/* Append the JSON text of v to out. Fails with CLEF_ERR_REQUEST_INVALID (message names the
 * number) on a non-finite number when not allowed or an integer over the digit limit, and
 * with CLEF_ERR_OUT_OF_MEMORY. On failure out may hold a partial text. */
int json_render(const json_value *v, const json_render_opts *opts, clef_strbuf *out);

/* The prompt's render(v): a string's decoded text as is, anything else json_render with
 * sort_keys and non-finite refused. */
int json_render_prompt(const json_value *v, clef_strbuf *out);

/* Append s[0..n) as a JSON string literal with Python's escapes (quotes included). */
void json_render_string(const char *s, size_t n, clef_strbuf *out);

/* Python repr() of a finite double into out; returns the length. x must be finite. */
size_t json_format_double(double x, char out[JSON_DOUBLE_BUF]);

/* Number of digits of an integer number's text (without the sign). */
size_t json_integer_digits(const json_value *v);

/* 1 if v is a number Python would turn into nan or +-inf (NaN/Infinity literals and reals
 * that overflow a double), else 0. */
int json_number_is_nonfinite(const json_value *v);

#endif /* CLEF_JSON_RENDER_H */
