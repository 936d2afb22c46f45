#!/usr/bin/env python3
"""server_peer.py — the llama.cpp side of bench/cpu_decide: time one Clef decision through
llama.cpp's own server (POST /v1/systemone), the way a user of llama.cpp runs it.

  python3 server_peer.py LLAMA_SERVER GGUF RECORD RUNS THREADS CTX

Starts LLAMA_SERVER -m GGUF -t THREADS -tb THREADS -c CTX -b CTX -ub CTX -np 1 (the whole
prompt in one batch, as the server requires for Clef) on a free local port, waits for
/health (load time), then 1 warm-up + RUNS timed POSTs of RECORD (a SystemOne request).
CPU seconds of a decision and peak RSS are the server process's own (/proc: utime + stime,
VmHWM; the weights are mmapped, so their pages count once touched). Prints one JSON line:
load_s, ms (median wall of a decision, HTTP included), cpu_s, runs, threads, peak_rss,
answer (the response body of the last decision). Standard library only.
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    server, gguf, record, runs, threads, ctx = sys.argv[1:7]
    runs, threads, ctx = int(runs), int(threads), int(ctx)
    body = open(record, "rb").read()
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([server, "-m", gguf, "-t", str(threads), "-tb", str(threads), "-c", str(ctx),
                             "-b", str(ctx), "-ub", str(ctx), "-np", "1", "--no-webui",
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                sys.exit(f"server_peer.py: llama-server exited with status {proc.returncode}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.2)
        load_s = time.perf_counter() - t0
        times, cpu, answer = [], [], None
        for i in range(runs + 1):
            req = urllib.request.Request(base + "/v1/systemone", data=body,
                                         headers={"Content-Type": "application/json"})
            c0, w0 = proc_cpu_s(proc.pid), time.perf_counter()
            with urllib.request.urlopen(req, timeout=3600) as r:
                answer = json.loads(r.read())
            if i > 0:  # the first decision is the warm-up
                times.append(time.perf_counter() - w0)
                cpu.append(proc_cpu_s(proc.pid) - c0)
        print(json.dumps({"load_s": load_s, "ms": statistics.median(times) * 1e3,
                          "cpu_s": statistics.median(cpu), "runs": runs, "threads": threads,
                          "peak_rss": peak_rss(proc.pid), "answer": answer}))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
