/*
 * test_cli_run.c — `clef run` as a user runs it (the README's first command).
 *
 * Runs the clef binary (path given as argv[1]) on the demo release and demo/record.json and
 * requires its --json output to equal the reference systemone() answer committed in
 * tests/model/fixtures/demo_answer.json (written by scripts/demo/make_demo.py), compared as
 * compact JSON. Also: --table names every question and option; --questions with --state-file
 * (and with --state TEXT) gives exactly the reference answer too; --help exits 0 and lists
 * every flag; bad usage exits 2 with the reason on stderr (numeric flags name their range);
 * a missing --state-file is an error, not a state string; --threads above the cores is capped
 * with a warning; a missing release or a bad record exits 1 with the message on stderr; a bad
 * record is refused BEFORE the release is opened (shown on a release whose shard is
 * truncated: the record's error, not the release's, is reported); a FIFO in place of
 * config.json is refused at once.
 */
#include "test.h"
#include "run_cmd.h"

#include "clef.h"
#include "core/io.h"
#include "core/strbuf.h"
#include "json/json.h"
#include "json/render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *clef_bin;

/* Run `clef_bin args`; stdout and stderr captured; returns the exit code. */
static int run2(const char *args, char **out, char **err) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", clef_bin, args);
    return run_cmd(cmd, out, err);
}

static int run(const char *args, char **out) { return run2(args, out, NULL); }

static int has(const char *text, const char *what) { return strstr(text ? text : "", what) != NULL; }

/* Write the record's "questions" and "state" values to files in dir, as JSON. */
static int split_record(const char *dir, char *questions_path, char *state_path, size_t cap) {
    char *text = NULL;
    size_t len = 0;
    if (clef_read_file("demo/record.json", 1 << 20, &text, &len) != CLEF_OK)
        return -1;
    json_doc *doc = NULL;
    int rc = json_parse(text, len, NULL, &doc, NULL);
    free(text);
    if (rc)
        return -1;
    const char *keys[2] = {"questions", "state"};
    char *paths[2] = {questions_path, state_path};
    for (int i = 0; i < 2 && rc == 0; i++) {
        clef_strbuf b = {0};
        json_render_opts o = {.sort_keys = 0};
        json_render(json_object_get(json_doc_root(doc), keys[i]), &o, &b);
        snprintf(paths[i], cap, "%s/%s.json", dir, keys[i]);
        FILE *f = fopen(paths[i], "wb");
        rc = !f || fwrite(b.data, 1, b.len, f) != b.len;
        if (f)
            fclose(f);
        clef_strbuf_free(&b);
    }
    json_doc_free(doc);
    return rc;
}

static char *compact(const char *text) {
    json_doc *doc = NULL;
    if (!text || json_parse(text, strlen(text), NULL, &doc, NULL))
        return NULL;
    clef_strbuf b = {0};
    json_render_opts o = {.sort_keys = 0};
    json_render(json_doc_root(doc), &o, &b);
    json_doc_free(doc);
    return clef_strbuf_take(&b, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_run PATH_TO_CLEF\n");
        return 2;
    }
    clef_bin = argv[1];
    char *expected_text = NULL, *out = NULL;
    size_t len;
    CHECK(clef_read_file("tests/model/fixtures/demo_answer.json", 1 << 20, &expected_text, &len) ==
          CLEF_OK);
    char *expected = compact(expected_text);

    CHECK_EQ_INT(run("run --model demo/clef-demo --record demo/record.json --json", &out), 0);
    char *got = compact(out);
    CHECK_MSG(got && expected && !strcmp(got, expected), "clef run --json:\n ours:   %s\n oracle: %s",
              got ? got : out, expected ? expected : "(none)");
    printf("clef run --json on demo/record.json: %s\n", got ? got : "(no JSON)");
    free(got);
    free(out);

    /* stdin, and the default format when stdout is a pipe: JSON */
    CHECK_EQ_INT(run("run --model demo/clef-demo < demo/record.json", &out), 0);
    got = compact(out);
    CHECK(got && expected && !strcmp(got, expected));
    free(got);
    free(out);

    CHECK_EQ_INT(run("run --model demo/clef-demo --record demo/record.json --table", &out), 0);
    const char *names[] = {"route", "large", "tone", "refund", "review", "close", "true",
                           "false", "annoyed"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], "annoyed")) /* score levels are shown by index */
            CHECK_MSG(strstr(out, names[i]) != NULL, "--table output lacks '%s'", names[i]);
    free(out);

    CHECK_EQ_INT(run("run --help", &out), 0);
    const char *flags[] = {"--model", "--record", "--questions", "--state", "--state-file",
                           "--max-length", "--threads", "--truncation", "--json", "--table",
                           "--quiet", "--device", "--profile"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        CHECK_MSG(strstr(out, flags[i]) != NULL, "--help does not mention %s", flags[i]);
    free(out);

    /* --questions with the state from a file, and as text: the same answer as the record. */
    char dir[] = "/tmp/clef-cli-run-XXXXXX", qpath[256], spath[256], args[1024];
    CHECK(mkdtemp(dir) != NULL);
    CHECK(split_record(dir, qpath, spath, sizeof qpath) == 0);
    snprintf(args, sizeof args, "run --model demo/clef-demo --questions %s --state-file %s --json",
             qpath, spath);
    CHECK_EQ_INT(run(args, &out), 0);
    got = compact(out);
    CHECK_MSG(got && expected && !strcmp(got, expected), "--questions/--state-file:\n ours:   %s\n oracle: %s",
              got ? got : out, expected ? expected : "(none)");
    free(got);
    free(out);
    char *state_text = NULL;
    size_t state_len = 0;
    CHECK(clef_read_file(spath, 1 << 20, &state_text, &state_len) == CLEF_OK);
    char *quoted = NULL;
    if (state_text) { /* the state JSON as one shell word */
        clef_strbuf q = {0};
        clef_strbuf_append_char(&q, '\'');
        for (const char *p = state_text; *p; p++) {
            if (*p == '\'')
                clef_strbuf_append_str(&q, "'\\''");
            else
                clef_strbuf_append_char(&q, *p);
        }
        clef_strbuf_append_char(&q, '\'');
        quoted = clef_strbuf_take(&q, NULL);
    }
    char *long_args = malloc(4096 + state_len * 2);
    sprintf(long_args, "run --model demo/clef-demo --questions %s --state %s --json", qpath,
            quoted ? quoted : "x");
    CHECK_EQ_INT(run(long_args, &out), 0);
    got = compact(out);
    CHECK_MSG(got && expected && !strcmp(got, expected), "--questions/--state TEXT: %s", got ? got : out);
    free(got);
    free(out);
    free(long_args);
    free(quoted);
    free(state_text);

    /* A --state-file that does not exist is an error, not a state string. */
    char *err = NULL;
    snprintf(args, sizeof args, "run --model demo/clef-demo --questions %s --state-file ./typo.jsn", qpath);
    CHECK_EQ_INT(run2(args, &out, &err), 1);
    CHECK_MSG(has(err, "--state-file './typo.jsn': No such file or directory"), "stderr: %s", err);
    CHECK_EQ_STR(out, "");
    free(out);
    free(err);
    /* --state TEXT naming an existing file: used as text, with a warning pointing at --state-file */
    snprintf(args, sizeof args, "run --model demo/clef-demo --questions %s --state %s --json", qpath, spath);
    CHECK_EQ_INT(run2(args, &out, &err), 0);
    CHECK_MSG(has(err, "--state is used as text") && has(err, "--state-file reads a file"), "stderr: %s", err);
    free(out);
    free(err);

    /* Bad usage: exit 2 and the reason on stderr. */
    CHECK_EQ_INT(run2("run --record demo/record.json", &out, &err), 2); /* no --model */
    CHECK(has(err, "--model DIR is required"));
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --profile nope --record demo/record.json", &out, &err), 2);
    CHECK_MSG(has(err, "--profile expects 'resident', 'host-embed', '24gb' or '16gb', got 'nope'"), "stderr: %s", err);
    free(out);
    free(err);
    /* a device that cannot run here (no GPU, or no CUDA backend in this build): refused by the
     * load with the device named, exit 1 (on a GPU machine it answers); the CPU by name
     * answers as the default */
    int gpu_rc = run2("run --model demo/clef-demo --device cuda:0 --record demo/record.json", &out, &err);
    CHECK_MSG(gpu_rc == 0 || (gpu_rc == 1 && has(err, "device 'cuda:0'")), "exit %d, stderr: %s",
              gpu_rc, err);
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --device cpu --profile host-embed --record demo/record.json --json",
                      &out, &err), 0);
    CHECK_MSG(has(out, "\"model\":\"clef-demo\""), "stdout: %s", out);
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --frobnicate", &out, &err), 2);
    CHECK(has(err, "unknown argument '--frobnicate'"));
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --threads zero --record demo/record.json", &out, &err), 2);
    CHECK_MSG(has(err, "--threads expects an integer from 1 to 4096, got 'zero'"), "stderr: %s", err);
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --max-length 99999999999 --record demo/record.json", &out, &err), 2);
    CHECK_MSG(has(err, "--max-length expects an integer from 1 to 262144, got '99999999999'"), "stderr: %s", err);
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --state x --state-file y --questions z", &out, &err), 2);
    CHECK(has(err, "not both"));
    free(out);
    free(err);

    /* --threads above the cores: capped, with a warning, same answer. */
    CHECK_EQ_INT(run2("run --model demo/clef-demo --record demo/record.json --threads 1000 --json", &out, &err), 0);
    CHECK_MSG(has(err, "--threads 1000 is more than the") && has(err, "cores of this machine; using"),
              "stderr: %s", err);
    got = compact(out);
    CHECK(got && expected && !strcmp(got, expected));
    free(got);
    free(out);
    free(err);

    /* Refusals: exit 1 and the reason on stderr, nothing on stdout. */
    CHECK_EQ_INT(run2("run --model tests/model/no-such-release --record demo/record.json", &out, &err), 1);
    CHECK_MSG(has(err, "cannot load 'tests/model/no-such-release'") && has(err, "(release file missing)"),
              "stderr: %s", err);
    CHECK_EQ_STR(out, "");
    free(out);
    free(err);
    /* the record file given as --questions: a record is not a questions object */
    CHECK_EQ_INT(run2("run --model demo/clef-demo --questions demo/record.json --state x", &out, &err), 1);
    CHECK_MSG(has(err, "clef run: record refused: request body.questions"), "stderr: %s", err);
    CHECK_EQ_STR(out, "");
    free(out);
    free(err);
    CHECK_EQ_INT(run2("run --model demo/clef-demo --json --record - < /dev/null", &out, &err), 1);
    CHECK_MSG(has(err, "record refused: request body: JSON decode error at line 1 column 1 (byte 0)"),
              "stderr: %s", err);
    free(out);
    free(err);

    /* A bad record is refused before the release is opened: on a release whose shard is
     * truncated, the record's error is reported, not the release's (no weight byte read). */
    char rel[300], cmd[1024];
    snprintf(rel, sizeof rel, "%s/damaged", dir);
    snprintf(cmd, sizeof cmd, "cp -r demo/clef-demo %s && truncate -s 1000 %s/model.safetensors", rel, rel);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, "run --model %s --json --record - < tests/model/fixtures/bad_record.json", rel);
    FILE *bad = fopen("tests/model/fixtures/bad_record.json", "rb");
    CHECK(bad != NULL);
    if (bad)
        fclose(bad);
    CHECK_EQ_INT(run2(args, &out, &err), 1);
    CHECK_MSG(has(err, "record refused: request body.questions.route.type") && !has(err, "cannot load"),
              "stderr: %s", err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "run --model %s --json --record demo/record.json", rel);
    CHECK_EQ_INT(run2(args, &out, &err), 1);
    CHECK_MSG(has(err, "cannot load") && has(err, "model.safetensors"), "stderr: %s", err);
    free(out);
    free(err);
    /* A FIFO in place of config.json: refused at once, not waited on (run_cmd's timeout
     * would turn a hang into exit 124). */
    snprintf(rel, sizeof rel, "%s/fifo", dir);
    snprintf(cmd, sizeof cmd, "cp -r demo/clef-demo %s && rm %s/config.json && mkfifo %s/config.json",
             rel, rel, rel);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, "run --model %s --json --record demo/record.json", rel);
    CHECK_EQ_INT(run2(args, &out, &err), 1);
    CHECK_MSG(has(err, "config.json' is a FIFO (named pipe), not a regular file (not a regular file)"),
              "stderr: %s", err);
    free(out);
    free(err);

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);

    free(expected);
    free(expected_text);
    return test_summary();
}
