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
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "demo"))
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
sys.path.insert(0, str(ROOT / "scripts" / "quant"))
import clef_oracle  # noqa: E402
from make_demo import hf_tokenizer  # noqa: E402

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
    from safetensors.torch import load_file

    torch.set_num_threads(threads)
    mod = clef_oracle.load_reference()
    request = json.loads(record_path.read_text())
    t0 = time.perf_counter()
    backbone = load_backbone(release, precision)
    backbone.config.use_cache = False
    head = mod.JointSchemaHead(**json.loads((release / "joint_head_config.json").read_text()))
    head.load_state_dict(load_file(release / "joint_head.safetensors"), strict=True)
    model = mod.ClefModel(backbone, head.to(dtype=torch.float32)).eval()

    class TextOnlyProcessor:
        tokenizer = hf_tokenizer(release)

    processor = TextOnlyProcessor()
    load_s = time.perf_counter() - t0
    times, cpu = [], []
    with torch.inference_mode():
        for i in range(runs + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            answer = mod.systemone(model, processor, request, max_length=max_length)
            if i > 0:  # the first decision is the warm-up
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    print(json.dumps({"load_s": load_s, "ms": statistics.median(times) * 1e3,
                      "cpu_s": statistics.median(cpu), "runs": runs,
                      "threads": torch.get_num_threads(),
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "answer": answer}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
    else:
        run(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
            int(sys.argv[7]))
