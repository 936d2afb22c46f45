#!/usr/bin/env bash
# run.sh — bench/cpu_decide: one whole Clef decision on CPU, ours vs the reference Python path,
# in one run, same thread count, fp32 arithmetic on the same BF16 weights.
#   ours: bench_cpu_decide — clef_model_load (timed apart) + clef_model_decide (request JSON in,
#         SystemOne answer JSON out: parse, tokenize, backbone, head, answer).
#   peer: peer.py run — transformers Qwen3_5ForConditionalGeneration.from_pretrained(dtype=
#         float32) + the reference JointSchemaHead in the reference ClefModel, decided by the
#         reference systemone() (encode_record + forward + answer), torch.set_num_threads.
# Release: hidden 1024, 8 layers (6 GDN + 2 attention), head width 1024 / 2 routing + 4 decoder
# layers / 16 heads / ff 4096, demo tokenizer; one record of TOKENS prompt tokens, 4 questions,
# 12 options (bench/out/cpu_decide/, made on first use by peer.py make). Each side: its own
# process (peak RSS is that process's, load included), load once, 1 warm-up decision, median
# of RUNS (wall ms and CPU seconds of all threads). Both sides get MAX_LENGTH as max_length
# (default 16384, both libraries' default; ours plans its workspace for it, but only the pages
# a 1,024-token record touches count in RSS). Ours runs first, then the peer.
# Prints one table and whether the two answers are identical.
#   bench/cpu_decide/run.sh [RUNS=5] [THREADS=nproc] [TOKENS=1024] [MAX_LENGTH=16384]
#   env: BUILD (default build; configured as Release if new), PYTHON (default python3)
# Needs: pip install -r scripts/requirements.txt (and the reference head file, found as
# scripts/head/oracle.py says).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}; THREADS=${2:-$(nproc)}; TOKENS=${3:-1024}; MAX_LENGTH=${4:-16384}
BUILD=${BUILD:-build}; PY=${PYTHON:-python3}
OUT=bench/out/cpu_decide
"$PY" bench/cpu_decide/peer.py make "$OUT" "$TOKENS" >/dev/null 2>&1 ||
    { echo "run.sh: peer.py make failed; rerun: $PY bench/cpu_decide/peer.py make $OUT $TOKENS" >&2; exit 1; }
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_cpu_decide >/dev/null
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
ours=$("$BUILD/bench/cpu_decide/bench_cpu_decide" "$OUT/clef-bench" "$OUT/record-$TOKENS.json" "$RUNS" "$THREADS" "$MAX_LENGTH")
peer=$("$PY" bench/cpu_decide/peer.py run "$OUT/clef-bench" "$OUT/record-$TOKENS.json" "$RUNS" "$THREADS" "$MAX_LENGTH" 2>/dev/null | tail -1)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" - "$RUNS" "$MAX_LENGTH" "$ours" "$peer" "$load_before" "$load_after" "$(nproc)" <<'PYEOF'
import json, sys
import torch, transformers
runs, max_length = sys.argv[1:3]
ours, peer = json.loads(sys.argv[3]), json.loads(sys.argv[4])
load_before, load_after, cores = sys.argv[5:8]
tokens = ours["answer"]["usage"]["input_tokens"]
assert tokens == peer["answer"]["usage"]["input_tokens"], "the two sides read different prompts"
print(f"cpu_decide: one decision (request JSON -> answer JSON), Clef hidden 1024, 8 layers, head width 1024,"
      f" {tokens} tokens, 12 options, max_length {max_length}; median of {runs} after 1 warm-up; load timed apart")
peer_name = f"torch {torch.__version__.split('+')[0]} + transformers {transformers.__version__} fp32"
rows = (("clef cpu (C, BF16 weights, fp32 math)", ours), (peer_name, peer))
print(f"| {'system':<40} | threads | tokens | load s | ms/decision |  tok/s | CPU s | peak RSS MiB | speed vs torch |")
print(f"|{'-' * 42}|---------|--------|--------|-------------|--------|-------|--------------|----------------|")
for name, r in rows:
    print(f"| {name:<40} | {r['threads']:7d} | {tokens:6d} | {r['load_s']:6.2f} | {r['ms']:11.1f} | "
          f"{tokens / r['ms'] * 1e3:6.1f} | {r['cpu_s']:5.1f} | {r['peak_rss'] / 2**20:12.0f} | {peer['ms'] / r['ms']:13.2f}x |")
print(f"peak RSS clef / torch: {ours['peak_rss'] / peer['peak_rss']:.2f}; clef weights "
      f"{ours['weight_bytes'] / 2**20:.0f} MiB (BF16 as stored), workspace planned {ours['workspace_bytes'] / 2**20:.0f} MiB;"
      f" CPU s = CPU seconds of one decision, all threads (steadier than wall time on a shared machine)")


def max_diff(a, b):
    """Largest |a - b| over the numbers of two answers of the same shape (None: shapes differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return None
        diffs = [max_diff(a[k], b[k]) for k in a]
        return None if None in diffs else max(diffs, default=0.0)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b)
    return 0.0 if a == b else None


same = json.dumps(ours["answer"]) == json.dumps(peer["answer"])
if same:
    print("answers identical: yes")
else:
    d = max_diff(ours["answer"], peer["answer"])
    print("answers identical: no (" + ("different fields or strings" if d is None else f"max |diff| {d:.4g}") + ")")
print(f"load average (1/5/15 min) on {cores} cores: before {load_before}, after {load_after}")
print(json.dumps({"clef": ours, "torch": peer}))
PYEOF
