#!/usr/bin/env python3
"""peer.py — the libraries' side of bench/quant_linear: one linear of N outputs and K inputs
over T tokens, per weight format, on each library's own CPU path, bf16 activations as the
published stacks run them (torch.set_num_threads(THREADS), inference mode):

  nf4       bitsandbytes Linear4bit (NF4, double quant, compute dtype bf16) forward on CPU
  fp8       compressed-tensors: a bf16 nn.Linear with the FP8_DYNAMIC scheme applied (per-token
            dynamic QDQ of the input, then F.linear), input [1, T, K]
  int8      comfy-kitchen eager int8_linear (ConvRot group 256, per-token int8, torch._int_mm)
  bf16      torch F.linear, bf16 weights and activations (the unquantized release's stack)
  fp32      torch F.linear, fp32 (the engine's reference arithmetic on BF16 weights)

Weights: N(0, 0.02) in bf16, quantized by each library. Prints one JSON line per format:
median wall ms and CPU seconds (all threads) per call over RUNS samples after one warm-up
(each sample as many calls as fill ~0.2 s).
  python3 peer.py N K T RUNS THREADS
"""
import json
import statistics
import sys
import time

import torch


def timed(fn, runs):
    """Median wall ms and CPU seconds per call; as the C side, each sample repeats the call
    until it spans ~0.2 s of wall time (the process CPU clock can be as coarse as 4 ms)."""
    w0 = time.perf_counter()
    fn()
    once = time.perf_counter() - w0
    reps = int(0.2 / once) + 1 if 0 < once < 0.2 else 1
    ms, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(reps):
            fn()
        ms.append(1e3 * (time.perf_counter() - t0) / reps)
        cpu.append((time.process_time() - c0) / reps)
    return statistics.median(ms), statistics.median(cpu)


def main():
    N, K, T, runs, threads = (int(a) for a in sys.argv[1:6])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(N, K, generator=g) * 0.02).to(torch.bfloat16)
    x = torch.randn(T, K, generator=g).to(torch.bfloat16)
    out = {}
    with torch.inference_mode():
        import bitsandbytes as bnb
        lin = bnb.nn.Linear4bit(K, N, bias=False, compute_dtype=torch.bfloat16,
                                compress_statistics=True, quant_type="nf4")
        lin.weight = bnb.nn.Params4bit(w.clone(), requires_grad=False, quant_type="nf4",
                                       compress_statistics=True)
        lin = lin.to("cpu")  # bitsandbytes quantizes on the move to a device
        assert lin.weight.bnb_quantized and lin.weight.dtype == torch.uint8
        out["nf4"] = timed(lambda: lin(x), runs)

        from compressed_tensors.quantization import (QuantizationConfig, QuantizationStatus,
                                                     apply_quantization_config,
                                                     preset_name_to_scheme)
        holder = torch.nn.Module()
        holder.lin = torch.nn.Linear(K, N, bias=False, dtype=torch.bfloat16)
        holder.lin.weight.data.copy_(w)
        apply_quantization_config(holder, QuantizationConfig(
            config_groups={"group_0": preset_name_to_scheme("FP8_DYNAMIC", ["Linear"])},
            quantization_status=QuantizationStatus.COMPRESSED))
        x3 = x.unsqueeze(0)
        out["fp8"] = timed(lambda: holder.lin(x3), runs)

        from comfy_kitchen.backends.eager import quantization as eager
        from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
        q, params = TensorWiseINT8Layout.quantize(w, is_weight=True, per_channel=True,
                                                  convrot=True, convrot_groupsize=256)
        out["int8"] = timed(lambda: eager.int8_linear(x, q, params.scale, bias=None,
                                                      out_dtype=torch.bfloat16, convrot=True,
                                                      convrot_groupsize=256), runs)
        out["bf16"] = timed(lambda: torch.nn.functional.linear(x, w), runs)
        wf, xf = w.float(), x.float()
        out["fp32"] = timed(lambda: torch.nn.functional.linear(xf, wf), runs)
    for name, (ms, cpu) in out.items():
        print(json.dumps({"format": name, "ms": round(ms, 3), "cpu_s": round(cpu, 4)}))


if __name__ == "__main__":
    main()
