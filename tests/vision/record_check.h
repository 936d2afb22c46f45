/*
 * record_check.h — the checks test_vision_e2e.c (records with images) and test_vision_video.c
 * (records with videos) make of every decided record against the reference pipeline's
 * fixture: the relative L2 distance of each question's logits from the reference ones, and
 * one batch of all records answering each exactly as it was answered alone. Both tests hold
 * the same bound (1e-4 relative L2 per question, the whole batch byte for byte), so the code
 * lives here once.
 */
#ifndef CLEF_TESTS_VISION_RECORD_CHECK_H
#define CLEF_TESTS_VISION_RECORD_CHECK_H

#include "test.h"

#include "clef.h"
#include "json/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double record_rel_l2(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The worst relative L2 distance over the questions of `res` from the reference logits (one
 * array per question, one number per option); the counts must match. */
static double record_worst_logits(const clef_result *res, const json_value *logits) {
    double worst = 0;
    CHECK_EQ_INT((int64_t)res->n_questions, (int64_t)logits->u.arr.count);
    for (int32_t q = 0; q < res->n_questions && (size_t)q < logits->u.arr.count; q++) {
        const json_value *lq = json_array_at(logits, (size_t)q);
        const clef_question_result *qr = &res->questions[q];
        CHECK_EQ_INT((int64_t)qr->n_options, (int64_t)lq->u.arr.count);
        double want[256] = {0};
        int32_t k = qr->n_options < 256 ? qr->n_options : 256;
        for (int32_t o = 0; o < k; o++)
            json_get_double(json_array_at(lq, (size_t)o), &want[o]);
        double err = record_rel_l2(qr->logits, want, (size_t)k);
        worst = err > worst ? err : worst;
    }
    return worst;
}

/* All n request bodies decided in one batch must give, byte for byte, the answers in `alone`
 * (each decided by itself). Frees bodies, alone and their strings. */
static void record_check_batch(clef_model *m, size_t n, char **bodies, char **alone) {
    char **batch = calloc(n, sizeof *batch);
    size_t *lens = calloc(n, sizeof *lens);
    int *statuses = calloc(n, sizeof *statuses);
    for (size_t r = 0; r < n; r++)
        lens[r] = strlen(bodies[r]);
    int st = clef_model_decide_batch(m, n, (const char *const *)bodies, lens, batch, statuses, NULL);
    CHECK_MSG(st == CLEF_OK, "batch: %s", clef_last_error());
    for (size_t r = 0; r < n; r++) {
        CHECK_MSG(batch[r] && alone[r] && !strcmp(batch[r], alone[r]),
                  "record %zu: the batch answer differs from the one alone", r);
        clef_string_free(batch[r]);
        clef_string_free(alone[r]);
        free(bodies[r]);
    }
    free(batch), free(lens), free(statuses), free(bodies), free(alone);
}

#endif
