"""Per-strategy aggregation of Epsilon* over seeds (Negoescu et al. Figs 1-2) and the mechanism-level ε̄."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dpaudit.metrics.epsilon_star.estimators import NormalFit
from dpaudit.metrics.epsilon_star.mechanism import log_mean_exp, mechanism_epsilon_bar

FIT_COLUMNS = ("mu_tr", "sd_tr", "mu_pop", "sd_pop")


def aggregate_strategies(
    frame: pd.DataFrame,
    by: Sequence[str],
    *,
    eps_col: str = "eps_star",
    util_col: str = "utility",
    pareto_within: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mean/min/max over seeds of eps* and utility per strategy (Negoescu et al. 2023, Sec. 4: mean over 5 instances, min-max bars).

    ``frame`` has one row per model. Adds n_models and log_mean_exp_eps_star
    (Theorem 2's bound). With ``pareto_within`` (columns, [] = all rows as one
    plane) the strategy means are also marked ``nondominated`` and
    ``on_pareto`` (vertex of the upper convex hull; see ``dpaudit.metrics.pareto``).
    """
    from dpaudit.metrics.pareto import pareto_frontier

    by = list(by)
    grouped = frame.groupby(by, sort=True, dropna=False)
    out = grouped.agg(
        n_models=(eps_col, "size"),
        eps_star_mean=(eps_col, "mean"),
        eps_star_min=(eps_col, "min"),
        eps_star_max=(eps_col, "max"),
        util_mean=(util_col, "mean"),
        util_min=(util_col, "min"),
        util_max=(util_col, "max"),
        log_mean_exp_eps_star=(eps_col, log_mean_exp),
    ).reset_index()
    out = out.astype(
        {
            "n_models": "int64",
            **{
                c: "float64"
                for c in (
                    "eps_star_mean",
                    "eps_star_min",
                    "eps_star_max",
                    "util_mean",
                    "util_min",
                    "util_max",
                    "log_mean_exp_eps_star",
                )
            },
        }
    )
    if pareto_within is not None:
        nondominated = np.zeros(len(out), dtype=bool)
        on_pareto = np.zeros(len(out), dtype=bool)
        keys = list(pareto_within)
        groups = (
            out.groupby(keys, sort=False, dropna=False).indices
            if keys
            else {(): np.arange(len(out))}
        )
        for idx in groups.values():
            idx = np.asarray(idx)
            front = pareto_frontier(
                out["eps_star_mean"].to_numpy()[idx], out["util_mean"].to_numpy()[idx]
            )
            nondominated[idx] = front.nondominated
            on_pareto[idx] = front.on_frontier
        out["nondominated"] = nondominated
        out["on_pareto"] = on_pareto
    return out




def strategy_epsilon_bar(models: pd.DataFrame, by: Sequence[str], *, n_grid: int = 200_000) -> pd.DataFrame:
    """Mechanism-level ε̄ of each strategy from its seeds' Normal fits (Negoescu et al. 2023, Theorems 2 and 4).

    ``models`` has one row per model with the parametric fit (mu_tr, sd_tr,
    mu_pop, sd_pop) and delta. Returns per strategy eps_bar, the Theorem 2
    bound recomputed on the same FPR grid (eps_bar_log_mean_exp; ε̄ never
    exceeds it), the grid size and δ. A strategy with a missing fit gets NaN:
    ε̄ averages over the seeds, so it cannot skip one.
    """
    by = list(by)
    missing = [c for c in (*FIT_COLUMNS, "delta") if c not in models.columns]
    if missing:
        raise ValueError(f"models lack column(s) {missing} needed for the mechanism-level bound")
    rows = []
    for key, group in models.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        deltas = group["delta"].unique()
        if deltas.size != 1:
            raise ValueError(f"strategy {dict(zip(by, key, strict=True))} mixes δ values {sorted(deltas)}")
        fits = group[list(FIT_COLUMNS)].to_numpy(np.float64)
        row = dict(zip(by, key, strict=True))
        row |= {"eps_bar": np.nan, "eps_bar_log_mean_exp": np.nan, "eps_bar_n_grid": n_grid,
                "eps_bar_delta": float(deltas[0])}
        if np.isfinite(fits).all() and (fits[:, [1, 3]] > 0).all():
            bound = mechanism_epsilon_bar([NormalFit(*f) for f in fits], float(deltas[0]), n_grid=n_grid)
            row |= {"eps_bar": bound.eps_bar, "eps_bar_log_mean_exp": bound.log_mean_exp_eps_star,
                    "eps_bar_n_grid": bound.n_grid}
        rows.append(row)
    out = pd.DataFrame(rows, columns=[*by, "eps_bar", "eps_bar_log_mean_exp", "eps_bar_n_grid", "eps_bar_delta"])
    return out.astype({**{c: models[c].dtype for c in by}, "eps_bar": "float64", "eps_bar_log_mean_exp": "float64", "eps_bar_n_grid": "int64",
                       "eps_bar_delta": "float64"})
