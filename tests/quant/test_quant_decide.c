/*
 * test_quant_decide.c — whole-model parity of the quantized releases through the public API:
 * clef_model_load + clef_model_decide_result on a release of argv[1] (bf16, nf4, fp8, int8 of
 * tests/quant/fixtures/decide/), against the same release run by transformers + its own
 * quantization library (bitsandbytes NF4, compressed-tensors FP8, comfy-kitchen INT8 ConvRot)
 * with the release's joint_schema_model.py head, all in fp32
 * (scripts/quant/make_decide_fixtures.py). Over the 200 seeded records of records.json:
 *   - the token ids our encoder makes equal encode_record()'s;
 *   - head logits: relative L2 over each record's logits <= 1e-4 (the whole-model
 *     bound: FP8 and INT8 quantize every linear input per token, and an fp32 last-bit
 *     difference upstream can move one activation to the neighbouring code, a jump the next
 *     layers carry; NF4 and BF16 multiply the library's weight values in fp32 and sit near
 *     1e-6);
 *   - decisions (the argmax option of every question, what the answer reports) identical;
 *   - last hidden state (after the final norm) at the fixture's rows of every record (nf4,
 *     fp8, int8; the backbone loaded by qwen35_load_release from the same files): relative L2
 *     <= 1e-4 per record.
 * The NF4 release is sharded with its lm_head in a separately indexed lm-head.safetensors and
 * a complete.json (verified: verify_hashes), so the option rows are read from that file.
 * Under AddressSanitizer every 8th record only (CI time); the Release builds run all 200.
 * Printed: the worst and mean errors, and the smallest top-2 logit margin of the oracle (a
 * decision closer than the errors would be luck, not parity).
 *
 * Tracing (for scripts/quant/trace_linear_inputs.py; off unless asked): with
 * CLEF_QUANT_TRACE_DIR set, the backbone pass runs through a copy of the CPU backend's op table
 * whose matmul first records, for every quantized linear, its fp32 input and the activation
 * codes and scales (the same quantizer calls the backend makes), and each record's whole last
 * hidden state, in DIR/<record>.bin: per linear i64 T, K, N, f32 x[T][K], f32 scale[T],
 * u8 codes[T][K] (int8 codes as their bytes); last i64 T, -1, D, f32 hidden[T][D].
 */
#include "test.h"
#include "encode_check.h"
#include "json_compact.h"

#include "clef.h"
#include "core/io.h"
#include "core/strbuf.h"
#include "encode/encode.h"
#include "encode/request.h"
#include "json/json.h"
#include "json/render.h"
#include "backend/backend.h"
#include "model/qwen35.h"
#include "quant/fp8.h"
#include "quant/int8_convrot.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURES "tests/quant/fixtures/decide"
#define TOLERANCE 1e-4

/* Under AddressSanitizer (test.sh's first build, ~10x slower) every 8th record is run; the
 * portable Release build runs all of them. */
#if defined(__SANITIZE_ADDRESS__)
#define RECORD_STRIDE 8
#else
#define RECORD_STRIDE 1
#endif

typedef struct hidden_rows {
    uint32_t n_rows;
    int32_t *rows;
    float *hidden; /* [n_rows][D] */
} hidden_rows;

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

static int read_u32(FILE *f, uint32_t *v) { return fread(v, 4, 1, f) == 1; }

/* the "CLEFQH01" file of make_decide_fixtures.py; NULL on a short or foreign file */
static hidden_rows *load_hidden(const char *path, uint32_t n_expected, uint32_t *D_out) {
    FILE *f = fopen(path, "rb");
    char magic[8];
    uint32_t n = 0, D = 0;
    if (!f || fread(magic, 8, 1, f) != 1 || memcmp(magic, "CLEFQH01", 8) || !read_u32(f, &n) ||
        !read_u32(f, &D) || n != n_expected || D == 0 || D > 65536) {
        if (f)
            fclose(f);
        return NULL;
    }
    hidden_rows *h = calloc(n, sizeof *h);
    int ok = h != NULL;
    for (uint32_t i = 0; ok && i < n; i++) {
        ok = read_u32(f, &h[i].n_rows) && h[i].n_rows > 0 && h[i].n_rows < 1024;
        if (!ok)
            break;
        h[i].rows = malloc(4 * (size_t)h[i].n_rows);
        h[i].hidden = malloc(4 * (size_t)h[i].n_rows * D);
        ok = h[i].rows && h[i].hidden && fread(h[i].rows, 4, h[i].n_rows, f) == h[i].n_rows &&
             fread(h[i].hidden, 4, (size_t)h[i].n_rows * D, f) == (size_t)h[i].n_rows * D;
    }
    fclose(f);
    if (!ok) {
        for (uint32_t i = 0; h && i < n; i++)
            free(h[i].rows), free(h[i].hidden);
        free(h);
        return NULL;
    }
    *D_out = D;
    return h;
}

static void free_hidden(hidden_rows *h, uint32_t n) {
    for (uint32_t i = 0; h && i < n; i++)
        free(h[i].rows), free(h[i].hidden);
    free(h);
}

/* ---- tracing (CLEF_QUANT_TRACE_DIR, see the file comment) -------------------------------- */

static clef_backend_ops trace_ops;
static const clef_backend_ops *traced_ops;
static FILE *trace_file;

static void trace_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx,
                         const clef_matrix *w, const float *bias, float *y, int64_t ldy,
                         int accumulate, void *scratch) {
    int quantized = w->type == CLEF_WTYPE_FP8_E4M3 || w->type == CLEF_WTYPE_INT8_CONVROT;
    if (trace_file && quantized && T > 0) {
        const int64_t K = w->cols, hdr[3] = {T, K, w->rows};
        float *scale = malloc(sizeof(float) * (size_t)(T + K));
        uint8_t *codes = malloc((size_t)(T * K));
        CHECK(scale && codes);
        if (scale && codes) {
            if (w->type == CLEF_WTYPE_FP8_E4M3)
                clef_fp8_quantize_tokens(x, ldx, T, K, CLEF_QUANT_ACT_F32, codes, scale);
            else
                for (int64_t t = 0; t < T; t++) /* one token at a time, as the backend */
                    clef_convrot_quantize_tokens(x + t * ldx, ldx, 1, K, CLEF_QUANT_ACT_F32,
                                                 (int8_t *)codes + t * K, scale + t, scale + T);
            fwrite(hdr, sizeof hdr, 1, trace_file);
            for (int64_t t = 0; t < T; t++)
                fwrite(x + t * ldx, sizeof(float), (size_t)K, trace_file);
            fwrite(scale, sizeof(float), (size_t)T, trace_file);
            fwrite(codes, 1, (size_t)(T * K), trace_file);
        }
        free(scale);
        free(codes);
    }
    traced_ops->matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
}

static void trace_hidden(const float *h, int64_t T, int64_t D) {
    const int64_t hdr[3] = {T, -1, D};
    fwrite(hdr, sizeof hdr, 1, trace_file);
    fwrite(h, sizeof(float), (size_t)(T * D), trace_file);
}

typedef struct stats {
    double worst, sum;
    size_t n;
} stats;

static void add(stats *s, double v) {
    s->worst = fmax(s->worst, v);
    s->sum += v;
    s->n++;
}

/* logits of one record against the oracle's; returns 0 when the shapes differ */
static int compare_logits(const char *name, const clef_result *r, const json_value *want_l,
                          const json_value *want_d, stats *err, double *min_margin,
                          size_t *decisions, size_t *agree) {
    CHECK_MSG((size_t)r->n_questions == want_l->u.arr.count, "%s: %d questions, oracle %zu",
              name, r->n_questions, want_l->u.arr.count);
    if ((size_t)r->n_questions != want_l->u.arr.count)
        return 0;
    double num = 0, den = 0;
    for (int32_t q = 0; q < r->n_questions; q++) {
        const clef_question_result *qr = &r->questions[q];
        const json_value *lq = json_array_at(want_l, (size_t)q);
        CHECK_MSG((size_t)qr->n_options == lq->u.arr.count, "%s: question '%s' has %d options, "
                  "oracle %zu", name, qr->id, qr->n_options, lq->u.arr.count);
        if ((size_t)qr->n_options != lq->u.arr.count)
            return 0;
        int32_t ours = 0;
        double best = -INFINITY, second = -INFINITY;
        for (int32_t o = 0; o < qr->n_options; o++) {
            double w = 0;
            json_get_double(json_array_at(lq, (size_t)o), &w);
            num += (qr->logits[o] - w) * (qr->logits[o] - w);
            den += w * w;
            if (qr->logits[o] > qr->logits[ours])
                ours = o;
            if (w > best)
                second = best, best = w;
            else if (w > second)
                second = w;
        }
        *min_margin = fmin(*min_margin, best - second);
        int64_t theirs = -1;
        json_get_int64(json_array_at(want_d, (size_t)q), &theirs);
        (*decisions)++;
        *agree += ours == theirs;
        CHECK_MSG(ours == theirs, "%s: question '%s' decides option %d, the library %lld", name,
                  qr->id, ours, (long long)theirs);
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    add(err, rel);
    CHECK_MSG(rel <= TOLERANCE, "%s: logits relative L2 %.3e > %.0e", name, rel, TOLERANCE);
    return 1;
}

int main(int argc, char **argv) {
    const char *precision = argc > 1 ? argv[1] : "nf4";
    clef_log_set(NULL, NULL);
    char release[256], path[320];
    snprintf(release, sizeof release, FIXTURES "/%s", precision);

    json_doc *recs_doc = read_json(FIXTURES "/records.json");
    snprintf(path, sizeof path, FIXTURES "/%s_logits.json", precision);
    json_doc *want_doc = read_json(path);
    if (!recs_doc || !want_doc) {
        json_doc_free(recs_doc);
        json_doc_free(want_doc);
        return test_summary();
    }
    const json_value *records = json_object_get(json_doc_root(recs_doc), "records");
    const json_value *want_logits = json_object_get(json_doc_root(want_doc), "logits");
    const json_value *want_decisions = json_object_get(json_doc_root(want_doc), "decisions");
    int64_t max_length = 0;
    json_get_int64(json_object_get(json_doc_root(recs_doc), "max_length"), &max_length);
    const size_t n = records ? records->u.arr.count : 0;
    CHECK_MSG(n >= 200 && want_logits && want_logits->u.arr.count == n && want_decisions &&
                  want_decisions->u.arr.count == n,
              "%s: %zu records, the oracle's logits do not match them", precision, n);

    const char *trace_dir = getenv("CLEF_QUANT_TRACE_DIR");
    clef_model_params mp = clef_model_default_params();
    mp.n_threads = 2;
    mp.max_length = (int32_t)max_length;
    mp.verify_hashes = 1; /* the NF4 release's complete.json lists lm-head.safetensors too */
    clef_model *model = NULL;
    int st = clef_model_load(release, &mp, &model);
    CHECK_MSG(st == CLEF_OK, "%s: load: %s", release, clef_last_error());

    /* the backbone alone, for the hidden states (bf16 has no hidden fixture) */
    uint32_t D = 0;
    hidden_rows *hidden = NULL;
    clef_backend *be = NULL;
    clef_release *rel = NULL;
    qwen35_model *bb = NULL;
    qwen35_state *state = NULL;
    tok_tokenizer *tok = NULL;
    CHECK_EQ_INT(tok_load_dir(release, &tok), CLEF_OK);
    if (strcmp(precision, "bf16")) {
        snprintf(path, sizeof path, FIXTURES "/%s_hidden.bin", precision);
        hidden = load_hidden(path, (uint32_t)n, &D);
        CHECK_MSG(hidden != NULL, "cannot read %s", path);
        clef_backend_params bp = clef_backend_default_params();
        bp.n_threads = 2;
        qwen35_params qp = qwen35_default_params();
        qp.max_seq_len = max_length;
        qp.max_tokens = max_length;
        int ok = hidden && clef_backend_cpu_create(&bp, &be) == CLEF_OK;
        if (ok && trace_dir) { /* the backbone pass records its quantized linears' inputs */
            traced_ops = be->ops;
            trace_ops = *be->ops;
            trace_ops.matmul = trace_matmul;
            be->ops = &trace_ops;
        }
        ok = ok && clef_release_open(release, NULL, &rel) == CLEF_OK &&
             qwen35_load_release(rel, be, &bb) == CLEF_OK &&
             qwen35_state_create(bb, be, &qp, &state) == CLEF_OK;
        CHECK_MSG(ok, "%s: backbone: %s", release, clef_last_error());
    }

    stats logit_err = {0}, hidden_err = {0};
    double min_margin = INFINITY;
    size_t decisions = 0, agree = 0, tokens = 0;
    size_t run = 0;
    for (size_t i = 0; model && tok && i < n; i += RECORD_STRIDE, run++) {
        const json_value *rec = json_array_at(records, i);
        const char *name = json_get_string(json_object_get(rec, "name"));
        char *request = render_compact(json_object_get(rec, "request"));
        int32_t *ids = NULL;
        int32_t T = encode_check_ids(tok, name, request, (int32_t)max_length,
                                     json_object_get(rec, "ids"), &ids);
        clef_result *r = NULL;
        st = clef_model_decide_result(model, request, strlen(request), &r);
        CHECK_MSG(st == CLEF_OK, "%s: decide: %s", name, clef_last_error());
        if (st == CLEF_OK) {
            CHECK_EQ_INT(r->input_tokens, T);
            tokens += (size_t)r->input_tokens;
            compare_logits(name, r, json_array_at(want_logits, i), json_array_at(want_decisions, i),
                           &logit_err, &min_margin, &decisions, &agree);
        }
        if (state && T > 0) {
            int64_t seq[2] = {0, T};
            if (trace_dir) {
                snprintf(path, sizeof path, "%s/%s.bin", trace_dir, name);
                trace_file = fopen(path, "wb");
                CHECK_MSG(trace_file != NULL, "cannot write %s", path);
            }
            CHECK_EQ_INT(qwen35_forward(bb, state, 1, seq, ids, NULL), CLEF_OK);
            const float *out = qwen35_state_output(state);
            if (trace_file) {
                trace_hidden(out, T, D);
                fclose(trace_file);
                trace_file = NULL;
            }
            double num = 0, den = 0;
            int rows_ok = 1;
            for (uint32_t j = 0; j < hidden[i].n_rows; j++) {
                int32_t row = hidden[i].rows[j];
                rows_ok &= row >= 0 && row < T;
                for (uint32_t d = 0; rows_ok && d < D; d++) {
                    double want = hidden[i].hidden[(size_t)j * D + d];
                    double got = out[(size_t)row * D + d];
                    num += (got - want) * (got - want);
                    den += want * want;
                }
            }
            CHECK_MSG(rows_ok, "%s: hidden rows outside the record's %d tokens", name, T);
            double rel_h = sqrt(num / (den > 0 ? den : 1));
            add(&hidden_err, rel_h);
            CHECK_MSG(rel_h <= TOLERANCE, "%s: last hidden state relative L2 %.3e > %.0e", name,
                      rel_h, TOLERANCE);
        }
        clef_result_free(r);
        free(ids);
        free(request);
    }
    printf("%-4s %zu of %zu records (%zu tokens), %zu questions: decisions identical %zu/%zu\n",
           precision, run, n, tokens, decisions, agree, decisions);
    printf("%-4s logits relative L2: worst %.3e, mean %.3e; the oracle's smallest top-2 margin "
           "%.3e\n", precision, logit_err.worst, logit_err.n ? logit_err.sum / logit_err.n : 0.0,
           min_margin);
    if (hidden_err.n)
        printf("%-4s last hidden state relative L2: worst %.3e, mean %.3e (%zu records)\n",
               precision, hidden_err.worst, hidden_err.sum / hidden_err.n, hidden_err.n);
    if (model)
        printf("%-4s weights resident: %llu bytes\n", precision,
               (unsigned long long)clef_model_weight_bytes(model));
    CHECK_MSG(run > 0 && logit_err.n == run, "%s: %zu of %zu records compared", precision,
              logit_err.n, run);
    CHECK_MSG(!strcmp(precision, "bf16") || hidden_err.n == run, "%s: %zu of %zu hidden states "
              "compared", precision, hidden_err.n, run);

    tok_free(tok);
    qwen35_state_free(state);
    qwen35_free(bb);
    clef_release_free(rel);
    clef_backend_free(be);
    free_hidden(hidden, (uint32_t)n);
    clef_model_free(model);
    json_doc_free(recs_doc);
    json_doc_free(want_doc);
    return test_summary();
}
