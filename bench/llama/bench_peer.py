#!/usr/bin/env python3
"""bench_peer.py — the llama.cpp side of bench/cpu_forward: time llama.cpp's forward over a
prompt of T tokens with its own llama-bench (prompt processing, no generation).

  python3 bench_peer.py LLAMA_BENCH GGUF T RUNS THREADS

Runs LLAMA_BENCH -m GGUF -p T -n 0 -b T -ub T -t THREADS -r RUNS+1 -o json (the whole prompt
in one batch; llama-bench adds its own warm-up run first) as a child process; peak RSS is that
child's (getrusage of children, weights mmapped and touched). Prints one JSON line: ms
(median over the RUNS+1 repetitions' times, as llama-bench reports them), tok_s, cpu_s (the
child's CPU seconds over all repetitions / (RUNS + 2): warm-up and load included, so an upper
bound), peak_rss, runs. Standard library only.
"""
import json
import resource
import statistics
import subprocess
import sys


def main() -> None:
    bench, gguf, T, runs, threads = sys.argv[1:6]
    T, runs = int(T), int(runs)
    out = subprocess.run([bench, "-m", gguf, "-p", str(T), "-n", "0", "-b", str(T), "-ub", str(T),
                          "-t", threads, "-r", str(runs + 1), "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    result = [r for r in json.loads(out) if r.get("n_prompt") == T][0]
    ms = statistics.median(result["samples_ns"]) / 1e6
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"ms": ms, "tok_s": T / ms * 1e3, "cpu_s": (usage.ru_utime + usage.ru_stime) / (runs + 2),
                      "peak_rss": usage.ru_maxrss * 1024, "runs": runs + 1}))


if __name__ == "__main__":
    main()
