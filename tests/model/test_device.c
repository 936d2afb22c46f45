/*
 * test_device.c — choosing where a model runs (clef_model_params.device / .backend), on any
 * machine: the CPU by every spelling, and every refusal with its status and a message naming
 * the device — a malformed "cuda:x" (CLEF_ERR_INVALID_ARG), an unknown name, and "cuda" /
 * "cuda:N" where it cannot run (CLEF_ERR_UNSUPPORTED: this build has no CUDA backend, no GPU
 * is visible, or there is no GPU N). A refused device fails before any release file is read
 * (the release path given does not exist). Decisions on a GPU are tests/cuda/test_cuda_decide.
 */
#include "test.h"

#include "clef.h"

#include <stdio.h>
#include <string.h>

static void expect_refused(const char *device, int status, const char *in_message) {
    clef_model_params mp = clef_model_default_params();
    mp.device = device;
    clef_model *m = (clef_model *)&mp; /* must come back NULL */
    int st = clef_model_load("no/such/release", &mp, &m);
    CHECK_MSG(st == status, "device '%s': status %d (%s), expected %d: %s", device, st,
              clef_status_str(st), status, clef_last_error());
    CHECK(m == NULL);
    CHECK_MSG(strstr(clef_last_error(), device) != NULL, "device '%s': message does not name it: %s",
              device, clef_last_error());
    CHECK_MSG(strstr(clef_last_error(), in_message) != NULL, "device '%s': message lacks '%s': %s",
              device, in_message, clef_last_error());
    printf("refused: %-10s -> %s\n", device, clef_last_error());
}

static void expect_cpu(const char *device, const char *backend) {
    clef_model_params mp = clef_model_default_params();
    mp.device = device;
    mp.backend = backend;
    clef_model *m = NULL;
    int st = clef_model_load("demo/clef-demo", &mp, &m);
    CHECK_MSG(st == CLEF_OK, "device %s, backend %s: %s", device ? device : "NULL",
              backend ? backend : "NULL", clef_last_error());
    CHECK_EQ_STR(clef_model_device(m), "cpu");
    clef_memory_info mi;
    CHECK_EQ_INT(clef_model_memory(m, &mi), CLEF_OK);
    CHECK_EQ_INT(mi.weights, clef_model_weight_bytes(m));
    CHECK(mi.weights > 0);
    CHECK_EQ_INT(mi.resident, 0); /* the CPU counts no device memory */
    CHECK_EQ_INT(mi.device_total, 0);
    clef_context *c = NULL;
    CHECK_EQ_INT(clef_context_create(m, NULL, &c), CLEF_OK);
    CHECK_EQ_INT(clef_context_memory(c, &mi), CLEF_OK);
    CHECK_EQ_INT(mi.weights, 0);
    clef_context_free(c);
    clef_model_free(m);
}

int main(void) {
    expect_cpu(NULL, NULL);
    expect_cpu("cpu", NULL);
    expect_cpu(NULL, "cpu");
    expect_cpu("cpu", "something-else"); /* device wins over the older backend field */

    expect_refused("cuda:x", CLEF_ERR_INVALID_ARG, "known: cpu");
    expect_refused("cuda:", CLEF_ERR_INVALID_ARG, "known: cpu");
    expect_refused("cuda:-1", CLEF_ERR_INVALID_ARG, "known: cpu");
    expect_refused("cudax", CLEF_ERR_INVALID_ARG, "known: cpu");
    expect_refused("tpu", CLEF_ERR_UNSUPPORTED, "known: cpu");
    expect_refused("", CLEF_ERR_UNSUPPORTED, "known: cpu");
    /* where a GPU exists these would load; here (no GPU, or a CPU-only build) they are refused */
    clef_model_params mp = clef_model_default_params();
    mp.device = "cuda";
    clef_model *m = NULL;
    int st = clef_model_load("no/such/release", &mp, &m);
    if (st == CLEF_ERR_UNSUPPORTED) {
        const char *why = strstr(clef_last_error(), "no CUDA backend") ? "no CUDA backend"
                                                                        : "no CUDA GPU is visible";
        expect_refused("cuda", CLEF_ERR_UNSUPPORTED, why);
        expect_refused("cuda:0", CLEF_ERR_UNSUPPORTED, why);
    } else {
        /* a GPU is there: the load went on to the (missing) release */
        CHECK_MSG(st == CLEF_ERR_FILE_MISSING || st == CLEF_ERR_IO, "cuda: %d %s", st,
                  clef_last_error());
    }
    expect_refused("cuda:9999", CLEF_ERR_UNSUPPORTED, "cuda:9999");
    CHECK_EQ_INT(clef_model_memory(NULL, NULL), CLEF_ERR_INVALID_ARG);
    CHECK_EQ_INT(clef_context_memory(NULL, NULL), CLEF_ERR_INVALID_ARG);
    CHECK_EQ_STR(clef_model_device(NULL), "");
    return test_summary();
}
