/*
 * tok_encode_lines.c — encodes a file of JSON-string lines and prints one line of ids per
 * input line. The parity scripts (scripts/tokenizer/compare_corpus.py) run it next to HF
 * `tokenizers` on the same lines; it is also handy for looking at a tokenization by hand.
 *
 *   tok_encode_lines TOKENIZER_JSON [--config TOKENIZER_CONFIG_JSON]
 *                    [--pipeline transformers|file] [--decode] < lines.jsonl
 *
 * --pipeline picks tok_load_ex's pipeline (tokenizer.h): transformers (the default, what
 * AutoTokenizer builds) or file (tokenizer.json as `tokenizers` loads it).
 * Each input line is a JSON string ("text with \n escapes"); output line i is the ids of
 * input line i separated by spaces, or "ERROR <status> <message>" if encoding failed. With
 * --decode, each output line is instead the decoded text of those ids as a JSON string.
 */
#include "tokenizer/tokenizer.h"

#include "clef.h"
#include "json/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_json_string(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    puts("\"");
}

int main(int argc, char **argv) {
    const char *path = NULL, *config = NULL;
    int decode = 0, bad = 0;
    tok_load_opts opts = {TOK_PIPELINE_TRANSFORMERS};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) config = argv[++i];
        else if (strcmp(argv[i], "--pipeline") == 0 && i + 1 < argc) {
            const char *p = argv[++i];
            if (strcmp(p, "transformers") == 0) opts.pipeline = TOK_PIPELINE_TRANSFORMERS;
            else if (strcmp(p, "file") == 0) opts.pipeline = TOK_PIPELINE_FILE;
            else bad = 1;
        }
        else if (strcmp(argv[i], "--decode") == 0) decode = 1;
        else if (!path) path = argv[i];
        else path = NULL, i = argc;
    }
    if (!path || bad) {
        fprintf(stderr,
                "usage: %s TOKENIZER_JSON [--config TOKENIZER_CONFIG_JSON] [--pipeline transformers|file] "
                "[--decode] < lines.jsonl\n", argv[0]);
        return 2;
    }
    tok_tokenizer *tok = NULL;
    int rc = tok_load_ex(path, config, &opts, &tok);
    if (rc != CLEF_OK) {
        fprintf(stderr, "error %d (%s): %s\n", rc, clef_status_str(rc), clef_last_error());
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    tok_ids ids = {0};
    size_t lineno = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        if (line[n - 1] == '\n') line[--n] = 0;
        json_doc *doc = NULL;
        json_error err;
        const char *text;
        if (json_parse(line, (size_t)n, NULL, &doc, &err) != 0 || !(text = json_get_string(json_doc_root(doc)))) {
            fprintf(stderr, "line %zu: not a JSON string\n", lineno);
            json_doc_free(doc);
            rc = 1;
            break;
        }
        size_t len = json_doc_root(doc)->u.str.len;
        ids.count = 0;
        int erc = tok_encode(tok, text, len, &ids);
        if (erc != CLEF_OK) {
            printf("ERROR %d %s\n", erc, clef_last_error());
        } else if (decode) {
            char *out = NULL;
            size_t out_len = 0;
            if (tok_decode(tok, ids.ids, ids.count, &out, &out_len) != CLEF_OK) {
                printf("ERROR %s\n", clef_last_error());
            } else {
                print_json_string(out, out_len);
                free(out);
            }
        } else {
            for (size_t i = 0; i < ids.count; i++) printf(i ? " %d" : "%d", ids.ids[i]);
            putchar('\n');
        }
        json_doc_free(doc);
    }
    free(line);
    tok_ids_free(&ids);
    tok_free(tok);
    return rc;
}
