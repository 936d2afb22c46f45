/*
 * expected.h — the tensors a Clef model needs, derived from its config and precision: engine
 * name, shape, the dtypes allowed for the tensor's role, whether it may be absent, and which
 * value check its data gets (quantization scales must be finite and positive; the NF4 code
 * table must be NF4's; the NF4 quant_state JSON must describe the weight).
 *
 * A quantizable linear P (which ones depends on the method, see formats.md) is accepted in
 * either form, decided by the dtype of P.weight in the release: a float weight (BF16/F16/F32,
 * e.g. a module on the ignore list), or the method's quantized layout with its companions:
 *   NF4   P.weight U8 [(n+1)/2, 1], .absmax (U8 + nested tables, or F32), .quant_map F32 [16],
 *         .nested_absmax F32, .nested_quant_map F32 [256], .quant_state.bitsandbytes__nf4 U8
 *   FP8   P.weight F8_E4M3 [out, in], P.weight_scale BF16|F32 [out, 1]
 *   INT8  P.weight I8 [out, in], P.weight_scale F32|BF16 [out, 1], optional P.comfy_quant U8,
 *         optional P.input_scale (a scalar)
 */
#ifndef CLEF_RELEASE_EXPECTED_H
#define CLEF_RELEASE_EXPECTED_H

#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

typedef enum clef_value_check {
    CLEF_CHECK_NONE,
    CLEF_CHECK_SCALE,          /* every value finite and > 0 */
    CLEF_CHECK_NF4_QUANT_MAP,  /* the 16 NF4 code values, exactly */
    CLEF_CHECK_NF4_STATE,      /* UTF-8 JSON quant_state matching the weight's shape */
    CLEF_CHECK_FINITE,         /* every value finite */
} clef_value_check;

#define CLEF_SHAPE_ANY_1D (-1)   /* n_dims: any 1-D length */
#define CLEF_SHAPE_SCALAR (-2)   /* n_dims: [] or [1] */

typedef struct clef_expected_tensor {
    char *name;                     /* engine name, owned */
    int n_dims;                     /* or CLEF_SHAPE_ANY_1D / CLEF_SHAPE_SCALAR */
    int64_t shape[CLEF_MAX_DIMS];
    uint32_t dtype_mask;            /* bit (1u << clef_dtype) set for each allowed dtype */
    int optional;
    clef_value_check check;
    int64_t weight_shape[2];        /* NF4_STATE: the [out, in] the state must describe */
} clef_expected_tensor;

typedef struct clef_expected_list {
    clef_expected_tensor *items;
    size_t count, cap;
} clef_expected_list;

/* dtype of a present tensor by engine name, or -1 when the release lacks it. */
typedef int (*clef_dtype_lookup)(void *user, const char *engine_name);

/* Build the list for cfg. lookup decides the form of each quantizable linear. */
int clef_expected_build(const clef_release_config *cfg, clef_dtype_lookup lookup, void *user,
                        clef_expected_list *out);
void clef_expected_free(clef_expected_list *list);

/* "BF16|F16|F32" style text of a mask, for messages. */
void clef_dtype_mask_str(uint32_t mask, char *buf, size_t cap);

#endif /* CLEF_RELEASE_EXPECTED_H */
