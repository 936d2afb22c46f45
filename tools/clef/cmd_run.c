/*
 * cmd_run.c — `clef run`: load a release, decide one record, print the answer.
 *
 * The record comes from --record FILE (or - for stdin, the default when neither --record nor
 * --questions is given), or is assembled from --questions FILE (the "questions" object) and
 * --state (text or a file). The output is the SystemOne response body as JSON (the default
 * when stdout is not a terminal) or a table of questions, options and probabilities (the
 * default on a terminal). Loading progress goes to stderr when stderr is a terminal.
 * Exit status: 0 answered, 1 the release or the record was refused (message on stderr),
 * 2 bad usage.
 */
#include "clef.h"
#include "commands.h"

#include "core/io.h"
#include "core/strbuf.h"
#include "json/json.h"
#include "json/render.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN_MAX_INPUT_BYTES ((size_t)64 << 20) /* records, question files, state files */

static void run_usage(FILE *out) {
    fprintf(out,
            "usage: clef run --model DIR [--record FILE|-] [--questions FILE|- --state TEXT|FILE]\n"
            "                [--max-length N] [--threads N] [--truncation truncate|refuse]\n"
            "                [--json|--table] [--quiet]\n"
            "\n"
            "Decide one record with the Clef release in DIR and print the answer.\n"
            "\n"
            "  --model DIR        release directory (config.json, *.safetensors, joint_head.*,\n"
            "                     tokenizer.json)\n"
            "  --record FILE|-    the record as JSON: {\"state\": ..., \"questions\": {...}} plus\n"
            "                     optional \"id\" and \"model\" (docs/cli.md); - reads stdin.\n"
            "                     Default: stdin (when it is not a terminal) if --questions is\n"
            "                     not given\n"
            "  --questions FILE|- a JSON object of questions {\"id\": {\"type\": ...}, ...};\n"
            "                     the record is then {\"state\": STATE, \"questions\": FILE};\n"
            "                     - reads stdin\n"
            "  --state TEXT|FILE  the state with --questions: the contents of FILE if such a\n"
            "                     file exists, else TEXT; used as JSON if it parses as JSON,\n"
            "                     else as a string\n"
            "  --max-length N     tokens per record, prompt included (default 16384)\n"
            "  --threads N        CPU threads (default: all cores)\n"
            "  --truncation P     a record longer than --max-length: 'truncate' cuts the state\n"
            "                     from its end (the reference behaviour, the default; reported as\n"
            "                     usage.truncated_tokens, and on stderr with --table); 'refuse'\n"
            "                     fails instead\n"
            "  --json             print the SystemOne response body (default when stdout is\n"
            "                     not a terminal)\n"
            "  --table            print a table of questions, options and probabilities\n"
            "                     (default on a terminal)\n"
            "  --quiet            no loading progress on stderr\n"
            "\n"
            "Exit status: 0 answered, 1 the release or the record was refused, 2 bad usage.\n");
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "clef run: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see clef run --help)\n");
    return 2;
}

static int parse_int_arg(const char *flag, const char *text, int min, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > INT_MAX) {
        fprintf(stderr, "clef run: %s expects an integer >= %d, got '%s'\n", flag, min, text);
        return 2;
    }
    *out = (int)v;
    return 0;
}

/* Read all of stdin into a malloc'd, NUL-terminated buffer. */
static int read_stdin(char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            if (cap >= RUN_MAX_INPUT_BYTES) {
                free(buf);
                fprintf(stderr, "clef run: stdin is larger than %zu bytes\n", RUN_MAX_INPUT_BYTES);
                return 1;
            }
            char *bigger = realloc(buf, cap * 2 + 1);
            if (!bigger)
                free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    if (!buf || ferror(stdin)) {
        free(buf);
        fprintf(stderr, "clef run: cannot read stdin\n");
        return 1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

static int read_input(const char *path, char **out, size_t *len) {
    if (!strcmp(path, "-"))
        return read_stdin(out, len);
    if (clef_read_file(path, RUN_MAX_INPUT_BYTES, out, len) != CLEF_OK) {
        fprintf(stderr, "clef run: %s\n", clef_last_error());
        return 1;
    }
    return 0;
}

/* {"state": <state>, "questions": <questions text>} from --questions and --state. */
static int assemble_record(const char *questions_path, const char *state_arg, char **out,
                           size_t *len) {
    char *questions = NULL, *state = NULL;
    size_t questions_len = 0, state_len = 0;
    int rc = read_input(questions_path, &questions, &questions_len);
    if (rc)
        return rc;
    struct stat sb;
    if (stat(state_arg, &sb) == 0 && S_ISREG(sb.st_mode)) {
        if ((rc = read_input(state_arg, &state, &state_len))) {
            free(questions);
            return rc;
        }
    } else {
        state_len = strlen(state_arg);
        state = malloc(state_len + 1);
        if (state)
            memcpy(state, state_arg, state_len + 1);
    }
    if (!state) {
        free(questions);
        fprintf(stderr, "clef run: out of memory\n");
        return 1;
    }
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "{\"state\":");
    json_doc *doc = NULL;
    if (json_parse(state, state_len, NULL, &doc, NULL) == 0)
        clef_strbuf_append(&b, state, state_len); /* valid JSON: the value as written */
    else
        json_render_string(state, state_len, &b); /* anything else: a string */
    json_doc_free(doc);
    clef_strbuf_append_str(&b, ",\"questions\":");
    clef_strbuf_append(&b, questions, questions_len);
    clef_strbuf_append_str(&b, "}");
    free(questions);
    free(state);
    if (clef_strbuf_status(&b) != CLEF_OK) {
        clef_strbuf_free(&b);
        fprintf(stderr, "clef run: out of memory\n");
        return 1;
    }
    *out = clef_strbuf_take(&b, len);
    return 0;
}

typedef struct progress_state {
    int shown;        /* a progress line is on the terminal */
    int last_percent; /* of the weights, last printed */
} progress_state;

/* One status line on stderr (a terminal), rewritten in place; weights by whole percent. */
static void show_progress(const char *stage, uint64_t done, uint64_t total, void *user) {
    progress_state *p = user;
    if (!strcmp(stage, "weights") && total) {
        int percent = (int)(100.0 * (double)done / (double)total);
        if (p->shown && percent == p->last_percent)
            return;
        p->last_percent = percent;
        fprintf(stderr, "\r\033[Kclef run: loading weights %3d%% (%.1f / %.1f MB)", percent,
                (double)done / 1e6, (double)total / 1e6);
    } else if (!strcmp(stage, "ready")) {
        fprintf(stderr, "\r\033[K");
        p->shown = 0;
        fflush(stderr);
        return;
    } else {
        fprintf(stderr, "\r\033[Kclef run: %s...", stage);
    }
    p->shown = 1;
    fflush(stderr);
}

/* A bar of width cells for p in [0, 1]. */
static void print_bar(double p, int width) {
    int n = (int)(p * width + 0.5);
    for (int i = 0; i < n; i++)
        fputs("#", stdout);
}

static void print_table(const clef_model *model, const clef_result *r) {
    printf("model %s, %d input tokens", clef_model_name(model), r->input_tokens);
    if (r->truncated_tokens)
        printf(" (%d state tokens truncated)", r->truncated_tokens);
    printf("\n\n%-24s %-7s %-24s %11s %11s\n", "question", "type", "option", "probability",
           "logit");
    for (int32_t q = 0; q < r->n_questions; q++) {
        const clef_question_result *qr = &r->questions[q];
        int32_t best = 0;
        double expected = 0;
        for (int32_t o = 0; o < qr->n_options; o++) {
            if (qr->probabilities[o] > qr->probabilities[best])
                best = o;
            expected += o * (double)qr->probabilities[o];
        }
        for (int32_t o = 0; o < qr->n_options; o++) {
            printf("%-24s %-7s %c %-22s %11.4f %11.4f  ", o ? "" : qr->id, o ? "" : qr->type,
                   o == best ? '*' : ' ', qr->option_ids[o], qr->probabilities[o],
                   qr->logits[o]);
            print_bar(qr->probabilities[o], 20);
            printf("\n");
        }
        if (!strcmp(qr->type, "score"))
            printf("%-24s %-7s   expected score %.4f\n", "", "", expected);
    }
    printf("\n* the most probable option. Options in the order the model saw them (choice: "
           "sorted by id).\n");
}

int cmd_run(int argc, char **argv) {
    const char *model_dir = NULL, *record_path = NULL, *questions_path = NULL, *state = NULL;
    int max_length = 0, threads = 0, quiet = 0, format = 0; /* format: 0 auto, 1 json, 2 table */
    clef_truncation truncation = CLEF_TRUNCATION_TRUNCATE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            format = 1;
        } else if (!strcmp(a, "--table")) {
            format = 2;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--model") || !strcmp(a, "--record") || !strcmp(a, "--questions") ||
                   !strcmp(a, "--state") || !strcmp(a, "--max-length") ||
                   !strcmp(a, "--threads") || !strcmp(a, "--truncation")) {
            if (!has_value)
                return usage_error("%s needs a value", a);
            const char *v = argv[++i];
            int rc = 0;
            if (!strcmp(a, "--model"))
                model_dir = v;
            else if (!strcmp(a, "--record"))
                record_path = v;
            else if (!strcmp(a, "--questions"))
                questions_path = v;
            else if (!strcmp(a, "--state"))
                state = v;
            else if (!strcmp(a, "--max-length"))
                rc = parse_int_arg(a, v, 1, &max_length);
            else if (!strcmp(a, "--threads"))
                rc = parse_int_arg(a, v, 1, &threads);
            else if (!strcmp(v, "truncate"))
                truncation = CLEF_TRUNCATION_TRUNCATE;
            else if (!strcmp(v, "refuse"))
                truncation = CLEF_TRUNCATION_REFUSE;
            else
                return usage_error("--truncation expects 'truncate' or 'refuse', got '%s'", v);
            if (rc)
                return rc;
        } else {
            return usage_error("unknown argument '%s'", a);
        }
    }
    if (!model_dir)
        return usage_error("%s", "--model DIR is required");
    if (record_path && (questions_path || state))
        return usage_error("%s", "give either --record or --questions with --state, not both");
    if (!!questions_path != !!state)
        return usage_error("%s", "--questions and --state go together");
    if (!record_path && !questions_path && isatty(STDIN_FILENO))
        return usage_error("%s", "no record: give --record FILE, --questions with --state, or "
                                 "pipe the record to stdin");

    char *request = NULL;
    size_t request_len = 0;
    int rc = questions_path ? assemble_record(questions_path, state, &request, &request_len)
                            : read_input(record_path ? record_path : "-", &request, &request_len);
    if (rc)
        return rc;

    progress_state ps = {0};
    clef_model_params mp = clef_model_default_params();
    mp.n_threads = threads;
    mp.max_length = max_length;
    mp.truncation = truncation;
    if (!quiet && isatty(STDERR_FILENO)) {
        mp.progress = show_progress;
        mp.progress_user = &ps;
    }
    clef_model *model = NULL;
    int st = clef_model_load(model_dir, &mp, &model);
    if (st != CLEF_OK) {
        if (ps.shown)
            fprintf(stderr, "\n");
        fprintf(stderr, "clef run: cannot load '%s': %s (%s)\n", model_dir, clef_last_error(),
                clef_status_str(st));
        free(request);
        return 1;
    }

    if (!format)
        format = isatty(STDOUT_FILENO) ? 2 : 1;
    clef_result *result = NULL;
    char *answer = NULL;
    st = format == 1 ? clef_model_decide(model, request, request_len, &answer)
                     : clef_model_decide_result(model, request, request_len, &result);
    if (st != CLEF_OK) {
        fprintf(stderr, "clef run: record refused: %s (%s)\n", clef_last_error(),
                clef_status_str(st));
        rc = 1;
    } else if (format == 1) {
        printf("%s\n", answer);
    } else {
        print_table(model, result);
    }
    if (st == CLEF_OK && format == 2 && result->truncated_tokens)
        fprintf(stderr, "clef run: the state was cut by %d tokens to fit --max-length %d\n",
                result->truncated_tokens, clef_model_max_length(model));
    clef_string_free(answer);
    clef_result_free(result);
    clef_model_free(model);
    free(request);
    return rc;
}
