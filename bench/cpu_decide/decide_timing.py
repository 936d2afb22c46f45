"""decide_timing.py — the timing harness both Python peers of the decision benches share
(bench/cpu_decide/peer.py: transformers on a BF16 release; bench/quant_decide/peer.py:
transformers + each quantized release's own library): given a loaded backbone, wrap it with
the reference JointSchemaHead in the reference ClefModel, then time the reference
systemone() — 1 warm-up + RUNS decisions — and print one JSON line: load_s, the median wall
ms and CPU seconds (all threads) of a decision, runs, threads, peak RSS (bytes, whole process,
load included) and the answer (systemone()'s response body).
"""
import json
import resource
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import torch


def time_decisions(mod, release: Path, load_backbone, request: dict, runs: int, max_length: int,
                   load_tokenizer, inference_mode: bool = False) -> None:
    """mod: the reference joint_schema_model module; load_backbone() and load_tokenizer()
    (the release's Hugging Face tokenizer: a text-only release has no image processor, so it
    stands in for the reference AutoProcessor) are timed with the head as the load."""
    from safetensors.torch import load_file

    t0 = time.perf_counter()
    backbone = load_backbone()
    backbone.config.use_cache = False
    head = mod.JointSchemaHead(**json.loads((release / "joint_head_config.json").read_text()))
    head.load_state_dict(load_file(release / "joint_head.safetensors"), strict=True)
    model = mod.ClefModel(backbone, head.to(dtype=torch.float32)).eval()

    class TextOnlyProcessor:
        tokenizer = load_tokenizer()

    processor = TextOnlyProcessor()
    load_s = time.perf_counter() - t0
    times, cpu = [], []
    with torch.inference_mode() if inference_mode else nullcontext():
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
