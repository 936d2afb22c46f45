#!/usr/bin/env python3
"""make_demo_tokenizer.py — trains a small byte-level BPE tokenizer with HF `tokenizers`
(pinned) and writes tests/tokenizer/data/demo/tokenizer.json (committed, ~100 KB).

It has the Qwen3.5 pipeline (NFC, Split with the Qwen3.5 regex, ByteLevel) and added tokens
with every flag combination (special or not, normalized, lstrip, rstrip, single_word), which
the real files do not use. The fuzz target and the unit tests load it; the parity test
checks it against `tokenizers` on the committed sample like the real files.

Usage: python3 scripts/tokenizer/make_demo_tokenizer.py --corpus corpus.jsonl
"""
import argparse
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", default="tests/tokenizer/data/demo/tokenizer.json")
    ap.add_argument("--records", type=int, default=3000)
    args = ap.parse_args()
    texts = []
    with open(args.corpus, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= args.records:
                break
            texts.append(json.loads(line))
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([AddedToken("<|im_start|>", normalized=False, special=True),
                            AddedToken("<|im_end|>", normalized=False, special=True),
                            AddedToken("<think>", normalized=False, special=True),
                            AddedToken("</think>", normalized=False, special=True),
                            AddedToken("<|endoftext|>", normalized=False, special=True),
                            AddedToken("[MASK]", lstrip=True, normalized=False, special=True),
                            AddedToken("<sep>", rstrip=True, normalized=False, special=True)])
    tok.add_tokens([AddedToken("hello", single_word=True, normalized=True),
                    AddedToken("café", normalized=True),            # NFC-normalized content
                    AddedToken("cafe\u0301s", normalized=True),     # matches only after NFC
                    AddedToken(" <pad> ", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("<|im_start|>x", normalized=False),  # longer than a special token
                    AddedToken("中文", single_word=True, normalized=False),
                    AddedToken("ab", normalized=True)])
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tok.save(args.out, pretty=False)
    print("wrote %s (%d bytes, %d ids)" % (args.out, os.path.getsize(args.out), tok.get_vocab_size()))


if __name__ == "__main__":
    main()
