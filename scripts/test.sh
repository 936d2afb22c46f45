#!/usr/bin/env bash
# test.sh — the whole test suite: installs dependencies, builds with AddressSanitizer +
# UndefinedBehaviorSanitizer, and runs every test with ctest (unit, parity against the
# committed oracle fixtures, damaged-release refusals, fuzz corpus replays). Exit status is
# non-zero on any failure. .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
BUILD=${CLEF_TEST_BUILD:-build-asan}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLEF_SANITIZE=ON -DCLEF_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)"
