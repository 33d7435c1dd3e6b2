"""Content hashes of library modules, put in each rule's params so that a change
to the code a job uses reruns exactly the jobs that use it (Snakemake sees script
changes, not library changes)."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent


def module_path(module: str) -> Path:
    """Path of a dpaudit module's source without importing it (no TF at parse time)."""
    if not module.startswith("dpaudit"):
        raise ValueError(f"{module!r} is not a dpaudit module")
    relative = Path(*module.split(".")[1:])
    for candidate in (PACKAGE_ROOT / relative.with_suffix(".py"), PACKAGE_ROOT / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no source file for {module!r}")
    return Path(spec.origin)


def code_hash(modules: Iterable[str]) -> str:
    """sha256 (first 16 hex digits) over the named modules' source, in sorted order."""
    digest = hashlib.sha256()
    for module in sorted(set(modules)):
        digest.update(module.encode())
        digest.update(module_path(module).read_bytes())
    return digest.hexdigest()[:16]
