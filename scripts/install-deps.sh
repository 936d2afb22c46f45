#!/usr/bin/env bash
# install-deps.sh — installs what building and testing clef needs on Debian 12, pinned where
# the distribution does not already pin it. Safe to run again. Needs root (or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  build-essential cmake pkg-config git python3 python3-venv
  libpcre2-dev      # tokenizer pre-tokenizer regex (PCRE2 with JIT)
  libssl-dev        # SHA-256 (libcrypto) for complete.json --verify
  clang             # libFuzzer builds (fuzz/), optional for the main build
  libmicrohttpd-dev # the HTTP server of `clef serve` (src/server)
  wrk               # bench/serve: the loopback load test of `clef serve`
  libpng-dev libjpeg62-turbo-dev libwebp-dev libexif-dev # image decoding (src/media/codec_*)
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
