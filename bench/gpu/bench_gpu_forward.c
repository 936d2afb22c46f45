/*
 * bench_gpu_forward.c — the Qwen3.5 backbone forward on the CUDA backend at the real 9B or
 * 27B shape, random N(0, 0.02) BF16 weights made on the device (no weight files), BF16
 * GEMMs. Prints one markdown table: tokens, ms (median of runs after a warm-up), tokens/s,
 * TFLOP/s and its share of the cuBLASLt bf16 GEMM ceiling measured in the same run, and the
 * backend's resident/peak device memory; then the per-op GPU time at 298, 2,270 and 8,192 tokens and
 * the cuBLASLt algorithm choice per GEMM layout (the heuristic's first vs the fastest of its
 * candidates, timed at 2,048 rows by the backend's tuning, cuda_matmul.cu).
 *
 *   bench_gpu_forward 9b|27b [layers] [runs] [noprofile|graphs]
 *
 * First, at small token counts where the host's launches matter (1 x 16, 1 x 64, 1 x 298,
 * 8 x 64 packed), the forward with recordings off (every op launched by the host) and on (the
 * layout's CUDA graph replayed, qwen35.h "Recordings") in the same run, and the device memory
 * the recordings hold. Then the cases 298 / 1,502 / 2,270 / 8,192 tokens at batch 1, and
 * 8 x 1,502 packed, recordings on (turned on here; two warm-up forwards: direct, recorded).
 * noprofile: skip the per-op profile; graphs: the recordings table only.
 * FLOPs counted: 2 x linear parameters x tokens (the work the performance spec counts) plus
 * the attention core (causal: 2 x 2 x Hq x d x T(T+1)/2 per attention layer) and the delta
 * rule (~8 x dk x dv per token, v-head and GDN layer).
 */
#include "../bench_util.h"
#include "backend/cuda/cuda_backend.h"
#include "clef.h"
#include "cuda/random_release.h"
#include "model/qwen35_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loader source whose BF16 matrices read as zeros (filled on the device afterwards); the small
 * fp32 vectors come from random_release.h (norms, A_log, dt_bias, conv taps). */
static int zero_matrix_read(void *ctx, const clef_tensor_info *t, void *dst) {
    if (t->dtype == CLEF_DTYPE_BF16) {
        memset(dst, 0, t->n_bytes);
        return CLEF_OK;
    }
    return rr_read(ctx, t, dst);
}

static int fill(clef_backend *be, const clef_matrix *w, uint64_t *seed) {
    return clef_backend_cuda_fill_normal_bf16(be, (void *)w->data, (size_t)(w->rows * w->cols), 0.02f, (*seed)++);
}

static int randomize(qwen35_model *m, clef_backend *be) {
    uint64_t seed = 1;
    int st = fill(be, &m->w.embed, &seed);
    for (int64_t i = 0; i < m->cfg.num_hidden_layers && st == CLEF_OK; i++) {
        const qwen35_layer *L = &m->w.layers[i];
        const clef_matrix *ws[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->in_qkv, &L->in_z, &L->in_b, &L->in_a,
                                   &L->out_proj, &L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj};
        for (size_t j = 0; j < sizeof ws / sizeof ws[0] && st == CLEF_OK; j++)
            if (ws[j]->data)
                st = fill(be, ws[j], &seed);
    }
    return st == CLEF_OK ? clef_backend_synchronize(be) : st;
}

static double linear_params(const clef_text_config *c) {
    const double D = (double)c->hidden_size, F = (double)c->intermediate_size, Hv = (double)c->linear_num_value_heads;
    const double K = (double)(c->linear_num_key_heads * c->linear_key_head_dim), Vd = Hv * (double)c->linear_value_head_dim;
    const double Hq = (double)c->num_attention_heads, Hkv = (double)c->num_key_value_heads, d = (double)c->head_dim;
    double total = 0;
    for (int64_t i = 0; i < c->num_hidden_layers; i++) {
        total += 3 * D * F;
        if (c->layer_types[i] == CLEF_LAYER_LINEAR_ATTENTION)
            total += D * (2 * K + Vd) + D * Vd + 2 * D * Hv + Vd * D;
        else
            total += D * (Hq * 2 * d + 2 * Hkv * d) + Hq * d * D;
    }
    return total;
}

static double forward_flops(const clef_text_config *c, int64_t n_seqs, int64_t T) {
    double n_attn = 0, n_gdn = 0;
    for (int64_t i = 0; i < c->num_hidden_layers; i++)
        *(c->layer_types[i] == CLEF_LAYER_LINEAR_ATTENTION ? &n_gdn : &n_attn) += 1;
    double tokens = (double)(n_seqs * T);
    double f = 2.0 * linear_params(c) * tokens;
    f += n_attn * (double)n_seqs * 4.0 * (double)c->num_attention_heads * (double)c->head_dim * (double)T * (double)(T + 1) / 2.0;
    f += n_gdn * tokens * 8.0 * (double)(c->linear_key_head_dim * c->linear_value_head_dim * c->linear_num_value_heads);
    return f;
}

/* warmups + runs forwards of the layout (ns sequences at seq); the last runs' times in times[],
 * the last warm-up's in *last_warmup_ms (with recordings on: the one that records). Returns the
 * first failure (reported). */
static int time_forwards(qwen35_model *m, qwen35_state *state, clef_backend *be, int64_t ns, const int64_t *seq,
                         const int32_t *ids, int warmups, int runs, double *times, double *last_warmup_ms) {
    for (int r = -warmups; r < runs; r++) {
        double a = bench_now_ms();
        int st = qwen35_forward(m, state, ns, seq, ids, NULL);
        if (st == CLEF_OK)
            st = clef_backend_synchronize(be);
        if (st != CLEF_OK) {
            fprintf(stderr, "forward: %s\n", clef_last_error());
            return st;
        }
        if (r >= 0)
            times[r] = bench_now_ms() - a;
        else if (r == -1 && last_warmup_ms)
            *last_warmup_ms = bench_now_ms() - a;
    }
    return CLEF_OK;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "9b") && strcmp(argv[1], "27b"))) {
        fprintf(stderr, "usage: bench_gpu_forward 9b|27b [layers] [runs]\n");
        return 2;
    }
    if (clef_backend_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int is27 = !strcmp(argv[1], "27b");
    const int64_t n_layers = argc > 2 ? atoll(argv[2]) : (is27 ? 64 : 32);
    const int runs = argc > 3 ? atoi(argv[3]) : 5;
    const int graphs_only = argc > 4 && !strcmp(argv[4], "graphs");
    const int profile = !(argc > 4 && (!strcmp(argv[4], "noprofile") || graphs_only));
    clef_layer_type *types = malloc(sizeof(clef_layer_type) * (size_t)n_layers);
    clef_text_config cfg = is27 ? config_27b(n_layers, types) : config_9b(n_layers, types);
    clef_backend *be = NULL;
    if (clef_backend_cuda_create(0, &be) != CLEF_OK) {
        fprintf(stderr, "CUDA backend: %s\n", clef_last_error());
        return 1;
    }
    clef_backend_cuda_set_graphs(be, 1); /* the recordings table toggles them per state */
    double ceiling = 0;
    if (clef_backend_cuda_gemm_ceiling(be, 8192, 8192, 8192, 20, &ceiling) != CLEF_OK) {
        fprintf(stderr, "ceiling: %s\n", clef_last_error());
        return 1;
    }
    size_t res0 = 0;
    clef_backend_cuda_memory(be, &res0, NULL);
    random_release rr = {.cfg = &cfg, .seed = 7};
    clef_tensor_source src = {.ctx = &rr, .find = rr_find, .read = zero_matrix_read};
    qwen35_params p = qwen35_default_params();
    p.max_seq_len = 8192, p.max_tokens = 8 * 1502;
    qwen35_model *m = NULL;
    qwen35_state *state = NULL;
    double t0 = bench_now_s();
    int st = qwen35_load(&cfg, &src, be, &m);
    if (st == CLEF_OK)
        st = randomize(m, be);
    if (st == CLEF_OK)
        st = qwen35_state_create(m, be, &p, &state);
    if (st != CLEF_OK) {
        fprintf(stderr, "load: %s\n", clef_last_error());
        return 1;
    }
    double load_s = bench_now_s() - t0;
    size_t resident = 0, peak = 0;
    clef_backend_cuda_memory(be, &resident, &peak);
    printf("# clef CUDA backend, %s shape (%lld layers), BF16 weights N(0, 0.02) made on the device\n", argv[1],
           (long long)n_layers);
    printf("cuBLASLt bf16 GEMM ceiling (8192^3, median of 20): %.0f TFLOP/s\n", ceiling);
    printf("kernels: attention %s, delta rule chunked (the default since run15; bench_gpu_cores compares both forms)\n",
           clef_backend_cuda_flash_attention(be) ? "flash (registers)" : "tensor-core (shared memory)");
    printf("weights %.2f GiB, run state %.2f GiB (for 8,192 / 12,016 tokens), load + device fill %.1f s\n",
           qwen35_weight_bytes(m) / 1073741824.0, qwen35_state_bytes(state) / 1073741824.0, load_s);
    int32_t *ids = malloc(sizeof(int32_t) * 8 * 8192);
    for (int64_t i = 0; i < 8 * 8192; i++)
        ids[i] = (int32_t)((i * 2654435761u) % (uint64_t)cfg.vocab_size);
    double *times = malloc(sizeof(double) * (size_t)runs);
    /* recordings off vs on, same state, same run */
    const int64_t small[][2] = {{1, 16}, {1, 64}, {1, 298}, {8, 64}};
    printf("\nRecordings (CUDA graphs) off vs on: ms per forward, median of %d (off: 1 warm-up; on: 2, direct then "
           "recorded); device memory as the driver counts it\n\n", runs);
    printf("| model | batch x tokens | graphs off ms | graphs on ms | speed-up | the recording forward ms | device "
           "memory the recording holds MiB |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int c = 0; c < 4; c++) {
        const int64_t ns = small[c][0], T = small[c][1];
        int64_t seq[9];
        for (int64_t q = 0; q <= ns; q++)
            seq[q] = q * T;
        double ms[2], record_ms = 0;
        clef_backend_memory_info mem[2];
        for (int on = 0; on < 2; on++) {
            state->params.no_graphs = !on;
            /* on: the second forward of the layout records it */
            if (time_forwards(m, state, be, ns, seq, ids, 1 + on, runs, times, on ? &record_ms : NULL) != CLEF_OK)
                return 1;
            ms[on] = bench_median(times, runs);
            clef_backend_memory(be, &mem[on]);
        }
        printf("| clef %s | %lld x %lld | %.2f | %.2f | %.2fx | %.2f | %.1f |\n", argv[1], (long long)ns, (long long)T, ms[0],
               ms[1], ms[0] / ms[1], record_ms, ((double)mem[1].device_used - (double)mem[0].device_used) / 1048576.0);
    }
    int64_t recorded = 0, replayed = 0, held = 0;
    qwen35_state_graph_counts(state, &recorded, &replayed, &held);
    printf("\nrecordings: %lld made, %lld launches, %lld held\n", (long long)recorded, (long long)replayed, (long long)held);
    const int64_t cases[][2] = {{1, 298}, {1, 1502}, {1, 2270}, {1, 8192}, {8, 1502}};
    const int n_cases = graphs_only ? 0 : 5;
    if (n_cases) {
        printf("\nThe default configuration (recordings off, as clef_backend_cuda_create leaves them):\n\n| model | "
               "batch x tokens | ms (median of %d) | tokens/s | TFLOP/s | of ceiling | resident GiB | peak GiB |\n", runs);
        printf("|---|---|---|---|---|---|---|---|\n");
    }
    state->params.no_graphs = 1; /* the table above toggled them; this one measures the default */
    for (int c = 0; c < n_cases; c++) {
        const int64_t ns = cases[c][0], T = cases[c][1];
        int64_t seq[9];
        for (int64_t s = 0; s <= ns; s++)
            seq[s] = s * T;
        if (time_forwards(m, state, be, ns, seq, ids, 2, runs, times, NULL) != CLEF_OK)
            return 1;
        double ms = bench_median(times, runs);
        double fl = forward_flops(&cfg, ns, T);
        clef_backend_cuda_memory(be, &resident, &peak);
        printf("| clef %s | %lld x %lld | %.1f | %.0f | %.0f | %.0f%% | %.2f | %.2f |\n", argv[1], (long long)ns,
               (long long)T, ms, (double)(ns * T) / (ms * 1e-3), fl / (ms * 1e-3) / 1e12,
               100.0 * fl / (ms * 1e-3) / 1e12 / ceiling, resident / 1073741824.0, peak / 1073741824.0);
        fflush(stdout);
    }
    /* where the time goes: per-op GPU time at 298, 2,270 and 8,192 tokens (at 298 the sum of the
     * ops against the table's wall time shows how long the GPU waits for launches) */
    const int64_t prof_T[3] = {298, 2270, 8192};
    for (int i = 0; i < 3 && profile; i++) {
        int64_t seq[2] = {0, prof_T[i]};
        clef_backend_cuda_profile(be, 1);
        for (int r = 0; r < 2; r++)
            qwen35_forward(m, state, 1, seq, ids, NULL);
        printf("\nPer-op GPU time, %s, 1 x %lld tokens (CUDA events around each op, mean of 2 forwards):\n\n", argv[1],
               (long long)prof_T[i]);
        clef_backend_cuda_profile_report(be, stdout, 2);
        clef_backend_cuda_profile(be, 0);
    }
    printf("\ncuBLASLt algorithm per BF16 layout (candidates timed at 2,048 rows, ms per GEMM; chosen: the "
           "heuristic's rank of the one kept):\n\n");
    clef_backend_cuda_gemm_tuning_report(be, stdout);
    printf("\nbackend device memory: resident %.2f GiB, peak %.2f GiB (weights %.2f GiB; backend workspaces before load %.3f GiB)\n",
           resident / 1073741824.0, peak / 1073741824.0, qwen35_weight_bytes(m) / 1073741824.0, res0 / 1073741824.0);
    clef_backend_memory_info mi;
    qwen35_state_graph_counts(state, &recorded, &replayed, &held);
    if (clef_backend_memory(be, &mi) == CLEF_OK)
        printf("device memory in use (driver's count, all of the process): %.2f GiB, with %lld recordings held\n",
               mi.device_used / 1073741824.0, (long long)held);
    qwen35_state_free(state);
    qwen35_free(m);
    clef_backend_free(be);
    free(types), free(ids), free(times);
    return 0;
}
