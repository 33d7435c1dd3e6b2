"""Canary audit: estimator cost on m = 10,000 canaries, audit-twin cost against the released
run's training, and the GDP estimate against the ideal canary (numpy mirror) at the
breast_cancer settings. Ratios are measured in one run (issue 17); no assertions.

    python bench/bench_canary.py [--skip-twin]
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from dpaudit.dp import accounting
from dpaudit.dp import canary_bounds as cb
from dpaudit.training.canary import subsampled_gaussian_llr


def estimators(m: int = 10_000, repeats: int = 3) -> None:
    rng = np.random.default_rng(0)
    included = rng.random(m) < 0.5
    # Ideal white-box canaries of DP-SGD at breast_cancer settings and ε = 4.
    q, steps, delta = 64 / 284, 40, 6.2e-4
    sigma = accounting.calibrate_noise(4.0, q, steps, delta, "rdp", "poisson")
    u = ((rng.random((steps, m)) < q) & included) + sigma * rng.standard_normal((steps, m))
    scores = subsampled_gaussian_llr(u, q, sigma)
    cases = {
        "one-run (Steinke), 20 candidates": lambda: cb.one_run_audit(scores, included, alpha=0.05, delta=delta),
        "one-run f-DP, 20 candidates": lambda: cb.one_run_audit(scores, included, alpha=0.05, delta=delta,
                                                              method="fdp"),
        "GDP estimate, 40 ranks per tail": lambda: cb.gdp_estimate(scores, included, alpha=0.05, delta=delta),
        "GDP estimate, every threshold": lambda: cb.gdp_estimate(scores, included, alpha=0.05, delta=delta,
                                                                 per_tail=None),
        "guesses curve (figure)": lambda: cb.guesses_curve(scores, included, alpha=0.05, delta=delta),
    }
    print(f"estimators on m = {m:,} canaries (best of {repeats}):")
    for name, call in cases.items():
        best = min(_timed(call) for _ in range(repeats))
        print(f"  {name:<36s} {best:7.3f} s")


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def ideal_tightness(seeds: int = 7) -> None:
    """Median GDP estimate / accountant ε of ideal canaries (2,500 per side on average)."""
    q, steps, delta = 64 / 284, 40, 6.2e-4
    print("ideal white-box canaries, breast_cancer settings (q = 0.225, 40 steps, δ = 6.2e-4, m = 5,000):")
    for eps in (1.0, 4.0, 16.0):
        sigma = accounting.calibrate_noise(eps, q, steps, delta, "rdp", "poisson")
        values = []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            included = rng.random(5000) < 0.5
            u = ((rng.random((steps, 5000)) < q) & included) + sigma * rng.standard_normal((steps, 5000))
            est = cb.gdp_estimate(subsampled_gaussian_llr(u, q, sigma), included, alpha=0.05, delta=delta)
            values.append(est.epsilon / eps)
        print(f"  ε = {eps:4g}: GDP estimate / ε median {np.median(values):.2f} (min {min(values):.2f}, "
              f"max {max(values):.2f}, {seeds} seeds)")


def twin_cost() -> None:
    """Wall time of the released run's training and of its audit twin, same process and data."""
    from dpaudit.contract.delta import resolve_delta
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.training.canary import run_canary_twin
    from dpaudit.training.train import train_model

    log = logging.getLogger("bench_canary")
    table, info = prepare_dataset("breast_cancer", {}, {})
    examples = table.to_pandas()
    params = {"mechanism": "dpsgd", "target_epsilon": 4.0, "clip_norm": 1.0, "epochs": 10, "batch_size": 64,
              "learning_rate": 0.05, "momentum": 0.9, "hidden_units": [64], "seed": 0,
              "delta": resolve_delta("auto", info["n_members"])[0]}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        # warm-up: TensorFlow's start and tracing are paid once per job by both rules
        train_model(examples, info["splits"], params, f"{tmp}/warm.keras", threads=1, log=log)
        start = time.perf_counter()
        train_model(examples, info["splits"], params, f"{tmp}/m.keras", threads=1, log=log)
        released = time.perf_counter() - start
    start = time.perf_counter()
    run_canary_twin(examples, info["splits"], params, gradient_canaries=5000, input_canaries=100,
                    gradient_norm_factor=10.0, seed=0, threads=1, log=log)
    twin = time.perf_counter() - start
    print(f"breast_cancer DP-SGD ε = 4, 10 epochs: released training {released:.2f} s, audit twin with 5,000 "
          f"gradient + 100 input canaries {twin:.2f} s: ratio {twin / released:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-twin", action="store_true", help="leave out the TensorFlow twin timing")
    args = parser.parse_args()
    estimators()
    ideal_tightness()
    if not args.skip_twin:
        twin_cost()


if __name__ == "__main__":
    main()
