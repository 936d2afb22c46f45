#!/usr/bin/env python3
"""gen_encode_fixtures.py — records and what the reference encoder makes of them.

For each record body (raw JSON text) the oracle is the release's encode_record() from
joint_schema_model.py (see scripts/clef_oracle.py for where it comes from), run on
json.loads(body) with two tokenizers that the C side reproduces:
  bytes  every piece becomes the list of its UTF-8 bytes (ids 0..255): needs no tokenizer
         library, so it checks the prompt text, piece order, spans and truncation alone;
  bpe    --tokenizer: a tokenizer.json FILE (default tests/encode/fixtures/tokenizer.json,
         train_test_tokenizer.py) through transformers' PreTrainedTokenizerFast, the file as
         is (C: tok_load on the file); or a tokenizer DIRECTORY (tokenizer.json +
         tokenizer_config.json) through AutoTokenizer.from_pretrained(dir) — what the
         reference's systemone() uses (processor.tokenizer of AutoProcessor.from_pretrained):
         for Qwen3.5's `tokenizer_class: Qwen2Tokenizer` transformers 5.17 builds its own
         pipeline (Qwen2 regex, no \p{M}), not the file's (C: tok_load_dir, the transformers
         pipeline).
Per record and tokenizer the fixture holds the max_length used, then either the error the
reference raised (schema too long) or n_tokens, the SHA-256 of the ids as int32 little
endian, the number of state tokens cut, and every question and option span.

Records: generated ones covering every rule (unicode, numbers written in odd ways,
duplicate keys, nesting, missing/null/""/object/array/number instructions, noul defaults
and overrides, choice ids whose code-point order differs from UTF-16 order, null/object/
array descriptions, 1-64 questions, 2-255 options, 2-10 levels, states cut under small and
default max_length, schemas too long), records whose texts carry combining marks
(Devanagari, Thai, Arabic harakat, Hebrew niqqud, Bengali, Tamil, decomposed Latin: where
the Qwen2 and Qwen3.5 pre-tokenizers split differently), and real ones built from public
client packages
(clef-router's DEFAULT_QUESTIONS, clef-compactor's build_questions/build_state,
typesafe-eval's preset YAML files) with their README text as states.

Output: JSON lines {"name", "source", "body", "expect": {"bytes": {...}, "bpe": {...}}}.
Usage: python3 scripts/encode/gen_encode_fixtures.py --count 1000 --out tests/encode/fixtures/records.jsonl
       python3 scripts/encode/gen_encode_fixtures.py --tokenizer QWEN_TOKENIZER_DIR --out /tmp/records.jsonl
"""
import argparse
import ast
import hashlib
import json
import math
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gen_render_cases  # noqa: E402  (the JSON text generator of the render test)
import clef_oracle  # noqa: E402  (scripts/clef_oracle.py: the reference joint_schema_model.py)

ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
UNICODE_IDS = ["é", "e", "E", "Ω", "中", "\U0001F600", "\uffff", "\ue000", "\U00010000", "a b", "9", "10",
               "ß", "ss", "Z", "z", "_", "-", "\u00a0", "ﬁ", "fi", "\u2028", "A\u0000B", "x\ny", "\"q\""]


# ---- tokenizers both sides reproduce -------------------------------------------------------

class Encoding:
    def __init__(self, ids):
        self.input_ids = ids


class ByteTokenizer:
    """Each piece becomes its UTF-8 bytes (the C test's byte tokenizer)."""

    def __call__(self, text, add_special_tokens=False):
        return Encoding(list(text.encode("utf-8")))


def bpe_tokenizer(path):
    """A directory: AutoTokenizer, as the reference loads a release; a file: the file as is."""
    if Path(path).is_dir():
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(path))
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=str(path))


# ---- generated records -------------------------------------------------------------------

def random_text(rng, n_max=40):
    pool = list("abcdefghij klmnopqrstuvwxyz ,.:;!?'\"\\/\n\t{}[]0123456789") + \
        ["é", "中文", "Ω", "😀", "\u0000", "\u001f", "\x7f", "\u2028", "ﬁ", "\U0010FFFF", "<|im_end|>", "<think>"]
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, n_max)))


def finite_json_text(rng, depth=0):
    """A JSON text that Python reads without nan/inf or int-limit errors."""
    while True:
        text = gen_render_cases.value_text(rng, depth)
        try:
            value = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError:
            continue
        if "Infinity" in json.dumps(value) or "NaN" in json.dumps(value):
            continue
        return text


def description(rng, n_max=60):
    k = rng.randrange(10)
    if k < 6:
        return random_text(rng, n_max)
    if k == 6:
        return None
    if k == 7:
        return {"summary": random_text(rng, 20), "examples": [random_text(rng, 10)], "weight": rng.choice([1, 0.5, 1e-7, 2**53 + 1])}
    if k == 8:
        return [random_text(rng, 10), rng.randint(-5, 5), None, True]
    return {"z": 1, "a": {"y": [1.0, -0.0], "b": "中"}}


def instructions(rng, question):
    k = rng.randrange(12)
    if k == 0:
        return
    if k == 1:
        question["instructions"] = None
    elif k == 2:
        question["instructions"] = ""
    elif k == 3:
        question["instructions"] = {"task": random_text(rng, 30), "steps": [random_text(rng, 10)]}
    elif k == 4:
        question["instructions"] = rng.choice([[], [1, "two"], 0, 1.5, False, True, " "])
    else:
        question["instructions"] = random_text(rng, 60)


def question_id(rng):
    if rng.random() < 0.05:
        return "".join(rng.choice(ID_CHARS) for _ in range(100))
    return "".join(rng.choice(ID_CHARS) for _ in range(rng.randint(1, 16)))


def random_question(rng, many_options, text_max):
    qtype = rng.choice(["noul", "choice", "score"])
    q = {"type": qtype}
    instructions(rng, q)
    if qtype == "noul":
        k = rng.randrange(6)
        if k == 1:
            q["criteria"] = None
        elif k == 2:
            q["criteria"] = {}
        elif k == 3:
            q["criteria"] = {"true": description(rng, text_max)}
        elif k == 4:
            q["criteria"] = {"false": description(rng, text_max)}
        elif k == 5:
            q["criteria"] = {"false": description(rng, text_max), "true": description(rng, text_max)}
    elif qtype == "choice":
        n = rng.randint(50, 255) if many_options else rng.randint(2, 6)
        criteria = {}
        while len(criteria) < n:
            if rng.random() < 0.3:
                key = rng.choice(UNICODE_IDS) + (str(rng.randint(0, 300)) if rng.random() < 0.5 else "")
            else:
                key = "".join(rng.choice(ID_CHARS + "é中😀") for _ in range(rng.randint(1, 12)))
            criteria[key] = description(rng, 8 if many_options else text_max)
        q["criteria"] = criteria
    else:
        q["criteria"] = [description(rng, text_max) for _ in range(rng.randint(2, 10))]
    if rng.random() < 0.1:
        q["label"] = "ignored by the encoder"
    return q


def random_body(rng, index):
    r = rng.random()
    if r < 0.02:
        n_questions = 64
    elif r < 0.07:
        n_questions = rng.randint(9, 63)
    else:
        n_questions = rng.randint(1, 8)
    questions = {}
    while len(questions) < n_questions:
        questions[question_id(rng)] = random_question(rng, many_options=rng.random() < 0.03,
                                                      text_max=60 if n_questions <= 8 else 12)
    k = rng.randrange(8)
    if k < 4:
        state = finite_json_text(rng)
    elif k == 4:
        state = json.dumps(random_text(rng, 200), ensure_ascii=rng.random() < 0.5)
    elif k == 5:
        state = rng.choice(["null", "0", "-0", "1E5", "[]", "{}", '""', "true", "12345678901234567890123", "0.1"])
    else:
        state = json.dumps({"ticket": {"id": index, "amount": rng.uniform(0, 5000), "currency": "USD",
                                       "lines": [random_text(rng, 80) for _ in range(rng.randint(0, 6))]},
                            "tags": [random_text(rng, 8) for _ in range(3)]}, ensure_ascii=False)
    parts = []
    if rng.random() < 0.3:
        parts.append('"id":' + json.dumps(f"rec-{index}"))
    parts.append('"state":' + state)
    parts.append('"questions":' + json.dumps(questions, ensure_ascii=rng.random() < 0.3))
    if rng.random() < 0.2:
        parts.reverse()
    return "{" + ",".join(parts) + "}"


def long_state_body(rng, index, n_chars):
    words = [random_text(rng, 12) or "x" for _ in range(200)]
    text = " ".join(rng.choice(words) for _ in range(n_chars // 7))[:n_chars]
    questions = {"summary_ok": {"type": "noul", "instructions": "Is the log healthy?"},
                 "severity": {"type": "score", "instructions": "How severe?", "criteria": ["low", "mid", "high"]}}
    return json.dumps({"state": {"log": text, "n": index}, "questions": questions}, ensure_ascii=False)


# ---- combining marks ---------------------------------------------------------------------------

# Texts whose letters carry combining marks (\p{M}): transformers' Qwen2Tokenizer splits them
# from their base letters ([^\r\n\p{L}\p{N}]?\p{L}+), the Qwen3.5 tokenizer.json keeps them
# together ([\p{L}\p{M}]+). Decomposed Latin is written with explicit U+03xx marks.
COMBINING_TEXTS = [
    "नमस्ते", "हिन्दी में लिखा गया अनुरोध", "क्या भुगतान स्वीकृत है?", "प्राथमिकता: उच्च", "कृपया उत्तर दें।",
    "สวัสดีครับ", "ภาษาไทยมีวรรณยุกต์", "น้ำแข็งที่นี่", "กรุณาตอบคำถามนี้", "เครื่องหมายกำกับเสียง",
    "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ", "اللُّغَةُ العَرَبِيَّةُ", "هَلْ هٰذَا الطَّلَبُ صَحِيحٌ؟", "شُكْرًا جَزِيلًا",
    "שָׁלוֹם עוֹלָם", "বাংলা ভাষায় লেখা", "தமிழ் மொழி", "ಕನ್ನಡ",
    "Cafe\u0301 au lait", "nai\u0308ve re\u0301sume\u0301", "Man\u0303ana", "A\u030angstro\u0308m",
    "Tie\u0302\u0301ng Vie\u0323\u0302t", "e\u0301\u0301\u0301 stacked", "Z\u0327\u0301alg\u0338o",
    "o\u0308\u0304 ", "\u0301 leading mark", "x\u20dd enclosed", "1\ufe0f\u20e3 keycap",
]


def combining_text(rng, n_max=4):
    parts = [rng.choice(COMBINING_TEXTS) for _ in range(rng.randint(1, n_max))]
    return rng.choice([" ", "", ", ", "\n"]).join(parts)


def combining_body(rng, index):
    """A record whose state, instructions, option ids and descriptions carry combining marks."""
    questions = {}
    for qi in range(rng.randint(1, 5)):
        qtype = rng.choice(["noul", "choice", "score"])
        q = {"type": qtype, "instructions": combining_text(rng)}
        if qtype == "noul" and rng.random() < 0.5:
            q["criteria"] = {"true": combining_text(rng, 2), "false": combining_text(rng, 2)}
        elif qtype == "choice":
            ids = sorted({rng.choice(COMBINING_TEXTS)[:rng.randint(1, 8)] + str(k)
                          for k in range(rng.randint(2, 6))})
            q["criteria"] = {i: rng.choice([combining_text(rng, 2), None, {"note": combining_text(rng, 1)}])
                             for i in ids}
        elif qtype == "score":
            q["criteria"] = [combining_text(rng, 1) for _ in range(rng.randint(2, 5))]
        questions[f"q{qi}_{rng.choice(['hi', 'th', 'ar', 'lat'])}"] = q
    k = rng.randrange(3)
    if k == 0:
        state = combining_text(rng, 40)
    elif k == 1:
        state = {"message": combining_text(rng, 30), "lines": [combining_text(rng, 3) for _ in range(4)]}
    else:
        state = [combining_text(rng, 5), {"ʼ": combining_text(rng, 5)}, 1.5]
    return json.dumps({"state": state, "questions": questions}, ensure_ascii=rng.random() < 0.3)


# ---- real records from public client packages ------------------------------------------------

def exec_definitions(source, names, namespace):
    """Run only the top-level assignments/functions named in `names` of a module source."""
    tree = ast.parse(source)
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                keep.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name in names:
            keep.append(node)
    exec(compile(ast.Module(body=keep, type_ignores=[]), "<client>", "exec"), namespace)
    return namespace


def paragraphs(text):
    return [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40]


def real_bodies():
    """(name, source, body) from public clients of the Clef APIs."""
    out = []
    # clef-router: its routing questions, on README paragraphs as prompts to route.
    files = clef_oracle.wheel_members("clef-router==0.3.0")
    ns = exec_definitions(files["clef_router/models.py"],
                          {"TYPE_NOUL", "TYPE_CHOICE", "TYPE_SCORE", "TIER_CHEAP", "TIER_FRONTIER",
                           "DEFAULT_QUESTIONS"}, {"Any": object})
    readme = paragraphs(clef_oracle.wheel_metadata("clef-router==0.3.0"))
    for i, para in enumerate(readme[:40]):
        out.append((f"clef-router-{i}", "clef-router 0.3.0 clef_router/models.py DEFAULT_QUESTIONS",
                    json.dumps({"model": "clef", "state": {"prompt": para}, "questions": ns["DEFAULT_QUESTIONS"]},
                               ensure_ascii=False)))
    # clef-compactor: one noul question per chunk, state built by its build_state().
    files = clef_oracle.wheel_members("clef-compactor==0.2.1")
    ns = exec_definitions(files["clef_compactor/core.py"], {"_NOULD_INSTRUCTIONS", "build_state", "build_questions"},
                          {"Any": object, "Sequence": list})
    chunks = paragraphs(clef_oracle.wheel_metadata("clef-compactor==0.2.1"))
    for i, count in enumerate([1, 2, 5, 16, 64]):
        sel = (chunks * 64)[:count]
        state = ns["build_state"]("How does query-aware compaction decide what to keep?", sel, 240)
        out.append((f"clef-compactor-{i}", "clef-compactor 0.2.1 clef_compactor/core.py build_questions/build_state",
                    json.dumps({"model": "clef-flash", "state": state, "questions": ns["build_questions"](count)},
                               ensure_ascii=False)))
    # typesafe-eval: the preset rubrics, as its TypeSafe provider sends them.
    import yaml
    files = clef_oracle.wheel_members("typesafe-eval==1.4.0")
    docs = paragraphs(clef_oracle.wheel_metadata("typesafe-eval==1.4.0"))
    for name in sorted(n for n in files if n.startswith("typesafe_eval/presets/") and n.endswith(".yaml")):
        preset = yaml.safe_load(files[name])
        questions = {}
        for qid, q in preset["questions"].items():
            wire = {"type": q["type"], "instructions": q.get("instructions")}
            if q["type"] == "score":
                wire["criteria"] = [str(c) for c in q["criteria"] if c is not None]
            elif q["type"] == "choice":
                wire["criteria"] = {str(k): (str(v) if v is not None else str(k)) for k, v in q["criteria"].items()}
            questions[qid] = wire
        for j, doc in enumerate(docs[:8]):
            out.append((f"typesafe-eval-{Path(name).stem}-{j}", f"typesafe-eval 1.4.0 {name}",
                        json.dumps({"model": "clef", "state": {"document": doc}, "questions": questions},
                                   ensure_ascii=False)))
    return out


# ---- the oracle run ----------------------------------------------------------------------------

def ids_sha256(ids):
    return hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()


def expectation(ref, tokenizer, record, choose):
    full = ref.encode_record(tokenizer, record, max_length=10**9)
    state_len = len(tokenizer(ref.render(record["state"]), add_special_tokens=False).input_ids)
    fixed = len(full.input_ids) - state_len
    max_length = choose(fixed, state_len)
    try:
        enc = ref.encode_record(tokenizer, record, max_length=max_length)
    except ValueError as e:
        return {"max_length": max_length, "error": str(e)}
    kept = len(enc.input_ids) - fixed
    return {"max_length": max_length, "error": None, "n_tokens": len(enc.input_ids),
            "ids_sha256": ids_sha256(enc.input_ids), "truncated": state_len - kept,
            "first_ids": list(enc.input_ids[:8]), "last_ids": list(enc.input_ids[-8:]),
            # per question: [question begin, end, option 1 begin, end, option 2 begin, ...]
            "spans": [list(q.question_span) + [i for s in q.option_spans for i in s] for q in enc.questions]}


def length_chooser(rng):
    """Pick, once per record, how max_length relates to the lengths (same rule for both tokenizers)."""
    k = rng.random()
    offset = rng.random()

    def choose(fixed, state_len):
        if k < 0.55:
            return 16384
        if k < 0.8 and state_len > 1:
            return fixed + int(offset * (state_len - 1))  # state cut from its end
        if k < 0.86:
            return fixed  # no state token fits
        if k < 0.92:
            return fixed - 1 - int(offset * 10)  # the schema alone is too long: an error
        return fixed + state_len  # exactly fits
    return choose


def transformers_version():
    import transformers
    return transformers.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="generated records (real ones come on top)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--marks", type=int, default=60, help="records with combining marks (on top)")
    ap.add_argument("--tokenizer", default="tests/encode/fixtures/tokenizer.json",
                    help="tokenizer.json file (as is) or tokenizer directory (AutoTokenizer)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ref = clef_oracle.load_reference()
    tokenizers = {"bytes": ByteTokenizer(), "bpe": bpe_tokenizer(args.tokenizer)}
    rng = random.Random(args.seed)
    bodies = [(f"generated-{i}", "generated", random_body(rng, i)) for i in range(args.count)]
    bodies += [(f"long-state-{i}", "generated (state over the default max_length)",
                long_state_body(rng, i, n)) for i, n in enumerate([25000, 40000])]
    real = real_bodies()
    bodies += real
    # After the others, from their own generator: the earlier records stay as they were.
    marks_rng = random.Random(args.seed * 1000 + 7)
    bodies += [(f"combining-marks-{i}", "generated (combining marks)", combining_body(marks_rng, i))
               for i in range(args.marks)]
    counts = {"records": 0, "errors": 0, "truncated": 0}
    with open(args.out, "w", encoding="utf-8") as f:
        for name, source, body in bodies:
            record = json.loads(body)
            choose = length_chooser(rng)
            if name.startswith("long-state"):
                choose = lambda fixed, state_len: 16384  # noqa: E731  (the default max_length)
            expect = {k: expectation(ref, tok, record, choose) for k, tok in tokenizers.items()}
            counts["records"] += 1
            counts["errors"] += expect["bpe"]["error"] is not None
            counts["truncated"] += (expect["bpe"].get("truncated") or 0) > 0
            f.write(json.dumps({"name": name, "source": source, "body": body, "expect": expect},
                               ensure_ascii=False) + "\n")
    print(f"oracle: {ref.__oracle_path__}")
    bpe = tokenizers["bpe"]
    print(f"bpe tokenizer: {args.tokenizer} as {type(bpe).__name__} (transformers {transformers_version()})")
    print(f"wrote {args.out}: {counts['records']} records ({len(real)} real), "
          f"bpe: {counts['truncated']} with the state cut, {counts['errors']} refused (schema too long)")


if __name__ == "__main__":
    main()
