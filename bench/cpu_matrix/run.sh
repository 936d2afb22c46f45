#!/usr/bin/env bash
# run.sh — the CPU bench matrix of issue 8: bench/cpu_forward (the backbone forward) and
# bench/cpu_decide (a whole decision) at each TOKENS x HIDDEN x DTYPE x ISA cell, every cell
# one run of that bench's run.sh, so ours, PyTorch and llama.cpp are timed in the same run on
# the same release at the same precision and thread count. Made for a shared machine:
#   - each cell's table (with the load average before and after) goes to
#     bench/out/cpu_matrix/<bench>-<isa>-h<hidden>-<dtype>-<tokens>.txt; a cell whose file
#     already holds a result is skipped, so an interrupted matrix resumes where it stopped;
#   - the run order of the three sides alternates from cell to cell (run.sh ORDER), so no
#     side always gets the quieter minutes;
#   - the summary prints wall-time and CPU-second ratios side by side (CPU seconds of all
#     threads are the steadier comparison when other jobs take the cores).
# ISA avx512: our native build (BUILD_NATIVE, -march=native), llama.cpp's native build, torch
# as it is. ISA avx2: our build for x86-64-v3 (BUILD_AVX2, configured here if new:
# -march=x86-64-v3 without run-time dispatch, so nothing in it uses AVX-512) with
# CLEF_CPU_ISA=avx2 as well, llama.cpp's AVX2 build (bench/llama/llama.sh build avx2), torch
# capped with ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 DNNL_MAX_CPU_ISA=AVX2.
#   bench/cpu_matrix/run.sh            run the missing cells, then print the summary
#   bench/cpu_matrix/run.sh summary    only print the summary of the cells done
# env: RUNS (timed runs per side, default 1, after 1 warm-up), THREADS (default 2), and the
# axes as space-separated lists: BENCHES (forward decide), ISAS (avx2 avx512), HIDDENS
# (384 1024), DTYPES (f32 bf16), TOKENS_LIST (5000 1025); BUILD_NATIVE (build), BUILD_AVX2
# (build-avx2), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/cpu_matrix
mkdir -p "$OUT"
RUNS=${RUNS:-1}; THREADS=${THREADS:-2}
BENCHES=${BENCHES:-forward decide}; ISAS=${ISAS:-avx2 avx512}
HIDDENS=${HIDDENS:-384 1024}; DTYPES=${DTYPES:-f32 bf16}; TOKENS_LIST=${TOKENS_LIST:-5000 1025}
BUILD_NATIVE=${BUILD_NATIVE:-build}; BUILD_AVX2=${BUILD_AVX2:-build-avx2}
PY=${PYTHON:-python3}

run_cell() { # bench isa hidden dtype tokens order
    local bench=$1 isa=$2 hidden=$3 dtype=$4 tokens=$5 order=$6
    local log="$OUT/$bench-$isa-h$hidden-$dtype-$tokens.txt"
    if [ -f "$log" ] && tail -1 "$log" | grep -q '"clef"'; then return 0; fi
    local build=$BUILD_NATIVE env=(HIDDEN="$hidden" DTYPE="$dtype" ORDER="$order" LLAMA=native)
    if [ "$isa" = avx2 ]; then
        build=$BUILD_AVX2
        env=(HIDDEN="$hidden" DTYPE="$dtype" ORDER="$order" LLAMA=avx2 CLEF_CPU_ISA=avx2
             ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 DNNL_MAX_CPU_ISA=AVX2)
    fi
    echo "== $bench $isa hidden $hidden $dtype $tokens tokens (order $order) $(date -u +%H:%M:%S)" >&2
    local st=0
    if [ "$bench" = forward ]; then
        env "${env[@]}" bench/cpu_forward/run.sh "$tokens" "$RUNS" "$THREADS" "$build" > "$log.tmp" || st=$?
    else
        env "${env[@]}" BUILD="$build" bench/cpu_decide/run.sh "$RUNS" "$THREADS" "$tokens" > "$log.tmp" || st=$?
    fi
    if [ "$st" != 0 ]; then # one failed cell (a peer's error is on stderr above) stops no other
        echo "cpu_matrix: $bench $isa h$hidden $dtype $tokens failed (status $st)" >&2
        return 0
    fi
    mv "$log.tmp" "$log"
    cat "$log" >&2
}

if [ "${1:-}" != summary ]; then
    if [ ! -f "$BUILD_AVX2/CMakeCache.txt" ]; then
        cmake -S . -B "$BUILD_AVX2" -DCMAKE_BUILD_TYPE=Release -DCLEF_NATIVE=OFF -DCLEF_CPU_DISPATCH=OFF \
            -DCLEF_CUDA=OFF -DCMAKE_C_FLAGS=-march=x86-64-v3 >/dev/null
    fi
    for b in "$BUILD_NATIVE" "$BUILD_AVX2"; do
        [ -f "$b/CMakeCache.txt" ] || cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$b" -j2 --target bench_cpu_forward bench_cpu_decide >/dev/null
    done
    n=0
    for tokens in $TOKENS_LIST; do for hidden in $HIDDENS; do for isa in $ISAS; do
        for dtype in $DTYPES; do for bench in $BENCHES; do
            order=forward; [ $((n % 2)) = 1 ] && order=reverse
            run_cell "$bench" "$isa" "$hidden" "$dtype" "$tokens" "$order"
            n=$((n + 1))
        done; done
    done; done; done
fi

"$PY" - "$OUT" <<'PYEOF'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
rows = []
for f in sorted(out.glob("*.txt")):
    lines = f.read_text().splitlines()
    if not lines or '"clef"' not in lines[-1]:
        continue
    bench, isa, hidden, dtype, tokens = f.stem.split("-")
    r = json.loads(lines[-1])
    load = next((l for l in lines if l.startswith("load average")), "")
    loads = re.findall(r"before ([\d.]+)[^,]*, after ([\d.]+)", load)
    rows.append((bench, isa, int(hidden[1:]), dtype, int(tokens), r, loads[0] if loads else ("?", "?")))
rows.sort(key=lambda x: (x[0], x[1], x[2], x[3], x[4]))
print("| bench | ISA | hidden | dtype | tokens | clef ms | clef CPU s | clef MiB | torch ms | torch CPU s | torch MiB |"
      " llama.cpp ms | llama.cpp CPU s | llama.cpp MiB | vs torch wall / CPU | vs llama.cpp wall / CPU | load 1-min before/after |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
mib = lambda b: b / 2**20
for bench, isa, hidden, dtype, tokens, r, (lb, la) in rows:
    c, t, l = r["clef"], r["torch"], r.get("llama") or {}
    def ratio(o):
        return f"{o['ms'] / c['ms']:.2f}x / {o['cpu_s'] / c['cpu_s']:.2f}x" if o else "—"
    def cols(o):
        return f"{o['ms']:.0f} | {o['cpu_s']:.2f} | {mib(o['peak_rss']):.0f}" if o else "— | — | —"
    print(f"| {bench} | {isa} | {hidden} | {dtype} | {tokens} | {cols(c)} | {cols(t)} | {cols(l)} |"
          f" {ratio(t)} | {ratio(l)} | {lb} / {la} |")
PYEOF
