#!/usr/bin/env bash
# run.sh — bench_encode (C) and the Python reference (peer_encode.py) on the same records,
# one table: stage, records, median ms of each, speed-up. Run from anywhere:
#   bench/encode/run.sh [RUNS] [BUILD_DIR] [TOKENIZER_JSON]
# (default tokenizer: the small test BPE; Qwen3.5's: scripts/tokenizer/fetch_tokenizers.sh)
# Needs a Release build (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release) and python3 with
# scripts/requirements.txt installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-7}
BUILD=${2:-build}
TOKENIZER=${3:-tests/encode/fixtures/tokenizer.json}
RECORDS=tests/encode/fixtures/records.jsonl
cmake --build "$BUILD" --target bench_encode -j2 >/dev/null
C_ROWS=$("$BUILD"/bench/encode/bench_encode --runs "$RUNS" --json "$RECORDS" "$TOKENIZER")
PY_ROWS=$(python3 bench/encode/peer_encode.py "$RUNS" "$RECORDS" "$TOKENIZER")
python3 - "$C_ROWS" "$PY_ROWS" <<'PY'
import json, sys
c = {r["stage"]: r for r in map(json.loads, sys.argv[1].splitlines())}
p = {r["stage"]: r for r in map(json.loads, sys.argv[2].splitlines())}
runs = next(iter(c.values()))["runs"]
print(f"| stage    | records | clef median ms | Python reference median ms | speed-up |  (N={runs}, warm-up excluded)")
print("|----------|---------|----------------|----------------------------|----------|")
for stage in ("validate", "encode", "answers"):
    print(f"| {stage:<8} | {c[stage]['records']:7d} | {c[stage]['median_ms']:14.2f} | "
          f"{p[stage]['median_ms']:26.2f} | {p[stage]['median_ms'] / c[stage]['median_ms']:7.1f}x |")
PY
