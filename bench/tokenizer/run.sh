#!/usr/bin/env bash
# run.sh — tokenizer bench: libclef vs HF (pinned), single thread, same text, same run, both
# pipelines (tokenizer.h); prints one table.
#   bench/tokenizer/run.sh [BUILD_DIR] [RUNS] [TEXT.jsonl...]
# Defaults: build, 5 runs, and two texts: tests/tokenizer/data/sample.jsonl (parity sample,
# with 5,000-character whitespace runs) and its ordinary part (ordinary_text.py: no
# whitespace run over 64, no control characters). NAMES="qwen-3.5 qwen-3" overrides the
# tokenizers (default qwen-3.5). Rows per text and tokenizer:
#   tokenizers   / clef:file          tokenizer.json as `tokenizers` loads it
#   transformers / clef:transformers  what AutoTokenizer builds (the engine's default); the
#                                     peer is the Rust backend AutoTokenizer built
# "vs HF" = clef MB/s over the HF row of the same pipeline.
# Needs a Release build (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release), the fetched files
# (scripts/tokenizer/fetch_tokenizers.sh) and pip install -r scripts/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}; RUNS=${2:-5}; shift $(( $# < 2 ? $# : 2 )) || true
TEXTS=("$@")
if [ ${#TEXTS[@]} -eq 0 ]; then
  ORD=$(mktemp --suffix=.jsonl); trap 'rm -f "$ORD"' EXIT
  python3 bench/tokenizer/ordinary_text.py tests/tokenizer/data/sample.jsonl "$ORD"
  TEXTS=(tests/tokenizer/data/sample.jsonl "$ORD")
fi
read -r -a NAMES <<< "${NAMES:-qwen-3.5}"
CACHE=$(scripts/tokenizer/fetch_tokenizers.sh)
printf "%-9s %-10s %-18s %8s %11s %10s %10s %7s\n" text tokenizer engine load_s "MB/s(1thr)" tokens bytes "vs HF"
for t in "${TEXTS[@]}"; do
  label=$(basename "$t" .jsonl | cut -c1-9)
  for n in "${NAMES[@]}"; do
    for pipe in file transformers; do
      peer=$([ $pipe = file ] && echo tokenizers || echo transformers)
      hf=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 bench/tokenizer/bench_hf.py "$CACHE/$n" "$t" "$RUNS" $peer 2>/dev/null)
      cl=$("$BUILD/bench/tokenizer/bench_tokenizer" "$CACHE/$n" "$t" "$RUNS" $pipe)
      hf_mbs=$(echo "$hf" | awk '{print $3}')
      for line in "$hf" "$cl"; do
        set -- $line
        eng=$1; [ "$eng" = clef ] && eng="clef:$pipe"
        printf "%-9s %-10s %-18s %8s %11s %10s %10s %6.2fx\n" "$label" "$n" "$eng" "$2" "$3" "$4" "$5" \
          "$(echo "$3 $hf_mbs" | awk '{print $1/$2}')"
      done
    done
  done
done
echo "median of $RUNS runs after 1 warm-up; load = median of 3; $(nproc) cores, 1 used; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
