#!/usr/bin/env python3
"""peer_gdn.py — the peer of bench_gpu_cores' delta-rule rows: flash-linear-attention's
chunk_gated_delta_rule (the chunked WY form in Triton) on the same GPU, at the same heads and
token counts (27B: 16 k-heads / 48 v-heads, 9B: 16 / 32, head dims 128; 298, 1,502, 2,270,
8,192 tokens, and 8 x 1,502 as packed records through cu_seqlens). As the model calls it: q
and k L2-normalised inside (use_qk_l2norm_in_kernel), scale 1/sqrt(128), the final state
returned, no initial state. Inputs bf16 (the model's dtype under transformers): q, k, v
N(0, 1), g in [-0.5, 0), beta in (0.05, 0.95), as bench_gpu_cores. Times: CUDA events around
one call, synchronised, median of `runs` after 3 warm-ups (bench_gpu_cores synchronises each
call too). With `kernels`, also the per-kernel GPU time of one 2,270-token call (torch.profiler).

  python3 peer_gdn.py 9b|27b [runs] [kernels]
"""
import sys

import torch
from peer_timing import cuda_median_ms


def main():
    shape = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    per_kernel = "kernels" in sys.argv[3:]
    import fla
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    hk, hv, d = 16, (48 if shape == "27b" else 32), 128
    dev = torch.device("cuda")
    print(f"# {shape} delta-rule peer: flash-linear-attention {getattr(fla, '__version__', '?')} "
          f"chunk_gated_delta_rule, torch {torch.__version__}, bf16, {hk} k / {hv} v heads, dk = dv = {d}, "
          f"median of {runs} (ms)\n")
    print("| batch x tokens | ms |\n|---|---|")
    gen = torch.Generator(device=dev).manual_seed(1)
    for b, t in [(1, 298), (1, 1502), (1, 2270), (1, 8192), (8, 1502)]:
        n = b * t
        q = torch.randn(1, n, hk, d, device=dev, dtype=torch.bfloat16, generator=gen)
        k = torch.randn(1, n, hk, d, device=dev, dtype=torch.bfloat16, generator=gen)
        v = torch.randn(1, n, hv, d, device=dev, dtype=torch.bfloat16, generator=gen)
        g = (-0.5 * torch.rand(1, n, hv, device=dev, generator=gen)).to(torch.bfloat16)
        beta = (0.05 + 0.9 * torch.rand(1, n, hv, device=dev, generator=gen)).to(torch.bfloat16)
        cu = torch.arange(0, n + 1, t, device=dev, dtype=torch.long) if b > 1 else None

        def call():
            return chunk_gated_delta_rule(q, k, v, g, beta, scale=d ** -0.5, output_final_state=True,
                                          use_qk_l2norm_in_kernel=True, cu_seqlens=cu)

        with torch.no_grad():
            print(f"| {b} x {t} | {cuda_median_ms(call, runs):.3f} |", flush=True)
            if per_kernel and b == 1 and t == 2270:
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    call()
                    torch.cuda.synchronize()
                print("\nper kernel, one call at 2,270 tokens (us):")
                for e in prof.key_averages():
                    us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                    if us > 0:
                        print(f"  {e.key[:70]:70s} {us:9.1f}")
                print()


if __name__ == "__main__":
    main()
