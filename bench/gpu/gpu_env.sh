# gpu_env.sh — sourced by run_steps.sh (so by every run_h200*.sh; not run on its own): finds
# cuBLASLt on the GPU machine (the toolkit's, or the one PyTorch's wheels carry), puts
# $BIN/lib (shared libraries that machine lacks) and it on LD_LIBRARY_PATH, and records the
# GPU, its clocks and driver in $LOG/gpu.txt. Needs BIN and LOG set.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcublasLt.so.13" ] && CUBLAS_DIR=$d && break
done
if [ -z "${CUBLAS_DIR:-}" ]; then
  f=$(find / -name 'libcublasLt.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)
  CUBLAS_DIR=$(dirname "$f")
fi
export LD_LIBRARY_PATH="$BIN/lib:${CUBLAS_DIR}:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,driver_version --format=csv | tee "$LOG/gpu.txt"
