"""server_harness.py — starts `clef serve` on loopback for the server tests and talks to it.

Every server runs on 127.0.0.1 with --port 0 (the kernel picks a free port; the server prints
it on stderr), on the committed demo release, and is stopped with SIGTERM at the end of its
test; its exit status and stderr are checked (0 after a graceful shutdown; under the sanitizer
build a leak or an error report makes the status non-zero). Traffic never leaves loopback.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

DEMO = "demo/clef-demo"
FIXTURE = "tests/model/fixtures/e2e.json"
READY_TIMEOUT_S = 120


class Server:
    """One `clef serve` process. Use as a context manager; stop() returns the exit status."""

    def __init__(self, clef, *args, token=None):
        self.token = token
        cmd = [clef, "serve", "--model", DEMO, "--host", "127.0.0.1", "--port", "0", "--threads", "1"]
        if token:
            cmd += ["--token", token]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        self.lines = []
        self.port = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._ready.wait(READY_TIMEOUT_S) or self.port is None:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("clef serve did not become ready:\n" + self.log())

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            m = re.search(r"ready on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self._ready.set()
        self._ready.set()

    def log(self):
        return "\n".join(self.lines[-60:])

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("clef serve did not stop within %ss of SIGTERM" % timeout)
        self._reader.join(10)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.stop()

    @property
    def base_url(self):
        return "http://127.0.0.1:%d" % self.port

    def headers(self, extra=None):
        h = {"Content-Type": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request on a fresh connection: (status, headers dict lower-cased, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            conn.request(method, path, body=body, headers=self.headers(headers))
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200, status
        return data.decode()


def metric(text, name, labels=""):
    """The value of one sample of the Prometheus text (0 when absent)."""
    key = name + ("{" + labels + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return 0.0


def raw_exchange(port, data, timeout=30):
    """Send raw bytes on a new connection and read until the server closes or answers fully."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        chunks = []
        while True:
            try:
                c = s.recv(65536)
            except socket.timeout:
                break
            if not c:
                break
            chunks.append(c)
            got = b"".join(chunks)
            head, sep, rest = got.partition(b"\r\n\r\n")
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            if sep and m and len(rest) >= int(m.group(1)):
                break
        return b"".join(chunks)
    finally:
        s.close()


def status_of(raw):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    return int(m.group(1)) if m else None


def fixture_records():
    with open(FIXTURE) as f:
        return json.load(f)["records"]


def as_systemone(request, model):
    """A record of the fixture as a SystemOne / Workers AI body (no "id", a "model")."""
    body = {k: v for k, v in request.items() if k != "id"}
    body["model"] = model
    return body


def clef_run(clef, body, *args):
    """`clef run` on the same body: its stdout (the SystemOne response body)."""
    out = subprocess.run([clef, "run", "--model", DEMO, "--record", "-", "--json", "--quiet"]
                         + list(args), input=json.dumps(body).encode(), capture_output=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError("clef run failed: " + out.stderr.decode(errors="replace"))
    return out.stdout.strip()


def big_state(words):
    """A state of about `words` tokens on the demo tokenizer (a forward that takes a while)."""
    vocab = ["angry", "calm", "invoice", "total", "refund", "broken", "late", "order"]
    return {"log": " ".join(vocab[i % len(vocab)] for i in range(words))}


def wait_until(pred, timeout, period=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(period)
    return pred()
