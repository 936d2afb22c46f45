#!/usr/bin/env bash
# quickstart.sh — the README's first command: installs what is needed, builds clef
# (Release), and runs the main job on the small demo release shipped in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "== ./build/clef run --model demo/clef-demo --record demo/record.json --table"
echo "   (the demo release has random weights: its answers are meaningless)"
./build/clef run --model demo/clef-demo --record demo/record.json --table
echo
echo "== the same answer as the SystemOne response body"
./build/clef run --model demo/clef-demo --record demo/record.json
