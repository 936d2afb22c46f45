#!/usr/bin/env python3
"""make_release_dir_corpus.py — seed inputs of fuzz/fuzz_release_dir.c (see its header for the
format): one input per operation on every file name, plus a few combinations (a sharded layout
with an index and complete.json written from scratch, links inside and out, FIFOs behind links).
Writes fuzz/corpus/release_dir/<name>; run from the repository root."""
from __future__ import annotations

import json
import os
import struct
import sys

NAMES = ["config.json", "joint_head_config.json", "model.safetensors", "joint_head.safetensors",
         "tokenizer.json", "tokenizer_config.json", "generation_config.json",
         "model.safetensors.index.json", "complete.json", "model-00001-of-00002.safetensors"]
OPS = ["remove", "truncate", "poke", "replace", "fifo", "dir", "link-out", "link-inside",
       "dangling", "device", "subdir"]


def rec(name: str, op: str, arg: int = 0, payload: bytes = b"") -> bytes:
    assert len(payload) < 256
    return bytes([NAMES.index(name), OPS.index(op)]) + struct.pack("<H", arg) + bytes([len(payload)]) + payload


def main() -> int:
    out = os.path.join("fuzz", "corpus", "release_dir")
    os.makedirs(out, exist_ok=True)
    seeds: dict[str, bytes] = {"intact": b"\x00", "intact-verify-keepgoing": b"\x03",
                               "through-dir-symlink": b"\x04"}
    for name in NAMES:
        for op in OPS:
            payload = b"\x7f\xc0" if op == "poke" else (b"{}" if op == "replace" else b"")
            seeds[f"{op}-{name}"] = b"\x01" + rec(name, op, 1234 if op != "link-inside" else 4, payload)
    index = json.dumps({"metadata": {"total_size": 1}, "weight_map": {"x": "model-00001-of-00002.safetensors"}}).encode()
    seeds["index-from-scratch"] = b"\x00" + rec("model.safetensors.index.json", "replace", 0, index)
    manifest = json.dumps({"files": [{"path": "config.json", "size": 1886, "sha256": "0" * 64}]}).encode()
    seeds["manifest-from-scratch-verify"] = b"\x02" + rec("complete.json", "replace", 0, manifest)
    seeds["fifo-behind-inside-link"] = b"\x00" + rec("generation_config.json", "fifo") + rec("config.json", "link-inside", 6)
    seeds["everything-in-subdir"] = b"\x05" + b"".join(rec(n, "subdir") for n in NAMES[:7])
    seeds["nan-in-weights"] = b"\x01" + rec("model.safetensors", "poke", 40000, b"\xc0\x7f" * 8)
    seeds["bom-config"] = b"\x00" + rec("config.json", "replace", 0, b"\xef\xbb\xbf{}")
    for key, data in sorted(seeds.items()):
        with open(os.path.join(out, key), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
