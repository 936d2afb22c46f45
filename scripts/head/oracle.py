"""oracle.py — find and load the release's reference joint_schema_model.py (the oracle).

The Clef release's `joint_schema_model.py` (Apache-2.0) is shipped unmodified in the PyPI wheel
unsloth==2026.10.9 as `unsloth/_vendor/clef/joint_schema_model.py`. Importing `unsloth` itself
wants a GPU, so this module loads that ONE file by path with importlib. It is never copied into
this repository.

Where the file is looked for, in order:
  1. $CLEF_JOINT_SCHEMA_MODEL — an explicit path to joint_schema_model.py;
  2. an installed unsloth package (its directory found without importing it);
  3. ~/.cache/clef/unsloth-2026.10.9/ — filled on first use by
     `pip download --no-deps unsloth==2026.10.9` and unzipping that one member.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

UNSLOTH_VERSION = "2026.10.9"
MEMBER = "unsloth/_vendor/clef/joint_schema_model.py"


def _installed() -> Path | None:
    for entry in sys.path:
        candidate = Path(entry or ".") / MEMBER
        if candidate.is_file():
            return candidate
    return None


def _cached() -> Path:
    cache = Path(os.environ.get("CLEF_CACHE", Path.home() / ".cache" / "clef")) / f"unsloth-{UNSLOTH_VERSION}"
    target = cache / MEMBER
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp,
             f"unsloth=={UNSLOTH_VERSION}"],
            check=True,
        )
        wheels = list(Path(tmp).glob("unsloth-*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download of unsloth=={UNSLOTH_VERSION} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extract(MEMBER, cache)
    return target


def oracle_path() -> Path:
    explicit = os.environ.get("CLEF_JOINT_SCHEMA_MODEL")
    if explicit:
        return Path(explicit)
    return _installed() or _cached()


def load_oracle():
    """Return the reference module (JointSchemaHead, encode_record, systemone, ...)."""
    path = oracle_path()
    loader = importlib.machinery.SourceFileLoader("clef_reference_joint_schema_model", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module
