#!/usr/bin/env python3
"""make_tower_fixtures.py — parity fixtures for the vision tower + merger, from transformers.

The oracle is transformers' Qwen3_5VisionModel (fp32, eager attention) of a saved release,
loaded back with Qwen3_5ForConditionalGeneration.from_pretrained(dtype=float32): its
pooler_output (the merged features that replace the image_pad tokens), given pixel values
that both sides read from the fixture, so the tower is tested alone (the image processor has
its own parity tests).

Configs:
  demo         the committed demo release (demo/clef-demo): depth 2, hidden 32, 2 heads,
               patch 4, a 4x4 position table, BF16.
  b_real_head  a release with the real head width (hd 72, so 18 row + 18 column RoPE
               frequencies), patch 16 (pixel rows of 1536 as Clef), a 16x16 table, BF16.
  c_odd        F32 weights, hd 12 (3 + 3 frequencies), 4 heads, patch 8, a 3x3 table,
               exact-GELU MLP (hidden_act "gelu"), rope_theta 500, depth 3.
Releases b and c are written with scripts/fixtures/make_release.py's write_release(); their
vision weights are then redrawn (seeded) at scales where every step shows: LayerNorm weights
1 + N(0, 0.2) and biases N(0, 0.1); the qkv projection large enough that attention is far
from uniform (so a wrong RoPE or a frame leak changes the output); a position table N(0, 1).

Pixel values: transformers' Qwen2VLImageProcessorPil (the PIL backend; patch, temporal and
merge sizes from the config) on seeded random RGB images of several sizes and aspect ratios,
plus one two-frame input of N(0, 1) rows (the tower attends within each frame).
Cases: each is one forward of several inputs packed together, and each input alone.

Written per config to tests/vision/fixtures/<name>/tower.bin, little-endian:
    magic "CLEFVT02", u32 n_inputs, u32 patch_dim, u32 out_dim,
    per input: u32 t, h, w; f32 pixels[t*h*w][patch_dim];
    u32 n_cases, per case: u32 n, u32 input[n] (packed in that order); u32 n_out;
    f32 out[n_out][out_dim]

Usage: python3 scripts/vision/make_tower_fixtures.py [--out tests/vision/fixtures]
Requirements: pip install -r scripts/requirements.txt (torch, transformers, safetensors, pillow).
"""
from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
from make_release import write_release  # noqa: E402

CONFIGS = {
    "b_real_head": dict(
        dtype="bfloat16", seed=21,
        vision=dict(depth=2, hidden_size=72, intermediate_size=144, num_heads=1, patch_size=16,
                    num_position_embeddings=256, out_hidden_size=64),
        images=[(64, 64), (96, 160), (200, 72), (33, 47)], min_pixels=32 * 32, max_pixels=160 * 160),
    "c_odd": dict(
        dtype="float32", seed=22,
        vision=dict(depth=3, hidden_size=48, intermediate_size=80, num_heads=4, patch_size=8,
                    num_position_embeddings=9, out_hidden_size=64, hidden_act="gelu",
                    rope_parameters=dict(rope_type="axial", rope_theta=500.0)),
        images=[(16, 16), (40, 72), (90, 30), (17, 130)], min_pixels=16 * 16, max_pixels=96 * 96),
}
DEMO = dict(images=[(8, 8), (24, 40), (50, 30), (13, 61)], min_pixels=8 * 8, max_pixels=48 * 48)


def redraw_vision(release: Path, seed: int) -> None:
    """Replace the model.visual.* tensors of release/model.safetensors by seeded draws at
    scales where every step of the tower shows (see the module docstring)."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    path = release / "model.safetensors"
    g = torch.Generator().manual_seed(seed)
    tensors, meta = {}, None
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
        for name in f.keys():
            tensors[name] = f.get_tensor(name)
    for name, t in tensors.items():
        if not name.startswith("model.visual."):
            continue
        shape, dtype = t.shape, t.dtype
        leaf = name.split(".")[-2]
        if "norm" in leaf and name.endswith(".weight"):
            new = 1 + 0.2 * torch.randn(shape, generator=g)
        elif name.endswith(".bias"):
            new = 0.1 * torch.randn(shape, generator=g)
        elif name.endswith("pos_embed.weight"):
            new = torch.randn(shape, generator=g)
        else:
            fan_in = int(np.prod(shape[1:]))
            gain = 1.5 if leaf == "qkv" else 1.0
            new = gain * torch.randn(shape, generator=g) / fan_in ** 0.5
        tensors[name] = new.to(dtype).contiguous()
    save_file(tensors, str(path), metadata=meta)


def pixel_inputs(cfg, images, min_pixels, max_pixels, seed):
    """[(pixels [rows, Pd] fp32, (t, h, w))] from the PIL image processor, plus one 2-frame input."""
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    v = cfg.vision_config
    proc = Qwen2VLImageProcessorPil(patch_size=v.patch_size, temporal_patch_size=v.temporal_patch_size,
                                    merge_size=v.spatial_merge_size, min_pixels=min_pixels,
                                    max_pixels=max_pixels, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    rng = np.random.default_rng(seed)
    out = []
    for h, w in images:
        img = Image.fromarray(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8))
        enc = proc(images=[img], return_tensors="pt")
        grid = tuple(int(x) for x in enc["image_grid_thw"][0])
        out.append((enc["pixel_values"].float(), grid))
    # a two-frame input (video-like): each frame is its own attention sequence
    Pd = v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    gt, gh, gw = 2, 2 * v.spatial_merge_size, 3 * v.spatial_merge_size
    frames = torch.from_numpy(rng.standard_normal((gt * gh * gw, Pd)).astype(np.float32))
    out.append((frames, (gt, gh, gw)))
    return out


def write_fixture(release: Path, spec: dict, seed: int, out_file: Path) -> None:
    from transformers import Qwen3_5ForConditionalGeneration
    model = Qwen3_5ForConditionalGeneration.from_pretrained(
        str(release), dtype=torch.float32, attn_implementation="eager").eval()
    visual = model.model.visual
    cfg = model.config
    inputs = pixel_inputs(cfg, spec["images"], spec["min_pixels"], spec["max_pixels"], seed)
    cases = [list(range(len(inputs)))] + [[i] for i in range(len(inputs))]  # all packed, each alone
    v = cfg.vision_config
    Pd = v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    with open(out_file, "wb") as f:
        f.write(b"CLEFVT02")
        f.write(struct.pack("<III", len(inputs), Pd, v.out_hidden_size))
        for pixels, g in inputs:
            f.write(struct.pack("<III", *g))
            f.write(pixels.numpy().astype("<f4").tobytes())
        f.write(struct.pack("<I", len(cases)))
        for case in cases:
            pixels = torch.cat([inputs[i][0] for i in case], dim=0)
            grid = torch.tensor([inputs[i][1] for i in case], dtype=torch.long)
            with torch.no_grad():
                feats = visual(pixels, grid_thw=grid).pooler_output.float()
            f.write(struct.pack(f"<I{len(case)}I", len(case), *case))
            f.write(struct.pack("<I", feats.shape[0]))
            f.write(feats.numpy().astype("<f4").tobytes())
    print(f"{out_file}: {len(cases)} cases, grids {[g for _, g in inputs]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "vision" / "fixtures"))
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    (out / "demo").mkdir(exist_ok=True)
    write_fixture(ROOT / "demo" / "clef-demo", DEMO, 20, out / "demo" / "tower.bin")
    for name, spec in CONFIGS.items():
        d = out / name
        write_release(d, vision_config=spec["vision"], seed=spec["seed"], dtype=spec["dtype"])
        redraw_vision(d, spec["seed"] + 100)
        write_fixture(d, spec, spec["seed"], d / "tower.bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
