"""Which rows of a model trained elsewhere were members, held out, or measure its utility (issue 44).

Either two files of ids (``members``, ``held_out``; optional ``utility``, default the held-out
rows), or a column of the outputs file (``membership_column``: true = member, false = held
out), or such a column of the dataset's own table (``membership_table_column``, a ``source: table``
dataset that drops it from the features: ``table_membership``). An ids file is .csv or .parquet (a column ``example_id`` or ``id``, or its only column) or
.txt (one id per line); ids are compared as trimmed text, as the dataset's ids.parquet keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpaudit.external.outputs_file import ExternalModelError, OutputsFile, sha256_of

__all__ = ["Membership", "membership_of", "read_ids_file"]

_SHOWN = 5


def _listed(ids: np.ndarray) -> str:
    ids = [str(i) for i in ids]
    return ", ".join(ids[:_SHOWN]) + (f", … ({len(ids)} in all)" if len(ids) > _SHOWN else "")


def read_ids_file(path: str | Path, where: str) -> np.ndarray:
    """The ids of an ids file as trimmed text (module docstring), refused when missing, empty or repeated."""
    path = Path(path)
    if not path.is_file():
        raise ExternalModelError(f"{where}: ids file {path} does not exist; write the path of the file (relative to "
                                 "the working directory) or create it")
    name = path.name.lower()
    if name.endswith(".txt"):
        ids = np.array([line.strip() for line in path.read_text().splitlines() if line.strip()], dtype=object)
    elif name.endswith((".csv", ".csv.gz", ".parquet")):
        import pyarrow as pa

        try:
            if name.endswith(".parquet"):
                import pyarrow.parquet as pq

                table = pq.read_table(path)
            else:
                import pyarrow.csv as pa_csv

                header = pa_csv.read_csv(path, read_options=pa_csv.ReadOptions(block_size=1 << 16)).column_names
                table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
                    column_types=dict.fromkeys(header, pa.string())))
        except (pa.ArrowInvalid, OSError) as error:
            raise ExternalModelError(f"{where}: {path} is not a readable ids file ({error}); write one column "
                                     "example_id") from None
        names = table.column_names
        column = next((c for c in ("example_id", "id") if c in names), names[0] if len(names) == 1 else None)
        if column is None:
            raise ExternalModelError(f"{where}: {path} has columns {names} and none is example_id or id; write the "
                                     "ids in a column named example_id")
        raw = table.column(column).to_numpy(zero_copy_only=False)
        if raw.dtype.kind == "f":
            raw = raw.astype(np.int64)
        ids = np.char.strip(raw.astype(str)).astype(object)
    else:
        raise ExternalModelError(f"{where}: {path}: unknown ids file type; write .csv, .parquet or .txt")
    if not ids.size:
        raise ExternalModelError(f"{where}: ids file {path} holds no ids; write one id per row")
    unique, counts = np.unique(ids.astype(str), return_counts=True)
    if (counts > 1).any():
        raise ExternalModelError(f"{where}: ids file {path} repeats id(s) {_listed(unique[counts > 1])}; write each "
                                 "id once")
    return ids


def table_membership(params: Mapping, column: str, dataset: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids as text, 1 member / 0 held out / -1 neither) of every data row of the dataset's table, from its
    column ``column`` (true / false / empty), read with the dataset's own CSV settings; the ids are its
    ``id`` column's, else the 0-based data rows (the ids ``prepare_dataset`` gives)."""
    from dpaudit.data.table import _open_csv, _spec, table_format
    from dpaudit.external.outputs_file import _membership

    where = f"{where}.membership_table_column"
    if params.get("source") != "table":
        raise ExternalModelError(f"{where}: dataset {dataset} is not a table (source: table); give members and "
                                 "held_out ids files, or membership_column of the outputs file")
    if column not in (params.get("drop") or []):
        raise ExternalModelError(f"{where}: column {column!r} must not be a feature of dataset {dataset}; add it to "
                                 f"config.datasets.{dataset}.drop")
    spec, path = _spec(params), Path(params["path"])
    names = [column, *([params["id"]] if params.get("id") else [])]
    try:
        if table_format(path, spec.get("format")) == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(str(path), columns=names)
        else:
            import pyarrow as pa

            table = _open_csv(path, spec, types=dict.fromkeys(names, pa.string()), include=names).read_all()
    except (OSError, ValueError, KeyError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise ExternalModelError(f"{where}: column {column!r} of {path} cannot be read ({error}); name a column of "
                                 "the table") from None
    roles = _membership(table.column(column).to_numpy(zero_copy_only=False), column, path, where)
    if params.get("id"):
        ids = np.char.strip(table.column(params["id"]).to_numpy(zero_copy_only=False).astype(str)).astype(object)
    else:
        ids = np.arange(len(roles)).astype(str).astype(object)
    return ids, roles


@dataclass(frozen=True)
class Membership:
    """Text ids of the members, the held-out rows and the utility rows (None: the held-out rows), with
    what each came from (``sources``: a file with its sha256, or the outputs file's column)."""

    members: np.ndarray
    held_out: np.ndarray
    utility: np.ndarray | None
    sources: dict = field(default_factory=dict)


def membership_of(entry: Mapping, outputs: OutputsFile | None, where: str, table: Mapping | None = None,
                  dataset: str = "") -> Membership:
    """The membership an ``external_models`` entry states, checked against its outputs file (None: a model
    file, scored on every row of the dataset); ``table``: the dataset's params (its table's column)."""
    files = [key for key in ("members", "held_out") if key in entry]
    column = entry.get("membership_column")
    stated = [key for key in ("membership_column", "membership_table_column") if key in entry]
    if len(stated) + bool(files) > 1:
        raise ExternalModelError(f"{where}: give one of membership_column, membership_table_column or members and "
                                 "held_out files")
    if not stated and len(files) < 2:
        raise ExternalModelError(f"{where}: say which rows were members and which were held out: members: <ids file> "
                                 "and held_out: <ids file>, or membership_column: <column of the outputs file>, or "
                                 "membership_table_column: <column of the dataset's table>")
    if "membership_table_column" in entry:
        if "utility" in entry:
            raise ExternalModelError(f"{where}.utility: with membership_table_column the utility rows are the held-out "
                                     "ones; remove utility or give members and held_out files")
        name = entry["membership_table_column"]
        ids, roles = table_membership(table or {}, name, dataset, where)
        members, held_out = ids[roles == 1], ids[roles == 0]
        source = {"table_column": name, "file": str((table or {}).get("path"))}
        _known(members, held_out, None, outputs, where, name)
        _enough(members, held_out, where)
        return Membership(members=members, held_out=held_out, utility=None,
                          sources={"members": source, "held_out": source})
    if column is not None and outputs is None:
        raise ExternalModelError(f"{where}.membership_column: a model file has no columns; give members and held_out "
                                 "ids files")
    if column is not None:
        if "utility" in entry:
            raise ExternalModelError(f"{where}.utility: with membership_column the utility rows are the held-out "
                                     "ones; remove utility or give members and held_out files")
        membership = outputs.membership
        members, held_out = outputs.ids[membership == 1], outputs.ids[membership == 0]
        sources = {"members": {"column": column, "file": outputs.path},
                   "held_out": {"column": column, "file": outputs.path}}
        utility = None
    else:
        members = read_ids_file(entry["members"], f"{where}.members")
        held_out = read_ids_file(entry["held_out"], f"{where}.held_out")
        utility = read_ids_file(entry["utility"], f"{where}.utility") if "utility" in entry else None
        sources = {key: {"file": str(entry[key]), "sha256": sha256_of(entry[key])}
                   for key in ("members", "held_out", "utility") if key in entry}
        both = np.intersect1d(members.astype(str), held_out.astype(str))
        if both.size:
            raise ExternalModelError(f"{where}: {both.size} id(s) are both members ({entry['members']}) and held out "
                                     f"({entry['held_out']}): {_listed(both)}; a row is either in the training data "
                                     "or not: remove them from one file")
        if utility is not None:
            both = np.intersect1d(members.astype(str), utility.astype(str))
            if both.size:
                raise ExternalModelError(f"{where}: {both.size} member id(s) are also utility rows ({entry['utility']}): "
                                         f"{_listed(both)}; test accuracy needs rows the model did not train on")
            both = np.intersect1d(held_out.astype(str), utility.astype(str))
            if both.size:  # a row is scored once: as a non-member of the attacks or as a utility row
                raise ExternalModelError(f"{where}: {both.size} held-out id(s) are also utility rows "
                                         f"({entry['utility']}): {_listed(both)}; leave utility out to measure test "
                                         "accuracy on the held-out rows, or give rows apart from them")
        _known(members, held_out, utility, outputs, where, None, entry)
    _enough(members, held_out, where)
    return Membership(members=members, held_out=held_out, utility=utility, sources=sources)


def _known(members, held_out, utility, outputs: OutputsFile | None, where: str, column: str | None,
           entry: Mapping | None = None) -> None:
    """Every stated id is a row of the outputs file (a model file is scored on every row)."""
    if outputs is None:
        return
    known = outputs.ids.astype(str)
    for key, ids in (("members", members), ("held_out", held_out), ("utility", utility)):
        if ids is None:
            continue
        absent = ids[~np.isin(ids.astype(str), known)]
        if absent.size:
            origin = f"column {column!r} of the dataset's table" if column else entry[key]
            raise ExternalModelError(f"{where}.{key}: {absent.size} id(s) of {origin} are not in the outputs "
                                     f"file {outputs.path}: {_listed(absent)}; write the model's outputs for them "
                                     "or remove them from the ids file")


def _enough(members: np.ndarray, held_out: np.ndarray, where: str) -> None:
    for role, ids in (("members", members), ("held-out rows", held_out)):
        if ids.size < 2:
            raise ExternalModelError(f"{where}: {ids.size} {role}; the membership attacks need at least 2 members and "
                                     "2 held-out rows")
