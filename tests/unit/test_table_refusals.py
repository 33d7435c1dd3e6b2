"""The table source's issue-35 cases: types from all cells, labels by case, overflow, empty
columns, separators, and ids that are text or out of the int64 range."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from dpaudit.data.datasets import prepare_dataset, prepare_dataset_ids
from dpaudit.data.table import TableError
from dpaudit.data.table_columns import id_kind
from tests.unit.test_table import _frame, _params, _prepare, _refused, _write


def test_a_typo_in_the_first_rows_of_a_numeric_column_is_refused_not_one_hot_encoded(tmp_path):
    frame = _frame().astype({"age": object})
    frame.loc[41, "age"] = "thirty"  # data row 42
    path = _write(frame, tmp_path / "t.csv")
    _refused(path, r"column 'age' is numeric in 119 rows but data row 42 holds 'thirty'; fix the cell, or list "
                   r"the column under categorical")


def test_a_typo_in_a_continuous_column_is_named_not_a_max_levels_refusal(tmp_path):
    frame = _frame().astype({"balance": object})
    frame.loc[100, "balance"] = "1.234,5"
    message = _refused(_write(frame, tmp_path / "t.csv"), r"column 'balance' is numeric in 119 rows but data row "
                                                          r"101 holds '1\.234,5'")
    assert "max_levels" not in message


def test_a_typo_at_row_50000_of_a_larger_file_is_refused_at_parse_time_with_the_same_words(tmp_path):
    frame = _frame(60_000).astype({"age": object})
    frame["city"] = np.where(np.arange(len(frame)) % 2, "Bern", "Basel")
    frame.loc[49_999, "age"] = "thirty"
    path = _write(frame, tmp_path / "t.csv")
    # beyond the 1 MB pyarrow infers types from, and found before any job: every cell is read (issue 46)
    _refused(path, r"column 'age' is numeric in 59,999 rows but data row 50000 holds 'thirty'")


def test_numbers_with_a_minority_of_text_stay_categorical(tmp_path):
    frame = _frame()
    frame["city"] = np.where(np.arange(len(frame)) % 10 == 0, "unknown", "12")  # 90 % numbers: below the 95 % bound
    table, info = _prepare(_write(frame, tmp_path / "t.csv"))
    city = {c["name"]: c for c in info["table"]["column_roles"]}["city"]
    assert city["role"] == "categorical" and set(city["levels"]) == {"12", "unknown"}


def test_labels_differing_only_in_case_are_refused_naming_both_unless_kept_apart(tmp_path):
    frame = _frame()
    frame["default"] = np.where(np.arange(len(frame)) % 4 == 0, "YES ", frame["default"])
    frame.loc[frame["default"] == "yes", "default"] = "yes"
    path = _write(frame, tmp_path / "t.csv")
    _refused(path, r"label column 'default' holds 'YES' and 'yes', which differ only in case; write them one way in "
                   r"the file, or write config.datasets.credit.label_case: distinct")
    _, info = _prepare(path, label_case="distinct")
    assert info["label_names"] == ["YES", "no", "yes"]  # trimmed: "YES " is "YES"


def test_values_that_overflow_the_standard_deviation_are_refused_naming_the_fix(tmp_path):
    frame = _frame()
    frame["balance"] = np.linspace(1e301, 5e301, len(frame))
    path = _write(frame, tmp_path / "t.csv")
    with pytest.raises(TableError, match=rf"table {path}: column 'balance' cannot be standardized in float64 .*"
                                          r"rescale the column .* or list it under drop"):
        _prepare(path)


@pytest.mark.parametrize("missing", ["refuse", "drop_rows"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_an_all_missing_column_is_refused_as_such(tmp_path, missing, suffix):
    frame = _frame()
    frame["notes"] = np.nan
    _refused(_write(frame, tmp_path / f"t{suffix}"), r"column 'notes' is empty in all 120 rows; list it under drop",
             missing=missing)


def test_a_semicolon_csv_is_refused_naming_the_key_and_read_with_it(tmp_path):
    frame = _frame()
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False, sep=";")
    _refused(str(path), r"the header is one column 'customer_id;age;.*': the file looks separated by ';', not by "
                        r"','; write config.datasets.credit.delimiter: \";\"")
    table, info = _prepare(str(path), delimiter=";")
    assert info["n"] == 120 and info["label_names"] == ["no", "yes"] and info["table"]["delimiter"] == ";"
    frame.to_csv(path, index=False, sep="\t")
    _refused(str(path), r"the file looks separated by '\\t', not by ','; write config.datasets.credit.delimiter: "
                        r'"\\t"')


def test_text_ids_are_kept_beside_the_examples(tmp_path):
    frame = _frame()
    frame["customer_id"] = [f"r{i:05d}" for i in range(len(frame))]
    frame = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    path = _write(frame, tmp_path / "t.csv")
    table, info, ids = prepare_dataset_ids("credit", {"table": path}, _params(path))
    assert table.column("example_id").to_pylist() == list(range(120))  # the 0-based data row
    assert ids.column("example_id").to_pylist() == list(range(120))
    assert ids.column("id").to_pylist() == frame["customer_id"].tolist()
    assert info["ids"]["kind"] == "the user's text ids"
    role = {c["name"]: c for c in info["table"]["column_roles"]}["customer_id"]
    assert role["role"] == "id" and role["ids"] == "text" and "ids.parquet" in role["encoding"]
    frame.loc[9, "customer_id"] = frame.loc[2, "customer_id"]
    dup = _write(frame, tmp_path / "dup.csv")
    with pytest.raises(TableError, match=rf"id column 'customer_id' holds '{frame.loc[2, 'customer_id']}' twice "
                                          r"\(data rows 3 and 10\)"):
        prepare_dataset("credit", {"table": dup}, _params(dup))


def test_integer_ids_out_of_the_int64_range_are_named_and_mapped(tmp_path):
    frame = _frame()
    big = [str(2**63 + i) for i in range(len(frame))]
    frame["customer_id"] = big
    path = _write(frame, tmp_path / "t.csv")
    table, info, ids = prepare_dataset_ids("credit", {"table": path}, _params(path))
    assert ids.column("id").to_pylist() == big
    role = {c["name"]: c for c in info["table"]["column_roles"]}["customer_id"]
    assert "120 of them integers out of the int64 range" in role["encoding"]
    # integer ids in range stay the example_id, their text in ids.parquet
    path = _write(_frame(), tmp_path / "ok.csv")
    table, info, ids = prepare_dataset_ids("credit", {"table": path}, _params(path))
    assert ids.column("id").to_pylist() == [str(i) for i in table.column("example_id").to_pylist()]
    assert info["ids"]["kind"] == "the example_id itself"


def test_id_kind_bounds_are_the_int64_range():
    import pyarrow as pa

    assert id_kind(pa.array(["-9223372036854775808", "9223372036854775807", "7", None])) == ("integer", 0)
    assert id_kind(pa.array(["9223372036854775808", "-9223372036854775809", "1"])) == ("text", 2)
    assert id_kind(pa.array(["r1", "99999999999999999999"])) == ("text", 1)
    assert id_kind(pc.cast(pa.array([1, 2]), pa.string())) == ("integer", 0)


def test_a_parquet_string_column_of_numbers_keeps_its_type(tmp_path):
    # issue 46: zip codes typed as string in the Parquet file stay text (categorical, padding kept),
    # recorded; never re-typed to numbers and standardized
    frame = _frame()
    frame["zip"] = np.where(np.arange(len(frame)) % 3 == 0, "00037", np.where(np.arange(len(frame)) % 3 == 1,
                                                                            "08001", "37"))
    table, info = _prepare(_write(frame, tmp_path / "t.parquet"))
    zip_code = {c["name"]: c for c in info["table"]["column_roles"]}["zip"]
    assert zip_code["role"] == "categorical" and zip_code["levels"] == ["00037", "08001", "37"]
    assert [d for d in info["table"]["decisions"] if d.startswith("column 'zip': a string column of the Parquet "
                                                                 "file whose cells are all numbers, kept as text")]
    # more distinct values than max_levels: refused naming the file's type, not read as numbers
    frame["balance"] = [f"{v:.3f}" for v in frame["balance"]]
    _refused(_write(frame, tmp_path / "many.parquet"), r"column 'balance' is a string column of the Parquet file "
             r"whose 120 distinct values are all numbers, more than max_levels = 100; its type is kept \(never read "
             r"as numbers\): write it as a number column in the file")
    # not under a categorical list: refused, never cast
    _refused(_write(frame, tmp_path / "many.parquet"), r"column 'balance' is a string column of the Parquet file and "
             r"not under categorical; add it to categorical, or write it as a number column", categorical=["city"])
