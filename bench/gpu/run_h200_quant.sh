#!/usr/bin/env bash
# run_h200_quant.sh — what the quantized GEMMs of the CUDA backend must show, in one run on a
# GPU machine: the checks against the CPU references and float64 (test_cuda_quant), the
# quantized fixture releases on the GPU vs the CPU and the libraries (test_cuda_quant_model),
# the GEMM bench at the 9B / 27B linear shapes (clef BF16 / FP8 / INT8 / NF4 in one table) with
# PyTorch's GEMMs as the peer in the same call, and the whole backbone with its linears in each
# precision. Logs go to LOG_DIR.
#
#   bench/gpu/run_h200_quant.sh BIN_DIR LOG_DIR [steps]
#
# BIN_DIR holds test_cuda_quant, test_cuda_quant_model, test_cuda_quant_decide and
# bench_gpu_quant (built with -DCLEF_CUDA=ON) and, optionally, lib/ (shared libraries the GPU
# machine lacks), and for the eval step the clef CLI. Run from the repository root (the tests
# read the quantized fixture releases); peer_torch_quant.py is found beside this script.
# steps: any of test model decide gemm9 peer9 gemm27 peer27 wgmma9 wgmma27 nf4gemm27 fwd9 fwd27
# fwd27x fwd9x nf4mem eval tpeer9 tpeer27 (default: all but fwd*x, nf4mem, eval and tpeer*), each
# optionally with a time limit in seconds, e.g. test:120 (default 600). decide: the 200 records of tests/quant/fixtures/decide per precision, GPU vs
# CPU. fwd27 runs 16 of the 27B's 64 layers (identical layers: 4 x its time is the whole
# model's), FP8 on the fp8 tensor cores; fwd27x / fwd9x FP8 alone on its default exact path. nf4mem:
# the NF4 27B's device memory under the 24gb / 16gb profiles at 2,270 tokens. wgmma9/27: the
# INT8 GEMM alone and the INT8 / exact FP8 matmuls, cuBLASLt vs each wgmma kernel (and whether
# their int32 sums agree). nf4gemm27: NF4 alone, each GEMM mode and dequantization kernel beside
# BF16 (CLEF_CUDA_NF4_GEMM=dequant|fused|run15 picks the NF4 mode of every other step). CLEF_BENCH_INT8_WGMMA, CLEF_BENCH_FP8_EXACT_WGMMA and
# CLEF_BENCH_FP8_EXACT in the environment reach the benches.
# eval: `clef eval --reference BF16 --device cuda` on the decide fixture releases. tpeer9 /
# tpeer27: transformers bf16 (+ flash-linear-attention from BIN_DIR/whl) on the forward bench's
# token counts and layers (27B: 16 of 64, as fwd27; peer_transformers.py): the forward table's
# peer in the same call. Give them time: on an H200 tpeer27 took ~100-130 s and tpeer9 ~60-80 s
# for their five shapes (Triton compiles fla's kernels on the first calls; run18_lead_f).
set -u -o pipefail
BIN=$1
LOG=$2
shift 2
STEPS=${*:-"test model decide gemm27 peer27 gemm9 peer9 fwd9 fwd27"}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/run_steps.sh"   # LOG, cuBLASLt, wheels; run_steps

run_step() {
  case $1 in
    test) $T "$BIN/test_cuda_quant" 2>&1 | tee "$LOG/test_quant.log" | tail -n 45 ;;
    model) $T "$BIN/test_cuda_quant_model" 2>&1 | tee "$LOG/test_quant_model.log" | tail -n 30 ;;
    decide) $T "$BIN/test_cuda_quant_decide" 2>&1 | tee "$LOG/test_quant_decide.log" | tail -n 30 ;;
    fwd27x) CLEF_BENCH_FP8_EXACT=1 CLEF_BENCH_PRECISIONS=fp8 $T "$BIN/bench_gpu_quant" forward 27b 16 3 2>&1 |
              tee "$LOG/fwd_27b_fp8exact.log" ;;
    fwd9x) CLEF_BENCH_FP8_EXACT=1 CLEF_BENCH_PRECISIONS=fp8 $T "$BIN/bench_gpu_quant" forward 9b 32 3 2>&1 |
              tee "$LOG/fwd_9b_fp8exact.log" ;;
    nf4mem) $T "$BIN/bench_gpu_quant" nf4mem 27b 2270 3 2>&1 | tee "$LOG/nf4mem_27b.log" ;;
    eval) D=tests/quant/fixtures/decide
          $T "$BIN/clef" eval --reference "$D/bf16" --device cuda "$D/nf4" "$D/fp8" "$D/int8" 2>&1 |
            tee "$LOG/eval_cuda.log" ;;
    gemm9) $T "$BIN/bench_gpu_quant" gemm 9b 2>&1 | tee "$LOG/gemm_9b.log" ;;
    gemm27) $T "$BIN/bench_gpu_quant" gemm 27b 2>&1 | tee "$LOG/gemm_27b.log" ;;
    wgmma9) $T "$BIN/bench_gpu_quant" wgmma 9b 2>&1 | tee "$LOG/wgmma_9b.log" ;;
    wgmma27) $T "$BIN/bench_gpu_quant" wgmma 27b 2>&1 | tee "$LOG/wgmma_27b.log" ;;
    nf4gemm27) $T "$BIN/bench_gpu_quant" nf4gemm 27b 2>&1 | tee "$LOG/nf4gemm_27b.log" ;;
    peer9) $T python3 "$HERE/peer_torch_quant.py" 9b 2>&1 | grep -v Warning | tee "$LOG/peer_9b.log" ;;
    peer27) $T python3 "$HERE/peer_torch_quant.py" 27b 2>&1 | grep -v Warning | tee "$LOG/peer_27b.log" ;;
    fwd9) $T "$BIN/bench_gpu_quant" forward 9b 32 3 2>&1 | tee "$LOG/fwd_9b.log" ;;
    fwd27) $T "$BIN/bench_gpu_quant" forward 27b 16 3 2>&1 | tee "$LOG/fwd_27b.log" ;;
    tpeer9) $T python3 "$HERE/peer_transformers.py" 9b 32 3 2>&1 | grep -v Warning | tee "$LOG/tpeer_9b.log" ;;
    tpeer27) $T python3 "$HERE/peer_transformers.py" 27b 16 3 2>&1 | grep -v Warning | tee "$LOG/tpeer_27b.log" ;;
    *) echo "unknown step $1"; return 2 ;;
  esac
  return "${PIPESTATUS[0]}"
}

run_steps $STEPS
