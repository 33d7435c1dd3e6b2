"""Epsilon* simulations of Negoescu et al. 2023, App. B (Figs 3-5) and the Fig. 6 KS plot.

* Fig. 3: members ~ N(0, 1), non-members ~ N(3, 1); the first two terms of
  eq. 7 against (TPR + FPR)/2, from the true CDFs and from the empirical CDFs
  of samples; FPR and FNR below 1e-9 removed, delta = 0 (Negoescu et al. 2023, Fig. 3; not stated in
  the paper).
* Figs 4-5: members ~ Gamma(2, 5), non-members ~ Gamma(2 + d, 5),
  d in {0, 1, 2, 3}, n in {10^3, 10^4, 10^5} per set, 10 repeats; eps* from the
  true Gamma CDFs, the empirical CDFs and the parametric fit. delta = 1e-5
  (the paper does not state it; our choice).
* Fig. 6: KS p-values of GMM fits to transformed member losses (App. B.2).

Functions return tidy frames; the figures are drawn by
``dpaudit.plots.epsilon_star_simulations``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import special, stats

from dpaudit.metrics.epsilon_star import (
    GRID_SIZE,
    EpsilonStarResult,
    Rates,
    distribution_epsilon_star,
    distribution_rates,
    empirical_epsilon_star,
    empirical_rates,
    epsilon_star_from_rates,
    gmm_ks_goodness_of_fit,
    parametric_epsilon_star,
    quantile_levels,
    transform_losses,
)

__all__ = [
    "DISTANCES",
    "FIG3_CUT",
    "GAMMA_SCALE",
    "GAMMA_SHAPE",
    "N_REPEATS",
    "SIM_DELTA",
    "SIZES",
    "fig6_ks_table",
    "gamma_true_epsilon_star",
    "normal_true_epsilon_star",
    "simulate_fig3",
    "simulate_gamma",
    "summarize_gamma",
    "tail_levels",
]

GAMMA_SHAPE = 2.0  # k1 of App. B.1
GAMMA_SCALE = 5.0  # theta1 of App. B.1
DISTANCES: tuple[int, ...] = (0, 1, 2, 3)
SIZES: tuple[int, ...] = (10**3, 10**4, 10**5)
N_REPEATS = 10
SIM_DELTA = 1e-5  # not stated in the paper; our choice
FIG3_CUT = 1e-9  # App. B: "we remove FNR and FPR values less than 10^-9"

METHODS: tuple[str, ...] = ("true", "empirical", "parametric")


# ---------------------------------------------------------------------------
# true-CDF eps*
# ---------------------------------------------------------------------------


def tail_levels(n_levels: int, smallest: float = 1e-15) -> np.ndarray:
    """Quantile levels log-spaced towards both 0 and 1, so both tails are resolved.

    Only threshold positions come from these levels; the rates themselves are
    recomputed with cdf/sf, so the rounding of 1 - level near 1 is harmless.
    """
    half = np.logspace(np.log10(smallest), np.log10(0.5), max(int(n_levels) // 2, 2))
    return np.concatenate([half, 1.0 - half[:-1][::-1]])


def normal_true_epsilon_star(
    mu_tr: float = 0.0,
    mu_pop: float = 3.0,
    *,
    sd: float = 1.0,
    delta: float = 0.0,
    cut: float = FIG3_CUT,
    n_levels: int = 200_000,
) -> EpsilonStarResult:
    """eps* from the true CDFs of N(mu_tr, sd) members vs N(mu_pop, sd) non-members (Fig. 3a).

    Only FPR, FNR <= cut are removed (no upper filter), as in App. B.
    """
    return distribution_epsilon_star(
        stats.norm(mu_tr, sd),
        stats.norm(mu_pop, sd),
        delta,
        levels=tail_levels(n_levels),
        lower=cut,
        upper_margin=0.0,
    )


@functools.lru_cache(maxsize=8)
def _gamma_quantiles(shape: float, scale: float, grid_size: int) -> np.ndarray:
    q = quantile_levels(grid_size)[0]
    out = special.gammaincinv(shape, q) * scale
    out.flags.writeable = False
    return out


def gamma_true_epsilon_star(
    d: float,
    delta: float = SIM_DELTA,
    *,
    shape: float = GAMMA_SHAPE,
    scale: float = GAMMA_SCALE,
    grid_size: int = GRID_SIZE,
) -> EpsilonStarResult:
    """eps* from the true CDFs of Gamma(shape, scale) members vs Gamma(shape + d, scale).

    Same grid (grid_size quantiles of each distribution) and filter (delta,
    1 - delta) as the parametric variant, as in App. B.1. On each set's own
    quantiles its rates are the levels themselves.
    """
    q, q_c, _ = quantile_levels(grid_size)
    tau_tr = _gamma_quantiles(float(shape), float(scale), int(grid_size))
    tau_pop = _gamma_quantiles(float(shape + d), float(scale), int(grid_size))
    rates = Rates(
        threshold=np.concatenate([tau_tr, tau_pop]),
        fpr=np.concatenate([special.gammainc(shape + d, tau_tr / scale), q]),
        tnr=np.concatenate([special.gammaincc(shape + d, tau_tr / scale), q_c]),
        tpr=np.concatenate([q, special.gammainc(shape, tau_pop / scale)]),
        fnr=np.concatenate([q_c, special.gammaincc(shape, tau_pop / scale)]),
    )
    return epsilon_star_from_rates(rates, delta, lower=delta)


# ---------------------------------------------------------------------------
# Figs 4-5: Gamma simulations
# ---------------------------------------------------------------------------

_GAMMA_COLUMNS = {
    "d": "int64",
    "n": "Int64",
    "rep": "Int64",
    "method": "str",
    "delta": "float64",
    "eps_star": "float64",
    "on_boundary": "boolean",
    "n_kept": "int64",
    "seed": "int64",
}


def simulate_gamma(
    *,
    distances: Iterable[int] = DISTANCES,
    sizes: Iterable[int] = SIZES,
    n_repeats: int = N_REPEATS,
    delta: float = SIM_DELTA,
    seed: int = 0,
    shape: float = GAMMA_SHAPE,
    scale: float = GAMMA_SCALE,
    grid_size: int = GRID_SIZE,
    include_true: bool = True,
) -> pd.DataFrame:
    """eps* of Gamma losses: one row per (d, n, rep, method) (Fig. 4 is the d = 0 slice).

    Repeat ``rep`` of (d, n) draws members then non-members from
    ``np.random.default_rng([seed, d, n, rep])``, so any cell can be rerun
    alone. 'true' rows do not depend on the sample: n and rep are NA.
    """
    rows: list[dict] = []

    def add(d, n, rep, method, res: EpsilonStarResult) -> None:
        rows.append(
            {
                "d": d,
                "n": n,
                "rep": rep,
                "method": method,
                "delta": float(delta),
                "eps_star": res.eps_star,
                "on_boundary": res.on_boundary,
                "n_kept": res.n_kept,
                "seed": int(seed),
            }
        )

    for d in distances:
        if float(d) != int(d):
            # d keys the per-cell seed and the int64 column of sim_gamma.parquet
            raise ValueError(f"d must be integer-valued, got {d}")
        d = int(d)
        if include_true:
            add(
                d,
                None,
                None,
                "true",
                gamma_true_epsilon_star(d, delta, shape=shape, scale=scale, grid_size=grid_size),
            )
        for n in sizes:
            for rep in range(n_repeats):
                rng = np.random.default_rng([int(seed), int(d), int(n), rep])
                members = rng.gamma(shape, scale, int(n))
                nonmembers = rng.gamma(shape + d, scale, int(n))
                add(d, n, rep, "empirical", empirical_epsilon_star(members, nonmembers, delta))
                add(
                    d,
                    n,
                    rep,
                    "parametric",
                    parametric_epsilon_star(members, nonmembers, delta, grid_size=grid_size),
                )
    frame = pd.DataFrame(rows, columns=list(_GAMMA_COLUMNS))
    return frame.astype(_GAMMA_COLUMNS)


def summarize_gamma(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, std (ddof=1) and count of eps* per (d, n, method); 'true' repeated for every n."""
    sampled = frame[frame["method"] != "true"]
    out = (
        sampled.groupby(["d", "n", "method"], sort=True)["eps_star"]
        .agg(mean="mean", std="std", count="size")
        .reset_index()
    )
    true = frame[frame["method"] == "true"][["d", "eps_star"]]
    if not true.empty:
        grid = out[["d", "n"]].drop_duplicates()
        true = grid.merge(true, on="d").rename(columns={"eps_star": "mean"})
        true = true.assign(method="true", std=0.0, count=1)
        out = pd.concat([out, true[out.columns]], ignore_index=True)
    out = out.astype(
        {
            "d": "int64",
            "n": "Int64",
            "method": "str",
            "mean": "float64",
            "std": "float64",
            "count": "int64",
        }
    )
    return out.sort_values(["d", "n", "method"], ignore_index=True)


# ---------------------------------------------------------------------------
# Fig. 3: the first two terms of eq. 7
# ---------------------------------------------------------------------------


def _fig3_panel(rates: Rates, panel: str, delta: float, cut: float) -> pd.DataFrame:
    keep = (rates.fpr > cut) & (rates.fnr > cut)
    fpr, fnr, tpr, tnr = rates.fpr[keep], rates.fnr[keep], rates.tpr[keep], rates.tnr[keep]
    frame = pd.DataFrame(
        {
            "panel": panel,
            "x_half_tpr_fpr": 0.5 * (tpr + fpr),
            "term1": (tpr - delta) / fpr,  # (1 - delta - FNR) / FPR
            "term2": (tnr - delta) / fnr,  # (1 - delta - FPR) / FNR
        }
    )
    return frame.sort_values("x_half_tpr_fpr", ignore_index=True)


def simulate_fig3(
    *,
    n: int = 10**4,
    seed: int = 0,
    delta: float = 0.0,
    cut: float = FIG3_CUT,
    mu_tr: float = 0.0,
    mu_pop: float = 3.0,
    n_levels: int = 20_000,
) -> pd.DataFrame:
    """Curves of Fig. 3: panel 'true' (CDFs at tail-dense quantiles) and 'empirical' (n per set).

    Columns panel, x_half_tpr_fpr, term1, term2, n (NA for 'true'), delta, seed.
    """
    true = _fig3_panel(
        distribution_rates(stats.norm(mu_tr, 1.0), stats.norm(mu_pop, 1.0), tail_levels(n_levels)),
        "true",
        delta,
        cut,
    )
    rng = np.random.default_rng([int(seed), int(n)])
    members = rng.normal(mu_tr, 1.0, int(n))
    nonmembers = rng.normal(mu_pop, 1.0, int(n))
    emp = _fig3_panel(empirical_rates(members, nonmembers), "empirical", delta, cut)
    true["n"] = pd.NA
    emp["n"] = int(n)
    frame = pd.concat([true, emp], ignore_index=True)
    frame["delta"] = float(delta)
    frame["seed"] = int(seed)
    return frame.astype(
        {
            "panel": "str",
            "x_half_tpr_fpr": "float64",
            "term1": "float64",
            "term2": "float64",
            "n": "Int64",
            "delta": "float64",
            "seed": "int64",
        }
    )


# ---------------------------------------------------------------------------
# Fig. 6 data
# ---------------------------------------------------------------------------


def fig6_ks_table(
    panels: Mapping[str, tuple[ArrayLike, ArrayLike]],
    *,
    n_components: Iterable[int] = range(1, 21),
    n_samples: Iterable[int] = range(100, 1001, 100),
    n_repeats: int = 10,
    seed: int = 0,
    alpha: float = 1.0,
) -> pd.DataFrame:
    """GMM/KS table of the transformed *member* losses of each panel (App. B.2, Fig. 6).

    ``panels`` maps a label (e.g. 'no DP', 'DP-SGD') to (member_losses,
    nonmember_losses); both are needed because the min-max is pooled.
    """
    comps, sizes = list(n_components), list(n_samples)
    frames = []
    for panel, (members, nonmembers) in panels.items():
        phi_tr, _, _, _ = transform_losses(members, nonmembers, alpha)
        gof = gmm_ks_goodness_of_fit(
            phi_tr, n_components=comps, n_samples=sizes, n_repeats=n_repeats, seed=seed
        )
        frames.append(gof.assign(panel=panel))
    frame = pd.concat(frames, ignore_index=True)
    return frame.astype({"panel": "str"})[
        ["panel", "n_components", "n_samples", "rep", "ks_stat", "p_value"]
    ]
