/*
 * test_joint_head.c — the joint schema head against the reference JointSchemaHead.
 *
 * Fixtures (tests/head/fixtures/<case>.safetensors) are written by scripts/head/make_fixtures.py
 * from the release's joint_schema_model.py: random bf16 head weights, random fp32 hidden
 * states, token ids, spans, lm_head rows, and the oracle's logits and probabilities. For each
 * case this test loads the head through the same loader a release uses, runs the forward on
 * the CPU backend, and requires, against the oracle evaluated exactly (float64 arithmetic on
 * the same bf16 weights and fp32 inputs),
 *   - logits: relative L2 error (||ours - oracle|| / ||oracle||) <= 1e-5,
 *   - probabilities: max |ours - oracle| <= 1e-6,
 * and prints the same distances for the oracle's own float32 PyTorch run next to ours (on the
 * clamp case, where logits reach ~50, float32 rounding alone moves probabilities by ~1e-6, so
 * the exact run is the reference; see scripts/head/make_fixtures.py).
 *   - the same answer from a second run on the same workspace (no state leaks between calls),
 *   - the same bits on the guarded CPU backend, whose buffers the host cannot touch.
 * It also checks the refusals: a missing tensor, a tensor of the wrong shape, a config the
 * head cannot run, spans outside the record, an id outside the vocabulary, over-limit records.
 */
#include "st_fixture.h"
#include "test.h"

#include "clef.h"

#include "backend/backend.h"
#include "core/numeric.h"
#include "model/joint_head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CASES[] = {"one_question", "mixed_types", "q64", "opt255",
                                    "wide_heads16"};

typedef struct head_case {
    st_fixture fx;
    clef_head_config cfg;
    clef_encoded_record rec;
    clef_encoded_question *questions;
    clef_span *spans;
    int32_t *ids;
    const float *hidden;
    const uint16_t *lm_head; /* bf16 [vocab, D] */
    int64_t vocab;
    const float *expected_logits, *expected_probs;
    const float *fp32_logits, *fp32_probs; /* the oracle's float32 PyTorch run */
    int64_t n_options;
} head_case;

static int64_t cfg_int(const json_value *o, const char *key) {
    int64_t v = -1;
    json_get_int64(json_object_get(o, key), &v);
    return v;
}

static int case_load(head_case *c, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "tests/head/fixtures/%s.safetensors", name);
    memset(c, 0, sizeof *c);
    if (st_fixture_load(&c->fx, path))
        return -1;
    const char *cfg_text = st_fixture_meta(&c->fx, "config");
    const char *rec_text = st_fixture_meta(&c->fx, "record");
    json_doc *cfg_doc = NULL, *rec_doc = NULL;
    if (!cfg_text || !rec_text || json_parse(cfg_text, strlen(cfg_text), NULL, &cfg_doc, NULL) ||
        json_parse(rec_text, strlen(rec_text), NULL, &rec_doc, NULL))
        return -1;
    const json_value *cj = json_doc_root(cfg_doc);
    c->cfg = (clef_head_config){.hidden_size = cfg_int(cj, "hidden_size"),
                                .width = cfg_int(cj, "width"),
                                .routing_layers = cfg_int(cj, "routing_layers"),
                                .layers = cfg_int(cj, "layers"),
                                .heads = cfg_int(cj, "heads"),
                                .feedforward = cfg_int(cj, "feedforward")};
    size_t n_bytes;
    const int32_t *ids = st_fixture_data(&c->fx, "input.ids", &n_bytes);
    c->rec.n_tokens = (int32_t)(n_bytes / 4);
    c->ids = malloc(n_bytes);
    memcpy(c->ids, ids, n_bytes);
    c->rec.ids = c->ids;
    c->hidden = st_fixture_data(&c->fx, "input.hidden", NULL);
    const clef_tensor_info *lm = st_fixture_find(&c->fx, "lm_head.weight");
    c->vocab = lm->shape[0];
    c->lm_head = (const uint16_t *)st_fixture_data(&c->fx, "lm_head.weight", NULL);
    c->expected_logits = st_fixture_data(&c->fx, "expected.logits", &n_bytes);
    c->n_options = (int64_t)(n_bytes / 4);
    c->expected_probs = st_fixture_data(&c->fx, "expected.probs", NULL);
    c->fp32_logits = st_fixture_data(&c->fx, "oracle_fp32.logits", NULL);
    c->fp32_probs = st_fixture_data(&c->fx, "oracle_fp32.probs", NULL);

    const json_value *qs = json_object_get(json_doc_root(rec_doc), "questions");
    c->rec.n_questions = (int32_t)qs->u.arr.count;
    c->questions = calloc(qs->u.arr.count, sizeof *c->questions);
    c->spans = calloc((size_t)c->n_options, sizeof *c->spans);
    c->rec.questions = c->questions;
    int64_t k = 0;
    for (size_t q = 0; q < qs->u.arr.count; q++) {
        const json_value *qj = json_array_at(qs, q);
        const json_value *span = json_object_get(qj, "span");
        const json_value *opts = json_object_get(qj, "options");
        clef_encoded_question *Q = &c->questions[q];
        Q->type = (clef_question_type)cfg_int(qj, "type");
        int64_t b = 0, e = 0;
        json_get_int64(json_array_at(span, 0), &b);
        json_get_int64(json_array_at(span, 1), &e);
        Q->instruction = (clef_span){(int32_t)b, (int32_t)e};
        Q->n_options = (int32_t)opts->u.arr.count;
        Q->options = c->spans + k;
        for (size_t o = 0; o < opts->u.arr.count; o++, k++) {
            json_get_int64(json_array_at(json_array_at(opts, o), 0), &b);
            json_get_int64(json_array_at(json_array_at(opts, o), 1), &e);
            c->spans[k] = (clef_span){(int32_t)b, (int32_t)e};
        }
    }
    json_doc_free(cfg_doc);
    json_doc_free(rec_doc);
    return k == c->n_options ? 0 : -1;
}

static void case_free(head_case *c) {
    free(c->questions);
    free(c->spans);
    free(c->ids);
    st_fixture_free(&c->fx);
}

static int read_lm_row(void *ctx, int32_t id, float *dst) {
    const head_case *c = ctx;
    const int64_t D = c->cfg.hidden_size;
    for (int64_t j = 0; j < D; j++)
        dst[j] = clef_bf16_to_f32(c->lm_head[id * D + j]);
    return CLEF_OK;
}

static clef_head_limits case_limits(const head_case *c) {
    return (clef_head_limits){.max_tokens = c->rec.n_tokens, .max_questions = c->rec.n_questions,
                              .max_options = c->n_options};
}

/* Run the head over the case's record (hidden states uploaded to backend memory). */
static int run_head(clef_backend *be, clef_joint_head *head, const head_case *c,
                    float *logits, float *probs) {
    size_t bytes = (size_t)c->rec.n_tokens * (size_t)c->cfg.hidden_size * sizeof(float);
    float *hidden = clef_backend_alloc(be, bytes);
    int st = clef_backend_write(be, hidden, c->hidden, bytes);
    CHECK(hidden && st == CLEF_OK);
    clef_lm_row_reader lm = {.ctx = (void *)c, .vocab_size = c->vocab, .read_row = read_lm_row};
    st = clef_joint_head_forward(head, hidden, c->cfg.hidden_size, &c->rec, &lm, logits,
                                 probs);
    clef_backend_release(be, hidden);
    return st;
}

/* Distances of (logits, probs) from the case's exact oracle values. */
static void compare(const float *logits, const float *probs, const head_case *c, double *rel,
                    double *max_logit_diff, double *max_prob_diff) {
    double num = 0, den = 0;
    *max_logit_diff = *max_prob_diff = 0;
    for (int64_t i = 0; i < c->n_options; i++) {
        double d = (double)logits[i] - c->expected_logits[i];
        num += d * d;
        den += (double)c->expected_logits[i] * c->expected_logits[i];
        *max_logit_diff = fmax(*max_logit_diff, fabs(d));
        *max_prob_diff = fmax(*max_prob_diff, fabs((double)probs[i] - c->expected_probs[i]));
    }
    *rel = sqrt(num / (den > 0 ? den : 1));
}

static void check_case(clef_backend *be, const char *name) {
    head_case c;
    if (case_load(&c, name)) {
        CHECK_MSG(0, "fixture %s did not load (run scripts/head/make_fixtures.py)", name);
        return;
    }
    clef_tensor_source src = st_fixture_source(&c.fx);
    clef_head_limits lim = case_limits(&c);
    clef_joint_head *head = NULL;
    int st = clef_joint_head_load(be, &c.cfg, &src, &lim, &head);
    CHECK_MSG(st == CLEF_OK, "%s: load: %s", name, clef_last_error());
    if (st) {
        case_free(&c);
        return;
    }
    float *logits = calloc((size_t)c.n_options, sizeof(float));
    float *probs = calloc((size_t)c.n_options, sizeof(float));
    float *logits2 = calloc((size_t)c.n_options, sizeof(float));
    st = run_head(be, head, &c, logits, probs);
    CHECK_MSG(st == CLEF_OK, "%s: forward: %s", name, clef_last_error());

    double rel, max_logit_diff, max_prob_diff, rel32, max_logit_diff32, max_prob_diff32;
    compare(logits, probs, &c, &rel, &max_logit_diff, &max_prob_diff);
    compare(c.fp32_logits, c.fp32_probs, &c, &rel32, &max_logit_diff32, &max_prob_diff32);
    printf("%-13s T=%5d Q=%2d O=%3lld | ours: logits rel L2 %.1e max abs %.1e, probs max abs "
           "%.1e | torch fp32: %.1e %.1e %.1e | first logit %.7f exact %.7f\n", name,
           c.rec.n_tokens, c.rec.n_questions, (long long)c.n_options, rel, max_logit_diff,
           max_prob_diff, rel32, max_logit_diff32, max_prob_diff32, logits[0],
           c.expected_logits[0]);
    CHECK_MSG(rel <= 1e-5, "%s: logits relative error %.3e > 1e-5", name, rel);
    CHECK_MSG(max_prob_diff <= 1e-6, "%s: probabilities max abs diff %.3e > 1e-6", name,
              max_prob_diff);

    /* same workspace, second run: identical */
    st = run_head(be, head, &c, logits2, NULL);
    CHECK(st == CLEF_OK && memcmp(logits, logits2, (size_t)c.n_options * sizeof(float)) == 0);

    /* the guarded CPU backend (buffers the host cannot touch): the same bits */
    clef_backend_params gp = clef_backend_default_params();
    gp.n_threads = 2;
    gp.guard_host_access = 1;
    gp.guard_arena_bytes = (size_t)1 << 30;
    clef_backend *guarded = NULL;
    clef_joint_head *guarded_head = NULL;
    float *probs2 = calloc((size_t)c.n_options, sizeof(float));
    CHECK_EQ_INT(clef_backend_cpu_create(&gp, &guarded), CLEF_OK);
    CHECK_EQ_INT(clef_joint_head_load(guarded, &c.cfg, &src, &lim, &guarded_head), CLEF_OK);
    memset(logits2, 0, (size_t)c.n_options * sizeof(float));
    if (guarded_head)
        CHECK_EQ_INT(run_head(guarded, guarded_head, &c, logits2, probs2), CLEF_OK);
    CHECK_MSG(memcmp(logits, logits2, (size_t)c.n_options * sizeof(float)) == 0 &&
              memcmp(probs, probs2, (size_t)c.n_options * sizeof(float)) == 0,
              "%s: the guarded backend's answers differ from the plain one's", name);
    clef_joint_head_free(guarded_head);
    clef_backend_free(guarded);
    free(probs2);

    free(logits);
    free(probs);
    free(logits2);
    clef_joint_head_free(head);
    case_free(&c);
}

/* A source that hides one tensor or lies about one shape, to check the loader's refusals. */
typedef struct damaged_source {
    st_fixture *fx;
    const char *hide;
    const char *reshape;
    clef_tensor_info reshaped;
} damaged_source;

static const clef_tensor_info *damaged_find(void *ctx, const char *name) {
    damaged_source *d = ctx;
    if (d->hide && !strcmp(name, d->hide))
        return NULL;
    const clef_tensor_info *t = st_fixture_find(d->fx, name);
    if (t && d->reshape && !strcmp(name, d->reshape)) {
        d->reshaped = *t;
        d->reshaped.shape[0] += 1;
        return &d->reshaped;
    }
    return t;
}

static int damaged_read(void *ctx, const clef_tensor_info *t, void *dst) {
    damaged_source *d = ctx;
    memcpy(dst, d->fx->bytes + t->offset, (size_t)t->n_bytes);
    return CLEF_OK;
}

static void check_refusals(clef_backend *be) {
    head_case c;
    if (case_load(&c, "mixed_types")) {
        CHECK_MSG(0, "fixture mixed_types did not load");
        return;
    }
    clef_head_limits lim = case_limits(&c);
    clef_joint_head *head = NULL;

    damaged_source d = {.fx = &c.fx, .hide = "head.layers.1.multihead_attn.in_proj_bias"};
    clef_tensor_source src = {.ctx = &d, .find = damaged_find, .read = damaged_read};
    CHECK_EQ_INT(clef_joint_head_load(be, &c.cfg, &src, &lim, &head), CLEF_ERR_TENSOR_MISSING);
    CHECK(head == NULL && strstr(clef_last_error(), "head.layers.1.multihead_attn.in_proj_bias"));

    d = (damaged_source){.fx = &c.fx, .reshape = "head.evidence_layers.0.feedforward.3.weight"};
    CHECK_EQ_INT(clef_joint_head_load(be, &c.cfg, &src, &lim, &head), CLEF_ERR_TENSOR_SHAPE);
    CHECK(strstr(clef_last_error(), "evidence_layers.0.feedforward.3.weight") != NULL);

    clef_head_config bad = c.cfg;
    bad.heads = 3; /* 64 % 3 != 0 */
    src = st_fixture_source(&c.fx);
    CHECK_EQ_INT(clef_joint_head_load(be, &bad, &src, &lim, &head), CLEF_ERR_CONFIG_INVALID);
    bad = c.cfg;
    bad.feedforward = 100; /* the file says 128 */
    CHECK_EQ_INT(clef_joint_head_load(be, &bad, &src, &lim, &head), CLEF_ERR_TENSOR_SHAPE);

    CHECK_EQ_INT(clef_joint_head_load(be, &c.cfg, &src, &lim, &head), CLEF_OK);
    float *logits = calloc((size_t)c.n_options, sizeof(float));
    clef_span saved = c.spans[3];
    c.spans[3] = (clef_span){saved.begin, c.rec.n_tokens + 1};
    CHECK_EQ_INT(run_head(be, head, &c, logits, NULL), CLEF_ERR_REQUEST_INVALID);
    c.spans[3] = (clef_span){saved.end, saved.end};
    CHECK_EQ_INT(run_head(be, head, &c, logits, NULL), CLEF_ERR_REQUEST_INVALID);
    c.spans[3] = saved;
    int32_t saved_id = c.ids[saved.begin];
    c.ids[saved.begin] = (int32_t)c.vocab;
    CHECK_EQ_INT(run_head(be, head, &c, logits, NULL), CLEF_ERR_REQUEST_INVALID);
    CHECK(strstr(clef_last_error(), "vocabulary") != NULL);
    c.ids[saved.begin] = saved_id;
    CHECK_EQ_INT(run_head(be, head, &c, logits, NULL), CLEF_OK);
    clef_joint_head_free(head);

    lim.max_options -= 1;
    CHECK_EQ_INT(clef_joint_head_load(be, &c.cfg, &src, &lim, &head), CLEF_OK);
    CHECK_EQ_INT(run_head(be, head, &c, logits, NULL), CLEF_ERR_REQUEST_TOO_LONG);
    clef_joint_head_free(head);
    lim = case_limits(&c);
    lim.max_tokens -= 1;
    CHECK_EQ_INT(clef_joint_head_load(be, &c.cfg, &src, &lim, &head), CLEF_OK);
    CHECK_EQ_INT(run_head(be, head, &c, logits, NULL), CLEF_ERR_REQUEST_TOO_LONG);
    clef_joint_head_free(head);
    free(logits);
    case_free(&c);
}

int main(void) {
    clef_backend_params bp = clef_backend_default_params();
    bp.n_threads = 2;
    clef_backend *be = NULL;
    if (clef_backend_cpu_create(&bp, &be) != CLEF_OK) {
        fprintf(stderr, "cpu backend: %s\n", clef_last_error());
        return 1;
    }
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        check_case(be, CASES[i]);
    check_refusals(be);
    clef_backend_free(be);
    return test_summary();
}
