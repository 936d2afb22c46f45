#!/usr/bin/env python3
"""peer.py — the PyTorch side of bench/cpu_forward: make the mid-size release, and time
transformers' Qwen3.5 text forward on it.

  python3 peer.py make DIR            write a random-weight BF16 Clef release with
        scripts/fixtures/make_release.py's write_release (transformers' init: N(0, 0.02)
        matrices; a tiny vision tower and the reference head, so the release reader accepts it)
  python3 peer.py run DIR T RUNS THREADS
        load DIR with from_pretrained(dtype=float32) — fp32 math on the BF16 weights, the same
        arithmetic as the engine — then time Qwen3_5Model(input_ids).last_hidden_state over T
        random tokens: 1 warm-up + RUNS timed runs, torch.set_num_threads(THREADS), no grad,
        eager attention, no cache (token ids uniform over the release's vocabulary). Prints one JSON line: median ms, tok/s, median CPU seconds of
        a forward (all threads), peak RSS.
Requirements: pip install -r scripts/requirements.txt (make also needs the reference head file,
located as make_release.py's docstring says).
"""
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

CONFIG = dict(vocab_size=4096, hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
              num_attention_heads=8, num_key_value_heads=2, head_dim=256,
              linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
              linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
              tie_word_embeddings=False,
              rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                                   mrope_section=[11, 11, 10], mrope_interleaved=True))


def make(out_dir):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "fixtures"))
    from make_release import write_release
    D = CONFIG["hidden_size"]
    write_release(out_dir, text_config=CONFIG, vision_config=dict(depth=1, out_hidden_size=D),
                  head_config=dict(hidden_size=D), seed=0, dtype="bfloat16")


def run(model_dir, T, runs, threads):
    from transformers import Qwen3_5ForConditionalGeneration
    torch.set_num_threads(threads)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
    vocab = model.config.text_config.vocab_size
    ids = torch.randint(0, vocab, (1, T), generator=torch.Generator().manual_seed(1))
    times, cpu = [], []
    with torch.inference_mode():
        for i in range(runs + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            model.model(input_ids=ids, use_cache=False).last_hidden_state
            if i > 0:  # the first run is the warm-up
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    med = statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"ms": med * 1e3, "tok_s": T / med, "cpu_s": statistics.median(cpu),
                      "peak_rss": rss, "runs": runs}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
