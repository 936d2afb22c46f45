/*
 * test_cli_run.c — `clef run` as a user runs it (the README's first command).
 *
 * Runs the clef binary (path given as argv[1]) on the demo release and demo/record.json and
 * requires its --json output to equal the reference systemone() answer committed in
 * tests/model/fixtures/demo_answer.json (written by scripts/demo/make_demo.py), compared as
 * compact JSON. Also: --table names every question and option; --questions/--state builds
 * the same record; --help exits 0 and lists every flag; bad usage exits 2; a missing release
 * or a bad record exits 1 with a message on stderr.
 */
#include "test.h"

#include "clef.h"
#include "core/io.h"
#include "core/strbuf.h"
#include "json/json.h"
#include "json/render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *clef_bin;

/* Run `clef_bin args` through the shell; stdout captured into *out; returns the exit code. */
static int run(const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", clef_bin, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    clef_strbuf b = {0};
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0)
        clef_strbuf_append(&b, buf, got);
    clef_strbuf_append(&b, "", 0);
    int status = pclose(p);
    *out = clef_strbuf_take(&b, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
    const char *flags[] = {"--model", "--record", "--questions", "--state", "--max-length",
                           "--threads", "--truncation", "--json", "--table", "--quiet"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        CHECK_MSG(strstr(out, flags[i]) != NULL, "--help does not mention %s", flags[i]);
    free(out);

    CHECK_EQ_INT(run("run --record demo/record.json", &out), 2); /* no --model */
    free(out);
    CHECK_EQ_INT(run("run --model demo/clef-demo --frobnicate", &out), 2);
    free(out);
    CHECK_EQ_INT(run("run --model demo/clef-demo --threads zero --record demo/record.json", &out), 2);
    free(out);
    CHECK_EQ_INT(run("run --model tests/model/no-such-release --record demo/record.json", &out), 1);
    free(out);
    CHECK_EQ_INT(run("run --model demo/clef-demo --questions demo/record.json --state x", &out), 1);
    free(out);
    CHECK_EQ_INT(run("run --model demo/clef-demo --json --record - < /dev/null", &out), 1);
    free(out);

    free(expected);
    free(expected_text);
    return test_summary();
}
