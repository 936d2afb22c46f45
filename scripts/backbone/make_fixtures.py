#!/usr/bin/env python3
"""make_fixtures.py — parity fixtures for the Qwen3.5 text backbone, from transformers.

For each config below it writes a real Clef release into tests/backbone/fixtures/<name>/ with
scripts/fixtures/make_release.py's write_release(): a `transformers.Qwen3_5ForConditionalGeneration`
with random weights saved by `save_pretrained` (config.json, model.safetensors), the reference
JointSchemaHead (joint_head.safetensors, joint_head_config.json) — so the C test opens it with
the real release reader (clef_release_open) and loads the backbone with qwen35_load_release.
Weights: seeded; matrices and embeddings ~ N(0, 0.05) (text initializer_range), every norm
weight ~ N(0, 0.1) (randomize_norms: a (1 + w) vs w mistake shows), A_log and dt_bias as
transformers initialises them (A = e^A_log ~ U(0.01, 16), dt_bias = 1); A_log and the GDN norm
weight stored F32 as in the published releases.

The oracle is the SAVED release loaded back with from_pretrained(dtype=float32), eager
attention, no cache, text only: fp32 math on exactly the stored (BF16-rounded) weights, with
buffers (rotary inv_freq) computed in fp32. (An in-memory model cast to BF16 and back would
carry a BF16-rounded inv_freq, a different function from the release.)

Written per config: parity.bin, little-endian:
    magic "CLEFBB01", u32 n_records, u32 hidden_size, then per record:
    u32 T, i32 ids[T], u32 n_rows, i32 rows[n_rows], f32 hidden[n_rows][hidden_size]
`hidden` is Qwen3_5Model(...).last_hidden_state (after the final norm) at the listed rows: all
rows of short records, a spread subset (first, last, every k-th) of the long ones, to keep the
committed files small.

Configs: (a) the 3:1 layer pattern at small width; (b) the real per-head shapes (attention
head_dim 256, 64 rotary dims, GQA 6:1; GDN dk = dv = 128, Hv/Hk = 3); (c) odd sizes (Hv/Hk = 2,
F32 weights, odd widths, lengths not multiples of 64); (d) a release stored in F16.

Usage: python3 scripts/backbone/make_fixtures.py [--out tests/backbone/fixtures] [--only a_pattern,c_odd]
Requirements: pip install -r scripts/requirements.txt; the reference head file is located by
scripts/clef_oracle.py (its docstring says where it looks and which environment variables it reads).
"""
from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from make_release import write_release  # noqa: E402

ROPE = dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25, mrope_interleaved=True)
# Shared by the three configs: larger weights than transformers' 0.02 so every layer moves
# the residual stream visibly; no tied embeddings (Clef releases have an lm_head).
COMMON_TEXT = dict(initializer_range=0.05, rms_norm_eps=1e-6, tie_word_embeddings=False,
                   linear_conv_kernel_dim=4)

CONFIGS = {
    # (a) 3:1 pattern, 8 layers (full attention at 3 and 7), small width, BF16
    "a_pattern": dict(
        dtype="bfloat16", seed=1, lengths=[1, 2, 17, 64, 200, 2100],
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                  linear_value_head_dim=16, rope_parameters=dict(ROPE, mrope_section=[2, 1, 1]))),
    # (b) the real per-head shapes of Clef at a few layers, BF16
    "b_real_heads": dict(
        dtype="bfloat16", seed=2, lengths=[1, 130, 2048],
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  num_attention_heads=6, num_key_value_heads=1, head_dim=256,
                  linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=128,
                  linear_value_head_dim=128, rope_parameters=dict(ROPE, mrope_section=[11, 11, 10]))),
    # (c) odd sizes, F32 weights
    "c_odd": dict(
        dtype="float32", seed=3, lengths=[1, 63, 65, 1000, 129],
        text=dict(vocab_size=300, hidden_size=48, intermediate_size=100, num_hidden_layers=5,
                  num_attention_heads=3, num_key_value_heads=1, head_dim=64,
                  linear_num_key_heads=3, linear_num_value_heads=6, linear_key_head_dim=24,
                  linear_value_head_dim=24, rope_parameters=dict(ROPE, mrope_section=[3, 3, 2]))),
    # (d) an F16 release: every matrix, embedding and norm stored as IEEE half (A_log and the
    # GDN norm F32 as published); the oracle runs fp32 on the F16-rounded weights
    "d_f16": dict(
        dtype="float16", seed=4, lengths=[1, 40, 300, 1100],
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                  linear_value_head_dim=16, rope_parameters=dict(ROPE, mrope_section=[2, 1, 1]))),
}

FULL_ROWS_UP_TO = 130   # records up to this length store every row
SUBSET_ROWS = 48        # longer records store about this many rows


def write_fixture_release(spec, out_dir: Path) -> None:
    """A Clef release (backbone + head + tiny vision tower) sized to the config's width."""
    D = spec["text"]["hidden_size"]
    write_release(out_dir, text_config=dict(COMMON_TEXT, **spec["text"]),
                  vision_config=dict(depth=1, out_hidden_size=D),
                  head_config=dict(hidden_size=D), seed=spec["seed"], randomize_norms=True,
                  dtype=spec["dtype"])


def rows_for(T: int) -> list[int]:
    if T <= FULL_ROWS_UP_TO:
        return list(range(T))
    step = max(1, T // SUBSET_ROWS)
    rows = sorted(set(list(range(0, T, step)) + [1, 63, 64, 65, T - 2, T - 1]))
    return [r for r in rows if r < T]


def write_parity(spec, out_dir: Path, name: str) -> None:
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/backbone/fixtures")
    ap.add_argument("--only", default=None, help="comma-separated config names")
    args = ap.parse_args()
    for name, spec in CONFIGS.items():
        if args.only and name not in args.only.split(","):
            continue
        out_dir = Path(args.out) / name
        write_fixture_release(spec, out_dir)
        write_parity(spec, out_dir, name)


if __name__ == "__main__":
    main()
