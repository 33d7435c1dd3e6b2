"""dpaudit.io: atomic writes and Parquet round trips."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpaudit.io import (
    UnreadableFileError,
    atomic_path,
    read_json,
    read_parquet,
    write_json,
    write_parquet,
)


def test_fixed_size_list_frame_round_trips(tmp_path):
    vectors = np.arange(12, dtype=np.float32).reshape(4, 3)
    frame = pd.DataFrame({"example_id": np.arange(4, dtype=np.int64)})
    frame["gradient"] = pd.Series(
        pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 3), dtype=pd.ArrowDtype(pa.list_(pa.float32(), 3))
    )
    write_parquet(tmp_path / "g.parquet", frame)
    back = read_parquet(tmp_path / "g.parquet")
    np.testing.assert_array_equal(np.stack(back["gradient"].to_numpy()), vectors)


def test_a_fixed_size_list_frame_reads_with_plain_pandas(tmp_path):
    """pandas.read_parquet alone (no dpaudit reader) opens it: the list column as arrays, the
    other columns' nullable dtypes kept (issue 35)."""
    vectors = np.arange(12, dtype=np.float32).reshape(4, 3)
    frame = pd.DataFrame({"example_id": np.arange(4, dtype=np.int64),
                          "name": pd.array(["a", None, "c", "d"], dtype="string")})
    frame["logits"] = pd.Series(pd.arrays.ArrowExtensionArray(
        pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 3)))
    write_parquet(tmp_path / "o.parquet", frame)
    back = pd.read_parquet(tmp_path / "o.parquet")
    np.testing.assert_array_equal(np.stack(back["logits"].to_numpy()), vectors)
    assert str(back["name"].dtype) == str(frame["name"].dtype) and back["name"].isna().tolist() == [
        False, True, False, False]


def test_nullable_dtypes_round_trip(tmp_path):
    frame = pd.DataFrame({"tp": pd.array([1, None], dtype="Int64"), "name": pd.array(["a", None], dtype="string")})
    write_parquet(tmp_path / "m.parquet", frame)
    back = read_parquet(tmp_path / "m.parquet")
    assert str(back["tp"].dtype) == "Int64" and back["tp"].isna().tolist() == [False, True]


def test_json_keeps_infinity(tmp_path):
    write_json(tmp_path / "a.json", {"epsilon": math.inf, "x": [1.0, -math.inf]})
    assert read_json(tmp_path / "a.json") == {"epsilon": "inf", "x": [1.0, "-inf"]}


def test_interrupted_write_leaves_nothing(tmp_path):
    target = tmp_path / "out.bin"
    def interrupted():
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        interrupted()
    assert not target.exists() and list(tmp_path.iterdir()) == []


class _Signal(BaseException):
    """What a signal handler raises (dpaudit.data.download.Terminated is one)."""


def test_a_signal_while_the_temporary_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    # The race make test met once (tests/unit/test_mnist.py): SIGTERM arrived after the temporary
    # file existed but before its name was returned, and the .part file stayed behind.
    import os

    real_open = os.open

    def open_then_signal(path, *args, **kwargs):
        os.close(real_open(path, *args, **kwargs))
        raise _Signal("signal 15 while the file is created")

    target = tmp_path / "out.bin"
    monkeypatch.setattr(os, "open", open_then_signal)
    with pytest.raises(_Signal), atomic_path(target, suffix=".part"):
        pass
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_atomic_writes_respect_the_umask(tmp_path):
    import os

    umask = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {})
    finally:
        os.umask(umask)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644


def _cut_in_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_damaged_parquet_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "outputs.parquet"
    write_parquet(path, pd.DataFrame({"a": np.arange(100)}))
    _cut_in_half(path)
    with pytest.raises(UnreadableFileError, match=r"outputs\.parquet.*delete it and run again") as info:
        read_parquet(path)
    assert info.value.path == path


def test_a_missing_column_is_not_called_damage(tmp_path):
    path = tmp_path / "t.parquet"
    write_parquet(path, pd.DataFrame({"a": [1]}))
    with pytest.raises(KeyError, match="no column"):
        read_parquet(path, columns=["b"])
    assert read_parquet(path, columns=["a"])["a"].tolist() == [1]


def test_a_truncated_json_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "train.json"
    write_json(path, {"history": list(range(20))})
    _cut_in_half(path)
    with pytest.raises(UnreadableFileError, match=r"train\.json.*JSONDecodeError.*delete it and run again"):
        read_json(path)


def test_a_missing_file_stays_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")
    with pytest.raises(FileNotFoundError):
        read_parquet(tmp_path / "absent.parquet")
