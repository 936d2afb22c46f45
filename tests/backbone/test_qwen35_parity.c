/*
 * test_qwen35_parity.c — the Qwen3.5 text backbone against transformers (fp32, eager):
 * fixtures from scripts/backbone/make_fixtures.py, four configs (3:1 pattern; the real
 * per-head shapes; odd sizes with F32 weights; a release stored in F16, whose oracle is
 * transformers fp32 on the F16 weights), lengths 1 to 2,100.
 *  - each record alone: last hidden state, relative L2 error over the stored rows <= 1e-5
 *  - all records of a config in one batch of mixed lengths: bit-identical to alone
 *  - the records repeated past QWEN35_MIXER_ROWS rows, so the token mixers run over several
 *    groups of whole records (qwen35_forward.c): bit-identical to alone
 *  - the recurrent delta rule (reference) gives the same parity as the chunked one
 *  - refusals: too long, token id outside the vocabulary, missing tensor, wrong shape
 * The fixtures are real Clef releases, opened with the release reader (clef_release_open) and
 * loaded with qwen35_load_release, as the engine does.
 * Run from the repository root (ctest does): fixtures are under tests/backbone/fixtures.
 */
#include "backbone_records.h"
#include "clef.h"
#include "model/qwen35.h"
#include "model/qwen35_internal.h" /* QWEN35_MIXER_ROWS */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    int64_t n, D;
    record *r;
} fixture;

static int load_fixture(const char *path, fixture *fx) { return load_records(path, &fx->n, &fx->D, &fx->r); }

static void free_fixture(fixture *fx) { records_free(fx->r, fx->n); }

/* relative L2 error of out rows (stored subset) vs the oracle */
static double parity_error(const record *r, const float *out, int64_t D) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < r->n_rows; i++)
        for (int64_t j = 0; j < D; j++) {
            double want = r->hidden[i * D + j], got = out[(int64_t)r->rows[i] * D + j];
            num += (got - want) * (got - want);
            den += want * want;
        }
    return sqrt(num / den);
}

static void check_config(const char *name, clef_backend *be) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/backbone/fixtures/%s", name);
    snprintf(path, sizeof path, "%s/parity.bin", dir);
    fixture fx = {0, 0, NULL};
    clef_release *rel = NULL;
    int st = clef_release_open(dir, NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "%s: release refused: %s", dir, clef_last_error());
    int ok = st == CLEF_OK && load_fixture(path, &fx);
    CHECK_MSG(ok, "cannot read fixture %s", path);
    if (!ok) {
        clef_release_free(rel);
        return;
    }
    const clef_text_config *cfg = &clef_release_get_config(rel)->text;
    CHECK_EQ_INT(cfg->hidden_size, fx.D);
    int64_t max_T = 0, total = 0;
    for (int64_t i = 0; i < fx.n; i++) {
        max_T = fx.r[i].T > max_T ? fx.r[i].T : max_T;
        total += fx.r[i].T;
    }
    const int64_t D = fx.D;
    float *alone = malloc(sizeof(float) * (size_t)(total * D));
    qwen35_model *m = NULL;
    st = qwen35_load_release(rel, be, &m);
    CHECK_MSG(st == CLEF_OK, "%s: load failed: %s", name, clef_last_error());
    for (int mode = 0; mode < 2 && m; mode++) {
        qwen35_params p = qwen35_default_params();
        p.max_seq_len = max_T;
        p.max_tokens = total;
        p.gdn_mode = mode ? CLEF_GDN_RECURRENT : CLEF_GDN_CHUNKED;
        qwen35_state *s = NULL;
        st = qwen35_state_create(m, be, &p, &s);
        CHECK_MSG(st == CLEF_OK, "%s: state failed: %s", name, clef_last_error());
        if (st != CLEF_OK)
            break;
        int64_t off = 0;
        for (int64_t i = 0; i < fx.n; i++) {
            const record *r = &fx.r[i];
            int64_t seq[2] = {0, r->T};
            CHECK_EQ_INT(qwen35_forward(m, s, 1, seq, r->ids, NULL), CLEF_OK);
            const float *out = qwen35_state_output(s);
            double err = parity_error(r, out, D);
            printf("%-13s %-9s T=%5lld  rel L2 err %.3g   first: ours %+.6f %+.6f  transformers %+.6f %+.6f\n",
                   name, mode ? "recurrent" : "chunked", (long long)r->T, err, out[(int64_t)r->rows[0] * D],
                   out[(int64_t)r->rows[0] * D + 1], r->hidden[0], r->hidden[1]);
            CHECK_MSG(err <= 1e-5, "%s T=%lld: relative L2 error %.3g > 1e-5", name, (long long)r->T, err);
            if (mode == 0)
                memcpy(alone + off * D, out, sizeof(float) * (size_t)(r->T * D));
            off += r->T;
        }
        if (mode == 0) {
            /* all records in one packed batch of mixed lengths, on a second state over the same
             * weights run by a fork of the backend: identical to each alone */
            int64_t *seq = malloc(sizeof(int64_t) * (size_t)(fx.n + 1));
            int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
            int32_t *pos = malloc(sizeof(int32_t) * (size_t)(3 * total));
            seq[0] = 0;
            for (int64_t i = 0; i < fx.n; i++) {
                memcpy(ids + seq[i], fx.r[i].ids, sizeof(int32_t) * (size_t)fx.r[i].T);
                seq[i + 1] = seq[i] + fx.r[i].T;
                for (int64_t t = 0; t < fx.r[i].T; t++) /* text positions, spelled out */
                    pos[seq[i] + t] = pos[total + seq[i] + t] = pos[2 * total + seq[i] + t] = (int32_t)t;
            }
            clef_backend *fork = NULL;
            qwen35_state *s2 = NULL;
            CHECK_EQ_INT(clef_backend_fork(be, &fork), CLEF_OK);
            CHECK_EQ_INT(qwen35_state_create(m, fork, &p, &s2), CLEF_OK);
            CHECK_EQ_INT(qwen35_forward(m, s2, fx.n, seq, ids, NULL), CLEF_OK);
            CHECK_MSG(memcmp(qwen35_state_output(s2), alone, sizeof(float) * (size_t)(total * D)) == 0,
                      "%s: batch of %lld records differs from the records alone", name, (long long)fx.n);
            CHECK_EQ_INT(qwen35_forward(m, s2, fx.n, seq, ids, pos), CLEF_OK);
            CHECK_MSG(memcmp(qwen35_state_output(s2), alone, sizeof(float) * (size_t)(total * D)) == 0,
                      "%s: batch with explicit text positions differs from the records alone", name);
            /* the records over and over past QWEN35_MIXER_ROWS rows, on a state planned for
             * all of them with max_seq_len max_T: the mixers run over groups of whole records
             * of at most QWEN35_MIXER_ROWS rows (the state plans their buffers for one group,
             * not for the batch); each copy identical to the records alone. One config is
             * enough: the grouping is the forward's, whatever the shapes. */
            if (!strcmp(name, "a_pattern")) {
                const int64_t reps = QWEN35_MIXER_ROWS / total + 2, big = reps * total;
                int64_t *bseq = malloc(sizeof(int64_t) * (size_t)(reps * fx.n + 1));
                int32_t *bids = malloc(sizeof(int32_t) * (size_t)big);
                bseq[0] = 0;
                for (int64_t c = 0; c < reps; c++) {
                    memcpy(bids + c * total, ids, sizeof(int32_t) * (size_t)total);
                    for (int64_t i = 0; i < fx.n; i++)
                        bseq[c * fx.n + i + 1] = c * total + seq[i + 1];
                }
                qwen35_params pb = p;
                pb.max_tokens = big;
                qwen35_state *s3 = NULL;
                CHECK_EQ_INT(qwen35_state_create(m, be, &pb, &s3), CLEF_OK);
                CHECK_MSG(s3 && s3->mixer_rows == QWEN35_MIXER_ROWS && big > s3->mixer_rows,
                          "%s: a state for %lld rows of records of at most %lld plans mixer groups "
                          "of %lld rows", name, (long long)big, (long long)max_T,
                          s3 ? (long long)s3->mixer_rows : -1LL);
                CHECK_EQ_INT(qwen35_forward(m, s3, reps * fx.n, bseq, bids, NULL), CLEF_OK);
                int same = s3 != NULL;
                for (int64_t c = 0; c < reps && same; c++)
                    same = memcmp(qwen35_state_output(s3) + c * total * D, alone,
                                  sizeof(float) * (size_t)(total * D)) == 0;
                CHECK_MSG(same, "%s: %lld copies of the records (%lld rows, mixer groups of at most "
                          "%d) differ from the records alone", name, (long long)reps,
                          (long long)big, QWEN35_MIXER_ROWS);
                printf("%-13s %lld copies of the records, %lld rows in mixer groups of at most %d: "
                       "%s\n", name, (long long)reps, (long long)big, QWEN35_MIXER_ROWS,
                       same ? "identical to alone" : "DIFFERENT");
                qwen35_state_free(s3);
                free(bseq), free(bids);
            }
            /* refusals */
            int64_t too_long[2] = {0, max_T + 1};
            CHECK_EQ_INT(qwen35_forward(m, s, 1, too_long, ids, NULL), CLEF_ERR_REQUEST_TOO_LONG);
            int32_t bad = (int32_t)cfg->vocab_size;
            int64_t one[2] = {0, 1};
            CHECK_EQ_INT(qwen35_forward(m, s, 1, one, &bad, NULL), CLEF_ERR_REQUEST_INVALID);
            int64_t empty[2] = {0, 0};
            CHECK_EQ_INT(qwen35_forward(m, s, 1, empty, ids, NULL), CLEF_ERR_INVALID_ARG);
            qwen35_state_free(s2);
            clef_backend_free(fork);
            free(seq), free(ids), free(pos);
        }
        qwen35_state_free(s);
    }
    qwen35_free(m);
    free(alone);
    free_fixture(&fx);
    clef_release_free(rel);
}

/* A release that hides or reshapes one tensor, to see the loader refuse it by name (the
 * release reader would refuse such a release already; the loader must not rely on it). */
typedef struct faulty_source {
    const clef_release *rel;
    const char *victim;
    int reshape; /* 0: hide, 1: wrong shape */
    clef_tensor_info copy;
} faulty_source;

static const clef_tensor_info *faulty_find(void *user, const char *name) {
    faulty_source *f = user;
    const clef_tensor_info *t = clef_release_find(f->rel, name);
    if (!t || strcmp(name, f->victim) != 0)
        return t;
    if (!f->reshape)
        return NULL;
    f->copy = *t;
    f->copy.shape[0] += 1;
    return &f->copy;
}

static int faulty_read(void *user, const clef_tensor_info *t, void *dst) {
    faulty_source *f = user;
    return clef_release_read(f->rel, t, dst);
}

static void check_refusals(clef_backend *be) {
    clef_release *rel = NULL;
    CHECK_EQ_INT(clef_release_open("tests/backbone/fixtures/a_pattern", NULL, &rel), CLEF_OK);
    if (!rel)
        return;
    const clef_text_config *cfg = &clef_release_get_config(rel)->text;
    const char *victims[] = {"text.layers.3.self_attn.k_proj.weight", "text.layers.2.linear_attn.A_log"};
    for (int v = 0; v < 2; v++)
        for (int reshape = 0; reshape < 2; reshape++) {
            faulty_source f = {rel, victims[v], reshape, {0}};
            clef_tensor_source ts = {.ctx = &f, .find = faulty_find, .read = faulty_read};
            qwen35_model *m = NULL;
            int st = qwen35_load(cfg, &ts, be, &m);
            CHECK_EQ_INT(st, reshape ? CLEF_ERR_TENSOR_SHAPE : CLEF_ERR_TENSOR_MISSING);
            CHECK_MSG(strstr(clef_last_error(), victims[v]) != NULL, "message names the tensor: %s", clef_last_error());
            if (reshape) /* expected vs got, both spelled out */
                CHECK_MSG(strstr(clef_last_error(), "has shape [") && strstr(clef_last_error(), "config says ["),
                          "message gives both shapes: %s", clef_last_error());
            CHECK(m == NULL);
        }
    clef_text_config bad = *cfg;
    bad.mrope_section[0] += 1;
    faulty_source none = {rel, "", 0, {0}};
    clef_tensor_source ts = {.ctx = &none, .find = faulty_find, .read = faulty_read};
    qwen35_model *m = NULL;
    CHECK_EQ_INT(qwen35_load(&bad, &ts, be, &m), CLEF_ERR_CONFIG_INVALID);
    CHECK_EQ_INT(qwen35_load_release(NULL, be, &m), CLEF_ERR_INVALID_ARG);
    clef_release_free(rel);
}

int main(void) {
    clef_backend *be = NULL;
    clef_backend_params bp = clef_backend_default_params();
    CHECK_EQ_INT(clef_backend_cpu_create(&bp, &be), CLEF_OK);
    check_config("a_pattern", be);
    check_config("b_real_heads", be);
    check_config("c_odd", be);
    check_config("d_f16", be);
    check_refusals(be);
    clef_backend_free(be);
    return test_summary();
}
