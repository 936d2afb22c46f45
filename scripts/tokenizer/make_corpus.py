#!/usr/bin/env python3
"""make_corpus.py — writes the tokenizer parity corpus: JSON-string lines (one record each),
deterministic for a given --seed, from generated and package-shipped text only.

Contents (each record is one kind, labels in the summary):
  prose     multilingual sentences from faker (pinned) locales: CJK, Arabic, Hebrew, Persian,
            Devanagari, Bengali, Tamil, Thai, Cyrillic, Greek, Armenian, Georgian, Latin...
  code      source files shipped in pinned packages (transformers, tokenizers, faker)
  json      json.dumps of generated records (ASCII and non-ASCII, compact and indented)
  clef      the Clef prompt pieces of spec/api.md with rendered states and schemas
  emoji     emoji with ZWJ sequences, skin tones, flags, keycaps, VS16
  space     runs of spaces, tabs, newlines, CRLF, NBSP, U+3000, NEL... up to thousands long
  digits    digit runs in several scripts, numbers, dates
  control   C0/C1 control characters mixed with text
  special   every added token of the tokenizers given, glued to text, partial and repeated
  unicode   random code points over all planes, combining-mark stacks (NFC), Hangul jamo,
            contractions ('s 'S 'ſ 'LL), characters new in Unicode 15/16
Usage: python3 scripts/tokenizer/make_corpus.py --out corpus.jsonl [--mb 21] [--seed 1]
       [--tokenizer-dir DIR ...]   (added tokens to glue; default: the fetched cache)
"""
import argparse
import json
import os
import random
import sys

import faker
import unicodedata2 as ud

LOCALES = ["en_US", "zh_CN", "zh_TW", "ja_JP", "ko_KR", "ar_AA", "he_IL", "fa_IR", "hi_IN", "bn_BD",
           "ta_IN", "th_TH", "ru_RU", "uk_UA", "el_GR", "hy_AM", "ka_GE", "de_DE", "fr_FR", "vi_VN",
           "tr_TR", "pl_PL", "cs_CZ", "es_ES", "pt_BR", "it_IT"]

SYSTEM = ("Read the complete state and schema. Decide every field jointly. Each answer must be "
          "exactly one of that field's allowed options.")

EMOJI_BASE = ["👍", "👋", "🧑", "👩", "👨", "🧒", "🙋", "🏃", "🤝", "💪"]
SKIN = ["", "\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
ZWJ_SEQS = ["👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "🧑\u200d💻", "👩🏽\u200d🚀", "🐻\u200d❄️",
            "❤️\u200d🔥", "🧑🏿\u200d🤝\u200d🧑🏻", "👁️\u200d🗨️"]
FLAGS = ["🇺🇸", "🇯🇵", "🇫🇷", "🇮🇳", "🇧🇷", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"]
KEYCAPS = ["1\ufe0f\u20e3", "#\ufe0f\u20e3", "*\u20e3"]
SPACES = [" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u0085", "\u2028", "\u2029", "\u200b",
          "\u2009", "\u202f", "\u180e", "\x0b", "\x0c", "\u1680", "\ufeff"]
DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "０１２３４５６７８９", "𝟎𝟏𝟐𝟑𝟒", "①②③", "ⅠⅡⅢⅣ", "½¾"]
MARKS = [0x300, 0x301, 0x302, 0x303, 0x308, 0x30A, 0x327, 0x328, 0x323, 0x31B, 0x345, 0x5B0, 0x64B,
         0x93C, 0x94D, 0x9BC, 0x3099, 0x309A, 0x1AB0, 0x20D7, 0x1DC0]


def assigned_code_points():
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if ud.category(chr(cp)) != "Cn":
            out.append(cp)
    return out


def load_added_tokens(dirs):
    toks = set()
    for d in dirs:
        try:
            with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
                for t in json.load(f).get("added_tokens", []):
                    toks.add(t["content"])
            with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
                for t in json.load(f).get("added_tokens_decoder", {}).values():
                    toks.add(t["content"])
        except FileNotFoundError:
            pass
    return sorted(toks)


def package_sources(limit_bytes):
    import tokenizers
    import transformers
    files = []
    for mod in (transformers, tokenizers, faker):
        root = os.path.dirname(mod.__file__)
        for dp, _, fs in os.walk(root):
            for f in sorted(fs):
                if f.endswith((".py", ".pyi", ".md", ".txt")):
                    files.append(os.path.join(dp, f))
    files.sort()
    return files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mb", type=float, default=21.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer-dir", action="append", default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cache = os.environ.get("CLEF_TOKENIZER_CACHE", os.path.expanduser("~/.cache/clef/tokenizers"))
    dirs = args.tokenizer_dir or [os.path.join(cache, n) for n in ("qwen-3.5", "qwen-3", "deepseek-v3", "glm-4")]
    added = load_added_tokens(dirs)
    fakers = {}
    for loc in LOCALES:
        f = faker.Faker(loc)
        f.seed_instance(args.seed)
        fakers[loc] = f
    assigned = assigned_code_points()
    new_chars = [cp for cp in assigned if ud.category(chr(cp)) != "Cn"
                 and cp >= 0x1E4D0 or 0x1C89 <= cp <= 0x1C8A or 0x2EBF0 <= cp <= 0x2EE5D or 0x10D40 <= cp <= 0x10D8F
                 or 0x11380 <= cp <= 0x113FF or 0x16D40 <= cp <= 0x16D79]
    sources = package_sources(0)
    src_idx = 0

    def prose():
        loc = rng.choice(LOCALES)
        f = fakers[loc]
        parts = [f.text(max_nb_chars=rng.choice([80, 200, 600])), f.name(), f.address(), f.sentence()]
        rng.shuffle(parts)
        return rng.choice([" ", "\n", "\n\n", ". "]).join(parts)

    def code():
        nonlocal src_idx
        path = sources[src_idx % len(sources)]
        src_idx += rng.randint(1, 7)
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if len(text) > 6000:
            start = rng.randrange(0, len(text) - 6000)
            text = text[start:start + 6000]
        return text

    def gen_value(depth=0):
        loc = rng.choice(LOCALES)
        f = fakers[loc]
        r = rng.random()
        if depth > 2 or r < 0.35:
            return rng.choice([f.word(), f.name(), f.city(), rng.randint(-10**6, 10**12), rng.random() * 1e5,
                               1e-05, 1e+20, 1250.0, True, False, None, f.sentence()])
        if r < 0.7:
            return {f.word(): gen_value(depth + 1) for _ in range(rng.randint(1, 5))}
        return [gen_value(depth + 1) for _ in range(rng.randint(0, 5))]

    def json_rec():
        v = {"state": gen_value(), "questions": {fakers["en_US"].word(): {"type": "choice",
             "criteria": {fakers[rng.choice(LOCALES)].word(): gen_value(2) for _ in range(3)}}}}
        return json.dumps(v, ensure_ascii=rng.random() < 0.3, sort_keys=rng.random() < 0.5,
                          indent=rng.choice([None, None, 2, "\t"]), separators=rng.choice([None, (",", ":")]))

    def render(v):
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    def clef():
        pieces = ["<|im_start|>system\n" + SYSTEM + "<|im_end|>\n<|im_start|>user\nSTATE:\n", render(gen_value()),
                  "\n\nSCHEMA FIELDS:\n"]
        for i in range(rng.randint(1, 4)):
            pieces += ["\nFIELD %d\nID: %s\nTYPE: %s\nINSTRUCTION: " % (i + 1, fakers["en_US"].word(),
                       rng.choice(["choice", "score"])), render(fakers[rng.choice(LOCALES)].sentence()),
                       "\nALLOWED OPTIONS:\n"]
            for j in range(rng.randint(1, 5)):
                opt = {"option_id": str(j), "description": gen_value(2)}
                if rng.random() < 0.3:
                    del opt["description"]
                pieces += ["OPTION %d: " % (j + 1), render(opt), "\n"]
            pieces.append("END FIELD\n")
        pieces.append("\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:")
        # Half the records are single pieces (as the engine encodes them), half whole prompts.
        return rng.choice(pieces) if rng.random() < 0.5 else "".join(pieces)

    def emoji():
        out = []
        for _ in range(rng.randint(5, 60)):
            r = rng.random()
            if r < 0.3:
                out.append(rng.choice(EMOJI_BASE) + rng.choice(SKIN))
            elif r < 0.55:
                out.append(rng.choice(ZWJ_SEQS))
            elif r < 0.7:
                out.append(rng.choice(FLAGS))
            elif r < 0.8:
                out.append(rng.choice(KEYCAPS))
            else:
                out.append(fakers[rng.choice(LOCALES)].word())
            out.append(rng.choice(["", " ", "  ", "\n", "\u200d", "\ufe0f"]))
        return "".join(out)

    def space():
        out = []
        for _ in range(rng.randint(1, 30)):
            n = rng.choice([1, 2, 3, 7, 16, 100, 1000, rng.randint(1, 5000)])
            s = rng.choice(SPACES)
            out.append(s * n if rng.random() < 0.6 else "".join(rng.choice(SPACES) for _ in range(min(n, 300))))
            out.append(rng.choice(["", "a", "word", "٣", "!", "'s", "中文", fakers[rng.choice(LOCALES)].word()]))
        return "".join(out)

    def digits():
        out = []
        for _ in range(rng.randint(5, 40)):
            d = rng.choice(DIGITS)
            out.append("".join(rng.choice(d) for _ in range(rng.choice([1, 2, 3, 4, 7, 20, 300]))))
            out.append(rng.choice([" ", ".", ",", "-", "/", ":", "e", "x", "年", "\n", "", "1,234.56", "3.14e-10"]))
        return "".join(out)

    def control():
        out = []
        for _ in range(rng.randint(5, 80)):
            if rng.random() < 0.5:
                out.append(chr(rng.choice(list(range(0, 0x20)) + list(range(0x7F, 0xA0)))))
            else:
                out.append(fakers[rng.choice(LOCALES)].word())
        return "".join(out)

    def special():
        out = []
        for _ in range(rng.randint(3, 40)):
            t = rng.choice(added)
            r = rng.random()
            if r < 0.6:
                out.append(t)
            elif r < 0.8:
                out.append(t[:rng.randint(1, max(1, len(t) - 1))])  # partial
            else:
                out.append(t * rng.randint(2, 4))
            out.append(rng.choice(["", "", " ", "\n", "x", "word", "中", " 's", "\t", "<", "|>", "  "]))
        return "".join(out)

    def unicode_rec():
        out = []
        for _ in range(rng.randint(10, 200)):
            r = rng.random()
            if r < 0.4:
                out.append(chr(rng.choice(assigned)))
            elif r < 0.5:
                cp = rng.randrange(0, 0x110000)
                out.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "x")
            elif r < 0.65:
                out.append(rng.choice("aeouAEOUnNcCsSαωиуअक가") + "".join(chr(rng.choice(MARKS))
                                                                        for _ in range(rng.randint(1, 5))))
            elif r < 0.72:
                out.append(chr(0x1100 + rng.randrange(19)) + chr(0x1161 + rng.randrange(21))
                           + (chr(0x11A8 + rng.randrange(27)) if rng.random() < 0.5 else ""))
            elif r < 0.8:
                out.append(rng.choice(["'s", "'S", "'ſ", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D",
                                       "'x", "’s", "'", "''s"]))
            elif r < 0.9 and new_chars:
                out.append(chr(rng.choice(new_chars)))
            else:
                out.append(rng.choice([" ", "", "\n", ",", "-", "a", "1"]))
        return "".join(out)

    kinds = [("prose", prose, 30), ("code", code, 14), ("json", json_rec, 12), ("clef", clef, 8),
             ("emoji", emoji, 6), ("space", space, 6), ("digits", digits, 5), ("control", control, 4),
             ("special", special, 6), ("unicode", unicode_rec, 9)]
    weights = [k[2] for k in kinds]
    target = int(args.mb * 1e6)
    total = 0
    counts = {k[0]: [0, 0] for k in kinds}
    with open(args.out, "w", encoding="utf-8") as out:
        while total < target:
            name, fn, _ = rng.choices(kinds, weights)[0]
            text = fn()
            b = len(text.encode("utf-8"))
            out.write(json.dumps(text, ensure_ascii=False) + "\n")
            total += b
            counts[name][0] += 1
            counts[name][1] += b
    for k, (n, b) in counts.items():
        print("%-8s %6d records %10d bytes" % (k, n, b), file=sys.stderr)
    print("total    %6d records %10d bytes of UTF-8 text -> %s" % (sum(c[0] for c in counts.values()), total,
                                                                  args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
