#!/usr/bin/env python3
"""peer_attention.py — the peer of bench_gpu_attention: torch's scaled_dot_product_attention
in bf16 on the same GPU, same heads and cases (causal GQA, head_dim 256; 8 x 1,502 as a batch
of 8, which is what packed records of equal length are), restricted to the FlashAttention-2
backend (torch.nn.attention.SDPBackend.FLASH_ATTENTION). GQA through enable_gqa when the
flash kernel takes it, else K and V repeated per query head before timing (same FLOPs).
Times: CUDA events around a burst of 10 calls, divided by 10 (as bench_gpu_attention times
its bursts), median of the bursts after 3 warm-ups. Inputs bf16 N(0, 1),
scale 1/16. Prints markdown rows matching bench_gpu_attention's table.

  python3 peer_attention.py 9b|27b [runs]
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from peer_timing import cuda_median_ms

BURST = 10


def main():
    shape = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    hq, hkv, hd = (24 if shape == "27b" else 16), 4, 256
    dev = torch.device("cuda")
    print(f"# {shape} attention peer: torch {torch.__version__} SDPA, FlashAttention-2 backend, bf16, "
          f"{hq} query / {hkv} kv heads, head_dim {hd}, causal, median of {runs} bursts of {BURST} calls\n")
    print("| batch x tokens | ms | GFLOP | TFLOP/s | GQA |\n|---|---|---|---|---|")
    for b, t in [(1, 298), (1, 1502), (1, 2270), (1, 8192), (8, 1502)]:
        q = torch.randn(b, hq, t, hd, device=dev, dtype=torch.bfloat16)
        k = torch.randn(b, hkv, t, hd, device=dev, dtype=torch.bfloat16)
        v = torch.randn(b, hkv, t, hd, device=dev, dtype=torch.bfloat16)
        how = "enable_gqa"

        def call():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.0625, enable_gqa=True)

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            try:
                call()
            except RuntimeError:
                how = "repeated K/V"
                k = k.repeat_interleave(hq // hkv, dim=1)
                v = v.repeat_interleave(hq // hkv, dim=1)

                def call():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.0625)
            ms = cuda_median_ms(call, runs, BURST)
        gf = b * 4.0 * hq * hd * t * (t + 1) / 2 / 1e9
        print(f"| {b} x {t} | {ms:.3f} | {gf:.1f} | {gf / ms:.1f} | {how} |", flush=True)


if __name__ == "__main__":
    main()
