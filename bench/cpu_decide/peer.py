#!/usr/bin/env python3
"""peer.py — the Python side of bench/cpu_decide: make the mid-size Clef release and its
~1,024-token record, and time the reference decision path on it.

  python3 peer.py make OUT_DIR [TOKENS] [HIDDEN] [DTYPE]
        OUT_DIR/clef-bench: a random-weight Clef release (DTYPE bf16, the default, or f32)
        written by scripts/fixtures/make_release.py's write_release — HIDDEN 1024 (default):
        Qwen3.5 text hidden 1024, 8 layers (3 GDN : 1 attention), MLP 3584, attention 8 x 256
        (GQA 4:1), GDN 16 heads of 128; the joint schema head at width 1024, 2 routing + 4
        decoder layers, 16 heads, feed-forward 4096. HIDDEN 384: hidden 384, 8 layers, MLP
        1024, attention 4 x 256 (GQA 4:1), GDN 4 key / 8 value heads of 128; head width 384,
        2 + 4 layers, 6 heads, feed-forward 1536. Both: the demo release's tokenizer
        (demo/clef-demo, 2,074 tokens).
        OUT_DIR/record-TOKENS.json: one SystemOne request of 4 questions (2 noul, a choice of 4, a
        score of 4 levels: 12 options) about a support ticket whose messages are sized so
        that the prompt, as the reference encode_record() counts it, is TOKENS (default 1024)
        tokens or the first length above it (the schema and template take ~630 of them).
        Each is made only when missing (the release takes ~15 s).
  python3 peer.py run RELEASE RECORD RUNS THREADS MAX_LENGTH
        the reference path as users run it on CPU: transformers
        Qwen3_5ForConditionalGeneration.from_pretrained(RELEASE, dtype=float32) + the
        reference JointSchemaHead (load_state_dict of joint_head.safetensors, float32), wrapped
        in the reference ClefModel, decided by the reference systemone() (encode_record +
        forward + softmax + answer), torch.set_num_threads(THREADS). Load is timed apart; then
        1 warm-up + RUNS timed decisions. Prints one JSON line: load_s, median wall ms and
        CPU seconds (all threads) of a decision, runs, threads, peak RSS (bytes, whole
        process, load included), the answer (systemone()'s response body).
The reference joint_schema_model.py is located by scripts/clef_oracle.py (never copied here).
Requirements: pip install -r scripts/requirements.txt.
"""
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))
import clef_oracle  # noqa: E402
from make_demo import hf_tokenizer  # noqa: E402
from decide_timing import time_decisions  # noqa: E402  (beside this file)

DEMO = ROOT / "demo" / "clef-demo"
TEXT = dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
            num_attention_heads=8, num_key_value_heads=2, head_dim=256,
            linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
            linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                                 mrope_section=[11, 11, 10], mrope_interleaved=True))
HEAD = dict(hidden_size=1024, width=1024, routing_layers=2, layers=4, heads=16, feedforward=4096)
# the small configuration (issue 8: "hidden 320-384")
TEXT_384 = dict(TEXT, hidden_size=384, intermediate_size=1024, num_attention_heads=4,
                num_key_value_heads=1, linear_num_key_heads=4, linear_num_value_heads=8)
HEAD_384 = dict(hidden_size=384, width=384, routing_layers=2, layers=4, heads=6, feedforward=1536)
MODEL_NAME = "clef-bench"


def make_release(release: Path, hidden: int = 1024, dtype: str = "bf16") -> None:
    sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
    from make_release import write_release

    demo_config = json.loads((DEMO / "config.json").read_text())
    text_config, head_config = {1024: (TEXT, HEAD), 384: (TEXT_384, HEAD_384)}[hidden]
    text = dict(text_config, vocab_size=demo_config["text_config"]["vocab_size"])
    write_release(release, text_config=text, vision_config=dict(depth=1, out_hidden_size=hidden),
                  head_config=head_config, seed=0, dtype={"bf16": "bfloat16", "f32": "float32"}[dtype],
                  tokenizer_dir=DEMO)
    # The head's logit scales init at exp(0) = 1, which leaves random-weight answers within
    # ~0.01 of uniform; a trained head's are larger. Scale ~50 spreads the probabilities, so
    # that "answers identical" compares distinct numbers, not four copies of 0.25.
    from safetensors.torch import load_file, save_file
    head_file = release / "joint_head.safetensors"
    state = load_file(head_file)
    for name in ("prior_logit_scale", "joint_logit_scale"):
        state[name] = torch.full_like(state[name], math.log(50.0))
    save_file(state, head_file)
    # the demo tokenizer's media token ids (as scripts/head/make_e2e_fixtures.py sets them)
    config = json.loads((release / "config.json").read_text())
    for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        config[key] = demo_config[key]
    (release / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def questions() -> dict:
    return {
        "refund": {"type": "noul", "instructions": "Should the duplicate charge be refunded?"},
        "escalate": {"type": "noul", "instructions": "Does this need a supervisor?",
                     "criteria": {"true": "the customer threatens to leave", "false": "routine"}},
        "route": {"type": "choice", "instructions": "Choose the handling route.",
                  "criteria": {"refund": "Refund the duplicate payment", "review": "Send to billing review",
                               "close": "Resolved issue, close the ticket", "fraud": None}},
        "tone": {"type": "score", "instructions": "How angry is the customer?",
                 "criteria": ["calm", "annoyed", "angry", "furious"]},
    }


def make_record(tokenizer, mod, tokens: int) -> dict:
    """A support-ticket request whose prompt is `tokens` tokens or the first length above:
    messages are added whole, then the last one grows word by word."""
    import random
    rng = random.Random(3)
    words = ("refund order late package broken angry calm invoice total charged twice please "
             "reply account billing card bank statement days waiting support ticket").split()
    messages = []
    request = {"model": MODEL_NAME, "id": "ticket-bench",
               "state": {"customer": {"name": "Dana Whitfield", "plan": "business", "tenure_months": 27},
                         "ticket": {"subject": "Charged twice for order #88213", "messages": messages,
                                    "total_usd": 1250.0, "status": "open"}},
               "questions": questions()}

    def length() -> int:
        return len(mod.encode_record(tokenizer, request, max_length=1 << 30).input_ids)

    while True:
        messages.append({"from": ("customer", "agent")[len(messages) % 2],
                         "text": " ".join(rng.choices(words, k=20))})
        if length() > tokens:
            break
    last = messages[-1]
    last["text"] = ""
    while length() < tokens:
        last["text"] = (last["text"] + " " + rng.choice(words)).strip()
    return request


def make(out_dir: Path, tokens: int, hidden: int, dtype: str) -> None:
    release = out_dir / MODEL_NAME
    if not release.is_dir():  # written aside, then renamed: an interrupted make leaves no release
        import shutil
        out_dir.mkdir(parents=True, exist_ok=True)
        partial = out_dir / (MODEL_NAME + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        make_release(partial, hidden, dtype)
        partial.rename(release)
    record_path = out_dir / f"record-{tokens}.json"
    if not record_path.is_file():
        record = make_record(hf_tokenizer(release), clef_oracle.load_reference(), tokens)
        record_path.write_text(json.dumps(record, indent=1) + "\n")


def run(release: Path, record_path: Path, runs: int, threads: int, max_length: int) -> None:
    from transformers import Qwen3_5ForConditionalGeneration

    torch.set_num_threads(threads)
    # The reference load_release_model(path, device="cpu", dtype=torch.float32), minus its
    # AutoProcessor (a text-only release has no image processor): the tokenizer instead.
    time_decisions(clef_oracle.load_reference(), release,
                   lambda: Qwen3_5ForConditionalGeneration.from_pretrained(release, dtype=torch.float32),
                   json.loads(record_path.read_text()), runs, max_length, lambda: hf_tokenizer(release))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1024,
             int(sys.argv[4]) if len(sys.argv) > 4 else 1024, sys.argv[5] if len(sys.argv) > 5 else "bf16")
    else:
        run(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
