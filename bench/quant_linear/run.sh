#!/usr/bin/env bash
# run.sh — bench/quant_linear: one quantized linear per format, src/quant's CPU kernels vs the
# libraries' own CPU paths (bitsandbytes Linear4bit, compressed-tensors FP8_DYNAMIC forward,
# comfy-kitchen eager int8_linear) and torch's bf16 / fp32 F.linear, in one run, same shape,
# same thread count. Default shape: an MLP up projection of the mid-size config (hidden 1024,
# MLP 3584) over 1025 tokens. Each side: 1 warm-up, median of RUNS samples of ~0.2 s each (per
# call: wall ms and CPU seconds of all threads — steadier than wall time when other jobs share
# the machine). Ours includes the per-token activation quantization and packing; the
# libraries run bf16 activations, we run fp32. Our kernels run the CPU's best level
# (CLEF_CPU_ISA=avx2 caps them; the table names the level and the int8 kernel: vpdpbusd where
# the CPU has VNNI); ATEN_CPU_CAPABILITY=avx2 caps torch's. A last line splits our int8 time
# into its parts (rotation, quantizer, dots), and one gives the load average.
#   bench/quant_linear/run.sh [N=3584] [K=1024] [T=1025] [RUNS=5] [THREADS=nproc] [BUILD=build]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-3584}; K=${2:-1024}; T=${3:-1025}; RUNS=${4:-5}; THREADS=${5:-$(nproc)}; BUILD=${6:-build}
PY=${PYTHON:-python3}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_quant_linear >/dev/null
ours=$("$BUILD/bench/quant_linear/bench_quant_linear" "$N" "$K" "$T" "$RUNS" "$THREADS")
peer=$("$PY" bench/quant_linear/peer.py "$N" "$K" "$T" "$RUNS" "$THREADS" 2>/dev/null | grep '^{')
"$PY" - "$N" "$K" "$T" "$RUNS" "$THREADS" "$ours" "$peer" <<'PYEOF'
import json, sys
N, K, T, runs, threads = sys.argv[1:6]
ours = {r["format"]: r for r in map(json.loads, sys.argv[6].splitlines())}
peer = {r["format"]: r for r in map(json.loads, sys.argv[7].splitlines())}
isa = next(iter(ours.values())).get("isa", "?")
i8k = next(iter(ours.values())).get("int8_kernel", "?")
print(f"quant_linear: y = x W^T, N {N} x K {K}, {T} tokens, {threads} threads, clef kernels {isa} (int8: {i8k}), median of {runs} samples of ~0.2 s (warm-up excluded), per call")
print(f"| {'format':<8} | {'clef (src/quant)':<22} | {'ms':>8} | {'CPU s':>6} | {'library CPU path':<38} | {'ms':>8} | {'CPU s':>6} | {'speed (wall)':>12} | {'speed (CPU)':>11} |")
print(f"|{'-'*10}|{'-'*24}|{'-'*10}|{'-'*8}|{'-'*40}|{'-'*10}|{'-'*8}|{'-'*14}|{'-'*13}|")
rows = (("nf4", "NF4 fp32 FMA tiles", "nf4", "bitsandbytes Linear4bit (bf16)"),
        ("fp8", "FP8 W8A8 fp32 tiles", "fp8", "compressed-tensors FP8_DYNAMIC (bf16)"),
        ("fp8_qdq", "FP8 QDQ fp32 tiles", "fp8", "compressed-tensors FP8_DYNAMIC (bf16)"),
        ("int8", "INT8 ConvRot int32", "int8", "comfy-kitchen eager int8_linear"))
for key, name, pkey, pname in rows:
    o, p = ours[key], peer[pkey]
    print(f"| {key:<8} | {name:<22} | {o['ms']:8.1f} | {o['cpu_s']:6.3f} | {pname:<38} | {p['ms']:8.1f} | {p['cpu_s']:6.3f} | {p['ms']/o['ms']:11.2f}x | {p['cpu_s']/o['cpu_s']:10.2f}x |")
for key, pname in (("bf16", "torch F.linear bf16"), ("fp32", "torch F.linear fp32")):
    p = peer[key]
    print(f"| {key:<8} | {'-':<22} | {'':>8} | {'':>6} | {pname:<38} | {p['ms']:8.1f} | {p['cpu_s']:6.3f} | {'':>12} | {'':>11} |")
if "int8_dots" in ours:
    part = lambda k: f"{ours[k]['cpu_s'] * 1e3:.1f} ms"
    print(f"int8 by part (clef, CPU time, each timed alone): rotation {part('int8_rot')}, quantizer with the rotation"
          f" {part('int8_quant')}, int32 dots + epilogue ({i8k}) {part('int8_dots')};"
          f" the dots without VNNI (vpmaddwd) {part('int8_madd')}")
load = open("/proc/loadavg").read().split()[:3]
print(f"load average (1/5/15 min) after the run: {' '.join(load)}")
print(json.dumps({"N": int(N), "K": int(K), "T": int(T), "threads": int(threads), "clef": ours, "peer": peer}))
PYEOF
