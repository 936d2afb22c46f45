#!/usr/bin/env python3
"""make_backbone_oracle.py — the quantized fixture releases run by transformers + their own
quantization library, for whole-backbone parity of the engine on quantized releases.

For each of tests/release/fixtures/{nf4,fp8,int8} it loads the release AS STORED into
transformers' Qwen3_5ForConditionalGeneration, with every quantized linear computed by its
library, activations in fp32 (the engine's arithmetic; the libraries' per-linear behaviour in
bf16 is pinned by tests/quant/fixtures/<precision>.safetensors):

  nf4   from_pretrained(dtype=float32) through transformers' bitsandbytes integration, then
        compute_dtype = float32 on every Linear4bit (the release says bfloat16, which would
        round each linear's input and output to bf16): weights dequantized by bitsandbytes to
        bf16 numbers, fp32 linear. support_avx512bf16_for_cpu is turned off (and a repacking
        done at load undone): on CPUs with AVX-512 BF16 bitsandbytes otherwise repacks the
        weights for a CPU-specific kernel that computes in bf16 (and refuses out_features not
        a multiple of its block, e.g. GDN in_proj_a / in_proj_b).
  fp8   from_pretrained(dtype=float32, CompressedTensorsConfig(run_compressed=False)): weights
        decompressed by compressed-tensors, compressed-tensors' forward (per-token dynamic FP8
        QDQ of each input in fp32, then an fp32 linear) — the QDQ arithmetic of src/quant/fp8.h.
  int8  the model built from config.json in fp32 with the release's other tensors, each
        quantized linear replaced by comfy-kitchen's eager int8_linear(x fp32, q, scale,
        convrot, group 256, out_dtype float32) on the stored int8 weights and scales.

Written: tests/quant/fixtures/<precision>_backbone.bin, the format of scripts/backbone/
make_fixtures.py ("CLEFBB01", u32 n_records, u32 hidden, then per record u32 T, i32 ids[T],
u32 n_rows, i32 rows[n_rows], f32 hidden[n_rows][hidden]): last_hidden_state of the text model
(after the final norm) on seeded random ids, every row. Lengths 1, 7, 64, 130.

Usage: python3 scripts/quant/make_backbone_oracle.py [--releases tests/release/fixtures]
                                                     [--out tests/quant/fixtures]
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch

LENGTHS = [1, 7, 64, 130]


def load_nf4(d: Path):
    import bitsandbytes as bnb
    from transformers import Qwen3_5ForConditionalGeneration
    m = Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float32)
    n = 0
    for mod in m.modules():
        if isinstance(mod, bnb.nn.Linear4bit):
            mod.compute_dtype = torch.float32
            mod.compute_type_is_set = True
            mod.support_avx512bf16_for_cpu = False
            qs = mod.weight.quant_state
            if getattr(qs, "packing_format_for_cpu", False):  # repacked at load: undo it
                from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse
                mod.weight.data, mod.weight.quant_state = _convert_weight_packed_for_cpu_inverse(
                    mod.weight.data, qs)
            n += 1
    return m, n


def load_fp8(d: Path):
    from transformers import CompressedTensorsConfig, Qwen3_5ForConditionalGeneration
    m = Qwen3_5ForConditionalGeneration.from_pretrained(
        d, dtype=torch.float32, quantization_config=CompressedTensorsConfig(run_compressed=False))
    n = sum(1 for mod in m.modules() if getattr(mod, "quantization_scheme", None) is not None)
    return m, n


class ComfyInt8Linear(torch.nn.Module):
    def __init__(self, q, scale, group):
        super().__init__()
        self.q, self.scale, self.group = q, scale, group

    def forward(self, x):
        from comfy_kitchen.backends.eager import quantization as eager
        return eager.int8_linear(x, self.q, self.scale, bias=None, out_dtype=torch.float32,
                                 convrot=True, convrot_groupsize=self.group)


def require_exact_int8_mm() -> None:
    """Refuse to make an INT8 oracle where torch's int8 matmul is not exact. comfy-kitchen's
    eager int8_linear multiplies with torch.int8_mm / torch._int_mm; on a CPU where oneDNN
    runs it at AVX2 (no AVX-512; or with ONEDNN_MAX_CPU_ISA=AVX2) the int32 sums are not the
    exact ones (a random 64 x 256 x 64 product was off by up to 67,550), so the oracle would
    not be the library's int32 arithmetic (docs/quant.md, "Why FP8 and INT8 miss 1e-4")."""
    mm = getattr(torch, "int8_mm", torch._int_mm)
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (64, 256), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (256, 64), dtype=torch.int8, generator=g)
    got = mm(a, b).to(torch.int64)
    want = a.to(torch.int64) @ b.to(torch.int64)
    if not torch.equal(got, want):
        raise SystemExit(f"torch's int8 matmul is not exact on this machine (max |error| "
                         f"{int((got - want).abs().max())}): make the INT8 oracles on a CPU "
                         f"with AVX-512 (oneDNN not capped below it)")


def load_int8(d: Path):
    from safetensors.torch import load_file
    require_exact_int8_mm()
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    config = Qwen3_5Config.from_pretrained(d)
    m = Qwen3_5ForConditionalGeneration(config).to(torch.float32).eval()
    tensors = load_file(d / "model.safetensors")
    state = {}
    n = 0
    for name, t in tensors.items():
        if name.endswith(".comfy_quant"):
            module = name[: -len(".comfy_quant")]
            meta = json.loads(bytes(t.tolist()).decode())
            parent_name, _, child = module.rpartition(".")
            parent = m.get_submodule(parent_name)
            setattr(parent, child, ComfyInt8Linear(tensors[f"{module}.weight"],
                                                   tensors[f"{module}.weight_scale"],
                                                   int(meta["convrot_groupsize"])))
            n += 1
    quantized = {k.rsplit(".", 1)[0] for k in tensors if k.endswith(".comfy_quant")}
    for name, t in tensors.items():
        owner = name.rsplit(".", 1)[0]
        if owner in quantized or name.endswith(("weight_scale", "comfy_quant")):
            continue
        state[name] = t.float()
    missing, unexpected = m.load_state_dict(state, strict=False)
    # the replaced linears are the only modules without their tensors in the state dict
    missing = [k for k in missing if k.rsplit(".", 1)[0] not in quantized]
    assert not unexpected, unexpected
    assert all(k.startswith("model.visual") or "rotary" in k for k in missing), missing
    return m, n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", default="tests/release/fixtures")
    ap.add_argument("--out", default="tests/quant/fixtures")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for precision, load in (("nf4", load_nf4), ("fp8", load_fp8), ("int8", load_int8)):
        d = Path(a.releases) / precision
        model, n_quantized = load(d)
        model.eval()
        text = model.model.language_model
        cfg = json.loads((d / "config.json").read_text())["text_config"]
        D, V = cfg["hidden_size"], cfg["vocab_size"]
        rng = np.random.default_rng(7)
        blob = bytearray(b"CLEFBB01" + struct.pack("<II", len(LENGTHS), D))
        for T in LENGTHS:
            ids = rng.integers(0, V, size=T).astype("<i4")
            with torch.inference_mode():
                h = text(input_ids=torch.from_numpy(ids.astype(np.int64))[None]).last_hidden_state[0]
            rows = np.arange(T, dtype="<i4")
            blob += struct.pack("<I", T) + ids.tobytes()
            blob += struct.pack("<I", T) + rows.tobytes()
            blob += h.float().numpy().astype("<f4").tobytes()
        (out / f"{precision}_backbone.bin").write_bytes(bytes(blob))
        print(f"{precision}: {n_quantized} library-quantized linears, {len(LENGTHS)} records",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
