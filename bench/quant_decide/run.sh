#!/usr/bin/env bash
# run.sh — bench/quant_decide: one whole Clef decision on CPU per precision (bf16 for
# reference, nf4, fp8, int8), ours vs the release's own stack, in one run, same thread count:
#   ours:  bench_cpu_decide (bench/cpu_decide) — clef_model_load (timed apart) +
#          clef_model_decide (request JSON in, answer JSON out) on the release as stored: the
#          quantized linears in their formats' own arithmetic (src/quant, fp32 activations).
#   peer:  peer.py run — transformers + the release's library on CPU (bitsandbytes
#          Linear4bit, compressed-tensors' forward, comfy-kitchen's eager int8_linear; bf16:
#          from_pretrained), fp32 activations, with the reference JointSchemaHead in the
#          reference ClefModel, decided by the reference systemone().
# Releases: bench/cpu_decide's hidden-1024 BF16 release (8 layers, MLP 3584, head width 1024;
# made by its peer.py on first use) and its quantized copies made by the real producers
# (bench/out/quant_decide/<precision>/clef-bench, peer.py make, on first use). Record: its
# TOKENS-token request (4 questions, 12 options). Each side: its own process (peak RSS is that
# process's, load included), load once, 1 warm-up decision, median of RUNS (wall ms and CPU
# seconds of all threads). Prints one table (clef speed = row's CPU s / ours; weights = what
# clef holds resident) and whether the answers are identical; the load average around it.
#   bench/quant_decide/run.sh [RUNS=3] [THREADS=nproc] [TOKENS=1024] [MAX_LENGTH=16384]
#   env: PRECISIONS (default "bf16 nf4 fp8 int8"), BUILD (default build; configured as
#        Release if new), PYTHON (default python3), CLEF_CPU_ISA (avx2: our kernels capped at
#        AVX2), ATEN_CPU_CAPABILITY (avx2: torch's kernels capped at AVX2)
# Needs: pip install -r scripts/requirements.txt (and the reference head file, found as
# scripts/head/oracle.py says).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}; THREADS=${2:-$(nproc)}; TOKENS=${3:-1024}; MAX_LENGTH=${4:-16384}
BUILD=${BUILD:-build}; PY=${PYTHON:-python3}; PRECISIONS=${PRECISIONS:-bf16 nf4 fp8 int8}
SRC_DIR=bench/out/cpu_decide/h1024-bf16
RECORD=$SRC_DIR/record-$TOKENS.json
"$PY" bench/cpu_decide/peer.py make "$SRC_DIR" "$TOKENS" 1024 bf16 >/dev/null 2>&1 ||
    { echo "run.sh: making the BF16 release failed; rerun: $PY bench/cpu_decide/peer.py make $SRC_DIR $TOKENS 1024 bf16" >&2; exit 1; }
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_cpu_decide >/dev/null
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rows=""
for p in $PRECISIONS; do
    if [ "$p" = bf16 ]; then
        DIR=$SRC_DIR/clef-bench
    else
        DIR=bench/out/quant_decide/$p/clef-bench
        "$PY" bench/quant_decide/peer.py make "$SRC_DIR/clef-bench" "$DIR" "$p" >/dev/null 2>&1 ||
            { echo "run.sh: making the $p release failed; rerun: $PY bench/quant_decide/peer.py make $SRC_DIR/clef-bench $DIR $p" >&2; exit 1; }
    fi
    ours=$("$BUILD/bench/cpu_decide/bench_cpu_decide" "$DIR" "$RECORD" "$RUNS" "$THREADS" "$MAX_LENGTH")
    peer=$("$PY" bench/quant_decide/peer.py run "$DIR" "$p" "$RECORD" "$RUNS" "$THREADS" "$MAX_LENGTH" 2>/dev/null | tail -1)
    rows="$rows$p $ours
$p $peer
"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" - "$RUNS" "$MAX_LENGTH" "$rows" "$load_before" "$load_after" "$(nproc)" <<'PYEOF'
import json, sys
import torch, transformers
runs, max_length, rows, load_before, load_after, cores = sys.argv[1:7]
rows = rows.strip().splitlines()
peer_name = {"bf16": f"transformers {transformers.__version__} fp32",
             "nf4": "transformers + bitsandbytes (fp32)", "fp8": "transformers + compressed-tensors (fp32)",
             "int8": "transformers + comfy-kitchen eager (fp32)"}


def max_diff(a, b):
    """Largest |a - b| over the numbers of two answers of the same shape (None: shapes or
    strings differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return None
        diffs = [max_diff(a[k], b[k]) for k in a]
        return None if None in diffs else max(diffs, default=0.0)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return None
        diffs = [max_diff(x, y) for x, y in zip(a, b)]
        return None if None in diffs else max(diffs, default=0.0)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b)
    return 0.0 if a == b else None


first = json.loads(rows[0].split(" ", 1)[1])
tokens = first["answer"]["usage"]["input_tokens"]
print(f"quant_decide: one decision (request JSON -> answer JSON) per precision, Clef hidden 1024, 8 layers, MLP 3584,"
      f" {tokens} tokens, 12 options, {first['threads']} threads ({first.get('isa', '?')}), max_length {max_length};"
      f" median of {runs} after 1 warm-up; load timed apart")
print(f"| {'precision':<9} | {'system':<42} | load s | ms/decision | CPU s | peak RSS MiB | weights MiB | clef speed (CPU) | answers vs clef |")
print(f"|{'-' * 11}|{'-' * 44}|--------|-------------|-------|--------------|-------------|------------------|-----------------|")
out = {}
for i in range(0, len(rows), 2):
    p, o = rows[i].split(" ", 1)
    _, q = rows[i + 1].split(" ", 1)
    o, q = json.loads(o), json.loads(q)
    out[p] = {"clef": o, "peer": q}
    if json.dumps(o["answer"]) == json.dumps(q["answer"]):
        same = "identical"
    else:
        d = max_diff(o["answer"].get("answers"), q["answer"].get("answers"))
        same = "fields differ" if d is None else f"max diff {d:.2g}"
    print(f"| {p:<9} | {'clef cpu (' + p + ' as stored, fp32 math)':<42} | {o['load_s']:6.2f} | {o['ms']:11.1f} |"
          f" {o['cpu_s']:5.2f} | {o['peak_rss'] / 2**20:12.0f} | {o['weight_bytes'] / 2**20:11.1f} | {'1.00x':>16} | {'':<15} |")
    print(f"| {p:<9} | {peer_name[p]:<42} | {q['load_s']:6.2f} | {q['ms']:11.1f} |"
          f" {q['cpu_s']:5.2f} | {q['peak_rss'] / 2**20:12.0f} | {'':>11} | {q['cpu_s'] / o['cpu_s']:15.2f}x | {same:<15} |")
print(f"torch {torch.__version__.split('+')[0]}; CPU s = CPU seconds of one decision, all threads (steadier than wall"
      f" time on a shared machine); weights = clef's resident weight bytes")
print(f"load average (1/5/15 min) on {cores} cores: before {load_before}, after {load_after}")
print(json.dumps(out))
PYEOF
