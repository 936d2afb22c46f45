/*
 * test_quantize_cli.c — `clef quantize` as a user runs it: --help, the usage errors (exit 2:
 * no --to, an unknown precision, a bad --max-shard-size, a missing DST), a refused source
 * (exit 1 with the reason on stderr), and a run with --progress (one stderr line per
 * step, exit 0, the release written).
 */
#include "run_cmd.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_quantize_cli PATH_TO_CLEF\n");
        return 2;
    }
    const char *clef = argv[1];
    const char *tmp = getenv("TMPDIR");
    char root[256], cmd[2048];
    snprintf(root, sizeof root, "%s/clef-quantize-cli-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char *out = NULL, *err = NULL;
    const char *src = "tests/release/fixtures/bf16-single";

    snprintf(cmd, sizeof cmd, "%s quantize --help", clef);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 0);
    CHECK(out && strstr(out, "--to PRECISION") && strstr(out, "--progress"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s --help", clef);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 0);
    CHECK(out && strstr(out, "quantize"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s quantize %s %s/x", clef, src, root);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 2);
    CHECK(err && strstr(err, "--to is required"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s quantize --to int4 %s %s/x", clef, src, root);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 2);
    CHECK(err && strstr(err, "unknown precision 'int4'"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s quantize --to nf4 --max-shard-size 5XB %s %s/x", clef, src, root);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 2);
    CHECK(err && strstr(err, "--max-shard-size"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s quantize --to nf4 %s", clef, src);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 2);
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s quantize --to nf4 tests/release/fixtures/nf4 %s/x", clef, root);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 1);
    CHECK(err && strstr(err, "is a nf4 release"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s quantize --to nf4 --progress --max-shard-size 100KB %s %s/nf4",
             clef, src, root);
    CHECK_EQ_INT(run_cmd(cmd, &out, &err), 0);
    /* 31 NF4 weights read for their offsets, then 89 tensors written */
    CHECK(err && strstr(err, "[1/120] ") && strstr(err, "[120/120] ") &&
          strstr(err, "120 steps done"));
    CHECK(out && strstr(out, "wrote"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s inspect %s/nf4", clef, root);
    run_cmd(cmd, &out, &err); /* no tokenizer in the fixture: inspect lists only that problem */
    CHECK(out && strstr(out, "nf4") && strstr(out, "model-00001-of-0000"));
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK_EQ_INT(run_cmd(cmd, NULL, NULL), 0);
    return test_summary();
}
