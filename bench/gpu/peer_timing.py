"""peer_timing.py — the timing loop the Python peers under bench/gpu share (imported by
peer_torch_quant.py, peer_attention.py and peer_gdn.py; not run on its own).

cuda_median_ms(fn, runs, burst=1): 3 warm-up calls of fn, then `runs` timings, each CUDA
events around `burst` calls of fn, synchronised, divided by burst; returns the median in ms.
"""
import statistics

import torch


def cuda_median_ms(fn, runs, burst=1):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(burst):
            fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / burst)
    return statistics.median(times)
