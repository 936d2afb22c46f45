/*
 * test_load_order.c — what a load reads before it refuses (issue 9), measured with the load
 * progress callback, which clef_model_load calls after every weight it reads with the bytes
 * read so far:
 *   - the intact demo release: the callback counts every weight byte (the counter works);
 *   - a release whose tokenizer.json is broken: refused as a tokenizer problem with ZERO
 *     weight bytes read (the tokenizer loads before the weights);
 *   - a release with a NaN in a weight: refused as CLEF_ERR_TENSOR_VALUES naming the weight,
 *     not later as a NaN probability blamed on the record;
 *   - a bad record: clef_request_check refuses it without a model, so `clef run` (which calls
 *     it first) reads no weight for it.
 */
#include "test.h"

#include "clef.h"
#include "clef_release.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct counter {
    uint64_t weight_bytes; /* the last "weights" done value */
    int calls;
} counter;

static void count(const char *stage, uint64_t done, uint64_t total, void *user) {
    counter *c = user;
    (void)total;
    if (!strcmp(stage, "weights")) {
        c->weight_bytes = done;
        c->calls++;
    }
}

static int load(const char *dir, counter *c) {
    memset(c, 0, sizeof *c);
    clef_model_params p = clef_model_default_params();
    p.n_threads = 1;
    p.max_length = 256;
    p.progress = count;
    p.progress_user = c;
    clef_model *m = NULL;
    int rc = clef_model_load(dir, &p, &m);
    clef_model_free(m);
    return rc;
}

static int sh(const char *fmt, const char *a, const char *b) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return system(cmd);
}

int main(void) {
    char dir[] = "/tmp/clef-load-order-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char rel[300];
    snprintf(rel, sizeof rel, "%s/rel", dir);
    CHECK(sh("cp -r demo/clef-demo %s%s", rel, "") == 0);

    counter c;
    CHECK_EQ_INT(load(rel, &c), CLEF_OK);
    CHECK_MSG(c.weight_bytes > 1000000, "intact load read %llu weight bytes",
              (unsigned long long)c.weight_bytes);
    printf("intact demo release: %llu weight bytes read in %d reads\n",
           (unsigned long long)c.weight_bytes, c.calls);

    /* broken tokenizer: refused before any weight */
    CHECK(sh("cp %s/tokenizer.json %s/tokenizer.json.good", rel, rel) == 0);
    CHECK(sh("printf '{\"model\": 3}' > %s/tokenizer.json%s", rel, "") == 0);
    int rc = load(rel, &c);
    CHECK_MSG(rc == CLEF_ERR_TOKENIZER_FORMAT || rc == CLEF_ERR_TOKENIZER_UNSUPPORTED,
              "broken tokenizer: %d %s", rc, clef_last_error());
    CHECK(strstr(clef_last_error(), "tokenizer.json") != NULL);
    CHECK_EQ_INT(c.weight_bytes, 0);
    CHECK_EQ_INT(c.calls, 0);
    printf("broken tokenizer.json: refused (%d), %llu weight bytes read\n", rc,
           (unsigned long long)c.weight_bytes);
    CHECK(sh("mv %s/tokenizer.json.good %s/tokenizer.json", rel, rel) == 0);

    /* a NaN weight: named as a weight (element 1 of the final norm, found through the
     * public release API) */
    clef_release *r = NULL;
    CHECK(clef_release_open(rel, NULL, &r) == CLEF_OK);
    const clef_tensor_info *t = clef_release_find(r, "text.norm.weight");
    CHECK(t != NULL);
    char path[400];
    snprintf(path, sizeof path, "%s/%s", rel, t ? clef_release_file_name(r, (size_t)t->file) : "?");
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f && t) {
        CHECK(fseek(f, (long)t->offset + 2, SEEK_SET) == 0);
        CHECK(fwrite("\xc0\x7f", 1, 2, f) == 2);
    }
    if (f)
        fclose(f);
    clef_release_free(r);
    rc = load(rel, &c);
    CHECK_EQ_INT(rc, CLEF_ERR_TENSOR_VALUES);
    CHECK_MSG(strstr(clef_last_error(), "file 'model.safetensors': weight '") &&
                  strstr(clef_last_error(), "' holds NaN at element"),
              "%s", clef_last_error());
    CHECK(strstr(clef_last_error(), "model.language_model.norm.weight' holds NaN at element 1") != NULL);
    printf("NaN weight: %s\n", clef_last_error());

    /* a bad record needs no model at all */
    const char *record = "{\"state\": 1, \"questions\": {\"q\": {\"type\": \"choise\"}}}";
    CHECK_EQ_INT(clef_request_check(record, strlen(record)), CLEF_ERR_REQUEST_INVALID);
    CHECK_EQ_STR(clef_last_error(),
                 "request body.questions.q.type: Input should be 'noul', 'choice' or 'score' (1 problem)");

    CHECK(sh("rm -rf %s%s", dir, "") == 0);
    return test_summary();
}
