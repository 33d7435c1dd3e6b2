"""Privacy–utility landscape of Negoescu et al. (Figs 1–2): ε* against utility per strategy.

One point per strategy (grid row without its seed) at the mean over seeds, with
min–max bars on both axes (Negoescu et al. 2023, Sec. 4), a label naming the strategy (target ε,
plus the grid values that vary), the Pareto frontier (non-dominated strategies
and their upper convex hull, Negoescu et al. 2023, Sec. 4), the mechanism-level bound ε̄ of each
strategy (Theorems 2 and 4), and marginal densities of the per-model values for
DP and non-DP strategies, drawn only when a group has enough models to make a
density meaningful, on ε*'s support [0, ∞). A footnote counts the runs whose ε*
sits on its ceiling or filter boundary, whose Normal fit is rejected, or that
have no ε* at all (no threshold kept; those are not plotted).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import gaussian_kde

from dpaudit.config import GRID_COLUMNS
from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.mechanisms import MECHANISM_LABELS
from dpaudit.metrics.epsilon_star import aggregate_strategies, strategy_epsilon_bar
from dpaudit.metrics.pareto import pareto_frontier
from dpaudit.plots.privacy_utility import MECHANISM_STYLE, save_figure

STRATEGY_COLUMNS = [c for c in GRID_COLUMNS if c != "seed"]
MIN_KDE_POINTS = 5  # fewer models give a density that is mostly the kernel's own shape
HEADLINE = {"family": "epsilon_star", "metric": "epsilon_star", "loss": "logit"}
FLAG_COLUMNS = ("on_boundary", "at_ceiling", "none_kept", "normal_rejected")
# short names of grid columns for strategy labels
_SHORT = {"clip_norm": "C", "microbatches": "mb", "epochs": "E", "batch_size": "B", "learning_rate": "lr"}
# strategy labels name the mechanism when it is not DP-SGD (its ε alone would be ambiguous)
_MECHANISM_SHORT = {"output_perturbation": "out-pert", "objective_perturbation": "obj-pert"}
plt.rcParams["pdf.fonttype"] = 42  # TrueType in PDFs


def run_diagnostics(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the headline ε* rows' fit, interval and flags, parametric and empirical side by side."""
    chosen = np.ones(len(table), dtype=bool)
    for column, value in HEADLINE.items():
        chosen &= (table[column] == value).fillna(False).to_numpy(dtype=bool)
    rows = table.loc[chosen]
    keep = ["value", "ceiling", "boot_low", "boot_high", "n_kept", "argmax_count", *FLAG_COLUMNS]
    keep = [c for c in keep if c in rows.columns]
    par = rows[rows["estimator"] == "parametric"].set_index(["dataset", "run"])
    emp = rows[rows["estimator"] == "empirical"].set_index(["dataset", "run"])
    fit = par[[c for c in ("mu_tr", "sd_tr", "mu_pop", "sd_pop", "delta") if c in par.columns]]
    out = pd.concat([par[keep].add_prefix("parametric_"), emp[keep].add_prefix("empirical_"), fit], axis=1)
    return out.reset_index()


def strategy_table(summary: pd.DataFrame, diagnostics: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-strategy mean/min/max of ε* and utility with Pareto flags and ε̄, one dataset at a time.

    With ``diagnostics`` (``run_diagnostics``) each strategy also gets ε̄ from its
    seeds' Normal fits and the number of its models carrying each flag.
    """
    frames = []
    for dataset, rows in summary.groupby("dataset", sort=True):
        # each model trained elsewhere is a strategy of its own (issue 44): its name in the model column
        outside = (rows["mechanism"] == EXTERNAL).to_numpy(bool)
        if outside.any():
            rows = rows.astype({"model": "string"}).copy()
            rows.loc[outside, "model"] = rows.loc[outside, "run"].astype("string")
        table = aggregate_strategies(rows, STRATEGY_COLUMNS, eps_col="epsilon_star", util_col="landscape_utility")
        front = pareto_frontier(table["eps_star_mean"].to_numpy(), table["util_mean"].to_numpy())
        table["nondominated"] = front.nondominated
        table["on_pareto"] = front.on_frontier
        if diagnostics is not None:
            models = rows[["dataset", "run", *STRATEGY_COLUMNS]].merge(diagnostics, on=["dataset", "run"], how="left")
            bar = strategy_epsilon_bar(models, STRATEGY_COLUMNS)
            table = table.merge(bar, on=STRATEGY_COLUMNS, how="left", validate="one_to_one")
            flags = models.groupby(STRATEGY_COLUMNS, dropna=False)[
                [f"parametric_{f}" for f in FLAG_COLUMNS if f"parametric_{f}" in models]
            ].sum().add_prefix("n_").reset_index()
            table = table.merge(flags, on=STRATEGY_COLUMNS, how="left", validate="one_to_one")
        table.insert(0, "dataset", dataset)
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def _text(value) -> str:
    """A grid value in a label: numbers as %g, text (a run's model) as it is."""
    return value if isinstance(value, str) else f"{value:g}"


def strategy_labels(table: pd.DataFrame) -> list[str]:
    """"ε = 1" / "non-DP", plus the grid values that differ between the strategies shown."""
    varying = [c for c in STRATEGY_COLUMNS if c not in ("mechanism", "target_epsilon")
               and table[c].dropna().nunique() > 1]
    labels = []
    for row in table.itertuples(index=False):
        target = row.target_epsilon
        head = "non-DP" if row.mechanism == "baseline" or pd.isna(target) else f"ε = {float(target):g}"
        if row.mechanism == EXTERNAL:  # the model column holds its name (strategy_table)
            labels.append(f"{row.model} (trained elsewhere)")
            continue
        if row.mechanism in _MECHANISM_SHORT:
            head = f"{_MECHANISM_SHORT[row.mechanism]} {head}"
        extra = [f"{_SHORT.get(c, c)}={_text(getattr(row, c))}" for c in varying if not pd.isna(getattr(row, c))]
        labels.append(", ".join([head, *extra]))
    return labels


def density_curve(values: np.ndarray, lower: float | None = None, upper: float | None = None,
                  points: int = 200) -> tuple[np.ndarray, np.ndarray] | None:
    """Gaussian KDE on [lower, upper] ∩ (data ± half its range), reflected at the bounds.

    Reflection keeps the mass that a plain KDE would put below a bound (ε* < 0,
    utility > 1) inside the support instead of drawing it there. None when there
    are fewer than ``MIN_KDE_POINTS`` finite values or no spread.
    """
    values = values[np.isfinite(values)]
    if values.size < MIN_KDE_POINTS or np.ptp(values) == 0:
        return None
    pad = np.ptp(values) * 0.5
    lo = values.min() - pad if lower is None else max(lower, values.min() - pad)
    hi = values.max() + pad if upper is None else min(upper, values.max() + pad)
    grid = np.linspace(lo, hi, points)
    kde = gaussian_kde(values)
    density = kde(grid)
    if lower is not None:
        density += kde(2 * lower - grid)
    if upper is not None:
        density += kde(2 * upper - grid)
    return grid, density


def _marginal(ax, values: np.ndarray, colour: str, vertical: bool, lower=None, upper=None) -> None:
    curve = density_curve(values, lower, upper)
    if curve is None:
        # too few models for a density: show each value as a tick instead
        for value in values[np.isfinite(values)]:
            (ax.axhline if vertical else ax.axvline)(value, color=colour, alpha=0.6, lw=1)
        return
    grid, density = curve
    if vertical:
        ax.fill_betweenx(grid, density, color=colour, alpha=0.35)
    else:
        ax.fill_between(grid, density, color=colour, alpha=0.35)


def _label_strategies(ax, table: pd.DataFrame) -> None:
    """Label each strategy; labels whose points are close are stacked instead of overprinted."""
    ax.figure.canvas.draw()  # fixes the data-to-pixel transform
    pixels = ax.transData.transform(table[["eps_star_mean", "util_mean"]].to_numpy(float))
    placed: list[np.ndarray] = []
    for i in np.lexsort((pixels[:, 0], pixels[:, 1])):
        offset = np.array([6.0, 5.0])
        while any(np.all(np.abs(pixels[i] + offset - p) < (40.0, 11.0)) for p in placed):
            offset[1] += 11.0
        placed.append(pixels[i] + offset)
        label = strategy_labels(table)[i]
        ax.annotate(label, (table["eps_star_mean"].iat[i], table["util_mean"].iat[i]), xytext=tuple(offset),
                    textcoords="offset points", fontsize=8, color="0.15",
                    arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5} if offset[1] > 5 else None)


def _footnote(diagnostics: pd.DataFrame, n_undefined: int) -> str:
    n = len(diagnostics)

    def count(column: str) -> int:
        return int(diagnostics[column].fillna(False).astype(bool).sum()) if column in diagnostics else 0

    return (f"parametric ε* of {n} models: on the δ filter boundary {count('parametric_on_boundary')}, "
            f"at its ceiling {count('parametric_at_ceiling')}, Normal fit rejected (KS) "
            f"{count('parametric_normal_rejected')}, undefined (no threshold kept, not drawn) {n_undefined}; "
            f"empirical ε* at its finite-sample ceiling {count('empirical_at_ceiling')}")


def plot_landscape(summary: pd.DataFrame, strategies: pd.DataFrame, dataset: str, png: str | Path,
                   pdf: str | Path | None = None, *, utility_label: str = "utility", note: str = "",
                   footnote: str = "") -> None:
    models = summary[summary["dataset"] == dataset]
    table = strategies[strategies["dataset"] == dataset].reset_index(drop=True)
    fig = plt.figure(figsize=(9.0, 7.2))
    grid = fig.add_gridspec(2, 2, width_ratios=(3.4, 1.3), height_ratios=(1.1, 4), wspace=0.05, hspace=0.05)
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
                    label=MECHANISM_LABELS[mechanism])
        per_model = models[models["mechanism"] == mechanism]
        _marginal(top, per_model["epsilon_star"].to_numpy(float), colour, vertical=False, lower=0.0)
        _marginal(right, per_model["landscape_utility"].to_numpy(float), colour, vertical=True, lower=0.0, upper=1.0)
    if "eps_bar" in table and table["eps_bar"].notna().any():
        bar = table[table["eps_bar"].notna()]
        ax.scatter(bar["eps_bar"], bar["util_mean"], marker="x", color="0.25", s=30, zorder=3,
                   label="ε̄ (mechanism level, Thm 2)")
        for row in bar.itertuples(index=False):
            ax.plot([row.eps_bar, row.eps_star_mean], [row.util_mean] * 2, ":", color="0.5", lw=0.8)
    frontier = table.iloc[np.argsort(table["eps_star_mean"].to_numpy())]
    frontier = frontier[frontier["on_pareto"]]
    if len(frontier):
        ax.plot(frontier["eps_star_mean"], frontier["util_mean"], "-", color="0.2", lw=1.2,
                label="Pareto frontier (upper hull)", zorder=0)
    nondominated = table[table["nondominated"]]
    ax.scatter(nondominated["eps_star_mean"], nondominated["util_mean"], s=120, facecolors="none",
               edgecolors="0.2", lw=0.8, label="non-dominated")
    right_edge = np.nanmax([table["eps_star_max"].max(), table.get("eps_bar", pd.Series([0.0])).max(), 0.1])
    ax.set_xlim(0.0, right_edge * 1.25)  # ε* ≥ 0; room for the labels
    low, high = np.nanmin(table["util_min"]), np.nanmax(table["util_max"])
    margin = max((high - low) * 0.12, 1e-3)
    ax.set_ylim(low - margin, high + margin)  # the marginals must not stretch the axes
    _label_strategies(ax, table)
    ax.set_xlabel("ε* (nats; parametric, logit loss; mean over seeds, bars min–max)")
    ax.set_ylabel(f"{utility_label} (mean over seeds)")
    ax.grid(alpha=0.3)
    # the legend goes in the empty corner cell, never over data
    corner = fig.add_subplot(grid[0, 1])
    corner.axis("off")
    handles, labels = ax.get_legend_handles_labels()
    corner.legend(handles, labels, fontsize=7, loc="center", frameon=False)
    top.axis("off")
    right.axis("off")
    top.set_title(f"{dataset}: privacy–utility landscape (Negoescu et al.){note}", fontsize=10)
    if footnote:
        fig.text(0.01, 0.01, footnote, fontsize=7, color="0.3", wrap=True, va="bottom")
    fig.subplots_adjust(bottom=0.12)
    save_figure(fig, png, pdf)


def _cell(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return "∞" if value == math.inf else f"{value:.3f}"
    return str(value)


def diagnostics_html(diagnostics: pd.DataFrame, runs: pd.DataFrame, dataset: str) -> str:
    """One row per model: both ε* estimates with bootstrap interval, ceiling and flags (logit loss)."""
    frame = runs[["dataset", "run", "mechanism", "target_epsilon", "seed"]].merge(
        diagnostics, on=["dataset", "run"], how="inner").sort_values(["mechanism", "target_epsilon", "seed"])
    columns = {"mechanism": "mechanism", "target_epsilon": "target ε", "seed": "seed"}
    for estimator in ("parametric", "empirical"):
        columns |= {f"{estimator}_value": f"{estimator} ε* (nats)", f"{estimator}_interval": "bootstrap interval",
                    f"{estimator}_ceiling": "ceiling", f"{estimator}_at_ceiling": "at ceiling",
                    f"{estimator}_on_boundary": "on filter boundary", f"{estimator}_n_kept": "thresholds kept",
                    f"{estimator}_argmax_count": ("expected examples behind the ratio" if estimator == "parametric"
                                                  else "examples behind the ratio")}
        frame[f"{estimator}_interval"] = [f"[{_cell(lo)}, {_cell(hi)}]" for lo, hi in
                                          zip(frame.get(f"{estimator}_boot_low", np.nan),
                                              frame.get(f"{estimator}_boot_high", np.nan), strict=False)]
    columns["parametric_normal_rejected"] = "Normal fit rejected (KS)"
    shown = frame[[c for c in columns if c in frame]].copy()
    body = ["<tr>" + "".join(f"<th>{columns[c]}</th>" for c in shown.columns) + "</tr>"]
    for row in shown.itertuples(index=False):
        cells = [("non-DP" if pd.isna(v) else f"{float(v):g}") if c == "target_epsilon" else _cell(v)
                 for c, v in zip(shown.columns, row, strict=True)]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ε* per model</title><style>"
        "table{border-collapse:collapse;font:13px sans-serif}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
        "text-align:left}</style></head><body>"
        f"<p>{dataset}: Epsilon* (Negoescu et al. 2023) per model on the logit loss. A value on its ceiling is the "
        "largest the sample sizes and filter allow; on the filter boundary it is set by the filter (δ or 0.001), not "
        "by the data; — means undefined (no threshold kept). “Examples behind the ratio”: members or non-members in "
        "the denominator rate at the maximising threshold (the expected count under the fit for the parametric "
        "estimator); below a few, the value rests on single examples.</p><table>" + "".join(body) + "</table></body></html>\n"
    )


def landscape_for_dataset(table: pd.DataFrame, summary: pd.DataFrame, dataset: str, dataset_info: dict, png,
                          pdf) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Draw one dataset's landscape from its metric rows and their per-run summary
    (``dpaudit.aggregate.summary_from_table``); return its strategy table, per-run
    diagnostics and their HTML table."""
    table = table[table["dataset"] == dataset]
    summary = summary[summary["dataset"] == dataset] if "dataset" in summary.columns else summary
    if summary["epsilon_star"].isna().all() or summary["landscape_utility"].isna().all():
        raise ValueError(f"no ε* / utility values for dataset {dataset!r}; is metrics.epsilon_star enabled?")
    missing = summary["epsilon_star"].isna() | summary["landscape_utility"].isna()
    diagnostics = run_diagnostics(table)
    strategies = strategy_table(summary[~missing], diagnostics)
    kinds = table.loc[table["metric"] == "landscape_utility", "utility_kind"].dropna().unique()
    label = {"auroc": "AUROC on the non-training set", "accuracy": "test accuracy"}.get(
        kinds[0] if len(kinds) == 1 else "", "utility")
    note = f"\n{dataset_info['version_note']}" if dataset_info.get("version_note") else ""
    plot_landscape(summary[~missing], strategies, dataset, png, pdf, utility_label=label, note=note,
                   footnote=_footnote(diagnostics, int(missing.sum())))
    return strategies, diagnostics, diagnostics_html(diagnostics, summary, dataset)
