#!/usr/bin/env python3
"""make_e2e_fixtures.py — end-to-end oracle fixtures for `decide` (tests/model/).

Runs the release's reference path — encode_record() + the transformers Qwen3.5 backbone +
JointSchemaHead, i.e. the reference ClefModel and systemone() of joint_schema_model.py — over a
set of records on three tiny releases with a tokenizer, and writes one fixture per release:

  tests/model/fixtures/e2e.json          the committed demo release demo/clef-demo (made by
                                         scripts/demo/make_demo.py: hidden 128, a 4-head head)
  tests/model/fixtures/e2e_sharded.json  tests/model/fixtures/tiny-sharded, written here with
                                         scripts/fixtures/make_release.py: hidden 64, BF16
                                         split into several shards + index, every norm and head
                                         scalar randomised, the demo's tokenizer
  tests/model/fixtures/e2e_f16.json      tests/model/fixtures/tiny-f16: the same kind of release
                                         stored in F16 (backbone and head; A_log and the GDN
                                         norm F32 as published), one shard; the oracle runs on
                                         the F16 weights

  {"release": "<dir>", "max_length": N,
   "records": [{"name", "request",            the request body decide() receives
                "ids",                        encode_record()'s input_ids
                "truncated_tokens",           state tokens encode_record() cut to fit
                "logits": [[...] per question, options in presented order],
                "probs":  [[...] ...],        softmax of the logits
                "answer": {...}}]}            systemone()'s response body
(Our answer adds usage.truncated_tokens when the state was cut, as spec/api.md asks; the
reference's body has no such field, so the test inserts it into the expected body.)

Logits and probabilities come from the oracle evaluated in float64 (backbone and head, same
weights), i.e. the exact values to fp32 rounding; the answer from the oracle's own float32 run
(systemone() as published). Floats are written with Python's repr of the fp32 value (exact).

The records cover: the demo record; one noul question on a tiny state; ten questions of every
type with non-ASCII text, nested state and explicit/absent/empty instructions; a choice with 40
options and a 10-level score; and a state long enough to be cut to max_length (truncation).

Usage: python3 scripts/head/make_e2e_fixtures.py [--only demo|sharded|f16]
(pip install -r scripts/requirements.txt)
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))

import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)
from make_demo import hf_tokenizer  # noqa: E402

MAX_LENGTH = 2048


def records(rng: random.Random) -> list[tuple[str, dict]]:
    demo = json.loads((ROOT / "demo" / "record.json").read_text())
    out = [("demo_record", demo)]
    out.append(("one_noul", {"state": "ok", "questions": {
        "fine": {"type": "noul", "instructions": "Is everything fine?"}}}))
    questions = {}
    for i in range(10):
        kind = ["noul", "choice", "score"][i % 3]
        q = {"type": kind}
        if i % 4 == 0:
            q["instructions"] = f"Question {i}: décide — ¿sí o no? 日本語 {i * 1.5}"
        elif i % 4 == 1:
            q["instructions"] = ""  # falls back to the id
        elif i % 4 == 2:
            q["instructions"] = {"ask": "structured instructions", "weight": i}
        if kind == "choice":
            q["criteria"] = {f"opt_{c}": (None if c == "b" else f"option {c} ✓")
                             for c in "dcba"[: 2 + i % 3]}
        elif kind == "score":
            q["criteria"] = [f"level {k}" for k in range(3 + i % 4)]
        elif i % 2:
            q["criteria"] = {"true": "agree", "false": {"why": "disagree"}}
        questions[f"q.{i}-x"] = q
    out.append(("ten_mixed", {"id": 7, "state": {"ünïcode": "naïve café", "nested": {
        "list": [1, 2.5, -0.0, 1e-05, True, None], "big": 12345678901234567890}},
        "questions": questions}))
    out.append(("many_options", {"state": ["a", "b", 3], "questions": {
        "pick": {"type": "choice", "instructions": "Pick the right code.",
                 "criteria": {f"code{k:02d}": f"description of code {k}" for k in range(40)}},
        "rate": {"type": "score", "instructions": "Rate it.",
                 "criteria": [f"r{k}" for k in range(10)]}}}))
    words = "refund order late package broken angry calm invoice total".split()
    long_state = {"log": [" ".join(rng.choices(words, k=12)) for _ in range(200)]}
    out.append(("truncated_state", {"state": long_state, "questions": {
        "late": {"type": "noul", "instructions": "Was the package late?"}}}))
    return out


def floats(t: torch.Tensor) -> list[float]:
    return [float(x) for x in t.to(torch.float32).tolist()]


SHARDED = "tests/model/fixtures/tiny-sharded"
F16 = "tests/model/fixtures/tiny-f16"


def make_sharded_release(release_rel: str = SHARDED, dtype: str = "bfloat16", seed: int = 11,
                         max_shard_size: str | None = "300KB") -> None:
    import shutil
    sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
    from make_release import write_release

    out = ROOT / release_rel
    if out.exists():
        shutil.rmtree(out)
    demo = ROOT / "demo" / "clef-demo"
    vocab = json.loads((demo / "config.json").read_text())["text_config"]["vocab_size"]
    write_release(out, text_config={"vocab_size": vocab}, seed=seed, randomize_norms=True,
                  max_shard_size=max_shard_size, tokenizer_dir=demo, dtype=dtype)
    # the demo tokenizer's media token ids, as make_demo.py sets them
    config = json.loads((out / "config.json").read_text())
    for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        config[key] = json.loads((demo / "config.json").read_text())[key]
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["demo", "sharded", "f16"], help="one fixture (default: all)")
    args = ap.parse_args()
    if args.only in (None, "demo"):
        write_fixture("demo/clef-demo", ROOT / "tests" / "model" / "fixtures" / "e2e.json")
    if args.only in (None, "sharded"):
        make_sharded_release()
        write_fixture(SHARDED, ROOT / "tests" / "model" / "fixtures" / "e2e_sharded.json")
    if args.only in (None, "f16"):
        make_sharded_release(F16, dtype="float16", seed=12, max_shard_size=None)
        write_fixture(F16, ROOT / "tests" / "model" / "fixtures" / "e2e_f16.json")


def write_fixture(release_rel: str, out_path: Path) -> None:
    from safetensors.torch import load_file
    from transformers import Qwen3_5ForConditionalGeneration

    torch.set_num_threads(2)
    mod = clef_oracle.load_reference()
    release = ROOT / release_rel
    tokenizer = hf_tokenizer(release)
    head_cfg = json.loads((release / "joint_head_config.json").read_text())
    head_state = {k: v.float() for k, v in load_file(str(release / "joint_head.safetensors")).items()}

    def clef_model(dtype):
        backbone = Qwen3_5ForConditionalGeneration.from_pretrained(
            str(release), dtype=dtype, attn_implementation="eager").eval()
        head = mod.JointSchemaHead(**head_cfg)
        head.load_state_dict(head_state, strict=True)
        return mod.ClefModel(backbone, head.to(dtype)).eval()

    exact, published = clef_model(torch.float64), clef_model(torch.float32)

    class TextOnlyProcessor:
        pass

    processor = TextOnlyProcessor()
    processor.tokenizer = tokenizer

    out = {"release": release_rel, "max_length": MAX_LENGTH, "records": []}
    for name, record in records(random.Random(5)):
        request = copy.deepcopy(record)
        encoded = mod.encode_record(tokenizer, request, max_length=MAX_LENGTH)
        uncut = mod.encode_record(tokenizer, request, max_length=1 << 30)
        batch = mod.collate_records([encoded], tokenizer.pad_token_id, torch.device("cpu"))
        with torch.inference_mode():
            logits = exact(batch)[0]
        body = dict(request)
        body.setdefault("model", Path(release_rel).name)
        answer = mod.systemone(published, processor, body, max_length=MAX_LENGTH)
        out["records"].append({
            "name": name, "request": request, "ids": list(encoded.input_ids),
            "truncated_tokens": len(uncut.input_ids) - len(encoded.input_ids),
            "logits": [floats(q) for q in logits],
            "probs": [floats(q.softmax(-1)) for q in logits],
            "answer": answer})
        print(f"{release_rel} {name}: {len(encoded.input_ids)} tokens, {len(logits)} questions")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
