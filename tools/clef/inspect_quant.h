/*
 * inspect_quant.h — the quantization part of `clef inspect`: per precision, which linears are
 * quantized and which stay in high precision (and by which rule of the release), the bytes the
 * engine holds per group once loaded (quantization metadata counted), and the format
 * parameters. Built on clef_release.h's "quantization" functions only.
 */
#ifndef CLEF_TOOLS_INSPECT_QUANT_H
#define CLEF_TOOLS_INSPECT_QUANT_H

#include "clef_release.h"

#include <stdint.h>

typedef struct inspect_quant_group {
    size_t linears;                            /* linear weights in the group */
    size_t per_state[CLEF_LINEAR_STATE_COUNT]; /* of them, by clef_linear_state */
    uint64_t resident_bytes;                   /* clef_release_resident_bytes, summed */
    uint64_t stored_bytes;                     /* the tensors' bytes in the files */
} inspect_quant_group;

typedef struct inspect_quant {
    const clef_release *rel;
    int status;                 /* clef_release_quant_params' status (0 = params valid) */
    char error[512];
    clef_quant_params params;
    inspect_quant_group groups[CLEF_GROUP_COUNT];
    inspect_quant_group total;
} inspect_quant;

/* Classify every tensor of rel. Never fails: a params read failure is kept in q->status. */
void inspect_quant_collect(const clef_release *rel, inspect_quant *q);

/* The human section (after the group table) and the JSON member ", \"quantization\": {...}"
 * (every linear listed with its state and rule). */
void inspect_quant_print_table(const inspect_quant *q);
void inspect_quant_print_json(const inspect_quant *q);

#endif
