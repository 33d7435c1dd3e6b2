"""Purchase-100: hash pinned on first download from a loopback mirror, then preparation.

The real mirrors are unreachable where this suite runs, so the mirror is
http.server in a thread on 127.0.0.1 serving a generated file in the real
format: a gzip tar whose member ``dataset_purchase`` holds rows
``label,f1,...,f600`` (label 1..100, binary features). Oracles independent of
the implementation: the csv module parsing the generated member, hashlib on the
served bytes, scikit-learn's ``train_test_split`` for the split sizes, and the
arithmetic of Negoescu et al. 2023's split sizes written out.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import random
import tarfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.model_selection import train_test_split

from dpaudit.data.datasets import prepare_dataset
from dpaudit.data.download import (
    DownloadError,
    fetch,
    read_sha256_record,
    sha256_record_path,
    write_sha256_record,
)
from dpaudit.data.examples import features
from dpaudit.data.purchase import PURCHASE_FILE, random_split
from dpaudit.data.registry import (
    expected_sha256,
    known_check,
    known_files,
    known_sha256,
    known_sources,
)
from dpaudit.io import write_parquet
from tests.loopback import LoopbackServer, serving

N_ROWS = 500
D = 600
FAST = {"retries": 2, "timeout": 5, "backoff": 0.0}


def _rows(n: int, seed: int) -> list[list[int]]:
    # The stdlib generator, so the file does not share numpy with the parser.
    rng = random.Random(seed)
    return [[rng.randint(1, 100)] + [int(rng.random() < 0.2) for _ in range(D)] for _ in range(n)]


def _text(rows: list[list[int]]) -> bytes:
    return "".join(",".join(map(str, row)) + "\n" for row in rows).encode("ascii")


def _tgz(member_bytes: bytes, member: str = "dataset_purchase") -> bytes:
    # mtime 0 in both the tar and gzip headers: equal inputs give equal bytes.
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w|") as archive:
            info = tarfile.TarInfo(member)
            info.size = len(member_bytes)
            info.mtime = 0
            archive.addfile(info, io.BytesIO(member_bytes))
    return buffer.getvalue()


ROWS = _rows(N_ROWS, seed=7)
GOOD = _tgz(_text(ROWS))
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()
# Same format, one feature flipped: what a mirror serving a re-made file looks like.
CHANGED_ROWS = [list(row) for row in ROWS]
CHANGED_ROWS[3][5] = 1 - CHANGED_ROWS[3][5]
CHANGED = _tgz(_text(CHANGED_ROWS))
CHANGED_SHA = hashlib.sha256(CHANGED).hexdigest()
LFS_POINTER = (
    b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"ab" * 32 + b"\nsize 12345678\n"
)
HTML = b"<!DOCTYPE html><html><body>Moved to our new file server</body></html>\n"


class _Handler(BaseHTTPRequestHandler):
    server: _Mirror

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.hits[self.path] = srv.hits.get(self.path, 0) + 1
            body = srv.files.get(self.path)
        if body is None:
            self.send_response(404)
            body = b"not found"
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Mirror(LoopbackServer):
    def __init__(self):
        super().__init__(_Handler)
        self.files = {
            "/reza/dataset_purchase.tgz": GOOD,
            "/lfs/dataset_purchase.tgz": LFS_POINTER,
            "/html/dataset_purchase.tgz": HTML,
        }


@pytest.fixture
def mirror():
    with serving(_Mirror()) as srv:
        yield srv


def _download(sources, resources: Path, **kwargs):
    """What the Snakemake download job does for one raw file."""
    dest = resources / "raw" / "purchase100" / PURCHASE_FILE
    return dest, fetch(
        sources,
        dest,
        expected_sha256("purchase100", PURCHASE_FILE, resources),
        record=sha256_record_path(dest),
        check=known_check("purchase100", PURCHASE_FILE),
        **FAST,
        **kwargs,
    )


# ---------------------------------------------------------------------------
# registry and hash recording


def test_registry_entry():
    assert known_files("purchase100") == [PURCHASE_FILE]
    assert known_sha256("purchase100", PURCHASE_FILE) is None
    assert [s["url"] for s in known_sources("purchase100", PURCHASE_FILE)] == [
        "https://www.comp.nus.edu.sg/~reza/files/dataset_purchase.tgz",
        "https://github.com/privacytrustlab/datasets/raw/master/dataset_purchase.tgz",
    ]
    assert known_check("purchase100", PURCHASE_FILE) == {
        "kind": "tar_member",
        "member": "dataset_purchase",
    }
    assert known_check("adult", "adult.data") is None


def test_first_download_records_hash_and_later_downloads_must_match(mirror, tmp_path):
    resources = tmp_path / "resources"
    url = mirror.url("/reza/dataset_purchase.tgz")
    assert expected_sha256("purchase100", PURCHASE_FILE, resources) is None

    dest, first = _download([url], resources)
    record = dest.parent / "dataset_purchase.tgz.sha256"
    assert sha256_record_path(dest) == record
    assert dest.read_bytes() == GOOD
    assert first.sha256 == GOOD_SHA
    # sha256sum format, so `sha256sum -c` run in the folder checks the file.
    assert record.read_text() == f"{GOOD_SHA}  dataset_purchase.tgz\n"
    assert expected_sha256("purchase100", PURCHASE_FILE, resources) == GOOD_SHA
    # the download job names its record (its output's sidecar) instead of a resources folder
    assert expected_sha256("purchase100", PURCHASE_FILE, record=record) == GOOD_SHA
    assert expected_sha256("purchase100", PURCHASE_FILE, record=tmp_path / "none.sha256") is None
    assert sorted(p.name for p in dest.parent.iterdir()) == [PURCHASE_FILE, record.name]

    # The mirror now serves a different (equally well-formed) file. A good
    # local copy is verified against the record and kept; the mirror is not asked.
    mirror.files["/reza/dataset_purchase.tgz"] = CHANGED
    _, again = _download([url], resources)
    assert again.source["kind"] == "existing"
    assert mirror.hits["/reza/dataset_purchase.tgz"] == 1
    assert dest.read_bytes() == GOOD

    # Snakemake deletes a job's outputs before re-running it; the record is not
    # an output, so the changed mirror is caught instead of silently re-pinned.
    dest.unlink()
    with pytest.raises(DownloadError) as info:
        _download([url], resources)
    message = str(info.value)
    assert url in message
    assert "sha256 mismatch" in message
    assert f"expected {GOOD_SHA}, got {CHANGED_SHA}" in message
    assert f"recorded on first download in {record}" in message
    assert f"delete {record}" in message
    assert not dest.exists()
    assert record.read_text() == f"{GOOD_SHA}  dataset_purchase.tgz\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == [record.name]

    # A damaged local copy is not replaced by the mirror's other bytes either.
    dest.write_bytes(GOOD[:-100])
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        _download([url], resources)
    assert dest.read_bytes() == GOOD[:-100]

    # Once the mirror serves the recorded bytes again, the download succeeds.
    mirror.files["/reza/dataset_purchase.tgz"] = GOOD
    _, restored = _download([url], resources)
    assert restored.sha256 == GOOD_SHA
    assert dest.read_bytes() == GOOD


def test_first_download_skips_mirrors_serving_something_else(mirror, tmp_path):
    resources = tmp_path / "resources"
    bad = [mirror.url("/html/dataset_purchase.tgz"), mirror.url("/lfs/dataset_purchase.tgz")]
    good = mirror.url("/reza/dataset_purchase.tgz")

    # With no hash to go by, only the content check stops an error page or a
    # Git LFS pointer from being pinned as the dataset.
    dest = resources / "raw" / "purchase100" / PURCHASE_FILE
    with pytest.raises(DownloadError) as info:
        _download(bad, resources)
    assert "expected sha256 unknown" in str(info.value)
    reasons = dict(info.value.failures)
    assert set(reasons) == set(bad)
    assert all("content check failed" in reason for reason in reasons.values())
    assert not dest.exists()
    assert read_sha256_record(sha256_record_path(dest)) is None

    dest, result = _download([*bad, good], resources)
    assert result.source["url"] == good
    assert [source for source, _ in result.attempts] == bad
    assert read_sha256_record(sha256_record_path(dest)) == GOOD_SHA


def test_archive_without_the_member_is_rejected(mirror, tmp_path):
    mirror.files["/other/dataset_purchase.tgz"] = _tgz(_text(ROWS), member="dataset_texas")
    with pytest.raises(DownloadError, match="no regular file 'dataset_purchase'"):
        _download([mirror.url("/other/dataset_purchase.tgz")], tmp_path / "resources")


def test_bad_or_conflicting_records_are_errors(mirror, tmp_path):
    resources = tmp_path / "resources"
    dest = resources / "raw" / "purchase100" / PURCHASE_FILE
    record = sha256_record_path(dest)
    record.parent.mkdir(parents=True)
    # An unreadable record must not count as "none yet": that would re-pin.
    record.write_text("not a hash\n")
    with pytest.raises(ValueError, match="does not hold a sha256"):
        expected_sha256("purchase100", PURCHASE_FILE, resources)
    with pytest.raises(ValueError, match="does not hold a sha256"):
        fetch([mirror.url("/reza/dataset_purchase.tgz")], dest, None, record=record, **FAST)
    assert mirror.hits == {}

    # A record contradicting the hash the caller asks for is a stale record.
    write_sha256_record(record, CHANGED_SHA, PURCHASE_FILE)
    with pytest.raises(ValueError, match="delete the stale record"):
        fetch([mirror.url("/reza/dataset_purchase.tgz")], dest, GOOD_SHA, record=record, **FAST)

    # Same for a record contradicting the registry (Adult's hash is known).
    adult = resources / "raw" / "adult" / "adult.data"
    write_sha256_record(sha256_record_path(adult), "0" * 64, "adult.data")
    with pytest.raises(ValueError, match="registry expects"):
        expected_sha256("adult", "adult.data", resources)
    assert expected_sha256("adult", "adult.test", resources) == known_sha256("adult", "adult.test")

    with pytest.raises(ValueError, match="unknown content check"):
        fetch([mirror.url("/reza/dataset_purchase.tgz")], dest, None, check={"kind": "zip"})


# ---------------------------------------------------------------------------
# preparation


def _write(tmp_path: Path, data: bytes, name: str = PURCHASE_FILE) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _oracle_rows(tgz: Path) -> list[list[int]]:
    with tarfile.open(tgz) as archive:
        text = archive.extractfile("dataset_purchase").read().decode("ascii")
    return [[int(v) for v in row] for row in csv.reader(io.StringIO(text))]


def test_prepare_generated_file(tmp_path):
    path = _write(tmp_path, GOOD)
    table, info = prepare_dataset("purchase100", {PURCHASE_FILE: path}, {"split_seed": 3})

    assert table.column_names == ["example_id", "split", "label", "x"]
    assert table.schema.field("x").type == pa.list_(pa.float32(), D)
    assert table.schema.field("label").type == pa.int64()
    assert table.num_rows == N_ROWS

    rows = _oracle_rows(path)
    assert len(rows) == N_ROWS
    ids = table.column("example_id").to_numpy()
    labels = table.column("label").to_numpy()
    x = features(table)
    assert ids.tolist() == list(range(N_ROWS))
    assert labels.tolist() == [row[0] - 1 for row in rows]
    assert 0 <= labels.min() and labels.max() <= 99
    assert x.dtype == np.float32 and x.shape == (N_ROWS, D)
    assert np.array_equal(x, np.array([row[1:] for row in rows], dtype=np.float32))
    # Exactly 0/1: not standardized, not centred.
    assert set(np.unique(x).tolist()) == {0.0, 1.0}

    split = table.column("split").to_pylist()
    # sklearn: n_test = ceil(0.33 * 500) = ceil(165.0) = 165, n_train = 335.
    sk_train, sk_test = train_test_split(np.arange(N_ROWS), test_size=0.33, random_state=0)
    assert (split.count("train"), split.count("holdout")) == (len(sk_train), len(sk_test))
    assert (len(sk_train), len(sk_test)) == (335, 165)
    assert split.count("test") == 0

    assert info["name"] == "purchase100"
    assert (info["n"], info["d"], info["classes"]) == (N_ROWS, D, 100)
    assert info["n_members"] == 335
    assert info["n_per_split"] == {"train": 335, "holdout": 165}
    assert info["splits"] == {"members": "train", "nonmembers": "holdout", "utility": "holdout"}
    assert "197,324" in info["version_note"] and "311,540" in info["version_note"]
    assert info["published_n"] == 197_324
    assert info["matches_published_n"] is False
    assert info["raw_files"][PURCHASE_FILE]["sha256"] == GOOD_SHA
    assert info["raw_files"][PURCHASE_FILE]["bytes"] == len(GOOD)
    assert info["raw_files"][PURCHASE_FILE]["sha256_verified_against"] is None
    assert info["preprocessing"]["standardize"] is None
    assert "not standardized" in info["preprocessing"]["features"]
    assert info["preprocessing"]["split"]["split_seed"] == 3
    counts = info["class_counts"]
    assert sum(counts["train"].values()) == 335 and len(counts["train"]) == 100


def test_prepare_is_deterministic_and_seed_moves_only_the_split(tmp_path):
    path = _write(tmp_path, GOOD)
    a, info_a = prepare_dataset("purchase100", {PURCHASE_FILE: path}, {"split_seed": 1})
    b, info_b = prepare_dataset("purchase100", {PURCHASE_FILE: path}, {"split_seed": 1})
    c, _ = prepare_dataset("purchase100", {PURCHASE_FILE: path}, {"split_seed": 2})
    assert a.equals(b)
    assert info_a == info_b
    assert a.column("split").to_pylist() != c.column("split").to_pylist()
    assert c.column("split").to_pylist().count("holdout") == 165
    for column in ("example_id", "label", "x"):
        assert a.column(column).equals(c.column(column))


def test_split_sizes_match_sklearn_and_negoescu_et_al():
    # Negoescu et al. 2023, Sec. 4 split sizes: 0.33 * 197,324 = 65,116.92 -> ceil 65,117 non-members,
    # 197,324 - 65,117 = 132,207 members.
    assert math.ceil(0.33 * 197_324) == 65_117
    assert 197_324 - 65_117 == 132_207
    for n in (197_324, 500, 101, 100, 7):
        sk_train, sk_test = train_test_split(np.arange(n), test_size=0.33, random_state=0)
        split = random_split(n, seed=0)
        assert int((split == "train").sum()) == len(sk_train)
        assert int((split == "holdout").sum()) == len(sk_test)
    split = random_split(197_324, seed=0)
    assert int((split == "train").sum()) == 132_207
    assert int((split == "holdout").sum()) == 65_117
    with pytest.raises(ValueError, match="empty split"):
        random_split(1, seed=0)
    with pytest.raises(ValueError, match="test_size"):
        random_split(10, seed=0, test_size=1.0)


def test_prepare_verifies_the_recorded_hash(tmp_path):
    path = _write(tmp_path, GOOD)
    record = sha256_record_path(path)
    write_sha256_record(record, GOOD_SHA, PURCHASE_FILE)
    _, info = prepare_dataset("purchase100", {PURCHASE_FILE: path}, {})
    assert info["raw_files"][PURCHASE_FILE]["sha256_verified_against"] == str(record)

    # The raw file was replaced after the hash was pinned.
    path.write_bytes(CHANGED)
    with pytest.raises(ValueError, match="recorded on first download"):
        prepare_dataset("purchase100", {PURCHASE_FILE: path}, {})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda rows: rows[4].__setitem__(0, 0), "row 4 has label 0"),
        (lambda rows: rows[9].__setitem__(0, 101), "row 9 has label 101"),
        (lambda rows: rows[2].__setitem__(17, 2), "row 2 has a feature outside"),
        # uint8 parsing must reject, not wrap, out-of-range text.
        (lambda rows: rows[1].__setitem__(0, 257), "invalid value '257'"),
        (lambda rows: rows[1].__setitem__(3, -1), "invalid value '-1'"),
        (lambda rows: rows[6].pop(), "Expected 601 columns"),
    ],
)
def test_prepare_rejects_malformed_rows(tmp_path, mutate, message):
    rows = [list(row) for row in ROWS[:20]]
    mutate(rows)
    path = _write(tmp_path, _tgz(_text(rows)))
    with pytest.raises(ValueError, match=message):
        prepare_dataset("purchase100", {PURCHASE_FILE: path}, {})


def test_prepare_rejects_wrong_width_empty_fields_and_wrong_archives(tmp_path):
    narrow = [row[:-1] for row in ROWS[:20]]
    with pytest.raises(ValueError, match="has 600 columns, expected 601"):
        prepare_dataset("purchase100", {PURCHASE_FILE: _write(tmp_path, _tgz(_text(narrow)))}, {})
    lines = _text(ROWS[:20]).split(b"\n")
    lines[5] = lines[5][:-1]  # drop the last digit, leaving a trailing empty field
    text = b"\n".join(lines)
    with pytest.raises(ValueError, match="empty fields"):
        prepare_dataset("purchase100", {PURCHASE_FILE: _write(tmp_path, _tgz(text))}, {})
    other = _write(tmp_path, _tgz(_text(ROWS[:20]), member="dataset_texas"))
    with pytest.raises(ValueError, match="no regular file 'dataset_purchase'"):
        prepare_dataset("purchase100", {PURCHASE_FILE: other}, {})
    with pytest.raises(ValueError, match="not a readable gzip tar"):
        prepare_dataset("purchase100", {PURCHASE_FILE: _write(tmp_path, HTML)}, {})
    with pytest.raises(ValueError, match="needs raw file"):
        prepare_dataset("purchase100", {}, {})


def test_download_then_prepare_then_parquet(mirror, tmp_path):
    resources = tmp_path / "resources"
    dest, _ = _download([mirror.url("/reza/dataset_purchase.tgz")], resources)
    sources = {PURCHASE_FILE: [mirror.url("/reza/dataset_purchase.tgz")]}
    table, info = prepare_dataset(
        "purchase100", {PURCHASE_FILE: dest}, {"split_seed": 0, "sources": sources}
    )
    raw = info["raw_files"][PURCHASE_FILE]
    assert raw["sha256"] == GOOD_SHA == expected_sha256("purchase100", PURCHASE_FILE, resources)
    assert raw["sha256_verified_against"] == str(sha256_record_path(dest))
    assert raw["sources"] == sources[PURCHASE_FILE]

    out = tmp_path / "examples.parquet"
    write_parquet(out, table)
    back = pq.read_table(out)
    assert back.schema.field("x").type == pa.list_(pa.float32(), D)
    assert np.array_equal(features(back), features(table))
    assert back.column("split").equals(table.column("split"))
