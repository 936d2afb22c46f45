#!/usr/bin/env python3
"""bench_hf.py — the peer of bench_tokenizer.c, single thread, same protocol (load: median of
3 loads; encode every record once per run with add_special_tokens=False, the first run a
warm-up, median of RUNS). Two peers, matching bench_tokenizer's two pipelines:
  tokenizers    HF `tokenizers` Tokenizer.from_file + the config's extra added tokens
                (compare_corpus.load_oracle), encode(text, add_special_tokens=False);
  transformers  transformers' AutoTokenizer.from_pretrained(dir) (load time), then its Rust
                backend encode (tok._tokenizer.encode(text, add_special_tokens=False)) — the
                same `tokenizers` code on the pipeline transformers built, without the
                Python overhead of tok(text) per call, so the ratio is against Rust.
Prints "<peer> <load_s> <MB_per_s> <tokens> <bytes>".
Usage: RAYON_NUM_THREADS=1 python3 bench/tokenizer/bench_hf.py TOKENIZER_DIR TEXT.jsonl [RUNS] [tokenizers|transformers]"""
import importlib.util
import json
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cc", os.path.join(here, "..", "..", "scripts", "tokenizer",
                                                                 "compare_corpus.py"))
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)
d, path = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
peer = sys.argv[4] if len(sys.argv) > 4 else "tokenizers"
with open(path, encoding="utf-8") as f:
    texts = [json.loads(l) for l in f.read().split("\n") if l]
nbytes = sum(len(t.encode("utf-8")) for t in texts)


def load():
    if peer == "transformers":
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(d)._tokenizer
    return cc.load_oracle(d)


loads = []
for _ in range(3):
    t0 = time.perf_counter()
    tok = load()
    loads.append(time.perf_counter() - t0)
times = []
tokens = 0
for r in range(runs + 1):
    t0 = time.perf_counter()
    tokens = 0
    for t in texts:
        tokens += len(tok.encode(t, add_special_tokens=False).ids)
    if r:
        times.append(time.perf_counter() - t0)
print("%s %.4f %.3f %d %d" % (peer, statistics.median(loads), nbytes / statistics.median(times) / 1e6, tokens, nbytes))
