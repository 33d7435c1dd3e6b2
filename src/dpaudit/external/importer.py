"""The job of a model trained elsewhere (issue 44): its per-example outputs table and its record.

``external_outputs`` turns an outputs file, the membership and the promise into exactly what a
dpaudit run's extraction and training leave for the families: ``P.OUTPUTS`` with the columns
``dpaudit.extract.extract`` writes (losses computed by ``dpaudit.losses`` in float64 from the
file's values: from logits exactly as the extraction computes them from its float32 logits) and a
record in place of train.json (mechanism ``external``, the promise's ε and δ and accountant inputs,
the membership's sources, what could and could not be checked). Every refusal of the parse-time
checks is made again here against the prepared dataset, with the same messages.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dpaudit.contract.delta import resolve_delta
from dpaudit.contract.external import (
    EXTERNAL,
    NOT_CHECKED,
    PMP_RECIPE_B,
    SAME_MODEL_AS,
    TRAINED_OUTSIDE,
)
from dpaudit.external.membership import Membership, membership_of
from dpaudit.external.outputs_file import (
    ExternalModelError,
    OutputsFile,
    check_values,
    read_outputs_file,
    sha256_of,
    shown_rows,
)
from dpaudit.external.promise import promise_record
from dpaudit.losses import losses_from_loss, losses_from_probabilities, per_example_losses

__all__ = ["external_outputs", "external_references", "read_entry_outputs", "width_problem"]

# The smallest positive normal float32: log(0) of a probability becomes its log in the logits column.
_TINY = float(np.finfo(np.float32).tiny)


def read_entry_outputs(entry: Mapping, where: str, *, ids: np.ndarray | None = None,
                       x: np.ndarray | None = None, threads: int = 1) -> OutputsFile:
    """The outputs an ``external_models`` entry names, read and checked: its outputs file, or its model
    file run on the dataset's features ``x`` (the rows of ``ids``, the dataset's ids as text) on
    ``threads`` TensorFlow threads."""
    if "model" not in entry:
        return read_outputs_file(entry["outputs"], where=where, id_column=entry.get("id_column", "example_id"),
                                 kind=entry.get("outputs_kind", "auto"),
                                 membership_column=entry.get("membership_column"), format=entry.get("outputs_format"))
    from dpaudit.external.keras_file import inspect_keras_file, keras_outputs

    module = entry.get("custom_objects_module")
    kind = entry.get("outputs_kind", "auto")
    if kind == "auto":
        kind = "probs" if inspect_keras_file(entry["model"], where, module).softmax_output else "logits"
    if kind == "loss":
        raise ExternalModelError(f"{where}.outputs_kind: a model file outputs logits or probs, not a loss")
    values = keras_outputs(entry["model"], x, where, module, threads=threads).astype(np.float64)
    ids = np.asarray(ids, dtype=object)
    check_values(kind, values, ids, Path(entry["model"]), where)
    return OutputsFile(path=str(entry["model"]), format="keras", kind=kind, ids=ids, values=values, labels=None,
                       correct=None, membership=None, sha256=sha256_of(entry["model"]))


def width_problem(outputs: OutputsFile, classes: int | None, dataset: str, where: str) -> str | None:
    """The message when the file's values per row are not the dataset's classes (None when they are)."""
    if classes is None or outputs.width is None or outputs.width == int(classes):
        return None
    return (f"{where}: {outputs.path}: {outputs.kind} has {outputs.width} values per row but dataset {dataset} has "
            f"{classes} classes; write one {outputs.kind} value per class, in the order of the dataset's labels "
            "0 … C−1")


def _example_ids(outputs: OutputsFile, ids: pd.DataFrame, dataset: str, where: str) -> np.ndarray:
    index = pd.Index(ids["id"].astype(str).to_numpy())
    at = index.get_indexer(outputs.ids.astype(str))
    unknown = np.flatnonzero(at < 0)
    if unknown.size:
        raise ExternalModelError(f"{where}: {outputs.path}: {unknown.size} id(s) are not in dataset {dataset}: "
                                 f"{shown_rows(unknown, outputs.ids)}; write the dataset's example ids (its table's "
                                 "id column, or the 0-based row) or drop those rows")
    return ids["example_id"].to_numpy(np.int64)[at]


def _columns(outputs: OutputsFile, labels: np.ndarray, example_ids: np.ndarray, classes: int, where: str) -> dict:
    if outputs.kind == "logits":
        columns = per_example_losses(outputs.values, labels, example_ids)
        logits = outputs.values.astype(np.float32)
    elif outputs.kind == "probs":
        try:
            columns = losses_from_probabilities(outputs.values, labels, example_ids)
        except ValueError as error:
            raise ExternalModelError(f"{where}: {outputs.path}: {error}") from None
        logits = np.log(np.maximum(outputs.values, _TINY)).astype(np.float32)
    else:
        correct = outputs.correct
        if correct is None and classes != 2:
            raise ExternalModelError(f"{where}: {outputs.path}: a loss alone does not say whether the model's top "
                                     f"class is the label on {classes} classes; add a column correct (true/false), "
                                     "or write logits or probs")
        if correct is None:  # two classes: the label is the top class exactly when p_y = e^(−loss) > 1/2
            correct = outputs.values < math.log(2.0)
        columns, logits = losses_from_loss(outputs.values, correct), None
    infinite = np.flatnonzero(~np.isfinite(columns["loss_logit"]))
    if infinite.size:
        raise ExternalModelError(
            f"{where}: {outputs.path}: p(label) rounds to 1 at {shown_rows(infinite, outputs.ids)}, where the "
            "logit-scaled loss log(1 − p) − log p is −∞; write logits (the model's values before its softmax) "
            "instead")
    if logits is not None:
        columns["logits"] = pd.Series(pd.arrays.ArrowExtensionArray(
            pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(logits).reshape(-1)), logits.shape[1])))
    return columns


def _roles(outputs: OutputsFile, membership: Membership) -> np.ndarray:
    """Per row of the file: 1 member, 0 held out, 2 utility only, -1 none."""
    ids = outputs.ids.astype(str)
    role = np.full(ids.size, -1, dtype=np.int8)
    if membership.utility is not None:
        role[np.isin(ids, membership.utility.astype(str))] = 2
    role[np.isin(ids, membership.held_out.astype(str))] = 0
    role[np.isin(ids, membership.members.astype(str))] = 1
    return role


def external_outputs(entry: Mapping, *, name: str, dataset: str, examples: pd.DataFrame, ids: pd.DataFrame,
                     dataset_info: Mapping, delta: float | str, allow_large_delta: bool = False, pmp: bool = False,
                     dataset_params: Mapping | None = None, threads: int = 1) -> tuple[pd.DataFrame, dict]:
    """(``P.OUTPUTS`` frame, record) of ``external_models.<name>`` on its prepared dataset (module docstring).

    ``examples``: the dataset's example_id and label; ``ids``: its ids.parquet; ``delta``: the
    config's training.delta, the δ the attacks are evaluated at when the entry states no promise;
    ``pmp``: the pmp family is on (what the record says was checked); ``dataset_params``: the dataset's
    config (its table, for ``membership_table_column``); ``threads``: the job's (a model file's inference)."""
    where = f"config.external_models.{name}"
    x = None
    if "model" in entry:  # a model file is scored on every row of the dataset, its features as prepared
        from dpaudit.training.models import features

        x = features(examples.set_index("example_id").loc[ids["example_id"].to_numpy(np.int64)].reset_index())
    outputs = read_entry_outputs(entry, where, ids=ids["id"].astype(str).to_numpy(), x=x, threads=threads)
    classes = int(dataset_info["classes"])
    problem = width_problem(outputs, classes, dataset, where)
    if problem is not None:
        raise ExternalModelError(problem)
    membership = membership_of(entry, outputs, where, dataset_params, dataset)
    example_ids = _example_ids(outputs, ids, dataset, where)
    labels = examples.set_index("example_id")["label"].reindex(example_ids).to_numpy(np.int64)
    if outputs.labels is not None:
        wrong = np.flatnonzero(outputs.labels != labels)
        if wrong.size:
            raise ExternalModelError(f"{where}: {outputs.path}: column 'label' differs from dataset {dataset}'s label "
                                     f"at {shown_rows(wrong, outputs.ids)}; write the dataset's class indices, or "
                                     "leave the column out")
    role = _roles(outputs, membership)
    used = np.flatnonzero(role >= 0)
    splits = dataset_info["splits"]
    names = {1: splits["members"], 0: splits["nonmembers"], 2: splits["utility"]}
    columns = _columns(outputs, labels, example_ids, classes, where)
    frame = pd.DataFrame({
        "example_id": example_ids, "split": pd.Series(role).map(names).to_numpy(object),
        "is_member": role == 1, "label": labels, **columns})
    frame = frame.iloc[used].sort_values("example_id", kind="stable", ignore_index=True)
    n_members = int((role == 1).sum())
    record = _record(entry, name, dataset, outputs, membership, role, n_members, delta, allow_large_delta, where)
    _gradient_record(record, entry, pmp)
    if membership.utility is None:  # test accuracy on the held-out rows (contract.external.run_splits)
        record["splits"] = {"utility": splits["nonmembers"]}
    return frame, record


def _record(entry: Mapping, name: str, dataset: str, outputs: OutputsFile, membership: Membership, role: np.ndarray,
            n_members: int, delta: float | str, allow_large_delta: bool, where: str) -> dict:
    promise = promise_record(entry.get("promise"), n_members, f"{where}.promise", allow_large_delta)
    if "delta" not in promise:  # no promise: the attacks' δ as for any run (training.delta, auto = 1/(n ln n))
        resolved, _ = resolve_delta(delta, n_members, allow_large_delta, name="config.training.delta")
        promise["delta"] = resolved
    utility = ("held_out" if membership.utility is None else "utility")
    return {
        "mechanism": EXTERNAL, "dataset": dataset, "run": name, "trained_by": TRAINED_OUTSIDE,
        "source": {"kind": "outputs_file", "path": outputs.path, "format": outputs.format, "sha256": outputs.sha256,
                   "outputs_kind": outputs.kind, "rows": int(role.size), "rows_unused": int((role < 0).sum())},
        "membership": {**membership.sources, "n_members": n_members, "n_held_out": int((role == 0).sum()),
                       "n_utility": int((role == (0 if membership.utility is None else 2)).sum()),
                       "utility_rows": utility},
        "n_members": n_members, "loss_diverged": False, "history": [],
        **({SAME_MODEL_AS: entry[SAME_MODEL_AS]} if SAME_MODEL_AS in entry else {}),
        "not_checked": [{"what": what, "reason": TRAINED_OUTSIDE} for what in NOT_CHECKED],
        **promise,
    }


def _gradient_record(record: dict, entry: Mapping, pmp: bool) -> None:
    """What the record says of the model's per-example gradients and PMP Recipe A
    (``dpaudit.external.gradients``): computed for a model file of Dense layers, Recipe A under a DP-SGD
    promise with its clip norm; the rest of PMP stays not checked."""
    from dpaudit.external.gradients import gradient_problem
    from dpaudit.extract.checkpoints import external_problem

    problem = gradient_problem(entry)
    record["per_example_gradients"] = {"available": problem is None, "reason": problem}
    if problem is not None:
        return
    record["checked"] = ["per-example cross-entropy gradients of every audited row at the model's final weights "
                         "(its Dense layers read as data, run in numpy)"]
    recipe_a = external_problem(record)
    if pmp and recipe_a is None:
        record["checked"].append("PMP Recipe A (Lowy et al. 2024): one full-batch DP-SGD step at the final weights, "
                                 "from the promise's σ and clip norm")
        record["not_checked"] = [item if not item["what"].startswith("PMP") else
                                 {"what": PMP_RECIPE_B, "reason": TRAINED_OUTSIDE} for item in record["not_checked"]]


def external_references(entry: Mapping, *, name: str, dataset: str, ids: pd.DataFrame, outputs: pd.DataFrame,
                        ) -> tuple[pd.DataFrame, dict]:
    """(pool table, record) of an entry's ``reference_outputs`` (``dpaudit.external.references``): its
    examples mapped to the dataset's example ids and labels; every one must be a row the model is audited
    on (``outputs``: its P.OUTPUTS table), so the attacks compare the same examples."""
    from dpaudit.external.references import read_references, reference_pool, reference_record

    where = f"config.external_models.{name}.reference_outputs"
    references = read_references(entry["reference_outputs"], where)
    index = pd.Index(ids["id"].astype(str).to_numpy())
    at = index.get_indexer(references.ids.astype(str))
    unknown = np.flatnonzero(at < 0)
    if unknown.size:
        raise ExternalModelError(f"{where}: {references.path}: {unknown.size} example id(s) are not in dataset "
                                 f"{dataset}: {shown_rows(unknown, references.ids)}")
    example_ids = ids["example_id"].to_numpy(np.int64)[at]
    target = outputs.set_index("example_id")
    absent = np.flatnonzero(~np.isin(example_ids, target.index.to_numpy()))
    if absent.size:
        raise ExternalModelError(f"{where}: {references.path}: {absent.size} example(s) are neither members nor held "
                                 f"out of the model: {shown_rows(absent, references.ids)}; give reference outputs on "
                                 "the rows the model is audited on")
    width = references.logits.shape[2]
    classes = len(target["logits"].iloc[0]) if "logits" in target.columns else None
    if classes is not None and width != classes:
        raise ExternalModelError(f"{where}: {references.path}: {width} logits per row, the model has {classes}")
    order = np.argsort(example_ids, kind="stable")  # the pool table's order: by model, then example_id
    references = dataclasses.replace(references, ids=references.ids[order], logits=references.logits[:, order],
                                     inclusion=references.inclusion[:, order])
    example_ids = example_ids[order]
    labels = target.loc[example_ids, "label"].to_numpy(np.int64)
    return reference_pool(references, example_ids, labels), reference_record(references, name, labels, entry)
