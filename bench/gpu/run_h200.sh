#!/usr/bin/env bash
# run_h200.sh — everything the CUDA backend must show, in one run on a GPU machine: op checks
# vs the CPU reference, the whole model vs the CPU reference and transformers' fixtures, then
# the bench (clef CUDA vs transformers bf16 in the same run). Logs go to $LOG_DIR.
#
#   bench/gpu/run_h200.sh BIN_DIR LOG_DIR [steps]
#
# BIN_DIR holds test_cuda_ops, test_cuda_model, test_cuda_decide, test_cuda_graph,
# bench_gpu_forward, bench_gpu_cores, bench_gpu_attention (built with -DCLEF_CUDA=ON)
# and, optionally, lib/ (shared libraries the GPU machine lacks) and whl/ (Python wheels of
# flash-linear-attention and fla-core for the peer). Run from the repository root (the
# model test reads tests/backbone/fixtures); peer_transformers.py is found beside this script.
# steps: any of ops model decide graph cores9 cores27 ncu27 bench9 peer9 bench27 peer27 (default:
# all but ncu27), each optionally with a time limit in seconds, e.g. ops:90 (default 600).
# graph: recorded forwards (CUDA graphs) replayed vs direct ones, byte for byte. cores*: the
# delta rule and attention alone per layer (bench_gpu_cores); ncu27: the same under Nsight
# Compute, one duration per kernel launch. Not in the default list: attn9 / attn27 (attention
# alone at the model's heads, bench_gpu_attention) and peerattn9 / peerattn27 (the same shapes
# on torch's FlashAttention-2, peer_attention.py) and peergdn9 / peergdn27 (the delta rule alone on
# flash-linear-attention's chunk_gated_delta_rule, peer_gdn.py, with its per-kernel GPU times at
# 2,270 tokens; Triton compiles each new shape first: allow ~60 s a model).
set -u -o pipefail
BIN=$1
LOG=$2
shift 2
STEPS=${*:-"ops model decide graph cores9 cores27 bench9 peer9 bench27 peer27"}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/run_steps.sh"   # LOG, cuBLASLt, wheels; run_steps

run_step() {
  case $1 in
    ops) $T "$BIN/test_cuda_ops" 2>&1 | tee "$LOG/ops.log" | tail -n 60 ;;
    model) $T "$BIN/test_cuda_model" 2>&1 | tee "$LOG/model.log" | tail -n 30 ;;
    decide) $T "$BIN/test_cuda_decide" 2>&1 | tee "$LOG/decide.log" | tail -n 30 ;;
    graph) $T "$BIN/test_cuda_graph" 2>&1 | tee "$LOG/graph.log" | tail -n 20 ;;
    cores9) $T "$BIN/bench_gpu_cores" 9b 2>&1 | tee "$LOG/cores_9b.log" ;;
    cores27) $T "$BIN/bench_gpu_cores" 27b 2>&1 | tee "$LOG/cores_27b.log" ;;
    ncu27) $T ncu --clock-control none --metrics gpu__time_duration.sum --launch-count 40 \
             "$BIN/bench_gpu_cores" 27b 1 > "$LOG/ncu_27b.log" 2>&1
         local rc=$?
         grep -E "k_|gpu__time_duration" "$LOG/ncu_27b.log" | paste - - | awk '{print $1, $(NF)}' | head -40
         return $rc ;;
    bench9) $T "$BIN/bench_gpu_forward" 9b 2>&1 | tee "$LOG/bench_9b.log" ;;
    peer9) $T python3 "$HERE/peer_transformers.py" 9b 2>&1 | grep -v Warning | tee "$LOG/peer_9b.log" ;;
    bench27) $T "$BIN/bench_gpu_forward" 27b 2>&1 | tee "$LOG/bench_27b.log" ;;
    peer27) $T python3 "$HERE/peer_transformers.py" 27b 2>&1 | grep -v Warning | tee "$LOG/peer_27b.log" ;;
    attn9) $T "$BIN/bench_gpu_attention" 9b 2>&1 | tee "$LOG/attn_9b.log" ;;
    attn27) $T "$BIN/bench_gpu_attention" 27b 2>&1 | tee "$LOG/attn_27b.log" ;;
    peerattn9) $T python3 "$HERE/peer_attention.py" 9b 2>&1 | grep -v Warning | tee "$LOG/peer_attn_9b.log" ;;
    peerattn27) $T python3 "$HERE/peer_attention.py" 27b 2>&1 | grep -v Warning | tee "$LOG/peer_attn_27b.log" ;;
    peergdn9) $T python3 "$HERE/peer_gdn.py" 9b 10 kernels 2>&1 | grep -v Warning | tee "$LOG/peer_gdn_9b.log" ;;
    peergdn27) $T python3 "$HERE/peer_gdn.py" 27b 10 kernels 2>&1 | grep -v Warning | tee "$LOG/peer_gdn_27b.log" ;;
    *) echo "unknown step $1"; return 2 ;;
  esac
  return "${PIPESTATUS[0]}"
}

run_steps $STEPS
