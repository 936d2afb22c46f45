/*
 * bench_tokenizer.c — single-thread tokenizer throughput and load time of libclef's
 * tokenizer. bench/tokenizer/run.sh runs it next to HF `tokenizers` on the same text and
 * prints one table.
 *
 *   bench_tokenizer TOKENIZER_DIR TEXT.jsonl [RUNS] [transformers|file]
 *
 * The last argument picks the pipeline (tokenizer.h; default transformers, the engine's).
 * Load: median of 3 tok_load_dir_ex calls. Encode: every record of TEXT.jsonl (JSON-string lines)
 * encoded once per run, tok_encode per record (add_special_tokens=False semantics);
 * the first run is a warm-up and not counted; median over RUNS (default 5). MB = 10^6 bytes
 * of UTF-8 input. Prints one line: "clef <load_s> <MB_per_s> <tokens> <bytes>".
 */
#include "tokenizer/tokenizer.h"

#include "../bench_util.h"
#include "clef.h"
#include "core/io.h"
#include "json/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR TEXT.jsonl [RUNS] [transformers|file]\n", argv[0]);
        return 2;
    }
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    if (runs < 1) runs = 1;
    tok_load_opts opts = {TOK_PIPELINE_TRANSFORMERS};
    if (argc > 4 && strcmp(argv[4], "file") == 0) opts.pipeline = TOK_PIPELINE_FILE;
    else if (argc > 4 && strcmp(argv[4], "transformers") != 0) {
        fprintf(stderr, "pipeline must be transformers or file, got '%s'\n", argv[4]);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (clef_read_file(argv[2], (size_t)1 << 31, &text, &len) != CLEF_OK) {
        fprintf(stderr, "%s\n", clef_last_error());
        return 1;
    }
    /* Decode all records first: the bench measures the tokenizer, not the JSON reader. */
    size_t n = 0, cap = 1024, bytes = 0;
    char **recs = malloc(cap * sizeof *recs);
    size_t *lens = malloc(cap * sizeof *lens);
    json_doc **docs = malloc(cap * sizeof *docs);
    for (char *line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
        json_error err;
        if (n == cap) {
            cap *= 2;
            recs = realloc(recs, cap * sizeof *recs);
            lens = realloc(lens, cap * sizeof *lens);
            docs = realloc(docs, cap * sizeof *docs);
        }
        if (ll && json_parse(line, ll, NULL, &docs[n], &err) == 0) {
            const json_value *v = json_doc_root(docs[n]);
            recs[n] = (char *)v->u.str.ptr;
            lens[n] = v->u.str.len;
            bytes += lens[n];
            n++;
        }
        line += ll + 1;
    }
    double loads[3];
    tok_tokenizer *tok = NULL;
    for (int i = 0; i < 3; i++) {
        tok_free(tok);
        tok = NULL;
        double t0 = bench_now_s();
        if (tok_load_dir_ex(argv[1], &opts, &tok) != CLEF_OK) {
            fprintf(stderr, "%s\n", clef_last_error());
            return 1;
        }
        loads[i] = bench_now_s() - t0;
    }
    double *times = malloc((size_t)runs * sizeof *times);
    tok_ids ids = {0};
    size_t tokens = 0;
    for (int r = -1; r < runs; r++) {
        tokens = 0;
        double t0 = bench_now_s();
        for (size_t i = 0; i < n; i++) {
            ids.count = 0;
            if (tok_encode(tok, recs[i], lens[i], &ids) != CLEF_OK) {
                fprintf(stderr, "%s\n", clef_last_error());
                return 1;
            }
            tokens += ids.count;
        }
        if (r >= 0) times[r] = bench_now_s() - t0;
    }
    printf("clef %.4f %.3f %zu %zu\n", bench_median(loads, 3), bytes / bench_median(times, runs) / 1e6, tokens,
           bytes);
    tok_ids_free(&ids);
    tok_free(tok);
    for (size_t i = 0; i < n; i++) json_doc_free(docs[i]);
    free(recs);
    free(lens);
    free(docs);
    free(times);
    free(text);
    return 0;
}
