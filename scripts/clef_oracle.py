"""clef_oracle.py — find and load the release's reference `joint_schema_model.py`, and fetch wheels.

The Clef release's `joint_schema_model.py` (Apache-2.0: the reference JointSchemaHead, ClefModel,
encode_record, systemone, systemone_answer, ...) is shipped unmodified in the PyPI wheel
unsloth==2026.10.9 as `unsloth/_vendor/clef/joint_schema_model.py`. It is the oracle of the head,
encoding and answer fixtures. Importing `unsloth` itself wants a GPU, so only that ONE file is
loaded, by path, with importlib; it is never copied into this repository. Every script under
scripts/ and bench/ that needs it goes through this module.

Where joint_schema_model.py is looked for, in order:
  1. $CLEF_JOINT_SCHEMA_MODEL — an explicit path to the file (used as given; a SHA-256 differing
     from the pinned file's is reported on stderr);
  2. $CLEF_UNSLOTH_WHEEL — a local unsloth wheel; the one member is unzipped into the cache;
  3. an installed unsloth package of the pinned version, found without importing it;
  4. the cache: `pip download --no-deps unsloth==2026.10.9` into <cache>/wheels/ on first use,
     then that one member unzipped into <cache>/<wheel name>/.
Sources 2-4 must hold the pinned file byte for byte (SHA-256 below), else this module refuses.

Cache dir: $CLEF_ORACLE_CACHE, default ~/.cache/clef. Downloaded wheels live in <cache>/wheels/.
`python3 scripts/clef_oracle.py` prints the path it finds (fetching the wheel if it has to).

Also: download_wheel("name==version") and wheel_members(requirement, suffixes) / wheel_metadata()
for the public client packages whose example questions scripts/encode/ turns into records (their
wheels are fetched the same way, no dependencies, and only read).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

UNSLOTH_REQUIREMENT = "unsloth==2026.10.9"
MEMBER = "unsloth/_vendor/clef/joint_schema_model.py"
# SHA-256 of MEMBER in the pinned wheel: a different file is a different oracle.
MEMBER_SHA256 = "0e304cf7c6500e8bb59bef7e2afd2c6373f82596dfb3b57d1aa93c175e2dc3a3"
# The one sys.modules name the reference is loaded under, so that every script of one process
# (make_release.py, the head and demo scripts) shares its classes.
MODULE_NAME = "clef_joint_schema_model"


class OracleError(RuntimeError):
    """The reference file or a wheel could not be found, fetched or verified."""


def cache_dir() -> Path:
    """$CLEF_ORACLE_CACHE or ~/.cache/clef (created)."""
    d = Path(os.environ.get("CLEF_ORACLE_CACHE") or Path.home() / ".cache" / "clef")
    d.mkdir(parents=True, exist_ok=True)
    return d


def download_wheel(requirement: str) -> Path:
    """Path of the wheel for `name==version` in <cache>/wheels/, `pip download`ing it if absent."""
    name, sep, version = requirement.partition("==")
    if not sep or not name or not version:
        raise OracleError(f"download_wheel: requirement '{requirement}' is not name==version")
    wheels = cache_dir() / "wheels"
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "-d", str(wheels), requirement], check=True)
        found = sorted(wheels.glob(pattern))
    if not found:
        raise OracleError(f"pip download {requirement} produced no wheel matching {pattern} in {wheels}")
    return found[0]


def wheel_members(requirement: str, suffixes: tuple[str, ...] = (".py", ".yaml")) -> dict[str, str]:
    """{member name: UTF-8 text} of the wheel's members whose names end with one of `suffixes`."""
    with zipfile.ZipFile(download_wheel(requirement)) as wheel:
        return {name: wheel.read(name).decode("utf-8")
                for name in wheel.namelist() if name.endswith(suffixes)}


def wheel_metadata(requirement: str) -> str:
    """The wheel's `*.dist-info/METADATA` text (its long description is the package README)."""
    with zipfile.ZipFile(download_wheel(requirement)) as wheel:
        for name in wheel.namelist():
            if name.endswith(".dist-info/METADATA"):
                return wheel.read(name).decode("utf-8")
    return ""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verified(path: Path, source: str) -> Path:
    digest = _sha256(path)
    if digest != MEMBER_SHA256:
        raise OracleError(f"{path} (from {source}) has SHA-256 {digest}, not that of {MEMBER} in "
                          f"{UNSLOTH_REQUIREMENT} ({MEMBER_SHA256}); point $CLEF_JOINT_SCHEMA_MODEL "
                          f"at a file on purpose to use another one")
    return path


def _extract_member(wheel: Path) -> Path:
    """MEMBER of `wheel`, unzipped once into <cache>/<wheel file name without .whl>/."""
    target_root = cache_dir() / wheel.name.removesuffix(".whl")
    target = target_root / MEMBER
    if not target.is_file():
        with zipfile.ZipFile(wheel) as z:
            if MEMBER not in z.namelist():
                raise OracleError(f"wheel {wheel} has no member {MEMBER}")
            z.extract(MEMBER, target_root)
    return target


def _installed() -> Path | None:
    """MEMBER inside an installed unsloth of the pinned version, located without importing it."""
    spec = importlib.util.find_spec("unsloth")  # a top-level find_spec does not import the package
    if spec is None or not spec.submodule_search_locations:
        return None
    pinned = UNSLOTH_REQUIREMENT.partition("==")[2]
    try:
        version = importlib.metadata.version("unsloth")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != pinned:
        print(f"clef_oracle: installed unsloth is {version}, not {pinned}: not used", file=sys.stderr)
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "_vendor" / "clef" / "joint_schema_model.py"
        if candidate.is_file():
            return candidate
    return None


def joint_schema_model_path() -> Path:
    """Path of the reference joint_schema_model.py (sources in the order the docstring gives)."""
    explicit = os.environ.get("CLEF_JOINT_SCHEMA_MODEL")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise OracleError(f"$CLEF_JOINT_SCHEMA_MODEL: '{path}' is not a file")
        if _sha256(path) != MEMBER_SHA256:
            print(f"clef_oracle: warning: {path} is not the pinned {MEMBER} of {UNSLOTH_REQUIREMENT}",
                  file=sys.stderr)
        return path
    local_wheel = os.environ.get("CLEF_UNSLOTH_WHEEL")
    if local_wheel:
        if not Path(local_wheel).is_file():
            raise OracleError(f"$CLEF_UNSLOTH_WHEEL: '{local_wheel}' is not a file")
        return _verified(_extract_member(Path(local_wheel)), "$CLEF_UNSLOTH_WHEEL")
    installed = _installed()
    if installed is not None:
        return _verified(installed, "the installed unsloth")
    return _verified(_extract_member(download_wheel(UNSLOTH_REQUIREMENT)), "the cache")


def load_reference():
    """The reference module, loaded by path once per process under the name MODULE_NAME.

    Later calls return the same module object, so JointSchemaHead & co. are one set of classes
    however many scripts of the process ask for it. `module.__oracle_path__` says which file it is.
    """
    loaded = sys.modules.get(MODULE_NAME)
    if loaded is not None:
        return loaded
    path = joint_schema_model_path()
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module  # dataclasses resolve string annotations through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE_NAME]
        raise
    module.__oracle_path__ = str(path)
    return module


if __name__ == "__main__":
    print(joint_schema_model_path())
