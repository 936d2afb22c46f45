/*
 * test_cuda_decide.c — whole decisions on the CUDA backend against the CPU backend, through
 * the public API: the same release loaded twice (clef_model_params.device "cpu" and "cuda"),
 * the same records decided on a context of each.
 *
 * Releases: the committed demo release (demo/clef-demo, BF16, one file) and the sharded test
 * release (tests/model/fixtures/tiny-sharded, BF16 in 4 shards + index); both are held to the
 * reference ClefModel on the CPU by tests/model (test_model_decide), so the CPU side here is an
 * oracle-checked reference. Records: 200 on the demo and 100 on the sharded release, made by
 * a seeded generator: states from a short string to nested objects of several hundred tokens,
 * 1 to 6 questions of every type (noul with and without criteria overrides, choice with 2 to
 * 12 options, score with 2 to 10 levels), missing / empty instructions.
 *
 * For every record:
 *  - identical decisions: the most probable option of every question is the same on both
 *    backends (the CPU's margin between its two best options is printed for any mismatch);
 *  - max |dp| over every option's probability is reported (and checked <= 0.05, far above the
 *    measured value, so a broken GPU head cannot hide behind equal argmaxes);
 *  - last hidden states (the backbone's output, every row of the record) relative L2 vs the
 *    CPU fp32 reference <= 1e-2 (the bf16-input bound of the CUDA GEMMs, docs/cuda.md);
 * and clef_context_decide_batch over all records of a release on the GPU returns exactly
 * (byte for byte) the answers each record gets alone on the GPU; the host-embedding profile
 * (CLEF_PROFILE_HOST_EMBED) answers the first 40 records byte for byte as the resident one. The device memory the model
 * and a context hold (clef_model_memory / clef_context_memory) is printed.
 *
 * Exits 77 (ctest: SKIPPED) when no GPU is visible; never reports passed without one.
 */
#include "clef.h"
#include "engine/engine_internal.h"
#include "gpu_decide_util.h"
#include "gpu_test_util.h"
#include "test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device under test: "cuda". Building the test with -DDECIDE_DEVICE='"cpu"' runs its whole
 * path with the CPU on both sides (a check of the test itself on a machine without a GPU). */
#ifndef DECIDE_DEVICE
#define DECIDE_DEVICE "cuda"
#define DECIDE_DEVICE_NAME "cuda:0"
#else
#define DECIDE_DEVICE_NAME DECIDE_DEVICE
#endif

/* records per release (a smaller self-check build may lower them; the GPU test keeps these) */
#ifndef DECIDE_N_DEMO
#define DECIDE_N_DEMO 200
#define DECIDE_N_SHARDED 100
#endif

#define DECIDE_HIDDEN_BOUND 1e-2
#define DECIDE_DP_BOUND 0.05

/* ---- a seeded record generator ------------------------------------------------------------ */

static const char *const words[] = {
    "refund", "invoice", "order", "delivery", "late", "broken", "account", "password",
    "charge", "twice", "customer", "support", "urgent", "please", "thanks", "manager",
    "subscription", "cancel", "upgrade", "plan", "business", "shipping", "address", "error",
    "screen", "payment", "card", "declined", "warranty", "replacement", "tracking", "number",
    "weekend", "reply", "days", "angry", "calm", "happy", "issue", "resolved", "open", "closed",
};
#define N_WORDS (sizeof words / sizeof words[0])

static const char *word(void) { return words[(size_t)(rnd_uniform() * N_WORDS)]; }
static int rnd_int(int lo, int hi) { return lo + (int)(rnd_uniform() * (hi - lo + 1)); }

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 256;
        t->s = realloc(t->s, t->cap);
        if (!t->s)
            abort();
    }
}

static void put_sentence(text *t, int n_words) {
    for (int i = 0; i < n_words; i++)
        put(t, "%s%s", i ? " " : "", word());
}

/* A state: a plain string, or an object with numbers, flags and a list of messages. */
static void put_state(text *t, int size) {
    if (rnd_uniform() < 0.2) {
        put(t, "\"");
        put_sentence(t, 3 + size * 4);
        put(t, "\"");
        return;
    }
    put(t, "{\"customer\": {\"name\": \"%s %s\", \"tenure_months\": %d, \"vip\": %s}", word(),
        word(), rnd_int(0, 120), rnd_uniform() < 0.5 ? "true" : "false");
    put(t, ", \"total_usd\": %d.%02d", rnd_int(0, 5000), rnd_int(0, 99));
    put(t, ", \"messages\": [");
    int n_msgs = 1 + size;
    for (int i = 0; i < n_msgs; i++) {
        put(t, "%s{\"from\": \"%s\", \"text\": \"", i ? ", " : "", i % 2 ? "agent" : "customer");
        put_sentence(t, rnd_int(4, 30));
        put(t, "\"}");
    }
    put(t, "]}");
}

static void put_instructions(text *t) {
    double u = rnd_uniform();
    if (u < 0.1)
        return; /* missing: the type's default instruction */
    if (u < 0.15) {
        put(t, ", \"instructions\": \"\"");
        return;
    }
    put(t, ", \"instructions\": \"");
    put_sentence(t, rnd_int(3, 14));
    put(t, "?\"");
}

static void put_question(text *t, int q) {
    int type = rnd_int(0, 2);
    put(t, "%s\"q%d_%s\": {", q ? ", " : "", q, word());
    if (type == 0) {
        put(t, "\"type\": \"noul\"");
        put_instructions(t);
        if (rnd_uniform() < 0.3) {
            put(t, ", \"criteria\": {\"true\": \"");
            put_sentence(t, rnd_int(2, 6));
            put(t, "\", \"false\": \"");
            put_sentence(t, rnd_int(2, 6));
            put(t, "\"}");
        }
    } else if (type == 1) {
        put(t, "\"type\": \"choice\"");
        put_instructions(t);
        put(t, ", \"criteria\": {");
        int n = rnd_int(2, 12);
        for (int o = 0; o < n; o++) {
            put(t, "%s\"%s_%d\": \"", o ? ", " : "", word(), o);
            put_sentence(t, rnd_int(1, 8));
            put(t, "\"");
        }
        put(t, "}");
    } else {
        put(t, "\"type\": \"score\"");
        put_instructions(t);
        put(t, ", \"criteria\": [");
        int n = rnd_int(2, 10);
        for (int o = 0; o < n; o++)
            put(t, "%s\"%s\"", o ? ", " : "", word());
        put(t, "]");
    }
    put(t, "}");
}

static char *make_record(int i) {
    text t = {0};
    put(&t, "{\"id\": \"rec-%d\", \"state\": ", i);
    put_state(&t, i % 7 == 0 ? rnd_int(10, 40) : rnd_int(0, 8)); /* some long states */
    put(&t, ", \"questions\": {");
    int n_q = rnd_int(1, 6);
    for (int q = 0; q < n_q; q++)
        put_question(&t, q);
    put(&t, "}}");
    return t.s;
}

/* ---- one release, both backends ----------------------------------------------------------- */

typedef struct totals {
    int records, questions, mismatches;
    double max_dp, max_hidden, min_margin_checked;
} totals;

static void compare_release(const char *dir, int n_records, totals *tot) {
    clef_model_params mp = clef_model_default_params();
    clef_model *cpu_model = NULL, *gpu_model = NULL;
    mp.device = "cpu";
    int st = clef_model_load(dir, &mp, &cpu_model);
    CHECK_MSG(st == CLEF_OK, "%s on cpu: %s", dir, clef_last_error());
    mp.device = DECIDE_DEVICE;
    if (st == CLEF_OK) {
        st = clef_model_load(dir, &mp, &gpu_model);
        CHECK_MSG(st == CLEF_OK, "%s on cuda: %s", dir, clef_last_error());
    }
    clef_context *cpu_ctx = NULL, *gpu_ctx = NULL;
    if (st == CLEF_OK) {
        CHECK_EQ_STR(clef_model_device(gpu_model), DECIDE_DEVICE_NAME);
        st = clef_context_create(cpu_model, NULL, &cpu_ctx);
        CHECK_MSG(st == CLEF_OK, "cpu context: %s", clef_last_error());
    }
    if (st == CLEF_OK) {
        st = clef_context_create(gpu_model, NULL, &gpu_ctx);
        CHECK_MSG(st == CLEF_OK, "cuda context: %s", clef_last_error());
    }
    if (st != CLEF_OK)
        goto done;

    char **records = calloc((size_t)n_records, sizeof *records);
    size_t *lens = calloc((size_t)n_records, sizeof *lens);
    char **alone = calloc((size_t)n_records, sizeof *alone);
    double rel_max = 0, dp_max = 0;
    int mismatches = 0, questions = 0, min_tokens = 1 << 30, max_tokens = 0;
    for (int i = 0; i < n_records; i++) {
        records[i] = make_record(tot->records + i);
        lens[i] = strlen(records[i]);
        clef_result *rc = NULL, *rg = NULL;
        int sc = clef_context_decide_result(cpu_ctx, records[i], lens[i], &rc);
        CHECK_MSG(sc == CLEF_OK, "%s record %d on cpu: %s\n%s", dir, i, clef_last_error(), records[i]);
        float *hc = sc == CLEF_OK ? last_hidden(cpu_ctx, rc->input_tokens) : NULL;
        int sg = clef_context_decide_result(gpu_ctx, records[i], lens[i], &rg);
        CHECK_MSG(sg == CLEF_OK, "%s record %d on cuda: %s", dir, i, clef_last_error());
        float *hg = sg == CLEF_OK ? last_hidden(gpu_ctx, rg->input_tokens) : NULL;
        if (sc == CLEF_OK && sg == CLEF_OK) {
            CHECK_EQ_INT(rg->input_tokens, rc->input_tokens);
            CHECK_EQ_INT(rg->n_questions, rc->n_questions);
            if (rc->input_tokens < min_tokens)
                min_tokens = rc->input_tokens;
            if (rc->input_tokens > max_tokens)
                max_tokens = rc->input_tokens;
            CHECK(hc && hg);
            if (hc && hg && rg->input_tokens == rc->input_tokens) {
                size_t n = (size_t)rc->input_tokens * (size_t)qwen35_hidden_size(gpu_model->backbone);
                double rel = rel_l2(hg, hc, n);
                CHECK_MSG(rel <= DECIDE_HIDDEN_BOUND, "%s record %d: last hidden rel L2 %.3e > %.0e",
                          dir, i, rel, DECIDE_HIDDEN_BOUND);
                if (rel > rel_max)
                    rel_max = rel;
            }
            for (int32_t q = 0; q < rc->n_questions && q < rg->n_questions; q++) {
                const clef_question_result *qc = &rc->questions[q], *qg = &rg->questions[q];
                CHECK_EQ_INT(qg->n_options, qc->n_options);
                if (qg->n_options != qc->n_options)
                    continue;
                questions++;
                for (int32_t o = 0; o < qc->n_options; o++) {
                    double dp = fabs((double)qg->probabilities[o] - (double)qc->probabilities[o]);
                    if (!(dp <= dp_max)) /* NaN too */
                        dp_max = isnan(dp) ? INFINITY : dp;
                }
                int bc = prob_argmax(qc->probabilities, qc->n_options);
                int bg = prob_argmax(qg->probabilities, qg->n_options);
                if (bc != bg) {
                    mismatches++;
                    CHECK_MSG(bc == bg, "%s record %d question '%s': cpu decides '%s' (p %.6f), cuda '%s' "
                              "(p %.6f); the cpu's margin to its second option is %.3e",
                              dir, i, qc->id, qc->option_ids[bc], qc->probabilities[bc],
                              qg->option_ids[bg], qg->probabilities[bg],
                              prob_margin(qc->probabilities, qc->n_options));
                } else {
                    CHECK(1);
                }
            }
            /* the GPU's answer alone, for the batch comparison below */
            sg = clef_context_decide(gpu_ctx, records[i], lens[i], &alone[i]);
            CHECK_MSG(sg == CLEF_OK, "%s record %d on cuda (json): %s", dir, i, clef_last_error());
        }
        free(hc);
        free(hg);
        clef_result_free(rc);
        clef_result_free(rg);
    }
    CHECK_MSG(dp_max <= DECIDE_DP_BOUND, "%s: max |dp| %.3e > %.2f", dir, dp_max, DECIDE_DP_BOUND);

    /* the host-embedding profile (embed_tokens in host RAM, rows copied per forward): the same
     * answers as the resident model, byte for byte, and that much less device memory */
    {
        clef_model_params hp = clef_model_default_params();
        hp.device = DECIDE_DEVICE;
        hp.profile = CLEF_PROFILE_HOST_EMBED;
        clef_model *hm = NULL;
        clef_context *hc = NULL;
        int hs = clef_model_load(dir, &hp, &hm);
        CHECK_MSG(hs == CLEF_OK, "%s host-embed: %s", dir, clef_last_error());
        if (hs == CLEF_OK) {
            hs = clef_context_create(hm, NULL, &hc);
            CHECK_MSG(hs == CLEF_OK, "%s host-embed context: %s", dir, clef_last_error());
        }
        int n_host = n_records < 40 ? n_records : 40, host_equal = 0;
        for (int i = 0; hs == CLEF_OK && i < n_host; i++) {
            char *answer = NULL;
            int sh = clef_context_decide(hc, records[i], lens[i], &answer);
            int same = sh == CLEF_OK && alone[i] && !strcmp(answer, alone[i]);
            CHECK_MSG(same, "%s record %d: host-embed answer differs from resident\n resident %s\n host "
                      "%s", dir, i, alone[i] ? alone[i] : "(none)", answer ? answer : "(none)");
            host_equal += same;
            clef_string_free(answer);
        }
        clef_memory_info rm, hm_info;
        if (hs == CLEF_OK && clef_model_memory(gpu_model, &rm) == CLEF_OK &&
            clef_model_memory(hm, &hm_info) == CLEF_OK)
            printf("%s host-embed: %d/%d answers equal to resident; model resident %llu bytes "
                   "(resident profile %llu)\n", dir, host_equal, n_host,
                   (unsigned long long)hm_info.resident, (unsigned long long)rm.resident);
        clef_context_free(hc);
        clef_model_free(hm);
    }

    /* every record in one call, packed into forwards: the answers each got alone, byte for byte */
    char **batch = calloc((size_t)n_records, sizeof *batch);
    int *statuses = calloc((size_t)n_records, sizeof *statuses);
    st = clef_context_decide_batch(gpu_ctx, (size_t)n_records, (const char *const *)records, lens,
                                   batch, statuses, NULL);
    CHECK_MSG(st == CLEF_OK, "%s: batch on cuda: %s", dir, clef_last_error());
    int batch_equal = 0;
    for (int i = 0; i < n_records; i++) {
        int same = statuses[i] == CLEF_OK && alone[i] && batch[i] && !strcmp(alone[i], batch[i]);
        CHECK_MSG(same, "%s record %d: the batch's answer differs from the record's alone on cuda\n"
                  " alone %s\n batch %s", dir, i, alone[i] ? alone[i] : "(none)",
                  batch[i] ? batch[i] : "(none)");
        batch_equal += same;
        clef_string_free(batch[i]);
        clef_string_free(alone[i]);
        free(records[i]);
    }

    clef_memory_info mm, cm;
    if (clef_model_memory(gpu_model, &mm) == CLEF_OK && clef_context_memory(gpu_ctx, &cm) == CLEF_OK)
        printf("%s on %s: model %llu bytes resident (weights %llu, peak %llu), context %llu resident "
               "(peak %llu); device %.2f of %.2f GiB in use\n",
               dir, clef_model_device(gpu_model), (unsigned long long)mm.resident,
               (unsigned long long)mm.weights, (unsigned long long)mm.peak,
               (unsigned long long)cm.resident, (unsigned long long)cm.peak,
               (double)mm.device_used / (1 << 30), (double)mm.device_total / (1 << 30));
    printf("%s: %d records (%d..%d tokens), %d questions: %d decisions differ, max |dp| %.3e, "
           "last hidden rel L2 max %.3e (bound %.0e); batch = alone for %d/%d\n",
           dir, n_records, min_tokens, max_tokens, questions, mismatches, dp_max, rel_max,
           DECIDE_HIDDEN_BOUND, batch_equal, n_records);
    tot->records += n_records;
    tot->questions += questions;
    tot->mismatches += mismatches;
    if (dp_max > tot->max_dp)
        tot->max_dp = dp_max;
    if (rel_max > tot->max_hidden)
        tot->max_hidden = rel_max;
    free(batch);
    free(statuses);
    free(records);
    free(lens);
    free(alone);
done:
    clef_context_free(gpu_ctx);
    clef_context_free(cpu_ctx);
    clef_model_free(gpu_model);
    clef_model_free(cpu_model);
}

int main(void) {
    if (strcmp(DECIDE_DEVICE, "cpu") && clef_backend_cuda_device_count() == 0) {
        printf("no CUDA GPU visible: SKIPPED\n");
        return GPU_TEST_SKIPPED;
    }
    totals tot = {0};
    compare_release("demo/clef-demo", DECIDE_N_DEMO, &tot);
    compare_release("tests/model/fixtures/tiny-sharded", DECIDE_N_SHARDED, &tot);
    CHECK_MSG(tot.records >= 200 || strcmp(DECIDE_DEVICE, "cuda"), "only %d records compared",
              tot.records);
    printf("all: %d records, %d questions, %d decisions differ, max |dp| %.3e, last hidden rel L2 "
           "max %.3e\n", tot.records, tot.questions, tot.mismatches, tot.max_dp, tot.max_hidden);
    return test_summary();
}
