#!/usr/bin/env bash
# run_h200_vision.sh — the GPU part of the vision work in one run on a GPU machine: the tower
# and records with images on the CUDA backend vs the CPU one (test_cuda_vision), then one
# 1,000 x 1,500 image through the real-shape tower (bench_gpu_vision) and transformers' tower
# in bf16 in the same run (peer_vision.py). Logs go to $LOG_DIR.
#
#   bench/gpu/run_h200_vision.sh BIN_DIR LOG_DIR [steps]
#
# BIN_DIR holds test_cuda_vision and bench_gpu_vision (built with -DCLEF_CUDA=ON) and,
# optionally, lib/ (shared libraries the GPU machine lacks). Run from the repository root (the
# test reads tests/vision/fixtures and demo/clef-demo); peer_vision.py is found beside this
# script. steps: any of test bench27 peer27 bench9 peer9 (default: test bench27 peer27), each
# optionally with a time limit in seconds, e.g. test:120 (default 600).
set -u -o pipefail
BIN=$1
LOG=$2
shift 2
STEPS=${*:-"test bench27 peer27"}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/run_steps.sh"   # LOG, cuBLASLt, wheels; run_steps

run_step() {
  case $1 in
    test) $T "$BIN/test_cuda_vision" 2>&1 | tee "$LOG/vision_test.log" | grep -v "^ok " | tail -n 40 ;;
    bench27) $T "$BIN/bench_gpu_vision" 27b 2>&1 | tee "$LOG/vision_bench_27b.log" ;;
    peer27) $T python3 "$HERE/peer_vision.py" 27b 2>&1 | grep -v Warning | tee "$LOG/vision_peer_27b.log" ;;
    bench9) $T "$BIN/bench_gpu_vision" 9b 2>&1 | tee "$LOG/vision_bench_9b.log" ;;
    peer9) $T python3 "$HERE/peer_vision.py" 9b 2>&1 | grep -v Warning | tee "$LOG/vision_peer_9b.log" ;;
    *) echo "unknown step $1"; return 2 ;;
  esac
  return "${PIPESTATUS[0]}"
}

run_steps $STEPS
