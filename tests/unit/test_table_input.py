"""Issue 46: a user's table read as written. Nothing re-typed behind the user's back (numbers with
separators, labels equal as numbers, padded ids, Parquet strings), every refusal before any job
(missing: drop_rows included), encodings, and refusals naming the right column, row and value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpaudit.config import ConfigError, validate_config
from dpaudit.data.datasets import prepare_dataset_ids
from dpaudit.data.examples import features
from dpaudit.data.table import TableError, inspect_table
from tests.unit.test_table import GRID, _frame, _params, _prepare, _refused, _write


def _roles(info) -> dict:
    return {c["name"]: c for c in info["table"]["column_roles"]}


def _mass(n: int = 120, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(2700, 6300, n)


# ---------------------------------------------------------------------------
# numbers written with separators: refused naming the key, read with it, never one-hot


def test_thousands_separators_in_every_row_are_refused_naming_the_keys_then_read_with_thousands(tmp_path):
    frame = _frame()
    mass = _mass()
    frame["body_mass"] = [f"{m:,}" for m in mass]  # "3,750": quoted by the CSV writer
    path = _write(frame, tmp_path / "t.csv")
    message = _refused(path, r"column 'body_mass' holds numbers written with ',' \(data row 1: '[0-9],[0-9]{3}'\); "
                             r'write config.datasets.credit.thousands: "," if .,. separates thousands \(3,750 = 3750\) '
                             r'or config.datasets.credit.decimal: "," if it is the decimal mark')
    assert "max_levels" not in message and "one-hot" not in message
    table, info = _prepare(path, thousands=",")
    role = _roles(info)["body_mass"]
    assert role["role"] == "numeric" and role["encoding"] == "standardized"
    assert "body_mass=3,750" not in info["feature_names"] and info["d"] == 7  # one feature, not 72 levels
    split = table.column("split").to_numpy(zero_copy_only=False)
    assert role["mean"] == pytest.approx(mass[split == "train"].mean(), rel=1e-12)  # oracle: the integers written
    assert info["table"]["thousands"] == "," and info["table"]["decimal"] == "."
    assert any(d.startswith("column 'body_mass': text in pyarrow's first rows, but every filled cell is a number "
                            "(written with decimal '.', thousands ',')") for d in info["table"]["decisions"])


def test_decimal_commas_in_a_semicolon_file_are_refused_naming_decimal_then_read_as_numbers(tmp_path):
    frame = _frame()
    bill = np.random.default_rng(4).normal(44.0, 5.0, len(frame)).round(1)
    frame["bill"] = [f"{b:.1f}".replace(".", ",") for b in bill]
    frame["balance"] = [f"{b:.3f}".replace(".", ",") for b in frame["balance"]]
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False, sep=";")
    message = _refused(str(path), r"column 'balance' holds numbers written with a decimal comma \(data row 1: "
                                  r"'[0-9]+,[0-9]+'\), not numbers as the table's keys read them \(decimal '\.', no "
                                  r'thousands separator\); write config.datasets.credit.decimal: ","', delimiter=";")
    assert "column 'bill' holds numbers written with a decimal comma" in message and "max_levels" not in message
    # raising max_levels, the advice of a max_levels message, is not what makes them numbers: it is still refused
    _refused(str(path), r"'bill' holds numbers written with a decimal comma", delimiter=";", max_levels=1000)
    table, info = _prepare(str(path), delimiter=";", decimal=",")
    assert info["d"] == 7 and info["feature_names"][:3] == ["age", "balance", "city=Basel"]  # bill: 1 feature
    split = table.column("split").to_numpy(zero_copy_only=False)
    role = _roles(info)["bill"]
    assert role["role"] == "numeric" and role["mean"] == pytest.approx(bill[split == "train"].mean(), rel=1e-12)
    x = features(table)
    expected = (bill - bill[split == "train"].mean()) / bill[split == "train"].std()
    np.testing.assert_allclose(x[:, role["features"][0]], expected, rtol=1e-5, atol=1e-5)


def test_european_grouping_names_both_keys_and_reads_with_them(tmp_path):
    frame = _frame()
    values = np.random.default_rng(5).uniform(500, 9000, len(frame)).round(2)
    frame["income"] = [f"{v:,.2f}".replace(",", " ").replace(".", ",").replace(" ", ".") for v in values]
    frame["balance"] = [f"{b:.3f}".replace(".", ",") for b in frame["balance"]]
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False, sep=";")
    _refused(str(path), r"column 'income' holds numbers written with a decimal comma and '\.' between thousands .*write "
                        r'config.datasets.credit.decimal: "," and config.datasets.credit.thousands: "\."',
             delimiter=";")
    table, info = _prepare(str(path), delimiter=";", decimal=",", thousands=".")
    split = table.column("split").to_numpy(zero_copy_only=False)
    assert _roles(info)["income"]["mean"] == pytest.approx(values[split == "train"].mean(), rel=1e-12)


def test_a_separator_beyond_the_first_block_of_a_numeric_column_names_the_key(tmp_path):
    frame = _frame(60_000)
    frame["city"] = np.where(np.arange(len(frame)) % 2, "Bern", "Basel")
    mass = np.where(np.arange(len(frame)) < 50_000, 950, 1250)
    frame["body_mass"] = [f"{m:,}" for m in mass]  # 950 in pyarrow's first rows (int64), "1,250" below
    path = _write(frame, tmp_path / "t.csv")
    _refused(path, r"column 'body_mass' holds numbers written with ',' \(data row 50001: '1,250'\); write "
                   r'config.datasets.credit.thousands: ","')
    table, info = _prepare(path, thousands=",")
    assert _roles(info)["body_mass"]["mean"] == pytest.approx(
        mass[table.column("split").to_numpy(zero_copy_only=False) == "train"].mean(), rel=1e-12)


def test_a_declared_decimal_comma_refuses_a_cell_written_otherwise_naming_its_row(tmp_path):
    frame = _frame()
    frame["bill"] = ["39,1"] * 60 + ["40,5"] * 59 + ["41.5"]
    frame["balance"] = [f"{b:.3f}".replace(".", ",") for b in frame["balance"]]
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False, sep=";")
    message = _refused(str(path), r"column 'bill' holds numbers written with a decimal point \(data row 120: '41\.5'\), "
                                  r"but the table's numbers are declared as decimal ',', no thousands separator; write "
                                  r"the file's numbers one way", delimiter=";", decimal=",")
    assert "'balance'" not in message
    frame.loc[119, "bill"] = "41,5 cm"
    frame.to_csv(path, index=False, sep=";")
    _refused(str(path), r"column 'bill' is numeric in 119 rows but data row 120 holds '41,5 cm'", delimiter=";",
             decimal=",")


# ---------------------------------------------------------------------------
# labels equal as numbers but written differently


def test_labels_equal_as_numbers_are_refused_naming_rows_and_merged_with_the_key(tmp_path):
    frame = _frame()
    frame["default"] = np.where(np.arange(len(frame)) % 2, "1", "0")
    frame.loc[[6, 40, 41], "default"] = "1.0"  # data rows 7, 41, 42
    frame.loc[9, "default"] = "0.00"
    path = _write(frame, tmp_path / "t.csv")
    _refused(path, r"label column 'default' holds '0' \(first at data row 1\) and '0\.00' \(first at data row 10\); "
                   r"'1' \(first at data row 2\) and '1\.0' \(first at data row 7\), equal as numbers but written "
                   r"differently; write them one way in the file, or write config.datasets.credit.label_numbers: merge")
    table, info = _prepare(path, label_numbers="merge")
    assert info["label_names"] == ["0", "1"] and info["classes"] == 2
    y = table.column("label").to_numpy()
    written = frame["default"].astype(float).to_numpy().astype(int)
    np.testing.assert_array_equal(y, written)  # oracle: the numbers written
    assert info["table"]["label_merged"] == {"0": "0", "0.00": "0", "1": "1", "1.0": "1"}
    assert any("label_numbers: merge" in d and "'1.0' -> '1'" in d for d in info["table"]["decisions"])


def test_a_continuous_label_is_asked_whether_it_is_a_regression_target(tmp_path):
    frame = _frame(236)
    frame["default"] = np.random.default_rng(2).normal(50.0, 10.0, len(frame)).round(0)
    distinct = frame["default"].nunique()
    assert distinct > 20
    message = _refused(_write(frame, tmp_path / "t.csv"), rf"label column 'default' has {distinct} distinct values in "
                                                          r"236 rows \([0-9]+ with fewer than 4 rows\): is this a "
                                                          r"regression target\?")
    assert "{" not in message  # no dict of classes


def test_many_rare_classes_of_text_are_listed_briefly(tmp_path):
    frame = _frame()
    frame["default"] = ["no"] * 60 + ["yes"] * 40 + [f"rare{i}" for i in range(20)]
    message = _refused(_write(frame, tmp_path / "t.csv"), r"class\(es\) \{'rare0': 1, .*\} and 15 more have fewer "
                                                          r"than 4 rows")
    assert message.count("'rare") == 5


# ---------------------------------------------------------------------------
# ids kept as written


def test_zero_padded_ids_are_text_kept_as_written_and_judged_as_written(tmp_path):
    frame = _frame()
    frame["customer_id"] = [f"{i:06d}" for i in range(len(frame))]
    frame.loc[17, "customer_id"] = "17"  # beside "000017" (row 18): two ids as written
    path = _write(frame, tmp_path / "t.csv")
    table, info, ids = prepare_dataset_ids("credit", {"table": path}, _params(path))
    assert ids.column("id").to_pylist() == frame["customer_id"].tolist()  # "000042", padding kept
    assert table.column("example_id").to_pylist() == list(range(120))
    assert _roles(info)["customer_id"]["ids"] == "text"
    assert any(d.startswith("id column 'customer_id': ids kept as written, as text (e.g. '000000')")
               for d in info["table"]["decisions"])
    frame.loc[30, "customer_id"] = "000016"
    dup = _write(frame, tmp_path / "dup.csv")
    _refused(dup, r"id column 'customer_id' holds '000016' twice \(data rows 17 and 31\); ids must be unique")


def test_a_parquet_string_id_column_stays_text(tmp_path):
    frame = _frame()
    frame["customer_id"] = [str(i) for i in range(1000, 1120)]
    path = _write(frame, tmp_path / "t.parquet")
    assert inspect_table("credit", _params(path)).id_kind == "text"
    frame["customer_id"] = frame["customer_id"].astype(int)
    assert inspect_table("credit", _params(_write(frame, tmp_path / "int.parquet"))).id_kind == "integer"


# ---------------------------------------------------------------------------
# missing: drop_rows keeps every parse-time check


def _holes(n_missing: int) -> pd.DataFrame:
    frame = _frame()
    frame.loc[np.arange(n_missing) * (120 // n_missing), "balance"] = np.nan
    return frame


def test_drop_rows_too_few_non_members_for_the_input_canaries_is_refused_at_parse_time(tmp_path):
    path = _write(_holes(60), tmp_path / "t.csv")
    sketch = inspect_table("credit", _params(path, missing="drop_rows"))
    assert sketch.rows == 120 and sketch.rows_kept == 60
    # oracle: the holdout split prepare_dataset makes of the kept rows
    table, info = _prepare(path, missing="drop_rows")
    holdout = int((table.column("split").to_numpy(zero_copy_only=False) == "holdout").sum())
    members = int((table.column("split").to_numpy(zero_copy_only=False) == "train").sum())
    assert info["table"]["rows_dropped"] == 60 and holdout == 15 and members == 30
    canaries = {"metrics": {"canary": {"enabled": True, "input_canaries": holdout + 1}}}
    with pytest.raises(ConfigError, match=rf"config.metrics.canary.input_canaries: {holdout + 1} input canaries are "
                                          rf"drawn from the non-members of table {path} \(dataset credit\), which has "
                                          rf"{holdout}; write input_canaries <= {holdout}"):
        validate_config({"datasets": {"credit": _params(path, missing="drop_rows")}, "grid": GRID, **canaries})
    validate_config({"datasets": {"credit": _params(path, missing="drop_rows")}, "grid": GRID,
                     "metrics": {"canary": {"enabled": True, "input_canaries": holdout}}})
    grid = [{"mechanism": ["baseline"], "epochs": [1], "batch_size": [members + 1], "seed": [0]}]
    with pytest.raises(ConfigError, match=rf"batch_size={members + 1} exceeds the {members} members"):
        validate_config({"datasets": {"credit": _params(path, missing="drop_rows")}, "grid": grid})


def test_every_column_with_missing_cells_is_named_with_its_count(tmp_path):
    frame = _frame()
    frame.loc[[3, 50], "age"] = np.nan
    frame.loc[[7], "balance"] = np.nan
    frame.loc[[1, 2, 3, 4, 5, 6, 9], "city"] = ""
    for k in range(4):
        frame[f"extra{k}"] = 1.0
        frame.loc[100 + k, f"extra{k}"] = np.nan
    message = _refused(_write(frame, tmp_path / "t.csv"), r"7 column\(s\) have missing cells: 'age' \(2 cells, first at "
                                                          r"data row\(s\) \[4, 51\]\), 'balance' \(1 cell, first at "
                                                          r"data row\(s\) \[8\]\), 'city' \(7 cells, first at data "
                                                          r"row\(s\) \[2, 3, 4, 5, 6\]\), 'extra0' .*, 'extra1' .* and 2 "
                                                          r"more column\(s\); fill them, or write config.datasets."
                                                          r"credit.missing: drop_rows")
    assert "extra2" not in message


# ---------------------------------------------------------------------------
# encodings


def _latin1(tmp_path) -> str:
    frame = _frame()
    frame["city"] = np.where(np.arange(len(frame)) % 2, "Zürich", "Genève")
    path = tmp_path / "t.csv"
    path.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    return str(path)


@pytest.mark.parametrize("extra", [{}, {"categorical": ["city"]}])
def test_a_latin1_file_is_refused_naming_row_column_byte_and_key(tmp_path, extra):
    path = _latin1(tmp_path)
    message = _refused(path, r"not utf-8 text: data row 1, column 'city' holds byte 0xe8 \(byte [0-9]+ of the file\) "
                             r"after 'Gen'; write config.datasets.credit.encoding: the file's encoding \(e.g. cp1252",
                       **extra)
    assert "binary" not in message and "Arrow" not in message


def test_a_latin1_file_is_read_with_its_encoding_and_recorded(tmp_path):
    path = _latin1(tmp_path)
    _, info = _prepare(path, encoding="latin-1")
    assert _roles(info)["city"]["levels"] == ["Genève", "Zürich"] and info["table"]["encoding"] == "latin-1"
    _, cp1252 = _prepare(path, encoding="cp1252")
    assert _roles(cp1252)["city"]["levels"] == ["Genève", "Zürich"]


def test_utf16_is_named_and_read_with_the_key(tmp_path):
    frame = _frame()
    path = tmp_path / "t.csv"
    path.write_bytes(frame.to_csv(index=False).encode("utf-16"))
    message = _refused(str(path), r"the file is UTF-16 text \(it starts with the byte-order mark ff fe\); write "
                                  r"config.datasets.credit.encoding: utf-16")
    assert "\0" not in message
    table, info = _prepare(str(path), encoding="utf-16")
    assert info["n"] == 120 and info["label_names"] == ["no", "yes"]
    path.write_bytes(frame.to_csv(index=False).encode("utf-16-le"))  # no byte-order mark
    _refused(str(path), r"the header holds a NUL byte .*write config.datasets.credit.encoding: utf-16-le")


def test_a_bad_byte_late_in_the_file_names_its_row(tmp_path):
    frame = _frame(2000)
    path = tmp_path / "t.csv"
    data = frame.to_csv(index=False).encode()
    lines = data.split(b"\n")
    lines[1500] = lines[1500].replace(b"@example.org", b"@exampl\xe9.org")  # data row 1500, column email
    path.write_bytes(b"\n".join(lines))
    _refused(str(path), r"data row 1,500, column 'email' holds byte 0xe9")  # a dropped column's cell: still read
    with pytest.raises(ConfigError, match="is not a known character encoding; write config.datasets.credit.encoding"):
        _validate_encoding(str(path), "klingon")


def _validate_encoding(path, encoding):
    return validate_config({"datasets": {"credit": _params(path, encoding=encoding)}, "grid": GRID})


def test_csv_keys_on_a_parquet_file_are_refused(tmp_path):
    path = _write(_frame(), tmp_path / "t.parquet")
    _refused(path, r"key\(s\) decimal say how a CSV file is written; a Parquet file's cells are typed", decimal=",")


# ---------------------------------------------------------------------------
# refusals name the right place


def test_a_late_bad_cell_names_its_column_row_and_value_whatever_is_dropped(tmp_path):
    frame = _frame(60_000).astype({"balance": object})
    frame["city"] = np.where(np.arange(len(frame)) % 2, "Bern", "Basel")
    frame.loc[59_000, "balance"] = "n/a yet"
    path = _write(frame, tmp_path / "t.csv")
    for drop in (["email"], ["email", "age"]):  # dropped columns before the bad one, in the file's order
        _refused(path, r"column 'balance' is numeric in 59,999 rows but data row 59001 holds 'n/a yet'", drop=drop)


def test_prepare_names_the_column_of_a_conversion_error_behind_dropped_columns(tmp_path):
    from dpaudit.data.table_prepare import _batches

    (tmp_path / "t.csv").write_text("a,b,c\n1,2,3\n4,5,x\n")
    spec = {"delimiter": ",", "encoding": "utf-8"}
    with pytest.raises(TableError, match=r"column 'c' holds numbers in its first rows but text in 1 of its 2 filled "
                                         r"rows \(first: data row 2 holds 'x'\)"):
        list(_batches(tmp_path / "t.csv", "csv", spec, {"c": pa.float64()}, ["c"], "W", ("a", "b", "c")))


def test_an_out_of_range_value_names_its_row(tmp_path):
    frame = _frame()
    frame["balance"] = np.linspace(1.0, 2.0, len(frame))
    frame.loc[83, "balance"] = 1.7e308
    path = _write(frame, tmp_path / "t.csv")
    with pytest.raises(TableError, match=r"column 'balance' cannot be standardized in float64 .*data row 84 holds "
                                         r"1\.7e\+308\); rescale the column"):
        _prepare(path)


def _empty_first(tmp_path, later: str) -> str:
    frame = _frame(60_000)
    frame["city"] = np.where(np.arange(len(frame)) % 2, "Bern", "Basel")
    frame["notes"] = np.where(np.arange(len(frame)) < 50_000, "", later)
    return _write(frame, tmp_path / "t.csv")


def test_a_column_empty_in_its_first_rows_is_named_truthfully(tmp_path):
    path = _empty_first(tmp_path, "late")
    message = _refused(path, r"column 'notes' is empty in its first [0-9,]+ rows and holds text in 10,000 of its "
                             r"10,000 filled rows \(first: data row 50001, 'late'\); list it under categorical",
                       categorical=["city"], missing="drop_rows")
    assert "numbers in its first rows" not in message
    sketch = inspect_table("credit", _params(path, missing="drop_rows"))  # categorical: auto
    assert sketch.roles["notes"] == "categorical"
    assert any(d.startswith("column 'notes': empty in its first") and d.endswith("categorical")
               for d in sketch.decisions)
    assert inspect_table("credit", _params(_empty_first(tmp_path, "12.5"), missing="drop_rows")).roles["notes"] == \
        "numeric"


def test_a_boolean_column_with_another_word_later_is_refused_before_any_job(tmp_path):
    frame = _frame(60_000)
    frame["city"] = np.where(np.arange(len(frame)) % 2, "Bern", "Basel")
    frame = frame.astype({"premium": object})
    frame.loc[55_000, "premium"] = "maybe"
    _refused(_write(frame, tmp_path / "t.csv"), r"column 'premium' is true/false in its first rows but data row "
                                                r"55001 holds 'maybe'")


def test_csv_numbers_with_leading_zeros_are_recorded_and_kept_as_written_under_categorical(tmp_path):
    frame = _frame()
    frame["zip"] = np.where(np.arange(len(frame)) % 2, "00037", "08001")
    path = _write(frame, tmp_path / "t.csv")
    _, info = _prepare(path)
    assert _roles(info)["zip"]["role"] == "numeric"  # a CSV has no types: digits are numbers ...
    assert "column 'zip': numbers written with leading zeros (data row 1: '08001') read as numbers; list it under " \
           "categorical to keep them as written" in " ".join(info["table"]["decisions"])  # ... and it is said
    _, kept = _prepare(path, categorical=["city", "zip"])
    assert _roles(kept)["zip"]["levels"] == ["00037", "08001"]
    assert not [d for d in kept["table"]["decisions"] if "leading zeros" in d]
