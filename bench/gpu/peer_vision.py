#!/usr/bin/env python3
"""peer_vision.py — the peer of bench_gpu_vision: transformers' Qwen3.5 vision tower
(Qwen3_5VisionModel: patch embedding, interpolated positions, blocks, 2x2 merger) in bf16 on
the same GPU, the same config (27 blocks x 1152, 16 heads of 72, MLP 4304, patch 16,
temporal 2, out 4096 / 5120), random weights (transformers' own init: N(0, 0.02) matrices)
made on the device, and the grid of a 1,000 x 1,500 image from transformers' own smart_resize
(Qwen3.5's defaults: factor 32, min_pixels 65,536, max_pixels 16,777,216).

  python3 peer_vision.py 9b|27b [depth] [runs] [device]

Pixel values: random rows in [-1, 1], already on the device (the processor's output moved
there); the grid is what sets the work. Attention: transformers' default implementation for
the tower (printed). Times: CUDA-synchronized wall clock of model(pixel_values, grid_thw)
under inference_mode, median of runs after 2 warm-ups. Peak: torch.cuda.max_memory_allocated
(weights included). Prints a markdown row matching bench_gpu_vision's table.
"""
import statistics
import sys
import time

import torch


def main():
    shape = sys.argv[1]
    depth = int(sys.argv[2]) if len(sys.argv) > 2 and int(sys.argv[2]) > 0 else 27
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    device = sys.argv[4] if len(sys.argv) > 4 else "cuda"
    import transformers
    from transformers import Qwen3_5VisionConfig
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

    cfg = Qwen3_5VisionConfig(depth=depth, hidden_size=1152, intermediate_size=4304, num_heads=16,
                              out_hidden_size=5120 if shape == "27b" else 4096, patch_size=16,
                              temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
                              num_position_embeddings=2304, hidden_act="gelu_pytorch_tanh")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(device):
        model = Qwen3_5VisionModel._from_config(cfg).eval()
    torch.set_default_dtype(torch.float32)
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
    h, w = smart_resize(1500, 1000, factor=32, min_pixels=65536, max_pixels=16777216)
    gh, gw = h // 16, w // 16
    patches = gh * gw
    print("# transformers %s, torch %s, Qwen3_5VisionModel %d blocks, %s, attention %s, weights %.3f GiB; "
          "image 1000 x 1500 -> %d x %d, grid (1, %d, %d)" % (
              transformers.__version__, torch.__version__, depth, dtype, cfg._attn_implementation,
              weights, w, h, gh, gw), flush=True)
    gen = torch.Generator(device=device).manual_seed(1)
    pixels = (torch.rand((patches, 3 * 2 * 16 * 16), generator=gen, device=device) * 2 - 1).to(dtype)
    grid = torch.tensor([[1, gh, gw]], device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    with torch.inference_mode():
        for i in range(runs + 2):
            sync()
            t0 = time.perf_counter()
            out = model(pixels, grid_thw=grid)
            sync()
            if i >= 2:
                times.append((time.perf_counter() - t0) * 1e3)
    merged = out.pooler_output
    assert merged.shape == (patches // 4, cfg.out_hidden_size), merged.shape
    assert torch.isfinite(merged).all()
    ms = statistics.median(times)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    print("| transformers %s | 1000 x 1500 | (1, %d, %d) | %d | %d | %.2f | %.2f-%.2f | %.0f | | | %.3f |" % (
        shape, gh, gw, patches, patches // 4, ms, min(times), max(times), patches / (ms * 1e-3), peak), flush=True)


if __name__ == "__main__":
    main()
