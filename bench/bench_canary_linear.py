"""Many-runs audit of the linear mechanisms on breast_cancer members: time and tightness (bound / ε).

R = 5,000 releases per side, Λ = 1 (the schema's default), ε ∈ {1, 2}; objective perturbation
with the batched exact Newton solver (default) and, with --lbfgs, the library's L-BFGS
mechanism called once per release. ``pair_epsilon`` (output perturbation) is β‖Δ‖, the
largest privacy loss of the chosen neighbour pair: no audit of that pair can exceed it;
``oracle_expected`` is what the best threshold, known in advance, would certify at the expected
evaluation counts of the split (the same n_eval), a yardstick for the audit's bound.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpaudit.audit.linear_audit import linear_release_scores
from dpaudit.data.datasets import prepare_dataset
from dpaudit.data.examples import features
from dpaudit.dp.hypothesis import epsilon_from_counts
from dpaudit.metrics.canary.many_runs import bound_from_scores


def breast_cancer_members() -> tuple[np.ndarray, np.ndarray]:
    table, info = prepare_dataset("breast_cancer", {}, {})
    members = np.asarray(table["split"].to_numpy(zero_copy_only=False)) == info["splits"]["members"]
    return features(table["x"]).astype(np.float64)[members], table["label"].to_numpy()[members]


def oracle_bound(d: int, pair_epsilon: float, n_eval: int, alpha: float = 0.05, draws: int = 4_000_000) -> float:
    """What the best threshold, known in advance, certifies at the EXPECTED counts (output perturbation).

    The privacy loss of an L2-Laplace pair depends only on d and β‖Δ‖: in units of 1/β,
    l = ‖v − e‖ − ‖v‖ with ‖v‖ ~ Gamma(d, 1), cos(v, e) ~ 2 Beta((d−1)/2, (d−1)/2) − 1 and
    ‖e‖ = β‖Δ‖; under D′ it is distributed as −l. A yardstick, not a bound.
    """
    rng = np.random.default_rng(0)
    radius = rng.gamma(d, 1.0, draws)
    cosine = 2 * rng.beta((d - 1) / 2, (d - 1) / 2, draws) - 1
    loss = np.sort(np.sqrt(radius**2 - 2 * radius * pair_epsilon * cosine + pair_epsilon**2) - radius)
    thresholds = np.linspace(0.0, pair_epsilon, 400)
    tpr = 1 - np.searchsorted(loss, thresholds, side="left") / draws
    fpr = np.searchsorted(loss, -thresholds, side="right") / draws
    return float(np.max(epsilon_from_counts(np.rint(n_eval * tpr).astype(int), np.rint(n_eval * fpr).astype(int),
                                            n_eval, n_eval, delta=0.0, alpha=alpha)))


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
                    result = linear_release_scores(x, y, mechanism=mechanism, epsilon=epsilon, lam=args.lam,
                                                   releases=args.releases, seed=seed, solver=solver, alpha=None)
                    result |= bound_from_scores(result["scores"], delta=0.0, alpha=0.05, seed=seed)
                    seconds.append(time.perf_counter() - start)
                    bounds.append(result["epsilon_lower_bound"])
                pair = result["pair_epsilon"]
                oracle = (f"{oracle_bound(result['d'], pair, result['n_eval_included']):.3f}" if pair is not None
                          else "NA")
                print(f"canary_linear {mechanism} solver={solver} n={result['n']} d={result['d']} lam={args.lam:g} "
                      f"eps={epsilon:g} R={args.releases} seeds={args.seeds} bound_mean={np.mean(bounds):.3f} "
                      f"bound_max={np.max(bounds):.3f} ratio_mean={np.mean(bounds) / epsilon:.3f} "
                      f"ceiling={result['ceiling']:.2f} pair_epsilon={'NA' if pair is None else f'{pair:.3f}'} "
                      f"oracle_expected={oracle} row={result['row']} seconds={np.mean(seconds):.2f}")


if __name__ == "__main__":
    main()
