#!/usr/bin/env python3
"""make_openapi.py — writes src/server/openapi.c, the OpenAPI 3.0 document that `clef serve`
serves at GET /openapi.json, from the description below (one place to edit routes, schemas and
error shapes; keep it true to src/server/server.c — tests/server/test_server_schemathesis.py
checks the running server against it).

usage: python3 scripts/server/make_openapi.py > src/server/openapi.c
"""
import json
desc_any = {"description": "an option description: a string, null (no description), an object or an array",
            "nullable": True}
text = {"type": "string", "nullable": True, "description": "instructions; empty or missing: the question id is used"}
noul = {"type": "object", "required": ["type"], "additionalProperties": False,
        "properties": {"type": {"type": "string", "enum": ["noul"]}, "instructions": text,
                       "criteria": {"type": "object", "additionalProperties": False,
                                    "properties": {"true": desc_any, "false": desc_any}}}}
choice = {"type": "object", "required": ["type", "criteria"], "additionalProperties": False,
          "properties": {"type": {"type": "string", "enum": ["choice"]}, "instructions": text,
                         "criteria": {"type": "object", "minProperties": 2, "maxProperties": 255,
                                      "additionalProperties": desc_any,
                                      "description": "option id -> description; ids of at most 100 characters"}}}
score = {"type": "object", "required": ["type", "criteria"], "additionalProperties": False,
         "properties": {"type": {"type": "string", "enum": ["score"]}, "instructions": text,
                        "criteria": {"type": "array", "minItems": 2, "maxItems": 10,
                                     "items": {"type": "string"},
                                     "description": "level descriptions, lowest first"}}}
medium = {"oneOf": [{"type": "string", "pattern": "^data:", "description": "a data: URL"},
                    {"type": "object", "required": ["content_type", "base64"],
                     "properties": {"content_type": {"type": "string"}, "base64": {"type": "string"}}}]}
def request(model_schema):
    return {"type": "object", "required": ["model", "state", "questions"], "additionalProperties": False,
            "properties": {"model": model_schema,
                           "state": {"description": "any JSON value: what the model reads", "nullable": True},
                           "questions": {"type": "object", "minProperties": 1, "maxProperties": 64,
                                         "description": "question id ([A-Za-z0-9_.-], at most 100 characters) -> question, in the order asked",
                                         "additionalProperties": {"$ref": "#/components/schemas/Question"}},
                           "images": {"type": "array", "maxItems": 4, "items": {"$ref": "#/components/schemas/Medium"},
                                      "description": "PNG, JPEG or WebP; 4 MiB each, 8 MiB in all; read by the release's vision tower"},
                           "videos": {"type": "array", "maxItems": 4, "items": {"$ref": "#/components/schemas/Medium"},
                                      "description": "MP4 / QuickTime, WebM / Matroska or AVI; 16 MiB each, 32 MiB in all; frames sampled and read by the release's vision tower"}}}
prob = {"type": "number", "minimum": 0, "maximum": 1}
answer = {"type": "object", "required": ["type"],
          "properties": {"type": {"type": "string", "enum": ["noul", "choice", "score"]},
                         "noul": prob, "choice": {"type": "string"}, "score": {"type": "number"},
                         "confidence": prob,
                         "legend": {"type": "object", "additionalProperties": {}},
                         "probabilities": {"type": "object", "additionalProperties": prob}}}
response = {"type": "object", "required": ["model", "answers", "usage"],
            "properties": {"model": {"type": "string"},
                           "answers": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Answer"}},
                           "usage": {"type": "object", "required": ["input_tokens", "output_tokens"],
                                     "properties": {"input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                                                    "truncated_tokens": {"type": "integer"}}}}}
detail_list = {"type": "object", "required": ["detail"],
               "properties": {"detail": {"type": "array", "items": {
                   "type": "object", "required": ["loc", "msg", "type"],
                   "properties": {"loc": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
                                  "msg": {"type": "string"}, "type": {"type": "string"}}}}}}
http_error = {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}}}
envelope_ok = {"type": "object", "required": ["result", "success", "errors", "messages"],
               "properties": {"result": {"$ref": "#/components/schemas/SystemOneResponse"},
                              "success": {"type": "boolean", "enum": [True]},
                              "errors": {"type": "array", "maxItems": 0, "items": {}}, "messages": {"type": "array", "items": {}}}}
envelope_err = {"type": "object", "required": ["result", "success", "errors", "messages"],
                "properties": {"result": {"type": "object"}, "success": {"type": "boolean", "enum": [False]},
                               "errors": {"type": "array", "minItems": 1, "items": {
                                   "type": "object", "required": ["code", "message"],
                                   "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}}},
                               "messages": {"type": "array", "items": {}}}}
def js(ref, d):
    return {"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/" + ref}}}}
rid = {"x-request-id": {"description": "the request id (the client's x-request-id if it is 1-64 of [A-Za-z0-9._:-], else generated); also in the access log", "schema": {"type": "string"}}}
retry = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
def with_headers(r, extra=None):
    r = dict(r); h = dict(rid)
    if extra: h.update(extra)
    r["headers"] = h; return r
def s1_errors():
    return {"401": with_headers(js("DetailList", "missing or wrong bearer token")),
            "413": with_headers(js("DetailList", "body over the byte cap, or prompt over max_length with --truncation refuse")),
            "422": with_headers(js("DetailList", "malformed JSON or a field that fails validation (every problem listed)")),
            "429": with_headers(js("DetailList", "queue full"), retry),
            "503": with_headers(js("DetailList", "loading, timed out in the queue, or shutting down"), retry)}
def wai_errors():
    return {"401": with_headers(js("WorkersAIError", "missing or wrong bearer token (code 10000)")),
            "404": with_headers(js("WorkersAIError", "the model named in the path is not the one served, or no such route (code 7000)")),
            "413": with_headers(js("WorkersAIError", "body or prompt too large (code 3006)")),
            "422": with_headers(js("WorkersAIError", "invalid input (code 5006)")),
            "429": with_headers(js("WorkersAIError", "queue full (code 3040)"), retry),
            "503": with_headers(js("WorkersAIError", "loading, timed out in the queue, or shutting down (code 3040)"), retry)}
def wai_path(prefix):
    return {"post": {"summary": "Decide one record (Cloudflare Workers AI route and envelope)",
                     "operationId": "workers_ai_run" + ("_v4" if prefix else ""),
                     "security": [{"bearer": []}],
                     "parameters": [{"name": "account_id", "in": "path", "required": True,
                                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
                                    {"name": "model", "in": "path", "required": True,
                                     "schema": {"type": "string", "enum": ["clef", "clef-flash"]},
                                     "description": "must be the model this server runs (else 404)"}],
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WorkersAIRequest"}}}},
                     "responses": dict({"200": with_headers(js("WorkersAIResponse", "the answers in the Workers AI envelope"))}, **wai_errors())}}
doc = {
  "openapi": "3.0.3",
  "info": {"title": "clef serve", "version": "0.1.0",
           "description": "Clef decision models over HTTP: the SystemOne API (TypeSafe Jev compatible) and the Cloudflare Workers AI route. Probabilities for every option of every question of a record."},
  "servers": [{"url": "/"}],
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "required when the server was started with --token or --token-file"}},
    "schemas": {"Question": {"oneOf": [{"$ref": "#/components/schemas/NoulQuestion"}, {"$ref": "#/components/schemas/ChoiceQuestion"}, {"$ref": "#/components/schemas/ScoreQuestion"}]},
                "NoulQuestion": noul, "ChoiceQuestion": choice, "ScoreQuestion": score, "Medium": medium,
                "SystemOneRequest": request({"type": "string", "description": "echoed in the response"}),
                "WorkersAIRequest": request({"type": "string", "enum": ["clef", "clef-flash"], "description": "must match the model in the path"}),
                "Answer": answer, "SystemOneResponse": response, "DetailList": detail_list, "HTTPError": http_error,
                "WorkersAIResponse": envelope_ok, "WorkersAIError": envelope_err}},
  "paths": {
    "/v1/systemone": {"post": {"summary": "Decide one record (SystemOne API)", "operationId": "systemone",
                               "security": [{"bearer": []}],
                               "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SystemOneRequest"}}}},
                               "responses": dict({"200": with_headers(js("SystemOneResponse", "the answers"))}, **s1_errors())}},
    "/client/v4/accounts/{account_id}/ai/run/@cf/cloudflare/{model}": wai_path(True),
    "/accounts/{account_id}/ai/run/@cf/cloudflare/{model}": wai_path(False),
    "/v1/models": {"get": {"summary": "The model this server runs", "operationId": "models", "security": [{"bearer": []}],
                           "responses": {"200": with_headers({"description": "one model", "content": {"application/json": {"schema": {
                               "type": "object", "required": ["models"], "properties": {"models": {"type": "array", "items": {
                                   "type": "object", "required": ["name", "description", "release_date"],
                                   "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                                                  "release_date": {"type": "string", "nullable": True}}}}}}}}}),
                                         "401": with_headers(js("HTTPError", "missing or wrong bearer token")),
                                         "503": with_headers(js("HTTPError", "loading or shutting down"), retry)}}},
    "/health": {"get": {"summary": "Liveness and readiness (no auth)", "operationId": "health", "security": [],
                        "responses": {"200": with_headers({"description": "the model is loaded", "content": {"application/json": {"schema": {
                                          "type": "object", "required": ["status"], "properties": {"status": {"type": "string"}, "model": {"type": "string"}}}}}}),
                                      "503": with_headers({"description": "loading, failed or shutting down", "content": {"application/json": {"schema": {
                                          "type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}}}})}}},
    "/metrics": {"get": {"summary": "Prometheus metrics", "operationId": "metrics", "security": [{"bearer": []}],
                         "responses": {"200": with_headers({"description": "text exposition format 0.0.4", "content": {"text/plain": {"schema": {"type": "string"}}}}),
                                       "401": with_headers(js("HTTPError", "missing or wrong bearer token")),
                                       "503": with_headers(js("HTTPError", "shutting down"), retry)}}},
    "/openapi.json": {"get": {"summary": "This document (no auth)", "operationId": "openapi", "security": [],
                              "responses": {"200": with_headers({"description": "OpenAPI 3.0", "content": {"application/json": {"schema": {"type": "object"}}}}),
                                            "503": with_headers(js("HTTPError", "shutting down"), retry)}}},
  },
}
text_json = json.dumps(doc, separators=(",", ":"))
# C string literal, cut into lines of ~100 characters
chunks = [text_json[i:i + 96] for i in range(0, len(text_json), 96)]
def esc(s): return s.replace("\\", "\\\\").replace('"', '\\"')
body = "\n".join('    "%s"' % esc(c) for c in chunks)
print('''/*
 * openapi.c — the OpenAPI 3.0 document of `clef serve` (see openapi.h), as one string.
 *
 * It lists every route of server.c with its request schema (api.md's record and limits),
 * its answers, and the error shapes: FastAPI's {"detail": [...]} on /v1/systemone, the
 * Workers AI envelope on the Workers AI routes, {"detail": "..."} on the others.
 * Generated by scripts/server/make_openapi.py (edit that, then run it); keep it true to
 * server.c: tests/server/test_server_schemathesis.py checks the running server against it.
 */
#include "server/openapi.h"

static const char openapi_json[] =
%s;

const char *server_openapi_json(void) { return openapi_json; }''' % body)
