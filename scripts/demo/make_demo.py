#!/usr/bin/env python3
"""make_demo.py — build the demo release demo/clef-demo/ and the oracle's answer for demo/record.json.

The demo release lets the README's first command run a real decision end to end on a fresh
machine. Its weights are RANDOM: its answers are meaningless. What is real is everything else:
the Clef file layout (config.json, model.safetensors, joint_head.safetensors +
joint_head_config.json, tokenizer.json + tokenizer_config.json), written by the real writers
(scripts/fixtures/make_release.py: transformers Qwen3_5ForConditionalGeneration.save_pretrained
and the release's JointSchemaHead), and a small byte-level BPE tokenizer with the Qwen special
tokens, so the real prompt layout of spec/api.md encodes exactly as it would on a real release.

Steps:
  1. Train a byte-level BPE tokenizer with HF `tokenizers` (pinned in scripts/requirements.txt)
     on text generated here (the prompt pieces, example states and schemas) plus the docstrings
     of the pinned torch's nn modules (English prose). Its pipeline mirrors Qwen's tokenizer.json:
     NFC normalizer, Split on Qwen's pre-tokenizer regex (isolated) then ByteLevel without its
     own regex, BPE, ByteLevel decoder, and the Qwen added tokens in Qwen's order
     (<|endoftext|>, <|im_start|>, <|im_end|>, ..., <|vision_start|>, <|vision_end|>,
     <|vision_pad|>, <|image_pad|>, <|video_pad|>, ..., <think>, </think>).
  2. Write the release with write_release() (tiny Qwen3.5 backbone: 3 GDN + 1 attention layers,
     a vision tower; a small joint head; norms and head scalars randomised so that every term
     matters), then point config.json's media token ids at the demo tokenizer's ids.
  3. Run the oracle end to end on demo/record.json (encode_record + transformers backbone in fp32
     + JointSchemaHead in fp32, i.e. the reference systemone()) and write its answer to
     tests/model/fixtures/demo_answer.json; `clef run` must reproduce it (tests/model).

Usage: python3 scripts/demo/make_demo.py   (pip install -r scripts/requirements.txt first)
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
sys.path.insert(0, str(ROOT / "scripts"))

import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)

# Qwen's added tokens, in the order of the real tokenizer (their ids follow the base vocabulary
# consecutively, as in Qwen3.5 where <|endoftext|> is 248044 and <|image_pad|> 248056).
QWEN_ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", True), ("<|fim_middle|>", True),
    ("<|fim_suffix|>", True), ("<|fim_pad|>", True), ("<|repo_name|>", True),
    ("<|file_sep|>", True), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]
# Qwen2/Qwen3's pre-tokenizer regex.
QWEN_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

BASE_VOCAB = 2048  # merges + 256 byte symbols; the added tokens come after

DEMO_TEXT = dict(vocab_size=BASE_VOCAB + len(QWEN_ADDED_TOKENS), hidden_size=128,
                 intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, linear_num_key_heads=2,
                 linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
                 # 32 x 0.25 = 8 rotary dims = 4 frequencies, split T/H/W like Qwen's [11, 11, 10]
                 rope_parameters=dict(mrope_section=[2, 1, 1]))
DEMO_VISION = dict(out_hidden_size=DEMO_TEXT["hidden_size"])  # the merger feeds the text model
DEMO_HEAD = dict(hidden_size=128, width=64, routing_layers=2, layers=2, heads=4, feedforward=128)

WORDS = ("order invoice refund customer support ticket payment shipping delay damaged item "
         "account login password reset billing address subscription cancel upgrade plan "
         "priority urgent angry calm annoyed happy review close escalate route total amount "
         "currency USD EUR product warranty return replacement message reply agent email "
         "phone chat status open pending resolved unresolved issue question answer policy "
         "fraud risk score level low medium high true false yes no because please thanks "
         "received tracking number package delivered missing late broken color size").split()


def training_corpus(rng: random.Random) -> list[str]:
    """Text the demo tokenizer learns from: prompt pieces, example records, English prose."""
    import torch.nn as nn

    lines = [
        "Read the complete state and schema. Decide every field jointly. Each answer must be "
        "exactly one of that field's allowed options.",
        "STATE:\n", "\n\nSCHEMA FIELDS:\n", "\nALLOWED OPTIONS:\n", "END FIELD\n",
        "JOINT SCHEMA DECISIONS:", "The proposition is true or the answer is yes.",
        "The proposition is false or the answer is no.",
    ]
    for i in range(1, 65):
        lines.append(f"\nFIELD {i}\nID: q{i}\nTYPE: choice\nINSTRUCTION: ")
        lines.append(f"OPTION {i}: ")
    for _ in range(3000):
        state = {rng.choice(WORDS): rng.choice([rng.choice(WORDS), rng.randint(0, 5000),
                                                round(rng.uniform(0, 2000), 2)])
                 for _ in range(rng.randint(1, 6))}
        lines.append(json.dumps(state, ensure_ascii=False, separators=(",", ":"), sort_keys=True))
        lines.append(json.dumps({"option_id": rng.choice(WORDS),
                                 "description": " ".join(rng.choices(WORDS, k=5))},
                                separators=(",", ":"), sort_keys=True))
        lines.append(" ".join(rng.choices(WORDS, k=rng.randint(3, 15))).capitalize() + "?")
    # English prose from the pinned torch: docstrings of its nn modules
    for name in sorted(dir(nn)):
        doc = inspect.getdoc(getattr(nn, name))
        if doc:
            lines.extend(doc.splitlines())
    return lines


def train_tokenizer(out_dir: Path, seed: int) -> None:
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, trainers)
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BASE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(training_corpus(random.Random(seed)), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in QWEN_ADDED_TOKENS])
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_file=str(out_dir / "tokenizer.json"),
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   model_max_length=262144, clean_up_tokenization_spaces=False)
    fast.save_pretrained(str(out_dir))
    for extra in ("special_tokens_map.json", "chat_template.jinja"):
        (out_dir / extra).unlink(missing_ok=True)


def hf_tokenizer(release: Path):
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=str(release / "tokenizer.json"),
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>")


def oracle_answer(release: Path, request: dict) -> dict:
    """The reference systemone() on the fp32 backbone + fp32 head of the release."""
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen3_5ForConditionalGeneration

    mod = clef_oracle.load_reference()
    backbone = Qwen3_5ForConditionalGeneration.from_pretrained(
        str(release), dtype=torch.float32, attn_implementation="eager").eval()
    head_cfg = json.loads((release / "joint_head_config.json").read_text())
    head = mod.JointSchemaHead(**head_cfg)
    head.load_state_dict({k: v.float() for k, v in load_file(str(release / "joint_head.safetensors")).items()},
                         strict=True)
    model = mod.ClefModel(backbone, head.float()).eval()

    class TextOnlyProcessor:  # systemone() reads processor.tokenizer; the record has no media
        tokenizer = hf_tokenizer(release)

    return mod.systemone(model, TextOnlyProcessor(), request)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "demo" / "clef-demo"))
    ap.add_argument("--record", default=str(ROOT / "demo" / "record.json"))
    ap.add_argument("--answer", default=str(ROOT / "tests" / "model" / "fixtures" / "demo_answer.json"))
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args()

    from make_release import write_release

    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        train_tokenizer(Path(tmp), args.seed)
        ids = {t: i for i, (t, _) in enumerate(QWEN_ADDED_TOKENS, start=BASE_VOCAB)}
        write_release(out, text_config=DEMO_TEXT, vision_config=DEMO_VISION, head_config=DEMO_HEAD, seed=args.seed,
                      randomize_norms=True, tokenizer_dir=tmp)
    # The demo tokenizer's ids for the media tokens (Qwen3.5's are 248053..248057).
    config = json.loads((out / "config.json").read_text())
    config.update(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                  vision_start_token_id=ids["<|vision_start|>"],
                  vision_end_token_id=ids["<|vision_end|>"])
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    request = json.loads(Path(args.record).read_text())
    # A record names no model; `clef run` echoes the release directory's name, as here.
    request.setdefault("model", out.name)
    answer = oracle_answer(out, request)
    Path(args.answer).parent.mkdir(parents=True, exist_ok=True)
    Path(args.answer).write_text(json.dumps(answer, indent=2) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {out} ({size / 1e6:.2f} MB) and {args.answer}")
    print(json.dumps(answer, indent=2))


if __name__ == "__main__":
    main()
