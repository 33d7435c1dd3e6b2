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


def run_script(rule: str, fake: FakeSnakemake) -> None:
    runpy.run_path(str(ROOT / "scripts" / f"{rule}.py"), init_globals={"snakemake": fake}, run_name="__main__")
