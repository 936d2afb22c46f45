/*
 * eval_report.h — the numbers `clef eval` gathers per release (one row of its table) and how
 * they are printed: the table a person reads, and --json. cmd_eval.c runs the releases and
 * fills the rows; this file only accumulates and prints.
 */
#ifndef CLEF_TOOLS_EVAL_REPORT_H
#define CLEF_TOOLS_EVAL_REPORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct eval_row {
    const char *dir;
    char precision[24];        /* clef_quant_method_name of the release */
    int is_reference;
    int status;                /* 0, or the status that stopped this release (load) */
    char error[512];
    size_t records;            /* records decided and compared */
    size_t failed;             /* records the reference decided and this release refused */
    size_t questions, agree;   /* questions compared / whose decision equals the reference's */
    double logit_sum, logit_max;   /* per-record relative L2 of the logits vs the reference */
    int with_hidden;
    double hidden_sum, hidden_max; /* per-record relative L2 of the last hidden state */
    uint64_t resident_bytes;   /* device bytes of the weights (GPU), else weight bytes (CPU) */
    uint64_t weight_bytes;     /* clef_model_weight_bytes */
    double load_s;             /* clef_model_load wall time */
    double decide_s;           /* clef_context_decide_result wall time, all records */
} eval_row;

typedef struct eval_setup {
    const char *records_file;
    const char *device;        /* as asked ("cpu" when none) */
    const char *device_name;   /* as loaded ("cpu", "cuda:0"), or NULL */
    size_t records_read;       /* records in the file (after --limit) */
    size_t reference_refused;  /* of them, refused by the reference (skipped everywhere) */
} eval_setup;

/* Accumulate one record's relative L2 distances (hidden < 0: not measured). */
void eval_row_add(eval_row *r, double logit_rel_l2, double hidden_rel_l2);

void eval_print_table(const eval_setup *s, const eval_row *rows, size_t n);
void eval_print_json(const eval_setup *s, const eval_row *rows, size_t n);

#endif
