"""Privacy–utility landscape of source 002 (Figs 1–2): ε* against utility per strategy.

One point per strategy (grid row without its seed) at the mean over seeds, with
min–max bars on both axes (spec §9.13), the Pareto frontier (non-dominated
strategies and their upper convex hull, spec §2.8), and KDE marginals of the
per-model values for DP and non-DP strategies.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import gaussian_kde

from dpaudit.config import GRID_COLUMNS
from dpaudit.metrics.epsilon_star import aggregate_strategies
from dpaudit.metrics.pareto import pareto_frontier
from dpaudit.plots.privacy_utility import MECHANISM_STYLE, save_figure

STRATEGY_COLUMNS = [c for c in GRID_COLUMNS if c != "seed"]


def strategy_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per-strategy mean/min/max of ε* and utility with Pareto flags, one dataset at a time."""
    frames = []
    for dataset, rows in summary.groupby("dataset", sort=True):
        table = aggregate_strategies(rows, STRATEGY_COLUMNS, eps_col="epsilon_star", util_col="utility")
        front = pareto_frontier(table["eps_star_mean"].to_numpy(), table["util_mean"].to_numpy())
        table["nondominated"] = front.nondominated
        table["on_pareto"] = front.on_frontier
        table.insert(0, "dataset", dataset)
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def _kde(ax, values: np.ndarray, colour: str, vertical: bool) -> None:
    values = values[np.isfinite(values)]
    if values.size < 2 or np.ptp(values) == 0:
        # A KDE needs spread; show the values as ticks instead of inventing a density.
        for value in values:
            (ax.axhline if vertical else ax.axvline)(value, color=colour, alpha=0.6)
        return
    grid = np.linspace(values.min() - np.ptp(values) * 0.5, values.max() + np.ptp(values) * 0.5, 200)
    density = gaussian_kde(values)(grid)
    if vertical:
        ax.fill_betweenx(grid, density, color=colour, alpha=0.35)
    else:
        ax.fill_between(grid, density, color=colour, alpha=0.35)


def plot_landscape(summary: pd.DataFrame, strategies: pd.DataFrame, dataset: str, png: str | Path,
                   pdf: str | Path | None = None, *, utility_label: str = "utility", note: str = "") -> None:
    models = summary[summary["dataset"] == dataset]
    table = strategies[strategies["dataset"] == dataset]
    fig = plt.figure(figsize=(7.5, 6.5))
    grid = fig.add_gridspec(2, 2, width_ratios=(4, 1), height_ratios=(1, 4), wspace=0.05, hspace=0.05)
    ax = fig.add_subplot(grid[1, 0])
    top = fig.add_subplot(grid[0, 0], sharex=ax)
    right = fig.add_subplot(grid[1, 1], sharey=ax)
    for mechanism, (colour, marker) in MECHANISM_STYLE.items():
        rows = table[table["mechanism"] == mechanism]
        if rows.empty:
            continue
        x, y = rows["eps_star_mean"].to_numpy(), rows["util_mean"].to_numpy()
        ax.errorbar(x, y, xerr=[x - rows["eps_star_min"], rows["eps_star_max"] - x],
                    yerr=[y - rows["util_min"], rows["util_max"] - y], fmt=marker, color=colour,
                    ecolor=colour, elinewidth=0.8, capsize=2, alpha=0.85,
                    label="non-private" if mechanism == "baseline" else "DP-SGD")
        per_model = models[models["mechanism"] == mechanism]
        _kde(top, per_model["epsilon_star"].to_numpy(float), colour, vertical=False)
        _kde(right, per_model["utility"].to_numpy(float), colour, vertical=True)
    frontier = table.iloc[np.argsort(table["eps_star_mean"].to_numpy())]
    frontier = frontier[frontier["on_pareto"]]
    if len(frontier):
        ax.plot(frontier["eps_star_mean"], frontier["util_mean"], "-", color="0.2", lw=1.2,
                label="Pareto frontier (upper hull)", zorder=0)
    nondominated = table[table["nondominated"]]
    ax.scatter(nondominated["eps_star_mean"], nondominated["util_mean"], s=120, facecolors="none",
               edgecolors="0.2", lw=0.8, label="non-dominated")
    ax.set_xlabel("ε* (parametric, logit loss; mean over seeds, bars min–max)")
    ax.set_ylabel(f"{utility_label} (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best", framealpha=0.7)
    top.axis("off")
    right.axis("off")
    top.set_title(f"{dataset}: privacy–utility landscape{note}", fontsize=10)
    save_figure(fig, png, pdf)


def landscape_for_dataset(table: pd.DataFrame, dataset: str, dataset_info: dict, png, pdf) -> pd.DataFrame:
    """Build the strategy table of one dataset from the metrics table and draw its landscape."""
    from dpaudit.aggregate import summary_from_table

    summary = summary_from_table(table[table["dataset"] == dataset])
    missing = summary["epsilon_star"].isna() | summary["utility"].isna()
    if missing.all():
        raise ValueError(f"no ε* / utility values for dataset {dataset!r}; is metrics.epsilon_star enabled?")
    strategies = strategy_table(summary[~missing])
    kinds = table.loc[(table["dataset"] == dataset) & (table["metric"] == "utility"), "utility_kind"].dropna().unique()
    label = {"auroc": "AUROC on the non-training set", "accuracy": "test accuracy"}.get(
        kinds[0] if len(kinds) == 1 else "", "utility")
    note = f"\n{dataset_info['version_note']}" if dataset_info.get("version_note") else ""
    plot_landscape(summary[~missing], strategies, dataset, png, pdf, utility_label=label, note=note)
    return strategies
