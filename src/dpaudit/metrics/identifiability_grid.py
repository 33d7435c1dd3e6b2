"""The audit's configurations and blocks of runs (Bernau et al. 2021), without heavy imports:
``rules/common.smk`` builds its parse-time lookup from these."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def config_name(neighbourhood: str, mode: str, rho: float, pair: str) -> str:
    return f"{neighbourhood}-{mode}-rho{rho:g}-{pair}"


def audit_configs(dataset_options: Mapping[str, Any], audit: Mapping[str, Any]) -> dict[str, dict]:
    """Every configuration of one dataset: name → parameters (a parse-time lookup)."""
    out = {}
    extra = audit.get("sensitivity_pairs") or {}
    for pair in extra.get("pairs", []):
        # Fig. 4: more dataset-sensitivity pairs, bounded LS noise at one target.
        rho = float(extra["rho_beta"])
        out[config_name("bounded", "ls", rho, pair)] = {
            "neighbourhood": "bounded", "mode": "ls", "rho_beta": rho, "pair": pair, "runs": int(extra["runs"]),
        }
    # Keys are matched by value ("0.90" is 0.9); a key naming no target is refused, never ignored.
    per_rho = {float(k): int(v) for k, v in (dataset_options.get("runs_per_rho") or {}).items()}
    unknown = sorted(set(per_rho) - {float(rho) for rho in dataset_options["rho_beta"]})
    if unknown:
        raise ValueError(f"runs_per_rho keys {unknown} are not among rho_beta {dataset_options['rho_beta']}")
    for neighbourhood in audit["neighbourhoods"]:
        for mode in audit["modes"]:
            for rho in dataset_options["rho_beta"]:
                for pair in audit["pairs"]:
                    runs = per_rho.get(float(rho), int(audit["runs"]))
                    out[config_name(neighbourhood, mode, rho, pair)] = {
                        "neighbourhood": neighbourhood, "mode": mode, "rho_beta": float(rho),
                        "pair": pair, "runs": runs,
                    }
    return out


def target_problems(dataset: str, dataset_options: Mapping[str, Any], audit: Mapping[str, Any]) -> list[str]:
    """One message per target ρ_β of ``dataset`` that no noise multiplier reaches with the
    configured steps, δ and conversion (e.g. ρ_β = 0.52 at δ = 0.001 under the legacy
    order grid), naming the key: a parse-time check, so no audit job fails on it."""
    from dpaudit.metrics.identifiability import check_rho_beta_reachable

    where = f"config.audit.datasets.{dataset}"
    problems = []
    for index, rho in enumerate(dataset_options["rho_beta"]):
        try:
            check_rho_beta_reachable(float(rho), audit["steps"], dataset_options["delta"], audit["conversion"])
        except ValueError as error:
            problems.append(f"{where}.rho_beta[{index}]: {error} (keys: config.audit.conversion, "
                            f"config.audit.steps, {where}.delta)")
    return problems


def blocks(runs: int, block_size: int) -> list[int]:
    return list(range(math.ceil(int(runs) / int(block_size))))


def block_run_ids(block: int, runs: int, block_size: int) -> list[int]:
    start = int(block) * int(block_size)
    return list(range(start, min(start + int(block_size), int(runs))))
