#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR [EXTRA_FLAGS] — installs the build into a temporary
# prefix, then builds tests/install/consumer outside the tree four ways (pkg-config shared and
# static, find_package(clef) shared and static) and requires each program's answer on the demo
# release to equal the reference answer (tests/model/fixtures/demo_answer.json, written by the
# reference systemone() through scripts/demo/make_demo.py), compared as JSON values by Python.
# It also requires both libraries to export exactly the CLEF_API functions of include/.
# EXTRA_FLAGS: compiler/linker flags the consumer needs to match the build (the sanitizers).
set -euo pipefail
build=$1 src=$2 extra=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name 'libclef.so' -printf '%h\n' | head -n 1)
[ -n "$libdir" ] || { echo "FAIL: no libclef.so installed under the prefix"; exit 1; }
[ -f "$prefix/include/clef.h" ] || { echo "FAIL: clef.h not installed"; exit 1; }
export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir
cd "$src"
expected=tests/model/fixtures/demo_answer.json
check() { # name, binary
  local out=$work/$1.json
  "$2" demo/clef-demo demo/record.json >"$out"
  python3 - "$out" "$expected" "$1" <<'PY'
import json, sys
got, want, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
if got != want:
    print(f"FAIL: {name}: answer differs from the reference\n got  {got}\n want {want}")
    sys.exit(1)
print(f"ok: {name}: answer equals the reference ({len(got['answers'])} answers)")
PY
}
# shellcheck disable=SC2046,SC2086
cc $extra tests/install/consumer/consumer.c -o "$work/pc_shared" $(pkg-config --cflags --libs clef)
check pkg-config-shared "$work/pc_shared"
# shellcheck disable=SC2046,SC2086
cc $extra tests/install/consumer/consumer.c -o "$work/pc_static" \
   $(pkg-config --cflags clef) "$libdir/libclef.a" $(pkg-config --static --libs-only-l --libs-only-other clef | sed 's/-lclef//')
check pkg-config-static "$work/pc_static"
cmake -S tests/install/consumer -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
cmake --build "$work/cm" -j2 >/dev/null
check find_package-shared "$work/cm/consumer_shared"
check find_package-static "$work/cm/consumer_static"
# Exports: exactly the functions include/ declares CLEF_API, from the shared library and as
# the only global symbols of the installed static archive.
grep -ohE 'CLEF_API [^(]*\(' "$src"/include/*.h | grep -oE 'clef_[a-z0-9_]+\($' | tr -d '(' | sort >"$work/api"
nm -D --defined-only "$libdir/libclef.so" | awk '$2 ~ /^[A-Za-z]$/ && $2 != "U" {print $3}' | sort >"$work/so_syms"
nm -g --defined-only "$libdir/libclef.a" | awk 'NF == 3 {print $3}' | sort >"$work/a_syms"
for kind in so a; do
  if ! diff -u "$work/api" "$work/${kind}_syms" >"$work/${kind}_diff"; then
    echo "FAIL: libclef.$kind exports differ from the CLEF_API declarations (- declared, + exported):"
    grep -E '^[-+][a-z_]' "$work/${kind}_diff" | head -n 40
    exit 1
  fi
done
echo "ok: libclef.so and libclef.a export exactly the $(wc -l <"$work/api") CLEF_API functions"
echo "install: 4/4 consumers built outside the tree and answered like the reference"
