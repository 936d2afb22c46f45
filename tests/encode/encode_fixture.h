/*
 * encode_fixture.h — shared by the encoder identity tests: reads the records fixture written
 * by scripts/encode/gen_encode_fixtures.py (one JSON object per line: name, source, body,
 * expect.{bytes,bpe}) and compares clef_record_encode with what the reference
 * encode_record() produced: the same error, or the same n_tokens, SHA-256 of the ids
 * (int32 little endian), state tokens cut, and every question and option span.
 */
#ifndef CLEF_TESTS_ENCODE_FIXTURE_H
#define CLEF_TESTS_ENCODE_FIXTURE_H

#include "clef.h"
#include "core/io.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"
#include "test.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ids_sha256_hex(const int32_t *ids, int32_t n, char hex[65]) {
    unsigned char digest[32];
    unsigned int digest_len = 0;
    unsigned char *bytes = malloc((size_t)n * 4 + 1);
    for (int32_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)ids[i];
        bytes[4 * i] = (unsigned char)u;
        bytes[4 * i + 1] = (unsigned char)(u >> 8);
        bytes[4 * i + 2] = (unsigned char)(u >> 16);
        bytes[4 * i + 3] = (unsigned char)(u >> 24);
    }
    EVP_Digest(bytes, (size_t)n * 4, digest, &digest_len, EVP_sha256(), NULL);
    free(bytes);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

static int64_t fixture_int(const json_value *v) {
    int64_t x = -1;
    json_get_int64(v, &x);
    return x;
}

/* Compare one record against one expectation object; returns 1 when identical. */
static int encode_matches(const char *name, const clef_request *request, const json_value *expect,
                          clef_tokenize_fn tokenize, const void *tokenize_ctx) {
    clef_encode_params params = clef_encode_default_params();
    params.tokenize = tokenize;
    params.tokenize_ctx = tokenize_ctx;
    params.max_length = (int32_t)fixture_int(json_object_get(expect, "max_length"));
    clef_encoded_record rec;
    int status = clef_record_encode(request, &params, &rec);
    const json_value *error = json_object_get(expect, "error");
    int ok = 1;
    if (error && error->type == JSON_STRING) {
        if (status != CLEF_ERR_REQUEST_TOO_LONG) {
            fprintf(stderr, "%s: reference refused (%s), we returned %d\n", name, error->u.str.ptr, status);
            ok = 0;
        }
        clef_encoded_record_free(&rec);
        return ok;
    }
    if (status != CLEF_OK) {
        fprintf(stderr, "%s: encode failed: %s\n", name, clef_last_error());
        return 0;
    }
    char hex[65];
    ids_sha256_hex(rec.ids, rec.n_tokens, hex);
    int64_t want_tokens = fixture_int(json_object_get(expect, "n_tokens"));
    int64_t want_cut = fixture_int(json_object_get(expect, "truncated"));
    const char *want_hex = json_get_string(json_object_get(expect, "ids_sha256"));
    if (rec.n_tokens != want_tokens || rec.truncated_tokens != want_cut || !want_hex ||
        strcmp(hex, want_hex) != 0) {
        fprintf(stderr, "%s: n_tokens %d (want %lld), truncated %d (want %lld), ids %s\n", name,
                (int)rec.n_tokens, (long long)want_tokens, (int)rec.truncated_tokens,
                (long long)want_cut, want_hex && strcmp(hex, want_hex) == 0 ? "same" : "differ");
        const json_value *first = json_object_get(expect, "first_ids");
        for (int i = 0; i < 8 && i < rec.n_tokens; i++)
            fprintf(stderr, "  id[%d] = %d (reference %lld)\n", i, (int)rec.ids[i],
                    (long long)fixture_int(json_array_at(first, (size_t)i)));
        ok = 0;
    }
    const json_value *spans = json_object_get(expect, "spans");
    if (!spans || spans->type != JSON_ARRAY || (int32_t)spans->u.arr.count != rec.n_questions) {
        fprintf(stderr, "%s: %d questions, reference has %zu\n", name, (int)rec.n_questions,
                spans ? spans->u.arr.count : 0);
        ok = 0;
    } else {
        for (int32_t q = 0; q < rec.n_questions && ok; q++) {
            const json_value *s = spans->u.arr.items[q];
            const clef_encoded_question *eq = &rec.questions[q];
            int same = (int32_t)s->u.arr.count == 2 + 2 * eq->n_options &&
                       fixture_int(s->u.arr.items[0]) == eq->instruction.begin &&
                       fixture_int(s->u.arr.items[1]) == eq->instruction.end;
            for (int32_t o = 0; same && o < eq->n_options; o++)
                same = fixture_int(s->u.arr.items[2 + 2 * o]) == eq->options[o].begin &&
                       fixture_int(s->u.arr.items[3 + 2 * o]) == eq->options[o].end;
            if (!same) {
                fprintf(stderr, "%s: question %d spans differ: instruction [%d, %d) vs [%lld, %lld)\n",
                        name, (int)q + 1, (int)eq->instruction.begin, (int)eq->instruction.end,
                        (long long)fixture_int(s->u.arr.items[0]), (long long)fixture_int(s->u.arr.items[1]));
                ok = 0;
            }
        }
    }
    clef_encoded_record_free(&rec);
    return ok;
}

typedef struct fixture_stats {
    int records, matched, cut, refused, real;
    int marks, marks_matched; /* the combining-mark records (name "combining-marks-N") */
} fixture_stats;

/* Run every record of path with the tokenizer for expectation key `which`. */
static fixture_stats run_fixture(const char *path, const char *which, clef_tokenize_fn tokenize,
                                 const void *tokenize_ctx) {
    fixture_stats st = {0, 0, 0, 0, 0, 0, 0};
    char *data = NULL;
    size_t size = 0;
    if (clef_read_file(path, (size_t)1 << 30, &data, &size) != CLEF_OK) {
        fprintf(stderr, "%s\n", clef_last_error());
        return st;
    }
    char *line = data;
    while (line < data + size) {
        char *end = memchr(line, '\n', (size_t)(data + size - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(data + size - line);
        json_doc *doc = NULL;
        if (len > 0 && json_parse(line, len, NULL, &doc, NULL) == 0) {
            const json_value *root = json_doc_root(doc);
            const char *name = json_get_string(json_object_get(root, "name"));
            const json_value *body = json_object_get(root, "body");
            const json_value *expect = json_object_get(json_object_get(root, "expect"), which);
            const char *source = json_get_string(json_object_get(root, "source"));
            st.records++;
            st.real += source && strcmp(source, "generated") != 0 && strncmp(source, "generated ", 10) != 0;
            int marks = name && strncmp(name, "combining-marks-", 16) == 0;
            st.marks += marks;
            clef_request *request = NULL;
            clef_request_errors errors = {0};
            int status = clef_request_parse(body->u.str.ptr, body->u.str.len, CLEF_REQUEST_RECORD,
                                            NULL, NULL, &request, &errors);
            if (status != CLEF_OK) {
                fprintf(stderr, "%s: our validation refused a record the reference accepts: %s\n",
                        name, clef_last_error());
            } else if (encode_matches(name, request, expect, tokenize, tokenize_ctx)) {
                st.matched++;
                st.marks_matched += marks;
                const json_value *cut = json_object_get(expect, "truncated");
                st.cut += cut && fixture_int(cut) > 0;
                st.refused += json_get_string(json_object_get(expect, "error")) != NULL;
            }
            clef_request_free(request);
            clef_request_errors_free(&errors);
            json_doc_free(doc);
        } else if (len > 0) {
            fprintf(stderr, "%s: a line does not parse\n", path);
            st.records++;
        }
        line += len + 1;
    }
    free(data);
    printf("encode (%s tokenizer): %d of %d records identical to the reference (%d real; %d with "
           "the state cut, %d refused as too long; combining marks: %d of %d)\n",
           which, st.matched, st.records, st.real, st.cut, st.refused, st.marks_matched, st.marks);
    return st;
}

#endif /* CLEF_TESTS_ENCODE_FIXTURE_H */
