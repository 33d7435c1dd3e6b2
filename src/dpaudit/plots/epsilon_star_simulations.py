"""Figures of the Epsilon* simulations (Negoescu et al. 2023, App. B):
Figs 3-5 and the Fig. 6 KS p-values. Each ``plot_*`` writes one file per path
(format from the suffix, PNG or PDF) atomically.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from numpy.typing import ArrayLike

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.io import atomic_path
from dpaudit.simulations.epsilon_star import METHODS, fig6_ks_table, summarize_gamma

_METHOD_STYLE = {
    "true": ("k", "-", "true CDF"),
    "empirical": ("tab:red", "--", "empirical CDF"),
    "parametric": ("tab:blue", "-.", "parametric (Normal on logit scale)"),
}

PathLike = str | os.PathLike


PathLike = str | os.PathLike


def _save(fig: Figure, paths: Sequence[PathLike]) -> None:
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    for path in paths:
        suffix = Path(path).suffix.lower()
        if suffix not in (".png", ".pdf"):
            raise ValueError(f"{path}: figures are written as .png or .pdf")
        with atomic_path(path, suffix=suffix) as tmp:
            fig.savefig(tmp, format=suffix[1:], dpi=130)


def plot_fig3(frame: pd.DataFrame, paths: Sequence[PathLike] | PathLike) -> None:
    """Fig. 3: term1 and term2 against (TPR + FPR)/2, (a) true and (b) empirical CDFs."""
    fig = Figure(figsize=(10, 4), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    titles = {"true": "(a) true CDFs", "empirical": "(b) empirical CDFs"}
    for ax, panel in zip(axes, ("true", "empirical"), strict=True):
        rows = frame[frame["panel"] == panel]
        x = rows["x_half_tpr_fpr"].to_numpy(float)
        for col, label, colour in (
            ("term1", "(1-δ-FNR)/FPR", "tab:blue"),
            ("term2", "(1-δ-FPR)/FNR", "tab:orange"),
        ):
            y = rows[col].to_numpy(float)
            ok = y > 0  # log axis
            ax.plot(x[ok], y[ok], lw=1.0, color=colour, label=label)
        title = titles[panel]
        if panel == "empirical" and len(rows):
            title += f", n = {int(rows['n'].iloc[0]):,} per set"
        ax.set_title(title)
        ax.set_yscale("log")
        ax.set_xlabel("(TPR + FPR) / 2")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("term of eq. (7)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Members N(0,1), non-members N(3,1); FPR, FNR < 1e-9 removed")
    _save(fig, paths)


def _errorbars(ax, summary: pd.DataFrame, x_col: str, methods: Sequence[str]) -> None:
    for method in methods:
        rows = summary[summary["method"] == method].sort_values(x_col)
        if rows.empty:
            continue
        colour, ls, label = _METHOD_STYLE[method]
        x = rows[x_col].to_numpy(float)
        ax.errorbar(
            x,
            rows["mean"].to_numpy(float),
            yerr=rows["std"].to_numpy(float),
            color=colour,
            ls=ls,
            marker="o",
            ms=4,
            capsize=3,
            label=label,
        )


def plot_fig4(frame: pd.DataFrame, paths: Sequence[PathLike] | PathLike) -> None:
    """Fig. 4: identical Gamma distributions (d = 0); eps* mean +- std against n."""
    summary = summarize_gamma(frame[frame["d"] == 0])
    fig = Figure(figsize=(5.5, 4), layout="constrained")
    ax = fig.subplots()
    _errorbars(ax, summary[summary["method"] != "true"], "n", ("empirical", "parametric"))
    ax.axhline(0.0, color="k", lw=1.0, label="true ε* = 0")
    ax.set_xscale("log")
    ax.set_xlabel("n per set")
    ax.set_ylabel("ε* (mean ± std over repeats)")
    delta = frame["delta"].iloc[0] if len(frame) else float("nan")
    ax.set_title(f"Identical Gamma(2, 5) losses, δ = {delta:g}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, paths)


def plot_fig5(frame: pd.DataFrame, paths: Sequence[PathLike] | PathLike) -> None:
    """Fig. 5: members Gamma(2, 5), non-members Gamma(2 + d, 5); one panel per n."""
    summary = summarize_gamma(frame)
    sizes = sorted(int(n) for n in summary["n"].dropna().unique())
    fig = Figure(figsize=(4.2 * max(len(sizes), 1), 4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, max(len(sizes), 1), sharey=True))
    for ax, n in zip(axes, sizes, strict=False):
        _errorbars(ax, summary[summary["n"] == n], "d", METHODS)
        ax.set_title(f"n = {n:,} per set")
        ax.set_xlabel("d (non-members ~ Gamma(2 + d, 5))")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ε* (mean ± std over repeats)")
    axes[0].legend(fontsize=8)
    delta = frame["delta"].iloc[0] if len(frame) else float("nan")
    fig.suptitle(f"Distributions moving apart, δ = {delta:g}")
    _save(fig, paths)


def plot_ks_pvalues(
    gof: pd.DataFrame, paths: Sequence[PathLike] | PathLike, *, alpha: float = 0.05
) -> None:
    """Fig. 6: median KS p-value over repeats against GMM components, one line per n_samples."""
    panels = list(dict.fromkeys(gof["panel"])) if "panel" in gof else [None]
    fig = Figure(figsize=(5.2 * len(panels), 4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    sizes = sorted(gof["n_samples"].unique())
    colours = [
        (0.1 + 0.8 * i / max(len(sizes) - 1, 1), 0.3, 0.9 - 0.8 * i / max(len(sizes) - 1, 1))
        for i in range(len(sizes))
    ]
    for ax, panel in zip(axes, panels, strict=True):
        rows = gof if panel is None else gof[gof["panel"] == panel]
        med = rows.groupby(["n_samples", "n_components"])["p_value"].median().reset_index()
        for colour, ns in zip(colours, sizes, strict=True):
            line = med[med["n_samples"] == ns]
            ax.plot(
                line["n_components"],
                line["p_value"],
                marker=".",
                color=colour,
                lw=1.0,
                label=f"{ns}",
            )
        ax.axhline(alpha, color="k", ls="--", lw=1.0, label=f"α = {alpha:g}")
        ax.set_yscale("log")
        ax.set_xlabel("GMM components")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(str(panel) if panel is not None else "")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("KS p-value (median over repeats)")
    axes[-1].legend(title="n_samples", fontsize=7, ncol=2)
    _save(fig, paths)


def plot_fig6(
    panels: Mapping[str, tuple[ArrayLike, ArrayLike]],
    paths: Sequence[PathLike] | PathLike,
    *,
    n_components: Iterable[int] = range(1, 21),
    n_samples: Iterable[int] = range(100, 1001, 100),
    n_repeats: int = 10,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Fig. 6 from loss arrays: ``fig6_ks_table`` then ``plot_ks_pvalues``; returns the table."""
    table = fig6_ks_table(
        panels, n_components=n_components, n_samples=n_samples, n_repeats=n_repeats, seed=seed
    )
    plot_ks_pvalues(table, paths, alpha=alpha)
    return table
