/*
 * test_release_damaged.c — damaged and mismatched releases are refused, each with its own
 * status code and a message naming the file and the tensor or field.
 *
 * Each case of damage_cases.c copies a committed release into a temporary directory, checks
 * that the intact copy passes, damages it in one precise way (truncates a shard, rewrites a
 * header field, edits a JSON file, makes a file a FIFO or a directory, moves it out through a
 * symlink, links it to other bytes, puts a NaN in a weight...), and runs the check where it
 * must be refused: clef_release_open, or for tokenizer files clef_release_check_tokenizer,
 * or for weight values clef_release_scan_values. It checks the exact status, that the message
 * names what it must name and never holds bytes of a file that was refused. An alarm per case
 * turns a hang (a FIFO opened for a blocking read) into a failure. The copy is removed
 * afterwards. Runs under ASan + UBSan in CI (no crash, no leak).
 */
#include "test.h"

#include "damage_cases.h"
#include "clef_release.h"

#include <stdlib.h>
#include <unistd.h>

/* The check at which c must be refused, on an opened release (DAMAGE_AT_OPEN: none). */
static int later_check(const damage_case *c, clef_release *rel) {
    if (c->stage == DAMAGE_AT_TOKENIZER)
        return clef_release_check_tokenizer(rel);
    if (c->stage == DAMAGE_AT_VALUES)
        return clef_release_scan_values(rel, 0, NULL, NULL);
    return CLEF_OK;
}

static void run_case(const damage_case *c) {
    scratch s = {{0}, {0}};
    int setup = scratch_copy(&s, c->fixture);
    CHECK_MSG(setup == 0, "%s: cannot copy fixture %s", c->name, c->fixture);
    if (setup == 0) {
        /* A FIFO must be refused at once: a regression fails here instead of hanging ctest. */
        alarm(30);
        /* The intact copy passes every check: the damage below is what makes it fail. */
        clef_release *rel = NULL;
        clef_release_opts opts = clef_release_default_opts();
        opts.verify_hashes = c->verify;
        int intact = clef_release_open(s.rel, &opts, &rel);
        if (intact == CLEF_OK)
            intact = later_check(c, rel);
        CHECK_MSG(intact == CLEF_OK, "%s: intact copy refused: %s", c->name, clef_last_error());
        clef_release_free(rel);
        rel = NULL;
        int damaged = c->damage(&s);
        CHECK_MSG(damaged == 0, "%s: could not damage the copy", c->name);
        int rc = clef_release_open(s.rel, &opts, &rel);
        if (c->stage != DAMAGE_AT_OPEN) {
            CHECK_MSG(rc == CLEF_OK, "%s: refused at open, expected at a later check: %s", c->name,
                      clef_last_error());
            if (rc == CLEF_OK)
                rc = later_check(c, rel);
        } else {
            CHECK_MSG(rel == NULL, "%s: a refused open must not return a release", c->name);
        }
        const char *msg = clef_last_error();
        CHECK_MSG(rc == c->expected, "%s: got %d (%s), expected %d (%s): %s", c->name, rc,
                  clef_status_str(rc), c->expected, clef_status_str(c->expected), msg);
        CHECK_MSG(strstr(msg, c->must_name) != NULL, "%s: message does not name '%s': %s", c->name,
                  c->must_name, msg);
        CHECK_MSG(!c->must_not || !strstr(msg, c->must_not), "%s: message holds '%s': %s", c->name,
                  c->must_not, msg);
        printf("%-40s %5d %-42s %.110s\n", c->name, rc, clef_status_str(rc), msg);
        clef_release_free(rel);
        alarm(0);
    }
    scratch_remove(&s);
}

/* keep_going collects every model-level problem; allow_unknown lets an unknown tensor pass. */
static void check_keep_going_and_allow_unknown(void) {
    scratch s = {{0}, {0}};
    CHECK(scratch_copy(&s, "bf16-sharded") == 0);
    CHECK(tensor_shape_vs_config(&s) == 0);
    clef_release_opts opts = clef_release_default_opts();
    opts.keep_going = 1;
    clef_release *rel = NULL;
    CHECK(clef_release_open(s.rel, &opts, &rel) == CLEF_OK);
    /* gate, up, down of 4 layers */
    CHECK_EQ_INT(clef_release_problem_count(rel), 12);
    for (size_t i = 0; i < clef_release_problem_count(rel); i++)
        CHECK_EQ_INT(clef_release_problem_at(rel, i)->status, CLEF_ERR_TENSOR_SHAPE);
    clef_release_free(rel);
    scratch_remove(&s);

    CHECK(scratch_copy(&s, "bf16-sharded") == 0);
    CHECK(tensor_unexpected(&s) == 0);
    opts = clef_release_default_opts();
    opts.allow_unknown_tensors = 1;
    rel = NULL;
    CHECK_MSG(clef_release_open(s.rel, &opts, &rel) == CLEF_OK, "%s", clef_last_error());
    clef_release_summary sum;
    clef_release_get_summary(rel, &sum);
    CHECK_EQ_INT(sum.n_unknown, 1);
    clef_release_free(rel);
    scratch_remove(&s);
}

int main(void) {
    printf("%-40s %5s %-42s %s\n", "damage", "code", "status", "message");
    for (size_t i = 0; i < n_damage_cases; i++)
        run_case(&damage_cases[i]);
    printf("%zu damaged variants, each refused with its status and a message naming the file\n",
           n_damage_cases);
    check_keep_going_and_allow_unknown();
    return test_summary();
}
