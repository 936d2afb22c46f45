"""test_server_clients.py — the real clients from PyPI (pinned in requirements.txt) against
`clef serve` on loopback, each pointed at it through its own base-URL setting:

  btx-skill-jev-judge  SystemOne (POST /v1/systemone); JevClient with the loopback base URL
                       its resolve_base_url() accepts from JEV_JUDGE_BASE_URL
  clef-evals           Workers AI route and envelope; ClefConfig.from_env with CLEF_BASE_URL
  clef-router          Workers AI route and envelope; ClefRouter(base_url=...)

Each must get exactly the answers `clef run` gives for the same records.

usage: python3 tests/server/test_server_clients.py CLEF_BINARY VENV (runs itself again in VENV)
Exit 77 (ctest: SKIPPED) with the reason when the clients could not be installed.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server, clef_run  # noqa: E402

CLEF = None
TOKEN = "client-test-token"
ACCOUNT = "0123456789abcdef"

# Records every client can express: a dict state, instructions on every question, string
# descriptions.
RECORDS = [
    {"state": {"customer": "Dana", "total_usd": 1250.0, "status": "open",
               "messages": ["I was billed twice.", "Please refund the duplicate charge."]},
     "questions": {
         "refund": {"type": "noul", "instructions": "Should the duplicate charge be refunded?"},
         "route": {"type": "choice", "instructions": "Choose the handling route.",
                   "criteria": {"billing": "Billing team", "support": "General support",
                                "escalate": "Escalate to a manager"}},
         "anger": {"type": "score", "instructions": "How angry is the customer?",
                   "criteria": ["calm", "annoyed", "angry"]}}},
    {"state": {"prompt": "Design a rate limiter for a global API.", "tokens": 42},
     "questions": {
         "hard": {"type": "noul", "instructions": "Is this a hard task?",
                  "criteria": {"true": "needs a frontier model", "false": "a cheap model will do"}},
         "domain": {"type": "choice", "instructions": "Which domain?",
                    "criteria": {"code": "software", "math": "mathematics"}}}},
]


def reference(body):
    return json.loads(clef_run(CLEF, body, "--truncation", "refuse"))


class Clients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(CLEF, "--name", "clef-flash", token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        if rc != 0:
            raise AssertionError("clef serve exited %d:\n%s" % (rc, cls.srv.log()))

    def test_btx_skill_jev_judge(self):
        from btx_skill_jev_judge.adapters.jev.client import JevClient, JevSettings, resolve_base_url
        from btx_skill_jev_judge.domain.models import QUESTIONS_ADAPTER

        base = resolve_base_url({"JEV_JUDGE_BASE_URL": self.srv.base_url})
        self.assertEqual(base, self.srv.base_url)  # the client accepts the loopback server
        with JevClient(key=TOKEN, base_url=base, settings=JevSettings(model="jev-latest", attempts=1)) as client:
            for rec in RECORDS:
                questions = QUESTIONS_ADAPTER.validate_python(
                    [dict(q, id=qid) for qid, q in rec["questions"].items()])
                outcome = client.ask(rec["state"], questions)
                self.assertIsNone(outcome.reason, outcome.reason)
                want = reference({"model": "jev-latest", "state": rec["state"],
                                  "questions": {q.id: q.to_api() for q in questions}})
                for qid, ans in outcome.answers.items():
                    w = want["answers"][qid]
                    if w["type"] == "noul":
                        self.assertEqual(ans.value, w["noul"])
                    elif w["type"] == "choice":
                        self.assertEqual((ans.value, ans.probabilities, ans.confidence),
                                         (w["choice"], w["probabilities"], w["confidence"]))
                    else:
                        self.assertEqual((ans.value, ans.probabilities, ans.confidence),
                                         (w["score"], w["probabilities"], w["confidence"]))
                self.assertEqual(set(outcome.answers), set(want["answers"]))

    def test_clef_evals(self):
        from clef_evals.client import ClefClient
        from clef_evals.config import ClefConfig
        from clef_evals.models import Choice, ChoiceAnswer, Noul, NoulAnswer, Score, ScoreAnswer

        config = ClefConfig.from_env({"CLEF_ACCOUNT_ID": ACCOUNT, "CLEF_API_TOKEN": TOKEN,
                                      "CLEF_MODEL": "@cf/cloudflare/clef-flash",
                                      "CLEF_BASE_URL": self.srv.base_url + "/client/v4",
                                      "CLEF_MAX_RETRIES": "0"})
        with ClefClient(config) as client:
            for rec in RECORDS:
                questions = {}
                for qid, q in rec["questions"].items():
                    if q["type"] == "noul":
                        c = q.get("criteria", {})
                        questions[qid] = Noul(q["instructions"], c.get("true"), c.get("false"))
                    elif q["type"] == "choice":
                        questions[qid] = Choice(q["instructions"], q["criteria"])
                    else:
                        questions[qid] = Score(q["instructions"], q["criteria"])
                resp = client.run(rec["state"], questions)
                want = reference({"model": "clef-flash", "state": rec["state"],
                                  "questions": {k: v.to_payload() for k, v in questions.items()}})
                self.assertEqual(resp.model, "clef-flash")
                self.assertEqual(resp.usage.input_tokens, want["usage"]["input_tokens"])
                for qid, ans in resp.answers.items():
                    w = want["answers"][qid]
                    if isinstance(ans, NoulAnswer):
                        self.assertEqual(ans.probability, w["noul"])
                    elif isinstance(ans, ChoiceAnswer):
                        self.assertEqual((ans.choice, ans.probabilities, ans.confidence),
                                         (w["choice"], w["probabilities"], w["confidence"]))
                    else:
                        self.assertIsInstance(ans, ScoreAnswer)
                        self.assertEqual((ans.score, ans.probabilities, ans.confidence),
                                         (w["score"], w["probabilities"], w["confidence"]))
                self.assertEqual(set(resp.answers), set(want["answers"]))

    def test_clef_router(self):
        from clef_router import ClefRouter

        with ClefRouter(account_id=ACCOUNT, api_token=TOKEN, model_selector="clef-flash",
                        base_url=self.srv.base_url + "/client/v4", max_retries=0) as router:
            for rec in RECORDS:
                decision = router.decide(rec["state"], rec["questions"])
                want = reference(dict(rec, model="clef-flash"))
                self.assertEqual(decision.raw_response["result"], want)
                self.assertEqual(decision.raw_response["success"], True)
                self.assertEqual(set(decision.answers), set(want["answers"]))

    def test_clients_see_errors(self):
        from clef_router import ClefRouter
        from clef_router.errors import ClefAuthError

        with ClefRouter(account_id=ACCOUNT, api_token="wrong", model_selector="clef-flash",
                        base_url=self.srv.base_url + "/client/v4", max_retries=0) as router:
            with self.assertRaises(ClefAuthError):
                router.decide(RECORDS[0]["state"], RECORDS[0]["questions"])


if __name__ == "__main__":
    CLEF = os.path.abspath(sys.argv.pop(1))
    venv = sys.argv.pop(1)
    unavailable = os.path.join(venv, "UNAVAILABLE")
    if os.path.exists(unavailable):
        print("SKIPPED: the PyPI clients could not be installed: " + open(unavailable).read())
        sys.exit(77)
    python = os.path.join(os.path.abspath(venv), "bin", "python")
    if os.path.abspath(sys.prefix) != os.path.abspath(venv):  # run again inside the venv
        os.execv(python, [python, "-W", "ignore", os.path.abspath(__file__), CLEF, venv] + sys.argv[1:])
    unittest.main(verbosity=2)
