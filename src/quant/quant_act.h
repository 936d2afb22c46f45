/*
 * quant_act.h — the dtype activations flow in when a quantized linear quantizes them at run
 * time. The libraries compute their activation quantizers in the input's own dtype: a model
 * run in bf16 rounds the scale and x / scale to bf16 before the final rounding to fp8 / int8,
 * a model run in fp32 does not. The engine's activations are fp32 (CLEF_QUANT_ACT_F32); the
 * BF16 mode reproduces the libraries' bf16 runs (the published stacks) step by step.
 */
#ifndef CLEF_QUANT_ACT_H
#define CLEF_QUANT_ACT_H

typedef enum clef_quant_act {
    CLEF_QUANT_ACT_F32,   /* every intermediate in fp32 */
    CLEF_QUANT_ACT_BF16,  /* inputs are bf16 numbers; intermediates rounded to bf16 as torch does */
} clef_quant_act;

#endif /* CLEF_QUANT_ACT_H */
