#!/usr/bin/env python3
"""make_fixtures.py — the BF16 source release that `clef quantize --to int8-convrot` is
tested on: tests/quantize/fixtures/int8-src.

tests/release/fixtures/int8 (comfy-kitchen's own INT8 ConvRot release, written by
scripts/fixtures/make_test_fixtures.py) was quantized from a BF16 release that is not
committed (a temporary directory: hidden size 256, so that ConvRot applies). This script
writes that same BF16 release again, with the same writer, config and seed, and checks that
comfy-kitchen quantizes it into exactly the committed int8 fixture (every tensor, byte for
byte) — so the C test can hold `clef quantize` to the producer's bytes. The NF4 and FP8
producers' releases come from tests/release/fixtures/bf16-single, which is committed.

Run from the repository root (pip install -r scripts/requirements.txt):

    python3 scripts/quantize/make_fixtures.py [--out tests/quantize/fixtures]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
import make_quantized  # noqa: E402
import make_release  # noqa: E402
from make_test_fixtures import INT8_HEAD, INT8_TEXT, INT8_VISION  # noqa: E402


def tensors_of(release: Path) -> dict:
    """stored name -> (dtype, shape, bytes) of every tensor of every .safetensors file."""
    import json
    import struct
    out = {}
    for f in sorted(release.glob("*.safetensors")):
        data = f.read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        for name, v in header.items():
            if name == "__metadata__":
                continue
            a, b = v["data_offsets"]
            out[(f.name, name)] = (v["dtype"], v["shape"], data[8 + n + a:8 + n + b])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/quantize/fixtures")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    src = out / "int8-src"
    if src.exists():
        shutil.rmtree(src)
    make_release.write_release(src, text_config=INT8_TEXT, vision_config=INT8_VISION,
                               head_config=INT8_HEAD, seed=1234, randomize_norms=True,
                               complete_json=True)
    with tempfile.TemporaryDirectory() as tmp:
        made = Path(tmp) / "int8"
        make_quantized.write_int8(src, made)
        mine, committed = tensors_of(made), tensors_of(ROOT / "tests/release/fixtures/int8")
        if mine != committed:
            differ = sorted(k for k in set(mine) | set(committed) if mine.get(k) != committed.get(k))
            print(f"comfy-kitchen's release of {src} differs from tests/release/fixtures/int8 "
                  f"in {len(differ)} tensors, e.g. {differ[:3]}: regenerate both "
                  f"(scripts/fixtures/make_test_fixtures.py, then this script)", file=sys.stderr)
            return 1
    size = sum(p.stat().st_size for p in src.iterdir())
    print(f"{src}: {size / 1024:.1f} KiB; comfy-kitchen quantizes it into "
          f"tests/release/fixtures/int8 exactly ({len(mine)} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
