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

A batch is consecutive runs of one dataset in grid order, at most ``size`` of them; with
groups (a recipe's seeds), a group is never split, and a group larger than ``size`` is a
batch of its own. A run that fails stops its batch: Snakemake deletes every output of a
failed job, so the runs finished before it are written again on the next attempt (the
terminal and the run's log name the run).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Snakemake rule names must be identifiers; dataset names may hold '-' or '.'.
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class Batch:
    """One job's runs: ``kind`` is the per-run rule it stands for (its log and benchmark folder)."""

    kind: str
    dataset: str
    index: int
    keys: tuple[str, ...]

    @property
    def rule(self) -> str:
        """The generated rule's name: ``<kind>__<dataset>_<index>`` (the kind before the ``__``)."""
        return f"{self.kind}__{_NOT_IDENTIFIER.sub('_', self.dataset)}_{self.index}"

    @property
    def key(self) -> str:
        """The batch's benchmark key: ``<dataset>/batch<index>``."""
        return f"{self.dataset}/batch{self.index}"


def rule_kind(rule: str) -> str:
    """The per-run rule a (possibly generated) rule name stands for: ``metric_mia__digits_0`` → ``metric_mia``."""
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


def batches(kind: str, keys_by_dataset: Mapping[str, Sequence[str]], size: int,
            groups: Mapping[str, Mapping[str, str]] | None = None) -> list[Batch]:
    """Every batch of ``kind`` over the datasets' keys (runs or recipes), datasets in the given order."""
    names: dict[str, str] = {}
    for dataset in keys_by_dataset:
        other = names.setdefault(_NOT_IDENTIFIER.sub("_", dataset), dataset)
        if other != dataset:
            raise ValueError(f"datasets {other!r} and {dataset!r} name the same batch rules; rename one "
                             "(letters, digits and '_' are kept, every other character becomes '_')")
    return [Batch(kind, dataset, index, chunk)
            for dataset, keys in keys_by_dataset.items()
            for index, chunk in enumerate(partition(list(keys), size, None if groups is None else groups[dataset]))]


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
