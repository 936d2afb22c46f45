#!/usr/bin/env python3
"""ordinary_text.py — a bench text without the parity corpus's pathological records: keeps
the JSON-string lines that have no whitespace run longer than 64 characters (Oniguruma's
`\\s+(?!\\S)` backtracks over long runs, which makes HF `tokenizers` look slow) and no control
characters other than tab, LF and CR — i.e. ordinary prose, code, JSON and Clef prompts.
Deterministic for a given input.
Usage: python3 bench/tokenizer/ordinary_text.py IN.jsonl OUT.jsonl [MAX_MB]"""
import json
import re
import sys

LONG_SPACE = re.compile(r"\s{65,}")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

src, dst = sys.argv[1], sys.argv[2]
max_bytes = float(sys.argv[3]) * 1e6 if len(sys.argv) > 3 else float("inf")
kept = size = total = 0
with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
    for line in f:
        if not line.strip():
            continue
        total += 1
        t = json.loads(line)
        if LONG_SPACE.search(t) or CONTROL.search(t):
            continue
        n = len(t.encode("utf-8"))
        if size + n > max_bytes:
            break
        out.write(json.dumps(t, ensure_ascii=False) + "\n")
        kept += 1
        size += n
print("ordinary text: %d of %d records, %d bytes -> %s" % (kept, total, size, dst), file=sys.stderr)
