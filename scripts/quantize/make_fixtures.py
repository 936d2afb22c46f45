#!/usr/bin/env python3
"""make_fixtures.py — the oracle fixtures of tests/quantize/:

  int8-src/       the BF16 source release that `clef quantize --to int8-convrot` is tested on
  nf4_large.json  bitsandbytes' NF4 quantizer (quantize_4bit, double quant, CPU) on weights
                  large enough for torch to split the absmax mean across threads (>= 32,768
                  blocks), and torch.sum on 1 to 100,000 values with 1 to 8 threads: hashes of
                  the codes and tables, the offsets' and sums' bits (the inputs are made by a
                  32-bit LCG that the C test runs too, so no weights are committed)

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


def lcg_floats(n: int, seed: int):
    """n floats in [-0.05, 0.05): s = s * 1664525 + 1013904223 (mod 2^32), f = ((s >> 8) *
    2^-24 - 0.5) * 0.1 in float32 (tests/quantize/test_quantize_nf4_large.c makes the same)."""
    import numpy as np
    s = np.empty(n, dtype=np.uint64)
    state = seed & 0xFFFFFFFF
    for i in range(n):  # plain loop: exact 32-bit arithmetic
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        s[i] = state
    f = (s >> 8).astype(np.float32) * np.float32(2.0 ** -24)
    return (f - np.float32(0.5)) * np.float32(0.1)


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def write_nf4_large(path: Path) -> None:
    import json
    import numpy as np
    import torch
    import bitsandbytes.functional as F
    cases = []
    for rows, cols, seed in ((2048, 1536, 1), (1000, 2999, 2), (77, 129, 3)):
        w = torch.from_numpy(lcg_floats(rows * cols, seed).reshape(rows, cols)).to(torch.bfloat16)
        for threads in (1, 4):
            torch.set_num_threads(threads)
            q, st = F.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type="nf4")
            cases.append(dict(rows=rows, cols=cols, seed=seed, threads=threads,
                              packed=fnv1a64(q.numpy().tobytes()),
                              absmax=fnv1a64(st.absmax.numpy().tobytes()),
                              nested_absmax=fnv1a64(st.state2.absmax.numpy().tobytes()),
                              offset_bits=int(np.float32(st.offset.item()).view(np.uint32))))
    sums = []
    for n in list(range(1, 70)) + [127, 1000, 4097, 32767, 32768, 40000, 100000]:
        x = torch.from_numpy(lcg_floats(n, 1000 + n) + np.float32(0.05))
        for threads in (1, 2, 3, 8):
            torch.set_num_threads(threads)
            sums.append(dict(n=n, seed=1000 + n, threads=threads,
                             sum_bits=int(np.float32(x.sum().item()).view(np.uint32))))
    doc = dict(torch=torch.__version__, bitsandbytes=__import__("bitsandbytes").__version__,
               torch_cpu_capability=torch.backends.cpu.get_cpu_capability(), lanes=8,
               nf4=cases, sums=sums)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{path}: {len(cases)} NF4 weights, {len(sums)} sums")


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
    write_nf4_large(out / "nf4_large.json")
    size = sum(p.stat().st_size for p in src.iterdir())
    print(f"{src}: {size / 1024:.1f} KiB; comfy-kitchen quantizes it into "
          f"tests/release/fixtures/int8 exactly ({len(mine)} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
