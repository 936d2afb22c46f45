#!/usr/bin/env python3
"""make_transformers_fixtures.py — regenerates the fixtures of the transformers pipeline
(TOK_PIPELINE_TRANSFORMERS, docs/tokenizer.md) from transformers' AutoTokenizer (pinned,
scripts/requirements.txt), called as the Clef reference encode_record calls it:
tokenizer(text, add_special_tokens=False).input_ids.

Writes, under tests/tokenizer/data/:
  expected-transformers/<name>.ids  ids of every line of the committed sample.jsonl, for the
      real tokenizers (qwen-3.5, qwen-3: Qwen2Tokenizer; glm-4: PreTrainedTokenizerFast) and
      the demo (no tokenizer_config.json: TokenizersBackend);
  tf_cases/<case>.config.json + tf_cases/<case>.ids  tokenizer_config.json variants of the
      demo tokenizer.json that exercise what the classes do (Qwen2Tokenizer, Qwen3_5Tokenizer,
      PreTrainedTokenizerFast; added_tokens_decoder with gaps, named and extra special tokens,
      add_prefix_space, no added_tokens_decoder) and the ids AutoTokenizer gives for each
      line of tf_cases/texts.jsonl (also written here).

Usage (after fetch_tokenizers.sh):
  python3 scripts/tokenizer/make_transformers_fixtures.py [--cache ~/.cache/clef/tokenizers]
"""
import argparse
import json
import os
import shutil
import tempfile

import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "tests", "tokenizer", "data")
NAMES = ["qwen-3.5", "qwen-3", "glm-4"]

# tokenizer_config.json variants for the demo tokenizer.json (1500 vocab entries, added
# tokens 732 'ab' and 1500..1512; see make_demo_tokenizer.py).
CASES = {
    # No added_tokens_decoder: transformers takes the file's added_tokens (all their flags);
    # the class defaults eos/unk/pad = <|endoftext|>; the Qwen2 Split pattern (no \p{M}).
    "qwen2_no_decoder": {"tokenizer_class": "Qwen2Tokenizer"},
    # Ids with gaps are given in order after the vocabulary (1503 -> 1501, 1510 -> 1502);
    # unk null and no bos: <|endoftext|> is not an added token; named tokens missing from
    # added_tokens_decoder (pad, video, image) are added; additional_special_tokens is
    # dropped because extra_special_tokens exists; the Qwen3.5 pattern; no tail re-add.
    "qwen3_5_gaps": {
        "tokenizer_class": "Qwen3_5Tokenizer",
        "added_tokens_decoder": {
            "1500": {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True},
            "1503": {"content": "<|im_end|>", "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True},
            "1510": {"content": "<tool>", "lstrip": False, "normalized": True, "rstrip": False,
                     "single_word": False, "special": False},
        },
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "unk_token": None,
        "video_token": "<|vid|>",
        "extra_special_tokens": {"image_token": "<|img|>", "audio_token": "<|im_start|>"},
        "additional_special_tokens": ["<|dropped|>"],
    },
    # "...Fast" class name; add_prefix_space reaches the class's ByteLevel; an AddedToken-dict
    # bos; extra special tokens as a list (additional_special_tokens); Qwen2's tail re-add.
    "qwen2_prefix_bos": {
        "tokenizer_class": "Qwen2TokenizerFast",
        "add_prefix_space": True,
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False,
                      "rstrip": False, "single_word": False, "special": True},
        "additional_special_tokens": ["<|extra_a|>", "<|im_end|>"],
        "added_tokens_decoder": {
            "1500": {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True},
        },
    },
    # TokenizersBackend: the file as is (its pattern, its added tokens) plus config tokens it
    # lacks (next ids after 1512), a named mask token; add_prefix_space does not change it.
    "backend_extras": {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_prefix_space": True,
        "added_tokens_decoder": {
            "1500": {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True},
            "1520": {"content": "<|new|>", "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True},
        },
        "mask_token": "[MASK2]",
        "additional_special_tokens": ["<sep>"],
    },
}

SPECIAL_LINES = [
    "नमस्ते दुनिया — हिन्दी में लिखा गया पाठ",
    "<|im_start|>system\nhello<|im_end|>\n<|im_start|>user\nSTATE:\n",
    "x<|endoftext|>y <|pad|> <|img|><|vid|> <|dropped|> <tool> <|new|> [MASK2] <s> <|extra_a|>",
    "  [MASK] <sep>  hello world helloworld café cafés cafe\u0301s  <pad>  中文 a中文b",
    "ab abab <think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:",
    "e\u0301\u0302\u0303 ก้ำ ज़्या 한국어 ᄀᄀ각 Ω\u0308 \u00c5ngstr\u00f6m",
    "  leading spaces and trailing   \n\n\r\n\t tabs",
    "It's 'LL 'ſ 12345 ١٢٣ ५६७ 🤷🏽‍♀️ 👨‍👩‍👧",
]


def load(d):
    return AutoTokenizer.from_pretrained(d)


def write_ids(path, tok, texts):
    with open(path, "w") as f:
        for i in range(0, len(texts), 256):
            for ids in tok(texts[i:i + 256], add_special_tokens=False).input_ids:
                f.write(" ".join(map(str, ids)) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.environ.get("CLEF_TOKENIZER_CACHE",
                                                      os.path.expanduser("~/.cache/clef/tokenizers")))
    args = ap.parse_args()
    with open(os.path.join(DATA, "sample.jsonl"), encoding="utf-8") as f:
        sample = [json.loads(l) for l in f.read().split("\n") if l]

    out = os.path.join(DATA, "expected-transformers")
    os.makedirs(out, exist_ok=True)
    for name, d in [(n, os.path.join(args.cache, n)) for n in NAMES] + [("demo", os.path.join(DATA, "demo"))]:
        tok = load(d)
        write_ids(os.path.join(out, name + ".ids"), tok, sample)
        print("%s: %s, %d records" % (name, type(tok).__name__, len(sample)))

    cases_dir = os.path.join(DATA, "tf_cases")
    os.makedirs(cases_dir, exist_ok=True)
    texts = SPECIAL_LINES + [t[:1500] for t in sample[::7]]
    with open(os.path.join(cases_dir, "texts.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    for case, cfg in CASES.items():
        cfg_path = os.path.join(cases_dir, case + ".config.json")
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=1, ensure_ascii=False)
            f.write("\n")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(DATA, "demo", "tokenizer.json"), tmp)
            shutil.copy(cfg_path, os.path.join(tmp, "tokenizer_config.json"))
            tok = load(tmp)
            write_ids(os.path.join(cases_dir, case + ".ids"), tok, texts)
            added = {k: v.content for k, v in sorted(tok.added_tokens_decoder.items())}
            print("%s: %s, %d texts, added tokens %s" % (case, type(tok).__name__, len(texts), added))
    print("transformers %s" % transformers.__version__)


if __name__ == "__main__":
    main()
