# run_steps.sh — sourced by the run_h200*.sh scripts (not run on its own): what they share.
# Sourcing it, with BIN and LOG set, prepares the GPU machine for a run: creates LOG, puts
# cuBLASLt and $BIN/lib on LD_LIBRARY_PATH and records the GPU in $LOG/gpu.txt (gpu_env.sh),
# installs the Python wheels of $BIN/whl (the peers' flash-linear-attention) into /tmp/site
# when that folder exists, and unbuffers Python's output.
#
# run_steps STEP...: runs each step in turn; a step is NAME or NAME:LIMIT (seconds, default
# 600). For each it sets T="timeout LIMIT", prints a "=== NAME" header and calls run_step NAME,
# which the sourcing script defines: a `case` over its step names whose branches run their
# program as `$T program ... | tee LOG | ...`, followed by `return "${PIPESTATUS[0]}"` so the
# step's status is the program's, not tee's or a filter's. A step that fails (or times out:
# 124) is reported and the run goes on; run_steps returns 1 if any step failed, else 0.
mkdir -p "$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_env.sh"
if [ -d "$BIN/whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$BIN"/whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1

run_steps() {
  local status=0 step name limit rc
  for step in "$@"; do
    name=${step%%:*}
    limit=600
    [ "$name" != "$step" ] && limit=${step#*:}
    T="timeout $limit"
    echo "=== $name, limit ${limit}s ($(date -u +%T))"
    run_step "$name"
    rc=$?
    [ "$rc" -ne 0 ] && echo "step $name exited $rc" && status=1
  done
  return $status
}
