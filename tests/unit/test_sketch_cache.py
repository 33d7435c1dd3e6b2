"""The parse-time table sketch kept on disk (dpaudit.data.sketch_cache): read back instead of scanning
the file again, scanned again whenever the file, the entry or the folder's content says otherwise."""

from __future__ import annotations

import os

import pytest

from dpaudit.data import table as table_module
from dpaudit.data.table import TableError, inspect_table
from tests.unit.test_table import _frame, _params, _write


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DPAUDIT_CACHE_DIR", str(folder))
    table_module._inspect.cache_clear()  # no in-process copy: every call asks the disk
    yield folder / "table-sketches-v1"
    table_module._inspect.cache_clear()


def _scans(monkeypatch):
    calls = []
    real = table_module.scan
    monkeypatch.setattr(table_module, "scan", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def _fresh():
    table_module._inspect.cache_clear()  # as a new Snakefile parse in another process


def test_a_second_parse_reads_the_sketch_without_scanning(tmp_path, cache, monkeypatch):
    path = _write(_frame(200), tmp_path / "t.csv")
    scans = _scans(monkeypatch)
    first = inspect_table("credit", _params(path))
    assert len(scans) == 1 and len(list(cache.glob("*.json"))) == 1
    _fresh()
    again = inspect_table("credit", _params(path))
    assert len(scans) == 1  # read from disk
    assert again == first and isinstance(again.columns, tuple) and again.label_counts == first.label_counts


def test_a_changed_file_entry_or_damaged_cache_is_scanned_again(tmp_path, cache, monkeypatch):
    path = _write(_frame(200), tmp_path / "t.csv")
    scans = _scans(monkeypatch)
    inspect_table("credit", _params(path))
    _fresh()
    inspect_table("credit", _params(path, max_levels=40))  # another entry
    assert len(scans) == 2
    text = open(path).read().replace("Bern", "Genf")  # same size, other cells
    with open(path, "w") as handle:
        handle.write(text)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    _fresh()
    changed = inspect_table("credit", _params(path))
    assert len(scans) == 3  # the same size, another modification time: scanned
    for stored in cache.glob("*.json"):
        stored.write_text("{not json")
    _fresh()
    assert inspect_table("credit", _params(path)) == changed and len(scans) == 4


def test_refusals_are_never_kept(tmp_path, cache, monkeypatch):
    path = _write(_frame(200).assign(default="no"), tmp_path / "one_class.csv")
    for _ in range(2):
        _fresh()
        with pytest.raises(TableError, match="class"):
            inspect_table("credit", _params(path))
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_an_unwritable_cache_is_scanned_around(tmp_path, monkeypatch):
    blocker = tmp_path / "file_not_folder"
    blocker.write_text("")
    monkeypatch.setenv("DPAUDIT_CACHE_DIR", str(blocker))
    _fresh()
    path = _write(_frame(200), tmp_path / "t.csv")
    assert inspect_table("credit", _params(path)).rows == 200
    _fresh()


def test_the_suite_keeps_its_caches_out_of_the_users_folder():
    """tests/conftest.py points dpaudit.caches at a folder of the session's own (not ~/.cache/dpaudit)."""
    from pathlib import Path

    from dpaudit.caches import cache_folder

    folder = cache_folder()
    assert folder is not None and folder.name.startswith("dpaudit-test-cache-")
    assert Path.home() / ".cache" not in folder.parents
