#!/usr/bin/env python3
"""make_decide_fixtures.py — whole-model parity fixtures for the quantized releases: decisions,
head logits and last hidden states of NF4, FP8 W8A8 and INT8 ConvRot releases run by
transformers + their own library, with the release's joint_schema_model.py head.

1. Releases (tests/quant/fixtures/decide/), made by the REAL producers
   (scripts/fixtures/make_quantized.py) from one seeded BF16 release that has the demo's
   tokenizer (demo/clef-demo: vocab 2074), so records can be encoded:
     bf16   make_release.write_release: hidden 64, 3 GDN + 1 attention layers, MLP 256
            (down_proj input 256), randomised norms and head scalars, one model.safetensors
     nf4    bitsandbytes NF4 + double quant through transformers, sharded (300 KB) with the
            lm_head moved to lm-head.safetensors and listed in the index, complete.json
     fp8    compressed-tensors FP8_DYNAMIC (attention + MLP linears; GDN stays BF16)
     int8   comfy-kitchen INT8 ConvRot group 256 on the text linears with 256-wide inputs
            (the MLP down_proj; the rest stays BF16, as comfy-kitchen requires; the INT8
            fixture of tests/release/fixtures quantizes every other kind of linear)
   Each gets the demo's tokenizer.json / tokenizer_config.json and media token ids.
2. Records: RECORDS (>= 200) seeded, varied records (records() below): choice / score / noul
   questions, 1 to 4 per record, 2 to 8 options, instructions as text, empty or structured,
   criteria as dicts, lists, null descriptions, states from a word to a few hundred tokens,
   non-ASCII text (records of about 200 to 600 tokens: the prompt template alone is ~200). Written once: tests/quant/fixtures/decide/records.json
   {"max_length", "records": [{"name", "request", "ids"}]} (ids: encode_record()'s).
3. Oracle per precision p in bf16, nf4, fp8, int8 — the release loaded AS STORED in
   transformers with every quantized linear computed by its library, activations in fp32
   (scripts/quant/make_backbone_oracle.py's loaders: bitsandbytes compute dtype fp32,
   compressed-tensors QDQ forward, comfy-kitchen eager int8_linear), and the reference
   JointSchemaHead in fp32 on the release's joint_head.safetensors, exactly as ClefModel.forward
   wires them (get_output_embeddings().weight for the option rows):
     tests/quant/fixtures/decide/<p>_logits.json  {"release", "logits": [record][question]
                                                   [option], "decisions": [record][question]}
         logits as Python repr of the fp32 values (exact); decision = argmax of the logits
         (the option systemone() answers)
     tests/quant/fixtures/decide/<p>_hidden.bin   (nf4, fp8, int8) last_hidden_state (after
         the final norm) of every record at rows {0, one seeded row, T-1}: "CLEFQH01", u32
         n_records, u32 hidden, then per record u32 n_rows, i32 rows[n_rows], f32
         hidden[n_rows][hidden] (the token ids are records.json's; whole matrices of 200
         records would be megabytes, tests/quant/fixtures/<p>_backbone.bin has whole matrices
         of 4 records)
   The bf16 logits hold the engine's BF16 run to the same records (and the BF16 release is
   what the evaluation table compares each precision with).

Usage: python3 scripts/quant/make_decide_fixtures.py [--out tests/quant/fixtures/decide]
                                                     [--records N] [--skip-releases]
pip install -r scripts/requirements.txt
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))
sys.path.insert(0, str(ROOT / "scripts" / "quant"))

import clef_oracle  # noqa: E402
import make_backbone_oracle  # noqa: E402
import make_quantized  # noqa: E402
import make_release  # noqa: E402
from make_demo import hf_tokenizer  # noqa: E402

RECORDS = 200
MAX_LENGTH = 2048
SEED = 2026
DEMO = ROOT / "demo" / "clef-demo"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
MEDIA_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
PRECISIONS = ("bf16", "nf4", "fp8", "int8")

# hidden 64 keeps every release small; MLP 256 gives down_proj a 256-wide input, which INT8
# ConvRot quantizes (group 256).
TEXT = dict(vocab_size=json.loads((DEMO / "config.json").read_text())["text_config"]["vocab_size"],
            intermediate_size=256)

# question ids must match ^[A-Za-z0-9_.-]+$ (spec/api.md): they take ASCII_WORDS only
WORDS = ("refund order late package broken angry calm invoice total customer agent reply "
         "shipping delayed warehouse crédit naïve 日本 ünïcode policy escalate priority "
         "subscription cancel renew discount coupon error timeout login password").split()
ASCII_WORDS = [w for w in WORDS if w.isascii()]


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))


def _state(rng: random.Random):
    kind = rng.randrange(5)
    if kind == 0:
        return _text(rng, 1, 6)
    if kind == 1:
        return {"message": _text(rng, 5, 60), "amount": round(rng.uniform(0, 5000), 2),
                "vip": rng.random() < 0.5}
    if kind == 2:
        return {"log": [_text(rng, 3, 10) for _ in range(rng.randint(2, 6))]}
    if kind == 3:
        return [rng.randint(-1000, 1000), None, _text(rng, 2, 8), {"nested": {"x": 1.5e-3}}]
    return {"ticket": {"subject": _text(rng, 2, 8), "body": _text(rng, 10, 40)},
            "history": [{"from": rng.choice(["customer", "agent"]), "text": _text(rng, 3, 20)}
                        for _ in range(rng.randint(0, 3))]}


def _question(rng: random.Random, i: int) -> dict:
    kind = rng.choice(["choice", "score", "noul"])
    q = {"type": kind}
    form = rng.randrange(4)
    if form == 0:
        q["instructions"] = f"Question {i}: {_text(rng, 2, 12)}?"
    elif form == 1:
        q["instructions"] = ""  # falls back to the id
    elif form == 2:
        q["instructions"] = {"ask": _text(rng, 2, 6), "weight": rng.randint(0, 9)}
    if kind == "choice":
        n = rng.randint(2, 8)
        q["criteria"] = {f"opt_{k}_{rng.choice(WORDS)}": (None if rng.random() < 0.2
                                                          else _text(rng, 1, 8))
                         for k in range(n)}
    elif kind == "score":
        q["criteria"] = [f"level {k} {rng.choice(WORDS)}" for k in range(rng.randint(2, 8))]
    elif rng.random() < 0.5:
        q["criteria"] = {"true": _text(rng, 1, 4), "false": {"why": _text(rng, 1, 4)}}
    return q


def records(n: int) -> list[tuple[str, dict]]:
    rng = random.Random(SEED)
    out = []
    for r in range(n):
        questions = {f"q{k}.{rng.choice(ASCII_WORDS)}": _question(rng, k)
                     for k in range(rng.randint(1, 4))}
        request = {"state": _state(rng), "questions": questions}
        if rng.random() < 0.3:
            request["id"] = f"record-{r}"
        out.append((f"r{r:03d}", request))
    return out


def make_releases(out: Path) -> None:
    for p in PRECISIONS:
        if (out / p).exists():
            shutil.rmtree(out / p)
    bf16 = out / "bf16"
    make_release.write_release(bf16, text_config=TEXT, seed=SEED, randomize_norms=True,
                               tokenizer_dir=DEMO)
    config = json.loads((bf16 / "config.json").read_text())
    demo_config = json.loads((DEMO / "config.json").read_text())
    for key in MEDIA_KEYS:
        config[key] = demo_config[key]
    (bf16 / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    make_quantized.write_nf4(bf16, out / "nf4", complete_json=False, max_shard_size="300KB")
    make_quantized.write_fp8(bf16, out / "fp8")
    make_quantized.write_int8(bf16, out / "int8")
    for p in ("nf4", "fp8", "int8"):
        for name in TOKENIZER_FILES:
            shutil.copyfile(bf16 / name, out / p / name)
        config = json.loads((out / p / "config.json").read_text())
        for key in MEDIA_KEYS:
            config[key] = demo_config[key]
        (out / p / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    # complete.json last: it lists every file with its size and SHA-256
    make_release.write_complete_json(out / "nf4", precision="nf4", extra={
        "bitsandbytes": __import__("bitsandbytes").__version__})


def load_bf16(d: Path):
    from transformers import Qwen3_5ForConditionalGeneration
    return Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float32), 0


LOADERS = {"bf16": load_bf16, "nf4": make_backbone_oracle.load_nf4,
           "fp8": make_backbone_oracle.load_fp8, "int8": make_backbone_oracle.load_int8}


def fp32_list(t: torch.Tensor) -> list[float]:
    return [float(x) for x in t.to(torch.float32).tolist()]


def hidden_rows(rng: np.random.Generator, T: int) -> list[int]:
    rows = {0, T - 1}
    if T > 2:
        rows.add(int(rng.integers(1, T - 1)))
    return sorted(rows)


def run_oracle(out: Path, precision: str, recs: list[dict], mod) -> None:
    from safetensors.torch import load_file
    release = out / precision
    model, n_quantized = LOADERS[precision](release)
    model.eval()
    head_cfg = json.loads((release / "joint_head_config.json").read_text())
    head = mod.JointSchemaHead(**head_cfg)
    head.load_state_dict({k: v.float() for k, v in
                          load_file(str(release / "joint_head.safetensors")).items()}, strict=True)
    head = head.float().eval()
    text = model.model.language_model
    lm_rows = model.get_output_embeddings().weight.float()
    tokenizer = hf_tokenizer(release)
    D = model.config.text_config.hidden_size
    rng = np.random.default_rng(SEED)
    blob = bytearray(b"CLEFQH01" + struct.pack("<II", len(recs), D))
    all_logits, decisions = [], []
    for rec in recs:
        encoded = mod.encode_record(tokenizer, rec["request"], max_length=MAX_LENGTH)
        assert list(encoded.input_ids) == rec["ids"], rec["name"]
        batch = mod.collate_records([encoded], tokenizer.pad_token_id, torch.device("cpu"))
        with torch.inference_mode():
            h = text(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     use_cache=False, return_dict=True).last_hidden_state
            logits = head(h, batch["input_ids"], batch["attention_mask"], batch["records"],
                          lm_rows)[0]
        all_logits.append([fp32_list(q) for q in logits])
        decisions.append([int(torch.argmax(q)) for q in logits])
        rows = hidden_rows(rng, len(rec["ids"]))
        blob += struct.pack("<I", len(rows)) + np.asarray(rows, dtype="<i4").tobytes()
        blob += h[0, rows].float().numpy().astype("<f4").tobytes()
    if precision != "bf16":
        (out / f"{precision}_hidden.bin").write_bytes(bytes(blob))
    doc = {"release": f"tests/quant/fixtures/decide/{precision}", "logits": all_logits,
           "decisions": decisions}
    (out / f"{precision}_logits.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{precision}: {n_quantized} library-quantized linears, {len(recs)} records",
          file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "quant" / "fixtures" / "decide"))
    ap.add_argument("--records", type=int, default=RECORDS)
    ap.add_argument("--skip-releases", action="store_true",
                    help="keep the releases in --out, recompute records and oracles only")
    a = ap.parse_args()
    torch.set_num_threads(2)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.skip_releases:
        make_releases(out)
    mod = clef_oracle.load_reference()
    tokenizer = hf_tokenizer(out / "bf16")
    recs = []
    for name, request in records(a.records):
        encoded = mod.encode_record(tokenizer, request, max_length=MAX_LENGTH)
        recs.append({"name": name, "request": request, "ids": list(encoded.input_ids)})
    lengths = [len(r["ids"]) for r in recs]
    print(f"{len(recs)} records, {min(lengths)} to {max(lengths)} tokens "
          f"(mean {sum(lengths) / len(lengths):.0f})", file=sys.stderr)
    (out / "records.json").write_text(json.dumps({"max_length": MAX_LENGTH, "records": recs},
                                                 ensure_ascii=False, separators=(",", ":")) + "\n")
    for p in PRECISIONS:
        run_oracle(out, p, recs, mod)
    for d in sorted(out.iterdir()):
        size = sum(f.stat().st_size for f in d.rglob("*")) if d.is_dir() else d.stat().st_size
        print(f"{d.name:24s} {size / 1024:8.1f} KiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
