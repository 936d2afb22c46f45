#!/usr/bin/env python3
"""make_fixtures.py — regenerates the committed parity fixtures of tests/tokenizer/data/:
sample.jsonl (every kind of record of the corpus, ~300 KB) and, for each tokenizer, the ids
HF `tokenizers` (pinned) gives each sample line (expected/<name>.ids).

Usage (after fetch_tokenizers.sh and make_corpus.py):
  python3 scripts/tokenizer/make_fixtures.py --corpus corpus.jsonl [--cache ~/.cache/clef/tokenizers]
"""
import argparse
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "tests", "tokenizer", "data")
NAMES = ["qwen-3.5", "qwen-3", "deepseek-v3", "glm-4"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--cache", default=os.environ.get("CLEF_TOKENIZER_CACHE",
                                                      os.path.expanduser("~/.cache/clef/tokenizers")))
    ap.add_argument("--kb", type=int, default=300)
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("compare_corpus", os.path.join(HERE, "compare_corpus.py"))
    cc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cc)

    with open(args.corpus, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    # Every 23rd record, records over 8 KB cut to their first 8 KB of characters.
    sample, size = [], 0
    for i in range(0, len(lines), 23):
        t = json.loads(lines[i])[:8000]
        sample.append(t)
        size += len(t.encode("utf-8"))
        if size > args.kb * 1000:
            break
    with open(os.path.join(DATA, "sample.jsonl"), "w", encoding="utf-8") as f:
        for t in sample:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    os.makedirs(os.path.join(DATA, "expected"), exist_ok=True)
    dirs = [(n, os.path.join(args.cache, n)) for n in NAMES] + [("demo", os.path.join(DATA, "demo"))]
    for name, d in dirs:
        oracle = cc.load_oracle(d)
        with open(os.path.join(DATA, "expected", name + ".ids"), "w") as f:
            for e in oracle.encode_batch(sample, add_special_tokens=False):
                f.write(" ".join(map(str, e.ids)) + "\n")
    print("sample: %d records, %d bytes; expected ids for %s" % (len(sample), size, ", ".join(n for n, _ in dirs)))


if __name__ == "__main__":
    main()
