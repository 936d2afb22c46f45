#!/usr/bin/env python3
"""compare_corpus.py — parity of our tokenizer with a Hugging Face oracle (pinned) on a corpus
of JSON-string lines (make_corpus.py). Prints what was compared (records, UTF-8 bytes,
characters, tokens) and either 100% identity or the first differences; exit status 1 on any
difference.

Two references, matching the two pipelines of src/tokenizer (docs/tokenizer.md):
  --reference tokenizers (default): tokenizers.Tokenizer.from_file(tokenizer.json) plus the
      tokens of tokenizer_config.json's added_tokens_decoder that the file lacks;
      encode(text, add_special_tokens=False). Our side runs with --pipeline file.
  --reference transformers: transformers.AutoTokenizer.from_pretrained(dir) — what the Clef
      reference encode_record uses — and tokenizer(text, add_special_tokens=False).input_ids.
      Our side runs with --pipeline transformers.

Usage: python3 scripts/tokenizer/compare_corpus.py --tool build/tests/tokenizer/tok_encode_lines
         --tokenizer-dir ~/.cache/clef/tokenizers/qwen-3.5 --corpus corpus.jsonl
         [--reference tokenizers|transformers]
         [--write-expected ids.txt]   (writes the oracle's ids, one line per record)
"""
import argparse
import json
import os
import subprocess
import sys

from tokenizers import AddedToken, Tokenizer


def load_oracle(d):
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    cfg_path = os.path.join(d, "tokenizer_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        have = {t.content for t in tok.get_added_tokens_decoder().values()}
        extra = []
        for k, v in sorted(cfg.get("added_tokens_decoder", {}).items(), key=lambda kv: int(kv[0])):
            if v["content"] in have:
                continue
            extra.append((v.get("special", False), AddedToken(v["content"], single_word=v.get("single_word", False),
                          lstrip=v.get("lstrip", False), rstrip=v.get("rstrip", False),
                          normalized=v.get("normalized", not v.get("special", False)),
                          special=v.get("special", False))))
        for special, t in extra:
            if special:
                tok.add_special_tokens([t])
            else:
                tok.add_tokens([t])
    return tok


class TransformersOracle:
    """AutoTokenizer as encode_record calls it: tokenizer(text, add_special_tokens=False)."""

    def __init__(self, d):
        from transformers import AutoTokenizer
        self.tok = AutoTokenizer.from_pretrained(d)
        self.name = "transformers %s (%s)" % (__import__("transformers").__version__, type(self.tok).__name__)

    def encode_all(self, texts):
        # A list call goes through the same backend encode as one call per text, in batches.
        out = []
        for i in range(0, len(texts), 512):
            out.extend(self.tok(texts[i:i + 512], add_special_tokens=False).input_ids)
        return out


class TokenizersOracle:
    def __init__(self, d):
        self.tok = load_oracle(d)
        self.name = "tokenizers %s" % __import__("tokenizers").__version__

    def encode_all(self, texts):
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]


def make_oracle(reference, d):
    return TransformersOracle(d) if reference == "transformers" else TokenizersOracle(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--reference", choices=["tokenizers", "transformers"], default="tokenizers")
    ap.add_argument("--write-expected")
    ap.add_argument("--show", type=int, default=5, help="differences to print")
    args = ap.parse_args()

    with open(args.corpus, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    texts = [json.loads(l) for l in lines]
    oracle = make_oracle(args.reference, args.tokenizer_dir)
    expected = oracle.encode_all(texts)
    if args.write_expected:
        with open(args.write_expected, "w") as f:
            for ids in expected:
                f.write(" ".join(map(str, ids)) + "\n")

    cmd = [args.tool, os.path.join(args.tokenizer_dir, "tokenizer.json"), "--pipeline",
           "transformers" if args.reference == "transformers" else "file"]
    cfg = os.path.join(args.tokenizer_dir, "tokenizer_config.json")
    if os.path.exists(cfg):
        cmd += ["--config", cfg]
    with open(args.corpus, "rb") as f:
        res = subprocess.run(cmd, stdin=f, stdout=subprocess.PIPE, check=True)
    got_lines = res.stdout.decode("utf-8").split("\n")[:-1]
    if len(got_lines) != len(texts):
        print("FAIL: tool printed %d lines for %d records" % (len(got_lines), len(texts)))
        return 1

    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    n_chars = sum(len(t) for t in texts)
    n_tokens = sum(len(e) for e in expected)
    diffs = 0
    for i, (t, exp, got) in enumerate(zip(texts, expected, got_lines)):
        got_ids = None if got.startswith("ERROR") else [int(x) for x in got.split()]
        if got_ids == exp:
            continue
        diffs += 1
        if diffs <= args.show:
            k = 0
            if got_ids is not None:
                while k < min(len(exp), len(got_ids)) and exp[k] == got_ids[k]:
                    k += 1
            print("DIFF record %d (%d chars): %r" % (i, len(t), t[:200]))
            print("  first difference at token %d" % k)
            print("  reference: %s" % exp[max(0, k - 3):k + 8])
            print("  clef:      %s" % (got if got_ids is None else got_ids[max(0, k - 3):k + 8]))
    name = os.path.basename(os.path.normpath(args.tokenizer_dir))
    print("%s: compared %d records, %d UTF-8 bytes, %d characters, %d tokens (%s)"
          % (name, len(texts), n_bytes, n_chars, n_tokens, oracle.name))
    if diffs:
        print("%s: %d of %d records differ" % (name, diffs, len(texts)))
        return 1
    print("%s: 100%% identical (%d/%d records)" % (name, len(texts), len(texts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
