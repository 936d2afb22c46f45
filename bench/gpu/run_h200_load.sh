#!/usr/bin/env bash
# run_h200_load.sh — the load bench in one run on a GPU machine: write a release at the
# Clef-flash 9B shapes (make_load_release.py, ~19 GB of BF16, on the machine's disk, so it is
# in the page cache), load it with clef (bench_gpu_load: page cache to a ready model, GB/s,
# peak host RSS, device memory), then the peers on the same files (peer_load.py: safetensors
# load_file and transformers from_pretrained onto the GPU), and the forward bench's memory
# rows (bench_gpu_forward, one timed run per case: resident and peak device memory of the
# 27B / 9B at the planned 8,192 / 12,016 tokens). Logs go to LOG_DIR.
#
#   bench/gpu/run_h200_load.sh BIN_DIR LOG_DIR RELEASE_DIR [steps]
#
# BIN_DIR holds bench_gpu_load and bench_gpu_forward (built with -DCLEF_CUDA=ON) and,
# optionally, lib/ (shared libraries the GPU machine lacks) and test_cuda_model /
# test_cuda_decide for the `model` / `decide` steps. Run from the repository root (the
# tokenizer comes from demo/clef-demo; the model test reads tests/backbone/fixtures).
# steps: any of write load peer fwd27 fwd9 model decide (default: write load peer fwd27 fwd9),
# each optionally with a time limit in seconds, e.g. load:60 (default 600).
set -u -o pipefail
BIN=$1
LOG=$2
REL=$3
shift 3
STEPS=${*:-"write load peer fwd27 fwd9"}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/run_steps.sh"   # LOG, cuBLASLt, wheels; run_steps

run_step() {
  case $1 in
    write) $T python3 "$HERE/make_load_release.py" "$REL" --tokenizer-dir demo/clef-demo 2>&1 | tee "$LOG/write.log"
           df -h "$REL" | tail -1; free -g | head -2 ;;
    load) $T "$BIN/bench_gpu_load" "$REL" 3 cuda 2>&1 | tee "$LOG/load.log" ;;
    peer) { echo "| peer | s | GB/s (placed) | GB/s (shard files) | host RSS before GiB | peak host RSS GiB |" \
                 "peak - before GiB | torch device peak GiB | placed GiB |"
            echo "|---|---|---|---|---|---|---|---|---|"
            for p in safetensors transformers; do
              $T python3 "$HERE/peer_load.py" "$REL" $p cuda 2>&1 | grep -v -i "warn"
            done; } | tee "$LOG/peer.log" ;;
    fwd27) $T "$BIN/bench_gpu_forward" 27b 64 1 2>&1 | tee "$LOG/fwd_27b.log" ;;
    fwd9) $T "$BIN/bench_gpu_forward" 9b 32 1 2>&1 | tee "$LOG/fwd_9b.log" ;;
    model) $T "$BIN/test_cuda_model" 2>&1 | tee "$LOG/model.log" | tail -n 20 ;;
    decide) $T "$BIN/test_cuda_decide" 2>&1 | tee "$LOG/decide.log" | tail -n 20 ;;
    *) echo "unknown step $1"; return 2 ;;
  esac
  return "${PIPESTATUS[0]}"
}

run_steps $STEPS
