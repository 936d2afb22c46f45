/*
 * test_cuda_quant_decide.c — whole decisions of the quantized releases on the CUDA backend
 * against the CPU backend of the SAME precision, through the public API: each release of
 * tests/quant/fixtures/decide/ (nf4, fp8, int8: made by bitsandbytes, compressed-tensors and
 * comfy-kitchen, scripts/quant/make_decide_fixtures.py) loaded twice with clef_model_load
 * (device "cpu" and "cuda"), its 200 seeded records (201 to 1,105 tokens, 1-4 questions)
 * decided on a context of each. The CPU side is the oracle-checked reference:
 * tests/quant/test_quant_decide holds it to transformers + each library.
 *
 * For every record:
 *  - our encoder's token ids equal the fixture's (encode_record()'s), and both backends read
 *    the same number of tokens;
 *  - identical decisions: the most probable option of every question is the same on both
 *    backends (the CPU's margin between its two best options is printed for a mismatch);
 *  - max |dp| over every option's probability <= 0.05 (far above the measured value, so a
 *    broken GPU head cannot hide behind equal argmaxes), printed;
 *  - last hidden state (every row of the record) relative L2, GPU vs CPU, <= 1e-2 (the CUDA
 *    GEMMs' bf16-input bound, as test_cuda_decide and test_cuda_quant_model).
 * Printed per precision: decisions identical n / n, the GPU's agreement with the libraries'
 * decisions (not checked here: the CPU's own agreement is test_quant_decide's business), max
 * |dp|, worst and mean hidden L2, and the model's and context's device memory (resident /
 * peak). The NF4 release keeps lm_head in its own lm-head.safetensors (listed by the index
 * and complete.json), so the joint head's option rows come from that file on the GPU too.
 *
 * The NF4 release's placement profiles: loaded with CLEF_PROFILE_16GB (embed_tokens in host
 * RAM, 16 GiB budget) it answers the first 40 records byte for byte as the resident GPU model;
 * a context whose workspace would take the device past 16 GiB is refused by
 * clef_context_create with CLEF_ERR_OUT_OF_MEMORY and a message naming the profile (never an
 * allocation failure in a record); model and context memory are printed for both profiles.
 *
 * Usage: test_cuda_quant_decide [nf4|fp8|int8|profiles ...] (default: all four); fp8:exact,
 * fp8:promo128, fp8:promo32, fp8:tc or fp8:fast (tensor cores with fast accumulation) runs the
 * FP8 release on that path instead of the default.
 * Exits 77 (ctest: SKIPPED) when no GPU is visible; never reports passed without one.
 */
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_quant.h"
#include "clef.h"
#include "encode_check.h"
#include "engine/engine_internal.h"
#include "gpu_decide_util.h"
#include "gpu_test_util.h"
#include "json_compact.h"
#include "test.h"

#include "core/io.h"
#include "json/json.h"
#include "model/qwen35.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device under test: "cuda". Building with -DQUANT_DECIDE_DEVICE='"cpu"' runs the whole
 * path with the CPU on both sides (a check of the test itself on a machine without a GPU). */
#ifndef QUANT_DECIDE_DEVICE
#define QUANT_DECIDE_DEVICE "cuda"
#endif

#define FIXTURES "tests/quant/fixtures/decide"
#define HIDDEN_BOUND 1e-2
#define DP_BOUND 0.05

static json_doc *read_json(const char *path) {
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    if (clef_read_file(path, (size_t)16 << 20, &text, &len) == CLEF_OK)
        json_parse(text, len, NULL, &doc, NULL);
    free(text);
    CHECK_MSG(doc != NULL, "cannot read %s", path);
    return doc;
}

/* step "fp8:exact", "fp8:promo128", "fp8:promo32" or "fp8:tc": the FP8 release on that path of
 * the CUDA backend (cuda_quant.h) instead of its default; "fp8": the default */
static void check_precision(const char *step, const json_value *records, int64_t max_length) {
    char release[256], path[320], precision[32];
    snprintf(precision, sizeof precision, "%s", step);
    const char *fp8_path = strchr(step, ':') ? strchr(step, ':') + 1 : NULL;
    if (fp8_path)
        precision[fp8_path - 1 - step] = 0;
    snprintf(release, sizeof release, FIXTURES "/%s", precision);
    snprintf(path, sizeof path, FIXTURES "/%s_logits.json", precision);
    json_doc *want_doc = read_json(path);
    const json_value *want_decisions = want_doc ? json_object_get(json_doc_root(want_doc), "decisions") : NULL;
    const size_t n = records->u.arr.count;
    CHECK_MSG(want_decisions && want_decisions->u.arr.count == n, "%s: the libraries' decisions do not match "
              "the %zu records", path, n);

    clef_model_params mp = clef_model_default_params();
    mp.max_length = (int32_t)max_length;
    mp.verify_hashes = 1; /* the NF4 release's complete.json lists lm-head.safetensors too */
    clef_model *cpu_model = NULL, *gpu_model = NULL;
    clef_context *cpu_ctx = NULL, *gpu_ctx = NULL;
    tok_tokenizer *tok = NULL;
    mp.device = "cpu";
    int st = clef_model_load(release, &mp, &cpu_model);
    CHECK_MSG(st == CLEF_OK, "%s on cpu: %s", release, clef_last_error());
    mp.device = QUANT_DECIDE_DEVICE;
    if (st == CLEF_OK) {
        st = clef_model_load(release, &mp, &gpu_model);
        CHECK_MSG(st == CLEF_OK, "%s on cuda: %s", release, clef_last_error());
    }
    if (st == CLEF_OK && (st = clef_context_create(cpu_model, NULL, &cpu_ctx)) != CLEF_OK)
        CHECK_MSG(0, "%s: cpu context: %s", release, clef_last_error());
    if (st == CLEF_OK && (st = clef_context_create(gpu_model, NULL, &gpu_ctx)) != CLEF_OK)
        CHECK_MSG(0, "%s: cuda context: %s", release, clef_last_error());
    if (st == CLEF_OK && fp8_path && !strcmp(QUANT_DECIDE_DEVICE, "cuda")) {
        clef_backend_cuda_set_fp8_tensor_cores(gpu_ctx->be, !strcmp(fp8_path, "tc")     ? CLEF_CUDA_FP8_TC_PROMOTED
                                                            : !strcmp(fp8_path, "fast") ? CLEF_CUDA_FP8_TC_FAST
                                                                                        : CLEF_CUDA_FP8_TC_OFF);
        clef_backend_cuda_set_fp8_promoted(gpu_ctx->be, !strcmp(fp8_path, "promo128")  ? CLEF_CUDA_FP8_PROMOTE_128
                                                        : !strcmp(fp8_path, "promo32") ? CLEF_CUDA_FP8_PROMOTE_32
                                                                                       : CLEF_CUDA_FP8_PROMOTE_OFF);
        printf("%s: FP8 path %s\n", precision, fp8_path);
    }
    if (st == CLEF_OK && (st = tok_load_dir(release, &tok)) != CLEF_OK)
        CHECK_MSG(0, "%s: tokenizer: %s", release, clef_last_error());

    size_t questions = 0, agree = 0, lib_agree = 0, run = 0, tokens = 0;
    double dp_max = 0, h_worst = 0, h_sum = 0;
    for (size_t i = 0; st == CLEF_OK && i < n; i++) {
        const json_value *rec = json_array_at(records, i);
        const char *name = json_get_string(json_object_get(rec, "name"));
        char *request = render_compact(json_object_get(rec, "request"));
        int32_t T = encode_check_ids(tok, name, request, (int32_t)max_length, json_object_get(rec, "ids"), NULL);
        clef_result *rc = NULL, *rg = NULL;
        int sc = clef_context_decide_result(cpu_ctx, request, strlen(request), &rc);
        CHECK_MSG(sc == CLEF_OK, "%s %s on cpu: %s", precision, name, clef_last_error());
        float *hc = sc == CLEF_OK ? last_hidden(cpu_ctx, rc->input_tokens) : NULL;
        int sg = clef_context_decide_result(gpu_ctx, request, strlen(request), &rg);
        CHECK_MSG(sg == CLEF_OK, "%s %s on cuda: %s", precision, name, clef_last_error());
        float *hg = sg == CLEF_OK ? last_hidden(gpu_ctx, rg->input_tokens) : NULL;
        if (sc == CLEF_OK && sg == CLEF_OK) {
            run++;
            tokens += (size_t)rc->input_tokens;
            CHECK_EQ_INT(rc->input_tokens, T);
            CHECK_EQ_INT(rg->input_tokens, rc->input_tokens);
            CHECK_EQ_INT(rg->n_questions, rc->n_questions);
            CHECK_MSG(hc && hg, "%s %s: last hidden state not read", precision, name);
            if (hc && hg && rg->input_tokens == rc->input_tokens) {
                size_t cnt = (size_t)rc->input_tokens * (size_t)qwen35_hidden_size(gpu_model->backbone);
                double rel = rel_l2(hg, hc, cnt);
                CHECK_MSG(rel <= HIDDEN_BOUND, "%s %s: last hidden rel L2 %.3e > %.0e", precision, name, rel,
                          HIDDEN_BOUND);
                h_worst = fmax(h_worst, rel), h_sum += rel;
            }
            const json_value *want_q = want_decisions ? json_array_at(want_decisions, i) : NULL;
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
                int bc = prob_argmax(qc->probabilities, qc->n_options), bg = prob_argmax(qg->probabilities, qg->n_options);
                agree += bc == bg;
                CHECK_MSG(bc == bg, "%s %s question '%s': cpu decides '%s' (p %.6f), cuda '%s' (p %.6f); the cpu's "
                          "margin to its second option is %.3e", precision, name, qc->id, qc->option_ids[bc],
                          qc->probabilities[bc], qg->option_ids[bg], qg->probabilities[bg],
                          prob_margin(qc->probabilities, qc->n_options));
                int64_t lib = -1;
                if (want_q && json_get_int64(json_array_at(want_q, (size_t)q), &lib))
                    lib_agree += lib == bg;
            }
        }
        free(hc), free(hg);
        clef_result_free(rc), clef_result_free(rg);
        free(request);
    }
    CHECK_MSG(dp_max <= DP_BOUND, "%s: max |dp| %.3e > %.2f", precision, dp_max, DP_BOUND);
    CHECK_MSG(run == n && n >= 200, "%s: %zu of %zu records decided on both backends", precision, run, n);
    printf("%-4s %zu records (%zu tokens), %zu questions: decisions identical GPU vs CPU %zu/%zu, GPU vs the "
           "library %zu/%zu; max |dp| %.3e; last hidden rel L2 worst %.3e, mean %.3e\n",
           precision, run, tokens, questions, agree, questions, lib_agree, questions, dp_max, h_worst,
           run ? h_sum / (double)run : 0.0);
    clef_memory_info mm = {0}, cm = {0};
    if (gpu_model && clef_model_memory(gpu_model, &mm) == CLEF_OK && gpu_ctx &&
        clef_context_memory(gpu_ctx, &cm) == CLEF_OK)
        printf("%-4s device memory: model resident %llu B (peak %llu), context resident %llu B (peak %llu); "
               "weights %llu B\n", precision, (unsigned long long)mm.resident, (unsigned long long)mm.peak,
               (unsigned long long)cm.resident, (unsigned long long)cm.peak,
               (unsigned long long)clef_model_weight_bytes(gpu_model));
    tok_free(tok);
    clef_context_free(cpu_ctx), clef_context_free(gpu_ctx);
    clef_model_free(cpu_model), clef_model_free(gpu_model);
    json_doc_free(want_doc);
}

/* The 16gb profile on the NF4 release: the same answers as resident; over-budget contexts
 * refused. */
static void check_profiles(const json_value *records, int64_t max_length) {
    const char *release = FIXTURES "/nf4";
    clef_model_params mp = clef_model_default_params();
    mp.max_length = (int32_t)max_length;
    mp.device = QUANT_DECIDE_DEVICE;
    clef_model *res = NULL, *small = NULL;
    int st = clef_model_load(release, &mp, &res);
    CHECK_MSG(st == CLEF_OK, "%s resident: %s", release, clef_last_error());
    mp.profile = CLEF_PROFILE_16GB;
    if (st == CLEF_OK) {
        st = clef_model_load(release, &mp, &small);
        CHECK_MSG(st == CLEF_OK, "%s 16gb: %s", release, clef_last_error());
    }
    clef_context *cr = NULL, *cs = NULL;
    if (st == CLEF_OK && (st = clef_context_create(res, NULL, &cr)) != CLEF_OK)
        CHECK_MSG(0, "resident context: %s", clef_last_error());
    if (st == CLEF_OK && (st = clef_context_create(small, NULL, &cs)) != CLEF_OK)
        CHECK_MSG(0, "16gb context: %s", clef_last_error());
    int same = 0, n = 0;
    for (size_t i = 0; st == CLEF_OK && i < 40 && i < records->u.arr.count; i++, n++) {
        char *request = render_compact(json_object_get(json_array_at(records, i), "request"));
        char *a = NULL, *b = NULL;
        int sa = clef_context_decide(cr, request, strlen(request), &a);
        int sb = clef_context_decide(cs, request, strlen(request), &b);
        CHECK_MSG(sa == CLEF_OK && sb == CLEF_OK, "record %zu: %s", i, clef_last_error());
        int eq = a && b && !strcmp(a, b);
        same += eq;
        CHECK_MSG(eq, "nf4 record %zu: the 16gb profile's answer differs from resident\n resident %s\n 16gb %s", i,
                  a ? a : "(none)", b ? b : "(none)");
        clef_string_free(a), clef_string_free(b);
        free(request);
    }
    clef_memory_info mr = {0}, cmr = {0}, ms = {0}, cms = {0};
    if (st == CLEF_OK && clef_model_memory(res, &mr) == CLEF_OK && clef_context_memory(cr, &cmr) == CLEF_OK &&
        clef_model_memory(small, &ms) == CLEF_OK && clef_context_memory(cs, &cms) == CLEF_OK)
        printf("nf4  profiles: 16gb answers equal to resident %d/%d; resident: model %llu B (peak %llu), context %llu B "
               "(peak %llu); 16gb: model %llu B (peak %llu), context %llu B (peak %llu)\n",
               same, n, (unsigned long long)mr.resident, (unsigned long long)mr.peak,
               (unsigned long long)cmr.resident, (unsigned long long)cmr.peak, (unsigned long long)ms.resident,
               (unsigned long long)ms.peak, (unsigned long long)cms.resident, (unsigned long long)cms.peak);
    /* a context sized past the budget: its device bytes per token from two fresh contexts
     * (8,192 and 32,768 tokens), then 20 GiB worth of tokens. Both sizes are past the MLP's
     * row chunk (QWEN35_MLP_ROWS, 4,096): below it the [T, intermediate] buffers grow with T
     * and above it they do not, so a slope measured below it overstates the bytes per token
     * of a large context. */
    if (st == CLEF_OK && !strcmp(QUANT_DECIDE_DEVICE, "cuda")) {
        clef_context_params p1 = clef_context_default_params(), p4 = p1;
        p1.max_tokens = 8192, p4.max_tokens = 32768;
        clef_context *c1 = NULL, *c4 = NULL;
        clef_memory_info m1 = {0}, m4 = {0};
        CHECK_EQ_INT(clef_context_create(small, &p1, &c1), CLEF_OK);
        CHECK_EQ_INT(clef_context_create(small, &p4, &c4), CLEF_OK);
        if (c1 && c4) {
            clef_context_memory(c1, &m1);
            clef_context_memory(c4, &m4);
        }
        clef_context_free(c1), clef_context_free(c4);
        double per_token = m4.resident > m1.resident ? (double)(m4.resident - m1.resident) / 24576.0 : 1.0;
        double want = 20.0 * 1073741824.0 / per_token;
        if (want < 2e9) {
            clef_context_params cp = clef_context_default_params();
            cp.max_tokens = (int32_t)want;
            clef_context *big = NULL;
            int sb = clef_context_create(small, &cp, &big);
            const char *msg = clef_last_error();
            printf("nf4  16gb context of %d tokens: status %d (%s)\n", cp.max_tokens, sb, sb ? msg : "created");
            CHECK_MSG(sb == CLEF_ERR_OUT_OF_MEMORY && big == NULL && strstr(msg, "profile 16gb"),
                      "a 16gb context of %d tokens (~20 GiB): status %d, '%s'", cp.max_tokens, sb, msg);
            clef_context_free(big);
        } else {
            printf("nf4  16gb refusal not tried: %.3g tokens needed\n", want);
        }
    }
    clef_context_free(cr), clef_context_free(cs);
    clef_model_free(res), clef_model_free(small);
}

int main(int argc, char **argv) {
    if (strcmp(QUANT_DECIDE_DEVICE, "cpu") && clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return GPU_TEST_SKIPPED;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    clef_log_set(NULL, NULL);
    json_doc *recs_doc = read_json(FIXTURES "/records.json");
    const json_value *records = recs_doc ? json_object_get(json_doc_root(recs_doc), "records") : NULL;
    int64_t max_length = 0;
    if (recs_doc)
        json_get_int64(json_object_get(json_doc_root(recs_doc), "max_length"), &max_length);
    CHECK_MSG(records && records->u.arr.count >= 200 && max_length > 0, "%s: no records", FIXTURES "/records.json");
    if (records) {
        static const char *const all[] = {"nf4", "fp8", "int8", "profiles"};
        int n_steps = argc > 1 ? argc - 1 : 4;
        for (int p = 0; p < n_steps; p++) {
            const char *step = argc > 1 ? argv[p + 1] : all[p];
            if (!strcmp(step, "profiles"))
                check_profiles(records, max_length);
            else
                check_precision(step, records, max_length);
        }
    }
    json_doc_free(recs_doc);
    return test_summary();
}
