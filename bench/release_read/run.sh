#!/usr/bin/env bash
# run.sh — build (Release) and run the release-read bench: a multi-GB synthetic release read
# from the page cache by `cat` and by clef, in the same run, one table. Arguments go to the
# bench (e.g. --gb 2 --runs 7 --threads 2). Needs ~1.2x --gb free disk in $TMPDIR (or /tmp)
# and ~3.5x --gb of RAM (page cache + two arenas); the release is deleted at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target bench_release_read >/dev/null
exec ./build/bench/release_read/bench_release_read "$@"
