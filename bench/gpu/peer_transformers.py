#!/usr/bin/env python3
"""peer_transformers.py — the peer of bench_gpu_forward: transformers' Qwen3.5 text model
(Qwen3_5TextModel) in bf16 on the same GPU, same shapes and cases, random weights
(transformers' own init: N(0, 0.02) matrices) made on the device.

  python3 peer_transformers.py 9b|27b [layers] [runs]

Attention: transformers' default implementation (sdpa). The gated delta rule and the causal
conv use flash-linear-attention's Triton kernels when the package is importable (the script
says which), else transformers' torch fallback. Times: CUDA-synchronized wall clock of
model(input_ids).last_hidden_state under inference_mode, median of runs after 2 warm-ups
(the first compiles/autotunes Triton kernels). Peak: torch.cuda.max_memory_allocated.
Prints markdown rows matching bench_gpu_forward's table.
"""
import statistics
import sys
import time

import torch


def config(shape, layers):
    from transformers import Qwen3_5TextConfig
    big = shape == "27b"
    n = layers or (64 if big else 32)
    return Qwen3_5TextConfig(
        vocab_size=248320, hidden_size=5120 if big else 4096, intermediate_size=17408 if big else 12288,
        num_hidden_layers=n, num_attention_heads=24 if big else 16, num_key_value_heads=4, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=48 if big else 32, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, tie_word_embeddings=False,
        layer_types=["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)],
        rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                             mrope_section=[11, 11, 10], mrope_interleaved=True))


def main():
    shape = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 and int(sys.argv[2]) > 0 else 0
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    try:
        import fla  # noqa: F401
        gdn = "flash-linear-attention %s" % getattr(fla, "__version__", "?")
    except Exception as e:  # the peer still runs, on the torch fallback
        gdn = "torch fallback (fla not importable: %s)" % e
    from transformers import Qwen3_5TextModel
    import transformers
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Qwen3_5TextModel(config(shape, layers)).eval()
    torch.set_default_dtype(torch.float32)
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
    print("# transformers %s, torch %s, %s bf16, GDN: %s, weights %.2f GiB" % (
        transformers.__version__, torch.__version__, shape, gdn, weights), flush=True)
    cases = [(1, 298), (1, 1502), (1, 2270), (1, 8192), (8, 1502)]
    gen = torch.Generator(device="cuda").manual_seed(1)
    for b, T in cases:
        ids = torch.randint(0, 248320, (b, T), device="cuda", generator=gen)
        torch.cuda.reset_peak_memory_stats()
        times = []
        with torch.inference_mode():
            for i in range(runs + 2):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(input_ids=ids, use_cache=False).last_hidden_state
                torch.cuda.synchronize()
                if i >= 2:
                    times.append((time.perf_counter() - t0) * 1e3)
        ms = statistics.median(times)
        print("| transformers %s | %d x %d | %.1f | %.0f | | | | %.2f |" % (
            shape, b, T, ms, b * T / (ms * 1e-3), torch.cuda.max_memory_allocated() / 2**30), flush=True)


if __name__ == "__main__":
    main()
