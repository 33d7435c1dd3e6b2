"""Atomic file output and the project's Parquet/JSON conventions.

Every artifact is written to a temporary file in the destination folder and
renamed into place, so an interrupted job never leaves a half-written file that
a later run could mistake for a result. A file damaged afterwards (a disk or a
copy cut short) fails the job that reads it with :class:`UnreadableFileError`,
which names the file and the fix: every reader goes through :func:`reading`.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dpaudit.logs import Refusal


@contextmanager
def atomic_path(destination: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``destination``; rename it into place on success.

    The temporary name is chosen before the file is made, so an exception at any point (a
    SIGTERM turned into one while the file is being created, tests/unit/test_mnist.py) finds
    the name and removes the file: ``tempfile.mkstemp`` returns the name only after creating
    the file, and a signal in between left it behind.
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = None
    try:
        while tmp_path is None:
            tmp_path = destination.parent / f".{destination.name}.{secrets.token_hex(8)}{suffix or '.tmp'}"
            try:
                # 0o666 less the umask, as for any other output (results are shared)
                os.close(os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            except FileExistsError:
                tmp_path = None  # another writer's file (64 random bits: never in practice)
        yield tmp_path
        os.replace(tmp_path, destination)
    finally:
        if tmp_path is not None and tmp_path.exists():
            tmp_path.unlink()


class UnreadableFileError(Refusal, OSError):
    """A result file exists but cannot be read: damaged or truncated after it was written."""

    def __init__(self, path: str | os.PathLike, error: BaseException):
        self.path = Path(path)
        super().__init__(
            f"{self.path}: cannot be read ({type(error).__name__}: {error}). The file is damaged "
            "or truncated: delete it and run again (the workflow rebuilds it and everything "
            "that depends on it)."
        )


@contextmanager
def reading(path: str | os.PathLike) -> Iterator[Path]:
    """Turn any error raised while reading ``path`` into an :class:`UnreadableFileError`.

    A missing file stays a ``FileNotFoundError``: it is not damaged, just absent.
    """
    path = Path(path)
    try:
        yield path
    except (FileNotFoundError, UnreadableFileError):
        raise
    except Exception as error:
        raise UnreadableFileError(path, error) from error


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialize {type(value).__name__} to JSON")


def _encode_nonfinite(value: Any) -> Any:
    """JSON has no inf/nan; store them as the strings 'inf', '-inf', 'nan'."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _encode_nonfinite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode_nonfinite(v) for v in value]
    if hasattr(value, "item") and not hasattr(value, "__len__"):
        return _encode_nonfinite(value.item())
    return value


def write_json(path: str | os.PathLike, payload: Any) -> None:
    text = json.dumps(_encode_nonfinite(payload), indent=2, sort_keys=True, default=_json_default)
    write_bytes(path, (text + "\n").encode())


def read_json(path: str | os.PathLike) -> Any:
    with reading(path), open(path) as handle:
        return json.load(handle)


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame | pa.Table,
                  metadata: Mapping[bytes, bytes] | None = None) -> None:
    """Atomic zstd Parquet; ``metadata`` is added to the file's key-value metadata."""
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    table = _pandas_readable(table)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd")


def _pandas_readable(table: pa.Table) -> pa.Table:
    """``table`` whose pandas metadata names no dtype pandas cannot rebuild (issue 35).

    A fixed-size list column of a DataFrame (an ArrowExtensionArray: logits, x, gradient)
    is recorded as ``fixed_size_list<item: float>[C][pyarrow]``, which
    ``pandas.read_parquet`` fails on; recorded as ``object`` it reads as a column of numpy
    arrays, what pyarrow's own ``to_pandas`` gives."""
    raw = (table.schema.metadata or {}).get(b"pandas")
    fixed = {field.name for field in table.schema if pa.types.is_fixed_size_list(field.type)}
    if raw is None or not fixed:
        return table
    meta = json.loads(raw)
    for column in meta.get("columns", []):
        if column.get("field_name") in fixed:
            column["numpy_type"] = "object"
    return table.replace_schema_metadata({**table.schema.metadata, b"pandas": json.dumps(meta).encode()})


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pd.DataFrame:
    with reading(path):
        schema = pq.read_schema(path)
        names = schema.names
        # A missing column is a caller's error, not a damaged file.
        absent = sorted(set(columns or ()) - set(names))
        if not absent:
            table = pq.read_table(path, columns=columns)
    if absent:
        raise KeyError(f"{path}: no column {absent} (it has {names})")
    # pandas 3 cannot rebuild the dtype name pandas metadata stores for a
    # fixed-size list column (x, gradient); such frames carry no nullable
    # dtypes, so reading them without that metadata loses nothing. The file's schema decides:
    # the metadata names every column, also those a column subset leaves out.
    has_fixed_lists = any(pa.types.is_fixed_size_list(field.type) for field in schema)
    return table.to_pandas(ignore_metadata=has_fixed_lists)


def saved_weight_arrays(path: str | os.PathLike) -> list:
    """Every weight array a saved Keras model file holds, in the file's order (numpy): a ``.keras`` file's
    ``model.weights.h5`` member, an ``.h5`` file's ``model_weights`` group. Read as data (h5py, no Keras):
    a damaged file names itself (``reading``)."""
    import zipfile

    import h5py
    import numpy as np

    def arrays(group) -> list:
        found: list = []
        group.visititems(lambda _, item: found.append(np.asarray(item)) if isinstance(item, h5py.Dataset) else None)
        return found

    with reading(path) as file:
        if file.suffix == ".keras":
            with zipfile.ZipFile(file) as archive, archive.open("model.weights.h5") as raw, \
                    h5py.File(raw, "r") as store:
                return arrays(store)
        with h5py.File(file, "r") as store:
            return arrays(store["model_weights"] if "model_weights" in store else store)
