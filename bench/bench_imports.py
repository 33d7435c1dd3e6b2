"""Import time of every adapter's imports (issue 23: metric jobs start no TensorFlow and
import only what they use, each under 1 s; issue 36: what each job kind pays is recorded).

For each ``scripts/<rule>.py`` the module-level imports are run in a fresh interpreter
under ``python -X importtime``; the figure is the sum of the top-level cumulative times
(what the job pays before its first line of work, interpreter start excluded), the best
of ``--repeat`` runs, and the CPU seconds the same process spends beyond ``python -c pass``
(user + system: the figure to read on a shared, loaded machine, where wall time waits for
the cores). ``tf`` says whether TensorFlow ended up imported, ``heavy`` which of the
packages in ``HEAVY`` did. Snakemake's own preamble (unpickling the ``snakemake`` object)
is the same for every job and not counted, and so is what a job imports later, inside
the functions it calls (scipy.optimize where a DP run calibrates, dp_accounting where an
accountant runs, matplotlib where a figure is drawn, TensorFlow in the training jobs).

Floors (issue 36, CPU seconds beyond a bare interpreter, best of 7 on a loaded 2-core
machine): numpy + pandas + pyarrow is ~0.4 s, with scipy.special ~0.55 s. Every per-run
job kind (extraction, mia, ε*, PMP, canary, attacks, identifiability, card, the audit
jobs) sits on that floor, 0.55-0.75 s, and imports none of ``HEAVY`` (was 0.75-1.1 s
with scipy.optimize; ε*'s normal-fit check imports scipy.stats, ~0.5 s, when it runs); ``privacy_card`` adds matplotlib's figure modules when it draws
the card. The per-dataset figures add matplotlib (~0.3 s; 0.9-1.15 s in all), the
landscape scipy.stats for its KDE (~1.7 s).
``python -X importtime -c "import dp_accounting"`` shows the ~0.8 s the issue names:
dp_accounting's package ``__init__`` imports its PLD code, which imports scipy.signal
(whose import rewrites docstrings) and scipy.stats; no narrower submodule avoids it, so
only the jobs that run an accountant import it (tensorflow_privacy imports it too, so every
TensorFlow job pays it).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")
HEAVY = ("scipy.stats", "scipy.optimize", "scipy.signal", "dp_accounting", "sklearn", "matplotlib",
         "jsonschema", "tensorflow")


def script_imports(path: Path) -> str:
    """The script's module-level import statements, as source."""
    tree = ast.parse(path.read_text())
    lines = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    return "\n".join(lines)


def _cpu_run(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return result, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(source: str) -> tuple[float, float, list[str], list[tuple[float, str]]]:
    """(wall seconds of the top-level imports, CPU seconds beyond a bare interpreter,
    the packages of ``HEAVY`` imported, the five heaviest top-level modules)."""
    probe = source + f"\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    result, cpu = _cpu_run([sys.executable, "-X", "importtime", "-c", probe])
    _, bare = _cpu_run([sys.executable, "-c", "pass"])
    top = []
    for line in result.stderr.splitlines():
        match = LINE.match(line)
        if match and not match.group(3):
            top.append((int(match.group(2)) / 1e6, match.group(4)))
    heavy = result.stdout.strip().splitlines()[-1].split() if result.stdout.strip() else []
    return sum(t for t, _ in top), cpu - bare, heavy, sorted(top, reverse=True)[:5]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scripts", nargs="*", help="rule names (default: every script)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    names = args.scripts or sorted(p.stem for p in (ROOT / "scripts").glob("*.py"))
    for name in names:
        source = script_imports(ROOT / "scripts" / f"{name}.py")
        runs = [measure(source) for _ in range(max(args.repeat, 1))]
        seconds, _, heavy, heaviest = min(runs, key=lambda r: r[0])
        cpu = min(r[1] for r in runs)
        detail = ", ".join(f"{module} {t:.2f}" for t, module in heaviest)
        print(f"imports script={name} seconds={seconds:.2f} cpu_seconds={cpu:.2f} "
              f"tensorflow={'tensorflow' in heavy} heavy=[{' '.join(heavy)}] heaviest=[{detail}]", flush=True)


if __name__ == "__main__":
    main()
