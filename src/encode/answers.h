/*
 * answers.h — the model's probabilities become the response body clients read, exactly as
 * the reference systemone_answer()/systemone() build it and Python's json.dumps writes it
 * (ensure_ascii=False, separators (",", ":"), keys in insertion order as Starlette does).
 *
 * Per question (api.md):
 *   noul    {"type":"noul","noul":round(p_true, 4)}
 *   choice  {"type":"choice","choice":argmax in REQUEST order (first wins ties),
 *            "confidence":round(p_choice,4),"probabilities":{id: round(p,4)} in request order}
 *   score   {"type":"score","score":round(sum(i*p_i),4),"confidence":round(max p,4),
 *            "legend":{"0": level 0 description, ...},"probabilities":{"0": round(p,4), ...}}
 * round() is Python's round(x, 4): correctly rounded, ties to even on the exact binary
 * value. sum(i*p_i) adds in float64 in index order starting from 0, as Python 3.11's sum()
 * does (Python 3.12 switched float sum() to compensated summation; see docs/encoding.md).
 *
 * Probabilities come from the model in PRESENTATION order (encoded.h), one block per
 * question, all questions concatenated; request_to_presented maps them back.
 */
#ifndef CLEF_ENCODE_ANSWERS_H
#define CLEF_ENCODE_ANSWERS_H

#include "core/strbuf.h"
#include "encode/encoded.h"
#include "encode/request.h"

#include <stddef.h>

/* Python's round(x, ndigits) for a double (0 <= ndigits <= 17): correctly rounded, ties to
 * even on the exact binary value; NaN and infinities are returned unchanged. */
double clef_python_round(double x, int ndigits);

/* Append the answer object of question q; probs[0..q->n_options) in presentation order.
 * Fails with CLEF_ERR_INVALID_ARG when a probability is NaN or infinite (naming it). */
int clef_answer_render(const clef_question *q, const double *probs, clef_strbuf *out);

/*
 * Append the SystemOne response body:
 *   {"model": <model_echo>, "answers": {...}, "usage": {"input_tokens": n_tokens,
 *    "output_tokens": 0[, "truncated_tokens": k when the state was cut]
 *    [, "images": [{"width", "height" (processed, pixels), "vision_tokens"}, ...],
 *       "vision_tokens": total, when the record has images]}}
 * probs: n_probs values, every question's options in presentation order, questions in
 * document order (n_probs must equal the total option count). model_echo NULL: the
 * request's model (JSON null for a record without one).
 */
int clef_answers_render(const clef_request *request, const clef_encoded_record *encoded,
                        const double *probs, size_t n_probs, const char *model_echo,
                        clef_strbuf *out);

/* The same body inside the Workers AI envelope:
 * {"result": <body>, "success": true, "errors": [], "messages": []} */
int clef_answers_render_workers_ai(const clef_request *request, const clef_encoded_record *encoded,
                                   const double *probs, size_t n_probs, const char *model_echo,
                                   clef_strbuf *out);

#endif /* CLEF_ENCODE_ANSWERS_H */
