#!/usr/bin/env bash
# check_encode_qwen.sh — the encoder identity check with the Clef backbone's own tokenizer
# (Qwen3.5's tokenizer.json, fetched by scripts/tokenizer/fetch_tokenizers.sh): regenerates
# the 1,087 records' expectations with the reference encode_record + Hugging Face on that
# tokenizer, then runs test_encode_bpe (the C tokenizer) on them.
#   usage: scripts/encode/check_encode_qwen.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
CACHE=$(scripts/tokenizer/fetch_tokenizers.sh | tail -1)
TOKENIZER="$CACHE/qwen-3.5/tokenizer.json"
cmake --build "$BUILD" --target test_encode_bpe -j2 >/dev/null
RECORDS=$(mktemp /tmp/clef-records-qwen-XXXXXX.jsonl)
trap 'rm -f "$RECORDS"' EXIT
python3 scripts/encode/gen_encode_fixtures.py --count 1000 --tokenizer "$TOKENIZER" --out "$RECORDS"
"$BUILD"/tests/encode/test_encode_bpe "$RECORDS" "$TOKENIZER"
