#!/usr/bin/env python3
"""make_fixtures.py — oracle fixtures for the joint schema head (tests/head/).

Each case instantiates the reference `JointSchemaHead` (the release's joint_schema_model.py,
loaded by path from the pinned unsloth wheel: see scripts/clef_oracle.py) with random weights,
feeds it random fp32 final hidden states, token ids, spans and lm_head rows, and writes one
safetensors file:

  head.<name>          BF16  every parameter of the head, named as in joint_head.safetensors
                             (the oracle runs with exactly these bf16 values, widened to fp32)
  lm_head.weight       BF16  [V, D] the output embedding the lexical vectors are gathered from
  input.hidden         F32   [T, D] final hidden states (the backbone's last_hidden_state)
  input.ids            I32   [T]    token ids (only option spans are read, for lm_head rows)
  expected.logits      F32   [n_options_total] the oracle's logits, questions in order,
                             options in presented order, evaluated in float64 (exact to fp32
                             rounding) and stored as fp32
  expected.probs       F32   [n_options_total] softmax of each question's logits, likewise
  oracle_fp32.logits   F32   the same oracle run in float32 PyTorch, and its probabilities
  oracle_fp32.probs          (reported by the test next to ours, not the reference: its own
                             rounding is up to ~1e-6 in probability on the clamp case)
  __metadata__.config  JSON  joint_head_config.json of the case
  __metadata__.record  JSON  {"questions": [{"type": 0|1|2, "span": [b, e],
                                              "options": [[b, e], ...]}, ...]}

The norms, biases and the three scalars (prior/joint logit scale, residual gate) are drawn at
random instead of left at their initial values, so every term of the head is exercised; one case
puts prior_logit_scale above ln(100) to exercise the clamp.

Usage: python3 scripts/head/make_fixtures.py [--out tests/head/fixtures]
(pip install -r scripts/requirements.txt first).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import struct
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)

# name -> head config, record shape. Widths are small so the committed files stay small; the
# per-head width varies (1 .. 16 dims per attention head) and the question/option counts
# cover the limits of api.md (1 question, 64 questions, 255 options).
CASES = {
    "one_question": dict(
        config=dict(hidden_size=64, width=32, routing_layers=2, layers=2, heads=4, feedforward=64),
        questions=[("noul", 2)], state_tokens=17, vocab=300, seed=1),
    "mixed_types": dict(
        config=dict(hidden_size=96, width=64, routing_layers=2, layers=4, heads=4, feedforward=128),
        questions=[("choice", 3), ("noul", 2), ("score", 5), ("choice", 7), ("score", 2)],
        state_tokens=150, vocab=400, seed=2),
    "q64": dict(
        config=dict(hidden_size=32, width=32, routing_layers=1, layers=1, heads=2, feedforward=48),
        questions=[(["noul", "choice", "score"][i % 3], 2 + (i * 7) % 4) for i in range(64)],
        state_tokens=40, vocab=300, seed=3),
    "opt255": dict(
        config=dict(hidden_size=40, width=48, routing_layers=3, layers=2, heads=3, feedforward=96),
        questions=[("choice", 255), ("score", 10)], state_tokens=9, vocab=500, seed=4,
        prior_scale_above_clamp=True),
    "wide_heads16": dict(
        config=dict(hidden_size=64, width=128, routing_layers=2, layers=1, heads=16, feedforward=256),
        questions=[("choice", 4), ("noul", 2), ("score", 3)], state_tokens=61, vocab=256, seed=5),
}

TYPE_IDS = {"noul": 0, "choice": 1, "score": 2}


def make_record(rng: random.Random, questions, state_tokens: int):
    """A token layout like encode_record's: prefix, state, then per question a header, the
    instruction span, and option spans separated by a few tokens, then a suffix."""
    pos = 20 + state_tokens  # prefix + state
    record = []
    for qtype, n_options in questions:
        pos += rng.randint(8, 14)  # "\nFIELD i\nID: ...\nTYPE: ...\nINSTRUCTION: "
        span_len = rng.randint(1, 12)
        span = [pos, pos + span_len]
        pos += span_len + 4  # "\nALLOWED OPTIONS:\n"
        options = []
        for _ in range(n_options):
            pos += 3  # "OPTION j: "
            opt_len = rng.randint(1, 9)
            options.append([pos, pos + opt_len])
            pos += opt_len + 1  # "\n"
        pos += 3  # "END FIELD\n"
        record.append({"type": TYPE_IDS[qtype], "span": span, "options": options})
    n_tokens = pos + 18  # suffix
    return record, n_tokens


def randomize_head(head: torch.nn.Module, gen: torch.Generator, prior_above_clamp: bool) -> None:
    with torch.no_grad():
        for name, p in head.named_parameters():
            module = name.rsplit(".", 1)[0].split(".")[-1]
            if "norm" in module and name.endswith(".weight"):  # LayerNorm gains
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            elif name == "prior_logit_scale":
                p.fill_(5.3 if prior_above_clamp else 0.7)
            elif name == "joint_logit_scale":
                p.fill_(1.1)
            elif name == "residual_gate":
                p.fill_(0.3)
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
            # every parameter as the release stores it: bf16
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def make_case(mod, name: str, spec: dict, out_dir: Path) -> dict:
    rng = random.Random(spec["seed"])
    gen = torch.Generator().manual_seed(spec["seed"])
    cfg = spec["config"]
    head = mod.JointSchemaHead(**cfg).eval()
    randomize_head(head, gen, spec.get("prior_scale_above_clamp", False))

    record, n_tokens = make_record(rng, spec["questions"], spec["state_tokens"])
    D, V = cfg["hidden_size"], spec["vocab"]
    hidden = torch.randn((n_tokens, D), generator=gen) * 2.0 + 0.3
    ids = torch.randint(0, V, (n_tokens,), generator=gen, dtype=torch.int64)
    lm_head = (torch.randn((V, D), generator=gen) * 0.05).to(torch.bfloat16)

    encoded = mod.EncodedRecord(
        input_ids=tuple(ids.tolist()),
        questions=tuple(
            mod.EncodedQuestion(
                question_id=f"q{i}", question_type=q["type"], question_span=tuple(q["span"]),
                option_spans=tuple(tuple(o) for o in q["options"]),
                option_ids=tuple(str(j) for j in range(len(q["options"]))))
            for i, q in enumerate(record)),
        record_id=name)
    def run(dtype):
        model = copy.deepcopy(head).to(dtype)
        with torch.inference_mode():
            logits = model(hidden.to(dtype).unsqueeze(0), ids.unsqueeze(0),
                           torch.ones((1, n_tokens), dtype=torch.long), [encoded],
                           lm_head.to(dtype))[0]
            probs = [q.softmax(-1) for q in logits]
        return (torch.cat(logits).to(torch.float32).contiguous(),
                torch.cat(probs).to(torch.float32).contiguous())

    # The reference: the oracle evaluated exactly (float64 arithmetic on the same bf16 weights
    # and fp32 inputs). The oracle's own float32 run is kept too, for comparison: with logits
    # near the clamp (|logit| ~ 50) its rounding alone moves probabilities by ~1e-6.
    flat_logits, flat_probs = run(torch.float64)
    fp32_logits, fp32_probs = run(torch.float32)

    tensors = {f"head.{k}": v.to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    tensors["lm_head.weight"] = lm_head.contiguous()
    tensors["input.hidden"] = hidden.contiguous()
    tensors["input.ids"] = ids.to(torch.int32).contiguous()
    tensors["expected.logits"] = flat_logits
    tensors["expected.probs"] = flat_probs
    tensors["oracle_fp32.logits"] = fp32_logits
    tensors["oracle_fp32.probs"] = fp32_probs
    path = out_dir / f"{name}.safetensors"
    metadata = {"config": json.dumps(cfg), "record": json.dumps({"questions": record})}
    save_file(tensors, str(path), metadata=metadata)
    fix_metadata_order(path, list(metadata))
    return {"case": name, "tokens": n_tokens, "questions": len(record),
            "options": int(flat_logits.numel()), "bytes": path.stat().st_size}


def fix_metadata_order(path: Path, order: list[str]) -> None:
    """Rewrite the header's __metadata__ members in `order`, in place.

    safetensors keeps the metadata in a hash map, so with two or more keys their order in the
    written header changes from run to run, and so would the fixture's bytes. Reordering the
    members keeps the header the same length (the padding is untouched) and changes nothing else.
    """
    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    text = data[8:8 + n].decode("utf-8")
    body = text.rstrip(" ")
    header = json.loads(body)
    if json.dumps(header, separators=(",", ":"), ensure_ascii=False) != body:
        raise RuntimeError(f"{path}: header is not compact JSON as expected; not reordering it")
    header["__metadata__"] = {k: header["__metadata__"][k] for k in order}
    fixed = json.dumps(header, separators=(",", ":"), ensure_ascii=False) + text[len(body):]
    data[8:8 + n] = fixed.encode("utf-8")
    path.write_bytes(bytes(data))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "tests/head/fixtures"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    mod = clef_oracle.load_reference()
    for name, spec in CASES.items():
        print(json.dumps(make_case(mod, name, spec, out)))


if __name__ == "__main__":
    main()
