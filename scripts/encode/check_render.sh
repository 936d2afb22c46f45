#!/usr/bin/env bash
# check_render.sh — render() against Python json.dumps on a large generated set (default
# 100,000 JSON values), beyond the committed sample the ctest uses.
#   usage: scripts/encode/check_render.sh [COUNT] [SEED] [BUILD_DIR]
# Needs: python3 with nothing beyond the standard library; a configured build (default build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNT=${1:-100000}
SEED=${2:-7}
BUILD=${3:-build}
cmake --build "$BUILD" --target test_json_render -j2 >/dev/null
CASES=$(mktemp /tmp/clef-render-XXXXXX.txt)
trap 'rm -f "$CASES"' EXIT
python3 scripts/encode/gen_render_cases.py --count "$COUNT" --seed "$SEED" --out "$CASES"
"$BUILD"/tests/json/test_json_render "$CASES"
