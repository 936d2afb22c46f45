/*
 * cmd_run.c — `clef run`: load a release, decide one record, print the answer.
 *
 * The record comes from --record FILE (or - for stdin, the default when neither --record nor
 * --questions is given), or is assembled from --questions FILE (the "questions" object) and
 * the state: --state TEXT or --state-file FILE. The record is validated (clef_request_check)
 * BEFORE the release is opened, so a bad record is refused in milliseconds, with no weight
 * read. The output is the SystemOne response body as JSON (the default when stdout is not a
 * terminal) or a table of questions, options and probabilities (the default on a terminal).
 * Loading progress goes to stderr when stderr is a terminal.
 * Exit status: 0 answered, 1 the release or the record was refused (message on stderr),
 * 2 bad usage.
 */
#include "clef.h"
#include "cli_image.h"
#include "cli_util.h"
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --max-length: Qwen3.5's max_position_embeddings (262,144); the workspace grows with it. */
#define RUN_MAX_LENGTH_LIMIT 262144
/* --threads: more than this is surely a typo; above the core count it is capped anyway. */
#define RUN_MAX_THREADS 4096
/* --image: the API takes up to 4 images per record; more are refused by the library with
 * the limit in the message, this only bounds the flag list. */
#define RUN_MAX_IMAGES 64
/* --max-pixels and friends: a bound on the processed size; 2^30 pixels is far past any cap. */
#define RUN_MAX_PIXELS_LIMIT (1L << 30)

static void run_usage(FILE *out) {
    fprintf(out,
            "usage: clef run --model DIR [--record FILE|-]\n"
            "                [--questions FILE|- (--state TEXT | --state-file FILE)]\n"
            "                [--image FILE]... [--video FILE]... [--device cpu|cuda[:N]]\n"
            "                [--max-pixels N] [--min-pixels N] [--video-max-pixels N]\n"
            "                [--video-min-pixels N]\n"
            "                [--profile resident|host-embed|24gb|16gb] [--max-length N]\n"
            "                [--threads N] [--truncation truncate|refuse]\n"
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
            "  --state TEXT       the state with --questions, given on the command line: used\n"
            "                     as JSON if it parses as JSON, else as a string\n"
            "  --state-file FILE  the state with --questions, read from FILE (- reads stdin);\n"
            "                     JSON if it parses as JSON, else a string. A missing file is\n"
            "                     an error\n"
            "  --image FILE       an image (PNG, JPEG or WebP) for the record, sent as a data\n"
            "                     URL in its \"images\" list; repeat for several (the API takes\n"
            "                     up to 4); replaces the record's own \"images\"\n"
            "  --video FILE       a video (MP4 / QuickTime, WebM / Matroska or AVI) for the\n"
            "                     record, in its \"videos\" list; repeat for several (up to 4);\n"
            "                     replaces the record's own \"videos\"\n"
            "  --max-pixels N     resize images to at most N pixels (default: the release's\n"
            "                     preprocessor config, else 16777216 = 4096x4096)\n"
            "  --min-pixels N     resize images to at least N pixels (default: the release's,\n"
            "                     else 65536 = 256x256)\n"
            "  --video-max-pixels N  the same over all sampled frames of a video (default:\n"
            "                     the release's video config, else 786432)\n"
            "  --video-min-pixels N  (default: the release's, else 131072)\n"
            "  --device D         where the model runs: cpu (the default), cuda (GPU 0) or\n"
            "                     cuda:N (GPU N); on a GPU, the device memory the model and\n"
            "                     the decision held is reported on stderr (unless --quiet)\n"
            "  --profile P        weight placement on a GPU: 'resident' (default: every\n"
            "                     backbone and head weight in device memory) or 'host-embed'\n"
            "                     (embed_tokens stays in host RAM; only the prompt's rows are\n"
            "                     copied per forward); '24gb' / '16gb' (the NF4 27B release's\n"
            "                     profiles): resident / host-embed placement, and model plus\n"
            "                     context refused unless within 24 / 16 GiB of device memory.\n"
            "                     lm_head is never resident: the option rows a record needs\n"
            "                     are read from the release file\n"
            "  --max-length N     tokens per record, prompt included, 1 to 262144\n"
            "                     (default 16384)\n"
            "  --threads N        CPU threads, 1 to the number of cores (default: all cores;\n"
            "                     more than the cores is capped, with a warning)\n"
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

/* {"state": <state>, "questions": <questions text>}. The state is the text of --state or
 * the contents of --state-file: kept as written if it is one JSON value, else a JSON string. */
static int assemble_record(const char *questions_path, const char *state_text,
                           const char *state_file, char **out, size_t *len) {
    char *questions = NULL, *state = NULL;
    size_t questions_len = 0, state_len = 0;
    int rc = cli_read_input("run", "--questions", questions_path, &questions, &questions_len);
    if (rc)
        return rc;
    if (state_file) {
        if ((rc = cli_read_input("run", "--state-file", state_file, &state, &state_len))) {
            free(questions);
            return rc;
        }
    } else {
        state_len = strlen(state_text);
        state = malloc(state_len + 1);
        if (state)
            memcpy(state, state_text, state_len + 1);
    }
    char *record = NULL;
    size_t record_len = 0;
    FILE *b = state ? open_memstream(&record, &record_len) : NULL;
    if (b) {
        fputs("{\"state\":", b);
        if (clef_json_check(state, state_len) == CLEF_OK)
            fwrite(state, 1, state_len, b); /* valid JSON: the value as written */
        else
            cli_json_string_n(b, state, state_len); /* anything else: a string */
        fputs(",\"questions\":", b);
        fwrite(questions, 1, questions_len, b);
        fputs("}", b);
    }
    int failed = !b || fclose(b) != 0 || !record;
    free(questions);
    free(state);
    if (failed) {
        free(record);
        fprintf(stderr, "clef run: out of memory\n");
        return 1;
    }
    *out = record;
    *len = record_len;
    return 0;
}

/* The --image (or --video) files into the record's "images" ("videos") list (data URLs). The
 * record must be valid JSON first, so a broken one is reported as such rather than as a media
 * problem. */
static int add_media(const char *const *paths, int n, int video, char **request,
                     size_t *request_len) {
    int st = clef_json_check(*request, *request_len);
    if (st != CLEF_OK) {
        fprintf(stderr, "clef run: record refused: %s (%s)\n", clef_last_error(),
                clef_status_str(st));
        free(*request);
        return 1;
    }
    char *urls[RUN_MAX_IMAGES];
    int rc = 0, made = 0;
    for (; made < n && !rc; made++)
        rc = video ? cli_video_data_url(paths[made], &urls[made])
                   : cli_image_data_url(paths[made], &urls[made]);
    if (rc)
        made--; /* the failed one was not made */
    char *with = NULL;
    size_t with_len = 0;
    if (!rc)
        rc = cli_record_add_list(*request, *request_len, video ? "videos" : "images", urls, n,
                                 &with, &with_len);
    for (int i = 0; i < made; i++)
        free(urls[i]);
    free(*request);
    *request = with;
    *request_len = with_len;
    return rc;
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
    const char *model_dir = NULL, *record_path = NULL, *questions_path = NULL;
    const char *state_text = NULL, *state_file = NULL, *device = NULL;
    int max_length = 0, threads = 0, quiet = 0, format = 0; /* format: 0 auto, 1 json, 2 table */
    const char *images[RUN_MAX_IMAGES], *videos[RUN_MAX_IMAGES];
    int n_images = 0, n_videos = 0;
    int pixels[4] = {0, 0, 0, 0}; /* --min-pixels --max-pixels --video-min-pixels --video-max-pixels */
    static const char *const pixel_flags[4] = {"--min-pixels", "--max-pixels",
                                               "--video-min-pixels", "--video-max-pixels"};
    clef_truncation truncation = CLEF_TRUNCATION_TRUNCATE;
    clef_profile profile = CLEF_PROFILE_RESIDENT;
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
                   !strcmp(a, "--state") || !strcmp(a, "--state-file") ||
                   !strcmp(a, "--max-length") || !strcmp(a, "--threads") ||
                   !strcmp(a, "--truncation") || !strcmp(a, "--image") || !strcmp(a, "--video") ||
                   !strcmp(a, "--device") || !strcmp(a, "--profile") ||
                   !strcmp(a, pixel_flags[0]) || !strcmp(a, pixel_flags[1]) ||
                   !strcmp(a, pixel_flags[2]) || !strcmp(a, pixel_flags[3])) {
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
                state_text = v;
            else if (!strcmp(a, "--state-file"))
                state_file = v;
            else if (!strcmp(a, "--image")) {
                if (n_images == RUN_MAX_IMAGES)
                    return usage_error("more than %s --image flags", "64");
                images[n_images++] = v;
            } else if (!strcmp(a, "--video")) {
                if (n_videos == RUN_MAX_IMAGES)
                    return usage_error("more than %s --video flags", "64");
                videos[n_videos++] = v;
            } else if (!strcmp(a, "--device"))
                device = v;
            else if (!strcmp(a, "--profile"))
                rc = cli_parse_profile("run", v, &profile);
            else if (!strcmp(a, pixel_flags[0]) || !strcmp(a, pixel_flags[1]) ||
                     !strcmp(a, pixel_flags[2]) || !strcmp(a, pixel_flags[3])) {
                int k = 0;
                while (strcmp(a, pixel_flags[k]))
                    k++;
                rc = cli_parse_int("run", a, v, 1, RUN_MAX_PIXELS_LIMIT, &pixels[k]);
            } else if (!strcmp(a, "--max-length"))
                rc = cli_parse_int("run", a, v, 1, RUN_MAX_LENGTH_LIMIT, &max_length);
            else if (!strcmp(a, "--threads"))
                rc = cli_parse_int("run", a, v, 1, RUN_MAX_THREADS, &threads);
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
    int has_state = state_text || state_file;
    if (!model_dir)
        return usage_error("%s", "--model DIR is required");
    if (state_text && state_file)
        return usage_error("%s", "give either --state TEXT or --state-file FILE, not both");
    if (record_path && (questions_path || has_state))
        return usage_error("%s", "give either --record or --questions with --state/--state-file, "
                                 "not both");
    if (!!questions_path != has_state)
        return usage_error("%s", "--questions and --state (or --state-file) go together");
    if (!record_path && !questions_path && isatty(STDIN_FILENO))
        return usage_error("%s", "no record: give --record FILE, --questions with --state, or "
                                 "pipe the record to stdin");
    struct stat sb;
    if (state_text && stat(state_text, &sb) == 0 && S_ISREG(sb.st_mode))
        fprintf(stderr, "clef run: warning: --state is used as text; '%s' is also a file: "
                        "--state-file reads a file\n", state_text);
    int cores = cli_cpu_count();
    if (threads > cores) {
        fprintf(stderr, "clef run: warning: --threads %d is more than the %d cores of this "
                        "machine; using %d\n", threads, cores, cores);
        threads = cores;
    }

    char *request = NULL;
    size_t request_len = 0;
    int rc = questions_path
                 ? assemble_record(questions_path, state_text, state_file, &request, &request_len)
                 : cli_read_input("run", "--record", record_path ? record_path : "-", &request,
                                  &request_len);
    if (rc)
        return rc;
    if (n_images > 0 && (rc = add_media(images, n_images, 0, &request, &request_len)))
        return rc;
    if (n_videos > 0 && (rc = add_media(videos, n_videos, 1, &request, &request_len)))
        return rc;
    /* The record first: a bad one is refused before the release is opened (no weight read). */
    int st = clef_request_check(request, request_len);
    if (st != CLEF_OK) {
        fprintf(stderr, "clef run: record refused: %s (%s)\n", clef_last_error(),
                clef_status_str(st));
        free(request);
        return 1;
    }

    progress_state ps = {0};
    clef_model_params mp = clef_model_default_params();
    mp.n_threads = threads;
    mp.max_length = max_length;
    mp.truncation = truncation;
    mp.min_pixels = pixels[0];
    mp.max_pixels = pixels[1];
    mp.video_min_pixels = pixels[2];
    mp.video_max_pixels = pixels[3];
    mp.device = device;
    mp.profile = profile;
    if (!quiet && isatty(STDERR_FILENO)) {
        mp.progress = show_progress;
        mp.progress_user = &ps;
    }
    clef_model *model = NULL;
    st = clef_model_load(model_dir, &mp, &model);
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
    /* an explicit context (rather than the model's default one) so that its device memory
     * can be reported below */
    clef_context *ctx = NULL;
    st = clef_context_create(model, NULL, &ctx);
    if (st != CLEF_OK) {
        fprintf(stderr, "clef run: cannot create a context on %s: %s (%s)\n",
                clef_model_device(model), clef_last_error(), clef_status_str(st));
        rc = 1;
    } else {
        st = format == 1 ? clef_context_decide(ctx, request, request_len, &answer)
                         : clef_context_decide_result(ctx, request, request_len, &result);
    }
    if (!ctx) {
    } else if (st != CLEF_OK) {
        int record_fault = st == CLEF_ERR_REQUEST_JSON || st == CLEF_ERR_REQUEST_INVALID ||
                           st == CLEF_ERR_REQUEST_TOO_LONG || st == CLEF_ERR_UNSUPPORTED ||
                           st == CLEF_ERR_INVALID_UTF8;
        fprintf(stderr, "clef run: %s: %s (%s)\n",
                record_fault ? "record refused" : "cannot decide the record", clef_last_error(),
                clef_status_str(st));
        rc = 1;
    } else if (format == 1) {
        printf("%s\n", answer);
    } else {
        print_table(model, result);
    }
    if (st == CLEF_OK && !quiet && strcmp(clef_model_device(model), "cpu"))
        cli_report_device_memory("run", model, ctx);
    if (st == CLEF_OK && format == 2 && result->truncated_tokens)
        fprintf(stderr, "clef run: the state was cut by %d tokens to fit --max-length %d\n",
                result->truncated_tokens, clef_model_max_length(model));
    clef_string_free(answer);
    clef_result_free(result);
    clef_context_free(ctx);
    clef_model_free(model);
    free(request);
    return rc;
}
