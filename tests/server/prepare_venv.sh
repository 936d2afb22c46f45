#!/usr/bin/env bash
# prepare_venv.sh VENV — installs the pinned clients of the clef serve tests
# (tests/server/requirements.txt: btx-skill-jev-judge, clef-evals, clef-router, schemathesis)
# into the virtual environment VENV, once: VENV/.requirements records what is installed and a
# later run with the same requirements does nothing. When PyPI cannot be reached (or python3
# cannot make a venv), VENV/UNAVAILABLE holds the reason and the client tests report SKIPPED
# with it; the script itself exits 0 so that ctest's fixture does not fail the suite.
set -uo pipefail
venv=${1:?usage: prepare_venv.sh VENV}
req="$(cd "$(dirname "$0")" && pwd)/requirements.txt"
python=${PYTHON:-python3}
if [ -f "$venv/.requirements" ] && cmp -s "$req" "$venv/.requirements" && [ ! -f "$venv/UNAVAILABLE" ]; then
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! out=$("$python" -m venv "$venv" 2>&1); then
  mkdir -p "$venv"
  printf 'python3 -m venv failed: %s\n' "$out" | tail -c 2000 > "$venv/UNAVAILABLE"
  cat "$venv/UNAVAILABLE"
  exit 0
fi
if ! out=$("$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req" 2>&1); then
  printf 'pip install -r tests/server/requirements.txt failed (no PyPI?): %s\n' "$out" | tail -c 2000 > "$venv/UNAVAILABLE"
  cat "$venv/UNAVAILABLE"
  exit 0
fi
cp "$req" "$venv/.requirements"
echo "prepare_venv: clients installed in $venv"
