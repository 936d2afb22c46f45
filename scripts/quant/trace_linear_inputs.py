#!/usr/bin/env python3
"""trace_linear_inputs.py — where and why the engine's run of an FP8 or INT8 ConvRot release
parts from the library's. For records of tests/quant/fixtures/decide it runs the library run
of make_decide_fixtures.py (transformers + compressed-tensors FP8 / comfy-kitchen INT8 ConvRot,
fp32) with a hook on every quantized linear, and compares with the engine's trace
(test_quant_decide's CLEF_QUANT_TRACE_DIR mode: every quantized linear's fp32 input, the
engine's activation codes and scales, and the last hidden state). Per record:
  - flips: activation codes that differ over all quantized linears, each side's input
    quantized by the LIBRARY's own quantizer (compressed-tensors' dynamic per-token scale and
    e4m3 cast; comfy-kitchen's rotation and per-row int8 rounding);
  - the first linear where any differs, how many, and for those codes, in fp32 ulps of the
    token's largest |input| (the rounding unit of the sums that made it; rotated input for
    INT8): the library's distance from the rounding boundary between the two codes (bnd) and
    the engine's input minus the library's there (dx);
  - h own: the engine's last hidden state against the library run's (relative L2);
  - h forced: against the library run fed the ENGINE's codes and scales (ForcedCodes).
Summary: whether the library's quantizer on the engine's inputs gives exactly the engine's
codes and scales in every call (the quantizer arithmetic is the library's), the tie distances,
and the two hidden-state errors. docs/quant.md quotes the numbers.

Usage: CLEF_QUANT_TRACE_DIR=DIR build/tests/quant/test_quant_decide fp8     (from the root)
       python3 scripts/quant/trace_linear_inputs.py fp8 DIR [r036 ...] [--detail]
pip install -r scripts/requirements.txt
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "quant"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))

import make_backbone_oracle  # noqa: E402

DECIDE = ROOT / "tests" / "quant" / "fixtures" / "decide"


def read_engine_trace(path: Path) -> tuple[list[dict], np.ndarray]:
    """DIR/<record>.bin of test_quant_decide's CLEF_QUANT_TRACE_DIR mode: per quantized linear
    i64 T, K, N; f32 x[T][K]; f32 scale[T]; u8 codes[T][K]; last i64 T, -1, D; f32 h[T][D]"""
    b = Path(path).read_bytes()
    calls, o, hidden = [], 0, None
    while o < len(b):
        T, K, N = (int(v) for v in np.frombuffer(b, np.int64, 3, o))
        o += 24
        if K == -1:
            hidden = np.frombuffer(b, np.float32, T * N, o).reshape(T, N)
            o += 4 * T * N
            continue
        x = np.frombuffer(b, np.float32, T * K, o).reshape(T, K)
        o += 4 * T * K
        s = np.frombuffer(b, np.float32, T, o)
        o += 4 * T
        q = np.frombuffer(b, np.uint8, T * K, o).reshape(T, K)
        o += T * K
        calls.append({"T": T, "K": K, "N": N, "x": x, "scale": s, "codes": q})
    return calls, hidden


def fp8_codes(module, x: torch.Tensor):
    """compressed-tensors' own dynamic per-token quantizer: (scaled x / s in fp32, codes)"""
    from compressed_tensors.quantization.lifecycle.forward_helpers import _quantize
    from compressed_tensors.quantization.utils.helpers import (calculate_range,
                                                               compute_dynamic_scales_and_zp)
    args = module.quantization_scheme.input_activations
    x3 = x[None]
    scale, zp = compute_dynamic_scales_and_zp(value=x3, args=args, module=module)
    q_min, q_max = calculate_range(args, x.device)
    codes = _quantize(x3, scale, zp, q_min, q_max, args, dtype=torch.float8_e4m3fn)[0]
    return x, (x3 / scale)[0], codes.view(torch.uint8), scale.reshape(-1)


def int8_codes(module, x: torch.Tensor):
    """comfy-kitchen's eager rotation and per-row int8 quantizer"""
    from comfy_kitchen.backends.eager import quantization as eager
    h = eager._build_hadamard(module.group, device=x.device, dtype=x.dtype)
    r = eager._rotate_activation(x, h, module.group)
    q, scale = eager.quantize_int8_rowwise(r.clone())
    return r, r / scale, q.view(torch.uint8), scale.reshape(-1)


def code_steps(precision: str, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """how many grid steps apart two codes are (e4m3 codes of one sign are ordered by their
    magnitude bits; +0 and -0 are the same step)"""
    if precision == "int8":
        return np.abs(a.view(torch.int8).numpy().astype(int) - b.view(torch.int8).numpy())

    def signed(c):
        c = c.numpy().astype(int)
        return np.where(c & 0x80, -(c & 0x7f), c)
    return np.abs(signed(a) - signed(b))


def code_values(precision: str, codes: torch.Tensor) -> np.ndarray:
    """the grid value of each code (e4m3 or int8), as float64"""
    dtype = torch.float8_e4m3fn if precision == "fp8" else torch.int8
    return codes.view(dtype).to(torch.float64).numpy()


class ForcedCodes:
    """Run the library's own quantized linears on the ENGINE's activation codes and scales
    instead of its own: compressed-tensors' forward with its fake quantization switched off
    (quantization_enabled = False: a plain F.linear on the decompressed weight, on which its
    weight fake-quantization is the identity) on the input fp32(code) * scale, exactly what its
    QDQ makes of codes; comfy-kitchen's int8_linear with its rowwise quantizer returning the
    engine's codes and scales (rotation off: the codes are of the rotated input). Everything
    else is the library run unchanged."""

    def __init__(self, precision: str, quantized: list):
        self.precision, self.calls, self.i = precision, [], 0
        self.quantized, self.hooks = quantized, []
        for _, m in quantized:
            if precision == "fp8":
                m.quantization_enabled = False
                self.hooks.append(m.register_forward_pre_hook(self._fp8_input))
            else:
                m.forward = self._int8_forward(m)

    def remove(self) -> None:
        for h in self.hooks:
            h.remove()
        for _, m in self.quantized:
            if self.precision == "fp8":
                m.quantization_enabled = True
            else:
                del m.forward  # back to the class's forward

    def start(self, calls: list[dict]) -> None:
        self.calls, self.i = calls, 0

    def _next(self):
        c = self.calls[self.i]
        self.i += 1
        return c

    def _fp8_input(self, mod, args):
        c = self._next()
        codes = torch.from_numpy(c["codes"].copy()).view(torch.float8_e4m3fn).to(torch.float32)
        return (codes * torch.from_numpy(c["scale"].copy())[:, None])[None],

    def _int8_forward(self, mod):
        from comfy_kitchen.backends.eager import quantization as eager

        def forward(x):
            c = self._next()
            q = torch.from_numpy(c["codes"].copy()).view(torch.int8)
            s = torch.from_numpy(c["scale"].copy())[:, None]
            real = eager.quantize_int8_rowwise
            eager.quantize_int8_rowwise = lambda _x, *a, **k: (q, s)
            try:
                return eager.int8_linear(x, mod.q, mod.scale, bias=None, out_dtype=torch.float32,
                                         convrot=False)
            finally:
                eager.quantize_int8_rowwise = real
        return forward


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.sqrt(((a - b) ** 2).sum() / max((b ** 2).sum(), 1e-300)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("precision", choices=("fp8", "int8"))
    ap.add_argument("trace_dir", help="test_quant_decide's CLEF_QUANT_TRACE_DIR")
    ap.add_argument("records", nargs="*", help="record names (default: every traced record)")
    ap.add_argument("--detail", action="store_true", help="one line per linear")
    a = ap.parse_args()
    torch.set_num_threads(2)
    recs = {r["name"]: r for r in json.loads((DECIDE / "records.json").read_text())["records"]}
    names = a.records or sorted(p.stem for p in Path(a.trace_dir).glob("*.bin"))
    loader = {"fp8": make_backbone_oracle.load_fp8, "int8": make_backbone_oracle.load_int8}
    model, _ = loader[a.precision](DECIDE / a.precision)
    model.eval()
    text = model.model.language_model
    quantized = [(n, m) for n, m in model.named_modules()
                 if getattr(m, "quantization_scheme", None) is not None
                 or isinstance(m, make_backbone_oracle.ComfyInt8Linear)]
    quantize = fp8_codes if a.precision == "fp8" else int8_codes

    def run(ids):
        with torch.inference_mode():
            return text(input_ids=ids, attention_mask=torch.ones_like(ids),
                        use_cache=False).last_hidden_state[0].numpy()

    total = {"records": 0, "with_flips": 0, "quantizer_same": 0, "linears": 0}
    first_dist, first_dx, first_steps, own_err, forced_err = [], [], [], [], []
    print(f"{'record':6s} {'T':>5s} {'flips':>6s} {'first flip at':44s} {'n':>3s} "
          f"{'bnd':>9s} {'dx':>8s} {'h own':>9s} {'h forced':>9s}")
    for name in names:
        calls, h_eng = read_engine_trace(Path(a.trace_dir) / f"{name}.bin")
        ids = torch.tensor([recs[name]["ids"]], dtype=torch.int64)
        seen = []
        hooks = [m.register_forward_pre_hook(
            lambda mod, args, n=n: seen.append((n, mod, args[0][0].detach().clone())))
            for n, m in quantized]
        h_lib = run(ids)
        for h in hooks:
            h.remove()
        assert len(calls) == len(seen), f"{name}: engine {len(calls)} linears, library {len(seen)}"
        n_flips, first = 0, None
        for (lname, mod, x_lib), e in zip(seen, calls):
            x_eng = torch.from_numpy(e["x"].copy())
            v_lib, s_lib, c_lib, sc_lib = quantize(mod, x_lib)
            v_eng, _, c_eng, sc_eng = quantize(mod, x_eng)
            same = (np.array_equal(c_eng.numpy(), e["codes"])
                    and np.array_equal(sc_eng.numpy(), e["scale"]))
            total["linears"] += 1
            total["quantizer_same"] += bool(same)
            flips = (c_lib != c_eng).numpy()
            k = int(flips.sum())
            if a.detail:
                dx = (x_eng - x_lib).abs()
                print(f"  {lname:44s} x rel max {float(dx.max() / x_lib.abs().max()):.2e}"
                      f" x differ {int((dx > 0).sum()):6d} codes differ {k:5d}"
                      f" quantizer same {same}")
            if k and first is None:
                # both in ulps of the token's largest |input| (rotated input for INT8): the
                # scale of the fp32 rounding of the sums that made the input
                vl = v_lib.numpy().astype(np.float64)
                row_ulp = np.spacing(np.abs(vl).max(axis=1).astype(np.float32))[:, None]
                row_ulp = np.broadcast_to(row_ulp, vl.shape)[flips]
                scale = np.broadcast_to(sc_lib.numpy()[:, None], vl.shape)[flips]
                # the rounding boundary between the two codes: their midpoint (adjacent codes)
                lo = code_values(a.precision, c_lib)[flips]
                hi = code_values(a.precision, c_eng)[flips]
                first_steps.append(int(code_steps(a.precision, c_lib[flips], c_eng[flips]).max()))
                dist = np.abs(s_lib.numpy()[flips] - (lo + hi) / 2) * scale / row_ulp
                dx = np.abs(v_eng.numpy().astype(np.float64) - vl)[flips] / row_ulp
                first = (lname, k, float(dist.max()), float(dx.max()))
                first_dist += list(dist)
                first_dx += list(dx)
            n_flips += k
        forced = ForcedCodes(a.precision, quantized)
        forced.start(calls)
        h_forced = run(ids)
        forced.remove()
        assert forced.i == len(calls), f"{name}: {forced.i} of {len(calls)} forced linears ran"
        total["records"] += 1
        total["with_flips"] += n_flips > 0
        e_own, e_forced = rel_l2(h_eng, h_lib), rel_l2(h_eng, h_forced)
        own_err.append(e_own)
        forced_err.append(e_forced)
        f = first or ("-", 0, 0.0, 0.0)
        print(f"{name:6s} {ids.shape[1]:5d} {n_flips:6d} {f[0]:44s} {f[1]:3d} {f[2]:9.2f} "
              f"{f[3]:8.2f} {e_own:9.2e} {e_forced:9.2e}", flush=True)
    print(f"\n{a.precision}: {total['records']} records, {total['with_flips']} with activation "
          f"codes that differ; quantizer on the engine's inputs == the engine's codes and scales "
          f"in {total['quantizer_same']} of {total['linears']} linear calls")
    if first_dist:
        print(f"first differing linear of each record: {len(first_dist)} codes; in fp32 ulps "
              f"of the token's largest |input|: the library's input lies max "
              f"{max(first_dist):.2f} (median {float(np.median(first_dist)):.2f}) from the "
              f"rounding boundary, the engine's input differs from it there by max "
              f"{max(first_dx):.2f} (median {float(np.median(first_dx)):.2f}); the codes are "
              f"at most "
              f"{max(first_steps)} grid step apart")
    print(f"last hidden state, engine vs library: worst {max(own_err):.2e}, mean "
          f"{np.mean(own_err):.2e}; vs the library run on the engine's codes: worst "
          f"{max(forced_err):.2e}, mean {np.mean(forced_err):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
