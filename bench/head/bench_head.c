/*
 * bench_head.c — time the joint schema head (src/model/joint_head.c) on the CPU backend.
 *
 * Reads the weights and inputs bench/head/torch_head.py --write made (random bf16 weights at
 * the given head config, fp32 hidden states, a record of Q questions x O options), loads the
 * head the way a release is loaded (pread straight into its buffers, workspace planned for
 * exactly this record), runs one warm-up forward, then times --runs forwards. Prints one JSON
 * line: {"median_ms", "runs", "peak_rss_mb", "weight_mb", "workspace_mb"}; bench/head/run.sh
 * puts it next to PyTorch's in one table.
 *
 * Usage: bench_head FILE [--threads N] [--runs N]
 */
#include "../bench_util.h"
#include "st_fixture.h"

#include "backend/backend.h"
#include "clef.h"
#include "core/numeric.h"
#include "model/joint_head.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct lm_source {
    st_fixture *fx;
    const clef_tensor_info *t;
    int64_t D;
    uint16_t *row;
} lm_source;

static int read_row(void *ctx, int32_t id, float *dst) {
    lm_source *s = ctx;
    int st = clef_file_pread(&s->fx->file, s->row, (size_t)s->D * 2,
                             s->t->offset + (uint64_t)id * (uint64_t)s->D * 2);
    for (int64_t j = 0; !st && j < s->D; j++)
        dst[j] = clef_bf16_to_f32(s->row[j]);
    return st;
}

static int64_t cfg_int(const json_value *o, const char *key) {
    int64_t v = -1;
    json_get_int64(json_object_get(o, key), &v);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_head FILE [--threads N] [--runs N]\n");
        return 2;
    }
    int threads = 2, runs = 5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
    }
    if (threads < 1 || runs < 1 || runs > 1000) {
        fprintf(stderr, "bench_head: --threads and --runs must be positive\n");
        return 2;
    }
    st_fixture fx;
    if (st_fixture_open(&fx, argv[1]))
        return 1;
    const char *cfg_text = st_fixture_meta(&fx, "config"), *rec_text = st_fixture_meta(&fx, "record");
    json_doc *cfg_doc = NULL, *rec_doc = NULL;
    if (!cfg_text || !rec_text || json_parse(cfg_text, strlen(cfg_text), NULL, &cfg_doc, NULL) ||
        json_parse(rec_text, strlen(rec_text), NULL, &rec_doc, NULL)) {
        fprintf(stderr, "bench_head: %s lacks its config/record metadata\n", argv[1]);
        return 1;
    }
    const json_value *cj = json_doc_root(cfg_doc);
    clef_head_config cfg = {.hidden_size = cfg_int(cj, "hidden_size"), .width = cfg_int(cj, "width"),
                            .routing_layers = cfg_int(cj, "routing_layers"),
                            .layers = cfg_int(cj, "layers"), .heads = cfg_int(cj, "heads"),
                            .feedforward = cfg_int(cj, "feedforward")};
    const int64_t D = cfg.hidden_size;

    /* the record */
    const clef_tensor_info *hidden_t = st_fixture_find(&fx, "input.hidden");
    const clef_tensor_info *ids_t = st_fixture_find(&fx, "input.ids");
    const clef_tensor_info *lm_t = st_fixture_find(&fx, "lm_head.weight");
    const json_value *qs = json_object_get(json_doc_root(rec_doc), "questions");
    if (!hidden_t || !ids_t || !lm_t || !qs) {
        fprintf(stderr, "bench_head: %s lacks inputs\n", argv[1]);
        return 1;
    }
    clef_encoded_record rec = {.n_tokens = (int32_t)ids_t->shape[0],
                               .n_questions = (int32_t)qs->u.arr.count};
    rec.ids = malloc((size_t)ids_t->n_bytes);
    rec.questions = calloc(qs->u.arr.count, sizeof *rec.questions);
    int64_t n_options = 0;
    for (size_t q = 0; q < qs->u.arr.count; q++) {
        const json_value *qj = json_array_at(qs, q), *opts = json_object_get(qj, "options");
        const json_value *span = json_object_get(qj, "span");
        clef_encoded_question *Q = &rec.questions[q];
        Q->type = (clef_question_type)cfg_int(qj, "type");
        int64_t b = 0, e = 0;
        json_get_int64(json_array_at(span, 0), &b);
        json_get_int64(json_array_at(span, 1), &e);
        Q->instruction = (clef_span){(int32_t)b, (int32_t)e};
        Q->n_options = (int32_t)opts->u.arr.count;
        Q->options = calloc((size_t)Q->n_options, sizeof *Q->options);
        for (int32_t o = 0; o < Q->n_options; o++) {
            json_get_int64(json_array_at(json_array_at(opts, (size_t)o), 0), &b);
            json_get_int64(json_array_at(json_array_at(opts, (size_t)o), 1), &e);
            Q->options[o] = (clef_span){(int32_t)b, (int32_t)e};
        }
        n_options += Q->n_options;
    }

    clef_backend_params bp = clef_backend_default_params();
    bp.n_threads = threads;
    clef_backend *be = NULL;
    clef_joint_head *head = NULL;
    clef_tensor_source src = st_fixture_source(&fx);
    clef_head_limits lim = {.max_tokens = rec.n_tokens, .max_questions = rec.n_questions,
                            .max_options = n_options};
    float *hidden = NULL;
    void *staged = malloc((size_t)hidden_t->n_bytes); /* the host never writes backend memory */
    if (!staged || clef_backend_cpu_create(&bp, &be) ||
        clef_joint_head_load(be, &cfg, &src, &lim, &head) ||
        !(hidden = clef_backend_alloc(be, (size_t)hidden_t->n_bytes)) ||
        src.read(src.ctx, hidden_t, staged) ||
        clef_backend_write(be, hidden, staged, (size_t)hidden_t->n_bytes) ||
        (free(staged), staged = NULL, 0) ||
        src.read(src.ctx, ids_t, rec.ids)) {
        fprintf(stderr, "bench_head: %s\n", clef_last_error());
        return 1;
    }
    lm_source lm_src = {.fx = &fx, .t = lm_t, .D = D, .row = malloc((size_t)D * 2)};
    clef_lm_row_reader lm = {.ctx = &lm_src, .vocab_size = lm_t->shape[0], .read_row = read_row};
    float *logits = malloc((size_t)n_options * sizeof(float));
    float *probs = malloc((size_t)n_options * sizeof(float));
    double *times = malloc((size_t)runs * sizeof(double));
    for (int i = 0; i <= runs; i++) {
        double t0 = bench_now_ms();
        if (clef_joint_head_forward(head, hidden, D, &rec, &lm, logits, probs)) {
            fprintf(stderr, "bench_head: %s\n", clef_last_error());
            return 1;
        }
        if (i) /* run 0 is the warm-up */
            times[i - 1] = bench_now_ms() - t0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"median_ms\": %.3f, \"runs\": %d, \"peak_rss_mb\": %.1f, \"weight_mb\": %.1f, "
           "\"workspace_mb\": %.1f}\n",
           bench_median(times, runs), runs,
           ru.ru_maxrss / 1024.0, clef_joint_head_weight_bytes(head) / 1048576.0,
           clef_joint_head_workspace_bytes(head) / 1048576.0);

    for (int32_t q = 0; q < rec.n_questions; q++)
        free(rec.questions[q].options);
    free(rec.questions);
    free(rec.ids);
    free(times);
    free(logits);
    free(probs);
    free(lm_src.row);
    clef_backend_release(be, hidden);
    free(staged);
    clef_joint_head_free(head);
    clef_backend_free(be);
    json_doc_free(cfg_doc);
    json_doc_free(rec_doc);
    st_fixture_free(&fx);
    return 0;
}
