#!/usr/bin/env bash
# test.sh — the whole test suite: installs dependencies, then builds and runs every test with
# ctest (unit, parity against the committed oracle fixtures, damaged-release refusals, fuzz
# corpus replays) in two configurations:
#   1. native: -march=native, AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/);
#   2. portable: CLEF_NATIVE=OFF, plain x86-64 code whose CPU kernels pick AVX-512 / AVX2 /
#      C at run time (build-portable/), Release without sanitizers and without the CUDA
#      backend (the first configuration compiles it where nvcc exists) to stay fast. Its
#      test_backbone_cpu_ops runs every instruction-set level the machine has and checks
#      that they give the same bits. Its ctest then runs a second time with the CPU
#      dispatch capped at AVX2 (CLEF_CPU_ISA=avx2): every parity test on the AVX2 kernels,
#      as on a machine without AVX-512, whatever machine CI runs on (on one without
#      AVX-512 the cap changes nothing and the run repeats the first).
# Exit status is non-zero on any failure. .ci/run runs exactly this.
# CLEF_TEST_BUILD / CLEF_TEST_BUILD_PORTABLE name the build directories;
# CLEF_TEST_PORTABLE=0 skips the second configuration (a quicker local run);
# CLEF_TEST_AVX2=0 skips its AVX2-capped ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# run_suite DIR CMAKE_ARGS...: configure, build everything but the benches, run ctest.
run_suite() {
    local build=$1
    shift
    echo "== test.sh: $build ($*)"
    cmake -S . -B "$build" -DCLEF_BUILD_BENCH=OFF "$@" >/dev/null
    cmake --build "$build" -j"$(nproc)"
    ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
}

run_suite "${CLEF_TEST_BUILD:-build-asan}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLEF_SANITIZE=ON
if [ "${CLEF_TEST_PORTABLE:-1}" != 0 ]; then
    portable=${CLEF_TEST_BUILD_PORTABLE:-build-portable}
    run_suite "$portable" -DCMAKE_BUILD_TYPE=Release \
        -DCLEF_NATIVE=OFF -DCLEF_SANITIZE=OFF -DCLEF_CUDA=OFF
    if [ "${CLEF_TEST_AVX2:-1}" != 0 ]; then
        echo "== test.sh: $portable again with CLEF_CPU_ISA=avx2 (the CPU kernels capped at AVX2)"
        CLEF_CPU_ISA=avx2 ctest --test-dir "$portable" --output-on-failure -j"$(nproc)"
    fi
fi
