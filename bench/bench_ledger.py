"""Benchmark: ledger and privacy cards for a 1,000-run grid (budget: <= 10 s together).

Run: .venv/bin/python bench/bench_ledger.py [n_runs]
Prints the wall time of each stage. The grid has 10 % baselines and DP-SGD runs
with all-distinct noise multipliers (the worst case for the RDP cache), and each
card gets a 201-point attack ROC.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dpaudit.dp.card import CardFigureRenderer, privacy_card_from_info
from dpaudit.dp.ledger import build_ledger
from dpaudit.metrics.mia import RocCurve


def make_grid(n_runs: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    infos = []
    for i in range(n_runs):
        if i % 10 == 0:
            infos.append({"dataset": f"ds{i % 3}", "run": f"run{i}", "mechanism": "baseline",
                          "epsilon": "inf"})
            continue
        infos.append({
            "dataset": f"ds{i % 3}", "run": f"run{i}", "mechanism": "dpsgd",
            "epsilon": float(rng.uniform(0.5, 8)), "delta": 1e-5, "accountant": "rdp",
            "neighbouring_relation": "add_remove", "sampling": "poisson",
            "unit_of_protection": "example",
            "noise_multiplier": float(rng.uniform(0.6, 3.0)),
            "sampling_probability": float(rng.choice([0.004, 0.01, 0.05])),
            "steps": int(rng.choice([500, 2000, 10000])),
        })
    return infos


def synthetic_roc(rng, n=201, size=5000) -> RocCurve:
    # A binormal ROC (shift mu) on a grid of FPR values that are counts/size, from flag-nobody (0, 0) on.
    from scipy import stats

    mu = rng.uniform(0.0, 1.0)
    fp = np.unique(np.r_[0, np.round(np.logspace(-4, 0, n) * size)]).astype(np.int64)
    tp = np.round(stats.norm.sf(stats.norm.isf(np.clip(fp / size, 1e-12, 1)) - mu) * size).astype(np.int64)
    return RocCurve(thresholds=np.r_[-np.inf, np.arange(fp.size - 1.0)], tp=tp, fp=fp, tpr=tp / size,
                    fpr=fp / size, n_members=size, n_nonmembers=size)


def main(n_runs: int = 1000) -> dict:
    infos = make_grid(n_runs)
    rng = np.random.default_rng(1)
    rocs = [synthetic_roc(rng) for _ in infos]

    t0 = time.perf_counter()
    ledger = build_ledger(infos)
    t_ledger = time.perf_counter() - t0

    t0 = time.perf_counter()
    for info, roc in zip(infos, rocs, strict=True):
        privacy_card_from_info(info, roc=roc, generalization_gap=0.05, utility=0.8)
    t_cards = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        renderer = CardFigureRenderer()
        t0 = time.perf_counter()
        for info, roc in zip(infos, rocs, strict=True):
            privacy_card_from_info(info, roc=roc, generalization_gap=0.05, utility=0.8,
                                   figure_path=Path(tmp) / f"{info['run']}.png",
                                   renderer=renderer)
        t_cards_fig = time.perf_counter() - t0

    result = {
        "n_runs": n_runs,
        "ledger_s": t_ledger,
        "cards_no_figure_s": t_cards,
        "cards_with_figure_s": t_cards_fig,
        "ledger_plus_cards_no_figure_s": t_ledger + t_cards,
        "ledger_plus_cards_with_figure_s": t_ledger + t_cards_fig,
    }
    for key, value in result.items():
        print(f"{key:34s} {value:.3f}" if isinstance(value, float) else f"{key:34s} {value}")
    print(ledger.totals[["dataset", "n_runs", "n_private", "basic_epsilon", "rdp_epsilon",
                         "release_all_epsilon"]].to_string(index=False))
    return result


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
