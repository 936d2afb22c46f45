#!/usr/bin/env python3
"""measure_memory.py — peak memory of `clef quantize` on a mid-size BF16 release, to show
that it streams: the resident set stays at a few tens of MiB whatever the model's size.

Writes (once, into --work) a BF16 release with the real writer (scripts/fixtures/
make_release.py: hidden 1024, 8 layers, vocabulary 65,536; about 0.5 GB of weights), then runs
`clef quantize --to P` for each precision and prints, per precision, the source and written
bytes, the peak resident set of the clef process (getrusage of the child) and its CPU time.

    python3 scripts/quantize/measure_memory.py --clef build-portable/clef [--work DIR]

Requirements: scripts/requirements.txt. Measure with a Release build (an ASan build adds
its shadow memory).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
import make_release  # noqa: E402

TEXT = dict(vocab_size=65536, hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
            num_attention_heads=8, num_key_value_heads=2, head_dim=128, linear_num_key_heads=8,
            linear_num_value_heads=16, linear_key_head_dim=64, linear_value_head_dim=64,
            rope_parameters=dict(rope_type="default", rope_theta=10000000.0,
                                 partial_rotary_factor=0.25, mrope_section=[8, 4, 4],
                                 mrope_interleaved=True))
VISION = dict(out_hidden_size=1024)
HEAD = dict(hidden_size=1024, width=64, heads=2, feedforward=128)


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.iterdir() if p.is_file())


def run_measured(cmd: list[str]) -> tuple[int, float]:
    """Run cmd as a child of a fresh process, so that RUSAGE_CHILDREN is its alone."""
    code = ("import resource, subprocess, sys\n"
            "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
            "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(r.ru_maxrss, r.ru_utime + r.ru_stime)\n")
    out = subprocess.run([sys.executable, "-c", code, *cmd], check=True, capture_output=True,
                         text=True).stdout.split()
    return int(out[0]) * 1024, float(out[1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clef", required=True)
    ap.add_argument("--work", default=None, help="keep the source release here")
    a = ap.parse_args()
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="clef-quantize-mem-"))
    src = work / "bf16"
    if not (src / "config.json").exists():
        make_release.write_release(src, text_config=TEXT, vision_config=VISION, head_config=HEAD,
                                   seed=3)
    print(f"source {src}: {dir_bytes(src) / 1e6:.1f} MB")
    print(f"{'precision':13s} {'written MB':>10s} {'peak RSS MiB':>12s} {'CPU s':>7s}")
    for p in ("nf4", "fp8", "int8-convrot"):
        dst = work / p
        if dst.exists():
            shutil.rmtree(dst)
        rss, cpu = run_measured([a.clef, "quantize", "--to", p, str(src), str(dst)])
        print(f"{p:13s} {dir_bytes(dst) / 1e6:10.1f} {rss / 2**20:12.1f} {cpu:7.1f}")
        shutil.rmtree(dst)
    if not a.work:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
