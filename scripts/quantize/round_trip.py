#!/usr/bin/env python3
"""round_trip.py — releases written by `clef quantize` loaded by the libraries themselves,
and compared with what the libraries make of the same BF16 release.

For each precision, from a BF16 release SRC:
  ours      `clef quantize --to P SRC ours/P`
  theirs    the library's own producer on SRC (scripts/fixtures/make_quantized.py: bitsandbytes
            through transformers, compressed-tensors FP8_DYNAMIC, comfy-kitchen ConvRot)
then
  nf4, fp8  both loaded with transformers `Qwen3_5ForConditionalGeneration.from_pretrained`
            (the quantization_config in config.json selects bitsandbytes / compressed-tensors);
            the text model's last hidden states and lm_head logits on the same token ids must
            be equal (torch.equal) — and every stored tensor byte-identical;
  int8      every comfy_quant weight of both loaded by comfy-kitchen
            (TensorWiseINT8Layout.dequantize, eager int8_linear on the same inputs): equal.
Prints one line per precision; exit status 1 on any difference.

    python3 scripts/quantize/round_trip.py --clef build/clef [--src DIR] [--int8-src DIR]

Defaults: tests/release/fixtures/bf16-single for nf4 / fp8, tests/quantize/fixtures/int8-src
for int8 (the tiny release has no 256-wide input). Requirements: scripts/requirements.txt.
"""
from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
import make_quantized  # noqa: E402


def stored_tensors(release: Path) -> dict:
    out = {}
    for f in sorted(release.glob("*.safetensors")):
        data = f.read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        for name, v in json.loads(data[8:8 + n]).items():
            if name != "__metadata__":
                a, b = v["data_offsets"]
                out[name] = (v["dtype"], v["shape"], data[8 + n + a:8 + n + b])
    return out


def run_transformers(release: Path, ids):
    import torch
    from transformers import Qwen3_5ForConditionalGeneration
    kwargs = {}
    qc = json.loads((release / "config.json").read_text()).get("quantization_config", {})
    if qc.get("quant_method") == "compressed-tensors":  # fp8 matmuls do not run on CPU:
        from transformers import CompressedTensorsConfig  # decompress, QDQ forward
        kwargs["quantization_config"] = CompressedTensorsConfig(run_compressed=False)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(release, dtype=torch.bfloat16,
                                                            **kwargs).eval()
    try:  # bitsandbytes' AVX-512 CPU repacking needs 32-row weights: use its generic path
        import bitsandbytes as bnb
        from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse
        for mod in model.modules():
            if isinstance(mod, bnb.nn.Linear4bit):
                mod.support_avx512bf16_for_cpu = False
                qs = mod.weight.quant_state
                if getattr(qs, "packing_format_for_cpu", False):
                    mod.weight.data, mod.weight.quant_state = \
                        _convert_weight_packed_for_cpu_inverse(mod.weight.data, qs)
    except ImportError:
        pass
    with torch.no_grad():
        out = model.model.language_model(input_ids=ids)
        hidden = out.last_hidden_state
        logits = model.lm_head(hidden)
    return hidden, logits


def check_transformers(label: str, ours: Path, theirs: Path) -> bool:
    import torch
    vocab = json.loads((ours / "config.json").read_text())["text_config"]["vocab_size"]
    ids = torch.randint(0, vocab, (2, 37), generator=torch.Generator().manual_seed(7))
    h1, l1 = run_transformers(ours, ids)
    h2, l2 = run_transformers(theirs, ids)
    same_bytes = stored_tensors(ours) == stored_tensors(theirs)
    ok = torch.equal(h1, h2) and torch.equal(l1, l2)
    print(f"{label:5s} transformers from_pretrained: ours and the library's release give "
          f"{'identical' if ok else 'DIFFERENT'} hidden states {tuple(h1.shape)} and logits "
          f"{tuple(l1.shape)} (max |diff| {float((h1.float() - h2.float()).abs().max()):.3g}); "
          f"stored tensors {'byte-identical' if same_bytes else 'DIFFER'}")
    return ok and same_bytes


def check_comfy(ours: Path, theirs: Path) -> bool:
    import torch
    from comfy_kitchen.backends.eager import quantization as eager
    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
    from safetensors.torch import load_file
    a, b = load_file(ours / "model.safetensors"), load_file(theirs / "model.safetensors")
    modules = sorted(k[: -len(".comfy_quant")] for k in a if k.endswith(".comfy_quant"))
    ok = modules == sorted(k[: -len(".comfy_quant")] for k in b if k.endswith(".comfy_quant"))
    for m in modules:
        meta = json.loads(bytes(a[m + ".comfy_quant"].tolist()).decode())
        outs = []
        for t in (a, b):
            q, s = t[m + ".weight"], t[m + ".weight_scale"]
            params = TensorWiseINT8Layout.Params(scale=s, orig_dtype=torch.bfloat16,
                                                 orig_shape=tuple(q.shape), is_weight=True,
                                                 convrot=bool(meta["convrot"]),
                                                 convrot_groupsize=int(meta["convrot_groupsize"]))
            x = torch.randn(5, q.shape[1], generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
            with torch.no_grad():
                y = eager.int8_linear(x, q, s, bias=None, out_dtype=torch.bfloat16, convrot=True,
                                      convrot_groupsize=int(meta["convrot_groupsize"]))
            outs.append((TensorWiseINT8Layout.dequantize(q, params), y))
        ok = ok and torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    print(f"int8  comfy-kitchen: {len(modules)} ConvRot weights of ours and the library's release "
          f"dequantize and run int8_linear {'identically' if ok else 'DIFFERENTLY'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clef", required=True, help="the clef binary")
    ap.add_argument("--src", default=str(ROOT / "tests/release/fixtures/bf16-single"))
    ap.add_argument("--int8-src", default=str(ROOT / "tests/quantize/fixtures/int8-src"))
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label, src, writer in (("nf4", a.src, make_quantized.write_nf4),
                                   ("fp8", a.src, make_quantized.write_fp8),
                                   ("int8-convrot", a.int8_src, make_quantized.write_int8)):
            ours, theirs = tmp / f"ours-{label}", tmp / f"theirs-{label}"
            subprocess.run([a.clef, "quantize", "--to", label, src, str(ours)], check=True,
                           stdout=subprocess.DEVNULL)
            writer(Path(src), theirs)
            if label == "int8-convrot":
                ok = check_comfy(ours, theirs) and ok
            else:
                ok = check_transformers(label, ours, theirs) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
