"""Canary audit: estimator cost on m = 10,000 canaries, audit-twin cost against the released
run's training, and the GDP estimate against the ideal canary (numpy mirror) at the
breast_cancer settings. Ratios are measured in one run (issue 17); no assertions.

Issue 22: the claim-curve test with its curve at m = 10,000 (target ≤ 1 s), the
detectable noise factor per run at the default datasets' settings (target ≤ 5 s), and
the detectable factor at m = 5,000 / 20,000 / 50,000 for ε = 1, 4, 16 (q, steps and δ
from config/config.yaml: n members from each dataset's split, its batch size and
epochs, δ = auto, the config's accountant and batch scheme).

    python bench/bench_canary.py [--skip-twin] [--only claim|power|power-sizes]
"""

from __future__ import annotations

import argparse
import logging
import time
from functools import partial

import numpy as np

from dpaudit.dp import accounting
from dpaudit.dp import canary_bounds as cb
from dpaudit.dp.canary_power import subsampled_gaussian_llr


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


DATASETS = {"synthetic": {"n": 2000, "d": 20, "classes": 2, "separation": 1.0, "seed": 0}, "breast_cancer": {},
            "digits": {}}


def twin_cost(canaries=(5_000, 20_000, 50_000), repeats: int = 2) -> None:
    """Training-loop time of the released run and of its audit twin (``train_seconds`` of each,
    tracing included), same process and data, after one warm-up of each; best of ``repeats``.
    The twin's wall time adds the accountant's profile and the scoring (printed too)."""
    from dpaudit.contract.delta import resolve_delta
    from dpaudit.data.datasets import prepare_dataset

    log = logging.getLogger("bench_canary")
    print("audit twin vs released training, DP-SGD ε = 4, 10 epochs, 100 input canaries (loop seconds, best of "
          f"{repeats}):")
    for name, options in DATASETS.items():
        table, info = prepare_dataset(name, {}, options)
        examples = table.to_pandas()
        params = {"mechanism": "dpsgd", "target_epsilon": 4.0, "clip_norm": 1.0, "epochs": 10, "batch_size": 64,
                  "learning_rate": 0.05, "momentum": 0.9, "hidden_units": [64], "seed": 0,
                  "delta": resolve_delta("auto", info["n_members"])[0]}
        released = partial(_released_seconds, examples, info["splits"], params, log)
        twin = partial(_twin_seconds, examples, info["splits"], params, log)
        released()
        twin(100)
        base = min(released() for _ in range(repeats))
        for m in canaries:
            loop, wall = min(twin(m) for _ in range(repeats))
            print(f"  {name:<14s} m = {m:>6,}: released {base:5.2f} s, twin {loop:5.2f} s (ratio {loop / base:4.2f}); "
                  f"twin job's training call {wall:5.2f} s")


def _released_seconds(examples, splits, params, log) -> float:
    import tempfile

    from dpaudit.training.train import train_model

    with tempfile.TemporaryDirectory() as tmp:
        return train_model(examples, splits, params, f"{tmp}/m.keras", threads=1, log=log)["train_seconds"]


def _twin_seconds(examples, splits, params, log, m: int) -> tuple[float, float]:
    from dpaudit.audit.twin import run_canary_twin

    _, record = run_canary_twin(examples, splits, params, gradient_canaries=m, input_canaries=100,
                                gradient_norm_factor=10.0, seed=0, threads=1, log=log)
    return record["twin_loop_seconds"], record["twin_train_seconds"]


def default_settings() -> list[dict]:
    """q, steps, δ and the calibrated σ of each default dataset's DP-SGD runs (config/config.yaml)."""
    from pathlib import Path

    import yaml

    from dpaudit.contract.delta import resolve_delta
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.training import sampling

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
    training = config["training"]
    grid = next(g for g in config["grid"] if "dpsgd" in g["mechanism"])
    batch, epochs = int(grid["batch_size"][0]), int(grid["epochs"][0])
    out = []
    for name, params in config["datasets"].items():
        _, info = prepare_dataset(name, {}, params or {})
        n = int(info["n_members"])
        q, steps = batch / n, sampling.steps_per_epoch(n, batch) * epochs
        delta = resolve_delta(training["delta"], n)[0]
        for eps in grid["target_epsilon"]:
            sigma = accounting.calibrate_noise(float(eps), q, steps, delta, training["accountant"],
                                               training["sampling"])
            out.append({"dataset": name, "n": n, "q": q, "steps": steps, "delta": delta, "epsilon": float(eps),
                        "sigma": sigma, "sampling": training["sampling"]})
    return out


def claim_curve_cost(m: int = 10_000, repeats: int = 3) -> None:
    """The claimed curve (PLD of the accountant's event) and the claim-curve test on m ideal canaries."""
    from dpaudit.dp.tradeoff import accountant_tradeoff

    q, steps, delta = 64 / 284, 40, 6.2e-4
    print(f"claim-curve test, breast_cancer settings, m = {m:,} ideal canaries (best of {repeats}):")
    for eps in (1.0, 4.0, 16.0):
        sigma = accounting.calibrate_noise(eps, q, steps, delta, "rdp", "poisson")
        rng = np.random.default_rng(0)
        included = rng.random(m) < 0.5
        u = ((rng.random((steps, m)) < q) & included) + sigma * rng.standard_normal((steps, m))
        scores = subsampled_gaussian_llr(u, q, sigma)
        curve_s, test_s = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            curve = accountant_tradeoff(sigma, q, steps, points=[(eps, delta)])
            middle = time.perf_counter()
            result = cb.claim_curve_test(scores, included, curve, alpha=0.05, delta=delta)
            curve_s.append(middle - start)
            test_s.append(time.perf_counter() - middle)
        curve_s, test_s = min(curve_s), min(test_s)
        print(f"  ε = {eps:4g}: curve {curve_s:.3f} s + test {test_s:.3f} s = {curve_s + test_s:.3f} s "
              f"(rejected {result.rejected}, p {result.p_value:.3g}, many-trials ε {result.epsilon:.2f} "
              f"of ceiling {result.ceiling:.2f})")


def detectable_factors(settings: list[dict], sizes=(5_000,)) -> None:
    """detectable_noise_factor per run (curve included in the time) at each setting and m."""
    from dpaudit.dp.canary_power import detectable_noise_factor
    from dpaudit.dp.tradeoff import accountant_tradeoff

    print("detectable noise factor (power 0.8, α = 0.05, 40 thresholds per tail, 100 repetitions, "
          "tolerance 0.005, seed 0):")
    for s in settings:
        for m in sizes:
            start = time.perf_counter()
            curve = accountant_tradeoff(s["sigma"], s["q"], s["steps"], s["sampling"],
                                        points=[(s["epsilon"], s["delta"])])
            out = detectable_noise_factor(canaries=m, q=s["q"], steps=s["steps"], sigma=s["sigma"], curve=curve,
                                          alpha=0.05, delta=s["delta"])
            total = time.perf_counter() - start
            print(f"  {s['dataset']:<13s} n = {s['n']:4d} q = {s['q']:.3f} T = {s['steps']:3d} "
                  f"ε = {s['epsilon']:4g} σ = {s['sigma']:.3f} m = {m:6,}: factor {out['factor']:.3f} "
                  f"(power {out['power_at_factor']:.2f}; {out['power_at_next']:.2f} at {out['next_factor']:.3f}) "
                  f"{total:5.2f} s ({out['evaluations']} powers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-twin", action="store_true", help="leave out the TensorFlow twin timing")
    parser.add_argument("--only", choices=("claim", "power", "power-sizes", "twin"),
                        help="run one issue-22 part only")
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp_accounting's RDP order warnings
    if args.only is None:
        estimators()
        ideal_tightness()
    if args.only in (None, "claim"):
        claim_curve_cost()
    if args.only in (None, "power", "power-sizes"):
        settings = default_settings()
        detectable_factors(settings, (5_000,) if args.only != "power-sizes" else (5_000, 20_000, 50_000))
    if (args.only is None and not args.skip_twin) or args.only == "twin":
        twin_cost()


if __name__ == "__main__":
    main()
