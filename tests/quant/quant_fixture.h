/*
 * quant_fixture.h — test helper for tests/quant: a quantized fixture release
 * (tests/release/fixtures/<precision>, made by the real producers) opened next to the oracle
 * file scripts/quant/make_oracle.py wrote from the same release
 * (tests/quant/fixtures/<precision>.safetensors), and the weights of one quantized linear
 * read into owned, aligned buffers in the form src/quant's functions take.
 */
#ifndef CLEF_TESTS_QUANT_FIXTURE_H
#define CLEF_TESTS_QUANT_FIXTURE_H

#include "../head/st_fixture.h"
#include "quant/fp8.h"
#include "quant/int8_convrot.h"
#include "quant/nf4.h"
#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

typedef enum qf_precision { QF_NF4, QF_FP8, QF_INT8 } qf_precision;

typedef struct qf_case {
    qf_precision precision;
    const char *name;       /* "nf4", "fp8", "int8" */
    clef_release *rel;
    st_fixture oracle;
} qf_case;

/* Open release and oracle; 0, or -1 after printing why. */
int qf_open(qf_case *c, qf_precision p);
void qf_close(qf_case *c);

/* 1 if t is the quantized data tensor of a linear in this precision (NF4 packed U8 weight,
 * F8_E4M3 weight, I8 weight). */
int qf_is_quantized(const qf_case *c, const clef_tensor_info *t);

/* One quantized linear's weights, read from the release. */
typedef struct qf_linear {
    int64_t N, K;            /* out, in features */
    void *data;              /* packed U8 / F8_E4M3 / I8 */
    float *scale;            /* FP8, INT8: [N], widened to fp32 */
    clef_nf4_desc nf4;       /* NF4: points into the buffers below */
    clef_nf4_quant_state nf4_state;
    void *nf4_buffers[4];
} qf_linear;

/* Read the linear whose quantized weight is the release tensor named weight (engine name);
 * 0, or -1 after printing why. */
int qf_linear_load(const qf_case *c, const char *weight, qf_linear *out);
void qf_linear_free(qf_linear *w);

/* The weight dequantized by src/quant, as bf16 bits [N * K] (malloc'd). */
uint16_t *qf_linear_dequant_bf16(const qf_case *c, const qf_linear *w);

/* A copy of an oracle tensor's bytes (malloc'd, aligned for any type); NULL if absent. */
void *qf_oracle_copy(const qf_case *c, const char *name, size_t *n_bytes);
/* An oracle BF16 tensor widened to fp32 (malloc'd); NULL if absent. */
float *qf_oracle_bf16(const qf_case *c, const char *name, size_t *n_elements);

/* The engine name of a stored name ("model.language_model.X" -> "text.X"); static buffer. */
const char *qf_engine_name(const char *stored);

#endif
