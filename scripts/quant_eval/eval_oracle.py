#!/usr/bin/env python3
"""eval_oracle.py — the expected `clef eval` table for the releases of
tests/quant/fixtures/decide, computed from runs of transformers + each quantization library
(not the engine), per record, so that tests/quant_eval/test_eval.c can aggregate any prefix of
the records and compare it with `clef eval --json`.

Inputs (made by scripts/quant/make_decide_fixtures.py with the real producers):
  records.json          the 200 seeded records (requests and token ids)
  <p>_logits.json       head logits and decisions of every record, transformers + library
                        (bf16, nf4, fp8, int8), the release's own joint_schema_model.py head
The logits and decisions are REUSED as stored. The hidden states are not stored whole (three
rows per record, and none for bf16), so this script runs the same library loaders again
(make_backbone_oracle.load_nf4 / load_fp8 / load_int8, transformers fp32 for bf16) to get each
record's whole last hidden state, and checks that its rows equal the stored <p>_hidden.bin
rows (rel. L2 <= 1e-6: the same run).

Per precision p in nf4, fp8, int8 and record r, with B the bf16 run:
  logit_rel_l2[r]   ||logits_p - logits_B|| / ||logits_B||, every option of every question
  hidden_rel_l2[r]  ||h_p - h_B|| / ||h_B|| over the record's [T, hidden] last hidden state
  agree[r]          questions whose decision (argmax of the logits) equals B's
  questions[r]
Written to tests/quant_eval/fixtures/eval_expected.json; also writes demo/eval-records.jsonl
(the same records, one request per line: `clef eval`'s default record set).

Usage: python3 scripts/quant_eval/eval_oracle.py
pip install -r scripts/requirements.txt
"""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "quant"))
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))

import make_backbone_oracle  # noqa: E402

DECIDE = ROOT / "tests" / "quant" / "fixtures" / "decide"
OUT = ROOT / "tests" / "quant_eval" / "fixtures" / "eval_expected.json"
JSONL = ROOT / "demo" / "eval-records.jsonl"
QUANTIZED = ("nf4", "fp8", "int8")


def load_bf16(d: Path):
    from transformers import Qwen3_5ForConditionalGeneration
    return Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float32), 0


LOADERS = {"bf16": load_bf16, "nf4": make_backbone_oracle.load_nf4,
           "fp8": make_backbone_oracle.load_fp8, "int8": make_backbone_oracle.load_int8}


def hidden_states(precision: str, records: list[dict]) -> list[np.ndarray]:
    model, _ = LOADERS[precision](DECIDE / precision)
    model.eval()
    text = model.model.language_model
    out = []
    for rec in records:
        ids = torch.tensor([rec["ids"]], dtype=torch.long)
        with torch.inference_mode():
            h = text(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
                     return_dict=True).last_hidden_state
        out.append(h[0].float().numpy().astype(np.float64))
    return out


def stored_rows(precision: str) -> list[tuple[list[int], np.ndarray]]:
    blob = (DECIDE / f"{precision}_hidden.bin").read_bytes()
    assert blob[:8] == b"CLEFQH01"
    n, d = struct.unpack_from("<II", blob, 8)
    off, out = 16, []
    for _ in range(n):
        (k,) = struct.unpack_from("<I", blob, off)
        off += 4
        rows = list(struct.unpack_from(f"<{k}i", blob, off))
        off += 4 * k
        h = np.frombuffer(blob, dtype="<f4", count=k * d, offset=off).reshape(k, d)
        off += 4 * k * d
        out.append((rows, h.astype(np.float64)))
    return out


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.sum((a - b) ** 2) / np.sum(b ** 2)))


def main() -> int:
    torch.set_num_threads(2)
    records = json.loads((DECIDE / "records.json").read_text())["records"]
    JSONL.write_text("".join(json.dumps(r["request"], ensure_ascii=False, separators=(",", ":"))
                             + "\n" for r in records))
    logits = {p: json.loads((DECIDE / f"{p}_logits.json").read_text())
              for p in ("bf16",) + QUANTIZED}
    ref_hidden = hidden_states("bf16", records)
    doc = {"generator": {"torch": torch.__version__,
                         "transformers": __import__("transformers").__version__,
                         "bitsandbytes": __import__("bitsandbytes").__version__,
                         "compressed_tensors": __import__("compressed_tensors").__version__},
           "reference": "tests/quant/fixtures/decide/bf16", "records": len(records),
           "precisions": {}}
    ref_logits = logits["bf16"]
    for p in QUANTIZED:
        hidden = hidden_states(p, records)
        for r, (rows, h) in enumerate(stored_rows(p)):
            assert rel_l2(hidden[r][rows], h) <= 1e-6, (p, r, rel_l2(hidden[r][rows], h))
        row = {"release": f"tests/quant/fixtures/decide/{p}", "logit_rel_l2": [],
               "hidden_rel_l2": [], "agree": [], "questions": []}
        for r in range(len(records)):
            a = np.concatenate([np.asarray(q, dtype=np.float64) for q in logits[p]["logits"][r]])
            b = np.concatenate([np.asarray(q, dtype=np.float64) for q in ref_logits["logits"][r]])
            row["logit_rel_l2"].append(rel_l2(a, b))
            row["hidden_rel_l2"].append(rel_l2(hidden[r], ref_hidden[r]))
            dq, db = logits[p]["decisions"][r], ref_logits["decisions"][r]
            row["agree"].append(sum(int(x == y) for x, y in zip(dq, db)))
            row["questions"].append(len(db))
        doc["precisions"][p] = row
        n_q = sum(row["questions"])
        print(f"{p:5s} agree {sum(row['agree'])}/{n_q}  logit rel L2 mean "
              f"{np.mean(row['logit_rel_l2']):.3e} max {np.max(row['logit_rel_l2']):.3e}  hidden "
              f"mean {np.mean(row['hidden_rel_l2']):.3e} max {np.max(row['hidden_rel_l2']):.3e}",
              file=sys.stderr)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
