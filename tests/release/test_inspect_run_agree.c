/*
 * test_inspect_run_agree.c — whatever `clef run` refuses while loading a release, `clef
 * inspect --verify` refuses too (issue 9). Over every damaged variant of damage_cases.c (the
 * fixture releases get the demo's tokenizer files, which clef_model_load needs), the checks
 * cmd_inspect makes — clef_release_open with keep_going, clef_release_check_tokenizer,
 * clef_release_scan_values with keep_going — are compared with clef_model_load, the quantized
 * fixture releases (NF4, FP8, INT8 ConvRot) included: every precision runs, so none may be
 * refused by load alone. The intact copies must be accepted by both (clef_release_runnable 1),
 * so the comparison is not vacuous.
 */
#include "test.h"

#include "clef.h"
#include "clef_release.h"
#include "damage_cases.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The verdict of `clef inspect --verify` (see cmd_inspect.c): CLEF_OK or the first status. */
static int inspect_verdict(const char *dir, int *runnable) {
    clef_release_opts o = clef_release_default_opts();
    o.keep_going = 1;
    o.verify_hashes = 1;
    clef_release *rel = NULL;
    *runnable = 0;
    int rc = clef_release_open(dir, &o, &rel);
    if (rc != CLEF_OK)
        return rc;
    *runnable = clef_release_runnable(rel);
    int tok = clef_release_check_tokenizer(rel);
    int scan = clef_release_scan_values(rel, 1, NULL, NULL);
    rc = clef_release_problem_count(rel) ? clef_release_problem_at(rel, 0)->status
         : tok != CLEF_OK                ? tok
                                         : scan;
    clef_release_free(rel);
    return rc;
}

static int load_verdict(const char *dir) {
    clef_model_params p = clef_model_default_params();
    p.n_threads = 1;
    p.max_length = 256;
    p.verify_hashes = 1;
    clef_model *m = NULL;
    int rc = clef_model_load(dir, &p, &m);
    clef_model_free(m);
    return rc;
}

static int prepare(scratch *s, const damage_case *c) {
    if (scratch_copy(s, c->fixture) != 0)
        return -1;
    if (strchr(c->fixture, '/'))
        return 0; /* the demo has its own tokenizer */
    return file_copy_in(s, "demo/clef-demo/tokenizer.json", "tokenizer.json") ||
           file_copy_in(s, "demo/clef-demo/tokenizer_config.json", "tokenizer_config.json");
}

int main(void) {
    clef_log_set(NULL, NULL);
    size_t both = 0, inspect_only = 0;
    printf("%-40s %6s %6s  %s\n", "damage", "run", "inspect", "");
    for (size_t i = 0; i < n_damage_cases; i++) {
        const damage_case *c = &damage_cases[i];
        scratch s = {{0}, {0}};
        CHECK_MSG(prepare(&s, c) == 0, "%s: cannot copy %s", c->name, c->fixture);
        alarm(60); /* a FIFO must not hang either path */
        int runnable = 0;
        int intact_inspect = inspect_verdict(s.rel, &runnable);
        int intact_load = load_verdict(s.rel);
        CHECK_MSG(intact_inspect == CLEF_OK, "%s: intact copy refused by inspect: %s", c->name,
                  clef_last_error());
        CHECK_MSG(intact_load == CLEF_OK, "%s: intact copy refused by load: %d %s", c->name,
                  intact_load, clef_last_error());
        CHECK_MSG(runnable, "%s: inspect says this build does not run the intact copy", c->name);
        CHECK_MSG(c->damage(&s) == 0, "%s: could not damage the copy", c->name);
        int run = load_verdict(s.rel);
        int insp = inspect_verdict(s.rel, &runnable);
        alarm(0);
        const char *note = "";
        if (run != CLEF_OK && insp != CLEF_OK) {
            both++;
        } else if (run == CLEF_OK && insp != CLEF_OK) {
            inspect_only++;
            note = "(inspect only)";
        }
        CHECK_MSG(run == CLEF_OK || insp != CLEF_OK,
                  "%s: clef run refuses (%d %s) but inspect accepts", c->name, run,
                  clef_status_str(run));
        printf("%-40s %6d %6d  %s\n", c->name, run, insp, note);
        scratch_remove(&s);
    }
    printf("%zu variants: %zu refused by both, %zu by inspect only, 0 by run only\n",
           n_damage_cases, both, inspect_only);
    return test_summary();
}
