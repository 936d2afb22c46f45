#!/usr/bin/env python3
"""records.py — the request bodies of bench/serve, one JSON line each: two records of the demo
fixture (tests/model/fixtures/e2e.json: demo_record, 3 questions on a support ticket, and
one_noul) as SystemOne bodies ("id" dropped, "model" added)."""
import json

with open("tests/model/fixtures/e2e.json") as f:
    records = {r["name"]: r["request"] for r in json.load(f)["records"]}
for name in ("demo_record", "one_noul"):
    body = {k: v for k, v in records[name].items() if k != "id"}
    body["model"] = "clef-demo"
    print(json.dumps(body, ensure_ascii=False))
