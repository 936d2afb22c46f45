#!/usr/bin/env python3
"""torch_head.py — the PyTorch side of bench/head: the reference JointSchemaHead on CPU.

--write FILE: write the bench inputs (random bf16 head weights at the given config, N(0, 0.02)
as performance.md asks, fp32 hidden states, lm_head rows, a record of Q questions x O options)
to one safetensors file that bench_head (C) reads too.
--time FILE: in a fresh process, load the head from FILE as the reference loader does
(load_file + JointSchemaHead.load_state_dict, float32), then time its forward with the given
threads: one warm-up run, then the median of --runs. Prints one JSON line:
{"median_ms", "runs", "peak_rss_mb"} (peak RSS of this process, loading included).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)


def write(a, mod) -> None:
    torch.manual_seed(0)
    cfg = dict(hidden_size=a.hidden, width=a.width, routing_layers=a.routing_layers,
               layers=a.layers, heads=a.heads, feedforward=a.feedforward)
    head = mod.JointSchemaHead(**cfg).eval()
    with torch.no_grad():
        for p in head.parameters():
            p.copy_((torch.randn(p.shape) * 0.02).to(torch.bfloat16).float())
    # a record laid out like encode_record's: questions after the state, 8-token
    # instructions, 5-token options
    pos = a.tokens - a.questions * (12 + a.options * 7) - 20
    assert pos > 0, "--tokens too small for the record"
    questions = []
    for q in range(a.questions):
        span = [pos + 4, pos + 12]
        pos += 12
        options = []
        for _ in range(a.options):
            options.append([pos + 2, pos + 7])
            pos += 7
        questions.append({"type": q % 3, "span": span, "options": options})
    tensors = {f"head.{k}": v.to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    tensors.update({"lm_head.weight": (torch.randn(a.vocab, a.hidden) * 0.02).to(torch.bfloat16),
                    "input.hidden": torch.randn(a.tokens, a.hidden),
                    "input.ids": torch.randint(0, a.vocab, (a.tokens,), dtype=torch.int32)})
    save_file(tensors, a.write, metadata={"config": json.dumps(cfg),
                                          "record": json.dumps({"questions": questions})})


def time_forward(a, mod) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(a.time, "pt") as f:
        meta = f.metadata()
    cfg = json.loads(meta["config"])
    questions = json.loads(meta["record"])["questions"]
    tensors = load_file(a.time)
    head = mod.JointSchemaHead(**cfg)
    head.load_state_dict({k[5:]: v for k, v in tensors.items() if k.startswith("head.")})
    head = head.float().eval()
    hidden, ids = tensors["input.hidden"], tensors["input.ids"].long()
    lm = tensors["lm_head.weight"].float()
    del tensors
    record = mod.EncodedRecord(
        input_ids=tuple(ids.tolist()),
        questions=tuple(mod.EncodedQuestion(str(i), q["type"], tuple(q["span"]),
                                            tuple(map(tuple, q["options"])),
                                            tuple(str(j) for j in range(len(q["options"]))))
                        for i, q in enumerate(questions)), record_id="bench")
    mask = torch.ones((1, len(ids)), dtype=torch.long)
    times = []
    with torch.inference_mode():
        for i in range(a.runs + 1):
            t0 = time.perf_counter()
            head(hidden.unsqueeze(0), ids.unsqueeze(0), mask, [record], lm)
            if i:  # run 0 is the warm-up
                times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times), "runs": a.runs,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", help="write weights and inputs to this safetensors file")
    ap.add_argument("--time", help="time the reference head on this file")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--routing-layers", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--feedforward", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--options", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    mod = clef_oracle.load_reference()
    if a.write:
        write(a, mod)
    if a.time:
        time_forward(a, mod)


if __name__ == "__main__":
    main()
