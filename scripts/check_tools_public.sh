#!/bin/sh
# check_tools_public.sh — the `clef` tool is built on the public headers only: every
# #include "..." in tools/clef/ names include/clef.h, include/clef_release.h,
# include/clef_quantize.h, include/clef_server.h (the server library of `clef serve`) or a header of tools/clef itself,
# never an internal header of src/. ctest runs it (tools_public_headers).
cd "$(dirname "$0")/.." || exit 2
bad=$(grep -n '#include "' tools/clef/*.c tools/clef/*.h |
      grep -v -E '#include "(clef|clef_release|clef_quantize|clef_server)\.h"' |
      while IFS= read -r line; do
          name=$(printf '%s\n' "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
          [ -f "tools/clef/$name" ] || printf '%s\n' "$line"
      done)
if [ -n "$bad" ]; then
    printf 'tools/clef includes internal headers:\n%s\n' "$bad"
    exit 1
fi
echo "tools/clef: public headers only"
