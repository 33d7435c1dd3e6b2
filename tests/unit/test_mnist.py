"""MNIST: IDX files generated here, served on loopback, checked by md5 and pinned by sha256,
parsed and prepared; truncated files refused; an interrupted download leaves no .part file.

The real mirrors are unreachable where this suite runs. Oracles: struct/gzip writing the
IDX bytes independently of the reader, hashlib for md5/sha256, the arrays that were written.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import signal
import struct
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest

from dpaudit.data import download
from dpaudit.data.datasets import prepare_dataset
from dpaudit.data.download import DownloadError, fetch, read_sha256_record, sha256_record_path
from dpaudit.data.examples import features
from dpaudit.data.mnist import read_idx
from dpaudit.data.registry import known_check, known_files, known_sources
from tests.loopback import LoopbackServer, serving

FAST = {"retries": 1, "timeout": 5, "backoff": 0.0}
NAMES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


def _idx(array: np.ndarray) -> bytes:
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes(), mtime=0)


RNG = np.random.default_rng(0)
ARRAYS = {
    NAMES[0]: RNG.integers(0, 256, size=(30, 28, 28)),
    NAMES[1]: RNG.integers(0, 10, size=30),
    NAMES[2]: RNG.integers(0, 256, size=(12, 28, 28)),
    NAMES[3]: RNG.integers(0, 10, size=12),
}
FILES = {name: _idx(a) for name, a in ARRAYS.items()}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.server.files.get(self.path)
        if body is None:
            self.send_response(404)
            body = b"not found"
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Mirror(LoopbackServer):
    def __init__(self, files):
        super().__init__(_Handler)
        self.files = files


def test_registry_lists_four_files_two_mirrors_and_published_md5():
    assert sorted(known_files("mnist")) == sorted(NAMES)
    assert known_check("mnist", NAMES[0]) == {"kind": "md5", "md5": "f68b3c2dcbeaaa9fbdd348bbdeb94873"}
    assert known_check("mnist", NAMES[3]) == {"kind": "md5", "md5": "ec29112dd5afa0611ce80d1b7f02629c"}
    assert len(known_sources("mnist", NAMES[1])) == 2


def test_fetch_checks_md5_falls_back_to_second_mirror_and_records_sha256(tmp_path):
    name = NAMES[1]
    good = FILES[name]
    md5 = {"kind": "md5", "md5": hashlib.md5(good).hexdigest()}
    files = {"/bad/" + name: _idx(ARRAYS[name][:-1]), "/good/" + name: good}
    with serving(_Mirror(files)) as srv:
        dest = tmp_path / "raw" / "mnist" / name
        result = fetch([srv.url("/bad/" + name), srv.url("/good/" + name)], dest, None,
                       record=sha256_record_path(dest), check=md5, **FAST)
    assert result.sha256 == hashlib.sha256(good).hexdigest() == read_sha256_record(sha256_record_path(dest))
    assert "md5" in result.attempts[0][1]  # the first mirror's bytes failed the published md5
    assert dest.read_bytes() == good
    assert not list(dest.parent.glob("*.part"))


def test_fetch_refuses_when_no_mirror_matches_the_md5(tmp_path):
    name = NAMES[3]
    with serving(_Mirror({"/m/" + name: FILES[name]})) as srv:
        with pytest.raises(DownloadError, match="published md5"):
            fetch([srv.url("/m/" + name)], tmp_path / name, None, check={"kind": "md5", "md5": "0" * 32}, **FAST)
    assert not (tmp_path / name).exists()


def test_reader_parses_exactly_and_refuses_truncation(tmp_path):
    for name, array in ARRAYS.items():
        path = tmp_path / name
        path.write_bytes(FILES[name])
        assert np.array_equal(read_idx(path), array)
    whole = gzip.decompress(FILES[NAMES[0]])
    short = tmp_path / "short.gz"
    short.write_bytes(gzip.compress(whole[:-100]))  # a complete gzip of a cut IDX payload
    with pytest.raises(ValueError, match="truncated or padded"):
        read_idx(short)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(FILES[NAMES[0]][: len(FILES[NAMES[0]]) // 2])  # a cut gzip stream
    with pytest.raises(ValueError, match="cut.gz: not a complete gzip stream"):
        read_idx(cut)


def test_prepare_mnist(tmp_path):
    raw = {}
    for name in NAMES:
        raw[name] = tmp_path / name
        raw[name].write_bytes(FILES[name])
    table, info = prepare_dataset("mnist", raw, {})
    x = features(table)
    assert x.shape == (42, 784)
    assert np.allclose(x[:30], ARRAYS[NAMES[0]].reshape(30, -1) / 255.0, atol=1e-7)
    assert np.array_equal(table.column("label").to_numpy(), np.concatenate([ARRAYS[NAMES[1]], ARRAYS[NAMES[3]]]))
    assert info["splits"] == {"members": "train", "nonmembers": "holdout", "utility": "holdout"}
    assert info["raw_files"][NAMES[0]]["sha256"] == hashlib.sha256(FILES[NAMES[0]]).hexdigest()


def test_keyboard_interrupt_removes_the_part_file(tmp_path, monkeypatch):
    def interrupted(url, tmp, timeout):
        Path(tmp).write_bytes(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(download, "_stream_url", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch(["http://127.0.0.1:9/x"], tmp_path / "x.gz", None, **FAST)
    assert os.listdir(tmp_path) == []


_SLOW_CHILD = """
import sys
from dpaudit.data.download import fetch
fetch([sys.argv[1]], sys.argv[2], None, retries=1, timeout=30, backoff=0.0)
"""


class _SlowHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(10_000_000))
        self.end_headers()
        try:
            for _ in range(600):  # ~30 s of trickle unless the client goes away
                self.wfile.write(b"x" * 1000)
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass


def test_sigterm_removes_the_part_file(tmp_path):
    dest = tmp_path / "slow.gz"
    src = Path(__file__).resolve().parents[2] / "src"
    with serving(LoopbackServer(_SlowHandler)) as srv:
        child = subprocess.Popen([sys.executable, "-c", _SLOW_CHILD, srv.url("/slow"), str(dest)],
                                 env={**os.environ, "PYTHONPATH": str(src)})
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("*.part")):  # wait until the download is under way
            assert child.poll() is None and time.monotonic() < deadline, "download never started"
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
    assert child.returncode != 0
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
