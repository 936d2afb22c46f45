/*
 * json.h — the engine's JSON reader: a document tree with Python json.loads semantics.
 *
 * Why our own parser (DESIGN.md allows it when no packaged library fits): `render` must be
 * byte-identical to Python's json.dumps after json.loads, so we need (a) numbers kept as the
 * exact text written (Python keeps integers of any size), (b) object members in document
 * order, (c) duplicate keys resolved as Python does: the LAST value wins, at the position
 * of the FIRST occurrence. jansson refuses integers beyond 64 bits and rejects or reorders
 * duplicates. The same parser reads safetensors headers, indexes and configs.
 *
 * Accepted grammar: RFC 8259 plus, only when json_parse_opts.allow_nonfinite is set,
 * Python's `NaN`, `Infinity`, `-Infinity`. Strings must be valid UTF-8; `\u` escapes must
 * form valid code points (a lone surrogate is refused: it cannot be encoded as UTF-8 for
 * the tokenizer). Integers of more than JSON_PARSE_INT_MAX_DIGITS digits are refused, as
 * Python's json.loads refuses them (ValueError from its int string conversion limit) even
 * when a later duplicate key would replace the value. Nesting deeper than max_depth is
 * refused (no stack overflow on hostile input). All nodes of a document live in one arena,
 * freed by json_doc_free.
 *
 * Duplicate keys: merged as Python does by default (request bodies must read exactly as the
 * reference reads them). With json_parse_opts.reject_duplicate_keys a repeated key in any
 * one object is an error instead (JSON_PARSE_DUPLICATE_KEY, naming the key) — for formats
 * where a repeat is damage, not data: a safetensors header listing one tensor twice. The
 * check runs when the object closes, so an error inside a later member of that object is
 * reported first, as Python's `object_pairs_hook` would; everything else is identical in
 * both modes (fuzz/fuzz_json.c checks that).
 */
#ifndef CLEF_JSON_JSON_H
#define CLEF_JSON_JSON_H

#include <stddef.h>
#include <stdint.h>

/* Python's default sys.int_info.default_max_str_digits. */
#define JSON_PARSE_INT_MAX_DIGITS 4300

typedef enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;

typedef struct json_member {
    const char *key;   /* decoded UTF-8, NUL-terminated (may also contain NUL: use key_len) */
    size_t key_len;
    json_value *value;
} json_member;

typedef enum json_number_kind {
    JSON_NUMBER_INTEGER,   /* -?digits, no fraction or exponent: Python int */
    JSON_NUMBER_REAL,      /* has a fraction or exponent: Python float */
    JSON_NUMBER_NONFINITE, /* NaN / Infinity / -Infinity literal (allow_nonfinite only) */
} json_number_kind;

struct json_value {
    json_type type;
    union {
        struct {
            const char *text;      /* exactly as written, NUL-terminated */
            size_t len;
            json_number_kind kind;
            double real;           /* strtod of text (may be +-inf for huge reals, or NaN) */
        } num;
        struct {
            const char *ptr;       /* decoded UTF-8, NUL-terminated */
            size_t len;
        } str;
        struct {
            json_value **items;
            size_t count;
        } arr;
        struct {
            json_member *members;  /* document order, duplicates already merged */
            size_t count;
        } obj;
    } u;
};

typedef struct json_doc json_doc;

typedef struct json_parse_opts {
    int allow_nonfinite;       /* accept NaN/Infinity/-Infinity literals (default 0) */
    int max_depth;             /* nesting limit; 0 = 256 */
    int reject_duplicate_keys; /* a key repeated in one object fails the parse with
                                  JSON_PARSE_DUPLICATE_KEY (default 0: merged, Python's way) */
} json_parse_opts;

/* json_parse's failures (0 = success). */
enum {
    JSON_PARSE_SYNTAX = -1,        /* not JSON (or past a limit: depth, integer digits) */
    JSON_PARSE_NOMEM = -2,         /* out of memory */
    JSON_PARSE_DUPLICATE_KEY = -3, /* reject_duplicate_keys only: see json_error.key */
};

typedef struct json_error {
    size_t offset;        /* byte offset of the problem (a duplicate: its second occurrence) */
    int line, column;     /* 1-based */
    int depth;            /* containers open at the problem: 1 = directly inside the root
                             object/array (a duplicate key of the root object has depth 1) */
    char key[128];        /* JSON_PARSE_DUPLICATE_KEY: the repeated key, decoded, cut at a
                             NUL byte or on a UTF-8 boundary to fit; "" for other errors */
    char msg[160];
} json_error;

/* Parse text[0..len). On success *out owns the tree (root: json_doc_root). On failure
 * returns a JSON_PARSE_* status and fills *err if given. */
int json_parse(const char *text, size_t len, const json_parse_opts *opts, json_doc **out,
               json_error *err);
void json_doc_free(json_doc *doc); /* accepts NULL */
const json_value *json_doc_root(const json_doc *doc);
/* 1 if some object of the document repeated a key (merged: last value, first position). */
int json_doc_merged_duplicates(const json_doc *doc);

/* Lookups (NULL when absent or when v is not of the right type). */
const json_value *json_object_get(const json_value *v, const char *key);
const json_value *json_array_at(const json_value *v, size_t i);

/* Typed readers: return 1 and store the value when v has that type (and fits), else 0. */
int json_get_int64(const json_value *v, int64_t *out);  /* integer numbers within int64 only */
int json_get_double(const json_value *v, double *out);  /* any finite number */
int json_get_bool(const json_value *v, int *out);
const char *json_get_string(const json_value *v);       /* NULL unless a string */

const char *json_type_name(json_type t); /* "null", "number", ... for messages */

#endif /* CLEF_JSON_JSON_H */
