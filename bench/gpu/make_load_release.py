#!/usr/bin/env python3
"""make_load_release.py — write a BF16 Clef release at the real Clef-flash 9B shapes with random
weights, for bench_gpu_load (page cache to a ready GPU model) and its transformers peer.

What is real: the tensor names, shapes and dtypes, taken from transformers' own
`Qwen3_5ForConditionalGeneration` built on the meta device from the 9B config (text 32 layers,
hidden 4096, vocab 248,320, untied lm_head; the 27-block vision tower; A_log and the GDN norm
weight F32 as the official files have them, everything else BF16), the safetensors layout
(8-byte header length, JSON header, data), shards of at most --shard-size with
`model.safetensors.index.json` as `save_pretrained(max_shard_size=...)` names them, and the
joint head at the 9B head shape (width 1024, routing_layers 2, layers 4, heads 16, feedforward
4096: 121.8 M parameters), its tensor names and shapes those of the reference head's files
(as tests/backbone/fixtures/*/joint_head.safetensors have them, at these sizes). What is not:
the values (N(0, 0.02) BF16 samples, one 64 MiB block of them reused from an offset given by
each tensor's name: a load bench reads bytes, it does not look at them; A_log = 0, norms 0) and
the tokenizer (copied from --tokenizer-dir, the demo release's: a load needs one, its size is
immaterial to the bench).

    python3 make_load_release.py OUT_DIR --tokenizer-dir demo/clef-demo
        [--shard-size 5GB] [--layers 32] [--vocab 248320] [--no-vision]

--layers / --vocab / --no-vision shrink it for a quick check on a small machine. Prints the
files and total bytes. Needs torch and transformers (scripts/requirements.txt).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import struct
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import torch

BLOCK_BYTES = 64 << 20


def config_9b(layers: int, vocab: int, vision: bool) -> dict:
    text = dict(
        model_type="qwen3_5_text", vocab_size=vocab, hidden_size=4096, intermediate_size=12288,
        num_hidden_layers=layers, num_attention_heads=16, num_key_value_heads=4, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
        hidden_act="silu", tie_word_embeddings=False, max_position_embeddings=262144,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                     for i in range(layers)],
        rope_parameters=dict(rope_type="default", rope_theta=10000000.0,
                             partial_rotary_factor=0.25, mrope_section=[11, 11, 10],
                             mrope_interleaved=True),
        partial_rotary_factor=0.25, attention_bias=False, attention_dropout=0.0)
    cfg = dict(architectures=["Qwen3_5ForConditionalGeneration"], model_type="qwen3_5",
               dtype="bfloat16", text_config=text, tie_word_embeddings=False,
               image_token_id=248056, video_token_id=248057, vision_start_token_id=248053,
               vision_end_token_id=248054)
    if vision:
        cfg["vision_config"] = dict(
            model_type="qwen3_5_vision", depth=27, hidden_size=1152, intermediate_size=4304,
            num_heads=16, in_channels=3, patch_size=16, temporal_patch_size=2,
            spatial_merge_size=2, out_hidden_size=4096, num_position_embeddings=2304,
            hidden_act="gelu_pytorch_tanh")
    return cfg


def backbone_tensors(cfg: dict) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of every tensor transformers saves for this config, in its order."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    hf_cfg = Qwen3_5Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    with torch.device("meta"):
        model = Qwen3_5ForConditionalGeneration(hf_cfg)
    out = []
    for name, t in model.state_dict().items():
        if not cfg.get("vision_config") and ".visual." in name:
            continue
        f32 = name.endswith("linear_attn.A_log") or name.endswith("linear_attn.norm.weight")
        out.append((name, "F32" if f32 else "BF16", list(t.shape)))
    return out


def head_tensors(H: int, W: int = 1024, F: int = 4096, routing: int = 2, layers: int = 4):
    """The joint head's tensors (names and shapes of the reference head's files)."""
    t = []

    def lin(p, o, i, bias=True):
        t.append((p + ".weight", [o, i]))
        if bias:
            t.append((p + ".bias", [o]))

    def norm(p, n):
        t.append((p + ".bias", [n]))
        t.append((p + ".weight", [n]))

    def mha(p):
        t.append((p + ".in_proj_bias", [3 * W]))
        t.append((p + ".in_proj_weight", [3 * W, W]))
        lin(p + ".out_proj", W, W)

    for i in range(routing):
        p = f"evidence_layers.{i}"
        mha(p + ".attention")
        lin(p + ".feedforward.0", F, W)
        lin(p + ".feedforward.3", W, F)
        for n in ("feedforward_norm", "memory_norm", "query_norm"):
            norm(f"{p}.{n}", W)
    norm("field_norm", W)
    lin("global_projection", W, H, bias=False)
    norm("hidden_norm", H)
    t.append(("joint_logit_scale", []))
    for i in range(layers):
        p = f"layers.{i}"
        lin(p + ".linear1", F, W)
        lin(p + ".linear2", W, F)
        mha(p + ".multihead_attn")
        for n in ("norm1", "norm2", "norm3"):
            norm(f"{p}.{n}", W)
        mha(p + ".self_attn")
    for p in ("memory_projection", "option_context_projection", "option_lexical_projection"):
        lin(p, W, H, bias=False)
    norm("option_norm", W)
    lin("option_question_projection", W, H, bias=False)
    norm("option_summary_norm", W)
    t.append(("prior_logit_scale", []))
    lin("question_projection", W, H, bias=False)
    t.append(("residual_gate", []))
    lin("residual_scorer.0", W, 4 * W)
    lin("residual_scorer.3", 1, W)
    t.append(("type_embedding.weight", [3, W]))
    return [(n, "BF16", s) for n, s in t], dict(hidden_size=H, width=W, routing_layers=routing,
                                                 layers=layers, heads=16, feedforward=F)


def nbytes(dtype: str, shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * (4 if dtype == "F32" else 2)


class Filler:
    """Tensor bytes: BF16 N(0, 0.02) from one random block (a different offset per tensor);
    F32 tensors (A_log, the GDN norm weight: a few dozen floats each) zero."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        block = (torch.randn(BLOCK_BYTES // 2, generator=g) * 0.02).to(torch.bfloat16)
        self.block = memoryview(ctypes.string_at(block.data_ptr(), BLOCK_BYTES))

    def write(self, f, name: str, dtype: str, n: int):
        if dtype == "F32":
            f.write(bytes(n))
            return
        off = 2 * (zlib.crc32(name.encode()) % (BLOCK_BYTES // 2))
        while n > 0:
            take = min(n, BLOCK_BYTES - off)
            f.write(self.block[off:off + take])
            n -= take
            off = 0


def write_safetensors(path: str, tensors, filler: Filler):
    header, off = {}, 0
    for name, dtype, shape in tensors:
        n = nbytes(dtype, shape)
        header[name] = dict(dtype=dtype, shape=shape, data_offsets=[off, off + n])
        off += n
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb", buffering=0) as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for name, dtype, shape in tensors:
            filler.write(f, name, dtype, nbytes(dtype, shape))
    return off


def parse_size(s: str) -> int:
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9}
    for u, v in units.items():
        if s.upper().endswith(u):
            return int(float(s[:-2]) * v)
    return int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--shard-size", default="5GB")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=248320)
    ap.add_argument("--no-vision", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    cfg = config_9b(a.layers, a.vocab, not a.no_vision)
    tensors = backbone_tensors(cfg)
    limit = parse_size(a.shard_size)
    shards, cur, size = [], [], 0
    for t in tensors:  # save_pretrained's rule: a new shard when the next tensor would overflow
        n = nbytes(t[1], t[2])
        if cur and size + n > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += n
    shards.append(cur)
    filler = Filler()
    weight_map = {}
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    # the shards in parallel (file writes release the GIL): the page cache takes them at memory
    # speed, one thread would not
    with ThreadPoolExecutor(max_workers=min(8, len(shards))) as pool:
        sizes = list(pool.map(lambda fs: write_safetensors(os.path.join(a.out, fs[0]), fs[1], filler),
                              zip(names, shards)))
    total = sum(sizes)
    for fname, sh in zip(names, shards):
        for t in sh:
            weight_map[t[0]] = fname
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    head, head_cfg = head_tensors(4096)
    head_bytes = write_safetensors(os.path.join(a.out, "joint_head.safetensors"), head, filler)
    with open(os.path.join(a.out, "joint_head_config.json"), "w") as f:
        json.dump(head_cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer_dir, name), os.path.join(a.out, name))
    all_bytes = sum(os.path.getsize(os.path.join(a.out, p)) for p in os.listdir(a.out))
    print(f"wrote {a.out}: {len(tensors)} backbone tensors in {len(shards)} shard(s) "
          f"({total / 1e9:.2f} GB), joint head {len(head)} tensors ({head_bytes / 1e9:.3f} GB); "
          f"all files {all_bytes / 1e9:.2f} GB, {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
