"""Speed of the Epsilon* library (Negoescu et al. 2023). Prints figures; asserts nothing.

Targets (issue): parametric eps* on 10^6 + 10^6 losses with the 2x10^6-point grid
<= 1 s; empirical eps* on 10^6 + 10^6 losses <= 2 s. Also timed: the mechanism-level
bound, the long-format table of one model (2 loss variants x 2 estimators), the
bootstrap interval (B replicates; per-replicate cost, both estimators), the ceiling,
the per-model Normal-fit check and the full Figs 4-5 simulation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from dpaudit.metrics.epsilon_star import (
    bootstrap_epsilon_star,
    empirical_ceiling,
    empirical_epsilon_star,
    epsilon_star_metrics,
    mechanism_epsilon_bar,
    normal_fit_check,
    normal_rates,
    parametric_epsilon_star,
)
from dpaudit.simulations.epsilon_star import simulate_gamma


def timed(fn: Callable[[], object], repeats: int = 5) -> tuple[float, float, object]:
    fn()  # warm-up: caches of the quantile grid, page faults
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), out


def main() -> None:
    rng = np.random.default_rng(0)
    n = 10**6
    members = rng.gamma(2.0, 5.0, n)
    nonmembers = rng.gamma(3.0, 5.0, n)
    delta = 1 / (n * np.log(n))

    best, med, res = timed(lambda: parametric_epsilon_star(members, nonmembers, delta))
    print(
        f"parametric_eps_star n_tr={n} n_pop={n} grid={res.grid_size} "
        f"best={best:.3f}s median={med:.3f}s eps*={res.eps_star:.4f} (target <= 1 s)"
    )
    best, med, _ = timed(lambda: normal_rates(res.fit))
    print(f"  of which normal_rates (grid CDFs) best={best:.3f}s median={med:.3f}s")

    best, med, res = timed(lambda: empirical_epsilon_star(members, nonmembers, delta))
    print(
        f"empirical_eps_star n_tr={n} n_pop={n} thresholds={res.grid_size} "
        f"best={best:.3f}s median={med:.3f}s eps*={res.eps_star:.4f} (target <= 2 s)"
    )

    fits = [
        parametric_epsilon_star(rng.gamma(2.0, 5.0, 10**5), rng.gamma(3.0, 5.0, 10**5), delta).fit
        for _ in range(5)
    ]
    best, med, bound = timed(lambda: mechanism_epsilon_bar(fits, delta))
    print(
        f"mechanism_eps_bar instances=5 grid={bound.n_grid} best={best:.3f}s median={med:.3f}s "
        f"eps_bar={bound.eps_bar:.4f} log_mean_exp={bound.log_mean_exp_eps_star:.4f}"
    )

    ce_members, ce_nonmembers = np.logaddexp(0.0, members), np.logaddexp(0.0, nonmembers)
    best, med, _ = timed(
        lambda: epsilon_star_metrics(
            {"logit": members, "ce": ce_members}, {"logit": nonmembers, "ce": ce_nonmembers}, delta
        ),
        repeats=2,
    )
    print(
        f"epsilon_star_metrics 2 variants x 2 estimators n={n}+{n} best={best:.3f}s median={med:.3f}s"
    )

    best, med, ceiling = timed(lambda: empirical_ceiling(n, n, delta))
    print(f"empirical_ceiling n_tr={n} n_pop={n} best={best:.4f}s ceiling={ceiling:.4f}")

    for size, resamples in ((10**4, 200), (10**6, 10)):
        tr, pop = members[:size], nonmembers[:size]
        for estimator in ("empirical", "parametric"):
            best, med, boot = timed(
                lambda e=estimator, t=tr, p=pop, r=resamples: bootstrap_epsilon_star(
                    t, p, delta, estimator=e, resamples=r), repeats=2)
            print(f"bootstrap {estimator} n={size}+{size} B={resamples} grid={boot.grid_size} best={best:.2f}s "
                  f"per replicate={best / resamples * 1e3:.1f} ms interval=[{boot.low:.3f}, {boot.high:.3f}]")

    best, med, check = timed(lambda: normal_fit_check(members[:10**4]), repeats=2)
    print(f"normal_fit_check n=10^4 n_samples=100 repeats=10 best={best:.2f}s p={check.p_value:.3g}")

    start = time.perf_counter()
    frame = simulate_gamma()
    print(
        f"simulate_gamma full Figs 4-5 ({len(frame)} rows) seconds={time.perf_counter() - start:.1f}"
    )


if __name__ == "__main__":
    main()
