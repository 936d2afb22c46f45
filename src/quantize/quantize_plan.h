/*
 * quantize_plan.h — what `clef quantize` writes for one target, decided before any byte is
 * written: for every source tensor, the action (copy, cast to BF16, quantize) and the output
 * tensors with their names, dtypes and shapes, grouped into output files; the Linear modules
 * left unquantized (FP8's `ignore` list). One table per precision, the release rules of
 * docs/quant.md ("Making quantized releases"):
 *   nf4   every text Linear (attention q/k/v/o, MLP gate/up/down, GDN in_proj_qkv/z/b/a and
 *         out_proj); other floating tensors cast to BF16 (transformers loads the model in
 *         bf16 and saves it); lm_head.weight in lm-head.safetensors; shards + index.
 *   fp8   text attention and MLP Linears; other floating tensors cast to BF16; the other
 *         Linears (vision, GDN, lm_head) listed in quantization_config.ignore.
 *   int8  text Linears whose in_features is a multiple of 256, except GDN in_proj_a /
 *         in_proj_b; every other tensor exactly as stored (comfy-kitchen's state dict).
 */
#ifndef CLEF_QUANTIZE_PLAN_H
#define CLEF_QUANTIZE_PLAN_H

#include "clef_quantize.h"
#include "release/st_writer.h"

#include <stddef.h>
#include <stdint.h>

typedef enum q_action {
    Q_COPY,     /* bytes as stored */
    Q_TO_BF16,  /* F32 / F16 -> BF16, round to nearest even (torch's .to(bfloat16)) */
    Q_NF4,
    Q_FP8,
    Q_INT8,
} q_action;

/* Output tensors of a quantized weight, by role. */
enum { Q_OUT_WEIGHT = 0 };
enum { Q_NF4_ABSMAX = 1, Q_NF4_QUANT_MAP, Q_NF4_NESTED_ABSMAX, Q_NF4_NESTED_QUANT_MAP,
       Q_NF4_QUANT_STATE };
enum { Q_SCALE = 1, Q_INT8_COMFY_QUANT = 2 };
#define Q_MAX_OUT 6

typedef struct q_item {
    const clef_tensor_info *src;
    q_action action;
    size_t file;                      /* index into q_plan.files */
    size_t n_out;
    st_write_tensor out[Q_MAX_OUT];   /* names owned by the plan */
    int64_t rows, cols;               /* quantized weights: [out, in] */
    char *quant_state;                /* NF4: the quant_state.bitsandbytes__nf4 bytes (JSON) */
    size_t quant_state_len;
    float nf4_offset;                 /* NF4: the double-quant offset the JSON states */
} q_item;

typedef struct q_plan {
    clef_quantize_target target;
    q_item *items;                    /* by output file, then by stored name */
    size_t n_items;
    char **files;                     /* output safetensors names */
    size_t n_files;
    int indexed;                      /* 1: model.safetensors.index.json is written */
    char **ignore;                    /* FP8: unquantized Linear modules, in module order */
    size_t n_ignore;
    uint64_t total_size;              /* bytes of all output tensors */
    uint64_t total_parameters;        /* parameters (NF4 codes count two per byte) */
    size_t n_quantized;
} q_plan;

/* The ConvRot comfy_quant JSON every INT8 weight carries. */
extern const char q_comfy_quant_json[];

/* Decide the plan for rel (a validated BF16 release). NF4 items get their quant_state
 * later (q_plan_set_nf4_offset), once the offset is measured. Returns 0 or a status naming
 * the tensor (a weight to quantize that is not BF16: CLEF_ERR_UNSUPPORTED). */
int q_plan_build(const clef_release *rel, const clef_quantize_params *p, q_plan *out);

/* Fix an NF4 item's quant_state JSON and output shape from its offset. */
int q_plan_set_nf4_offset(q_item *it, float offset);

/* Assign files (shards of at most max_shard_bytes; NF4: lm_head alone in
 * lm-head.safetensors) once every output shape is final. */
int q_plan_assign_files(q_plan *plan, uint64_t max_shard_bytes);

void q_plan_free(q_plan *plan); /* accepts a zeroed plan */

#endif /* CLEF_QUANTIZE_PLAN_H */
