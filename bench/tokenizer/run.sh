#!/usr/bin/env bash
# run.sh — tokenizer bench: libclef vs HF `tokenizers` (pinned), single thread, same text, same
# run; prints one table. Needs a Release build (cmake -S . -B build) and the fetched files.
#   bench/tokenizer/run.sh [BUILD_DIR] [TEXT.jsonl] [RUNS] [NAMES...]
# Defaults: build, tests/tokenizer/data/sample.jsonl, 5 runs, qwen-3.5.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}; TEXT=${2:-tests/tokenizer/data/sample.jsonl}; RUNS=${3:-5}; shift $(( $# < 3 ? $# : 3 )) || true
NAMES=("$@"); [ ${#NAMES[@]} -gt 0 ] || NAMES=(qwen-3.5)
CACHE=$(scripts/tokenizer/fetch_tokenizers.sh)
printf "%-12s %-12s %10s %12s %12s %10s %8s\n" tokenizer engine load_s "MB/s(1 thr)" tokens bytes "vs HF"
for n in "${NAMES[@]}"; do
  hf=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 bench/tokenizer/bench_hf.py "$CACHE/$n" "$TEXT" "$RUNS")
  cl=$("$BUILD/bench/tokenizer/bench_tokenizer" "$CACHE/$n" "$TEXT" "$RUNS")
  hf_mbs=$(echo "$hf" | awk '{print $3}')
  for line in "$hf" "$cl"; do
    set -- $line
    printf "%-12s %-12s %10s %12s %12s %10s %7.2fx\n" "$n" "$1" "$2" "$3" "$4" "$5" "$(echo "$3 $hf_mbs" | awk '{print $1/$2}')"
  done
done
echo "median of $RUNS runs after 1 warm-up; load = median of 3; text: $TEXT; $(nproc) cores, 1 used"
