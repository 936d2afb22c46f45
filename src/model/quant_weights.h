/*
 * quant_weights.h — the weight loader's path for quantized linears (NF4, FP8, INT8 ConvRot):
 * quant_weights.c says what it reads and how it places it.
 */
#ifndef CLEF_MODEL_QUANT_WEIGHTS_H
#define CLEF_MODEL_QUANT_WEIGHTS_H

#include "model/weight_loader.h"

/* 1 if a matrix stored with this dtype is a quantized weight this loader handles. */
static inline int clef_dtype_is_quantized_weight(clef_dtype d) {
    return d == CLEF_DTYPE_U8 || d == CLEF_DTYPE_F8_E4M3 || d == CLEF_DTYPE_I8;
}

/* The quantized matrix t (full name `full`) of logical shape [rows, cols], placed as stored
 * with its descriptor and split into n_parts row slices (see clef_weight_load_matrix_parts).
 * A clef_status naming the tensor. */
int clef_weight_load_quant_matrix_parts(clef_weight_loader *L, const clef_tensor_info *t,
                                        const char *full, int64_t rows, int64_t cols,
                                        int n_parts, const int64_t *part_rows, clef_matrix *out);

#endif /* CLEF_MODEL_QUANT_WEIGHTS_H */
