#!/usr/bin/env python3
"""peer_load.py — the peers of bench_gpu_load: the same release files from the page cache onto
the GPU with PyTorch's own loaders, timed the same way (seconds from the call to the last
tensor on the device, GB/s of the bytes they place, the process's host RSS before and its
peak during the load, VmHWM reset just before).

    python3 peer_load.py RELEASE_DIR safetensors|transformers [device]

safetensors: `safetensors.torch.load_file(shard, device=...)` of every shard the index lists
  (text, vision and lm_head: the floor of reading these files onto the device with the
  reference reader).
transformers: `Qwen3_5ForConditionalGeneration.from_pretrained(dir, dtype=torch.bfloat16,
  device_map=device)`, the way people load the backbone (the joint head files are not
  transformers'; they are left out).
Imports and the CUDA context are made before the clock starts, as bench_gpu_load's are.
"""
import json
import os
import sys
import time

import torch

GIB = 1024 ** 3


def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main():
    rel, mode = sys.argv[1], sys.argv[2]
    device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    with open(os.path.join(rel, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    shard_bytes = sum(os.path.getsize(os.path.join(rel, s)) for s in shards)
    if mode == "safetensors":
        from safetensors.torch import load_file
    else:
        from transformers import Qwen3_5ForConditionalGeneration
    if device.startswith("cuda"):
        torch.zeros(1, device=device)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    peak_ok = reset_peak_rss()
    rss0 = status_bytes("VmRSS")
    t0 = time.time()
    if mode == "safetensors":
        keep = {}
        for s in shards:
            keep.update(load_file(os.path.join(rel, s), device=device))
        placed = sum(t.numel() * t.element_size() for t in keep.values())
    else:
        model = Qwen3_5ForConditionalGeneration.from_pretrained(rel, dtype=torch.bfloat16, device_map=device)
        placed = sum(p.numel() * p.element_size() for p in model.state_dict().values())
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.time() - t0
    hwm = status_bytes("VmHWM")
    dev = torch.cuda.max_memory_allocated() / GIB if device.startswith("cuda") else 0.0
    print(f"| {mode} ({'load_file per shard' if mode == 'safetensors' else 'from_pretrained bf16'}) | "
          f"{dt:.2f} | {placed / 1e9 / dt:.1f} | {shard_bytes / 1e9 / dt:.1f} | {rss0 / GIB:.2f} | {hwm / GIB:.2f} | "
          f"{(hwm - rss0) / GIB:.2f} | {dev:.2f} | {placed / GIB:.2f} |", flush=True)
    if not peak_ok:
        print("(VmHWM could not be reset: the peak is the process's so far)")


if __name__ == "__main__":
    main()
