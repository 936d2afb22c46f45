#!/usr/bin/env bash
# quickstart.sh — the README's first command: installs what is needed, builds clef
# (Release), and runs the main job on the small demo release shipped in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "== clef inspect tests/release/fixtures/bf16-single (a tiny release made by scripts/fixtures)"
./build/clef inspect tests/release/fixtures/bf16-single
