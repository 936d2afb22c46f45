"""test_server_http.py — `clef serve` on loopback, driven with Python's standard library only:
routes, auth, limits and error shapes, answers equal to `clef run` and to the reference
oracle's, batching, backpressure, timeouts, misbehaving clients and graceful shutdown.

usage: python3 tests/server/test_server_http.py CLEF_BINARY   (ctest: test_server_http)
"""
import concurrent.futures as cf
import http.client
import json
import os
import resource
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import (Server, as_systemone, big_state, clef_run, fixture_records, metric,  # noqa: E402
                            raw_exchange, status_of, wait_until)

CLEF = None
TOKEN = "test-token-0123456789"
WAI = "/client/v4/accounts/acct123/ai/run/@cf/cloudflare/clef-flash"
# A normal request's latency bound while other clients misbehave (sanitizer build, shared CPU).
LATENCY_BOUND_S = 5.0


def timed_post(srv, path, body):
    t0 = time.monotonic()
    status, headers, data = srv.post(path, body)
    return status, headers, data, time.monotonic() - t0


class MainServer(unittest.TestCase):
    """One server with a token, the fixture's max_length and truncation, serving 'clef-flash'."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(CLEF, "--name", "clef-flash", "--max-length", "2048", "--truncation",
                         "truncate", "--max-body-bytes", "200000", "--client-timeout", "20",
                         token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        if rc != 0:
            raise AssertionError("clef serve exited %d:\n%s" % (rc, cls.srv.log()))

    # -- answers ---------------------------------------------------------------------------
    def test_answers_match_clef_run_and_oracle(self):
        for rec in fixture_records():
            body = as_systemone(rec["request"], "jev-latest")
            want = clef_run(CLEF, body, "--max-length", "2048", "--truncation", "truncate")
            status, headers, data = self.srv.post("/v1/systemone", body)
            self.assertEqual(status, 200, (rec["name"], data))
            self.assertEqual(data, want, rec["name"])  # byte for byte what `clef run` prints
            got = json.loads(data)
            self.assertEqual(got["answers"], rec["answer"]["answers"], rec["name"])  # the oracle
            self.assertEqual(got["usage"]["input_tokens"], rec["answer"]["usage"]["input_tokens"])
            self.assertEqual(got["usage"].get("truncated_tokens", 0), rec["truncated_tokens"])
            # the same record through the Workers AI route, in its envelope
            status, _, data = self.srv.post(WAI, as_systemone(rec["request"], "clef-flash"))
            self.assertEqual(status, 200, data)
            env = json.loads(data)
            self.assertEqual(env["success"], True)
            self.assertEqual(env["errors"], [])
            self.assertEqual(env["result"]["answers"], rec["answer"]["answers"])
            self.assertEqual(env["result"]["model"], "clef-flash")

    def test_records_with_images_match_clef_run(self):
        # the records with 1-4 images (data URLs) of the vision end-to-end fixture, on the demo
        # release: the server answers exactly what `clef run` does. (The fixture's own answers
        # were made with the test's processor pixel bounds, not the release's defaults that
        # `clef serve` uses, so they are checked by test_vision_e2e / test_vision_cli instead.)
        with open("tests/vision/fixtures/e2e_images.json") as f:
            recs = json.load(f)["records"]
        sent = 0
        for rec in recs:
            body = as_systemone(rec["request"], rec["request"]["model"])
            if len(json.dumps(body)) > 200000:  # this server's --max-body-bytes
                continue
            status, _, data = self.srv.post("/v1/systemone", body)
            try:
                want = clef_run(CLEF, body, "--max-length", "2048", "--truncation", "truncate")
            except RuntimeError as err:  # e.g. 4 images of 1,024 tokens each over max_length
                self.assertIn("request too long", str(err), rec["name"])
                self.assertEqual(status, 413, (rec["name"], data))  # refused alike
                continue
            self.assertEqual(status, 200, (rec["name"], data))
            self.assertEqual(data, want, rec["name"])  # byte for byte what `clef run` prints
            self.assertGreater(json.loads(data)["usage"]["vision_tokens"], 0, rec["name"])
            sent += 1
        print("records with images answered: %d of %d" % (sent, len(recs)))
        self.assertGreaterEqual(sent, 2)  # the 1-image records; the others over 2,048 tokens

    def test_concurrent_requests_batch_and_match(self):
        # the light records (the two with many options cost far more head work than the rest)
        recs = [r for r in fixture_records() if r["name"] in ("demo_record", "one_noul",
                                                              "truncated_state")]
        bodies = [as_systemone(recs[i % len(recs)]["request"], "m") for i in range(48)]
        want = {i: json.loads(self.srv.post("/v1/systemone", bodies[i])[2])
                for i in range(len(recs))}
        before = metric(self.srv.metrics(), "clef_batch_size_count")
        with cf.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda b: self.srv.post("/v1/systemone", b), bodies))
        for i, (status, _, data) in enumerate(results):
            self.assertEqual(status, 200, data)
            self.assertEqual(json.loads(data), want[i % len(recs)])
        m = self.srv.metrics()
        batches = metric(m, "clef_batch_size_count") - before
        self.assertLess(batches, 48, "48 concurrent requests never shared a batch")

    # -- plain routes ------------------------------------------------------------------------
    def test_health_models_openapi_metrics(self):
        status, h, data = self.srv.request("GET", "/health", headers={"Authorization": ""})
        self.assertEqual((status, json.loads(data)["status"]), (200, "ok"))
        status, _, data = self.srv.request("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(data)["models"][0]["name"], "clef-flash")
        status, _, data = self.srv.request("GET", "/openapi.json", headers={"Authorization": ""})
        doc = json.loads(data)
        self.assertEqual(status, 200)
        for path in ["/v1/systemone", "/v1/models", "/health", "/metrics", "/openapi.json",
                     "/client/v4/accounts/{account_id}/ai/run/@cf/cloudflare/{model}",
                     "/accounts/{account_id}/ai/run/@cf/cloudflare/{model}"]:
            self.assertIn(path, doc["paths"])
        m = self.srv.metrics()
        for name in ["clef_http_requests_total", "clef_http_request_duration_seconds_bucket",
                     "clef_queue_depth", "clef_batch_size_bucket", "clef_tokens_total",
                     "clef_tokens_per_second", "process_resident_memory_bytes"]:
            self.assertIn(name, m)
        self.assertGreater(metric(m, "process_resident_memory_bytes"), 1e6)

    def test_request_id(self):
        _, h, _ = self.srv.request("GET", "/health", headers={"x-request-id": "abc-123"})
        self.assertEqual(h["x-request-id"], "abc-123")
        _, h1, _ = self.srv.request("GET", "/health", headers={"x-request-id": "bad id\x7f"})
        _, h2, _ = self.srv.request("GET", "/nope")
        self.assertTrue(h1["x-request-id"] and h2["x-request-id"])
        self.assertNotEqual(h1["x-request-id"], h2["x-request-id"])
        self.assertTrue(any("id=abc-123" in line for line in self.srv.lines))  # the access log

    # -- auth ---------------------------------------------------------------------------------
    def test_auth(self):
        body = as_systemone(fixture_records()[1]["request"], "m")
        for auth in [None, "", "Bearer", "Bearer wrong", "Bearer " + TOKEN + "x",
                     "Bearer " + TOKEN[:-1], "Basic " + TOKEN]:
            hdr = {"Authorization": auth} if auth is not None else {"Authorization": ""}
            status, h, data = self.srv.post("/v1/systemone", body, headers=hdr)
            self.assertEqual(status, 401, auth)
            self.assertEqual(h.get("www-authenticate"), "Bearer")
            self.assertIn("detail", json.loads(data))
            status, _, data = self.srv.post(WAI, body, headers=hdr)
            self.assertEqual(status, 401)
            self.assertEqual(json.loads(data)["errors"][0]["code"], 10000)
        for path in ["/v1/models", "/metrics"]:
            self.assertEqual(self.srv.request("GET", path, headers={"Authorization": ""})[0], 401)

    # -- errors --------------------------------------------------------------------------------
    def test_validation_errors(self):
        status, _, data = self.srv.post("/v1/systemone", b'{"model": "m", "state": 1, "questions":')
        self.assertEqual(status, 422)
        self.assertEqual(json.loads(data)["detail"][0]["type"], "json_invalid")
        body = {"model": "m", "state": 1, "questions": {"q": {"type": "choice", "criteria": {"a": "x"}}},
                "extra": 1}
        status, _, data = self.srv.post("/v1/systemone", body)
        self.assertEqual(status, 422)
        types = {d["type"] for d in json.loads(data)["detail"]}
        self.assertIn("extra_forbidden", types)
        status, _, data = self.srv.post(WAI, body)
        env = json.loads(data)
        self.assertEqual((status, env["success"], env["errors"][0]["code"]), (422, False, 5006))
        # the body's model must be the route's
        status, _, data = self.srv.post(WAI, {"model": "clef", "state": 1,
                                              "questions": {"q": {"type": "noul"}}})
        self.assertEqual(status, 422, data)
        # a model this server does not run
        status, _, data = self.srv.post(WAI.replace("clef-flash", "clef"),
                                        {"model": "clef", "state": 1, "questions": {"q": {"type": "noul"}}})
        self.assertEqual(status, 404)
        self.assertFalse(json.loads(data)["success"])
        # an image that is not one (a PNG data URL of 3 bytes): a clear 422, not a 5xx
        status, _, data = self.srv.post("/v1/systemone", {"model": "m", "state": 1, "questions": {
            "q": {"type": "noul"}}, "images": ["data:image/png;base64,AAAA"]})
        self.assertEqual(status, 422, data)
        self.assertEqual(self.srv.request("GET", "/v1/systemone")[0], 405)
        self.assertEqual(self.srv.request("POST", "/health")[0], 405)
        self.assertEqual(self.srv.request("GET", "/nowhere")[0], 404)

    def test_oversized_body(self):
        body = b'{"model":"m","state":"' + b"x" * 300000 + b'","questions":{"q":{"type":"noul"}}}'
        status, h, data = self.srv.post("/v1/systemone", body)  # Content-Length over the cap
        self.assertEqual(status, 413)
        self.assertEqual(json.loads(data)["detail"][0]["type"], "body_too_large")
        status, _, data = self.srv.post(WAI, body)
        self.assertEqual((status, json.loads(data)["errors"][0]["code"]), (413, 3006))
        # chunked, so the size is only known while reading
        head = ("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % TOKEN).encode()
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 65536]), body[i:i + 65536])
                          for i in range(0, len(body), 65536)) + b"0\r\n\r\n"
        self.assertEqual(status_of(raw_exchange(self.srv.port, head + chunks)), 413)
        self.assertEqual(self.srv.request("GET", "/health")[0], 200)

    # -- misbehaving clients -----------------------------------------------------------------
    def test_broken_http_and_disconnects(self):
        for raw in [b"GARBAGE\r\n\r\n", b"POST /v1/systemone HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                    b"\x00\xff\xfe" * 100, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
                    b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"a\""]:
            reply = raw_exchange(self.srv.port, raw, timeout=25)
            st = status_of(reply)
            self.assertTrue(st is None or 400 <= st < 500, (raw[:40], reply[:200]))
        # disconnect in the middle of a body, and right after sending a full request
        good = json.dumps(as_systemone(fixture_records()[0]["request"], "m")).encode()
        for cut in [10, len(good) // 2, len(good)]:
            s = socket.create_connection(("127.0.0.1", self.srv.port))
            s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                      b"Content-Length: %d\r\n\r\n" % (TOKEN.encode(), len(good)) + good[:cut])
            s.close()
        status, _, data, dt = timed_post(self.srv, "/v1/systemone",
                                         as_systemone(fixture_records()[1]["request"], "m"))
        self.assertEqual(status, 200)
        self.assertLess(dt, LATENCY_BOUND_S)

    def test_idle_connections_and_slowloris(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        idle = []
        try:
            for _ in range(1000):
                idle.append(socket.create_connection(("127.0.0.1", self.srv.port)))
            # slowloris: headers and a body one byte at a time
            slow = [socket.create_connection(("127.0.0.1", self.srv.port)) for _ in range(20)]
            stop = threading.Event()

            def drip():
                msg = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                       + TOKEN.encode() + b"\r\nContent-Length: 100000\r\n\r\n" + b" " * 1000)
                i = 0
                while not stop.is_set() and i < len(msg):
                    for s in slow:
                        try:
                            s.send(msg[i:i + 1])
                        except OSError:
                            pass
                    i += 1
                    time.sleep(0.05)
            t = threading.Thread(target=drip, daemon=True)
            t.start()
            body = as_systemone(fixture_records()[1]["request"], "m")
            worst = 0.0
            for _ in range(20):
                status, _, data, dt = timed_post(self.srv, "/v1/systemone", body)
                self.assertEqual(status, 200, data)
                worst = max(worst, dt)
            stop.set()
            t.join()
            self.assertLess(worst, LATENCY_BOUND_S, "a request took %.2fs beside 1,000 idle "
                            "connections and 20 slow clients" % worst)
            for s in slow:
                s.close()
        finally:
            for s in idle:
                s.close()
        self.assertEqual(self.srv.request("GET", "/health")[0], 200)


class SlowClientTimeout(unittest.TestCase):
    def test_slow_body_is_cut_off(self):
        with Server(CLEF, "--client-timeout", "1") as srv:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
            s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            t0 = time.monotonic()
            closed = False
            try:
                for _ in range(100):
                    s.send(b" ")
                    time.sleep(0.1)
                    s.setblocking(False)
                    try:
                        if s.recv(4096) == b"":
                            closed = True
                            break
                    except BlockingIOError:
                        pass
                    finally:
                        s.setblocking(True)
            except OSError:
                closed = True
            s.close()
            self.assertTrue(closed, "a client dripping its body was never cut off")
            self.assertLess(time.monotonic() - t0, 8)
            self.assertEqual(srv.request("GET", "/health")[0], 200)
            self.assertEqual(srv.stop(), 0, srv.log())


class Backpressure(unittest.TestCase):
    def _flood(self, srv, n, words):
        body = {"model": "m", "state": big_state(words), "questions": {"q": {"type": "noul"}}}
        with cf.ThreadPoolExecutor(n) as pool:
            return list(pool.map(lambda _: srv.post("/v1/systemone", body), range(n)))

    def test_queue_full_is_429_with_retry_after(self):
        with Server(CLEF, "--max-queue", "2", "--max-batch-requests", "1") as srv:
            results = self._flood(srv, 32, 1500)
            statuses = [r[0] for r in results]
            self.assertTrue(set(statuses) <= {200, 429}, statuses)
            self.assertIn(429, statuses)
            self.assertIn(200, statuses)
            for st, h, data in results:
                if st == 429:
                    self.assertEqual(h.get("retry-after"), "1")
                    self.assertEqual(json.loads(data)["detail"][0]["type"], "queue_full")
            self.assertEqual(srv.stop(), 0, srv.log())

    def test_timeout_in_queue_is_503(self):
        with Server(CLEF, "--timeout", "0.05", "--max-batch-requests", "1") as srv:
            results = self._flood(srv, 24, 1500)
            statuses = [r[0] for r in results]
            self.assertTrue(set(statuses) <= {200, 503}, statuses)
            self.assertIn(503, statuses)
            for st, h, data in results:
                if st == 503:
                    self.assertEqual(h.get("retry-after"), "1")
            self.assertGreater(metric(srv.metrics(), "clef_requests_dropped_total",
                                      'reason="timeout"'), 0)
            self.assertEqual(srv.stop(), 0, srv.log())

    def test_client_that_hangs_up_frees_its_slot(self):
        # one context, one request per batch, slow records: most wait in the queue; half of
        # the clients hang up at once and must be dropped before their forward
        with Server(CLEF, "--max-batch-requests", "1") as srv:
            body = json.dumps({"model": "m", "state": big_state(1500),
                               "questions": {"q": {"type": "noul"}}}).encode()
            req = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                   % len(body) + body)
            socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=120) for _ in range(16)]
            for s in socks:
                s.sendall(req)
            def held():  # queued + answered: at most one more is running
                m = srv.metrics()
                return (metric(m, "clef_queue_depth") +
                        metric(m, "clef_http_requests_total", 'route="systemone",status="200"'))
            self.assertTrue(wait_until(lambda: held() >= 15, 60), "the server did not take the requests")
            for s in socks[8:]:
                s.close()
            for s in socks[:8]:
                reply = b""
                while not (status_of(reply) and reply.endswith(b"}")):
                    c = s.recv(65536)
                    if not c:
                        break
                    reply += c
                self.assertEqual(status_of(reply), 200)
                s.close()
            m = srv.metrics()
            gone = metric(m, "clef_requests_dropped_total", 'reason="client_gone"')
            answered = metric(m, "clef_http_requests_total", 'route="systemone",status="200"')
            self.assertGreater(gone, 0, "no queued request of a client that hung up was dropped")
            # every request answered or dropped, once (one may have been running unseen)
            self.assertIn(gone + answered, (15, 16))
            self.assertEqual(srv.stop(), 0, srv.log())

    def test_prompt_over_max_length_refused_413(self):
        with Server(CLEF, "--max-length", "256") as srv:  # --truncation refuse is the default
            body = {"model": "m", "state": big_state(400), "questions": {"q": {"type": "noul"}}}
            status, _, data = srv.post("/v1/systemone", body)
            self.assertEqual(status, 413, data)
            self.assertEqual(json.loads(data)["detail"][0]["type"], "too_long")
            self.assertEqual(srv.stop(), 0, srv.log())


class Lifecycle(unittest.TestCase):
    def test_sigterm_answers_every_accepted_request(self):
        srv = Server(CLEF, "--max-batch-requests", "1")
        body = json.dumps({"model": "m", "state": big_state(1500),
                           "questions": {"q": {"type": "noul"}}}).encode()
        socks = []
        for _ in range(12):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
            s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body)
            socks.append(s)
        # wait until the server has accepted all 12 (queued, running or answered), then stop
        # it: every accepted request must be answered 200 through the shutdown
        self.assertTrue(wait_until(
            lambda: metric(srv.metrics(), "clef_requests_accepted_total") >= 12, 60),
            "the server did not accept all 12 requests")
        srv.proc.send_signal(signal.SIGTERM)
        statuses = []
        for s in socks:
            reply = b""
            while True:
                c = s.recv(65536)
                if not c:
                    break
                reply += c
                if b"\r\n\r\n" in reply and status_of(reply) and reply.endswith(b"}"):
                    break
            statuses.append(status_of(reply))
            s.close()
        self.assertTrue(all(st == 200 for st in statuses), statuses)
        self.assertEqual(srv.stop(), 0, srv.log())
        self.assertTrue(any("shutting down" in line for line in srv.lines))

    def test_two_contexts_answer_concurrently(self):
        recs = [r for r in fixture_records() if r["name"] in ("demo_record", "one_noul")]
        bodies = [as_systemone(recs[i % 2]["request"], "m") for i in range(16)]
        with Server(CLEF, "--contexts", "2", "--max-batch-requests", "2") as srv:
            with cf.ThreadPoolExecutor(8) as pool:
                results = list(pool.map(lambda b: srv.post("/v1/systemone", b), bodies))
            for i, (status, _, data) in enumerate(results):
                self.assertEqual(status, 200, data)
                self.assertEqual(json.loads(data)["answers"], recs[i % 2]["answer"]["answers"])
            # the counter moves when libmicrohttpd reports the response sent, which can come
            # just after the client has read it
            count = lambda: metric(srv.metrics(), "clef_http_requests_total",
                                   'route="systemone",status="200"')
            wait_until(lambda: count() >= 16, 10)
            self.assertEqual(count(), 16)
            self.assertEqual(srv.stop(), 0, srv.log())

    def test_refuses_public_address_without_token(self):
        import subprocess
        out = subprocess.run([CLEF, "serve", "--model", "demo/clef-demo", "--host", "0.0.0.0",
                              "--port", "0"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn("without a token", out.stderr)

    def test_bad_release_fails_load(self):
        import subprocess
        out = subprocess.run([CLEF, "serve", "--model", "tests/server", "--port", "0"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("loading failed", out.stderr)


if __name__ == "__main__":
    CLEF = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
