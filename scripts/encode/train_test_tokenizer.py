#!/usr/bin/env python3
"""train_test_tokenizer.py — a small byte-level BPE tokenizer.json shaped like Qwen's.

The encoder identity test needs a tokenizer that the C tokenizer and Hugging Face agree on
and that is small enough to commit. This trains one with `tokenizers` (pinned in
scripts/requirements.txt) on prompt-like text, with the Qwen2/3 layout: NFC normalizer,
Split on Qwen's pre-tokenization regex (isolated) then ByteLevel (no prefix space, no
regex), BPE without unk/byte-fallback, ByteLevel decoder, and the chat/vision special
tokens as added tokens (<think> and </think> as non-special added tokens, as in Qwen3).

Usage: python3 scripts/encode/train_test_tokenizer.py --out tests/encode/fixtures/tokenizer.json
"""
import argparse
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import AddedToken

QWEN_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|image_pad|>", "<|video_pad|>"]
NON_SPECIAL_ADDED = ["<think>", "</think>"]


def corpus(seed: int):
    rng = random.Random(seed)
    words = ("state schema field option instruction allowed decide jointly answer true false "
             "proposition choice score route close review unresolved resolved customer order "
             "refund invoice total amount angry calm annoyed description option_id type noul "
             "the of and is a to in for with on that this be are as by at from").split()
    for _ in range(4000):
        parts = []
        for _ in range(rng.randint(5, 40)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(words))
            elif r < 0.6:  # made-up words, so that merges go past the fixed vocabulary
                parts.append("".join(rng.choice("etaoinshrdlucmfwypvbgk") for _ in range(rng.randint(2, 9))))
            elif r < 0.75:
                parts.append(str(rng.randint(0, 100000)))
            elif r < 0.85:
                parts.append(rng.choice(['{"', '":', '","', '"}', '[', ']', ',', ':', '\n', '\n\n']))
            else:
                parts.append(rng.choice(["é", "中文", "Ω", "😀", "ß", "naïve", "日本語"]))
        yield " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(corpus(args.seed), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in NON_SPECIAL_ADDED])
    tok.save(args.out)
    print(f"wrote {args.out}: vocab {tok.get_vocab_size()} (with added tokens)")


if __name__ == "__main__":
    main()
