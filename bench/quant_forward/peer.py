#!/usr/bin/env python3
"""peer.py — the libraries' side of bench/quant_forward: make the quantized mid-size releases
with the real producers, and time the Qwen3.5 text forward on them with transformers + the
library (the same loaders as scripts/quant/make_backbone_oracle.py: fp32 activations, each
quantized linear computed by its library's CPU path).

  python3 peer.py make SRC OUT PRECISION     quantize the BF16 release SRC (nf4 | fp8 | int8)
        with scripts/fixtures/make_quantized.py (bitsandbytes, compressed-tensors,
        comfy-kitchen) into OUT
  python3 peer.py run DIR PRECISION T RUNS THREADS
        load DIR, then Qwen3_5Model(input_ids).last_hidden_state over T random tokens:
        1 warm-up + RUNS timed runs, torch.set_num_threads(THREADS), inference mode. Prints one
        JSON line: median ms, tok/s, median CPU seconds (all threads), peak RSS.
"""
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def make(src, out, precision):
    sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
    import make_quantized
    {"nf4": make_quantized.write_nf4, "fp8": make_quantized.write_fp8,
     "int8": make_quantized.write_int8}[precision](src, out)


def run(model_dir, precision, T, runs, threads):
    sys.path.insert(0, str(ROOT / "scripts" / "quant"))
    import make_backbone_oracle as oracle
    torch.set_num_threads(threads)
    load = {"nf4": oracle.load_nf4, "fp8": oracle.load_fp8, "int8": oracle.load_int8}[precision]
    model, _ = load(Path(model_dir))
    model.eval()
    vocab = model.config.text_config.vocab_size
    ids = torch.randint(0, vocab, (1, T), generator=torch.Generator().manual_seed(1))
    text = model.model.language_model
    times, cpu = [], []
    with torch.inference_mode():
        for i in range(runs + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            text(input_ids=ids, use_cache=False).last_hidden_state
            if i > 0:  # the first run is the warm-up
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    med = statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"ms": med * 1e3, "tok_s": T / med, "cpu_s": statistics.median(cpu),
                      "peak_rss": rss, "runs": runs}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
