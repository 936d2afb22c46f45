#!/usr/bin/env bash
# run.sh — bench/cpu_forward: the engine's Qwen3.5 text forward vs PyTorch CPU (transformers
# 5.17, fp32 math on the same BF16 weights, eager attention, same thread count), in one run,
# on a mid-size random-weight release (hidden 1024, 8 layers = 6 GDN + 2 attention, MLP 3584,
# attention 8x256 GQA 4:1, GDN 16 heads of 128, vocab 4096; bench/out/, made on first use).
# Each side: load once, 1 warm-up, median of RUNS forwards (wall ms, tokens/s, and CPU seconds
# of all threads — steadier than wall time when other jobs share the machine); separate
# processes, so peak RSS is each side's own (weights + activations + runtime).
#   bench/cpu_forward/run.sh [T=1024] [RUNS=5] [THREADS=nproc] [BUILD=build]
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${1:-1024}; RUNS=${2:-5}; THREADS=${3:-$(nproc)}; BUILD=${4:-build}
DIR=bench/out/cpu_forward_release
PY=${PYTHON:-python3}
# joint_head_config.json marks a complete Clef release (older bench/out dirs lack it)
[ -f "$DIR/joint_head_config.json" ] || "$PY" bench/cpu_forward/peer.py make "$DIR" >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_cpu_forward >/dev/null
ours=$("$BUILD/bench/cpu_forward/bench_cpu_forward" "$DIR" "$T" "$RUNS" "$THREADS")
peer=$("$PY" bench/cpu_forward/peer.py run "$DIR" "$T" "$RUNS" "$THREADS" 2>/dev/null | tail -1)
"$PY" - "$T" "$RUNS" "$THREADS" "$ours" "$peer" <<'PYEOF'
import json, sys
T, runs, threads = sys.argv[1:4]
ours, peer = json.loads(sys.argv[4]), json.loads(sys.argv[5])
print(f"cpu_forward: Qwen3.5 text, hidden 1024, 8 layers, {T} tokens, batch 1, {threads} threads, median of {runs} (warm-up and load excluded)")
print(f"| {'system':<35} | {'ms':>9} | {'tok/s':>8} | {'CPU s':>7} | {'peak RSS MiB':>12} | {'speed vs torch':>14} |")
print(f"|{'-'*37}|{'-'*11}|{'-'*10}|{'-'*9}|{'-'*14}|{'-'*16}|")
for name, r in (("clef cpu (fp32 math, BF16 weights)", ours), ("torch 2.11 + transformers 5.17 fp32", peer)):
    print(f"| {name:<35} | {r['ms']:9.1f} | {r['tok_s']:8.1f} | {r['cpu_s']:7.2f} | {r['peak_rss']/2**20:12.0f} | {peer['ms']/r['ms']:13.2f}x |")
print(json.dumps({"T": int(T), "threads": int(threads), "clef": ours, "torch": peer}))
PYEOF
