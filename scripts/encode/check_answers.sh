#!/usr/bin/env bash
# check_answers.sh — answers against the reference systemone_answer() on a large generated
# set (default 20,000 probability vectors), beyond the committed sample the ctest uses.
#   usage: scripts/encode/check_answers.sh [VECTORS] [SEED] [BUILD_DIR]
# Needs: python3 with torch (the reference module imports it) — pip install -r
# scripts/requirements.txt — and network access once to download the pinned unsloth wheel.
set -euo pipefail
cd "$(dirname "$0")/../.."
VECTORS=${1:-20000}
SEED=${2:-17}
BUILD=${3:-build}
cmake --build "$BUILD" --target test_answers -j2 >/dev/null
CASES=$(mktemp /tmp/clef-answers-XXXXXX.jsonl)
trap 'rm -f "$CASES"' EXIT
python3 scripts/encode/gen_answer_cases.py --vectors "$VECTORS" --seed "$SEED" --responses 500 --out "$CASES"
"$BUILD"/tests/encode/test_answers "$CASES"
