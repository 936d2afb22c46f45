#!/usr/bin/env bash
# run.sh — bench/quant_forward: the engine's Qwen3.5 text forward on quantized releases (NF4,
# FP8, INT8 ConvRot; bench_cpu_forward, which loads any release the engine runs) vs
# transformers + the release's own library on CPU (bitsandbytes, compressed-tensors,
# comfy-kitchen; fp32 activations), in one run, same thread count, on the mid-size config of
# bench/cpu_forward (hidden 1024, 8 layers, MLP 3584) quantized by the real producers
# (bench/out/quant_<precision>, made on first use). Each side: load once, 1 warm-up, median of
# RUNS forwards (wall ms, CPU seconds of all threads), separate processes so peak RSS is each
# side's own.
#   bench/quant_forward/run.sh [T=1025] [RUNS=3] [THREADS=nproc] [BUILD=build] [PRECISIONS="nf4 fp8 int8"]
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${1:-1025}; RUNS=${2:-3}; THREADS=${3:-$(nproc)}; BUILD=${4:-build}; PRECISIONS=${5:-nf4 fp8 int8}
PY=${PYTHON:-python3}
SRC=bench/out/cpu_forward_release
[ -f "$SRC/joint_head_config.json" ] || "$PY" bench/cpu_forward/peer.py make "$SRC" >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_cpu_forward >/dev/null
rows=""
for p in $PRECISIONS; do
  DIR=bench/out/quant_$p
  [ -f "$DIR/joint_head_config.json" ] || "$PY" bench/quant_forward/peer.py make "$SRC" "$DIR" "$p" >/dev/null 2>&1
  ours=$("$BUILD/bench/cpu_forward/bench_cpu_forward" "$DIR" "$T" "$RUNS" "$THREADS")
  peer=$("$PY" bench/quant_forward/peer.py run "$DIR" "$p" "$T" "$RUNS" "$THREADS" 2>/dev/null | grep '^{' | tail -1)
  rows="$rows$p $ours
$p $peer
"
done
"$PY" - "$T" "$RUNS" "$THREADS" "$rows" <<'PYEOF'
import json, sys
T, runs, threads, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].strip().splitlines()
peer_name = {"nf4": "transformers + bitsandbytes 0.50 (fp32)", "fp8": "transformers + compressed-tensors 0.20 (fp32)",
             "int8": "transformers + comfy-kitchen eager (fp32)"}
print(f"quant_forward: Qwen3.5 text, hidden 1024, 8 layers, {T} tokens, batch 1, {threads} threads, median of {runs} (warm-up and load excluded)")
print(f"| {'precision':<9} | {'system':<45} | {'ms':>9} | {'CPU s':>7} | {'peak RSS MiB':>12} | {'weights MiB':>11} | {'speed (CPU)':>11} |")
print(f"|{'-'*11}|{'-'*47}|{'-'*11}|{'-'*9}|{'-'*14}|{'-'*13}|{'-'*13}|")
out = {}
for i in range(0, len(rows), 2):
    p, o = rows[i].split(" ", 1); _, q = rows[i + 1].split(" ", 1)
    o, q = json.loads(o), json.loads(q)
    out[p] = {"clef": o, "peer": q}
    print(f"| {p:<9} | {'clef cpu (src/quant kernels)':<45} | {o['ms']:9.1f} | {o['cpu_s']:7.2f} | {o['peak_rss']/2**20:12.0f} | {o['weight_bytes']/2**20:11.1f} | {q['cpu_s']/o['cpu_s']:10.2f}x |")
    print(f"| {p:<9} | {peer_name[p]:<45} | {q['ms']:9.1f} | {q['cpu_s']:7.2f} | {q['peak_rss']/2**20:12.0f} | {'':>11} | {'1.00x':>11} |")
print(json.dumps({"T": int(T), "threads": int(threads), "results": out}))
PYEOF
