#!/usr/bin/env python3
"""library_spread.py — how far the library-run model of tests/quant/fixtures/decide is from
ITSELF when only the fp32 rounding of its non-quantized arithmetic changes: the same releases,
records, libraries and code (make_decide_fixtures.py's oracle), run again in a child process
under a perturbation, compared with the committed oracle (<precision>_logits.json) the way
test_quant_decide compares the engine (relative L2 of each record's head logits, decisions).

Perturbations (--perturb):
  none   the same run again (checks the committed oracle is reproduced bit for bit here)
  avx2   torch's kernels and MKL / oneDNN capped at AVX2 (ATEN_CPU_CAPABILITY=avx2,
         MKL_ENABLE_INSTRUCTIONS=AVX2, ONEDNN_MAX_CPU_ISA=AVX2): the same stack as on a machine
         without AVX-512
  threads1  torch.set_num_threads(1) instead of 2
  ulp    the input embeddings moved by one fp32 ulp in a seeded random half of their elements
         (a last-bit difference at the very start, as a different summation order upstream
         would make)

Usage: python3 scripts/quant/library_spread.py fp8 --perturb ulp [--records N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECIDE = ROOT / "tests" / "quant" / "fixtures" / "decide"
TOLERANCE = 1e-4
ISA_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
           "ONEDNN_MAX_CPU_ISA": "AVX2"}


def child(precision: str, out: Path, n_records: int, perturb: str) -> None:
    """the oracle of make_decide_fixtures.py on the first n_records records, into out/"""
    import torch
    sys.path.insert(0, str(ROOT / "scripts" / "quant"))
    import make_decide_fixtures as mdf
    torch.set_num_threads(1 if perturb == "threads1" else 2)  # the oracle's run: 2
    if perturb == "ulp":
        gen = torch.Generator().manual_seed(2026)

        def nudge(module, args, output):
            up = torch.nextafter(output, torch.full_like(output, float("inf")))
            mask = torch.rand(output.shape, generator=gen) < 0.5
            return torch.where(mask, up, output)
        real_loader = mdf.LOADERS[precision]

        def loader(d):
            model, n = real_loader(d)
            model.model.language_model.embed_tokens.register_forward_hook(nudge)
            return model, n
        mdf.LOADERS[precision] = loader
    recs = json.loads((DECIDE / "records.json").read_text())["records"][:n_records]
    (out / precision).symlink_to(DECIDE / precision)
    mod = mdf.clef_oracle.load_reference()
    mdf.run_oracle(out, precision, recs, mod)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("precision", choices=("bf16", "nf4", "fp8", "int8"))
    ap.add_argument("--perturb", choices=("none", "avx2", "threads1", "ulp"), default="ulp")
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.precision, Path(a.child), a.records, a.perturb)
        return 0
    want = json.loads((DECIDE / f"{a.precision}_logits.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, **(ISA_ENV if a.perturb == "avx2" else {}))
        subprocess.run([sys.executable, __file__, a.precision, "--perturb", a.perturb,
                        "--records", str(a.records), "--child", tmp], env=env, check=True)
        got = json.loads((Path(tmp) / f"{a.precision}_logits.json").read_text())
    over, worst, total, same, questions, identical = 0, 0.0, 0.0, 0, 0, 0
    n = len(got["logits"])
    for r in range(n):
        num = den = 0.0
        for q, (lg, lw) in enumerate(zip(got["logits"][r], want["logits"][r])):
            num += sum((x - y) ** 2 for x, y in zip(lg, lw))
            den += sum(y * y for y in lw)
            questions += 1
            same += got["decisions"][r][q] == want["decisions"][r][q]
        rel = (num / den) ** 0.5 if den else 0.0
        identical += num == 0
        over += rel > TOLERANCE
        worst = max(worst, rel)
        total += rel
    print(f"{a.precision} library vs its committed oracle, perturbation {a.perturb}: {n} records, "
          f"{identical} bit-identical, {over} over {TOLERANCE:.0e}; logits relative L2 worst "
          f"{worst:.3e}, mean {total / n:.3e}; decisions identical {same}/{questions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
