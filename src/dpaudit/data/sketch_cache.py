"""Parse-time table sketches kept on disk (issue 46's follow-up).

``dpaudit.data.table.inspect_table`` reads every cell of a table at parse time; every Snakefile
parse does it again, and on a cluster every job parses the Snakefile (~3 s for a 200,000 × 50
CSV). A sketch depends only on the file's bytes, the entry's keys and the table code, so it is
kept in ``dpaudit.caches.cache_folder()/table-sketches-v<N>/``, one JSON file per key: the sha256
of the dataset name, the entry's keys, the file's absolute path, size, modification time (ns) and
inode, and the table code's sources (``_code``). A changed file, entry or code is another key;
refusals are never kept (they are computed again, and a run that refuses stops anyway). The
``prepare_dataset`` job checks every cell again, so a sketch can never stand in for a file's cells.
An unreadable, damaged or unwritable cache is scanned around, never an error; the oldest files
beyond ``MAX_FILES`` are removed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MAX_FILES", "VERSION", "cached_sketch"]

VERSION = 1
MAX_FILES = 256


@functools.lru_cache(maxsize=1)
def _code() -> str:
    """sha256 of the code a sketch is computed by: dpaudit/data/table*.py and examples.py (its split shares)."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for source in sorted([*here.glob("table*.py"), here / "examples.py"]):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def _folder() -> Path | None:
    from dpaudit.caches import cache_folder

    folder = cache_folder()
    return None if folder is None else folder / f"table-sketches-v{VERSION}"


def _key(parts: tuple) -> str:
    return hashlib.sha256(json.dumps([VERSION, _code(), *parts], default=str).encode()).hexdigest()


def cached_sketch(sketch_type: type, parts: tuple, compute: Callable[[], Any]) -> Any:
    """The sketch of ``parts`` (name, frozen entry, path, size, mtime, inode) from disk, else ``compute()``d
    and written (a ``sketch_type`` dataclass of JSON-able fields; tuple fields come back as tuples)."""
    folder = _folder()
    if folder is None:
        return compute()
    path = folder / f"{_key(parts)}.json"
    try:
        fields = json.loads(path.read_text())
        tuples = {f.name for f in dataclasses.fields(sketch_type) if str(f.type).startswith("tuple")}
        return sketch_type(**{k: tuple(v) if k in tuples else v for k, v in fields.items()})
    except (OSError, ValueError, TypeError):
        pass  # absent or damaged: computed and written again
    sketch = compute()
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(dataclasses.asdict(sketch)))
        os.replace(temporary, path)
        _prune(folder)
    except (OSError, TypeError, ValueError):
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass
    return sketch


def _prune(folder: Path) -> None:
    files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime_ns)
    for old in files[:max(0, len(files) - MAX_FILES)]:
        old.unlink(missing_ok=True)
