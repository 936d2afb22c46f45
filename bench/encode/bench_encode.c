/*
 * bench_encode.c — how long a request takes from body to prompt ids and from probabilities
 * to the answer body, on the records of tests/encode/fixtures/records.jsonl.
 *
 * Stages, each timed over all records per run (median of N runs, one warm-up run
 * excluded; file reading excluded):
 *   validate  clef_request_parse (JSON parse + validation + question tables)
 *   encode    clef_record_encode with the BPE tokenizer (max_length 16384, truncate)
 *   answers   clef_answers_render with uniform probabilities
 * Prints a table and, with --json, one JSON row per stage (bench/encode/run.sh joins it
 * with the Python reference's numbers). Usage: bench_encode [--runs N] [--json] [records] [tokenizer.json]
 */
#include "../bench_util.h"

#include "clef.h"
#include "core/io.h"
#include "encode/answers.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct body {
    char *text;
    size_t len;
} body;

int main(int argc, char **argv) {
    int runs = 7, as_json = 0;
    const char *records = "tests/encode/fixtures/records.jsonl";
    const char *tokenizer = "tests/encode/fixtures/tokenizer.json";
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (positional++ == 0)
            records = argv[i];
        else
            tokenizer = argv[i];
    }
    if (runs < 1)
        runs = 1;
    tok_tokenizer *tok = NULL;
    if (tok_load(tokenizer, NULL, &tok) != CLEF_OK) {
        fprintf(stderr, "bench_encode: %s\n", clef_last_error());
        return 1;
    }
    char *data = NULL;
    size_t size = 0;
    if (clef_read_file(records, (size_t)1 << 30, &data, &size) != CLEF_OK) {
        fprintf(stderr, "bench_encode: %s\n", clef_last_error());
        return 1;
    }
    /* The bodies of the records the reference could encode at the default max_length. */
    body *bodies = NULL;
    size_t n = 0, cap = 0;
    for (char *line = data; line < data + size;) {
        char *end = memchr(line, '\n', (size_t)(data + size - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(data + size - line);
        json_doc *doc = NULL;
        if (len && json_parse(line, len, NULL, &doc, NULL) == 0) {
            const json_value *b = json_object_get(json_doc_root(doc), "body");
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                bodies = realloc(bodies, cap * sizeof *bodies);
            }
            bodies[n].len = b->u.str.len;
            bodies[n].text = malloc(b->u.str.len + 1);
            memcpy(bodies[n].text, b->u.str.ptr, b->u.str.len + 1);
            n++;
        }
        json_doc_free(doc);
        line += len + 1;
    }
    free(data);

    double *t_validate = calloc((size_t)runs, sizeof(double));
    double *t_encode = calloc((size_t)runs, sizeof(double));
    double *t_answers = calloc((size_t)runs, sizeof(double));
    clef_request **reqs = calloc(n, sizeof *reqs);
    clef_encoded_record *enc = calloc(n, sizeof *enc);
    int *encoded = calloc(n, sizeof *encoded);
    double *probs = malloc(64 * 256 * sizeof *probs);
    size_t total_tokens = 0, n_encoded = 0;
    for (int run = -1; run < runs; run++) { /* run -1 is the warm-up */
        double t0 = bench_now_ms();
        for (size_t i = 0; i < n; i++)
            clef_request_parse(bodies[i].text, bodies[i].len, CLEF_REQUEST_RECORD, NULL, NULL, &reqs[i], NULL);
        double t1 = bench_now_ms();
        clef_encode_params p = clef_encode_default_params();
        p.tokenize = clef_tokenize_tok;
        p.tokenize_ctx = tok;
        total_tokens = n_encoded = 0;
        for (size_t i = 0; i < n; i++) {
            encoded[i] = reqs[i] && clef_record_encode(reqs[i], &p, &enc[i]) == CLEF_OK;
            if (encoded[i]) {
                total_tokens += (size_t)enc[i].n_tokens;
                n_encoded++;
            }
        }
        double t2 = bench_now_ms();
        for (size_t i = 0; i < n; i++) {
            if (!encoded[i])
                continue;
            size_t k = 0;
            for (int32_t q = 0; q < reqs[i]->n_questions; q++)
                for (int32_t o = 0; o < reqs[i]->questions[q].n_options; o++)
                    probs[k++] = 1.0 / reqs[i]->questions[q].n_options;
            clef_strbuf out = {0};
            clef_answers_render(reqs[i], &enc[i], probs, k, NULL, &out);
            clef_strbuf_free(&out);
        }
        double t3 = bench_now_ms();
        for (size_t i = 0; i < n; i++) {
            if (encoded[i])
                clef_encoded_record_free(&enc[i]);
            clef_request_free(reqs[i]);
            reqs[i] = NULL;
        }
        if (run >= 0) {
            t_validate[run] = t1 - t0;
            t_encode[run] = t2 - t1;
            t_answers[run] = t3 - t2;
        }
    }
    const char *names[3] = {"validate", "encode", "answers"};
    double med[3] = {bench_median(t_validate, runs), bench_median(t_encode, runs),
                     bench_median(t_answers, runs)};
    size_t counts[3] = {n, n_encoded, n_encoded};
    if (as_json) {
        for (int s = 0; s < 3; s++)
            printf("{\"impl\":\"clef\",\"stage\":\"%s\",\"records\":%zu,\"median_ms\":%.3f,\"runs\":%d}\n",
                   names[s], counts[s], med[s], runs);
    } else {
        printf("| stage    | records | tokens  | median ms (N=%d) | us/record |\n", runs);
        printf("|----------|---------|---------|-----------------|-----------|\n");
        for (int s = 0; s < 3; s++)
            printf("| %-8s | %7zu | %7zu | %15.2f | %9.1f |\n", names[s], counts[s], total_tokens,
                   med[s], 1e3 * med[s] / (double)counts[s]);
    }
    for (size_t i = 0; i < n; i++)
        free(bodies[i].text);
    free(bodies);
    free(reqs);
    free(enc);
    free(encoded);
    free(probs);
    free(t_validate);
    free(t_encode);
    free(t_answers);
    tok_free(tok);
    return 0;
}
