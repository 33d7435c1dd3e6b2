"""Many runs per job (issue 36): the batches of a dataset's runs and the per-run view a batch job's script walks.

A job that starts an interpreter pays its imports before any work (TensorFlow about 5 s,
numpy/pandas/pyarrow about 0.6 s), and most runs of a grid take less than that. So each
per-run rule is written once per batch of runs (rules/batches.smk, ``run_batches``): one
Snakemake job reads and writes the files of all its runs, where the contract puts them
(docs/architecture.md, "Batches"). The script of such a job walks its runs with
``run_jobs(snakemake)``: each run gets an object shaped like Snakemake's own (``input``,
``output``, ``params``, ``wildcards``, ``log``, ``threads``, ``rule``), so the per-run body
reads as it did when a job was one run, and ``dpaudit.logs.job_logging`` writes each run's
own log.

Batches that keep their runs (issue 47). Snakemake reruns a whole job when its list of inputs
or its params change, so a batch that gained a run would redo its old ones. A batch is
therefore recorded when a run starts (``write_records``: one small JSON per batch under
``results/batches/``, ``dpaudit.contract.paths.BATCH_RECORD``), and ``assign`` keeps every
recorded batch whose runs are all still in the grid, whatever the grid around them became;
only the runs no kept batch holds are packed into new batches (consecutive in grid order, at
most ``size``; a group, a recipe's seeds, never split, a group larger than ``size`` a batch of
its own; runs of different ``classes`` never share one: a setting only some runs read reruns
only theirs). A batch's name is a hash of its runs, so it never depends on its position. A run
that fails stops its batch: Snakemake deletes every output of a failed job, so the runs
finished before it are written again on the next attempt (the terminal and the run's log
name the run).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Snakemake rule names must be identifiers; dataset names may hold '-' or '.'.
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")
# The record's format (``write_records``); a record of another version is not read.
RECORD_VERSION = 1


@dataclass(frozen=True)
class Batch:
    """One job's runs: ``kind`` is the per-run rule it stands for (its log and benchmark folder)."""

    kind: str
    dataset: str
    keys: tuple[str, ...]

    @property
    def name(self) -> str:
        """``b`` and 12 hex digits of the SHA-256 of its runs (in order): the same runs, the same name."""
        return "b" + hashlib.sha256("\n".join(self.keys).encode()).hexdigest()[:12]

    @property
    def rule(self) -> str:
        """The generated rule's name: ``<kind>__<dataset>_<name>`` (the kind before the ``__``)."""
        return f"{self.kind}__{_NOT_IDENTIFIER.sub('_', self.dataset)}_{self.name}"

    @property
    def key(self) -> str:
        """The batch's benchmark key: ``<dataset>/<name>``."""
        return f"{self.dataset}/{self.name}"


@dataclass(frozen=True)
class Record:
    """A batch as ``write_records`` wrote it: its runs and when (seconds since the epoch)."""

    kind: str
    dataset: str
    keys: tuple[str, ...]
    written: float


def rule_kind(rule: str) -> str:
    """The per-run rule a (possibly generated) rule name stands for: ``metric_mia__digits_b1f…`` → ``metric_mia``."""
    return rule.split("__", 1)[0]


def partition(keys: Sequence[str], size: int, groups: Mapping[str, str] | None = None) -> list[tuple[str, ...]]:
    """Chunks of at most ``size`` keys, in order; with ``groups`` (key → group) the keys of one group
    share a chunk (placed where the group first appears), and a group larger than ``size`` is a
    chunk of its own."""
    if size < 1:
        raise ValueError(f"workflow.runs_per_job must be at least 1, got {size}")
    units: dict[str, list[str]] = {}
    for key in keys:
        units.setdefault(key if groups is None else groups[key], []).append(key)
    chunks: list[list[str]] = []
    for unit in units.values():
        if chunks and len(chunks[-1]) + len(unit) <= size:
            chunks[-1].extend(unit)
        else:
            chunks.append(list(unit))
    return [tuple(chunk) for chunk in chunks]


def assign(kind: str, dataset: str, keys: Sequence[str], size: int, *, groups: Mapping[str, str] | None = None,
           classes: Mapping[str, Hashable] | None = None, records: Iterable[Record] = ()) -> list[Batch]:
    """The batches of ``kind`` over one dataset's ``keys`` (grid order): every recorded batch whose
    keys are all in ``keys`` and of one class, newest record first, a key in at most one; then the
    other keys, per class in order of first appearance, packed by ``partition``. Listed in the
    order of their first key."""
    if size < 1:
        raise ValueError(f"workflow.runs_per_job must be at least 1, got {size}")
    position = {key: i for i, key in enumerate(keys)}
    classes = classes or {}
    claimed: set[str] = set()
    found: list[Batch] = []
    mine = [r for r in records if r.kind == kind and r.dataset == dataset and r.keys]
    for record in sorted(mine, key=lambda r: (-r.written, r.keys)):
        if (len(set(record.keys)) != len(record.keys) or any(k not in position or k in claimed for k in record.keys)
                or len({classes.get(k) for k in record.keys}) > 1):
            continue
        claimed.update(record.keys)
        found.append(Batch(kind, dataset, tuple(record.keys)))
    by_class: dict[Hashable, list[str]] = {}
    for key in keys:
        if key not in claimed:
            by_class.setdefault(classes.get(key), []).append(key)
    for members in by_class.values():
        found += [Batch(kind, dataset, chunk) for chunk in partition(members, size, groups)]
    return sorted(found, key=lambda batch: min(position[k] for k in batch.keys))


def batches(kind: str, keys_by_dataset: Mapping[str, Sequence[str]], size: int,
            groups: Mapping[str, Mapping[str, str]] | None = None,
            classes: Mapping[str, Mapping[str, Hashable]] | None = None,
            records: Iterable[Record] = ()) -> list[Batch]:
    """Every batch of ``kind`` over the datasets' keys (runs or recipes), datasets in the given order
    (``assign`` per dataset)."""
    names: dict[str, str] = {}
    for dataset in keys_by_dataset:
        other = names.setdefault(_NOT_IDENTIFIER.sub("_", dataset), dataset)
        if other != dataset:
            raise ValueError(f"datasets {other!r} and {dataset!r} name the same batch rules; rename one "
                             "(letters, digits and '_' are kept, every other character becomes '_')")
    records = list(records)
    return [batch for dataset, keys in keys_by_dataset.items()
            for batch in assign(kind, dataset, list(keys), size, groups=None if groups is None else groups[dataset],
                                classes=None if classes is None else classes[dataset], records=records)]


def read_records(paths: Iterable[str | Path]) -> list[Record]:
    """The batch records at ``paths`` (``write_records``'s files); an unreadable one, or one of another
    format, is left out (its runs are packed anew)."""
    found = []
    for path in paths:
        try:
            payload = json.loads(Path(path).read_text())
            if payload.get("version") != RECORD_VERSION:
                continue
            found.append(Record(str(payload["kind"]), str(payload["dataset"]), tuple(map(str, payload["keys"])),
                                float(payload["written"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def write_records(found: Iterable[Batch], pattern: str, records: Iterable[Record] = (),
                  now: Callable[[], float] = time.time) -> list[str]:
    """Record every batch of ``found`` that no record of ``records`` holds already, at ``pattern``
    (``{kind}``, ``{dataset}``, ``{name}``); returns the paths written. An existing record is never
    rewritten: its time orders it against the others (``assign``)."""
    from dpaudit.io import write_json

    known = {(r.kind, r.dataset, r.keys) for r in records}
    written = []
    stamp = now()
    for batch in found:
        if (batch.kind, batch.dataset, batch.keys) in known:
            continue
        path = pattern.format(kind=batch.kind, dataset=batch.dataset, name=batch.name)
        write_json(path, {"version": RECORD_VERSION, "kind": batch.kind, "dataset": batch.dataset,
                          "keys": list(batch.keys), "written": stamp})
        written.append(path)
    return written


class Files:
    """A run's named (or unnamed) files or values, read like Snakemake's ``Namedlist``:
    ``files.name``, ``files[0]``, ``files.get(name)``, ``"name" in files.keys()``."""

    def __init__(self, items: Mapping[str, Any] | Sequence[Any] = ()):
        if isinstance(items, Mapping):
            self._names = dict(items)
            self._values = list(items.values())
        else:
            self._names = {}
            self._values = list(items)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_names"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, index: int | str) -> Any:
        return self._names[index] if isinstance(index, str) else self._values[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, name: str, default: Any = None) -> Any:
        return self._names.get(name, default)

    def keys(self):
        return self._names.keys()

    def items(self):
        return self._names.items()


@dataclass
class RunJob:
    """One run of a batch job, shaped like the ``snakemake`` object a one-run job had."""

    rule: str
    input: Files
    output: Files
    params: Files
    wildcards: Files
    log: Files
    threads: int
    batch: Any  # the batch job's own snakemake object (dpaudit.logs reads it)
    last: bool

    @property
    def name(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.wildcards.items())


def job_spec(wildcards: Mapping[str, str], *, input: Mapping[str, Any], output: Mapping[str, Any] | Sequence[str],
             log: Sequence[str], params: Mapping[str, Any]) -> dict:
    """The per-run part of a batch job's params (``params.jobs``): plain values Snakemake stores,
    so a change to one run's inputs, outputs or values reruns its batch."""
    return {"wildcards": dict(wildcards), "input": dict(input),
            "output": dict(output) if isinstance(output, Mapping) else list(output),
            "log": list(log), "params": dict(params)}


def run_jobs(snakemake) -> Iterator[RunJob]:
    """The runs of a batch job, in order, each as a one-run ``snakemake`` object: ``params`` holds
    the batch's shared params with the run's own on top (``params.jobs`` left out)."""
    shared = {key: value for key, value in snakemake.params.items() if key != "jobs"}
    specs = list(snakemake.params.jobs)
    for position, spec in enumerate(specs):
        yield RunJob(rule=str(snakemake.rule), input=Files(spec["input"]), output=Files(spec["output"]),
                     params=Files({**shared, **spec["params"]}), wildcards=Files(spec["wildcards"]),
                     log=Files(spec["log"]), threads=int(snakemake.threads), batch=snakemake,
                     last=position == len(specs) - 1)


def combined_resources(per_run: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """A batch's declaration from its runs' (dpaudit.resources.declared): the largest memory (the
    runs follow each other in one process) and the summed runtime."""
    if not per_run:
        raise ValueError("a batch holds at least one run")
    return {"mem_mb": max(int(r["mem_mb"]) for r in per_run), "runtime": sum(int(r["runtime"]) for r in per_run)}


def evaluate(value: Any, wildcards: Any) -> Any:
    """A rule-style value for one run: a callable is called with the run's wildcards."""
    return value(wildcards) if isinstance(value, Callable) else value
