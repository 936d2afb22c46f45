/*
 * test_host_free.c — the model never touches backend memory from the host.
 *
 * The guarded CPU backend (clef_backend_params.guard_host_access) maps its buffers
 * inaccessible except inside its own ops, reads and writes. This test
 *   1. shows the guard catches a host access: a child process that dereferences a guarded
 *      buffer dies by a signal, while one that only uses clef_backend_write/read exits 0;
 *   2. runs the Qwen3.5 backbone and the joint head of each backbone fixture release
 *      (tests/backbone/fixtures/<case>, from scripts/backbone/make_fixtures.py) on the plain
 *      and on the guarded CPU backend — two packed sequences through the backbone, then the
 *      head over each sequence's final hidden states (still in backend memory) — and requires
 *      the final hidden states, the logits and the probabilities to be byte-identical.
 *      Inputs are deterministic pseudo-random token ids, spans and lm_head rows: what is
 *      tested is that the two backends agree bit for bit;
 *   3. runs the oracle records of tests/model/fixtures/e2e_sharded.json and e2e.json (the
 *      tiny sharded release and the demo release, 5 records each, 215 to 2,048 tokens,
 *      written by scripts/head/make_e2e_fixtures.py from the reference
 *      encode_record + transformers backbone + JointSchemaHead) through our encoder, the
 *      backbone as one packed batch, and the head with the release's own lm_head rows, on the
 *      guarded backend: probabilities within 1e-6 and logits within relative L2 1e-5 of the
 *      float64 oracle (test_model_decide's tolerances), and byte-identical to the plain
 *      backend.
 */
#include "test.h"
#include "json_compact.h"

#include "clef.h"

#include "backend/backend.h"
#include "core/io.h"
#include "core/numeric.h"
#include "core/strbuf.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"
#include "json/render.h"
#include "tokenizer/tokenizer.h"
#include "model/joint_head.h"
#include "model/qwen35.h"
#include "model/tensor_source.h"
#include "release/release.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const CASES[] = {"a_pattern", "b_real_heads", "c_odd"};

static clef_backend *make_backend(int guarded) {
    clef_backend_params p = clef_backend_default_params();
    p.n_threads = 2;
    p.guard_host_access = guarded;
    p.guard_arena_bytes = (size_t)1 << 30;
    clef_backend *be = NULL;
    int st = clef_backend_cpu_create(&p, &be);
    CHECK_MSG(st == CLEF_OK, "backend (guarded %d): %s", guarded, clef_last_error());
    return be;
}

/* 1. In a child: 0 = use the buffer through write/read only, 1 = also dereference it. */
static void child_touch(int dereference) {
    clef_backend *be = make_backend(1);
    float *buf = clef_backend_alloc(be, 256 * sizeof(float));
    float host[256] = {0}, back[256];
    host[7] = 42.0f;
    if (!buf || clef_backend_write(be, buf, host, sizeof host) ||
        clef_backend_read(be, back, buf, sizeof back) || back[7] != 42.0f)
        _exit(3);
    if (dereference) {
        /* the fault report (AddressSanitizer's or none) is expected: keep it out of the log */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        volatile float v = buf[7]; /* the host access the guard must catch */
        (void)v;
        _exit(4); /* not caught */
    }
    clef_backend_release(be, buf);
    clef_backend_free(be);
    _exit(0);
}

static int run_child(int dereference) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        child_touch(dereference);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return status;
}

static void check_guard_catches(void) {
    int clean = run_child(0);
    CHECK_MSG(clean >= 0 && WIFEXITED(clean) && WEXITSTATUS(clean) == 0,
              "write/read through the guarded backend failed (status %d)", clean);
    /* caught: killed by SIGSEGV (plain build) or stopped by AddressSanitizer's SEGV handler
     * (abort, or its exit code 1); exit 4 means the read went through */
    int touched = run_child(1);
    int caught = touched >= 0 && (WIFSIGNALED(touched) ||
                                  (WIFEXITED(touched) && WEXITSTATUS(touched) == 1));
    CHECK_MSG(caught, "a host dereference of a guarded buffer was not caught (status %d)",
              touched);
    printf("guard: write/read-only child exits %d; the dereferencing child %s %d\n",
           WIFEXITED(clean) ? WEXITSTATUS(clean) : -1,
           WIFSIGNALED(touched) ? "is killed by signal" : "exits with",
           WIFSIGNALED(touched) ? WTERMSIG(touched) : WEXITSTATUS(touched));
}

/* 2. The backbone and the head, on one backend. */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

typedef struct lm_fake {
    int64_t vocab, D;
} lm_fake;

/* A deterministic pseudo-random row per id (the real rows are tested in tests/head). */
static int fake_row(void *ctx, int32_t id, float *dst) {
    const lm_fake *lm = ctx;
    uint32_t s = (uint32_t)id * 2654435761u + 12345u;
    for (int64_t j = 0; j < lm->D; j++) {
        s = s * 1664525u + 1013904223u;
        dst[j] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 23);
    }
    return CLEF_OK;
}

typedef struct run_result {
    float *hidden;          /* [total, D] read back */
    float *logits, *probs;  /* [n_seq * n_options] */
} run_result;

enum { N_SEQ = 2, N_Q = 3, N_OPT_PER_Q = 3, N_OPT = N_Q * N_OPT_PER_Q };

static int run_model(clef_backend *be, const clef_release *rel, const int64_t *seq_start,
                     const int32_t *ids, clef_encoded_record *recs, run_result *out) {
    const clef_release_config *cfg = clef_release_get_config(rel);
    const int64_t total = seq_start[N_SEQ], D = cfg->text.hidden_size;
    qwen35_params qp = qwen35_default_params();
    qp.max_seq_len = total;
    qp.max_tokens = total;
    qwen35_model *m = NULL;
    clef_joint_head *head = NULL;
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    clef_head_limits hl = {.max_tokens = total, .max_questions = N_Q, .max_options = N_OPT};
    qwen35_state *rs = NULL;
    int st = qwen35_load(&cfg->text, &src, be, &m);
    if (!st)
        st = qwen35_state_create(m, be, &qp, &rs);
    if (!st)
        st = clef_joint_head_load(be, &cfg->head, &src, &hl, &head);
    if (!st)
        st = qwen35_forward(m, rs, N_SEQ, seq_start, ids, NULL);
    if (!st)
        st = clef_backend_read(be, out->hidden, qwen35_state_output(rs),
                               (size_t)(total * D) * sizeof(float));
    lm_fake lf = {.vocab = cfg->text.vocab_size, .D = D};
    clef_lm_row_reader lm = {.ctx = &lf, .vocab_size = lf.vocab, .read_row = fake_row};
    for (int s = 0; !st && s < N_SEQ; s++)
        st = clef_joint_head_forward(head, qwen35_state_output(rs) + seq_start[s] * D, D, &recs[s], &lm,
                                     out->logits + s * N_OPT, out->probs + s * N_OPT);
    clef_joint_head_free(head);
    qwen35_state_free(rs);
    qwen35_free(m);
    return st;
}

static void check_case(const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/backbone/fixtures/%s", name);
    clef_release *rel = NULL;
    int st = clef_release_open(dir, NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "%s: release refused: %s", dir, clef_last_error());
    if (st)
        return;
    const clef_release_config *cfg = clef_release_get_config(rel);
    const int64_t D = cfg->text.hidden_size, V = cfg->text.vocab_size;
    const int64_t seq_start[N_SEQ + 1] = {0, 70, 70 + 45};
    const int64_t total = seq_start[N_SEQ];
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
    for (int64_t t = 0; t < total; t++)
        ids[t] = (int32_t)(next_u32() % (uint32_t)V);
    /* per sequence: 3 questions of 3 options over disjoint spans, one option span long */
    clef_encoded_record recs[N_SEQ];
    clef_encoded_question qs[N_SEQ][N_Q];
    clef_span spans[N_SEQ][N_OPT];
    for (int s = 0; s < N_SEQ; s++) {
        int32_t T = (int32_t)(seq_start[s + 1] - seq_start[s]), at = 1;
        for (int q = 0; q < N_Q; q++) {
            qs[s][q].type = (clef_question_type)(q % 3);
            qs[s][q].instruction = (clef_span){at, at + 4};
            at += 4;
            qs[s][q].n_options = N_OPT_PER_Q;
            qs[s][q].options = spans[s] + q * N_OPT_PER_Q;
            for (int o = 0; o < N_OPT_PER_Q; o++) {
                int32_t len = (q == 1 && o == 2) ? 9 : 1 + o;
                spans[s][q * N_OPT_PER_Q + o] = (clef_span){at, at + len};
                at += len;
            }
        }
        CHECK(at <= T);
        recs[s] = (clef_encoded_record){.ids = ids + seq_start[s], .n_tokens = T,
                                        .n_questions = N_Q, .questions = qs[s]};
    }
    run_result r[2];
    for (int g = 0; g < 2; g++) {
        r[g].hidden = calloc((size_t)(total * D), sizeof(float));
        r[g].logits = calloc(N_SEQ * N_OPT, sizeof(float));
        r[g].probs = calloc(N_SEQ * N_OPT, sizeof(float));
        clef_backend *be = make_backend(g);
        st = be ? run_model(be, rel, seq_start, ids, recs, &r[g]) : CLEF_ERR_INVALID_ARG;
        CHECK_MSG(st == CLEF_OK, "%s: %s backend: %s", name, g ? "guarded" : "plain",
                  clef_last_error());
        clef_backend_free(be);
    }
    int same_hidden = !memcmp(r[0].hidden, r[1].hidden, sizeof(float) * (size_t)(total * D));
    int same_logits = !memcmp(r[0].logits, r[1].logits, sizeof(float) * N_SEQ * N_OPT);
    int same_probs = !memcmp(r[0].probs, r[1].probs, sizeof(float) * N_SEQ * N_OPT);
    printf("%-13s T=%lld+%lld D=%lld | hidden %s, logits %s, probs %s | first logit %.7f %.7f\n",
           name, (long long)seq_start[1], (long long)(total - seq_start[1]), (long long)D,
           same_hidden ? "identical" : "DIFFER", same_logits ? "identical" : "DIFFER",
           same_probs ? "identical" : "DIFFER", r[0].logits[0], r[1].logits[0]);
    CHECK_MSG(same_hidden, "%s: final hidden states differ between plain and guarded", name);
    CHECK_MSG(same_logits, "%s: logits differ between plain and guarded", name);
    CHECK_MSG(same_probs, "%s: probabilities differ between plain and guarded", name);
    double psum = 0;
    for (int i = 0; i < N_OPT_PER_Q; i++)
        psum += r[1].probs[i];
    CHECK_MSG(psum > 0.999 && psum < 1.001, "%s: first question's probabilities sum to %f",
              name, psum);
    for (int g = 0; g < 2; g++) {
        free(r[g].hidden);
        free(r[g].logits);
        free(r[g].probs);
    }
    free(ids);
    clef_release_free(rel);
}

/* 3. Oracle records, encoded by us, on the guarded backend. */

enum { MAX_RECORDS = 8 };

typedef struct lm_table {
    int64_t vocab, D;
    float *rows; /* [vocab, D] fp32, host: the release's lm_head */
} lm_table;

static int table_row(void *ctx, int32_t id, float *dst) {
    const lm_table *lm = ctx;
    memcpy(dst, lm->rows + (int64_t)id * lm->D, sizeof(float) * (size_t)lm->D);
    return CLEF_OK;
}

static int load_lm_head(const clef_release *rel, lm_table *lm) {
    const clef_release_config *cfg = clef_release_get_config(rel);
    const clef_tensor_info *t = clef_release_find(rel, "lm_head.weight");
    if (!t && cfg->text.tie_word_embeddings)
        t = clef_release_find(rel, "text.embed_tokens.weight");
    if (!t || t->n_dims != 2 || (t->dtype != CLEF_DTYPE_BF16 && t->dtype != CLEF_DTYPE_F32))
        return -1;
    lm->vocab = t->shape[0];
    lm->D = t->shape[1];
    void *raw = malloc((size_t)t->n_bytes);
    lm->rows = malloc(sizeof(float) * (size_t)(lm->vocab * lm->D));
    int st = raw && lm->rows ? clef_release_read(rel, t, raw) : -1;
    for (int64_t i = 0; !st && i < lm->vocab * lm->D; i++)
        lm->rows[i] = t->dtype == CLEF_DTYPE_BF16 ? clef_bf16_to_f32(((uint16_t *)raw)[i])
                                                  : ((float *)raw)[i];
    free(raw);
    return st;
}

static int64_t record_options(const clef_encoded_record *r) {
    int64_t n = 0;
    for (int32_t q = 0; q < r->n_questions; q++)
        n += r->questions[q].n_options;
    return n;
}

/* Backbone over all records packed, then the head per record; logits and probs [n, O_i]. */
static int decide_all(clef_backend *be, const clef_release *rel, const clef_encoded_record *recs,
                      int n, const lm_table *lm, float **logits, float **probs) {
    const clef_release_config *cfg = clef_release_get_config(rel);
    int64_t seq_start[MAX_RECORDS + 1] = {0}, max_T = 0, max_Q = 0, max_O = 0;
    for (int i = 0; i < n; i++) {
        seq_start[i + 1] = seq_start[i] + recs[i].n_tokens;
        max_T = recs[i].n_tokens > max_T ? recs[i].n_tokens : max_T;
        max_Q = recs[i].n_questions > max_Q ? recs[i].n_questions : max_Q;
        max_O = record_options(&recs[i]) > max_O ? record_options(&recs[i]) : max_O;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)seq_start[n]);
    for (int i = 0; i < n; i++)
        memcpy(ids + seq_start[i], recs[i].ids, sizeof(int32_t) * (size_t)recs[i].n_tokens);
    qwen35_params qp = qwen35_default_params();
    qp.max_seq_len = max_T;
    qp.max_tokens = seq_start[n];
    qwen35_model *m = NULL;
    clef_joint_head *head = NULL;
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    clef_head_limits hl = {.max_tokens = max_T, .max_questions = max_Q, .max_options = max_O};
    qwen35_state *rs = NULL;
    int st = qwen35_load(&cfg->text, &src, be, &m);
    if (!st)
        st = qwen35_state_create(m, be, &qp, &rs);
    if (!st)
        st = clef_joint_head_load(be, &cfg->head, &src, &hl, &head);
    if (!st)
        st = qwen35_forward(m, rs, n, seq_start, ids, NULL);
    clef_lm_row_reader reader = {.ctx = (void *)lm, .vocab_size = lm->vocab,
                                 .read_row = table_row};
    const int64_t D = cfg->text.hidden_size;
    for (int i = 0; !st && i < n; i++)
        st = clef_joint_head_forward(head, qwen35_state_output(rs) + seq_start[i] * D, D, &recs[i],
                                     &reader, logits[i], probs[i]);
    clef_joint_head_free(head);
    qwen35_state_free(rs);
    qwen35_free(m);
    free(ids);
    return st;
}

static void check_oracle_records(const char *fixture) {
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    int st = clef_read_file(fixture, (size_t)64 << 20, &text, &len);
    if (!st)
        st = json_parse(text, len, NULL, &doc, NULL);
    CHECK_MSG(st == CLEF_OK, "%s: %s", fixture, clef_last_error());
    if (st) {
        free(text);
        return;
    }
    const json_value *root = json_doc_root(doc);
    const char *dir = json_get_string(json_object_get(root, "release"));
    int64_t max_length = 0;
    json_get_int64(json_object_get(root, "max_length"), &max_length);
    const json_value *records = json_object_get(root, "records");
    const int n = (int)records->u.arr.count;
    printf("%s (release %s, %d records in one packed batch):\n", fixture, dir, n);
    CHECK(n > 0 && n <= MAX_RECORDS);
    clef_release *rel = NULL;
    tok_tokenizer *tok = NULL;
    lm_table lm = {0};
    st = clef_release_open(dir, NULL, &rel);
    if (!st)
        st = tok_load_dir(dir, &tok);
    if (!st)
        st = load_lm_head(rel, &lm);
    CHECK_MSG(st == CLEF_OK, "%s: release, tokenizer or lm_head: %s", dir, clef_last_error());
    clef_encoded_record recs[MAX_RECORDS] = {{0}};
    for (int i = 0; !st && i < n && i < MAX_RECORDS; i++) {
        const json_value *rec = json_array_at(records, (size_t)i);
        char *body = render_compact(json_object_get(rec, "request"));
        clef_request *req = NULL;
        clef_request_errors errors = {0};
        st = body ? clef_request_parse(body, strlen(body), CLEF_REQUEST_RECORD, NULL, NULL, &req,
                                       &errors)
                  : CLEF_ERR_OUT_OF_MEMORY;
        clef_request_errors_free(&errors);
        clef_encode_params ep = clef_encode_default_params();
        ep.max_length = (int32_t)max_length;
        ep.tokenize = clef_tokenize_tok;
        ep.tokenize_ctx = tok;
        if (!st)
            st = clef_record_encode(req, &ep, &recs[i]);
        CHECK_MSG(st == CLEF_OK, "record %d: %s", i, clef_last_error());
        clef_request_free(req);
        free(body);
    }
    float *out[2][2][MAX_RECORDS] = {{{0}}}; /* [backend][logits, probs][record] */
    for (int g = 0; !st && g < 2; g++) {
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 2; k++)
                out[g][k][i] = calloc((size_t)record_options(&recs[i]), sizeof(float));
        clef_backend *be = make_backend(g);
        st = be ? decide_all(be, rel, recs, n, &lm, out[g][0], out[g][1]) : CLEF_ERR_INVALID_ARG;
        CHECK_MSG(st == CLEF_OK, "%s backend: %s", g ? "guarded" : "plain", clef_last_error());
        clef_backend_free(be);
    }
    for (int i = 0; !st && i < n; i++) {
        const json_value *rec = json_array_at(records, (size_t)i);
        const json_value *want_l = json_object_get(rec, "logits"),
                         *want_p = json_object_get(rec, "probs");
        const int64_t O = record_options(&recs[i]);
        double num = 0, den = 0, max_prob = 0;
        int64_t k = 0;
        for (size_t q = 0; q < want_l->u.arr.count; q++)
            for (size_t o = 0; o < json_array_at(want_l, q)->u.arr.count && k < O; o++, k++) {
                double wl = 0, wp = 0;
                json_get_double(json_array_at(json_array_at(want_l, q), o), &wl);
                json_get_double(json_array_at(json_array_at(want_p, q), o), &wp);
                num += (out[1][0][i][k] - wl) * (out[1][0][i][k] - wl);
                den += wl * wl;
                max_prob = fmax(max_prob, fabs(out[1][1][i][k] - wp));
            }
        const double rel_l2 = sqrt(num / (den > 0 ? den : 1));
        const int same = !memcmp(out[0][0][i], out[1][0][i], sizeof(float) * (size_t)O) &&
                         !memcmp(out[0][1][i], out[1][1][i], sizeof(float) * (size_t)O);
        const char *name = json_get_string(json_object_get(rec, "name"));
        printf("%-16s %5d tokens %2d questions | guarded vs oracle: logits rel L2 %.2e, probs "
               "max abs %.2e | guarded vs plain: %s\n", name, recs[i].n_tokens,
               recs[i].n_questions, rel_l2, max_prob, same ? "identical" : "DIFFER");
        CHECK_EQ_INT(k, O);
        CHECK_MSG(rel_l2 <= 1e-5, "%s: logits relative error %.3e > 1e-5", name, rel_l2);
        CHECK_MSG(max_prob <= 1e-6, "%s: probabilities max abs diff %.3e > 1e-6", name, max_prob);
        CHECK_MSG(same, "%s: guarded and plain backends differ", name);
    }
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < n; i++)
                free(out[g][k][i]);
    for (int i = 0; i < n && i < MAX_RECORDS; i++)
        clef_encoded_record_free(&recs[i]);
    free(lm.rows);
    tok_free(tok);
    clef_release_free(rel);
    json_doc_free(doc);
    free(text);
}

int main(void) {
    check_guard_catches(); /* first: fork before any OpenMP thread exists */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        check_case(CASES[i]);
    check_oracle_records("tests/model/fixtures/e2e_sharded.json");
    check_oracle_records("tests/model/fixtures/e2e.json");
    return test_summary();
}
