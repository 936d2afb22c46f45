"""test_server_schemathesis.py — schemathesis (pinned in requirements.txt) generates requests
from GET /openapi.json of a live `clef serve` on loopback and checks every answer: never a
5xx (not_a_server_error), only documented statuses, content types, headers and response
schemas. Bounded by --max-time (ctest: 90 s); run it longer by hand, e.g.

    python3 tests/server/test_server_schemathesis.py build/clef VENV --max-time 1800

usage: test_server_schemathesis.py CLEF_BINARY VENV [schemathesis options...]
Exit 77 (ctest: SKIPPED) with the reason when schemathesis could not be installed.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server  # noqa: E402

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance,response_headers_conformance")


def main():
    clef = os.path.abspath(sys.argv[1])
    venv = os.path.abspath(sys.argv[2])
    extra = sys.argv[3:] or ["--max-time", "90"]
    unavailable = os.path.join(venv, "UNAVAILABLE")
    if os.path.exists(unavailable):
        print("SKIPPED: schemathesis could not be installed: " + open(unavailable).read())
        return 77
    token = "schemathesis-token"
    with Server(clef, "--name", "clef-flash", "--threads", "1", "--quiet", token=token) as srv:
        cmd = [os.path.join(venv, "bin", "schemathesis"), "run", srv.base_url + "/openapi.json",
               "-H", "Authorization: Bearer " + token, "--checks", CHECKS,
               "--max-examples", "25", "--generation-deterministic", "--workers", "1",
               "--no-color", "--request-timeout", "60"] + extra
        print(" ".join(cmd), flush=True)
        rc = subprocess.run(cmd, cwd=os.path.dirname(venv), timeout=3600).returncode
        stop_rc = srv.stop()
        if stop_rc != 0:
            print("clef serve exited %d:\n%s" % (stop_rc, srv.log()))
            return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
