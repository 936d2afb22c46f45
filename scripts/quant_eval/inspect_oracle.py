#!/usr/bin/env python3
"""inspect_oracle.py — the expected quantization section of `clef inspect --json` for the
fixture releases, computed without the engine: tensor names, dtypes, shapes and bytes from the
safetensors headers read by the `safetensors` package, the release's config.json, and the
libraries' OWN ignore-list matchers (transformers' should_convert_module for bitsandbytes'
llm_int8_skip_modules, compressed-tensors' match_name for `ignore`).

Per release (the fixtures, and VARIANTS: a fixture with another ignore list in config.json,
whose text is stored as "config_json" for the test to write into a copy) it writes, for
tests/quant_eval/test_inspect_quant.c:
  groups   {group: {linears, resident_bytes, stored_bytes, states: {state: count}}}, total
  params   the format parameters (NF4 quant_state / config, FP8 and INT8 scale dtypes, ...)
  linears  [{name (stored), group, state, rule}]

The rules (docs/quant.md, "What each precision quantizes" and "Resident bytes"):
  linear     a quantized "*.weight" (U8 / F8_E4M3 / I8), or a 2-D float "*.weight" or
             "*.in_proj_weight" that is not an embedding table ("embed" in its name)
  state      quantized | unquantized-release (no quantization) | ignore-list (the library's
             matcher names it) | format-rule (lm_head, vision, joint head; FP8: GDN linears;
             INT8: GDN in_proj_a / in_proj_b) | rotation-group (INT8: in_features % 256) |
             unexplained
  resident   what the engine holds after load: quantized data and NF4 absmax / code tables
             as stored; weight_scale as fp32; quant_state / comfy_quant / input_scale 0; an
             untied lm_head 0 (its rows are read per record); 0-D head scalars 0; 1-D vectors,
             the GDN conv1d taps and the head's type embedding as fp32; other matrices and
             tables as stored

Usage: python3 scripts/quant_eval/inspect_oracle.py [--out tests/quant_eval/fixtures/inspect_expected.json]
pip install -r scripts/requirements.txt
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from compressed_tensors.utils.match import match_name
from transformers.quantizers.quantizers_utils import should_convert_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = {
    "bf16": ROOT / "tests/release/fixtures/bf16-single",
    "nf4": ROOT / "tests/release/fixtures/nf4",
    "fp8": ROOT / "tests/release/fixtures/fp8",
    "int8": ROOT / "tests/release/fixtures/int8",
    "decide-nf4": ROOT / "tests/quant/fixtures/decide/nf4",
    "decide-fp8": ROOT / "tests/quant/fixtures/decide/fp8",
    "decide-int8": ROOT / "tests/quant/fixtures/decide/int8",
}
GROUPS = ("embeddings", "gdn", "attention", "mlp", "norms", "vision", "lm_head", "head", "other")
COMPANIONS = (".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
              ".quant_state.bitsandbytes__nf4", ".weight_scale", ".input_scale", ".comfy_quant")
QUANTIZED = ("U8", "F8_E4M3", "I8")
ST_DTYPE = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32",
            torch.float8_e4m3fn: "F8_E4M3", torch.int8: "I8", torch.uint8: "U8",
            torch.int32: "I32", torch.int64: "I64", torch.bool: "BOOL"}
SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I8": 1, "U8": 1, "I32": 4, "I64": 8,
        "BOOL": 1}


def engine_name(stored: str, head_file: bool) -> str | None:
    if head_file:
        return "head." + stored
    for prefix, to in (("model.language_model.", "text."), ("language_model.", "text."),
                       ("model.visual.", "vision."), ("visual.", "vision.")):
        if stored.startswith(prefix):
            return to + stored[len(prefix):]
    if stored == "lm_head.weight":
        return stored
    if stored.startswith("mtp."):
        return None  # ignored by the engine
    raise ValueError(f"unknown tensor {stored}")


def group_of(name: str) -> str:
    if name.startswith("head."):
        return "head"
    if name.startswith("vision."):
        return "vision"
    if name.startswith("lm_head."):
        return "lm_head"
    if name.startswith("text.embed_tokens."):
        return "embeddings"
    if name.startswith("text.norm."):
        return "norms"
    if name.startswith("text.layers."):
        for key, g in ((".linear_attn.", "gdn"), (".self_attn.", "attention"), (".mlp.", "mlp"),
                       ("layernorm.", "norms")):
            if key in name:
                return g
    return "other"


def tensors(release: Path) -> list[dict]:
    """Every tensor of the release: stored and engine name, dtype, shape, bytes, file."""
    index = release / "model.safetensors.index.json"
    files = (sorted(set(json.loads(index.read_text())["weight_map"].values()))
             if index.exists() else ["model.safetensors"])
    out = []
    for fname in files + ["joint_head.safetensors"]:
        with safe_open(str(release / fname), framework="pt") as f:
            for key in f.keys():
                s = f.get_slice(key)
                dtype, shape = s.get_dtype(), list(s.get_shape())
                n = 1
                for d in shape:
                    n *= d
                name = engine_name(key, fname == "joint_head.safetensors")
                if name is None:
                    continue
                out.append({"stored": key, "name": name, "dtype": dtype, "shape": shape,
                            "bytes": n * SIZE[dtype], "elements": n, "file": fname})
    return out


def read_json_tensor(release: Path, t: dict) -> dict:
    with safe_open(str(release / t["file"]), framework="pt") as f:
        return json.loads(f.get_tensor(t["stored"]).numpy().tobytes().decode("utf-8"))


def is_companion(name: str) -> bool:
    return name.endswith(COMPANIONS)


def is_linear(t: dict) -> bool:
    if is_companion(t["name"]):
        return False
    if t["dtype"] in QUANTIZED:
        return t["name"].endswith(".weight")
    return (len(t["shape"]) == 2 and t["name"].endswith((".weight", ".in_proj_weight"))
            and "embed" not in t["name"])


def method_of(config: dict, ts: list[dict]) -> str:
    qc = config.get("quantization_config")
    if qc:
        return {"bitsandbytes": "nf4", "compressed-tensors": "fp8-w8a8"}.get(
            qc["quant_method"], "int8-convrot")
    by_name = {t["name"] for t in ts}
    if any(t["dtype"] == "I8" and t["name"].endswith(".weight")
           and t["name"] + "_scale" in by_name for t in ts):
        return "int8-convrot"
    return "bf16"


def ignore_rule(method: str, qc: dict | None, module: str) -> str | None:
    if not qc:
        return None
    if method == "nf4":
        for key in qc.get("llm_int8_skip_modules") or []:
            if not should_convert_module(module, [key]):  # transformers' own matcher
                return key
        return None
    for key in qc.get("ignore") or []:
        if match_name(module, key):  # compressed-tensors' own matcher
            return key
    return None


def state_of(t: dict, method: str, qc: dict | None) -> tuple[str, str | None]:
    if t["dtype"] in QUANTIZED:
        return "quantized", None
    if method == "bf16":
        return "unquantized-release", None
    g = group_of(t["name"])
    if g != "head":
        module = t["stored"][:-len(".weight")] if t["stored"].endswith(".weight") else t["stored"]
        rule = ignore_rule(method, qc, module)
        if rule is not None:
            return "ignore-list", rule
    if g in ("lm_head", "vision", "head", "other"):
        return "format-rule", None
    if method == "fp8-w8a8" and g == "gdn":
        return "format-rule", None
    if method == "int8-convrot" and (".linear_attn.in_proj_a." in t["name"]
                                     or ".linear_attn.in_proj_b." in t["name"]):
        return "format-rule", None
    if method == "int8-convrot" and t["shape"][1] % 256:
        return "rotation-group", None
    return "unexplained", None


def resident(t: dict) -> int:
    name = t["name"]
    if name.endswith((".quant_state.bitsandbytes__nf4", ".comfy_quant", ".input_scale")):
        return 0
    if name.endswith(".weight_scale"):
        return 4 * t["elements"]
    if is_companion(name):
        return t["bytes"]
    if group_of(name) == "lm_head":
        return 0
    if t["dtype"] in QUANTIZED:
        return t["bytes"]
    if len(t["shape"]) == 0:
        return 0
    if len(t["shape"]) == 1 or ".linear_attn.conv1d." in name or name == "head.type_embedding.weight":
        return 4 * t["elements"]
    return t["bytes"]


def params_of(release: Path, method: str, config: dict, ts: list[dict], linears: list[dict]):
    if method == "bf16":
        return None
    quantized = [t for t in linears if t["state"] == "quantized"]
    by_name = {t["name"]: t for t in ts}
    out = {"quantized_linears": len(quantized)}
    dtypes = {t["dtype"] for t in quantized}
    assert len(dtypes) == 1, dtypes
    out["weight_dtype"] = dtypes.pop()
    if method == "nf4":
        states = [read_json_tensor(release, by_name[t["name"] + ".quant_state.bitsandbytes__nf4"])
                  for t in quantized]
        keys = ("quant_type", "blocksize", "nested_blocksize", "nested_dtype", "dtype")
        first = {k: states[0].get(k) for k in keys}
        assert all({k: s.get(k) for k in keys} == first for s in states), "quant_states differ"
        absmax = {by_name[t["name"] + ".absmax"]["dtype"] for t in quantized}
        assert len(absmax) == 1
        out.update(quant_type=first["quant_type"], blocksize=first["blocksize"],
                   double_quant=absmax.pop() == "U8", nested_blocksize=first["nested_blocksize"],
                   nested_dtype=first["nested_dtype"], dtype=first["dtype"],
                   compute_dtype=config["quantization_config"].get("bnb_4bit_compute_dtype"))
        return out
    static = any(t["name"].endswith(".input_scale") for t in ts)
    scales = {by_name[t["name"] + "_scale"]["dtype"] for t in quantized}
    assert len(scales) == 1
    out.update(weight_strategy="channel",
               activation_strategy="tensor, static" if static else "token, dynamic",
               scale_layout="[out, 1]", scale_dtype=scales.pop(), scale_held_as="F32")
    if method == "int8-convrot":
        formats = set()
        for t in quantized:
            c = by_name.get(t["name"][:-len(".weight")] + ".comfy_quant")
            formats.add(read_json_tensor(release, c)["format"] if c else None)
        assert len(formats) == 1
        qc = config.get("quantization_config") or {}
        out.update(rotation_group=qc.get("convrot_groupsize", 256), comfy_format=formats.pop())
    return out


def expected(release: Path) -> dict:
    config = json.loads((release / "config.json").read_text())
    ts = tensors(release)
    method = method_of(config, ts)
    qc = config.get("quantization_config")
    groups: dict[str, dict] = {}
    total = {"linears": 0, "resident_bytes": 0, "stored_bytes": 0, "states": {}}
    linears = []
    for t in ts:
        g = groups.setdefault(group_of(t["name"]), {"linears": 0, "resident_bytes": 0,
                                                    "stored_bytes": 0, "states": {}})
        for x in (g, total):
            x["resident_bytes"] += resident(t)
            x["stored_bytes"] += t["bytes"]
        if is_linear(t):
            state, rule = state_of(t, method, qc)
            t["state"] = state
            linears.append({"name": t["stored"], "group": group_of(t["name"]), "state": state,
                            "rule": rule})
            for x in (g, total):
                x["linears"] += 1
                x["states"][state] = x["states"].get(state, 0) + 1
    return {"method": method, "groups": groups, "total": total,
            "params": params_of(release, method, config, ts,
                                [dict(t) for t in ts if "state" in t]),
            "linears": sorted(linears, key=lambda x: (x["group"], x["name"]))}


# Variants of a fixture whose config.json gets another ignore list, to exercise the matchers:
# compressed-tensors "re:" patterns, and bitsandbytes skip modules matched as a regex from the
# start or as a name suffix ("visual" matches neither "model.visual.blocks.0.attn.qkv" way;
# "attn.proj" is a suffix of the vision blocks' projections).
VARIANTS = {
    "fp8-regex": ("fp8", {"ignore": ["lm_head", "re:.*linear_attn[.]in_proj_[ab]$",
                                     "re:model.language_model.layers.[0-9]+.linear_attn.*",
                                     "re:model[.]visual[.]blocks[.]0[.].*",
                                     "model.visual.merger.linear_fc1"]}),
    "nf4-suffix": ("nf4", {"llm_int8_skip_modules": ["lm_head", "visual", "attn.proj",
                                                     "model.visual.merger", "mtp"]}),
}


def variant(key: str, tmp: Path) -> dict:
    import shutil
    base, patch = VARIANTS[key]
    src = FIXTURES[base]
    dst = tmp / key
    shutil.copytree(src, dst)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"].update(patch)
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    (dst / "config.json").write_text(text)
    return {"dir": str(src.relative_to(ROOT)), "config_json": text, **expected(dst)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests/quant_eval/fixtures/inspect_expected.json"))
    a = ap.parse_args()
    doc = {"generator": {"safetensors": __import__("safetensors").__version__,
                         "transformers": __import__("transformers").__version__,
                         "compressed_tensors": __import__("compressed_tensors").__version__},
           "releases": {}}
    for key, release in FIXTURES.items():
        doc["releases"][key] = {"dir": str(release.relative_to(ROOT)), **expected(release)}
        t = doc["releases"][key]["total"]
        print(f"{key:12s} {doc['releases'][key]['method']:13s} linears {t['linears']:3d} "
              f"{t['states']} resident {t['resident_bytes']}", file=sys.stderr)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for key in VARIANTS:
            doc["releases"][key] = variant(key, Path(tmp))
            t = doc["releases"][key]["total"]
            print(f"{key:12s} {doc['releases'][key]['method']:13s} linears {t['linears']:3d} "
                  f"{t['states']} resident {t['resident_bytes']}", file=sys.stderr)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
