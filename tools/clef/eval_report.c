/*
 * eval_report.c — the rows of `clef eval` accumulated and printed (see eval_report.h).
 */
#include "eval_report.h"

#include "cli_util.h"
#include "clef.h"

#include <stdio.h>

void eval_row_add(eval_row *r, double logit_rel_l2, double hidden_rel_l2) {
    r->records++;
    r->logit_sum += logit_rel_l2;
    if (logit_rel_l2 > r->logit_max)
        r->logit_max = logit_rel_l2;
    if (hidden_rel_l2 >= 0) {
        r->hidden_sum += hidden_rel_l2;
        if (hidden_rel_l2 > r->hidden_max)
            r->hidden_max = hidden_rel_l2;
    }
}

static void with_commas(uint64_t v, char *buf, size_t cap) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0 && o + 2 < cap)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
}

static double mean(double sum, size_t n) { return n ? sum / (double)n : 0.0; }

void eval_print_table(const eval_setup *s, const eval_row *rows, size_t n) {
    const eval_row *ref = &rows[0];
    printf("reference  %s (%s), %zu of %zu records of %s", ref->dir, ref->precision, ref->records,
           s->records_read, s->records_file);
    if (s->reference_refused)
        printf(" (%zu refused by the reference, skipped)", s->reference_refused);
    printf(", %zu questions, on %s\n\n", ref->questions, s->device_name ? s->device_name : s->device);
    printf("%-13s %7s  %-18s  %-19s  %-19s  %15s  %7s  %9s  %s\n", "precision", "records",
           "decisions agree", "logit rel L2", "hidden rel L2", "resident bytes", "load s",
           "ms/record", "release");
    printf("%-13s %7s  %-18s  %-19s  %-19s  %15s  %7s  %9s\n", "", "", "with the reference",
           "mean / max", "mean / max", "", "", "");
    for (size_t i = 0; i < n; i++) {
        const eval_row *r = &rows[i];
        if (r->status) {
            printf("%-13s REFUSED [%d %s] %s  %s\n", r->precision[0] ? r->precision : "?",
                   r->status, clef_status_str(r->status), r->error, r->dir);
            continue;
        }
        char agree[40], logit[40], hidden[40], bytes[32];
        if (r->is_reference) {
            snprintf(agree, sizeof agree, "(reference)");
            snprintf(logit, sizeof logit, "-");
            snprintf(hidden, sizeof hidden, "-");
        } else {
            snprintf(agree, sizeof agree, "%zu/%zu %6.2f%%", r->agree, r->questions,
                     r->questions ? 100.0 * (double)r->agree / (double)r->questions : 0.0);
            snprintf(logit, sizeof logit, "%.2e / %.2e", mean(r->logit_sum, r->records), r->logit_max);
            if (r->with_hidden)
                snprintf(hidden, sizeof hidden, "%.2e / %.2e", mean(r->hidden_sum, r->records),
                         r->hidden_max);
            else
                snprintf(hidden, sizeof hidden, "(--no-hidden)");
        }
        with_commas(r->resident_bytes, bytes, sizeof bytes);
        printf("%-13s %7zu  %-18s  %-19s  %-19s  %15s  %7.2f  %9.2f  %s", r->precision, r->records,
               agree, logit, hidden, bytes, r->load_s,
               r->records ? 1000.0 * r->decide_s / (double)r->records : 0.0, r->dir);
        if (r->failed)
            printf("  (%zu records REFUSED)", r->failed);
        printf("\n");
    }
}

void eval_print_json(const eval_setup *s, const eval_row *rows, size_t n) {
    printf("{\"records_file\": ");
    cli_json_string(stdout, s->records_file);
    printf(", \"records_read\": %zu, \"reference_refused\": %zu, \"device\": ", s->records_read,
           s->reference_refused);
    cli_json_string(stdout, s->device_name ? s->device_name : s->device);
    printf(", \"rows\": [");
    for (size_t i = 0; i < n; i++) {
        const eval_row *r = &rows[i];
        printf("%s{\"release\": ", i ? ", " : "");
        cli_json_string(stdout, r->dir);
        printf(", \"precision\": \"%s\", \"reference\": %s", r->precision,
               r->is_reference ? "true" : "false");
        if (r->status) {
            printf(", \"status\": %d, \"kind\": ", r->status);
            cli_json_string(stdout, clef_status_str(r->status));
            printf(", \"error\": ");
            cli_json_string(stdout, r->error);
            printf("}");
            continue;
        }
        printf(", \"records\": %zu, \"refused\": %zu, \"questions\": %zu", r->records, r->failed,
               r->questions);
        if (!r->is_reference) {
            printf(", \"decisions_agree\": %zu, \"agreement\": %.9g, \"logit_rel_l2_mean\": %.9g, "
                   "\"logit_rel_l2_max\": %.9g",
                   r->agree, r->questions ? (double)r->agree / (double)r->questions : 0.0,
                   mean(r->logit_sum, r->records), r->logit_max);
            if (r->with_hidden)
                printf(", \"hidden_rel_l2_mean\": %.9g, \"hidden_rel_l2_max\": %.9g",
                       mean(r->hidden_sum, r->records), r->hidden_max);
            else
                printf(", \"hidden_rel_l2_mean\": null, \"hidden_rel_l2_max\": null");
        }
        printf(", \"resident_bytes\": %llu, \"weight_bytes\": %llu, \"load_s\": %.6f, "
               "\"ms_per_record\": %.6f}",
               (unsigned long long)r->resident_bytes, (unsigned long long)r->weight_bytes,
               r->load_s, r->records ? 1000.0 * r->decide_s / (double)r->records : 0.0);
    }
    printf("]}\n");
}
