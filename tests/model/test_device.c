/*
 * test_device.c — choosing where a model runs (clef_model_params.device / .backend), on any
 * machine: the CPU by every spelling, and every refusal with its status and a message naming
 * the device — a malformed "cuda:x" (CLEF_ERR_INVALID_ARG), an unknown name, and "cuda" /
 * "cuda:N" where it cannot run (CLEF_ERR_UNSUPPORTED: this build has no CUDA backend, no GPU
 * is visible, or there is no GPU N). A refused device fails before any release file is read
 * (the release path given does not exist). The host-embedding placement (qwen35_load_placed,
 * the table on another backend handle than the rest, rows gathered there and copied over in
 * chunks) is run here with two CPU handles over 600 tokens in 2 packed sequences (so more
 * than two 256-row chunks): output equal bit for bit to the table in place, and the profile
 * field accepted / refused. Decisions on a GPU are tests/cuda/test_cuda_decide.
 */
#include "test.h"

#include "clef.h"
#include "backend/backend.h"
#include "model/qwen35.h"
#include "model/tensor_source.h"
#include "release/release.h"

#include <stdlib.h>

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

/* The demo backbone with the table in place and on a second CPU handle: same output bits. */
static void check_host_embed_placement(void) {
    clef_release *rel = NULL;
    clef_release_opts ro = clef_release_default_opts();
    CHECK_EQ_INT(clef_release_open("demo/clef-demo", &ro, &rel), CLEF_OK);
    if (!rel)
        return;
    const clef_release_config *cfg = clef_release_get_config(rel);
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    clef_backend_params bp = clef_backend_default_params();
    clef_backend *be = NULL, *host = NULL;
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &be), CLEF_OK);
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &host), CLEF_OK);
    qwen35_model *plain = NULL, *placed = NULL;
    CHECK_EQ_INT(qwen35_load(&cfg->text, &src, be, &plain), CLEF_OK);
    CHECK_EQ_INT(qwen35_load_placed(&cfg->text, &src, be, host, &placed), CLEF_OK);
    const int64_t n = 600, D = cfg->text.hidden_size;
    const int64_t seq[3] = {0, 377, n};
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    float *a = malloc(sizeof *a * (size_t)(n * D)), *b = malloc(sizeof *b * (size_t)(n * D));
    for (int64_t t = 0; t < n; t++)
        ids[t] = (int32_t)((t * 7919 + 13) % cfg->text.vocab_size);
    qwen35_params qp = qwen35_default_params();
    qp.max_seq_len = n;
    qp.max_tokens = n;
    qwen35_state *sa = NULL, *sb = NULL;
    if (plain && placed && ids && a && b) {
        CHECK_EQ_INT(qwen35_state_create(plain, be, &qp, &sa), CLEF_OK);
        CHECK_EQ_INT(qwen35_state_create(placed, be, &qp, &sb), CLEF_OK);
    }
    if (sa && sb) {
        CHECK_EQ_INT(qwen35_forward(plain, sa, 2, seq, ids, NULL), CLEF_OK);
        CHECK_EQ_INT(clef_backend_read(be, a, qwen35_state_output(sa), sizeof *a * (size_t)(n * D)), CLEF_OK);
        CHECK_EQ_INT(qwen35_forward(placed, sb, 2, seq, ids, NULL), CLEF_OK);
        CHECK_EQ_INT(clef_backend_read(be, b, qwen35_state_output(sb), sizeof *b * (size_t)(n * D)), CLEF_OK);
        CHECK_MSG(!memcmp(a, b, sizeof *a * (size_t)(n * D)),
                  "host-embedding placement: the output differs from the table in place");
        CHECK_EQ_INT(qwen35_weight_bytes(placed), qwen35_weight_bytes(plain));
        printf("host embedding placement: %lld tokens, output identical to the table in place\n",
               (long long)n);
    }
    qwen35_state_free(sa);
    qwen35_state_free(sb);
    qwen35_free(plain);
    qwen35_free(placed);
    clef_backend_free(host);
    clef_backend_free(be);
    clef_release_free(rel);
    free(ids);
    free(a);
    free(b);
}

int main(void) {
    check_host_embed_placement();
    {   /* the profile field: host-embed, 24gb and 16gb are accepted (the same as resident on
         * the CPU: the budgets hold device memory only) */
        clef_model_params mp = clef_model_default_params();
        mp.profile = CLEF_PROFILE_HOST_EMBED;
        clef_model *m = NULL;
        CHECK_EQ_INT(clef_model_load("demo/clef-demo", &mp, &m), CLEF_OK);
        clef_model_free(m);
        const clef_profile budgets[] = {CLEF_PROFILE_24GB, CLEF_PROFILE_16GB};
        for (int i = 0; i < 2; i++) {
            mp.profile = budgets[i];
            m = NULL;
            CHECK_EQ_INT(clef_model_load("demo/clef-demo", &mp, &m), CLEF_OK);
            clef_context *c = NULL;
            CHECK_EQ_INT(m ? clef_context_create(m, NULL, &c) : CLEF_ERR_INTERNAL, CLEF_OK);
            clef_context_free(c);
            clef_model_free(m);
        }
        mp.profile = (clef_profile)7;
        CHECK_EQ_INT(clef_model_load("demo/clef-demo", &mp, &m), CLEF_ERR_INVALID_ARG);
        CHECK(m == NULL);
    }
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
