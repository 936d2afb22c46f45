/*
 * test_cuda_graph.c — the backbone forward recorded as CUDA graphs (qwen35.h, "Recordings";
 * cuda_graph.cu) against the same forward run op by op, bit for bit:
 *  - a random release at the 9B's widths (2 layers: one Gated DeltaNet, one attention; a
 *    32,768-token vocabulary) with two RunStates on two forks of one CUDA backend: one
 *    records (turned on with clef_backend_cuda_set_graphs), one never does (params.no_graphs);
 *  - layouts: one sequence of 16, 64 and 298 tokens, packed batches (3 sequences of uneven
 *    lengths, 8 x 13) and a batch with given embedding rows (qwen35_forward_embeds), each run
 *    three times with new token ids: direct, recorded, replayed. Every output equals the
 *    direct state's, byte for byte (memcmp: the same kernels on the same values; no tolerance);
 *  - the counts: each layout recorded once, replayed from its second forward on; going back to
 *    a held layout replays it without recording; a layout that makes the backend grow its
 *    staging buffer leaves the held recordings stale, and they are recorded again (and still
 *    equal the direct forward); clef_backend_cuda_set_graphs(0) records nothing;
 *  - the device memory the recordings hold (printed).
 * Exits 77 (ctest: SKIPPED) when no GPU is visible.
 */
#include "clef.h"
#include "gpu_test_util.h"
#include "model/qwen35.h"
#include "random_release.h"
#include "test.h"

#include <stdio.h>

static clef_backend *gpu, *fork_rec, *fork_direct;
static qwen35_model *model;
static qwen35_state *rec, *direct;
static int64_t D;

typedef struct layout {
    const char *name;
    int64_t n_seqs;
    int64_t seq[9];
    int64_t n_embeds; /* rows given as embeddings (the first ones of each sequence) */
} layout;

static float *out_rec, *out_direct, *features;
static int32_t *ids;
static int32_t embed_rows[8];

static int run(qwen35_state *s, clef_backend *be, const layout *l, float *out) {
    qwen35_embeds e = {.n = l->n_embeds, .rows = embed_rows, .features = features};
    int st = qwen35_forward_embeds(model, s, l->n_seqs, l->seq, ids, NULL, l->n_embeds ? &e : NULL);
    if (st == CLEF_OK)
        st = clef_backend_read(be, out, qwen35_state_output(s), sizeof(float) * (size_t)(l->seq[l->n_seqs] * D));
    return st;
}

/* One forward of l on both states with fresh ids: the outputs must be the same bytes. */
static void same_as_direct(const layout *l, const char *when) {
    const int64_t n = l->seq[l->n_seqs];
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)(rnd_uniform() * 32768.0);
    for (int64_t i = 0; i < l->n_embeds; i++)
        embed_rows[i] = (int32_t)(l->seq[i % l->n_seqs] + i / l->n_seqs);
    int st = run(rec, fork_rec, l, out_rec);
    CHECK_MSG(st == CLEF_OK, "%s (%s): recording state: %s", l->name, when, clef_last_error());
    st = run(direct, fork_direct, l, out_direct);
    CHECK_MSG(st == CLEF_OK, "%s (%s): direct state: %s", l->name, when, clef_last_error());
    const int same = memcmp(out_rec, out_direct, sizeof(float) * (size_t)(n * D)) == 0;
    CHECK_MSG(same, "%s (%s): the recorded forward differs from the direct one", l->name, when);
    printf("%-28s %-26s %s\n", l->name, when, same ? "bit-identical" : "DIFFERS");
}

static void counts(int64_t *recorded, int64_t *replayed, int64_t *held) {
    qwen35_state_graph_counts(rec, recorded, replayed, held);
}

static size_t device_used(clef_backend *be) {
    clef_backend_memory_info mi;
    return clef_backend_memory(be, &mi) == CLEF_OK ? mi.device_used : 0;
}

int main(void) {
    if (clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return GPU_TEST_SKIPPED;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (clef_backend_cuda_create(0, &gpu) != CLEF_OK) {
        fprintf(stderr, "backend creation failed: %s\n", clef_last_error());
        return 1;
    }
    clef_backend_cuda_set_graphs(gpu, 1); /* off by default; forks inherit it */
    if (clef_backend_fork(gpu, &fork_rec) != CLEF_OK || clef_backend_fork(gpu, &fork_direct) != CLEF_OK) {
        fprintf(stderr, "fork failed: %s\n", clef_last_error());
        return 1;
    }
    clef_layer_type types[2];
    clef_text_config cfg = config_9b(2, types);
    types[1] = CLEF_LAYER_FULL_ATTENTION; /* one layer of each mixer */
    cfg.vocab_size = 32768;
    random_release rr = {.cfg = &cfg, .seed = 11};
    clef_tensor_source src = random_release_source(&rr);
    D = cfg.hidden_size;
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = 1024, p.max_tokens = 1024;
    qwen35_params pd = p;
    pd.no_graphs = 1;
    if (qwen35_load(&cfg, &src, gpu, &model) != CLEF_OK || qwen35_state_create(model, fork_rec, &p, &rec) != CLEF_OK ||
        qwen35_state_create(model, fork_direct, &pd, &direct) != CLEF_OK) {
        fprintf(stderr, "load: %s\n", clef_last_error());
        return 1;
    }
    out_rec = malloc(sizeof(float) * (size_t)(1024 * D));
    out_direct = malloc(sizeof(float) * (size_t)(1024 * D));
    ids = malloc(sizeof(int32_t) * 1024);
    /* given embeddings: 8 random rows in backend memory (the same buffer every forward) */
    float *host_features = malloc(sizeof(float) * (size_t)(8 * D));
    fill_normal(host_features, (size_t)(8 * D), 0.02f);
    features = clef_backend_alloc(gpu, sizeof(float) * (size_t)(8 * D));
    CHECK(features && clef_backend_write(gpu, features, host_features, sizeof(float) * (size_t)(8 * D)) == CLEF_OK);

    const layout L[] = {
        {"1 x 16", 1, {0, 16}, 0},
        {"1 x 64", 1, {0, 64}, 0},
        {"1 x 298", 1, {0, 298}, 0},
        {"packed 100 + 37 + 161", 3, {0, 100, 137, 298}, 0},
        {"packed 8 x 13", 8, {0, 13, 26, 39, 52, 65, 78, 91, 104}, 0},
        {"packed 50 + 30, 6 embeds", 2, {0, 50, 80}, 6},
    };
    const int n_layouts = (int)(sizeof L / sizeof L[0]);
    const char *when[3] = {"1st: runs directly", "2nd: records + launches", "3rd: replays"};
    /* the largest layout first, so the staging buffer has its size before anything is recorded */
    same_as_direct(&L[2], when[0]);
    const size_t used0 = device_used(gpu);
    for (int i = 0; i < n_layouts; i++)
        for (int r = (i == 2); r < 3; r++)
            same_as_direct(&L[i], when[r]);
    int64_t recorded = 0, replayed = 0, held = 0;
    counts(&recorded, &replayed, &held);
    const size_t used1 = device_used(gpu);
    printf("recordings: %lld recorded, %lld launches, %lld held; device memory %+.1f MiB with them\n",
           (long long)recorded, (long long)replayed, (long long)held, ((double)used1 - (double)used0) / 1048576.0);
    CHECK_EQ_INT(recorded, n_layouts);
    CHECK_EQ_INT(replayed, 2 * n_layouts);
    CHECK_EQ_INT(held, n_layouts);

    /* back to held layouts: replayed, nothing recorded */
    same_as_direct(&L[0], "again: replays");
    same_as_direct(&L[3], "again: replays");
    counts(&recorded, &replayed, &held);
    CHECK_EQ_INT(recorded, n_layouts);
    CHECK_EQ_INT(replayed, 2 * n_layouts + 2);

    /* a longer batch grows the recording fork's staging buffer: the recordings that use the
     * old one are stale; the next forward of a held layout runs directly, the one after records */
    const layout big = {"1 x 1000 (grows staging)", 1, {0, 1000}, 0};
    same_as_direct(&big, when[0]);
    same_as_direct(&L[1], "after growth: runs directly");
    same_as_direct(&L[1], "after growth: records");
    same_as_direct(&L[1], "after growth: replays");
    counts(&recorded, &replayed, &held);
    CHECK_EQ_INT(recorded, n_layouts + 1);
    CHECK_EQ_INT(replayed, 2 * n_layouts + 4);

    /* recordings off on the backend: every forward runs directly */
    clef_backend_cuda_set_graphs(fork_rec, 0);
    same_as_direct(&L[4], "recordings off");
    same_as_direct(&L[4], "recordings off");
    int64_t recorded2 = 0, replayed2 = 0;
    counts(&recorded2, &replayed2, NULL);
    CHECK_EQ_INT(recorded2, recorded);
    CHECK_EQ_INT(replayed2, replayed);
    clef_backend_cuda_set_graphs(fork_rec, 1);

    qwen35_state_free(rec);
    qwen35_state_free(direct);
    clef_backend_release(gpu, features);
    qwen35_free(model);
    clef_backend_free(fork_rec);
    clef_backend_free(fork_direct);
    clef_backend_free(gpu);
    free(out_rec), free(out_direct), free(ids), free(host_features);
    return test_summary();
}
