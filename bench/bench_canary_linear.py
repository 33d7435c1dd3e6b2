"""Many-runs audit of the linear mechanisms on breast_cancer members: time and tightness (bound / ε).

R = 5,000 releases per side, Λ = 1 (the schema's default), ε ∈ {1, 2}; objective perturbation
with the batched exact Newton solver (default) and, with --lbfgs, the library's L-BFGS
mechanism called once per release. ``pair_epsilon`` (output perturbation) is β‖Δ‖, the
largest privacy loss of the chosen neighbour pair: no audit of that pair can exceed it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpaudit.data.datasets import features, prepare_dataset
from dpaudit.metrics.canary.linear import audit_linear


def breast_cancer_members() -> tuple[np.ndarray, np.ndarray]:
    table, info = prepare_dataset("breast_cancer", {}, {})
    members = np.asarray(table["split"].to_numpy(zero_copy_only=False)) == info["splits"]["members"]
    return features(table["x"]).astype(np.float64)[members], table["label"].to_numpy()[members]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--lbfgs", action="store_true")
    args = parser.parse_args()
    x, y = breast_cancer_members()
    solvers = ("newton", "lbfgs") if args.lbfgs else ("newton",)
    for mechanism in ("output_perturbation", "objective_perturbation"):
        for solver in solvers if mechanism == "objective_perturbation" else ("newton",):
            for epsilon in (1.0, 2.0):
                bounds, seconds = [], []
                for seed in range(args.seeds):
                    start = time.perf_counter()
                    result = audit_linear(x, y, mechanism=mechanism, epsilon=epsilon, lam=args.lam,
                                          releases=args.releases, alpha=0.05, seed=seed, solver=solver)
                    seconds.append(time.perf_counter() - start)
                    bounds.append(result["epsilon_lower_bound"])
                pair = result["pair_epsilon"]
                print(f"canary_linear {mechanism} solver={solver} n={result['n']} d={result['d']} lam={args.lam:g} "
                      f"eps={epsilon:g} R={args.releases} seeds={args.seeds} bound_mean={np.mean(bounds):.3f} "
                      f"bound_max={np.max(bounds):.3f} ratio_mean={np.mean(bounds) / epsilon:.3f} "
                      f"ceiling={result['ceiling']:.2f} pair_epsilon={'NA' if pair is None else f'{pair:.3f}'} "
                      f"row={result['row']} seconds={np.mean(seconds):.2f}")


if __name__ == "__main__":
    main()
