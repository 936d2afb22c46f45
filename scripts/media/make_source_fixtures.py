#!/usr/bin/env python3
"""make_source_fixtures.py — oracle fixtures for src/media's base64 decoder and smart_resize.

Writes, under tests/media/fixtures/:
  base64.txt        one case a line: "ok|bad|strict <input hex> <decoded hex or ->", the
                    verdict and bytes of Python's base64.b64decode(text, validate=True) (the
                    strict decoder clef matches), on random encodings and hand-made malformed
                    texts; "strict" marks '=' after a complete group, which CPython 3.11 accepts
                    and clef (like newer CPython) refuses.
  smart_resize.txt  one case a line: "h w factor min_pixels max_pixels out_h out_w" with out
                    "refused refused" when transformers' qwen2_vl smart_resize raises.

Deterministic (seeded); run from the repository root: ${PYTHON:-python3} scripts/media/make_source_fixtures.py
Pinned: transformers (scripts/requirements.txt).
"""
import base64
import binascii
import os
import random

# The PIL backend module: its smart_resize is the same function as the torchvision one and
# it imports without torchvision.
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

OUT = os.path.join("tests", "media", "fixtures")


def b64_case(text: bytes):
    try:
        data = base64.b64decode(text, validate=True)
        body = text.rstrip(b"=")
        if body != text and len(body) % 4 == 0:
            # CPython 3.11's strict mode accepts any '=' after a complete group ("QUJD==");
            # newer CPython refuses it as excess padding, and so does clef: labelled apart.
            return "strict %s -" % text.hex()
        return "ok %s %s" % (text.hex() or "-", data.hex() or "-")
    except (binascii.Error, ValueError):
        return "bad %s -" % (text.hex() or "-")


def base64_cases(rng):
    cases = []
    for n in list(range(0, 20)) + [rng.randrange(20, 3000) for _ in range(40)]:
        data = bytes(rng.randrange(256) for _ in range(n))
        cases.append(base64.b64encode(data))
    malformed = [b"A", b"AB", b"ABC", b"A===", b"====", b"AB=C", b"AB==CD==", b"QUJD\n",
                 b"QU JD", b"QUJD\r\n", b"QUJ-", b"QUJ_", b"QQ", b"QQ=", b"QUI", b"=QUJ",
                 b"QQ==QQ==", b"Q\x00JD", b"QUJ\xff", b"QUJDRA", b"QUJDRA=", b"QR==", b"QUN=",
                 b"QUJD====", b"AAAA\t"]
    cases += malformed
    # Random corruption of valid encodings: a byte replaced by a character from a mixed set.
    for _ in range(60):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        text = bytearray(base64.b64encode(data))
        text[rng.randrange(len(text))] = rng.choice(b"=+/-_ \nA\x80")
        cases.append(bytes(text))
    return [b64_case(t) for t in cases]


def smart_resize_cases(rng):
    sizes = [(1, 1), (1, 200), (1, 201), (200, 1), (201, 1), (0, 5), (5, 0), (1, 100000),
             (16, 16), (31, 33), (32, 32), (48, 48), (47, 49), (1000, 1500), (1500, 1000),
             (4000, 4000), (4096, 4096), (3024, 4032), (1080, 1920), (224, 224), (100, 20000),
             (20000, 100), (7, 1399), (15, 3000), (65535, 1), (512, 512), (336, 336)]
    sizes += [(rng.randrange(1, 5000), rng.randrange(1, 5000)) for _ in range(300)]
    sizes += [(rng.randrange(1, 40), rng.randrange(1, 8000)) for _ in range(60)]
    # (min_pixels, max_pixels): the Qwen3.5 processor's defaults and tighter/looser settings.
    pixel_ranges = [(65536, 16777216), (3136, 12845056), (56 * 56, 28 * 28 * 1280),
                    (1024, 1024 * 1024), (256 * 256, 512 * 512)]
    lines = []
    for h, w in sizes:
        for lo, hi in pixel_ranges:
            try:
                if h <= 0 or w <= 0:
                    raise ValueError("empty")
                oh, ow = smart_resize(h, w, factor=32, min_pixels=lo, max_pixels=hi)
                lines.append("%d %d 32 %d %d %d %d" % (h, w, lo, hi, oh, ow))
            except (ValueError, ZeroDivisionError):
                lines.append("%d %d 32 %d %d refused refused" % (h, w, lo, hi))
    return lines


def main():
    rng = random.Random(14)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "base64.txt"), "w") as f:
        f.write("\n".join(base64_cases(rng)) + "\n")
    with open(os.path.join(OUT, "smart_resize.txt"), "w") as f:
        f.write("\n".join(smart_resize_cases(rng)) + "\n")


if __name__ == "__main__":
    main()
