"""Figures of the PMP simulations (Lowy et al. 2024, Figs 1-6).

Each plotted point is the mean over trials of the per-trial ratio, with ±1
standard error bars: blue ε̃/ε (global DP parameter), orange ε̃/ε(X)
(subpopulation parameter), the paper's curve order. Files are written
atomically as PNG or PDF (TrueType fonts in PDFs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.io import atomic_path

PathLike = str | os.PathLike
_RATIO = ("ratio_mean", "ratio_se", "tab:blue", "o", "ε̃ / ε  (global DP)")
_RATIO_X = ("ratioX_mean", "ratioX_se", "tab:orange", "s", "ε̃ / ε(X)  (subpopulation)")

_TITLES = {
    "fig1": ("Fig 1  exponential mechanism: ratios vs data std σ\n(d = 1, n = 6, m = 10, C = 10, ε(X) = 5, exact PMP)",
             "data standard deviation σ", True),
    "fig2": ("Fig 2  exponential mechanism: ratios vs clip threshold C\n"
             "(d = 5, n = 6, m = 32, σ = 1, 2 outliers ×100, ε(X) = 10, exact PMP)", "clip threshold C", True),
    "fig3": ("Fig 3  exponential mechanism: ratios vs dimension d\n(n = 6, m = 10, σ = 1, C = 10, ε(X) = 2, exact PMP)",
             "dimension d", True),
    "fig5": ("Fig 5  Gaussian mechanism (mean): ratios vs clip threshold C\n"
             "(n = 100, d = 10, σ = 5, 2 outliers ×10, ε = {eps}, δ = {delta}; ε̃ is an upper bound)",
             "clip threshold C", False),
}


def _save(fig: Figure, paths: Sequence[PathLike] | PathLike) -> None:
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
        for path in paths:
            suffix = Path(path).suffix.lower()
            if suffix not in (".png", ".pdf"):
                raise ValueError(f"{path}: figures are written as .png or .pdf")
            with atomic_path(path, suffix=suffix) as tmp:
                fig.savefig(tmp, format=suffix[1:], dpi=130)


def _error_bars(rows: pd.DataFrame, mean: str, se: str):
    """±1 s.e., the lower bar cut at 90 % of the mean so a log axis can draw it."""
    err = rows[se].fillna(0.0).to_numpy(float)
    values = rows[mean].to_numpy(float)
    return [[min(e, 0.9 * v) if v > 0 else 0.0 for e, v in zip(err, values, strict=True)], err]


def _curves(ax, rows: pd.DataFrame) -> None:
    rows = rows.sort_values("x_value")
    rows = rows[rows["ratio_mean"] > 0]  # ε̃ = 0 cannot be drawn on a log axis (stated in the caption)
    for mean, se, colour, marker, label in (_RATIO, _RATIO_X):
        ax.errorbar(rows["x_value"], rows[mean], yerr=_error_bars(rows, mean, se), color=colour,
                    marker=marker, ms=4, lw=1.3, capsize=2, label=label)


def _finish(ax, xlabel: str, log_x: bool, n_trials: int) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel("ratio (mean over trials ± 1 s.e.)")
    if log_x:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.text(0.01, 0.99, f"{n_trials} trials per point", transform=ax.transAxes, ha="left", va="top",
            fontsize=8, color="0.3")


def plot_simple(summary: pd.DataFrame, figure_id: str, paths, *, epsilon=None, delta=None) -> None:
    """Figs 1, 2, 3, 5: both ratio curves against the swept parameter."""
    rows = summary[summary["figure_id"] == figure_id]
    if rows.empty:
        raise ValueError(f"no summary rows for {figure_id}")
    title, xlabel, log_x = _TITLES[figure_id]
    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = fig.subplots()
    _curves(ax, rows)
    _finish(ax, xlabel, log_x, int(rows["n_trials"].min()))
    ax.set_title(title.format(eps=epsilon, delta=delta), fontsize=9)
    ax.legend(loc="best", fontsize=8)
    _save(fig, paths)


def plot_fig4(summary: pd.DataFrame, paths, *, delta: float) -> None:
    """Fig 4 in both x-axis readings: global ε (default, left) and the literal ε(X) (right)."""
    rows = summary[summary["figure_id"] == "fig4"]
    modes = [m for m in ("eps_global", "eps_X") if (rows["series"] == m).any()]
    if not modes:
        raise ValueError("no summary rows for fig4")
    fig = Figure(figsize=(5.2 * len(modes), 4.6), layout="constrained")
    axes = fig.subplots(1, len(modes), squeeze=False)[0]
    labels = {"eps_global": ("(a) x = global ε (noise calibrated with Δ = 2C/n)", "global DP ε"),
              "eps_X": ("(b) literal reading: x = ε(X) (noise calibrated with diam(X)/n)", "subpopulation ε(X)")}
    for ax, mode in zip(axes, modes, strict=True):
        sub = rows[rows["series"] == mode]
        _curves(ax, sub)
        _finish(ax, labels[mode][1], False, int(sub["n_trials"].min()))
        ax.set_title(labels[mode][0], fontsize=9)
        ax.legend(loc="center right", fontsize=8)
    fig.suptitle(f"Fig 4  Gaussian mechanism (mean): n = 100, d = 20, C = 50, σ = 1, δ = {delta:g}; "
                 "ε̃ is an upper bound (Prop. 12)", fontsize=9)
    _save(fig, paths)


def plot_fig6(summary: pd.DataFrame, paths, *, delta: float) -> None:
    """Fig 6: ratios vs d, one line style per global ε, one panel per ratio."""
    rows = summary[summary["figure_id"] == "fig6"]
    if rows.empty:
        raise ValueError("no summary rows for fig6")
    fig = Figure(figsize=(10.4, 4.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    styles = ["-", "--", ":", "-."]
    series = sorted(rows["series"].unique(), key=lambda s: float(s.split("=")[1]))
    for ax, (mean, se, colour, marker, label) in zip(axes, (_RATIO, _RATIO_X), strict=True):
        for style, name in zip(styles * 3, series, strict=False):
            sub = rows[rows["series"] == name].sort_values("x_value")
            sub = sub[sub[mean] > 0]
            ax.errorbar(sub["x_value"], sub[mean], yerr=_error_bars(sub, mean, se), color=colour, marker=marker,
                        ls=style, ms=4, lw=1.3, capsize=2, label=f"{name.replace('eps', 'ε')}")
        _finish(ax, "dimension d", True, int(rows["n_trials"].min()))
        ax.set_title(label, fontsize=9, color=colour)
        ax.legend(loc="lower right", fontsize=8, title="global ε", title_fontsize=8)
    fig.suptitle(f"Fig 6  Gaussian mechanism (mean): ratios vs d (n = 100, C = 50, σ = 1, δ = {delta:g}); "
                 "ratio 0 at small d and ε = 1 is not drawn on the log axis", fontsize=9)
    _save(fig, paths)


def plot_all(summary: pd.DataFrame, paths: dict) -> None:
    """All six figures; ``paths`` maps fig1..fig6 to the files of each."""
    delta = float(summary.loc[summary["figure_id"] == "fig4", "delta"].iloc[0])
    for fig in ("fig1", "fig2", "fig3"):
        plot_simple(summary, fig, paths[fig])
    fig5 = summary[summary["figure_id"] == "fig5"]
    plot_simple(summary, "fig5", paths["fig5"], epsilon=f"{float(fig5['fig5_epsilon'].iloc[0]):g}",
                delta=f"{float(fig5['delta'].iloc[0]):g}")
    plot_fig4(summary, paths["fig4"], delta=delta)
    plot_fig6(summary, paths["fig6"], delta=float(summary.loc[summary["figure_id"] == "fig6", "delta"].iloc[0]))
