#!/usr/bin/env python3
"""make_oracle.py — what each quantization library itself computes on the quantized fixture
releases (tests/release/fixtures/{nf4,fp8,int8}), for tests/quant/.

For every quantized tensor of a release, the library's OWN dequantizer is run on the stored
bytes, and for every quantized linear the library's OWN forward is run on fixed inputs:

  nf4   bitsandbytes: Params4bit.from_prequantized (the path transformers loads NF4 with),
        functional.dequantize_4bit on CPU, and Linear4bit.forward on CPU.
  fp8   compressed-tensors: quantization.lifecycle.forward.dequantize(weight, weight_scale,
        args) for the weights, and the compressed-tensors forward of a quantized nn.Linear
        (set_forward_quantized: dynamic per-token QDQ of the input, then F.linear) for the
        outputs; compute_dynamic_scales_and_zp + quantize() for the activation quantizer alone.
  int8  comfy-kitchen: TensorWiseINT8Layout.dequantize (ConvRot, group 256) for the weights,
        the eager int8_linear for the outputs, and the eager quantize_and_rotate_rowwise for
        the activation quantizer alone.

One safetensors file per precision, tests/quant/fixtures/<precision>.safetensors:

  dequant.<stored name>   BF16 [out, in]  the library's dequantized weight (every quantized one)
  x.<K>                   BF16 [M, K]     inputs shared by all linears of in_features K
  y.<module>              BF16 [M, out]   the library's forward of the module on x.<K>
  x1.<K>, y1.<module>     the same with one token (bitsandbytes takes its gemv path then)
  aq.<module>, as.<module>  (fp8, int8) the library's activation quantizer on x.<K> in BF16:
                          q (F8_E4M3 or I8) [M, K] and the per-token scale [M, 1]
  aq32.<module>, as32.<module>  the same on x.<K> widened to F32 (an fp32 activation stream)
  qw.<module>, qs.<module>  (int8) comfy-kitchen's quantizer, TensorWiseINT8Layout.quantize
                          (per_channel, convrot, group 256), run on dequant.<module>.weight:
                          I8 [out, in] and F32 [out, 1] (the FP8 and NF4 quantizers are
                          checked against the fixture releases themselves, whose BF16 source
                          is tests/release/fixtures/bf16-single)
  __metadata__            {"versions": JSON of the library and torch versions} (one key, so
                          that regenerating with the same versions gives the same bytes)

Inputs: row 0 standard normal, row 1 all zeros (the zero-scale guard of each library), row 2
normal with one outlier x 64, row 3 normal x 1e-3 (FP8 subnormals), row 4 uniform in [-1, 1],
row 5 standard normal x 8. Seeded; identical runs give identical files.

Usage: python3 scripts/quant/make_oracle.py [--releases tests/release/fixtures]
                                            [--out tests/quant/fixtures]
(pip install -r scripts/requirements.txt first.)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

M_TOKENS = 6


def make_inputs(k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M_TOKENS, k, generator=g)
    x[1].zero_()
    x[2, (seed * 7) % k] *= 64.0
    x[3] *= 1e-3
    x[4] = torch.rand(k, generator=g) * 2 - 1
    x[5] *= 8.0
    return x.to(torch.bfloat16)


def read_release(d: Path) -> dict[str, torch.Tensor]:
    tensors = {}
    for f in sorted(d.glob("*.safetensors")):
        if f.name == "joint_head.safetensors":
            continue
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                tensors[k] = st.get_tensor(k)
    return tensors


class Oracle:
    def __init__(self):
        self.out: dict[str, torch.Tensor] = {}
        self.inputs: dict[int, torch.Tensor] = {}

    def x(self, k: int) -> torch.Tensor:
        if k not in self.inputs:
            self.inputs[k] = make_inputs(k, seed=1000 + k)
            self.out[f"x.{k}"] = self.inputs[k]
            self.out[f"x1.{k}"] = self.inputs[k][:1].clone()
        return self.inputs[k]


def nf4(release: Path) -> dict[str, torch.Tensor]:
    import bitsandbytes as bnb
    from bitsandbytes.nn import Linear4bit, Params4bit

    t = read_release(release)
    o = Oracle()
    for name in sorted(t):
        if not name.endswith(".weight") or t[name].dtype != torch.uint8 \
                or f"{name}.quant_map" not in t:
            continue
        stats = {k[len(name) + 1:]: v for k, v in t.items() if k.startswith(name + ".")}
        w = Params4bit.from_prequantized(t[name], stats, requires_grad=False, device="cpu")
        qs = w.quant_state
        deq = bnb.functional.dequantize_4bit(w.data, qs)
        o.out[f"dequant.{name}"] = deq.contiguous()
        out_f, in_f = qs.shape
        module = name[: -len(".weight")]
        lin = Linear4bit(in_f, out_f, bias=False, compute_dtype=torch.bfloat16,
                         quant_type="nf4", device="cpu")
        lin.weight = w
        with torch.no_grad():
            o.out[f"y.{module}"] = lin(o.x(in_f)).contiguous()
            o.out[f"y1.{module}"] = lin(o.x(in_f)[:1].clone()).contiguous()
    return o.out


def fp8(release: Path) -> dict[str, torch.Tensor]:
    from compressed_tensors.quantization import (QuantizationConfig, QuantizationStatus,
                                                 apply_quantization_config)
    from compressed_tensors.quantization.lifecycle.forward import dequantize, quantize
    from compressed_tensors.quantization.utils.helpers import compute_dynamic_scales_and_zp

    cfg = json.loads((release / "config.json").read_text())["quantization_config"]
    qcfg = QuantizationConfig.model_validate(cfg)
    scheme = qcfg.config_groups["group_0"]
    t = read_release(release)
    o = Oracle()
    for name in sorted(t):
        if t[name].dtype != torch.float8_e4m3fn:
            continue
        module = name[: -len(".weight")]
        scale = t[f"{module}.weight_scale"]
        deq = dequantize(x_q=t[name], scale=scale, args=scheme.weights, dtype=torch.bfloat16)
        o.out[f"dequant.{name}"] = deq.contiguous()
        out_f, in_f = t[name].shape
        # the compressed-tensors forward of this linear: a one-module model carrying the
        # release's own config group, frozen (weights already dequantized: COMPRESSED skips
        # weight QDQ the way a decompressed checkpoint is run)
        holder = torch.nn.Module()
        holder.lin = torch.nn.Linear(in_f, out_f, bias=False, dtype=torch.bfloat16)
        holder.lin.weight.data.copy_(deq)
        apply_quantization_config(holder, QuantizationConfig(
            config_groups={"group_0": scheme}, format=cfg["format"],
            quantization_status=QuantizationStatus.COMPRESSED))
        # [batch 1, tokens, K] as in the model: compressed-tensors' TOKEN strategy keeps dims
        # 0 and 1 and reduces the rest (a 2-D input would get ONE scale for all tokens)
        x = o.x(in_f).unsqueeze(0)
        with torch.no_grad():
            o.out[f"y.{module}"] = holder.lin(x)[0].contiguous()
            o.out[f"y1.{module}"] = holder.lin(x[:, :1].clone())[0].contiguous()
        args = scheme.input_activations
        for tag, xin in (("", x), ("32", x.float())):
            s, zp = compute_dynamic_scales_and_zp(value=xin, args=args, module=holder.lin)
            q = quantize(x=xin, scale=s, zero_point=zp, args=args, dtype=torch.float8_e4m3fn)
            o.out[f"aq{tag}.{module}"] = q[0].contiguous()
            o.out[f"as{tag}.{module}"] = s.reshape(M_TOKENS, 1).contiguous()
    return o.out


def int8(release: Path) -> dict[str, torch.Tensor]:
    from comfy_kitchen.backends.eager import quantization as eager
    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
    from comfy_kitchen.tensor.int8_utils import _build_hadamard

    from make_backbone_oracle import require_exact_int8_mm
    require_exact_int8_mm()  # int8_linear's int32 sums must be exact on this machine
    t = read_release(release)
    o = Oracle()
    for name in sorted(t):
        if not name.endswith(".comfy_quant"):
            continue
        meta = json.loads(bytes(t[name].tolist()).decode())
        group = int(meta["convrot_groupsize"])
        module = name[: -len(".comfy_quant")]
        q, scale = t[f"{module}.weight"], t[f"{module}.weight_scale"]
        params = TensorWiseINT8Layout.Params(scale=scale, orig_dtype=torch.bfloat16,
                                             orig_shape=tuple(q.shape), is_weight=True,
                                             convrot=bool(meta["convrot"]),
                                             convrot_groupsize=group)
        deq = TensorWiseINT8Layout.dequantize(q, params)
        # the layout dispatches through comfy-kitchen's registry: on CPU that must be eager
        ref = eager.dequantize_int8_convrot_weight(q, scale, group).to(torch.bfloat16)
        assert torch.equal(deq.view(torch.int16), ref.view(torch.int16)), name
        o.out[f"dequant.{module}.weight"] = deq.contiguous()
        rq, rparams = TensorWiseINT8Layout.quantize(deq, is_weight=True, per_channel=True,
                                                    convrot=True, convrot_groupsize=group)
        o.out[f"qw.{module}"] = rq.contiguous()
        o.out[f"qs.{module}"] = rparams.scale.float().reshape(-1, 1).contiguous()
        in_f = q.shape[1]
        x = o.x(in_f)
        with torch.no_grad():
            o.out[f"y.{module}"] = eager.int8_linear(
                x, q, scale, bias=None, out_dtype=torch.bfloat16, convrot=True,
                convrot_groupsize=group).contiguous()
            o.out[f"y1.{module}"] = eager.int8_linear(
                x[:1].clone(), q, scale, bias=None, out_dtype=torch.bfloat16, convrot=True,
                convrot_groupsize=group).contiguous()
        for tag, xin in (("", x), ("32", x.float())):
            h = _build_hadamard(group, device="cpu", dtype=xin.dtype)
            aq, s = eager.quantize_and_rotate_rowwise(xin, h, group)
            o.out[f"aq{tag}.{module}"] = aq.contiguous()
            o.out[f"as{tag}.{module}"] = s.float().reshape(M_TOKENS, 1).contiguous()
    return o.out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", default="tests/release/fixtures")
    ap.add_argument("--out", default="tests/quant/fixtures")
    a = ap.parse_args()
    torch.manual_seed(0)
    import bitsandbytes
    import comfy_kitchen
    import compressed_tensors
    meta = {"torch": torch.__version__, "bitsandbytes": bitsandbytes.__version__,
            "compressed_tensors": compressed_tensors.__version__,
            "comfy_kitchen": getattr(comfy_kitchen, "__version__", "0.2.40")}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for precision, fn in (("nf4", nf4), ("fp8", fp8), ("int8", int8)):
        tensors = fn(Path(a.releases) / precision)
        n = sum(1 for k in tensors if k.startswith("dequant."))
        save_file(dict(sorted(tensors.items())), str(out / f"{precision}.safetensors"),
                  metadata={"versions": json.dumps(meta, sort_keys=True)})
        print(f"{precision}: {n} quantized tensors, {len(tensors)} oracle tensors",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
