#!/usr/bin/env python3
"""peer_encode.py — the Python reference on the same work as bench_encode.c.

Stages over the records of tests/encode/fixtures/records.jsonl, median of N runs after one
warm-up: validate = json.loads of each body (the reference validates almost nothing more),
encode = the reference encode_record() with transformers' PreTrainedTokenizerFast on the
same tokenizer.json, answers = systemone_answer() per question with uniform probabilities
plus json.dumps of the response. Prints JSON rows like bench_encode --json.
"""
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    records = sys.argv[2] if len(sys.argv) > 2 else "tests/encode/fixtures/records.jsonl"
    tokenizer_path = sys.argv[3] if len(sys.argv) > 3 else "tests/encode/fixtures/tokenizer.json"
    from transformers import PreTrainedTokenizerFast
    ref = clef_oracle.load_reference()
    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_path)
    bodies = [json.loads(line)["body"] for line in open(records, encoding="utf-8").read().split("\n") if line]
    times = {"validate": [], "encode": [], "answers": []}
    n_encoded = 0
    for run in range(runs + 1):
        t0 = time.perf_counter()
        parsed = [json.loads(b) for b in bodies]
        t1 = time.perf_counter()
        encoded = []
        for rec in parsed:
            try:
                encoded.append((rec, ref.encode_record(tok, rec, max_length=16384)))
            except ValueError:
                pass
        t2 = time.perf_counter()
        for rec, enc in encoded:
            answers = {}
            for q in enc.questions:
                p = 1.0 / len(q.option_ids)
                answers[q.question_id] = ref.systemone_answer(rec["questions"][q.question_id],
                                                              {o: p for o in q.option_ids})
            json.dumps({"model": rec.get("model"), "answers": answers,
                        "usage": {"input_tokens": len(enc.input_ids), "output_tokens": 0}},
                       ensure_ascii=False, separators=(",", ":"))
        t3 = time.perf_counter()
        n_encoded = len(encoded)
        if run > 0:
            times["validate"].append((t1 - t0) * 1e3)
            times["encode"].append((t2 - t1) * 1e3)
            times["answers"].append((t3 - t2) * 1e3)
    counts = {"validate": len(bodies), "encode": n_encoded, "answers": n_encoded}
    for stage, values in times.items():
        print(json.dumps({"impl": "python-reference", "stage": stage, "records": counts[stage],
                          "median_ms": round(statistics.median(values), 3), "runs": runs}))


if __name__ == "__main__":
    main()
