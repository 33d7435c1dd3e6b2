"""Parse-time cost of deriving every rule's code hash from its adapter's imports
(issue 7 §2). The 1,000-run dry-run in run_all.py includes it; this isolates it."""

from __future__ import annotations

import time
from pathlib import Path

from dpaudit.codehash import ScriptCodeHashes

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    rules = sorted(p.stem for p in (ROOT / "scripts").glob("*.py") if p.stem != "download_dataset")
    start = time.perf_counter()
    hashes = ScriptCodeHashes(ROOT / "scripts", unhashed=["download_dataset"])
    modules = sum(len(hashes.modules(rule)) for rule in rules)
    for rule in rules:
        hashes[rule]
    elapsed = time.perf_counter() - start
    print(f"codehash_derivation rules={len(rules)} module_visits={modules} seconds={elapsed:.3f}")


if __name__ == "__main__":
    main()
