/*
 * test_weight_formats.c — the weight formats (weight_format.h) and their place in the backend
 * and the loader:
 *  - traits against releases made by the reference libraries: the NF4 fixture (bitsandbytes)
 *    and the FP8 fixture (compressed-tensors) under tests/release/fixtures store exactly
 *    row_bytes(format, in) x out bytes per quantized weight, NF4 one absmax per block and FP8
 *    one scale per row;
 *  - the descriptor travels through slices: a slice of a slice of an NF4 / FP8 / INT8 matrix
 *    shares the descriptor and finds its scales at the stored tensor's row (checked by
 *    dequantizing rows of the slice with the rule of docs/model.md and comparing with the
 *    same rows of the whole matrix); for plain formats matmul over a slice equals those rows
 *    of matmul over the whole matrix, bit for bit;
 *  - F16 weights: the CPU prepare step widens them exactly: matmul and get_rows of a prepared
 *    F16 matrix are bit-identical to those of the F32 matrix of the same values;
 *  - matmul with caller-planned scratch (matmul_workspace_size) is bit-identical to matmul with
 *    the backend's own scratch;
 *  - the loader: pieces of a bounded staging buffer (down to a few bytes) place the same bytes
 *    and the same fp32 vectors as one read; a backend that does not run a format makes the
 *    backbone and the head loaders fail with CLEF_ERR_UNSUPPORTED naming the tensor, the
 *    format and the backend;
 *  - the plug point of the quantized formats (load_quantized): a small FP8 format loader over
 *    the compressed-tensors fixture places the release's bytes and scales, its parts share
 *    the descriptor, and a backend without FP8 refuses it by name.
 * Run from the repository root (ctest does).
 */
#include "backend/backend.h"
#include "core/convert.h"
#include "core/numeric.h"
#include "model/joint_head.h"
#include "model/qwen35.h"
#include "model/weight_loader.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static uint32_t rng_state = 12345;
static float rnd(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

/* ---- traits against reference-made releases ------------------------------------------- */

static void test_traits_match_releases(void) {
    const clef_wtype_traits *f32 = clef_wtype_get_traits(CLEF_WTYPE_F32);
    CHECK(f32 && f32->block_size == 1 && !f32->is_quantized);
    CHECK(clef_wtype_get_traits(CLEF_WTYPE_COUNT) == NULL);
    CHECK_EQ_STR(clef_wtype_name((clef_wtype)99), "?");
    CHECK_EQ_INT(clef_wtype_row_bytes(CLEF_WTYPE_NF4, 65), 0); /* not a whole block */
    CHECK_EQ_INT(clef_wtype_size(CLEF_WTYPE_NF4), 0);          /* no per-element size */

    const char *proj[] = {"mlp.up_proj", "mlp.gate_proj", "mlp.down_proj"};
    clef_release *rel = NULL;
    int st = clef_release_open("tests/release/fixtures/nf4", NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "nf4 fixture: %s", clef_last_error());
    const clef_text_config *c = rel ? &clef_release_get_config(rel)->text : NULL;
    for (int i = 0; rel && i < 3; i++) {
        int64_t out = i < 2 ? c->intermediate_size : c->hidden_size;
        int64_t in = i < 2 ? c->hidden_size : c->intermediate_size;
        char name[128], absmax[160];
        snprintf(name, sizeof name, "text.layers.0.%s.weight", proj[i]);
        snprintf(absmax, sizeof absmax, "%s.absmax", name);
        const clef_tensor_info *w = clef_release_find(rel, name), *a = clef_release_find(rel, absmax);
        CHECK_MSG(w && a, "nf4 fixture lacks %s or its absmax", name);
        if (!w || !a)
            continue;
        const clef_wtype_traits *tr = clef_wtype_get_traits(CLEF_WTYPE_NF4);
        CHECK_EQ_INT(w->n_bytes, clef_wtype_row_bytes(CLEF_WTYPE_NF4, in) * (size_t)out);
        CHECK_EQ_INT(a->shape[0], out * in / tr->block_size);
        printf("NF4 %-22s [%lld, %lld]: %llu bytes stored, traits say %zu; %lld absmax blocks\n",
               proj[i], (long long)out, (long long)in, (unsigned long long)w->n_bytes,
               clef_wtype_row_bytes(CLEF_WTYPE_NF4, in) * (size_t)out, (long long)a->shape[0]);
    }
    clef_release_free(rel);

    rel = NULL;
    st = clef_release_open("tests/release/fixtures/fp8", NULL, &rel);
    CHECK_MSG(st == CLEF_OK, "fp8 fixture: %s", clef_last_error());
    c = rel ? &clef_release_get_config(rel)->text : NULL;
    for (int i = 0; rel && i < 3; i++) {
        int64_t out = i < 2 ? c->intermediate_size : c->hidden_size;
        int64_t in = i < 2 ? c->hidden_size : c->intermediate_size;
        char name[128], scale[160];
        snprintf(name, sizeof name, "text.layers.0.%s.weight", proj[i]);
        snprintf(scale, sizeof scale, "text.layers.0.%s.weight_scale", proj[i]);
        const clef_tensor_info *w = clef_release_find(rel, name), *s = clef_release_find(rel, scale);
        CHECK_MSG(w && s, "fp8 fixture lacks %s or its weight_scale", name);
        if (!w || !s)
            continue;
        CHECK_EQ_INT(w->n_bytes, clef_wtype_row_bytes(CLEF_WTYPE_FP8_E4M3, in) * (size_t)out);
        CHECK_EQ_INT(s->shape[0], out); /* one scale per row: quant_row0 + r indexes it */
    }
    clef_release_free(rel);
}

/* ---- the descriptor through slices ------------------------------------------------------ */

/* Element (r, c) of a quantized matrix by the rules of weight_format.h (docs/model.md), read
 * through the matrix's own view: data from its row r, scales from quant_row0 + r. */
static float dequant(const clef_matrix *m, int64_t r, int64_t c) {
    const clef_quant *q = m->quant;
    const int64_t R = m->quant_row0 + r; /* row in the stored tensor */
    if (m->type == CLEF_WTYPE_NF4) {
        const uint8_t *row = (const uint8_t *)m->data + clef_wtype_row_bytes(m->type, m->ld) * (size_t)r;
        uint8_t byte = row[c / 2];
        int nib = c % 2 == 0 ? byte >> 4 : byte & 15;
        int64_t b = (R * m->ld + c) / q->u.nf4.block; /* block number in the stored tensor */
        float am = q->u.nf4.nested_code[q->u.nf4.absmax_q[b]] * q->u.nf4.nested_absmax[b / q->u.nf4.nested_block];
        am = am + q->u.nf4.nested_offset;
        return clef_bf16_to_f32(clef_f32_to_bf16(q->u.nf4.code[nib] * am));
    }
    const uint8_t v = ((const uint8_t *)m->data)[r * m->ld + c];
    if (m->type == CLEF_WTYPE_FP8_E4M3)
        return clef_bf16_to_f32(clef_f32_to_bf16(clef_fp8e4m3_to_f32(v) * q->u.fp8.weight_scale[R]));
    return (float)(int8_t)v * q->u.int8_convrot.weight_scale[R]; /* rotated weight */
}

static void check_slices_agree(const clef_matrix *whole, const char *what) {
    const int64_t r0 = 3, n = 9, r1 = 2, n1 = 5; /* slice, then a slice of the slice */
    clef_matrix s = clef_matrix_slice_rows(whole, r0, n);
    clef_matrix ss = clef_matrix_slice_rows(&s, r1, n1);
    CHECK(s.quant == whole->quant && ss.quant == whole->quant);
    CHECK_EQ_INT(ss.quant_row0, r0 + r1);
    CHECK_EQ_INT(ss.rows, n1);
    int same = 1;
    for (int64_t r = 0; r < n1; r++)
        for (int64_t c = 0; c < whole->cols; c++)
            same &= dequant(&ss, r, c) == dequant(whole, r0 + r1 + r, c);
    CHECK_MSG(same, "%s: rows of a slice of a slice differ from the same rows of the whole", what);
    /* and the slice's scales are not those of its own first rows (the test can fail) */
    int differ = 0;
    for (int64_t c = 0; c < whole->cols; c++)
        differ |= dequant(&ss, 0, c) != dequant(whole, 0, c);
    CHECK_MSG(differ, "%s: slice row 0 equals whole row 0 (degenerate data)", what);
}

static void test_descriptor_through_slices(void) {
    enum { ROWS = 20, COLS = 192 }; /* 3 NF4 blocks per row */
    uint8_t packed[ROWS * COLS / 2], i8[ROWS * COLS], absmax_q[ROWS * COLS / 64];
    float code[16], nested_code[256], nested_absmax[ROWS * COLS / 64 / 4 + 1], scale[ROWS];
    for (size_t i = 0; i < sizeof packed; i++) {
        rng_state = rng_state * 1664525u + 1013904223u;
        packed[i] = (uint8_t)(rng_state >> 13);
    }
    for (size_t i = 0; i < sizeof i8; i++) {
        i8[i] = (uint8_t)(int8_t)(rnd() * 120.0f);
        if ((i8[i] & 0x7f) == 0x7f) /* e4m3fn NaN: keep every value comparable */
            i8[i] = 0;
    }
    for (size_t i = 0; i < sizeof absmax_q; i++)
        absmax_q[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 16; i++)
        code[i] = -1.0f + (float)i / 7.5f;
    for (int i = 0; i < 256; i++)
        nested_code[i] = rnd();
    for (size_t i = 0; i < sizeof nested_absmax / sizeof nested_absmax[0]; i++)
        nested_absmax[i] = 0.5f + (float)i;
    for (int i = 0; i < ROWS; i++)
        scale[i] = 0.01f * (float)(i + 1);

    /* NF4 with a nested group of 4 blocks, so groups straddle rows (3 blocks per row) */
    clef_quant nf4 = {.u.nf4 = {.block = 64, .absmax_q = absmax_q, .nested_absmax = nested_absmax,
                                .nested_block = 4, .nested_offset = 0.125f, .code = code,
                                .nested_code = nested_code}};
    clef_matrix m = {.type = CLEF_WTYPE_NF4, .rows = ROWS, .cols = COLS, .ld = COLS, .data = packed,
                     .quant = &nf4};
    check_slices_agree(&m, "NF4");
    clef_matrix s = clef_matrix_slice_rows(&m, 3, 9);
    CHECK((const uint8_t *)s.data == packed + 3 * COLS / 2);

    clef_quant fp8 = {.u.fp8 = {.weight_scale = scale}};
    m = (clef_matrix){.type = CLEF_WTYPE_FP8_E4M3, .rows = ROWS, .cols = COLS, .ld = COLS, .data = i8,
                      .quant = &fp8};
    check_slices_agree(&m, "FP8_E4M3");

    clef_quant i8q = {.u.int8_convrot = {.weight_scale = scale, .rotation_group = 64}};
    m = (clef_matrix){.type = CLEF_WTYPE_INT8_CONVROT, .rows = ROWS, .cols = COLS, .ld = COLS,
                      .data = i8, .quant = &i8q};
    check_slices_agree(&m, "INT8_CONVROT");
}

/* ---- plain formats through slices, F16 prepare, matmul scratch -------------------------- */

static clef_backend *make_cpu(int n_threads) {
    clef_backend *be = NULL;
    clef_backend_params p = clef_backend_default_params();
    p.n_threads = n_threads;
    CHECK_EQ_INT(clef_backend_cpu_create(&p, &be), CLEF_OK);
    return be;
}

static void test_plain_formats(clef_backend *be) {
    enum { N = 70, K = 45, T = 13 };
    float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * T * K);
    uint16_t *wh = malloc(2 * N * K), *wb = malloc(2 * N * K);
    float *y_whole = malloc(sizeof(float) * T * N), *y_part = malloc(sizeof(float) * T * N);
    float *y_ref = malloc(sizeof(float) * T * N);
    /* random halves (exponents 2^-7 .. 2^0, both signs, a few subnormals), so an F32 matrix
     * of exactly the same values exists */
    for (int i = 0; i < N * K; i++) {
        rng_state = rng_state * 1664525u + 1013904223u;
        uint32_t r = rng_state >> 8;
        uint16_t exp = i % 97 == 0 ? 0 : (uint16_t)(8 + r % 8);
        wh[i] = (uint16_t)(((r >> 3) & 1u) << 15 | exp << 10 | ((r >> 4) & 0x3ffu));
        wf[i] = clef_f16_to_f32(wh[i]);
        wb[i] = clef_f32_to_bf16(wf[i]);
    }
    for (int i = 0; i < T * K; i++)
        x[i] = rnd();

    /* F16: supported by the CPU through its prepare step, bit-identical to F32 */
    CHECK(clef_backend_supports_format(be, CLEF_WTYPE_F16));
    /* the quantized formats run too (cpu_quant_matmul.c; parity in tests/quant) */
    CHECK(clef_backend_supports_format(be, CLEF_WTYPE_NF4));
    CHECK(clef_backend_supports_format(be, CLEF_WTYPE_FP8_E4M3));
    CHECK(clef_backend_supports_format(be, CLEF_WTYPE_INT8_CONVROT));
    clef_matrix mh = {.type = CLEF_WTYPE_F16, .rows = N, .cols = K, .ld = K, .data = wh};
    size_t need = clef_backend_prepared_size(be, &mh);
    /* fp32, rows padded to a whole GEMM panel at most (the CPU pre-packs at load) */
    CHECK_MSG(need >= sizeof(float) * N * K && need < sizeof(float) * (N + 64) * K,
              "prepared F16 [%d, %d]: %zu bytes", N, K, need);
    void *prep = clef_backend_alloc(be, need);
    clef_matrix mp;
    CHECK_EQ_INT(clef_backend_prepare_matrix(be, &mh, prep, &mp), CLEF_OK);
    CHECK_EQ_INT(mp.type, CLEF_WTYPE_F32);
    clef_matrix mf = {.type = CLEF_WTYPE_F32, .rows = N, .cols = K, .ld = K, .data = wf};
    clef_matmul(be, T, x, K, &mf, NULL, y_ref, N, 0);
    clef_matmul(be, T, x, K, &mp, NULL, y_whole, N, 0);
    CHECK_MSG(memcmp(y_ref, y_whole, sizeof(float) * T * N) == 0, "prepared F16 matmul != F32 matmul");
    int32_t ids[3] = {0, 69, 5};
    float rows_ref[3 * K], rows_got[3 * K];
    clef_get_rows(be, &mf, 3, ids, rows_ref, K);
    clef_get_rows(be, &mp, 3, ids, rows_got, K);
    CHECK(memcmp(rows_ref, rows_got, sizeof rows_ref) == 0);
    clef_backend_release(be, prep);

    /* slices of plain matrices: the same rows of the product, bit for bit */
    clef_matrix plain[2] = {mf, {.type = CLEF_WTYPE_BF16, .rows = N, .cols = K, .ld = K, .data = wb}};
    for (int p = 0; p < 2; p++) {
        clef_matmul(be, T, x, K, &plain[p], NULL, y_whole, N, 0);
        const int64_t r0 = 17, n = 40;
        clef_matrix s = clef_matrix_slice_rows(&plain[p], r0, n);
        CHECK_EQ_INT(s.quant_row0, r0);
        clef_matmul(be, T, x, K, &s, NULL, y_part, n, 0);
        int same = 1;
        for (int t = 0; t < T; t++)
            same &= memcmp(y_part + t * n, y_whole + t * N + r0, sizeof(float) * n) == 0;
        CHECK_MSG(same, "%s: matmul over rows [17, 57) differs from those rows of the whole",
                  clef_wtype_name(plain[p].type));
    }

    /* F32 and BF16 are pre-packed at load too (resident once, at their stored width): the
     * prepared matrix gives the stored one's bits, through matmul and get_rows */
    for (int p = 0; p < 2; p++) {
        size_t bytes = clef_backend_prepared_size(be, &plain[p]);
        size_t width = plain[p].type == CLEF_WTYPE_BF16 ? 2 : 4;
        CHECK_MSG(bytes >= width * N * K && bytes < width * (N + 64) * K, "prepared %s: %zu bytes",
                  clef_wtype_name(plain[p].type), bytes);
        void *buf = clef_backend_alloc(be, bytes);
        clef_matrix prepared;
        CHECK_EQ_INT(clef_backend_prepare_matrix(be, &plain[p], buf, &prepared), CLEF_OK);
        CHECK_EQ_INT(prepared.type, plain[p].type);
        clef_matmul(be, T, x, K, &plain[p], NULL, y_whole, N, 0);
        clef_matmul(be, T, x, K, &prepared, NULL, y_part, N, 0);
        CHECK_MSG(memcmp(y_whole, y_part, sizeof(float) * T * N) == 0,
                  "prepared %s matmul != stored", clef_wtype_name(plain[p].type));
        clef_get_rows(be, &plain[p], 3, ids, rows_ref, K);
        clef_get_rows(be, &prepared, 3, ids, rows_got, K);
        CHECK_MSG(memcmp(rows_ref, rows_got, sizeof rows_ref) == 0, "prepared %s get_rows != stored",
                  clef_wtype_name(plain[p].type));
        clef_backend_release(be, buf);
    }

    /* caller-planned scratch: same bits as the backend's own */
    size_t ws = clef_matmul_workspace_size(be, T, &mf);
    CHECK(ws > 0);
    void *scratch = clef_backend_alloc(be, ws);
    clef_matmul_scratch(be, T, x, K, &mf, NULL, y_part, N, 0, scratch);
    CHECK(memcmp(y_part, y_ref, sizeof(float) * T * N) == 0);
    clef_backend_release(be, scratch);
    free(wf), free(x), free(wh), free(wb), free(y_whole), free(y_part), free(y_ref);
}

/* ---- the loader: bounded staging, and a backend that refuses a format ----------------- */

/* All rows of m as fp32, row-major, into host memory (an embedding lookup of every row). */
static void read_matrix(clef_backend *be, const clef_matrix *m, float *out) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)m->rows);
    for (int64_t i = 0; i < m->rows; i++)
        ids[i] = (int32_t)i;
    int32_t *d_ids = clef_backend_alloc(be, sizeof(int32_t) * (size_t)m->rows);
    float *d_out = clef_backend_alloc(be, sizeof(float) * (size_t)(m->rows * m->cols));
    CHECK_EQ_INT(clef_backend_write(be, d_ids, ids, sizeof(int32_t) * (size_t)m->rows), CLEF_OK);
    clef_get_rows(be, m, m->rows, d_ids, d_out, m->cols);
    CHECK_EQ_INT(clef_backend_synchronize(be), CLEF_OK);
    CHECK_EQ_INT(clef_backend_read(be, out, d_out, sizeof(float) * (size_t)(m->rows * m->cols)), CLEF_OK);
    clef_backend_release(be, d_ids), clef_backend_release(be, d_out);
    free(ids);
}

static void test_staging_pieces(clef_backend *be) {
    clef_release *rel = NULL;
    CHECK_EQ_INT(clef_release_open("tests/backbone/fixtures/d_f16", NULL, &rel), CLEF_OK);
    if (!rel)
        return;
    const clef_text_config *c = &clef_release_get_config(rel)->text;
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    const char *mat = "text.layers.0.mlp.up_proj.weight", *vec = "text.layers.0.input_layernorm.weight";
    const size_t limits[] = {CLEF_WEIGHT_STAGING_BYTES, 6, 1}; /* 1: below one element */
    float *first_m = NULL, *first_v = NULL;
    const size_t mat_floats = (size_t)(c->intermediate_size * c->hidden_size);
    for (int i = 0; i < 3; i++) {
        clef_buffer_set set = clef_buffer_set_init(be);
        clef_weight_loader L = clef_weight_loader_init(be, &src, &set, NULL, "", "config");
        L.staging_limit = limits[i];
        clef_matrix m;
        float *v = NULL;
        CHECK_EQ_INT(clef_weight_load_matrix(&L, mat, c->intermediate_size, c->hidden_size, &m), CLEF_OK);
        CHECK_EQ_INT(clef_weight_load_vector(&L, vec, &c->hidden_size, 1, &v), CLEF_OK);
        CHECK_EQ_INT(m.type, CLEF_WTYPE_F32); /* the CPU prepared the stored F16 */
        CHECK_EQ_INT(set.n, 2);               /* the stored F16 buffer was released */
        float *hm = malloc(sizeof(float) * mat_floats), *hv = malloc(sizeof(float) * c->hidden_size);
        read_matrix(be, &m, hm); /* through get_rows: the prepared form is the backend's layout */
        clef_backend_read(be, hv, v, sizeof(float) * c->hidden_size);
        if (i == 0) {
            /* one read of the stored bytes, converted here: the reference */
            const clef_tensor_info *t = clef_release_find(rel, mat);
            uint16_t *raw = malloc(t->n_bytes);
            clef_release_read(rel, t, raw);
            float *want = malloc(sizeof(float) * mat_floats);
            clef_convert_to_f32(CLEF_SCALAR_F16, raw, mat_floats, want);
            CHECK(memcmp(want, hm, sizeof(float) * mat_floats) == 0);
            free(raw), free(want);
            first_m = hm, first_v = hv;
        } else {
            CHECK_MSG(memcmp(first_m, hm, sizeof(float) * mat_floats) == 0,
                      "matrix staged in %zu-byte pieces differs", limits[i]);
            CHECK_MSG(memcmp(first_v, hv, sizeof(float) * c->hidden_size) == 0,
                      "vector staged in %zu-byte pieces differs", limits[i]);
            free(hm), free(hv);
        }
        clef_weight_loader_free(&L);
        clef_buffer_set_release(&set);
    }
    free(first_m), free(first_v);
    clef_release_free(rel);
}

/* The CPU backend with one weight format refused. */
static clef_wtype refused_format;
static int refusing_supports(clef_backend *be, clef_wtype t) {
    (void)be;
    return t != refused_format && (t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16 || t == CLEF_WTYPE_F16);
}

static void test_refused_format(clef_backend *cpu) {
    clef_backend_ops ops = *cpu->ops;
    ops.name = "cpu-refusing";
    ops.supports_format = refusing_supports;
    clef_backend be = *cpu;
    be.ops = &ops;
    const struct {
        const char *release;
        clef_wtype refuse;
        const char *first_matrix, *first_head_matrix, *format;
    } cases[] = {
        {"tests/backbone/fixtures/a_pattern", CLEF_WTYPE_BF16, "text.embed_tokens.weight",
         "head.memory_projection.weight", "BF16"},
        {"tests/backbone/fixtures/d_f16", CLEF_WTYPE_F16, "text.embed_tokens.weight",
         "head.memory_projection.weight", "F16"},
    };
    for (int i = 0; i < 2; i++) {
        refused_format = cases[i].refuse;
        clef_release *rel = NULL;
        CHECK_EQ_INT(clef_release_open(cases[i].release, NULL, &rel), CLEF_OK);
        if (!rel)
            continue;
        qwen35_model *m = NULL;
        int st = qwen35_load_release(rel, &be, &m);
        CHECK_EQ_INT(st, CLEF_ERR_UNSUPPORTED);
        CHECK(m == NULL);
        const char *msg = clef_last_error();
        printf("refused: %s\n", msg);
        CHECK_MSG(strstr(msg, cases[i].first_matrix) && strstr(msg, cases[i].format) &&
                      strstr(msg, "cpu-refusing"),
                  "message names tensor, format and backend: %s", msg);
        clef_tensor_source src = clef_tensor_source_of_release(rel);
        clef_head_limits lim = {.max_tokens = 16, .max_questions = 2, .max_options = 4};
        clef_joint_head *h = NULL;
        st = clef_joint_head_load(&be, &clef_release_get_config(rel)->head, &src, &lim, &h);
        CHECK_EQ_INT(st, CLEF_ERR_UNSUPPORTED);
        CHECK(h == NULL);
        msg = clef_last_error();
        printf("refused: %s\n", msg);
        CHECK_MSG(strstr(msg, cases[i].first_head_matrix) && strstr(msg, cases[i].format),
                  "head message names tensor and format: %s", msg);
        /* control: the same release loads on the backend that runs the format */
        CHECK_EQ_INT(qwen35_load_release(rel, cpu, &m), CLEF_OK);
        qwen35_free(m);
        CHECK_EQ_INT(clef_joint_head_load(cpu, &clef_release_get_config(rel)->head, &src, &lim, &h),
                     CLEF_OK);
        clef_joint_head_free(h);
        clef_release_free(rel);
    }
}

/* ---- the plug point of the quantized formats ------------------------------------------- */

/* A minimal FP8 format loader, as src/quant/ would write one: packed F8_E4M3 data and the
 * per-channel weight_scale widened to fp32, described by a clef_quant_fp8. */
static int fp8_loader(void *ctx, clef_weight_loader *L, const char *name,
                      const clef_tensor_info *t, int64_t rows, int64_t cols, clef_matrix *out) {
    (void)t;
    int *calls = ctx;
    ++*calls;
    void *data;
    size_t bytes;
    const int64_t dims[2] = {rows, cols}, sdims[2] = {rows, 1};
    int st = clef_weight_place_bytes(L, name, 2, dims, CLEF_DTYPE_F8_E4M3, &data, &bytes);
    if (st)
        return st;
    char scale_name[200];
    snprintf(scale_name, sizeof scale_name, "%s_scale", name);
    float *scale;
    if ((st = clef_weight_load_vector(L, scale_name, sdims, 2, &scale)))
        return st;
    clef_quant *q = clef_weight_new_quant(L);
    if (!q)
        return CLEF_ERR_OUT_OF_MEMORY;
    q->u.fp8.weight_scale = scale;
    *out = (clef_matrix){.type = CLEF_WTYPE_FP8_E4M3, .rows = rows, .cols = cols, .ld = cols,
                         .data = data, .quant = q};
    return CLEF_OK;
}

static int fp8_supports(clef_backend *be, clef_wtype t) {
    (void)be;
    return t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16 || t == CLEF_WTYPE_FP8_E4M3;
}

/* A CPU backend that runs the plain formats only (the CPU itself runs NF4 / FP8 / INT8 now). */
static int plain_supports(clef_backend *be, clef_wtype t) {
    (void)be;
    return t == CLEF_WTYPE_F32 || t == CLEF_WTYPE_BF16 || t == CLEF_WTYPE_F16;
}

static void test_quantized_plug_point(clef_backend *cpu) {
    clef_release *rel = NULL;
    CHECK_EQ_INT(clef_release_open("tests/release/fixtures/fp8", NULL, &rel), CLEF_OK);
    if (!rel)
        return;
    const clef_text_config *c = &clef_release_get_config(rel)->text;
    const int64_t R = c->intermediate_size, C = c->hidden_size;
    const char *name = "text.layers.0.mlp.up_proj.weight";
    clef_tensor_source src = clef_tensor_source_of_release(rel);
    clef_backend_ops ops = *cpu->ops;
    ops.name = "cpu-fp8";
    ops.supports_format = fp8_supports;
    clef_backend fp8_be = *cpu;
    fp8_be.ops = &ops;
    clef_backend_ops plain_ops = *cpu->ops;
    plain_ops.name = "cpu-plain";
    plain_ops.supports_format = plain_supports;
    clef_backend plain_be = *cpu;
    plain_be.ops = &plain_ops;
    int calls = 0;
    for (int round = 0; round < 3; round++) {
        /* 0: no format loader (init installs src/quant's: removed); 1: a backend that does
         * not run FP8; 2: a backend that does */
        clef_backend *be = round == 2 ? &fp8_be : round == 1 ? &plain_be : cpu;
        clef_buffer_set set = clef_buffer_set_init(be);
        clef_weight_loader L = clef_weight_loader_init(be, &src, &set, NULL, "", "config");
        L.load_quantized = NULL;
        if (round > 0)
            L.load_quantized = fp8_loader, L.load_quantized_ctx = &calls;
        L.staging_limit = 100; /* pieces here too */
        clef_matrix parts[2];
        const int64_t part_rows[2] = {40, R - 40};
        int st = clef_weight_load_matrix_parts(&L, name, R, C, 2, part_rows, parts);
        if (round == 0) {
            CHECK_EQ_INT(st, CLEF_ERR_TENSOR_DTYPE);
        } else if (round == 1) {
            CHECK_EQ_INT(st, CLEF_ERR_UNSUPPORTED);
            CHECK_MSG(strstr(clef_last_error(), name) && strstr(clef_last_error(), "FP8_E4M3"),
                      "message names tensor and format: %s", clef_last_error());
        } else {
            CHECK_EQ_INT(st, CLEF_OK);
            /* the placed bytes and scales are the release's; the second part starts at row 40
             * of the stored tensor and shares its descriptor */
            const clef_tensor_info *tw = clef_release_find(rel, name);
            const clef_tensor_info *ts = clef_release_find(rel, "text.layers.0.mlp.up_proj.weight_scale");
            uint8_t *want = malloc(tw->n_bytes), *got = malloc(tw->n_bytes);
            void *scale_raw = malloc(ts->n_bytes);
            float *want_scale = malloc(sizeof(float) * (size_t)R), *got_scale = malloc(sizeof(float) * (size_t)R);
            clef_release_read(rel, tw, want);
            clef_release_read(rel, ts, scale_raw);
            clef_scalar_kind kind;
            CHECK(clef_scalar_kind_of_dtype(ts->dtype, &kind));
            clef_convert_to_f32(kind, scale_raw, (size_t)R, want_scale);
            clef_backend_read(be, got, parts[0].data, tw->n_bytes);
            clef_backend_read(be, got_scale, parts[0].quant->u.fp8.weight_scale, sizeof(float) * (size_t)R);
            CHECK(memcmp(want, got, tw->n_bytes) == 0);
            CHECK(memcmp(want_scale, got_scale, sizeof(float) * (size_t)R) == 0);
            CHECK(parts[1].quant == parts[0].quant && parts[1].quant_row0 == 40 && parts[1].rows == R - 40);
            CHECK((const uint8_t *)parts[1].data == (const uint8_t *)parts[0].data + 40 * C);
            int same = 1;
            for (int64_t r = 0; r < R - 40; r++)
                for (int64_t k = 0; k < C; k++)
                    same &= dequant(&parts[1], r, k) == dequant(&parts[0], 40 + r, k) ||
                            (isnan(dequant(&parts[1], r, k)) && isnan(dequant(&parts[0], 40 + r, k)));
            CHECK_MSG(same, "FP8 part 2 rows differ from rows 40.. of part 1's stored tensor");
            printf("FP8 plug point: %s [%lld, %lld] placed in parts [40, %lld], scale[40] = %g\n",
                   name, (long long)R, (long long)C, (long long)(R - 40), (double)got_scale[40]);
            free(want), free(got), free(scale_raw), free(want_scale), free(got_scale);
        }
        clef_weight_loader_free(&L);
        clef_buffer_set_release(&set);
    }
    CHECK_EQ_INT(calls, 2);
    clef_release_free(rel);
}

int main(void) {
    clef_backend *be = make_cpu(2);
    test_traits_match_releases();
    test_descriptor_through_slices();
    test_plain_formats(be);
    test_staging_pieces(be);
    test_refused_format(be);
    test_quantized_plug_point(be);
    clef_backend_free(be);
    return test_summary();
}
