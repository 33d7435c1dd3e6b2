"""Parse-time checks of ``external_models`` (issue 44): everything that can be refused before any job.

Run by ``dpaudit.config.validate_config``: the entry's dataset is configured, its outputs file and
ids files exist and read (``outputs_file``, ``membership``: NaN or inf outputs, probabilities not
summing to 1, members also held out, ids missing from the outputs file), the values per row match
the dataset's classes where those are known before it is prepared, every id is one of the
dataset's where its ids are known before it is prepared (the bundled and generated datasets:
0 … n−1; a table: its id column, else its 0-based rows; .npz arrays: their ids, else 0 … N−1),
the promise's δ is below 1/n members, and a reference recipe can be DP-matched to the promise
(``recipe``). The job (``importer``) checks all of it again against
the prepared dataset. Files are read once per process and version (path, size, mtime).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from dpaudit.contract.external import SAME_MODEL_AS
from dpaudit.external.membership import membership_of
from dpaudit.external.outputs_file import ExternalModelError, shown_rows
from dpaudit.external.promise import promise_problems
from dpaudit.external.recipe import recipe_problems

__all__ = ["external_problems", "known_dataset_ids"]

# Rows of the bundled scikit-learn datasets (dpaudit.data.datasets.BUNDLED_CLASS_SIZES sums them).
_BUNDLED_ROWS = {"breast_cancer": 569, "digits": 1797}


def _version(path: str) -> tuple[str, int, int]:
    stat = Path(path).stat()
    return str(path), stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=32)
def _table_ids(path: str, size: int, mtime: int, id_column: str | None, fmt: str) -> np.ndarray | None:
    import pyarrow as pa

    if id_column is None:
        return None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        column = pq.read_table(path, columns=[id_column]).column(0)
    else:
        import pyarrow.csv as pa_csv

        column = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
            include_columns=[id_column], column_types={id_column: pa.string()})).column(0)
    return np.char.strip(column.to_numpy(zero_copy_only=False).astype(str))


def known_dataset_ids(name: str, params: Mapping, sketch=None) -> np.ndarray | None:
    """The dataset's ids as text when known before it is prepared (module docstring), else None."""
    from dpaudit.data.datasets import SYNTHETIC_DEFAULTS

    if name == "synthetic" and params.get("source") is None:
        return np.arange(int(params.get("n", SYNTHETIC_DEFAULTS["n"]))).astype(str)
    if name in _BUNDLED_ROWS and params.get("source") is None:
        return np.arange(_BUNDLED_ROWS[name]).astype(str)
    if name == "synthetic_images" and params.get("source") is None:
        from dpaudit.data.arrays import IMAGES_DEFAULTS

        return np.arange(int(params.get("n", IMAGES_DEFAULTS["n"]))).astype(str)
    if params.get("source") == "table" and sketch is not None:
        if params.get("id"):
            try:
                return _table_ids(*_version(sketch.path), str(params["id"]), sketch.format)
            except (OSError, ValueError):
                return None
        return np.arange(sketch.rows).astype(str)
    return None


def _unknown(ids: np.ndarray, known: np.ndarray, what: str, where: str, dataset: str, shown: np.ndarray | None = None):
    unknown = np.flatnonzero(~np.isin(ids.astype(str), known))
    if not unknown.size:
        return None
    return (f"{where}: {what}: {unknown.size} id(s) are not in dataset {dataset}: {shown_rows(unknown, ids)}; write "
            "the dataset's example ids (its table's id column, or the 0-based row) or drop those rows")


def _entry_problems(name: str, entry: Mapping, config: Mapping, lookups: Mapping[str, Callable]) -> list[str]:
    from dpaudit.external.importer import read_entry_outputs, width_problem
    from dpaudit.external.keras_file import input_problem, inspect_keras_file

    where = f"config.external_models.{name}"
    dataset = entry["dataset"]
    if dataset not in config["datasets"]:
        return [f"{where}.dataset: {dataset!r} is not under config.datasets ({', '.join(config['datasets'])}); add it "
                "there (its rows, labels and ids) or name one of those"]
    if ("outputs" in entry) == ("model" in entry):
        return [f"{where}: give the model as outputs: <outputs file> or as model: <file.keras>, exactly one"]
    params = config["datasets"][dataset]
    problems = []
    try:
        if "model" in entry:  # its architecture read as data; the job runs it on the dataset's features
            sketch = inspect_keras_file(entry["model"], where, entry.get("custom_objects_module"))
            problem = input_problem(sketch, lookups["features"](dataset, params), dataset, where)
            problems += [problem] if problem else []
            outputs = None
        else:
            outputs = read_entry_outputs(entry, where)
        membership = membership_of(entry, outputs, where, params, dataset)
    except ExternalModelError as error:
        return problems + str(error).split("\n  ")
    if outputs is not None:
        problem = width_problem(outputs, lookups["classes"](dataset, params), dataset, where)
        problems += [problem] if problem else []
    known = known_dataset_ids(dataset, params, lookups["sketch"](dataset, params))
    if known is not None:
        listed = ([(outputs.path, outputs.ids)] if outputs is not None else
                  [(entry[key], ids) for key, ids in (("members", membership.members), ("held_out", membership.held_out),
                                                      ("utility", membership.utility)) if key in entry])
        problems += [p for path, ids in listed if (p := _unknown(ids, known, str(path), where, dataset))]
    problems.extend(promise_problems(entry.get("promise"), int(membership.members.size), f"{where}.promise",
                                     bool(config["training"]["allow_large_delta"])))
    problems.extend(recipe_problems(entry, config, where))
    if "reference_outputs" in entry:
        problems.extend(_reference_problems(entry, membership, lookups["classes"](dataset, params), f"{where}."
                                            "reference_outputs"))
    return problems


def _reference_problems(entry: Mapping, membership, classes: int | None, where: str) -> list[str]:
    """The reference outputs read, as wide as the classes, on rows the model is audited on."""
    from dpaudit.external.references import read_references

    try:
        references = read_references(entry["reference_outputs"], where)
    except ExternalModelError as error:
        return [str(error)]
    problems = []
    if classes is not None and references.logits.shape[2] != int(classes):
        problems.append(f"{where}: {references.path}: {references.logits.shape[2]} logits per row but the dataset has "
                        f"{classes} classes")
    audited = np.concatenate([ids.astype(str) for ids in (membership.members, membership.held_out, membership.utility)
                              if ids is not None])
    outside = np.flatnonzero(~np.isin(references.ids.astype(str), audited))
    if outside.size:
        problems.append(f"{where}: {references.path}: {outside.size} example(s) are neither members nor held out of the "
                        f"model: {shown_rows(outside, references.ids)}; give reference outputs on the rows the model is "
                        "audited on")
    return problems


def external_problems(config: Mapping, classes_of: Callable, sketch_of: Callable, features_of: Callable) -> list[str]:
    """Every problem of the config's ``external_models`` (module docstring); ``classes_of``, ``sketch_of``
    and ``features_of`` (each of a dataset's name and params) are dpaudit.config's dataset lookups. An empty grid trains nothing: it
    is allowed only for a dataset a model trained elsewhere is audited on, so no dataset has no model."""
    entries = config.get("external_models") or {}
    audited = {entry["dataset"] for entry in entries.values()}
    problems = []
    for name, params in config["datasets"].items():
        where = f"config.datasets.{name}.grid" if "grid" in params else "config.grid"
        if not params.get("grid", config["grid"]) and name not in audited:
            problems.append(f"{where}: empty, so dataset {name} would have no model; give it grid blocks, or audit a "
                            f"model trained elsewhere on it (external_models.<name>.dataset: {name})")
    for name, entry in entries.items():
        problems.extend(_entry_problems(name, entry, config,
                                        {"classes": classes_of, "sketch": sketch_of, "features": features_of}))
        problems.extend(_same_model_problems(name, entry, entries))
    return problems


def _same_model_problems(name: str, entry: Mapping, entries: Mapping) -> list[str]:
    """``same_model_as`` names another entry of the same dataset that names none itself (one model, one
    entry the ledger counts)."""
    if SAME_MODEL_AS not in entry:
        return []
    where, other = f"config.external_models.{name}.{SAME_MODEL_AS}", entry[SAME_MODEL_AS]
    if other == name:
        return [f"{where}: names the entry itself; name the other entry that audits the same model, or drop the key"]
    if other not in entries:
        return [f"{where}: {other!r} is not an entry of external_models ({', '.join(n for n in entries if n != name)})"]
    problems = []
    if entries[other]["dataset"] != entry["dataset"]:
        problems.append(f"{where}: {other!r} is audited on dataset {entries[other]['dataset']!r}, this entry on "
                        f"{entry['dataset']!r}: one model is scored on one dataset's rows")
    if SAME_MODEL_AS in entries[other]:
        problems.append(f"{where}: {other!r} names {entries[other][SAME_MODEL_AS]!r} itself; point every entry of one "
                        "model at the same entry, which names none")
    return problems
