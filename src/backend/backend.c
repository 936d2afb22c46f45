/*
 * backend.c — the dispatch layer of the op table (see backend.h): each clef_<op>() checks its
 * arguments once and calls the backend's implementation. A failed check is a bug in the
 * calling model code (shapes are validated at load), so it is a CLEF_ASSERT, not a status.
 */
#include "backend/backend.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

clef_backend_params clef_backend_default_params(void) {
    clef_backend_params p = {0};
    return p;
}

void clef_backend_free(clef_backend *be) {
    if (be)
        be->ops->free(be);
}

int clef_backend_fork(clef_backend *parent, clef_backend **child) {
    if (!child)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_backend_fork: child is NULL");
    *child = NULL;
    if (!parent)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_backend_fork: parent is NULL");
    if (!parent->ops->fork)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "backend '%s' cannot fork", parent->ops->name);
    return parent->ops->fork(parent, child);
}

/* Packed sequences must tile exactly n_rows rows; offsets are host values (start_dev holds the
 * same for devices and is only checked for presence). */
static void check_seqs(const clef_seqs *s, int64_t n_rows) {
    if (!s)
        return;
    CLEF_ASSERT(s->n_seqs >= 1 && s->start && s->start_dev && s->start[0] == 0);
    for (int64_t i = 0; i < s->n_seqs; i++)
        CLEF_ASSERT(s->start[i + 1] >= s->start[i] && s->start[i + 1] - s->start[i] <= s->max_len);
    CLEF_ASSERT(s->start[s->n_seqs] == n_rows);
}

void *clef_backend_alloc(clef_backend *be, size_t bytes) { return be->ops->alloc(be, bytes); }

void clef_backend_release(clef_backend *be, void *buf) {
    if (buf)
        be->ops->release(be, buf);
}

int clef_backend_write(clef_backend *be, void *dst, const void *host_src, size_t bytes) {
    return be->ops->write(be, dst, host_src, bytes);
}

int clef_backend_read(clef_backend *be, void *host_dst, const void *src, size_t bytes) {
    return be->ops->read(be, host_dst, src, bytes);
}

int clef_backend_synchronize(clef_backend *be) { return be->ops->synchronize(be); }

int clef_backend_memory(clef_backend *be, clef_backend_memory_info *out) {
    CLEF_ASSERT(be && out);
    memset(out, 0, sizeof *out);
    return be->ops->memory ? be->ops->memory(be, out) : CLEF_OK;
}

void *clef_backend_host_alloc(clef_backend *be, size_t bytes) {
    return be->ops->host_alloc ? be->ops->host_alloc(be, bytes) : malloc(bytes ? bytes : 1);
}

void clef_backend_host_free(clef_backend *be, void *ptr) {
    if (!ptr)
        return;
    if (be->ops->host_free)
        be->ops->host_free(be, ptr);
    else
        free(ptr);
}

int clef_backend_can_capture(const clef_backend *be) {
    return be->ops->capture_begin && be->ops->capture_end && be->ops->graph_launch && be->ops->graph_free;
}

int clef_backend_capture_begin(clef_backend *be) {
    if (!clef_backend_can_capture(be))
        return clef_fail(CLEF_ERR_UNSUPPORTED, "backend '%s' cannot record ops", be->ops->name);
    return be->ops->capture_begin(be);
}

int clef_backend_capture_end(clef_backend *be, clef_graph **graph) {
    CLEF_ASSERT(graph && clef_backend_can_capture(be));
    *graph = NULL;
    return be->ops->capture_end(be, graph);
}

int clef_backend_graph_launch(clef_backend *be, clef_graph *graph) {
    CLEF_ASSERT(graph && clef_backend_can_capture(be));
    return be->ops->graph_launch(be, graph);
}

void clef_backend_graph_free(clef_backend *be, clef_graph *graph) {
    if (graph && be->ops->graph_free)
        be->ops->graph_free(be, graph);
}

int clef_backend_write_async(clef_backend *be, void *dst, const void *host_src, size_t bytes) {
    return be->ops->write_async ? be->ops->write_async(be, dst, host_src, bytes)
                                : be->ops->write(be, dst, host_src, bytes);
}

int clef_backend_supports_format(clef_backend *be, clef_wtype t) {
    if (!clef_wtype_get_traits(t))
        return 0;
    if (be->ops->supports_format)
        return be->ops->supports_format(be, t);
    return t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16;
}

/* A matrix every op may be handed: a known type, its descriptor iff quantized, whole blocks. */
static void check_matrix(const clef_matrix *w) {
    CLEF_ASSERT(w && w->data);
    const clef_wtype_traits *tr = clef_wtype_get_traits(w->type);
    CLEF_ASSERT(tr && (tr->is_quantized ? w->quant != NULL : w->quant == NULL));
    CLEF_ASSERT(w->rows > 0 && w->cols > 0 && w->ld >= w->cols && w->quant_row0 >= 0);
    CLEF_ASSERT(w->ld % tr->block_size == 0);
}

size_t clef_backend_prepared_size(clef_backend *be, const clef_matrix *w) {
    check_matrix(w);
    return be->ops->prepared_size ? be->ops->prepared_size(be, w) : 0;
}

int clef_backend_prepare_matrix(clef_backend *be, const clef_matrix *w, void *dst,
                                clef_matrix *out) {
    check_matrix(w);
    CLEF_ASSERT(be->ops->prepare_matrix && dst && out);
    int st = be->ops->prepare_matrix(be, w, dst, out);
    if (st == CLEF_OK) {
        check_matrix(out);
        CLEF_ASSERT(out->rows == w->rows && out->cols == w->cols);
    }
    return st;
}

static void check_matmul(int64_t T, int64_t ldx, const clef_matrix *w, int64_t ldy) {
    check_matrix(w);
    CLEF_ASSERT(T >= 0 && ldx >= w->cols && ldy >= w->rows);
}

void clef_matmul(clef_backend *be, int64_t T, const float *x, int64_t ldx, const clef_matrix *w,
                 const float *bias, float *y, int64_t ldy, int accumulate) {
    clef_matmul_scratch(be, T, x, ldx, w, bias, y, ldy, accumulate, NULL);
}

void clef_matmul_scratch(clef_backend *be, int64_t T, const float *x, int64_t ldx,
                         const clef_matrix *w, const float *bias, float *y, int64_t ldy,
                         int accumulate, void *scratch) {
    check_matmul(T, ldx, w, ldy);
    if (T == 0)
        return;
    CLEF_ASSERT(x && y);
    be->ops->matmul(be, T, x, ldx, w, bias, y, ldy, accumulate, scratch);
}

size_t clef_matmul_workspace_size(clef_backend *be, int64_t T, const clef_matrix *w) {
    CLEF_ASSERT(T >= 0);
    check_matrix(w);
    return be->ops->matmul_workspace_size ? be->ops->matmul_workspace_size(be, T, w) : 0;
}

void clef_get_rows(clef_backend *be, const clef_matrix *e, int64_t n, const int32_t *ids,
                   float *y, int64_t ldy) {
    check_matrix(e);
    CLEF_ASSERT(n >= 0 && ldy >= e->cols);
    if (n == 0)
        return;
    CLEF_ASSERT(ids && y);
    be->ops->get_rows(be, e, n, ids, y, ldy);
}

void clef_rmsnorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                  const float *w, float eps, int add_one, float *y, int64_t ldy) {
    CLEF_ASSERT(rows >= 0 && dim > 0 && ldx >= dim && ldy >= dim);
    if (rows == 0)
        return;
    CLEF_ASSERT(x && y && (x != y || ldx == ldy));
    be->ops->rmsnorm(be, rows, dim, x, ldx, w, eps, add_one, y, ldy);
}

void clef_rmsnorm_gated(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                        const float *z, int64_t ldz, const float *w, float eps, float *y,
                        int64_t ldy) {
    CLEF_ASSERT(rows >= 0 && dim > 0 && ldx >= dim && ldz >= dim && ldy >= dim);
    if (rows == 0)
        return;
    CLEF_ASSERT(x && z && w && y && (x != y || ldx == ldy));
    be->ops->rmsnorm_gated(be, rows, dim, x, ldx, z, ldz, w, eps, y, ldy);
}

void clef_layernorm(clef_backend *be, int64_t rows, int64_t dim, const float *x, int64_t ldx,
                    const float *w, const float *b, float eps, float *y, int64_t ldy) {
    CLEF_ASSERT(rows >= 0 && dim > 0 && ldx >= dim && ldy >= dim);
    if (rows == 0)
        return;
    CLEF_ASSERT(x && y && (x != y || ldx == ldy));
    be->ops->layernorm(be, rows, dim, x, ldx, w, b, eps, y, ldy);
}

void clef_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x,
                             int64_t ldx, const float *w, const float *prev, float *y,
                             int64_t ldy, const clef_seqs *seqs) {
    CLEF_ASSERT(T >= 0 && C > 0 && K > 0 && ldx >= C && ldy >= C);
    if (T == 0)
        return;
    CLEF_ASSERT(x && w && y && x != y);
    check_seqs(seqs, T);
    be->ops->conv1d_causal_silu(be, T, C, K, x, ldx, w, prev, y, ldy, seqs);
}

void clef_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda,
                    const float *b, int64_t ldb, const float *a_log, const float *dt_bias,
                    float *g, float *beta) {
    CLEF_ASSERT(T >= 0 && H > 0 && lda >= H && ldb >= H);
    if (T == 0)
        return;
    CLEF_ASSERT(a && b && a_log && dt_bias && g && beta);
    be->ops->gdn_gates(be, T, H, a, lda, b, ldb, a_log, dt_bias, g, beta);
}

static void check_gdn_args(const clef_gdn_args *a) {
    CLEF_ASSERT(a && a->T >= 0 && a->n_k_heads > 0 && a->n_v_heads > 0);
    CLEF_ASSERT(a->n_v_heads % a->n_k_heads == 0 && a->dk > 0 && a->dv > 0);
    CLEF_ASSERT(a->ldq >= a->n_k_heads * a->dk && a->ldk >= a->n_k_heads * a->dk);
    CLEF_ASSERT(a->ldv >= a->n_v_heads * a->dv && a->ldo >= a->n_v_heads * a->dv);
    CLEF_ASSERT(a->mode == CLEF_GDN_CHUNKED || a->mode == CLEF_GDN_RECURRENT);
}

void clef_gdn(clef_backend *be, const clef_gdn_args *args, void *scratch) {
    check_gdn_args(args);
    if (args->T == 0)
        return;
    CLEF_ASSERT(args->q && args->k && args->v && args->g && args->beta && args->o);
    check_seqs(args->seqs, args->T);
    be->ops->gdn(be, args, scratch);
}

size_t clef_gdn_workspace_size(clef_backend *be, const clef_gdn_args *args) {
    check_gdn_args(args);
    return be->ops->gdn_workspace_size(be, args);
}

void clef_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims,
                     double theta, const int64_t sections[3], int mrope_interleaved,
                     float *cos_out, float *sin_out) {
    CLEF_ASSERT(T >= 0 && rot_dims > 0 && rot_dims % 2 == 0 && theta > 0 && sections);
    CLEF_ASSERT(sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0);
    CLEF_ASSERT(sections[0] + sections[1] + sections[2] == rot_dims / 2);
    if (T == 0)
        return;
    CLEF_ASSERT(pos && cos_out && sin_out);
    be->ops->rope_table(be, T, pos, rot_dims, theta, sections, mrope_interleaved, cos_out, sin_out);
}

void clef_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                     int64_t head_stride, int64_t rot_dims, const float *cos_t,
                     const float *sin_t) {
    CLEF_ASSERT(T >= 0 && n_heads > 0 && rot_dims > 0 && rot_dims % 2 == 0);
    CLEF_ASSERT(head_stride >= rot_dims && ldx >= (n_heads - 1) * head_stride + rot_dims);
    if (T == 0)
        return;
    CLEF_ASSERT(x && cos_t && sin_t);
    be->ops->rope_apply(be, T, n_heads, x, ldx, head_stride, rot_dims, cos_t, sin_t);
}

static void check_attention_args(const clef_attention_args *a) {
    CLEF_ASSERT(a && a->n_q >= 0 && a->n_kv >= 0 && a->head_dim > 0);
    CLEF_ASSERT(a->n_q_heads > 0 && a->n_kv_heads > 0 && a->n_q_heads % a->n_kv_heads == 0);
    CLEF_ASSERT(!a->causal || a->n_kv >= a->n_q);
    CLEF_ASSERT(a->q_head_stride >= a->head_dim && a->k_head_stride >= a->head_dim);
    CLEF_ASSERT(a->v_head_stride >= a->head_dim && a->o_head_stride >= a->head_dim);
    CLEF_ASSERT(a->ldq >= (a->n_q_heads - 1) * a->q_head_stride + a->head_dim);
    CLEF_ASSERT(a->ldk >= (a->n_kv_heads - 1) * a->k_head_stride + a->head_dim);
    CLEF_ASSERT(a->ldv >= (a->n_kv_heads - 1) * a->v_head_stride + a->head_dim);
    CLEF_ASSERT(a->ldo >= (a->n_q_heads - 1) * a->o_head_stride + a->head_dim);
}

void clef_attention(clef_backend *be, const clef_attention_args *args, void *scratch) {
    check_attention_args(args);
    if (args->n_q == 0)
        return;
    CLEF_ASSERT(args->n_kv > 0 && args->q && args->k && args->v && args->o);
    CLEF_ASSERT(!args->seqs || args->n_q == args->n_kv);
    check_seqs(args->seqs, args->n_q);
    be->ops->attention(be, args, scratch);
}

size_t clef_attention_workspace_size(clef_backend *be, const clef_attention_args *args) {
    check_attention_args(args);
    return be->ops->attention_workspace_size(be, args);
}

void clef_softmax(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx) {
    CLEF_ASSERT(rows >= 0 && cols > 0 && ldx >= cols);
    if (rows == 0)
        return;
    CLEF_ASSERT(x);
    be->ops->softmax(be, rows, cols, x, ldx);
}

void clef_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y) {
    CLEF_ASSERT(op >= 0 && op < CLEF_UNARY_COUNT && n >= 0);
    if (n == 0)
        return;
    CLEF_ASSERT(x && y);
    be->ops->unary(be, op, n, x, y);
}

void clef_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx,
                      const float *gate, int64_t ldgate) {
    CLEF_ASSERT(rows >= 0 && cols > 0 && ldx >= cols && ldgate >= cols);
    if (rows == 0)
        return;
    CLEF_ASSERT(x && gate);
    be->ops->mul_sigmoid(be, rows, cols, x, ldx, gate, ldgate);
}

void clef_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y) {
    CLEF_ASSERT(n >= 0);
    if (n == 0)
        return;
    CLEF_ASSERT(gate && up && y);
    be->ops->swiglu(be, n, gate, up, y);
}

void clef_swiglu_matmul(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                        const clef_matrix *w, float *out, int64_t ldo, int accumulate, void *scratch) {
    check_matmul(T, w->cols, w, ldo);
    if (T == 0)
        return;
    CLEF_ASSERT(gate && up && y && out);
    if (be->ops->swiglu_matmul) {
        be->ops->swiglu_matmul(be, T, gate, up, y, w, out, ldo, accumulate, scratch);
        return;
    }
    be->ops->swiglu(be, T * w->cols, gate, up, y);
    be->ops->matmul(be, T, y, w->cols, w, NULL, out, ldo, accumulate, scratch);
}

void clef_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y) {
    CLEF_ASSERT(n >= 0);
    if (n == 0)
        return;
    CLEF_ASSERT(a && b && y);
    be->ops->add(be, n, a, b, y);
}

/* ---- head ops ---------------------------------------------------------------------------- */

void clef_segment_sum(clef_backend *be, int64_t n_seg, int64_t dim, const clef_segment *segs,
                      const float *x, int64_t ldx, const float *row_weight, float *y,
                      int64_t ldy) {
    CLEF_ASSERT(n_seg >= 0 && dim > 0 && ldx >= dim && ldy >= dim);
    if (n_seg == 0)
        return;
    CLEF_ASSERT(segs && x && y);
    be->ops->segment_sum(be, n_seg, dim, segs, x, ldx, row_weight, y, ldy);
}

void clef_row_dot(clef_backend *be, int64_t n, int64_t dim, const float *a, int64_t lda,
                  const int32_t *ia, const float *b, int64_t ldb, const int32_t *ib, float scale,
                  float eps, float *out) {
    CLEF_ASSERT(n >= 0 && dim > 0 && lda >= dim && ldb >= dim && eps >= 0.0f);
    if (n == 0)
        return;
    CLEF_ASSERT(a && b && out);
    be->ops->row_dot(be, n, dim, a, lda, ia, b, ldb, ib, scale, eps, out);
}

void clef_segment_softmax(clef_backend *be, int64_t n_seg, const int32_t *offsets,
                          const float *x, float *y) {
    CLEF_ASSERT(n_seg >= 0);
    if (n_seg == 0)
        return;
    CLEF_ASSERT(offsets && x && y);
    be->ops->segment_softmax(be, n_seg, offsets, x, y);
}

void clef_add_rows(clef_backend *be, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                   const float *v, int64_t ldv, const int32_t *idx, float *y, int64_t ldy) {
    CLEF_ASSERT(rows >= 0 && cols > 0 && ldx >= cols && ldy >= cols && ldv >= 0);
    CLEF_ASSERT(!idx || ldv >= cols);
    if (rows == 0)
        return;
    CLEF_ASSERT(x && v && y && (x != y || ldx == ldy));
    be->ops->add_rows(be, rows, cols, x, ldx, v, ldv, idx, y, ldy);
}

void clef_pair_features(clef_backend *be, int64_t rows, int64_t dim, const float *f,
                        int64_t ldf, const int32_t *idx, const float *o, int64_t ldo,
                        float *feat, int64_t ldfeat) {
    CLEF_ASSERT(rows >= 0 && dim > 0 && ldf >= dim && ldo >= dim && ldfeat >= 4 * dim);
    if (rows == 0)
        return;
    CLEF_ASSERT(f && idx && o && feat);
    be->ops->pair_features(be, rows, dim, f, ldf, idx, o, ldo, feat, ldfeat);
}

void clef_axpy(clef_backend *be, int64_t n, float alpha, const float *x, float *y) {
    CLEF_ASSERT(n >= 0);
    if (n == 0)
        return;
    CLEF_ASSERT(x && y);
    be->ops->axpy(be, n, alpha, x, y);
}
