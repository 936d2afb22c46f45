#!/usr/bin/env bash
# check_encode_qwen.sh — the encoder identity check with the Clef backbone's own tokenizer
# (Qwen3.5's tokenizer.json + tokenizer_config.json, fetched by
# scripts/tokenizer/fetch_tokenizers.sh), loaded on both sides the way a release is loaded:
# the reference's systemone() tokenizes with processor.tokenizer, i.e.
# AutoTokenizer.from_pretrained(dir) (transformers builds the Qwen2Tokenizer pipeline named by
# tokenizer_config.json), and the engine with tok_load_dir (TOK_PIPELINE_TRANSFORMERS).
# Regenerates the records' expectations (generated, combining-mark and real records) with the
# reference encode_record on AutoTokenizer, then runs test_encode_bpe on the directory.
#   usage: scripts/encode/check_encode_qwen.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
CACHE=$(scripts/tokenizer/fetch_tokenizers.sh | tail -1)
TOKENIZER_DIR="$CACHE/qwen-3.5"
cmake --build "$BUILD" --target test_encode_bpe -j2 >/dev/null
RECORDS=$(mktemp /tmp/clef-records-qwen-XXXXXX.jsonl)
trap 'rm -f "$RECORDS"' EXIT
python3 scripts/encode/gen_encode_fixtures.py --count 1000 --tokenizer "$TOKENIZER_DIR" --out "$RECORDS"
"$BUILD"/tests/encode/test_encode_bpe "$RECORDS" "$TOKENIZER_DIR"
