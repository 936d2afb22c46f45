/*
 * cmd_eval.c — `clef eval --reference BF16_DIR [options] RELEASE...`: the evaluation table of
 * quantized releases against the BF16 release they were made from, the way a release card
 * reports it. Every record of a JSONL file is decided by the reference, then by each release,
 * on the same device; per release the table gives decision agreement with the reference
 * (questions whose most probable option is the same), the mean and max relative L2 of the head
 * logits and of the last hidden state per record, the resident bytes of its weights, the load
 * time and the time per record.
 *
 * Built on the public headers only: clef_context_decide_result for the logits,
 * clef_context_hidden for the last hidden state, clef_model_memory for the bytes, and
 * clef_release.h for the precision's name. One model is loaded at a time (the reference's
 * logits are kept in memory, its hidden states in an anonymous temporary file), so the
 * command needs the memory of the largest release, not of all of them.
 * Exit status: 0 every release ran every record the reference decided, 1 a release or a
 * record was refused (the table says which), 2 bad usage.
 */
#include "clef.h"
#include "clef_release.h"
#include "cli_util.h"
#include "commands.h"
#include "eval_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RECORDS "demo/eval-records.jsonl"

static void usage(FILE *out) {
    fprintf(out,
            "usage: clef eval --reference BF16_DIR [--records FILE.jsonl] [--limit N]\n"
            "                 [--device D] [--threads N] [--no-hidden] [--json] RELEASE...\n"
            "\n"
            "Decide every record of FILE.jsonl with the reference release (usually the BF16\n"
            "release the others were made from), then with each RELEASE, and print per\n"
            "release: decision agreement with the reference (questions whose most probable\n"
            "option is the same), the mean and max relative L2 distance of the head's logits\n"
            "and of the last hidden state per record, the resident bytes of its weights, the\n"
            "load time and the milliseconds per record. One release is loaded at a time.\n"
            "\n"
            "  --reference DIR  the release the others are compared with (required)\n"
            "  --records FILE   one record per line, JSON as `clef run` takes it (default\n"
            "                   " DEFAULT_RECORDS ": 200 seeded records)\n"
            "  --limit N        only the first N records\n"
            "  --device D       cpu (default), cuda or cuda:N: every release runs there\n"
            "  --threads N      CPU threads (default: all cores)\n"
            "  --no-hidden      skip the hidden-state distance (no temporary file of the\n"
            "                   reference's hidden states: tokens x hidden x 4 bytes each)\n"
            "  --json           one JSON object instead of the table\n"
            "  -h, --help       this text\n"
            "\n"
            "Exit status: 0 every release decided every record the reference decided, 1 a\n"
            "release or a record was refused, 2 bad usage.\n");
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* What the reference gave for one record. */
typedef struct ref_record {
    const char *request;   /* into the file's buffer */
    size_t len;
    int ok;                /* decided by the reference */
    int32_t n_questions;
    int32_t *n_options;    /* [n_questions] */
    int32_t *decision;     /* [n_questions] index of the max logit (the first one on ties) */
    float *logits;         /* every option of every question, in order */
    size_t n_logits;
    int32_t n_tokens;      /* hidden rows, at hidden_offset of the temporary file */
    long hidden_offset;
} ref_record;

typedef struct eval_opts {
    const char *reference, *records_file, *device;
    int limit, threads, with_hidden, as_json;
    const char **releases;
    size_t n_releases;
} eval_opts;

/* Split text into its non-blank lines (in place); *out the records. */
static size_t split_records(char *text, size_t len, int limit, ref_record **out) {
    size_t cap = 256, n = 0;
    ref_record *recs = calloc(cap, sizeof *recs);
    char *p = text, *end = text + len;
    while (recs && p < end && (limit <= 0 || n < (size_t)limit)) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line_end = nl ? nl : end;
        char *q = p;
        while (q < line_end && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < line_end) {
            if (n == cap) {
                ref_record *bigger = realloc(recs, 2 * cap * sizeof *recs);
                if (!bigger)
                    break;
                memset(bigger + cap, 0, cap * sizeof *recs);
                recs = bigger;
                cap *= 2;
            }
            *line_end = '\0';
            recs[n].request = q;
            recs[n].len = (size_t)(line_end - q);
            n++;
        }
        p = line_end + 1;
    }
    *out = recs;
    return recs ? n : 0;
}

static size_t count_logits(const clef_result *r) {
    size_t n = 0;
    for (int32_t q = 0; q < r->n_questions; q++)
        n += (size_t)r->questions[q].n_options;
    return n;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static double rel_l2(double diff2, double ref2) {
    return ref2 > 0 ? sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0.0);
}

static void row_error(eval_row *row, int status, const char *what) {
    row->status = status;
    snprintf(row->error, sizeof row->error, "%s: %s", what, clef_last_error());
}

/* Load dir on the device; the row gets its precision, bytes and load time. */
static int load_release(const eval_opts *o, const char *dir, eval_row *row, clef_model **model,
                        clef_context **ctx) {
    *model = NULL;
    *ctx = NULL;
    row->dir = dir;
    clef_release *rel = NULL;
    int st = clef_release_open(dir, NULL, &rel);
    if (st) {
        row_error(row, st, "open");
        return st;
    }
    snprintf(row->precision, sizeof row->precision, "%s",
             clef_quant_method_name(clef_release_get_config(rel)->quant.method));
    clef_release_free(rel);
    clef_model_params mp = clef_model_default_params();
    mp.device = o->device;
    mp.n_threads = o->threads;
    double t0 = now_s();
    st = clef_model_load(dir, &mp, model);
    row->load_s = now_s() - t0;
    if (st) {
        row_error(row, st, "load");
        return st;
    }
    clef_memory_info mi;
    if (clef_model_memory(*model, &mi) == CLEF_OK) {
        row->weight_bytes = mi.weights;
        row->resident_bytes = mi.resident ? mi.resident : mi.weights;
    }
    if ((st = clef_context_create(*model, NULL, ctx))) {
        row_error(row, st, "context");
        clef_model_free(*model);
        *model = NULL;
    }
    return st;
}

/* The record's hidden state into *buf (grown as needed). */
static int read_hidden(clef_context *ctx, float **buf, size_t *cap, int32_t *n_tokens) {
    int32_t T = 0, D = 0;
    int st = clef_context_hidden(ctx, 0, NULL, 0, &T, &D);
    if (st)
        return st;
    const size_t need = (size_t)T * (size_t)D;
    if (need > *cap) {
        float *bigger = realloc(*buf, need * sizeof(float));
        if (!bigger)
            return CLEF_ERR_OUT_OF_MEMORY;
        *buf = bigger;
        *cap = need;
    }
    *n_tokens = T;
    return clef_context_hidden(ctx, 0, *buf, *cap, NULL, NULL);
}

static void progress(const char *precision, size_t i, size_t n) {
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rclef eval: %s %zu/%zu\033[K", precision, i, n);
}

static void progress_done(const eval_row *r) {
    fprintf(stderr, "%sclef eval: %s (%s): %zu records in %.1f s\n",
            isatty(STDERR_FILENO) ? "\r\033[K" : "", r->precision, r->dir, r->records,
            r->load_s + r->decide_s);
}

/* The reference over every record: logits, decisions, hidden states to tmp. */
static int run_reference(const eval_opts *o, ref_record *recs, size_t n, FILE *tmp, eval_row *row,
                         eval_setup *setup, char *device_name, size_t device_cap) {
    clef_model *m = NULL;
    clef_context *ctx = NULL;
    row->is_reference = 1;
    if (load_release(o, o->reference, row, &m, &ctx))
        return row->status;
    snprintf(device_name, device_cap, "%s", clef_model_device(m));
    setup->device_name = device_name;
    float *hidden = NULL;
    size_t hidden_cap = 0;
    int st = CLEF_OK;
    for (size_t i = 0; i < n && !st; i++) {
        progress(row->precision, i, n);
        clef_result *r = NULL;
        double t0 = now_s();
        int dst = clef_context_decide_result(ctx, recs[i].request, recs[i].len, &r);
        row->decide_s += now_s() - t0;
        if (dst) {
            setup->reference_refused++;
            if (!o->as_json)
                fprintf(stderr, "clef eval: record %zu refused by the reference: %s\n", i + 1,
                        clef_last_error());
            continue;
        }
        ref_record *x = &recs[i];
        x->n_questions = r->n_questions;
        x->n_logits = count_logits(r);
        x->n_options = malloc(sizeof(int32_t) * (size_t)(r->n_questions + 1));
        x->decision = malloc(sizeof(int32_t) * (size_t)(r->n_questions + 1));
        x->logits = malloc(sizeof(float) * (x->n_logits + 1));
        if (!x->n_options || !x->decision || !x->logits) {
            st = CLEF_ERR_OUT_OF_MEMORY;
            clef_result_free(r);
            break;
        }
        size_t k = 0;
        for (int32_t q = 0; q < r->n_questions; q++) {
            const clef_question_result *qr = &r->questions[q];
            x->n_options[q] = qr->n_options;
            x->decision[q] = argmax(qr->logits, qr->n_options);
            memcpy(x->logits + k, qr->logits, sizeof(float) * (size_t)qr->n_options);
            k += (size_t)qr->n_options;
        }
        clef_result_free(r);
        if (o->with_hidden) {
            if ((st = read_hidden(ctx, &hidden, &hidden_cap, &x->n_tokens)))
                break;
            int32_t D = 0;
            clef_context_hidden(ctx, 0, NULL, 0, NULL, &D);
            x->hidden_offset = ftell(tmp);
            if (fwrite(hidden, sizeof(float), (size_t)x->n_tokens * (size_t)D, tmp) !=
                (size_t)x->n_tokens * (size_t)D) {
                st = CLEF_ERR_IO;
                break;
            }
        }
        x->ok = 1;
        row->records++;
        row->questions += (size_t)x->n_questions;
    }
    if (st)
        row_error(row, st, "reference run");
    else
        progress_done(row);
    free(hidden);
    clef_context_free(ctx);
    clef_model_free(m);
    return st;
}

/* One release against the reference. */
static void run_release(const eval_opts *o, const char *dir, const ref_record *recs, size_t n,
                        FILE *tmp, eval_row *row) {
    clef_model *m = NULL;
    clef_context *ctx = NULL;
    row->with_hidden = o->with_hidden;
    if (load_release(o, dir, row, &m, &ctx))
        return;
    float *hidden = NULL, *ref_hidden = NULL;
    size_t hidden_cap = 0, ref_cap = 0;
    for (size_t i = 0; i < n; i++) {
        const ref_record *x = &recs[i];
        if (!x->ok)
            continue;
        progress(row->precision, i, n);
        clef_result *r = NULL;
        double t0 = now_s();
        int st = clef_context_decide_result(ctx, x->request, x->len, &r);
        row->decide_s += now_s() - t0;
        if (!st && (r->n_questions != x->n_questions || count_logits(r) != x->n_logits))
            st = CLEF_ERR_MODEL_STATE; /* a different tokenizer or head would do this */
        if (st) {
            row->failed++;
            if (!o->as_json)
                fprintf(stderr, "clef eval: %s: record %zu refused: %s\n", dir, i + 1,
                        st == CLEF_ERR_MODEL_STATE ? "its questions or options differ from the "
                                                     "reference's" : clef_last_error());
            clef_result_free(r);
            continue;
        }
        double d2 = 0, r2 = 0;
        size_t k = 0;
        for (int32_t q = 0; q < r->n_questions; q++) {
            const clef_question_result *qr = &r->questions[q];
            for (int32_t j = 0; j < qr->n_options; j++, k++) {
                const double a = qr->logits[j], b = x->logits[k];
                d2 += (a - b) * (a - b);
                r2 += b * b;
            }
            row->questions++;
            row->agree += argmax(qr->logits, qr->n_options) == x->decision[q];
        }
        clef_result_free(r);
        double hidden_rel = -1;
        if (o->with_hidden) {
            int32_t T = 0, D = 0;
            int hst = read_hidden(ctx, &hidden, &hidden_cap, &T);
            clef_context_hidden(ctx, 0, NULL, 0, NULL, &D);
            const size_t count = (size_t)T * (size_t)D;
            if (!hst && T == x->n_tokens && count > ref_cap) {
                float *bigger = realloc(ref_hidden, count * sizeof(float));
                if (bigger) {
                    ref_hidden = bigger;
                    ref_cap = count;
                }
            }
            if (hst || T != x->n_tokens || count > ref_cap || fseek(tmp, x->hidden_offset, SEEK_SET) ||
                fread(ref_hidden, sizeof(float), count, tmp) != count) {
                row->failed++;
                fprintf(stderr, "clef eval: %s: record %zu: its hidden state (%d tokens) cannot "
                        "be compared with the reference's (%d tokens)\n", dir, i + 1, T,
                        x->n_tokens);
                continue;
            }
            double h2 = 0, hr2 = 0;
            for (size_t e = 0; e < count; e++) {
                const double a = hidden[e], b = ref_hidden[e];
                h2 += (a - b) * (a - b);
                hr2 += b * b;
            }
            hidden_rel = rel_l2(h2, hr2);
        }
        eval_row_add(row, rel_l2(d2, r2), hidden_rel);
    }
    progress_done(row);
    free(hidden);
    free(ref_hidden);
    clef_context_free(ctx);
    clef_model_free(m);
}

static int parse_args(int argc, char **argv, eval_opts *o) {
    memset(o, 0, sizeof *o);
    o->records_file = DEFAULT_RECORDS;
    o->with_hidden = 1;
    o->releases = calloc((size_t)argc + 1, sizeof *o->releases);
    if (!o->releases)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--json")) {
            o->as_json = 1;
        } else if (!strcmp(a, "--no-hidden")) {
            o->with_hidden = 0;
        } else if (!strcmp(a, "--reference") || !strcmp(a, "--records") || !strcmp(a, "--device") ||
                   !strcmp(a, "--limit") || !strcmp(a, "--threads")) {
            if (!has_value) {
                fprintf(stderr, "clef eval: %s needs a value\n\n", a);
                usage(stderr);
                return 2;
            }
            const char *v = argv[++i];
            int rc = 0;
            if (!strcmp(a, "--reference"))
                o->reference = v;
            else if (!strcmp(a, "--records"))
                o->records_file = v;
            else if (!strcmp(a, "--device"))
                o->device = v;
            else if (!strcmp(a, "--limit"))
                rc = cli_parse_int("eval", a, v, 1, 100000000, &o->limit);
            else
                rc = cli_parse_int("eval", a, v, 1, 4096, &o->threads);
            if (rc)
                return rc;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "clef eval: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else {
            o->releases[o->n_releases++] = a;
        }
    }
    if (!o->reference || o->n_releases == 0) {
        fprintf(stderr, "clef eval: %s\n\n",
                !o->reference ? "--reference DIR is required" : "give at least one RELEASE to compare");
        usage(stderr);
        return 2;
    }
    return 0;
}

int cmd_eval(int argc, char **argv) {
    eval_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) {
        free(o.releases);
        return rc < 0 ? 0 : rc;
    }
    char *text = NULL;
    size_t len = 0;
    if (access(o.records_file, F_OK) != 0 && !strcmp(o.records_file, DEFAULT_RECORDS)) {
        fprintf(stderr, "clef eval: no --records given and the default %s is not in the current "
                "directory (run from the repository root, or give --records FILE.jsonl)\n",
                DEFAULT_RECORDS);
        free(o.releases);
        return 1;
    }
    if (cli_read_input("eval", "--records", o.records_file, &text, &len)) {
        free(o.releases);
        return 1;
    }
    ref_record *recs = NULL;
    const size_t n = split_records(text, len, o.limit, &recs);
    if (n == 0) {
        fprintf(stderr, "clef eval: --records '%s' holds no record\n", o.records_file);
        free(recs);
        free(text);
        free(o.releases);
        return 1;
    }
    FILE *tmp = o.with_hidden ? tmpfile() : NULL;
    if (o.with_hidden && !tmp) {
        fprintf(stderr, "clef eval: cannot create a temporary file for the reference's hidden "
                "states (--no-hidden skips them)\n");
        free(recs);
        free(text);
        free(o.releases);
        return 1;
    }
    eval_setup setup = {.records_file = o.records_file, .device = o.device ? o.device : "cpu",
                        .records_read = n};
    eval_row *rows = calloc(o.n_releases + 1, sizeof *rows);
    char device_name[32] = "";
    int failed = 0;
    if (!rows) {
        failed = 1;
    } else if (run_reference(&o, recs, n, tmp, &rows[0], &setup, device_name, sizeof device_name)) {
        fprintf(stderr, "clef eval: reference '%s': [%d %s] %s\n", o.reference, rows[0].status,
                clef_status_str(rows[0].status), rows[0].error);
        failed = 1;
    } else if (rows[0].records == 0) {
        fprintf(stderr, "clef eval: the reference refused every record of '%s'\n", o.records_file);
        failed = 1;
    } else {
        for (size_t i = 0; i < o.n_releases; i++) {
            run_release(&o, o.releases[i], recs, n, tmp, &rows[i + 1]);
            failed |= rows[i + 1].status != 0 || rows[i + 1].failed != 0;
        }
        if (o.as_json)
            eval_print_json(&setup, rows, o.n_releases + 1);
        else
            eval_print_table(&setup, rows, o.n_releases + 1);
    }
    for (size_t i = 0; i < n; i++) {
        free(recs[i].n_options);
        free(recs[i].decision);
        free(recs[i].logits);
    }
    if (tmp)
        fclose(tmp);
    free(rows);
    free(recs);
    free(text);
    free(o.releases);
    return failed ? 1 : 0;
}
