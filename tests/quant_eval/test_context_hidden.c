/*
 * test_context_hidden.c — clef_context_hidden's contract (include/clef.h) on the demo release:
 * nothing before a decide, the shape of the record just decided (its token count is the
 * answer's input_tokens, the width the config's hidden size), a too-small buffer and a record
 * past the last forward refused with their statuses, finite values, and a refused record
 * leaving no stale rows. The VALUES are checked against transformers + the libraries by
 * test_eval (the hidden-state distances of `clef eval`, which reads them through this call).
 */
#include "test.h"

#include "clef.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1, 1 << 16);
    if (f && buf)
        buf[fread(buf, 1, (1 << 16) - 1, f)] = 0;
    if (f)
        fclose(f);
    return buf;
}

int main(void) {
    clef_log_set(NULL, NULL);
    clef_model_params mp = clef_model_default_params();
    mp.n_threads = 1;
    clef_model *m = NULL;
    CHECK_MSG(clef_model_load("demo/clef-demo", &mp, &m) == CLEF_OK, "%s", clef_last_error());
    clef_context *ctx = NULL;
    CHECK(m && clef_context_create(m, NULL, &ctx) == CLEF_OK);
    if (!ctx)
        return test_summary();
    int32_t T = -1, D = -1;
    CHECK_EQ_INT(clef_context_hidden(NULL, 0, NULL, 0, &T, &D), CLEF_ERR_INVALID_ARG);
    CHECK_EQ_INT(clef_context_hidden(ctx, 0, NULL, 0, &T, &D), CLEF_ERR_MODEL_STATE);
    CHECK(T == 0 && D == 0);

    char *record = slurp("demo/record.json");
    clef_result *r = NULL;
    CHECK_MSG(clef_context_decide_result(ctx, record, strlen(record), &r) == CLEF_OK, "%s",
              clef_last_error());
    CHECK_EQ_INT(clef_context_hidden(ctx, 0, NULL, 0, &T, &D), CLEF_OK);
    CHECK_EQ_INT(T, r ? r->input_tokens : -1);
    CHECK_EQ_INT(D, 128); /* demo/clef-demo/config.json text_config.hidden_size */
    const size_t n = (size_t)T * (size_t)D;
    float *h = malloc(n * sizeof *h);
    CHECK_EQ_INT(clef_context_hidden(ctx, 0, h, n - 1, NULL, NULL), CLEF_ERR_INVALID_ARG);
    CHECK_EQ_INT(clef_context_hidden(ctx, 1, h, n, NULL, NULL), CLEF_ERR_MODEL_STATE);
    CHECK_EQ_INT(clef_context_hidden(ctx, 0, h, n, NULL, NULL), CLEF_OK);
    size_t finite = 0, nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        finite += isfinite(h[i]) != 0;
        nonzero += h[i] != 0.0f;
    }
    CHECK(finite == n && nonzero > n / 2);
    clef_result_free(r);

    /* a record refused before the forward leaves the previous rows in place (no forward ran),
     * and a later successful decide replaces them */
    const char *bad = "{\"state\": \"x\", \"questions\": {}}";
    CHECK(clef_context_decide_result(ctx, bad, strlen(bad), &r) != CLEF_OK);
    CHECK_EQ_INT(clef_context_hidden(ctx, 0, NULL, 0, &T, &D), CLEF_OK);

    free(h);
    free(record);
    clef_context_free(ctx);
    clef_model_free(m);
    return test_summary();
}
