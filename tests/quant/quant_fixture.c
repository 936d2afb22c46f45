/*
 * quant_fixture.c — opens a quantized fixture release with its oracle file and reads one
 * quantized linear's tensors; see quant_fixture.h.
 */
#include "quant_fixture.h"

#include "core/error.h"
#include "core/numeric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *precision_name(qf_precision p) {
    return p == QF_NF4 ? "nf4" : p == QF_FP8 ? "fp8" : "int8";
}

int qf_open(qf_case *c, qf_precision p) {
    memset(c, 0, sizeof *c);
    c->oracle.file.fd = -1;
    c->precision = p;
    c->name = precision_name(p);
    char path[256];
    snprintf(path, sizeof path, "tests/release/fixtures/%s", c->name);
    clef_release_opts opts = clef_release_default_opts();
    if (clef_release_open(path, &opts, &c->rel) != 0) {
        fprintf(stderr, "%s: %s\n", path, clef_last_error());
        return -1;
    }
    snprintf(path, sizeof path, "tests/quant/fixtures/%s.safetensors", c->name);
    if (st_fixture_load(&c->oracle, path) != 0) {
        clef_release_free(c->rel);
        c->rel = NULL;
        return -1;
    }
    return 0;
}

void qf_close(qf_case *c) {
    clef_release_free(c->rel);
    st_fixture_free(&c->oracle);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int qf_is_quantized(const qf_case *c, const clef_tensor_info *t) {
    switch (c->precision) {
    case QF_NF4:
        return t->dtype == CLEF_DTYPE_U8 && ends_with(t->name, ".weight");
    case QF_FP8:
        return t->dtype == CLEF_DTYPE_F8_E4M3;
    case QF_INT8:
        return t->dtype == CLEF_DTYPE_I8;
    }
    return 0;
}

/* read a tensor by engine name into a malloc'd buffer (one spare byte: never a 0-byte malloc) */
static void *read_tensor(const clef_release *rel, const char *name, const clef_tensor_info **info) {
    const clef_tensor_info *t = clef_release_find(rel, name);
    if (!t) {
        fprintf(stderr, "release has no tensor '%s'\n", name);
        return NULL;
    }
    void *buf = malloc((size_t)t->n_bytes + 1);
    if (!buf || clef_release_read(rel, t, buf) != 0) {
        fprintf(stderr, "reading '%s': %s\n", name, clef_last_error());
        free(buf);
        return NULL;
    }
    if (info)
        *info = t;
    return buf;
}

/* a scale tensor [N] or [N, 1] in BF16 or F32, widened */
static float *read_scale(const clef_release *rel, const char *name, int64_t N) {
    const clef_tensor_info *t;
    void *raw = read_tensor(rel, name, &t);
    if (!raw)
        return NULL;
    size_t esize = clef_dtype_size(t->dtype);
    if ((t->dtype != CLEF_DTYPE_BF16 && t->dtype != CLEF_DTYPE_F32) ||
        t->n_bytes != (uint64_t)N * esize) {
        fprintf(stderr, "'%s': expected %lld BF16/F32 scales\n", name, (long long)N);
        free(raw);
        return NULL;
    }
    float *s = malloc((size_t)N * sizeof *s);
    for (int64_t n = 0; n < N; n++) {
        if (t->dtype == CLEF_DTYPE_BF16) {
            uint16_t h;
            memcpy(&h, (char *)raw + n * 2, 2);
            s[n] = clef_bf16_to_f32(h);
        } else {
            memcpy(&s[n], (char *)raw + n * 4, 4);
        }
    }
    free(raw);
    return s;
}

static int nf4_load(const qf_case *c, const char *weight, qf_linear *w) {
    char name[512];
    const clef_tensor_info *t;
    snprintf(name, sizeof name, "%s.quant_state.bitsandbytes__nf4", weight);
    char *json = read_tensor(c->rel, name, &t);
    if (!json)
        return -1;
    int rc = clef_nf4_parse_quant_state(json, (size_t)t->n_bytes, name, &w->nf4_state);
    free(json);
    if (rc != 0 || !w->nf4_state.nested) {
        fprintf(stderr, "%s: %s\n", name, rc ? clef_last_error() : "no double quant");
        return -1;
    }
    w->N = w->nf4_state.shape[0];
    w->K = w->nf4_state.shape[1];
    static const char *suffix[4] = {".absmax", ".quant_map", ".nested_absmax",
                                    ".nested_quant_map"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s%s", weight, suffix[i]);
        if (!(w->nf4_buffers[i] = read_tensor(c->rel, name, NULL)))
            return -1;
    }
    w->nf4 = (clef_nf4_desc){
        .n_elements = w->N * w->K,
        .blocksize = w->nf4_state.blocksize,
        .quant_map = w->nf4_buffers[1],
        .absmax_code = w->nf4_buffers[0],
        .nested_absmax = w->nf4_buffers[2],
        .nested_quant_map = w->nf4_buffers[3],
        .nested_blocksize = w->nf4_state.nested_blocksize,
        .nested_offset = w->nf4_state.nested_offset,
    };
    return 0;
}

int qf_linear_load(const qf_case *c, const char *weight, qf_linear *w) {
    memset(w, 0, sizeof *w);
    const clef_tensor_info *t;
    if (!(w->data = read_tensor(c->rel, weight, &t)))
        return -1;
    if (c->precision == QF_NF4)
        return nf4_load(c, weight, w);
    w->N = t->shape[0];
    w->K = t->shape[1];
    char name[512];
    snprintf(name, sizeof name, "%s_scale", weight); /* "...weight" -> "...weight_scale" */
    if (!(w->scale = read_scale(c->rel, name, w->N)))
        return -1;
    return 0;
}

void qf_linear_free(qf_linear *w) {
    free(w->data);
    free(w->scale);
    for (int i = 0; i < 4; i++)
        free(w->nf4_buffers[i]);
    memset(w, 0, sizeof *w);
}

uint16_t *qf_linear_dequant_bf16(const qf_case *c, const qf_linear *w) {
    uint16_t *out = malloc((size_t)(w->N * w->K) * sizeof *out);
    switch (c->precision) {
    case QF_NF4:
        clef_nf4_dequant_bf16(&w->nf4, w->data, 0, w->N * w->K, out);
        break;
    case QF_FP8:
        clef_fp8_dequant_bf16(w->data, w->scale, w->K, 0, w->N, out);
        break;
    case QF_INT8:
        clef_convrot_dequant_bf16(w->data, w->scale, w->K, 0, w->N, out);
        break;
    }
    return out;
}

void *qf_oracle_copy(const qf_case *c, const char *name, size_t *n_bytes) {
    size_t n;
    const void *src = st_fixture_data(&c->oracle, name, &n);
    if (!src)
        return NULL;
    void *dst = malloc(n + 1);
    memcpy(dst, src, n);
    if (n_bytes)
        *n_bytes = n;
    return dst;
}

float *qf_oracle_bf16(const qf_case *c, const char *name, size_t *n_elements) {
    const clef_tensor_info *t = st_fixture_find(&c->oracle, name);
    if (!t || t->dtype != CLEF_DTYPE_BF16)
        return NULL;
    size_t n;
    const unsigned char *src = st_fixture_data(&c->oracle, name, &n);
    float *out = malloc((n / 2 + 1) * sizeof *out);
    for (size_t i = 0; i < n / 2; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        out[i] = clef_bf16_to_f32(h);
    }
    if (n_elements)
        *n_elements = n / 2;
    return out;
}

const char *qf_engine_name(const char *stored) {
    static char buf[512];
    const char *prefix = "model.language_model.";
    if (!strncmp(stored, prefix, strlen(prefix)))
        snprintf(buf, sizeof buf, "text.%s", stored + strlen(prefix));
    else
        snprintf(buf, sizeof buf, "%s", stored);
    return buf;
}
