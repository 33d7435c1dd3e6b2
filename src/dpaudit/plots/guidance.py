"""Privacy–utility frontier of one dataset with the guidance targets as vertical lines (issue 18)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.contract.mechanisms import MECHANISM_LABELS
from dpaudit.metrics.pareto import pareto_frontier
from dpaudit.plots.privacy_utility import MECHANISM_STYLE, save_figure

LINE_STYLES = ("--", "-.", ":", (0, (5, 2, 1, 2)))


def draw_guidance(table: pd.DataFrame, dataset: str, choices: Sequence, png: str | Path,
                  pdf: str | Path | None = None) -> None:
    """The guidance page's figure (``dpaudit.report.guidance.build_guidance`` embeds it): the dataset's
    frontier with one vertical line per target at the largest grid ε its ``choices`` found."""
    lines = {}
    for choice in choices:
        if choice.epsilon is not None:
            lines[choice.target.wording] = max(choice.epsilon, lines.get(choice.target.wording, 0.0))
    plot_guidance(table[table["dataset"] == dataset], lines, png, pdf, title=f"Privacy–utility: {dataset}")


def plot_guidance(table: pd.DataFrame, targets: Mapping[str, float], png: str | Path,
                  pdf: str | Path | None = None, *, title: str = "") -> None:
    """Test accuracy against accountant ε (private models), the frontier, one vertical line per target.

    ``targets``: label → the largest grid ε meeting it. A non-private baseline's accuracy is a
    horizontal dotted line (it has no finite ε).
    """
    acc = table[(table["family"] == "mia") & (table["metric"] == "test_accuracy")]
    eps = acc["accountant_epsilon"].to_numpy(float)
    finite = np.isfinite(eps)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for mechanism, (colour, marker) in MECHANISM_STYLE.items():
        chosen = (acc["mechanism"] == mechanism).to_numpy() & finite
        if chosen.any():
            ax.scatter(eps[chosen], acc["value"].to_numpy(float)[chosen], c=colour, marker=marker,
                       label=MECHANISM_LABELS[mechanism], alpha=0.85, edgecolors="k", linewidths=0.4, zorder=3)
    if finite.any():
        frontier = pareto_frontier(eps[finite], acc["value"].to_numpy(float)[finite])
        ax.step(frontier.step_x, frontier.step_y, where="post", color="0.3", lw=1.0, label="frontier", zorder=2)
    baseline = acc.loc[~finite, "value"]
    if len(baseline):
        ax.axhline(float(baseline.max()), color="tab:red", lw=0.9, ls=":", label="best non-private accuracy")
    for (label, epsilon), style in zip(sorted(targets.items(), key=lambda kv: kv[1]), LINE_STYLES * 3, strict=False):
        ax.axvline(epsilon, color="tab:orange", lw=1.2, ls=style, label=f"{label}: ε ≤ {epsilon:g}")
    ax.set_xscale("log")
    if finite.any():
        from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

        ticks = sorted({round(float(e), 3) for e in eps[finite]} | {float(e) for e in targets.values()})
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.set_xlabel("accountant ε (log scale)")
    ax.set_ylabel("test accuracy")
    ax.grid(alpha=0.3)
    ax.set_title(title or "Privacy–utility frontier")
    ax.legend(fontsize=7, loc="best", framealpha=0.7)
    fig.tight_layout()
    save_figure(fig, png, pdf)
