"""User tables as datasets (issue 25): round trips, recorded encodings, every refusal by name."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dpaudit.config import ConfigError, validate_config
from dpaudit.data.datasets import prepare_dataset
from dpaudit.data.examples import features, stratified_split
from dpaudit.data.table import TableError, inspect_table
from tests.unit.test_datasets import real_adult  # noqa: F401  (session fixture: the pinned UCI files)

GRID = [{"mechanism": ["baseline"], "epochs": [1], "batch_size": [8], "seed": [0]}]


def _frame(n: int = 120, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "customer_id": np.arange(5000, 5000 + n) * 7,
        "age": rng.integers(18, 90, n),
        "balance": rng.normal(1000.0, 250.0, n).round(3),
        "city": rng.choice(["Bern", "Basel", "Chur"], n),
        "premium": rng.random(n) < 0.3,
        "email": [f"user{i}@example.org" for i in range(n)],
        "default": rng.choice(["no", "yes"], n),
    })


def _write(frame: pd.DataFrame, path) -> str:
    if str(path).endswith(".parquet"):
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    elif str(path).endswith(".gz"):
        with gzip.open(path, "wt") as handle:
            frame.to_csv(handle, index=False)
    else:
        frame.to_csv(path, index=False)
    return str(path)


def _params(path, **extra) -> dict:
    return {"source": "table", "path": str(path), "label": "default", "id": "customer_id", "drop": ["email"],
            **extra}


def _prepare(path, **extra):
    return prepare_dataset("credit", {"table": path}, _params(path, **extra))


def _validate(path, **extra) -> dict:
    return validate_config({"datasets": {"credit": _params(path, **extra)}, "grid": GRID})


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
@pytest.mark.parametrize("fit_on", ["members", "holdout"])
def test_round_trip_features_labels_ids_splits(tmp_path, suffix, fit_on):
    frame = _frame()
    path = _write(frame, tmp_path / f"credit{suffix}")
    table, info = _prepare(path, fit_on=fit_on)
    y = (frame["default"] == "yes").to_numpy().astype(int)
    np.testing.assert_array_equal(table.column("label").to_numpy(), y)
    np.testing.assert_array_equal(table.column("example_id").to_numpy(), frame["customer_id"])
    split = stratified_split(y, 0)
    np.testing.assert_array_equal(table.column("split").to_numpy(zero_copy_only=False), split)
    assert info["label_names"] == ["no", "yes"] and info["preprocessing"]["label"]["order"] == ["no", "yes"]
    fit = split == {"members": "train", "holdout": "holdout"}[fit_on]
    x = features(table)
    assert info["feature_names"] == ["age", "balance", "city=Basel", "city=Bern", "city=Chur", "premium"]
    for k, column in enumerate(["age", "balance"]):
        values = frame[column].to_numpy(float)
        expected = (values - values[fit].mean()) / values[fit].std()
        np.testing.assert_allclose(x[:, k], expected, rtol=1e-5, atol=1e-5)
    for k, city in enumerate(["Basel", "Bern", "Chur"]):
        np.testing.assert_array_equal(x[:, 2 + k], (frame["city"] == city).to_numpy(float))
    np.testing.assert_array_equal(x[:, 5], frame["premium"].to_numpy(float))
    roles = {c["name"]: c for c in info["table"]["column_roles"]}
    assert {name: c["role"] for name, c in roles.items()} == {
        "customer_id": "id", "age": "numeric", "balance": "numeric", "city": "categorical",
        "premium": "boolean", "email": "dropped", "default": "label"}
    assert roles["age"]["mean"] == pytest.approx(frame["age"][fit].mean())
    assert info["table"]["rows"] == 120 and info["table"]["columns"] == 7 and len(info["table"]["sha256"]) == 64
    assert info["table"]["columns_dropped"] == ["email"]
    assert info["preprocessing"]["fitted_on_members"] is (fit_on == "members")


def test_statistics_depend_on_the_fit_split_only(tmp_path):
    frame = _frame()
    split = stratified_split((frame["default"] == "yes").to_numpy().astype(int), 0)
    changed = frame.copy()
    changed.loc[split != "train", "balance"] *= 10  # non-members only
    _, base = _prepare(_write(frame, tmp_path / "a.csv"))
    _, other = _prepare(_write(changed, tmp_path / "b.csv"))
    roles = [{c["name"]: c for c in info["table"]["column_roles"]} for info in (base, other)]
    assert roles[0]["balance"]["mean"] == roles[1]["balance"]["mean"]
    _, base_h = _prepare(_write(frame, tmp_path / "c.csv"), fit_on="holdout")
    _, other_h = _prepare(_write(changed, tmp_path / "d.csv"), fit_on="holdout")
    means = [{c["name"]: c for c in i["table"]["column_roles"]}["balance"]["mean"] for i in (base_h, other_h)]
    assert means[0] != means[1]


def test_unseen_category_maps_to_zeros_and_is_recorded(tmp_path):
    frame = _frame()
    split = stratified_split((frame["default"] == "yes").to_numpy().astype(int), 0)
    rows = np.flatnonzero(split == "test")[:3]
    frame.loc[rows, "city"] = "Zug"  # never in the members
    table, info = _prepare(_write(frame, tmp_path / "t.parquet"))
    city = {c["name"]: c for c in info["table"]["column_roles"]}["city"]
    assert "Zug" not in city["levels"] and city["unseen_rows"] == {"train": 0, "holdout": 0, "test": 3}
    x = features(table)
    np.testing.assert_array_equal(x[rows][:, city["features"]], 0)


def test_numbers_as_categories_and_drop_rows(tmp_path):
    frame = _frame()
    frame["age"] = frame["age"].astype(float)
    frame.loc[[4, 9], "balance"] = np.nan
    path = _write(frame, tmp_path / "t.csv")
    table, info = _prepare(path, missing="drop_rows", categorical=["city", "age"])
    assert info["table"]["rows_dropped"] == 2 and info["n"] == 118
    assert 7 * (5000 + 4) not in table.column("example_id").to_pylist()
    age = {c["name"]: c for c in info["table"]["column_roles"]}["age"]
    assert age["role"] == "categorical" and len(age["levels"]) > 10


# ---------------------------------------------------------------------------
# refusals at parse time (validate_config: Snakemake stops before any job)


def _refused(path, pattern, **extra):
    with pytest.raises(ConfigError, match=pattern) as caught:
        _validate(path, **extra)
    assert str(path) in str(caught.value)
    return str(caught.value)


def test_missing_file(tmp_path):
    _refused(tmp_path / "nope.csv", "no such file")


def test_empty_file(tmp_path):
    (tmp_path / "e.csv").write_text("")
    _refused(tmp_path / "e.csv", "empty")


def test_header_only_file(tmp_path):
    (tmp_path / "h.csv").write_text("customer_id,age,default,email\n")
    _refused(tmp_path / "h.csv", "no data rows")


def test_truncated_parquet(tmp_path):
    good = _write(_frame(), tmp_path / "good.parquet")
    data = open(good, "rb").read()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    _refused(tmp_path / "cut.parquet", "cannot be read .*cut off or not Parquet")


def test_broken_gzip(tmp_path):
    data = gzip.compress(_frame().to_csv(index=False).encode())
    (tmp_path / "cut.csv.gz").write_bytes(data[: len(data) // 3])
    _refused(tmp_path / "cut.csv.gz", "cannot be read")


@pytest.mark.parametrize(("key", "value", "column"), [("label", "target", "'target'"), ("id", "cid", "'cid'"),
                                                ("drop", ["mail"], "'mail'")])
def test_unknown_columns_list_the_existing_ones(tmp_path, key, value, column):
    path = _write(_frame(), tmp_path / "t.csv")
    message = _refused(path, column + r".* do(es)? not exist; columns: customer_id, age, balance", **{key: value})
    assert key in message


def test_duplicate_and_empty_column_names(tmp_path):
    (tmp_path / "d.csv").write_text("customer_id,age,age,default\n1,2,3,no\n")
    _refused(tmp_path / "d.csv", "column name 'age' appears twice", drop=[])
    (tmp_path / "e.csv").write_text("customer_id,,default\n1,2,no\n")
    _refused(tmp_path / "e.csv", r"position \[1\] have an empty name", drop=[])


def test_one_class_and_too_small_class(tmp_path):
    frame = _frame()
    frame["default"] = "no"
    _refused(_write(frame, tmp_path / "one.csv"), "label column 'default' has one class")
    frame.loc[:2, "default"] = "yes"
    _refused(_write(frame, tmp_path / "small.csv"), r"class\(es\) \{'yes': 3\} have fewer than 4 rows")


def test_text_in_a_numeric_column_named_at_parse_time(tmp_path):
    frame = _frame().astype({"balance": object})
    frame.loc[7, "balance"] = "n/a yet"
    _refused(_write(frame, tmp_path / "t.csv"), r"column 'balance' is numeric in 119 rows but data row 8 holds "
             r"'n/a yet'", categorical=["city"])


def test_too_many_levels_names_the_key(tmp_path):
    _refused(_write(_frame(), tmp_path / "t.csv"), "column 'city' has 3 distinct values.*max_levels = 2; raise "
             r"config.datasets.credit.max_levels", max_levels=2)


def test_table_too_small_for_batch_size_and_canaries(tmp_path):
    path = _write(_frame(), tmp_path / "t.csv")
    grid = [{"mechanism": ["baseline"], "epochs": [1], "batch_size": [100], "seed": [0]}]
    with pytest.raises(ConfigError, match=rf"batch_size=100 exceeds the 60 members .*table {path}"):
        validate_config({"datasets": {"credit": _params(path)}, "grid": grid})
    with pytest.raises(ConfigError, match=rf"input_canaries: 100 .*table {path} .*which has 30"):
        validate_config({"datasets": {"credit": _params(path)}, "grid": GRID,
                         "metrics": {"canary": {"enabled": True, "input_canaries": 100}}})


def test_names_and_keys_of_table_entries(tmp_path):
    path = _write(_frame(), tmp_path / "t.csv")
    for datasets, pattern in [({"credit": {"path": path}}, "not a built-in dataset"),
                              ({"adult": _params(path)}, "'adult' is a built-in dataset"),
                              ({"digits": {"label": "y"}}, "apply to source: table only"),
                              ({"../x": _params(path)}, "not path-safe"),
                              ({"my/data": _params(path)}, r"'my/data' is not path-safe \(it becomes part of a file "
                               r"path\); a name may contain only letters, digits, '\.', '_', '\+', '-', not "
                               r"starting with '\.'"),
                              ({"credit": {"source": "table", "path": path}}, "needs label")]:
        with pytest.raises(ConfigError, match=pattern):
            validate_config({"datasets": datasets, "grid": GRID})


# ---------------------------------------------------------------------------
# refusals of cells beyond the first block (prepare_dataset, before anything is written)


def _big(tmp_path, n: int = 40_000) -> pd.DataFrame:
    frame = _frame(n)
    frame["city"] = "Bern"
    frame.loc[frame.index % 2 == 0, "city"] = "Basel"
    return frame


def test_late_text_in_a_numeric_column_names_row_and_value(tmp_path):
    frame = _big(tmp_path).astype({"balance": object})
    frame.loc[39_990, "balance"] = "12,5"
    path = _write(frame, tmp_path / "t.csv")
    # beyond the first block, still refused at parse time: every cell is read then (issue 46)
    with pytest.raises(TableError, match=rf"table {path}: column 'balance' is numeric in 39,999 rows but data row "
                                          r"39991 holds '12,5'"):
        inspect_table("credit", _params(path))


def test_missing_cells_name_column_and_first_rows(tmp_path):
    frame = _frame()
    frame.loc[[3, 50], "age"] = np.nan
    path = _write(frame, tmp_path / "t.csv")
    with pytest.raises(TableError, match=rf"table {path}: 1 column\(s\) have missing cells: 'age' \(2 cells, first at "
                                          r"data row\(s\) \[4, 51\]\).*missing: drop_rows"):
        _prepare(path)


def test_late_levels_above_the_limit(tmp_path):
    frame = _big(tmp_path)
    frame.loc[39_000:, "city"] = [f"town{i}" for i in range(len(frame) - 39_000)]
    path = _write(frame, tmp_path / "t.csv")
    # the whole column is read at parse time (issue 35): refused before any job
    with pytest.raises(TableError, match=rf"table {path}: categorical column 'city' has 1002 distinct values in "
                                          r"the file, more than max_levels = 100; raise config.datasets.credit"):
        inspect_table("credit", _params(path))


def test_duplicate_ids_name_value_and_rows(tmp_path):
    frame = _frame()
    frame.loc[10, "customer_id"] = frame.loc[2, "customer_id"]
    path = _write(frame, tmp_path / "t.parquet")
    with pytest.raises(TableError, match=rf"table {path}: id column 'customer_id' holds 35014 twice \(data rows 3 "
                                          r"and 11\)"):
        _prepare(path)


def test_non_finite_number(tmp_path):
    frame = _frame()
    frame.loc[6, "balance"] = np.inf
    path = _write(frame, tmp_path / "t.parquet")
    with pytest.raises(TableError, match=rf"table {path}: column 'balance' data row 7 holds inf"):
        _prepare(path)


# ---------------------------------------------------------------------------
# fit_on for the built-in datasets


def test_fit_on_holdout_for_a_builtin_dataset():
    table, info = prepare_dataset("breast_cancer", {}, {"fit_on": "holdout"})
    x, split = features(table), table.column("split").to_numpy(zero_copy_only=False)
    np.testing.assert_allclose(x[split == "holdout"].mean(axis=0), 0, atol=1e-5)
    assert abs(x[split == "train"].mean(axis=0)).max() > 1e-3
    assert info["preprocessing"]["fit_on"] == "holdout" and not info["preprocessing"]["fitted_on_members"]
    _, default = prepare_dataset("breast_cancer", {}, {})
    assert default["preprocessing"]["fitted_on_members"] is True


# ---------------------------------------------------------------------------
# Adult through the table source vs the built-in reader (real UCI files)

ADULT_NAMES = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
               "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
               "income"]


def test_adult_through_the_table_source_matches_the_builtin_reader(real_adult):  # noqa: F811
    builtin, builtin_info = prepare_dataset("adult", real_adult, {})
    path = real_adult["adult.data"]
    table, info = prepare_dataset("adult_table", {"table": path}, {
        "source": "table", "path": str(path), "format": "csv", "column_names": ADULT_NAMES, "label": "income"})
    members = builtin.filter(pc.equal(builtin.column("split"), "train"))
    # Same rows (adult.data's 32,561, in file order: example_id is the data row in both), the same
    # labels and the same class balance.
    assert info["n"] == members.num_rows == 32_561
    np.testing.assert_array_equal(table.column("example_id").to_numpy(), members.column("example_id").to_numpy())
    np.testing.assert_array_equal(table.column("label").to_numpy(), members.column("label").to_numpy())
    assert info["label_names"] == builtin_info["label_names"] == ["<=50K", ">50K"]
    counts = np.bincount(table.column("label").to_numpy())
    assert counts.tolist() == [int(v) for v in builtin_info["class_counts"]["train"].values()] == [24_720, 7_841]
    # Where the encodings differ, and why: the built-in reader's members are all of adult.data (adult.test
    # is its holdout), so it fits on all 32,561 rows; the table source splits adult.data 50/25/25 and fits
    # on its 16,280 members only. Numbers come first there, in file order here; '?' is a category in both.
    x, x_builtin = features(table), features(members)
    names, builtin_names = info["feature_names"], builtin_info["feature_names"]
    split = table.column("split").to_numpy(zero_copy_only=False)
    age = x_builtin[:, builtin_names.index("age")]  # standardized over all of adult.data
    raw_age = np.array([float(line.split(",")[0]) for line in path.read_text().splitlines() if line.strip()])
    np.testing.assert_allclose(age, (raw_age - raw_age.mean()) / raw_age.std(), rtol=1e-5, atol=1e-5)
    fit = raw_age[split == "train"]
    np.testing.assert_allclose(x[:, names.index("age")], (raw_age - fit.mean()) / fit.std(), rtol=1e-5, atol=1e-5)
    for name in ("workclass=?", "occupation=Tech-support", "sex=Female"):
        np.testing.assert_array_equal(x[:, names.index(name)], x_builtin[:, builtin_names.index(name)])
    # adult.data levels absent from the members (at most the one-row Holand-Netherlands) are all zeros
    assert set(names) - set(builtin_names) == set()
    assert len(builtin_names) - len(names) <= 1


def test_prepare_resources_grow_with_the_table(tmp_path):
    from dataclasses import replace

    from dpaudit.resources import table_prepare_resources as prepare_resources

    sketch = inspect_table("credit", _params(_write(_frame(200), tmp_path / "s.csv")))
    assert sketch.rows == 200 and sketch.features == 2 + 6 + 1  # city: twice its 3 levels seen
    large = replace(sketch, rows=10**7)
    assert prepare_resources(large)["mem_mb"] > prepare_resources(sketch)["mem_mb"] == 1000
    assert prepare_resources(replace(large, features=300))["mem_mb"] > prepare_resources(large)["mem_mb"]
    assert prepare_resources(large, attempt=2)["mem_mb"] == 2 * prepare_resources(large)["mem_mb"]
