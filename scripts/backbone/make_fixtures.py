#!/usr/bin/env python3
"""make_fixtures.py — parity fixtures for the Qwen3.5 text backbone, from transformers.

For each config below it builds a `transformers.Qwen3_5ForConditionalGeneration` with random
weights (seeded; norm weights ~ N(0, 0.1) so a (1 + w) vs w mistake shows; A_log and dt_bias
spread so the gates matter), saves it with `save_pretrained` into tests/backbone/fixtures/<name>/
(the release directory the C test loads), and runs the model in fp32 (eager attention, no cache,
text only) on token sequences of several lengths. The oracle is the saved release loaded
back with from_pretrained(dtype=float32): fp32 math on exactly the stored weights.

Written per config: parity.bin, little-endian:
    magic "CLEFBB01", u32 n_records, u32 hidden_size, then per record:
    u32 T, i32 ids[T], u32 n_rows, i32 rows[n_rows], f32 hidden[n_rows][hidden_size]
`hidden` is Qwen3_5Model(...).last_hidden_state (after the final norm) at the listed rows: all
rows of short records, a spread subset (first, last, every k-th) of the long ones, to keep the
committed files small.

Configs: (a) the 3:1 layer pattern at small width; (b) the real per-head shapes (attention
head_dim 256, 64 rotary dims, GQA 6:1; GDN dk = dv = 128, Hv/Hk = 3); (c) odd sizes (Hv/Hk = 2,
F32 weights, odd widths, lengths not multiples of 64).

NOTE: the release writer here is a minimal save_pretrained; it is to be replaced by
scripts/fixtures/make_release.py (write_release) once that lands in main.

Usage: python3 scripts/backbone/make_fixtures.py [--out tests/backbone/fixtures]
Requirements: pip install -r scripts/requirements.txt
"""
from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import numpy as np
import torch

ROPE = dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25, mrope_interleaved=True)
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=4,
              temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=None, num_position_embeddings=16)

CONFIGS = {
    # (a) 3:1 pattern, 8 layers (full attention at 3 and 7), small width, BF16
    "a_pattern": dict(
        dtype="bfloat16", seed=1, lengths=[1, 2, 17, 64, 200, 2100],
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                  linear_value_head_dim=16, linear_conv_kernel_dim=4,
                  rope_parameters=dict(ROPE, mrope_section=[2, 1, 1]))),
    # (b) the real per-head shapes of Clef at a few layers, BF16
    "b_real_heads": dict(
        dtype="bfloat16", seed=2, lengths=[1, 130, 2048],
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  num_attention_heads=6, num_key_value_heads=1, head_dim=256,
                  linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=128,
                  linear_value_head_dim=128, linear_conv_kernel_dim=4,
                  rope_parameters=dict(ROPE, mrope_section=[11, 11, 10]))),
    # (c) odd sizes, F32 weights
    "c_odd": dict(
        dtype="float32", seed=3, lengths=[1, 63, 65, 1000, 129],
        text=dict(vocab_size=300, hidden_size=48, intermediate_size=100, num_hidden_layers=5,
                  num_attention_heads=3, num_key_value_heads=1, head_dim=64,
                  linear_num_key_heads=3, linear_num_value_heads=6, linear_key_head_dim=24,
                  linear_value_head_dim=24, linear_conv_kernel_dim=4,
                  rope_parameters=dict(ROPE, mrope_section=[3, 3, 2]))),
}

FULL_ROWS_UP_TO = 130   # records up to this length store every row
SUBSET_ROWS = 48        # longer records store about this many rows


def build_model(spec):
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    torch.manual_seed(spec["seed"])
    text = dict(spec["text"], rms_norm_eps=1e-6, tie_word_embeddings=False)
    vision = dict(VISION, out_hidden_size=text["hidden_size"])
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    model = Qwen3_5ForConditionalGeneration(cfg).eval()
    g = torch.Generator().manual_seed(spec["seed"] + 100)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1 + (1.0 if name.endswith("linear_attn.norm.weight") else 0.0))
            elif name.endswith("A_log"):
                p.copy_(torch.rand(p.shape, generator=g) * 2.0 - 1.0)   # decay rates e^[-1, 1]
            elif name.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=g))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    if spec["dtype"] == "bfloat16":
        model = model.to(torch.bfloat16)
    return model


def save_release(model, out_dir: Path, dtype: str):
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True, max_shard_size="100GB")
    # the engine reads config.json + *.safetensors; keep the directory minimal
    for extra in ("generation_config.json",):
        p = out_dir / extra
        if p.exists():
            p.unlink()


def rows_for(T: int) -> list[int]:
    if T <= FULL_ROWS_UP_TO:
        return list(range(T))
    step = max(1, T // SUBSET_ROWS)
    rows = sorted(set(list(range(0, T, step)) + [1, 63, 64, 65, T - 2, T - 1]))
    return [r for r in rows if r < T]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/backbone/fixtures")
    ap.add_argument("--only", default=None, help="comma-separated config names")
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    for name, spec in CONFIGS.items():
        if args.only and name not in args.only.split(","):
            continue
        out_dir = Path(args.out) / name
        model = build_model(spec)
        save_release(model, out_dir, spec["dtype"])
        # The oracle is the saved release loaded back in fp32, as a user would load it: fp32
        # math on exactly the stored (BF16-rounded) weights, and buffers (rotary inv_freq)
        # recomputed in fp32 rather than cast through BF16 with the module.
        from transformers import Qwen3_5ForConditionalGeneration
        model = Qwen3_5ForConditionalGeneration.from_pretrained(
            out_dir, dtype=torch.float32, attn_implementation="eager").eval()
        D = spec["text"]["hidden_size"]
        V = spec["text"]["vocab_size"]
        rng = np.random.default_rng(spec["seed"])
        blob = bytearray(b"CLEFBB01" + struct.pack("<II", len(spec["lengths"]), D))
        for T in spec["lengths"]:
            ids = rng.integers(0, V, size=T, dtype=np.int32)
            with torch.no_grad():
                out = model.model(input_ids=torch.from_numpy(ids.astype(np.int64))[None], use_cache=False)
            hidden = out.last_hidden_state[0].float().numpy()
            rows = rows_for(T)
            blob += struct.pack("<I", T) + ids.astype("<i4").tobytes()
            blob += struct.pack("<I", len(rows)) + np.asarray(rows, dtype="<i4").tobytes()
            blob += hidden[rows].astype("<f4").tobytes()
            print(f"{name}: T={T} rows={len(rows)} |h|={np.linalg.norm(hidden):.4f}")
        (out_dir / "parity.bin").write_bytes(bytes(blob))


if __name__ == "__main__":
    main()
