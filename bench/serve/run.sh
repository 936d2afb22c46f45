#!/usr/bin/env bash
# run.sh — bench/serve: `clef serve` under load on loopback, batched against one at a time, in
# one run. The same records (bench/serve/records.py: the demo fixture's short records, as
# SystemOne bodies) are POSTed to /v1/systemone by wrk (Debian's wrk 4) for DURATION seconds at
# concurrency 32 and 64, first to a server that packs concurrent requests into batches
# (--max-batch-requests 64) and then to one that serves one request at a time
# (--max-batch-requests 1), each a fresh `clef serve` on 127.0.0.1 with the demo release
# (demo/clef-demo: a tiny random model, so the numbers measure the serving path — HTTP,
# validation, tokenization, scheduling, batch packing — more than the math).
# Per row: requests wrk completed, errors (socket errors + non-2xx), requests the server
# answered 200 and any other status it counted (its clef_http_requests_total; wrk stops with
# requests in flight, which the server still answers or counts as 499 — nothing is lost when
# answered >= completed and the other statuses are 499s of those last ones), p50/p99 latency,
# requests/s, the server's CPU time per answered request (user + system, from /proc: steadier
# than wall time on a shared machine), the mean batch size from /metrics, and the server's
# RSS after a warm-up and at the end (flat = no growth under load).
#   bench/serve/run.sh [DURATION=15] [THREADS=1]  (CPU threads per forward)
#   env: BUILD (default build; configured as Release if new), PYTHON (default python3),
#        MODEL (default demo/clef-demo: any release directory whose tokenizer the records fit)
# Traffic stays on 127.0.0.1, bounded by DURATION; the servers are stopped with SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${1:-15}; THREADS=${2:-1}
BUILD=${BUILD:-build}; PY=${PYTHON:-python3}; MODEL=${MODEL:-demo/clef-demo}
OUT=bench/out/serve
mkdir -p "$OUT"
command -v wrk >/dev/null || { echo "run.sh: wrk is missing (apt-get install wrk, or scripts/install-deps.sh)" >&2; exit 1; }
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target clef >/dev/null
"$PY" bench/serve/records.py > "$OUT/bodies.jsonl"
export BODIES_FILE="$OUT/bodies.jsonl"

metric() { # metric NAME [LABELS] < metrics text: the sample's value, 0 when absent
  if [ -n "${2:-}" ]; then KEY="$1{$2}"; else KEY="$1"; fi
  KEY="$KEY" awk '$1 == ENVIRON["KEY"] { print $2; found = 1 } END { if (!found) print 0 }'
}

cpu_ticks() { # user + system clock ticks of process $1 so far
  awk '{ print $14 + $15 }' "/proc/$1/stat"
}

rows=()
for conc in 32 64; do   # batched and one at a time side by side, so load drift hits both
  for batch in 64 1; do
    log="$OUT/server-b$batch-c$conc.log"
    rm -f "$log"  # the ready line must come from this server, not from a previous run's log
    "$BUILD/clef" serve --model "$MODEL" --port 0 --threads "$THREADS" --quiet \
        --max-batch-requests "$batch" --max-queue 4096 2> "$log" &
    pid=$!
    trap 'kill "$pid" 2>/dev/null' EXIT
    port=""
    for _ in $(seq 1 600); do
      port=$(sed -n 's/.*ready on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
      [ -n "$port" ] && break
      sleep 0.1
    done
    [ -n "$port" ] || { echo "run.sh: the server did not start:" >&2; cat "$log" >&2; kill "$pid"; exit 1; }
    url="http://127.0.0.1:$port"
    wrk -t2 -c"$conc" -d2s -s bench/serve/requests.lua "$url" > /dev/null  # warm-up
    before=$(curl -s "$url/metrics")
    rss_start=$(metric process_resident_memory_bytes <<< "$before")
    ticks_start=$(cpu_ticks "$pid")
    wrk -t2 -c"$conc" -d"${DURATION}s" --timeout 30s --latency -s bench/serve/requests.lua "$url" \
        > "$OUT/wrk-b$batch-c$conc.txt"
    after=$(curl -s "$url/metrics")
    ticks=$(( $(cpu_ticks "$pid") - ticks_start ))
    kill -TERM "$pid"; wait "$pid" || { echo "run.sh: clef serve exited non-zero" >&2; exit 1; }
    answered=$(( $(metric clef_http_requests_total 'route="systemone",status="200"' <<< "$after" | cut -d. -f1) \
               - $(metric clef_http_requests_total 'route="systemone",status="200"' <<< "$before" | cut -d. -f1) ))
    # anything but 200 on the decision route; 499 = wrk closed the connection at the end of the
    # run while the request was queued or running (answered by the server, not read by wrk)
    other=$(grep '^clef_http_requests_total{route="systemone",status="[^2]' <<< "$after" |
            sed 's/.*status="\([0-9]*\)"} \(.*\)/\1:\2/' | tr '\n' ' ')
    other=${other:-none}
    bsum=$(( $(metric clef_batch_size_sum <<< "$after" | cut -d. -f1) - $(metric clef_batch_size_sum <<< "$before" | cut -d. -f1) ))
    bcount=$(( $(metric clef_batch_size_count <<< "$after" | cut -d. -f1) - $(metric clef_batch_size_count <<< "$before" | cut -d. -f1) ))
    rss_end=$(metric process_resident_memory_bytes <<< "$after")
    rows+=("$batch $conc $answered ${other// /,} $bsum $bcount $rss_start $rss_end $ticks $OUT/wrk-b$batch-c$conc.txt")
  done
done
"$PY" - "$DURATION" "$THREADS" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(getconf CLK_TCK)" "$MODEL" "${rows[@]}" <<'PYEOF'
import re, sys
duration, threads, load, hz, model = sys.argv[1:6]
def seconds(text):
    v, unit = re.match(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(v) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[unit]
print(f"serve: clef serve on loopback, {model}, wrk -t2 {duration}s per row, {threads} CPU threads, "
      f"POST /v1/systemone; load average at the end {load}")
print("| mode | conc | completed | errors | answered 200 | other statuses | p50 ms | p99 ms | req/s | server CPU ms/req | mean batch | RSS start MiB | RSS end MiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
rps, cpu = {}, {}
for row in sys.argv[6:]:
    batch, conc, answered, other, bsum, bcount, rss0, rss1, ticks, path = row.split()
    w = open(path).read()
    completed = int(re.search(r"(\d+) requests in", w).group(1))
    errs = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", w))
    non2xx = int((re.search(r"Non-2xx or 3xx responses: (\d+)", w) or [0, 0])[1])
    p50 = seconds(re.search(r"50%\s+(\S+)", w).group(1)) * 1e3
    p99 = seconds(re.search(r"99%\s+(\S+)", w).group(1)) * 1e3
    r = float(re.search(r"Requests/sec:\s+([\d.]+)", w).group(1))
    mode = "batched (<= 64)" if batch == "64" else "one at a time"
    rps[(batch, conc)] = r
    cpu[(batch, conc)] = int(ticks) / float(hz) * 1e3 / max(int(answered), 1)
    mean = int(bsum) / max(int(bcount), 1)
    other = other.strip(",")
    print(f"| {mode} | {conc} | {completed} | {errs + non2xx} | {answered} | {other if other != 'none' else '-'} | "
          f"{p50:.1f} | {p99:.1f} | {r:.0f} | {cpu[(batch, conc)]:.1f} | {mean:.2f} | {int(rss0) / 2**20:.1f} | {int(rss1) / 2**20:.1f} |")
for conc in ("32", "64"):
    print(f"batched / one at a time at concurrency {conc}: {rps[('64', conc)] / rps[('1', conc)]:.2f}x requests/s, "
          f"{cpu[('1', conc)] / cpu[('64', conc)]:.2f}x less server CPU per request")
print("server CPU ms/req = user + system CPU time of the server process during the run / requests it answered 200 "
      "(steadier than wall time on a shared machine)")
PYEOF
