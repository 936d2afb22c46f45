#!/usr/bin/env bash
# run.sh — the joint schema head, ours (C, CPU backend) vs the reference JointSchemaHead in
# PyTorch (float32, CPU), same weights, same record, same thread count, in one run; prints
# one table. Default shape: clef-flash's head (hidden 4096, width 1024, 2 routing layers,
# 4 decoder layers, 16 heads, feedforward 4096) on a 2,048-token record of 16 questions x 4
# options. Medians of RUNS timed forwards after one warm-up; peak RSS of each process
# (weights loading included). Needs: a Release build in BUILD (default build/) and
# pip install -r scripts/requirements.txt.
#   bench/head/run.sh [THREADS] [RUNS]     env: BUILD, PYTHON, HEAD_ARGS (extra shape flags)
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${1:-2}
RUNS=${2:-5}
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
cmake --build "$BUILD" --target bench_head -j2 >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086
"$PYTHON" bench/head/torch_head.py --write "$WORK/head.safetensors" ${HEAD_ARGS:-}
ours=$("$BUILD/bench/head/bench_head" "$WORK/head.safetensors" --threads "$THREADS" --runs "$RUNS")
torch=$("$PYTHON" bench/head/torch_head.py --time "$WORK/head.safetensors" --threads "$THREADS" --runs "$RUNS")
"$PYTHON" - "$ours" "$torch" "$THREADS" <<'PY'
import json, sys
ours, torch, threads = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(f"joint schema head, {threads} threads, median of {ours['runs']} runs (warm-up excluded)")
print(f"{'engine':<28}{'ms / record':>12}{'peak RSS MB':>13}")
print(f"{'clef (C, CPU backend)':<28}{ours['median_ms']:>12.1f}{ours['peak_rss_mb']:>13.0f}")
print(f"{'PyTorch JointSchemaHead fp32':<28}{torch['median_ms']:>12.1f}{torch['peak_rss_mb']:>13.0f}")
print(f"speed ratio (torch / clef): {torch['median_ms'] / ours['median_ms']:.2f}x; "
      f"clef weights {ours['weight_mb']:.0f} MB (bf16 as stored), workspace {ours['workspace_mb']:.0f} MB")
print(json.dumps({"clef": ours, "torch": torch}))
PY
