#!/usr/bin/env python3
"""gen_answer_cases.py — probability vectors and the reference's answers for them.

The oracle is the release's systemone_answer() (joint_schema_model.py, see
scripts/clef_oracle.py): for a question and per-option probabilities it builds the SystemOne
answer with Python's round(x, 4), argmax in request order and sum(i * p_i); the expected text is
json.dumps(answer, ensure_ascii=False, separators=(",", ":")), keys in insertion order.

Vectors cover: float32 softmax outputs (what the model hands over), ties (uniform and
repeated maxima, where the first option in REQUEST order must win although options are
presented sorted), values at the rounding boundary (k/20000 and its neighbours one ulp
away, exact binary ties m/32 that round half to even), tiny and subnormal values, 0 and 1,
and score vectors whose expectation lands on a boundary. A few multi-question cases check
the whole response body {"model", "answers", "usage"} as systemone() returns it.

Output: JSON lines, one per question:
  {"body": <record text with the question(s)>, "vectors": [[probs in PRESENTATION order...], ...],
   "answers": [<answer text>...]}  or, for whole bodies,
  {"body": ..., "response": {"model": m, "input_tokens": n, "probs": [...], "text": <body text>}}
Usage: python3 scripts/encode/gen_answer_cases.py --vectors 3000 --out tests/encode/fixtures/answers.jsonl
"""
import argparse
import json
import math
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)

OPTION_IDS = ["low", "high", "medium", "é", "e", "Z", "a", "中", "\U0001F600", "\uffff", "10", "9", "close",
              "review", "yes", "no", "b b", "_", "-x", "\u00e9t\u00e9", "A", "aa"]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def softmax_f32(logits):
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    s = sum(e)
    return [f32(v / s) for v in e]


def boundary_value(rng):
    k = rng.randrange(5)
    if k == 0:
        x = rng.randint(0, 20000) / 20000.0
    elif k == 1:
        x = rng.randrange(1, 32, 2) / 32.0  # exact ties at the 5th decimal: half to even
    elif k == 2:
        x = rng.randint(0, 10000) / 10000.0
    elif k == 3:
        x = rng.choice([0.0, 1.0, 5e-324, 1e-300, 4.9999e-05, 5e-05, 0.00015, 0.99995, 0.999949999])
    else:
        x = f32(rng.randint(0, 20000) / 20000.0)
    for _ in range(rng.choice([0, 0, 1, 2])):
        x = math.nextafter(x, rng.choice([-1.0, 2.0]))
    return min(max(x, 0.0), 1.0)


def vector(rng, n, qtype):
    k = rng.randrange(6)
    if k < 2:
        return softmax_f32([rng.gauss(0, rng.choice([0.1, 1, 5])) for _ in range(n)])
    if k == 2:  # ties
        v = [rng.choice([0.25, 0.5, 1.0 / n, 0.1]) for _ in range(n)]
        if rng.random() < 0.5:
            v = [1.0 / n] * n
        return v
    if k == 3 and qtype == "score":  # expectation near a boundary
        v = [0.0] * n
        target = rng.randint(0, 20000 * (n - 1)) / 20000.0
        i = min(int(target), n - 2)
        frac = target - i
        v[i], v[i + 1] = 1 - frac, frac
        return [math.nextafter(x, rng.choice([-1.0, 2.0])) if rng.random() < 0.3 and x > 0 else x for x in v]
    return [boundary_value(rng) for _ in range(n)]


def question(rng):
    qtype = rng.choice(["noul", "choice", "score"])
    q = {"type": qtype, "instructions": "Decide."}
    if qtype == "noul":
        if rng.random() < 0.3:
            q["criteria"] = {"true": "yes it is"}
    elif qtype == "choice":
        ids = rng.sample(OPTION_IDS, rng.randint(2, 8))
        q["criteria"] = {i: rng.choice(["desc " + i, None, {"z": 1, "a": [1.0]}]) for i in ids}
    else:
        q["criteria"] = [rng.choice(["calm", "annoyed", None, {"b": 2, "a": 1}, ["x", 1.5]])
                         for _ in range(rng.randint(2, 10))]
    return q


def presented_ids(ref, q):
    return [option_id for option_id, _ in ref.question_options(q)]


def dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vectors", type=int, default=3000)
    ap.add_argument("--per-question", type=int, default=25)
    ap.add_argument("--responses", type=int, default=40)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ref = clef_oracle.load_reference()
    rng = random.Random(args.seed)
    written = 0
    with open(args.out, "w", encoding="utf-8") as f:
        while written < args.vectors:
            q = question(rng)
            body = dumps({"state": None, "questions": {"q": q}})
            q = json.loads(body)["questions"]["q"]
            ids = presented_ids(ref, q)
            vectors, answers = [], []
            for _ in range(min(args.per_question, args.vectors - written)):
                probs = vector(rng, len(ids), q["type"])
                vectors.append(probs)
                answers.append(dumps(ref.systemone_answer(q, dict(zip(ids, probs)))))
                written += 1
            f.write(dumps({"body": body, "vectors": vectors, "answers": answers}) + "\n")
        for i in range(args.responses):
            questions = {f"q{j}": question(rng) for j in range(rng.randint(1, 6))}
            model = rng.choice(["clef", "clef-flash", "my model é"])
            body = dumps({"model": model, "state": {"i": i}, "questions": questions})
            questions = json.loads(body)["questions"]
            probs, answers = [], {}
            for qid, q in questions.items():
                ids = presented_ids(ref, q)
                p = vector(rng, len(ids), q["type"])
                probs += p
                answers[qid] = ref.systemone_answer(q, dict(zip(ids, p)))
            n_tokens = rng.randint(50, 16384)
            text = dumps({"model": model, "answers": answers,
                          "usage": {"input_tokens": n_tokens, "output_tokens": 0}})
            f.write(dumps({"body": body, "response": {"model": model, "input_tokens": n_tokens,
                                                      "probs": probs, "text": text}}) + "\n")
    print(f"oracle: {ref.__oracle_path__}")
    print(f"wrote {args.out}: {written} probability vectors, {args.responses} whole responses")


if __name__ == "__main__":
    main()
