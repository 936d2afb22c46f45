#!/bin/sh
# run_parity.sh — ctest entry for the parity test: fetches the pinned tokenizer files once
# (scripts/tokenizer/fetch_tokenizers.sh; offline afterwards) and runs the test binary on them.
set -e
cache=$(scripts/tokenizer/fetch_tokenizers.sh)
exec "$1" "$cache"
