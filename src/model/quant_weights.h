/*
 * quant_weights.h — the weight loader's path for quantized linears (NF4, FP8, INT8 ConvRot):
 * quant_weights.c says what it reads and how it places it.
 */
#ifndef CLEF_MODEL_QUANT_WEIGHTS_H
#define CLEF_MODEL_QUANT_WEIGHTS_H

#include "model/weight_loader.h"

/* The loader's plug point for quantized matrices (clef_weight_quant_fn): NF4, FP8 or INT8
 * ConvRot by t's dtype (U8, F8_E4M3, I8); ctx unused. A clef_status naming the tensor. */
int clef_weight_load_quantized(void *ctx, clef_weight_loader *L, const char *name,
                               const clef_tensor_info *t, int64_t rows, int64_t cols,
                               clef_matrix *out);

#endif /* CLEF_MODEL_QUANT_WEIGHTS_H */
