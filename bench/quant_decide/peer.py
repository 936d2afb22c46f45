#!/usr/bin/env python3
"""peer.py — the Python side of bench/quant_decide: make the quantized mid-size releases of
bench/cpu_decide's release, and time a whole decision on them with transformers + each
release's own library + the reference joint_schema_model.py.

  python3 peer.py make SRC OUT PRECISION
        OUT: the BF16 release SRC (bench/cpu_decide's hidden-1024 one) quantized by the real
        producer (scripts/fixtures/make_quantized.py: nf4 bitsandbytes double quant, fp8
        compressed-tensors FP8_DYNAMIC, int8 comfy-kitchen ConvRot), with SRC's tokenizer
        files copied in first (a decision needs them; the weight writers do not copy them).
        Written aside and renamed: an interrupted make leaves nothing. Made only when missing.
  python3 peer.py run RELEASE PRECISION RECORD RUNS THREADS MAX_LENGTH
        the release's backbone loaded as scripts/quant/make_backbone_oracle.py loads it
        (nf4: transformers + bitsandbytes Linear4bit on CPU; fp8: transformers +
        compressed-tensors' forward; int8: comfy-kitchen's eager int8_linear; bf16:
        from_pretrained; activations fp32 in each), the reference JointSchemaHead (fp32) in
        the reference ClefModel, decided by the reference systemone(), torch.set_num_threads.
        Load is timed apart; then 1 warm-up + RUNS timed decisions. Prints one JSON line as
        bench/cpu_decide/peer.py does (load_s, ms, cpu_s, runs, threads, peak_rss, answer).
Requirements: pip install -r scripts/requirements.txt.
"""
import json
import shutil
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
sys.path.insert(0, str(ROOT / "scripts" / "quant"))
sys.path.insert(0, str(ROOT / "bench" / "cpu_decide"))
import clef_oracle  # noqa: E402
from make_demo import hf_tokenizer  # noqa: E402
from decide_timing import time_decisions  # noqa: E402

# what the weight writers produce themselves (everything else of SRC is copied)
WEIGHT_FILES = ("config.json", "complete.json", "model.safetensors", "model.safetensors.index.json",
                "joint_head.safetensors", "joint_head_config.json")


def make(src: Path, out: Path, precision: str) -> None:
    if out.is_dir():
        return
    import make_quantized
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file() and p.name not in WEIGHT_FILES and not p.name.endswith(".safetensors"):
            shutil.copyfile(p, partial / p.name)
    {"nf4": make_quantized.write_nf4, "fp8": make_quantized.write_fp8,
     "int8": make_quantized.write_int8}[precision](src, partial)
    partial.rename(out)


def load_backbone(release: Path, precision: str):
    if precision == "bf16":
        from transformers import Qwen3_5ForConditionalGeneration
        return Qwen3_5ForConditionalGeneration.from_pretrained(release, dtype=torch.float32)
    import make_backbone_oracle as oracle
    load = {"nf4": oracle.load_nf4, "fp8": oracle.load_fp8, "int8": oracle.load_int8}[precision]
    model, _ = load(release)
    return model


def run(release: Path, precision: str, record_path: Path, runs: int, threads: int,
        max_length: int) -> None:
    torch.set_num_threads(threads)
    time_decisions(clef_oracle.load_reference(), release, lambda: load_backbone(release, precision),
                   json.loads(record_path.read_text()), runs, max_length, lambda: hf_tokenizer(release),
                   inference_mode=True)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
    else:
        run(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
            int(sys.argv[7]))
