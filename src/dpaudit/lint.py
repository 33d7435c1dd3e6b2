"""``make lint``'s workflow half: ``snakemake --lint`` findings, filtered from its JSON (issue 26).

Snakemake 9.27's command line ignores ``--lint json`` (it prints text), so this asks the
Snakemake API for the structured lints (``Workflow.lint(json=True)``, with a file-level
finding's file named as text: Snakemake puts the file object there and cannot serialize
it) and fails on every finding except the accepted ones of ``ACCEPTED``, which it reports
in one line with the reason.
``python -m dpaudit.lint [--configfile FILE]``: exit 0 when clean, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
# title of an accepted lint -> why the project accepts it
ACCEPTED = {
    "Specify a conda environment or container for each rule.":
        "the project runs every rule in one locked virtualenv (requirements.lock, docs/stack.md), "
        "not per-rule conda environments or containers",
    "Mixed rules and functions in same snakefile.":
        "each family's input functions live beside its rules in rules/<family>.smk (issue 23), so one "
        "file holds a rule and everything it is computed from; rules/common.smk keeps what every family shares",
}


def workflow_lints(snakefile: Path, configfile: Path) -> dict:
    """``{"snakefiles": [...], "rules": [...]}``: Snakemake's JSON lints of the workflow."""
    from snakemake.api import SnakemakeApi
    from snakemake.linting.snakefiles import SnakefileLinter
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    out = io.StringIO()
    with tempfile.TemporaryDirectory() as workdir, SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(),
            config_settings=ConfigSettings(configfiles=[Path(configfile).resolve()], replace_workflow_config=True),
            snakefile=Path(snakefile).resolve(), workdir=Path(workdir),
        )
        # a file-level finding names its file as text (Snakemake 9.27 puts the file object in the JSON)
        with contextlib.redirect_stdout(out), mock.patch.object(
                SnakefileLinter, "item_desc_json", lambda self, snakefile: {"snakefile": str(snakefile)}):
            workflow.lint(json=True)
    return json.loads(out.getvalue())


def classify(lints: Mapping) -> tuple[Counter, list[str]]:
    """(accepted titles with their counts, one line per other finding)."""
    accepted: Counter = Counter()
    unexpected = []
    for kind in ("snakefiles", "rules"):
        for entry in lints.get(kind, []):
            where = entry.get("for", {})
            place = (f"rule {where['rule']} ({where.get('snakefile')}:{where.get('line')})" if "rule" in where
                     else f"snakefile {where.get('snakefile', '?')}")
            for lint in entry.get("lints", []):
                title = str(lint.get("title", "")).strip()
                if title in ACCEPTED:
                    accepted[title] += 1
                else:
                    body = " ".join(str(lint.get("body", "")).split())
                    unexpected.append(f"{place}: {title} {body}".strip())
    return accepted, unexpected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--snakefile", type=Path, default=ROOT / "Snakefile")
    parser.add_argument("--configfile", type=Path, default=ROOT / "config" / "config.yaml")
    args = parser.parse_args(argv)
    accepted, unexpected = classify(workflow_lints(args.snakefile, args.configfile))
    for title, count in accepted.items():
        print(f"snakemake --lint: accepted note on {count} rule(s) or file(s), \"{title.rstrip('.')}\": {ACCEPTED[title]}")
    if unexpected:
        print(f"snakemake --lint: {len(unexpected)} finding(s):", file=sys.stderr)
        for line in unexpected:
            print(f"  {line}", file=sys.stderr)
        return 1
    print("snakemake --lint: no other findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
