"""Run a script adapter the way Snakemake does: with a global ``snakemake`` object."""

from __future__ import annotations

import runpy
from pathlib import Path

from snakemake.iocontainers import Namedlist

ROOT = Path(__file__).resolve().parents[2]


def named(positional=(), **named_items) -> Namedlist:
    items = Namedlist(toclone=[*positional, *named_items.values()]) if (positional or named_items) else Namedlist()
    if named_items:
        start = len(positional)
        for offset, name in enumerate(named_items):
            items._set_name(name, start + offset)
    return items


class FakeSnakemake:
    def __init__(self, rule, *, input=None, output=None, params=None, wildcards=None, log=(), threads=1):
        self.rule = rule
        self.input = input if isinstance(input, Namedlist) else named(**(input or {}))
        self.output = output if isinstance(output, Namedlist) else named(**(output or {}))
        self.params = named(**(params or {}))
        self.wildcards = named(**(wildcards or {}))
        self.log = named(list(map(str, log)))
        self.threads = threads


def _plain(files: Namedlist) -> dict | list:
    names = list(files.keys())
    return {name: getattr(files, name) for name in names} if names else [str(f) for f in files]


def as_batch(fakes: list[FakeSnakemake]) -> FakeSnakemake:
    """One batch job of the runs ``fakes`` describe (issue 36; dpaudit.batching.run_jobs reads it):
    the first run's params are the batch's shared ones, each run's own differ."""
    shared = {name: getattr(fakes[0].params, name) for name in fakes[0].params.keys()}
    jobs = [{"wildcards": {name: getattr(fake.wildcards, name) for name in fake.wildcards.keys()},
             "input": _plain(fake.input), "output": _plain(fake.output), "log": [str(f) for f in fake.log],
             "params": {name: getattr(fake.params, name) for name in fake.params.keys()}} for fake in fakes]
    batch = FakeSnakemake(fakes[0].rule, params={**shared, "jobs": jobs}, threads=fakes[0].threads)
    batch.input = named([f for fake in fakes for f in fake.input])
    batch.output = named([f for fake in fakes for f in fake.output])
    batch.log = named([f for fake in fakes for f in fake.log])
    return batch


def run_script(rule: str, fake: FakeSnakemake | list[FakeSnakemake]) -> None:
    """Run ``scripts/<rule>.py``; a script that walks a batch's runs (dpaudit.batching.run_jobs)
    gets ``fake`` (one run, or a list of runs) as one batch job."""
    script = ROOT / "scripts" / f"{rule}.py"
    if "run_jobs(" in script.read_text():
        fake = as_batch(fake if isinstance(fake, list) else [fake])
    runpy.run_path(str(script), init_globals={"snakemake": fake}, run_name="__main__")
