/*
 * cpu_gdn.c — the Gated DeltaNet core: gates (beta, g) and the gated delta rule, in two forms
 * that compute the same function (backend.h, clef_gdn_args):
 *  - recurrent: token by token, S <- exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q. The
 *    reference the chunked form is tested against.
 *  - chunked (C = 64, transformers' torch_chunk_gated_delta_rule): inside a chunk the L
 *    delta updates are folded by the UT transform — solve (I + L) U = beta v and
 *    (I + L) W = beta k exp(cumg) by forward substitution, L = strictly lower
 *    (beta k k^T * exp(cumg_i - cumg_j)) — then one state read, one intra-chunk attention
 *    and one state update per chunk, all GEMMs.
 * Heads are independent: threads take v-heads; each thread's scratch holds its buffers.
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_vexp.h"

#include <math.h>
#include <omp.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

enum { GDN_CHUNK = 64 };

void cpu_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda,
                   const float *b, int64_t ldb, const float *a_log, const float *dt_bias,
                   float *g, float *beta) {
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (T * H > 65536)
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < H; h++) {
            /* torch: beta = b.sigmoid(); g = -A_log.float().exp() * F.softplus(a.float() + dt_bias) */
            beta[t * H + h] = cpu_sigmoid(b[t * ldb + h]);
            g[t * H + h] = -cpu_exp1(a_log[h]) * cpu_softplus(a[t * lda + h] + dt_bias[h]);
        }
    }
}

/* Per-thread scratch, in floats. */
typedef struct gdn_scratch {
    float *state;  /* [dk, dv] when the caller keeps none */
    float *qn;     /* [C, dk] normalised, scaled queries of the chunk */
    float *kn;     /* [C, dk] normalised keys */
    float *kb;     /* [C, dk] beta k */
    float *vb;     /* [C, dv] beta v */
    float *gc;     /* [C] cumulative log decay inside the chunk */
    float *sys;    /* [C, C] UT system, then intra-chunk attention */
    float *decay;  /* [C, C] exp(gc_i - gc_j) for j < i (torch: (gc_i - gc_j).tril().exp()) */
    float *u;      /* [C, dv] new values */
    float *w;      /* [C, dk] decayed keys solved through the UT system */
    float *kt;     /* [dk, C] decayed keys, transposed, for the state update */
    float *tmp;    /* [C, max(dk, dv)] */
} gdn_scratch;

static size_t scratch_floats(int64_t dk, int64_t dv) {
    int64_t C = GDN_CHUNK, m = dk > dv ? dk : dv;
    return (size_t)(dk * dv + C * dk * 4 + C * dv * 2 + C + 2 * C * C + dk * C + C * m);
}

size_t cpu_gdn_workspace_size(clef_backend *be, const clef_gdn_args *a) {
    return (size_t)be->n_threads * scratch_floats(a->dk, a->dv) * sizeof(float);
}

static gdn_scratch carve(float *base, int64_t dk, int64_t dv) {
    int64_t C = GDN_CHUNK, m = dk > dv ? dk : dv;
    gdn_scratch s;
    s.state = base; base += dk * dv;
    s.qn = base; base += C * dk;
    s.kn = base; base += C * dk;
    s.kb = base; base += C * dk;
    s.w = base; base += C * dk;
    s.vb = base; base += C * dv;
    s.u = base; base += C * dv;
    s.gc = base; base += C;
    s.sys = base; base += C * C;
    s.decay = base; base += C * C;
    s.kt = base; base += dk * C;
    s.tmp = base;
    (void)m;
    return s;
}

/* dst = x / sqrt(sum x^2 + 1e-6) * extra  (torch l2norm, then the query scaling) */
static void l2norm_scaled(const float *x, int64_t n, float extra, int normalise, float *dst) {
    float inv = 1.0f;
    if (normalise) {
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)x[i] * (double)x[i];
        inv = 1.0f / sqrtf((float)ss + 1e-6f);
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = normalise ? (x[i] * inv) * extra : x[i] * extra;
}

static void gdn_head_recurrent(const clef_gdn_args *a, int64_t h, float *S, float *qbuf,
                               float *kbuf) {
    const int64_t dk = a->dk, dv = a->dv, kh = h / (a->n_v_heads / a->n_k_heads);
    const float scale = 1.0f / sqrtf((float)dk);
    for (int64_t t = 0; t < a->T; t++) {
        l2norm_scaled(a->q + t * a->ldq + kh * dk, dk, scale, a->l2norm_qk, qbuf);
        l2norm_scaled(a->k + t * a->ldk + kh * dk, dk, 1.0f, a->l2norm_qk, kbuf);
        const float *v = a->v + t * a->ldv + h * dv;
        float decay = cpu_exp1(a->g[t * a->n_v_heads + h]);
        float beta = a->beta[t * a->n_v_heads + h];
        float *o = a->o + t * a->ldo + h * dv;
        for (int64_t i = 0; i < dk * dv; i++)
            S[i] *= decay;
        /* delta = (v - S~^T k) * beta ; S += k delta^T */
        for (int64_t j = 0; j < dv; j++) {
            float mem = 0.0f;
            for (int64_t i = 0; i < dk; i++)
                mem += S[i * dv + j] * kbuf[i];
            o[j] = (v[j] - mem) * beta; /* o holds delta until the read below */
        }
        for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++)
                S[i * dv + j] += kbuf[i] * o[j];
        for (int64_t j = 0; j < dv; j++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < dk; i++)
                acc += S[i * dv + j] * qbuf[i];
            o[j] = acc;
        }
    }
}

static void gdn_head_chunked(const clef_gdn_args *a, int64_t h, float *S, gdn_scratch *s,
                             float *pack) {
    const int64_t dk = a->dk, dv = a->dv, C = GDN_CHUNK, Hv = a->n_v_heads;
    const int64_t kh = h / (Hv / a->n_k_heads);
    const float scale = 1.0f / sqrtf((float)dk);
    for (int64_t t0 = 0; t0 < a->T; t0 += C) {
        const int64_t L = a->T - t0 < C ? a->T - t0 : C;
        /* 1. normalised q (scaled by dk^-1/2), k; beta k, beta v; cumulative decay */
        float cum = 0.0f;
        for (int64_t i = 0; i < L; i++) {
            int64_t t = t0 + i;
            float beta = a->beta[t * Hv + h];
            l2norm_scaled(a->q + t * a->ldq + kh * dk, dk, scale, a->l2norm_qk, s->qn + i * dk);
            l2norm_scaled(a->k + t * a->ldk + kh * dk, dk, 1.0f, a->l2norm_qk, s->kn + i * dk);
            const float *v = a->v + t * a->ldv + h * dv;
            for (int64_t d = 0; d < dk; d++)
                s->kb[i * dk + d] = s->kn[i * dk + d] * beta;
            for (int64_t d = 0; d < dv; d++)
                s->vb[i * dv + d] = v[d] * beta;
            cum += a->g[t * Hv + h];
            s->gc[i] = cum;
        }
        const cpu_gemm_b kn_t = {CLEF_WTYPE_F32, CPU_GEMM_B_NK, s->kn, dk};
        /* decays between the chunk's tokens, computed once for steps 3 and 5 */
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < i; j++)
                s->decay[i * C + j] = cpu_exp1(s->gc[i] - s->gc[j]);
        /* 2. UT system: sys = (beta k) k^T * exp(gc_i - gc_j), strictly lower part used */
        cpu_gemm(L, L, dk, s->kb, dk, &kn_t, NULL, s->sys, C, 0, pack);
        /* 3. forward substitution: u_i = vb_i - sum_{j<i} sys_ij u_j;
         *    w_i = kb_i exp(gc_i) - sum_{j<i} sys_ij w_j   (torch: solve_triangular, unitriangular) */
        for (int64_t i = 0; i < L; i++) {
            float *ui = s->u + i * dv, *wi = s->w + i * dk;
            float egi = cpu_exp1(s->gc[i]);
            memcpy(ui, s->vb + i * dv, sizeof(float) * (size_t)dv);
            for (int64_t d = 0; d < dk; d++)
                wi[d] = s->kb[i * dk + d] * egi;
            for (int64_t j = 0; j < i; j++) {
                float lij = s->sys[i * C + j] * s->decay[i * C + j];
                const float *uj = s->u + j * dv, *wj = s->w + j * dk;
                for (int64_t d = 0; d < dv; d++)
                    ui[d] -= lij * uj[d];
                for (int64_t d = 0; d < dk; d++)
                    wi[d] -= lij * wj[d];
            }
        }
        /* 4. v_new = u - w S   (the part of the new values the old state does not predict) */
        const cpu_gemm_b state_kn = {CLEF_WTYPE_F32, CPU_GEMM_B_KN, S, dv};
        cpu_gemm(L, dv, dk, s->w, dk, &state_kn, NULL, s->tmp, dv, 0, pack);
        for (int64_t i = 0; i < L * dv; i++)
            s->u[i] -= s->tmp[i];
        /* 5. intra-chunk attention: sys = (q k^T) * exp(gc_i - gc_j) for j <= i, else 0
         *    (the diagonal's factor is exp(0) = 1) */
        cpu_gemm(L, L, dk, s->qn, dk, &kn_t, NULL, s->sys, C, 0, pack);
        for (int64_t i = 0; i < L; i++) {
            for (int64_t j = 0; j < i; j++)
                s->sys[i * C + j] *= s->decay[i * C + j];
            for (int64_t j = i + 1; j < L; j++)
                s->sys[i * C + j] = 0.0f;
        }
        /* 6. o = (q exp(gc)) S + sys v_new */
        for (int64_t i = 0; i < L; i++) {
            float e = cpu_exp1(s->gc[i]);
            for (int64_t d = 0; d < dk; d++)
                s->qn[i * dk + d] *= e;
        }
        float *o = a->o + t0 * a->ldo + h * dv;
        cpu_gemm(L, dv, dk, s->qn, dk, &state_kn, NULL, o, a->ldo, 0, pack);
        const cpu_gemm_b vnew_kn = {CLEF_WTYPE_F32, CPU_GEMM_B_KN, s->u, dv};
        cpu_gemm(L, dv, L, s->sys, C, &vnew_kn, NULL, o, a->ldo, 1, pack);
        /* 7. S = S exp(gc_last) + (k exp(gc_last - gc))^T v_new */
        float last = s->gc[L - 1];
        for (int64_t i = 0; i < L; i++) {
            float e = cpu_exp1(last - s->gc[i]);
            for (int64_t d = 0; d < dk; d++)
                s->kt[d * L + i] = s->kn[i * dk + d] * e;
        }
        float chunk_decay = cpu_exp1(last);
        for (int64_t i = 0; i < dk * dv; i++)
            S[i] *= chunk_decay;
        cpu_gemm(dk, dv, L, s->kt, L, &vnew_kn, NULL, S, dv, 1, pack);
    }
}

/* Subnormals inside the delta rule. Fast-decaying heads (A = e^A_log up to 16, so
 * exp(cumulative g) reaches 1e-38 within a few tokens) fill the state, the decay factors
 * and the decayed keys / queries with subnormal floats, and x86 cores take a microcode assist
 * on every arithmetic op that reads or makes one: measured ~6x slower delta rule on a
 * random-init release. Every decay factor here is <= 1 (g <= 0), so a subnormal is only ever
 * scaled down or added to normal values, and flushing it to zero changes a result by less
 * than 1.2e-38 in absolute terms — far below fp32 resolution of anything it is added to,
 * and the parity tests see no change. So the op runs with flush-to-zero and
 * denormals-are-zero set on its own threads, and restores the caller's MXCSR after. */
#if defined(__SSE2__)
enum { MXCSR_FTZ_DAZ = 0x8040 };
static unsigned flush_subnormals_begin(void) {
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | MXCSR_FTZ_DAZ);
    return saved;
}
static void flush_subnormals_end(unsigned saved) { _mm_setcsr(saved); }
#else
static unsigned flush_subnormals_begin(void) { return 0; }
static void flush_subnormals_end(unsigned saved) { (void)saved; }
#endif

void cpu_gdn(clef_backend *be, const clef_gdn_args *a, void *scratch) {
    const size_t per_thread = scratch_floats(a->dk, a->dv);
#pragma omp parallel num_threads(be->n_threads)
    {
        unsigned saved_csr = flush_subnormals_begin();
        gdn_scratch s = carve((float *)scratch + (size_t)omp_get_thread_num() * per_thread, a->dk, a->dv);
        float *pack = cpu_thread_pack(be);
#pragma omp for schedule(dynamic, 1)
        for (int64_t h = 0; h < a->n_v_heads; h++) {
            float *S = a->state ? a->state + h * a->dk * a->dv : s.state;
            if (!a->state)
                memset(S, 0, sizeof(float) * (size_t)(a->dk * a->dv));
            if (a->mode == CLEF_GDN_RECURRENT)
                gdn_head_recurrent(a, h, S, s.qn, s.kn);
            else
                gdn_head_chunked(a, h, S, &s, pack);
        }
        flush_subnormals_end(saved_csr);
    }
}
