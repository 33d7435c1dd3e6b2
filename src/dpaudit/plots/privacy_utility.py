"""Privacy–utility figure: one point per run, read from the metrics table; where a dataset has
several architectures, each has its own marker and legend entry (issue 46)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.contract.architectures import shown_architectures
from dpaudit.contract.mechanisms import MECHANISM_LABELS
from dpaudit.io import atomic_path

MECHANISM_STYLE = {
    "baseline": ("tab:red", "s"),
    "dpsgd": ("tab:blue", "o"),
    "output_perturbation": ("tab:green", "^"),
    "objective_perturbation": ("tab:purple", "D"),
    "external": ("black", "*"),  # a model trained elsewhere (issue 44): each named beside its point
}
# Markers of the architectures of a dataset that has several (issue 46), in their sorted order.
ARCHITECTURE_MARKERS = ("o", "s", "^", "v", "P", "X", "*")


def _epsilon_positions(epsilon: np.ndarray) -> tuple[np.ndarray, float]:
    """Place ε = ∞ (baselines) one decade right of the largest finite ε on a log axis."""
    finite = epsilon[np.isfinite(epsilon)]
    top = float(finite.max()) if finite.size else 1.0
    infinity_at = 10 ** (math.floor(math.log10(top)) + 1.5)
    return np.where(np.isfinite(epsilon), epsilon, infinity_at), infinity_at


def plot_privacy_utility(summary: pd.DataFrame, png: str | Path, pdf: str | Path | None = None) -> None:
    """Test accuracy against accountant ε and against attack AUC, one column per dataset."""
    datasets = list(dict.fromkeys(summary["dataset"]))
    fig, axes = plt.subplots(2, len(datasets), figsize=(4.2 * len(datasets), 7.0), squeeze=False)
    shown = shown_architectures(summary).fillna("").to_numpy(str)
    for column, dataset in enumerate(datasets):
        mine = (summary["dataset"] == dataset).to_numpy(bool)
        rows, architecture = summary[mine], shown[mine]
        epsilon = rows["accountant_epsilon"].to_numpy(dtype=float)
        x_eps, infinity_at = _epsilon_positions(epsilon)
        top, bottom = axes[0, column], axes[1, column]
        # colour: the mechanism; marker: the mechanism's, or the architecture's where the dataset has several
        kinds = sorted(set(architecture) - {""})
        for mechanism, (colour, marker) in MECHANISM_STYLE.items():
            for kind in [""] + kinds:
                chosen = (rows["mechanism"] == mechanism).to_numpy() & (architecture == kind)
                if not chosen.any():
                    continue
                label = MECHANISM_LABELS[mechanism] + (f" · {kind}" if kind else "")
                shape = ARCHITECTURE_MARKERS[kinds.index(kind) % len(ARCHITECTURE_MARKERS)] if kind else marker
                for ax, x in ((top, x_eps), (bottom, rows["attack_auc"].to_numpy(float))):
                    y = rows["test_accuracy"].to_numpy(float)
                    if mechanism == "external":  # hollow and named: a grid model at the same point shows through
                        ax.scatter(x[chosen], y[chosen], facecolors="none", edgecolors=colour, marker=shape, s=140,
                                   linewidths=1.0, label=label)
                        _name_points(ax, x[chosen], y[chosen], rows["run"].to_numpy(str)[chosen])
                        continue
                    ax.scatter(x[chosen], y[chosen], c=colour, marker=shape, label=label, alpha=0.8,
                               edgecolors="k", linewidths=0.4)
        top.set_xscale("log")
        ticks = [t for t in top.get_xticks() if 0 < t < infinity_at / 3] + [infinity_at]
        top.set_xticks(ticks, [f"{t:g}" for t in ticks[:-1]] + ["∞"])
        top.set_xlim(min(x_eps.min() / 2, ticks[0]), infinity_at * 2)
        _axis_break(top, math.sqrt(ticks[-2] * infinity_at) if len(ticks) > 1 else infinity_at / 3)
        top.set_title(dataset)
        top.set_xlabel("accountant ε (log scale; ∞ = no DP)")
        bottom.set_xlabel("membership-inference AUC (loss threshold)")
        bottom.axvline(0.5, color="0.6", lw=0.8, ls="--")
        for ax in (top, bottom):
            ax.set_ylabel("test accuracy")
            ax.grid(alpha=0.3)
        top.legend(fontsize=8, loc="best", framealpha=0.6)
    fig.suptitle("Privacy–utility: one point per trained model")
    fig.tight_layout()
    save_figure(fig, png, pdf)


def _name_points(ax, x: np.ndarray, y: np.ndarray, names: np.ndarray) -> None:
    """Each model trained elsewhere named beside its point; models at the same point share one label."""
    at: dict[tuple[float, float], list[str]] = {}
    for name, px, py in zip(names, x, y, strict=True):
        if np.isfinite(px) and np.isfinite(py):
            at.setdefault((float(px), float(py)), []).append(str(name))
    for (px, py), shared in at.items():
        ax.annotate(", ".join(shared), (px, py), xytext=(7, 5), textcoords="offset points", fontsize=7)


def _axis_break(ax, x: float) -> None:
    """Mark the x-axis as broken at ``x``: right of it sits ∞, which no finite distance reaches."""
    from matplotlib.ticker import FixedLocator, LogLocator

    low, high = ax.get_xlim()
    minor = LogLocator(subs=np.arange(2, 10)).tick_values(low, high)
    ax.xaxis.set_minor_locator(FixedLocator(minor[(minor >= low) & (minor < x)]))  # no scale right of it
    transform = ax.get_xaxis_transform()  # x in data units, y in axes units
    ax.axvline(x, color="0.5", lw=0.8, ls=(0, (1, 2)))
    for y in (0.0, 1.0):
        ax.text(x, y, "//", transform=transform, ha="center", va="center", fontsize=11,
                fontweight="bold", color="0.3", backgroundcolor="white", clip_on=False)


def save_figure(fig, png: str | Path, pdf: str | Path | None = None) -> None:
    """Write the figure atomically (PNG for the report, PDF for papers) and close it."""
    with atomic_path(png, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=130)
    if pdf is not None:
        with atomic_path(pdf, suffix=".pdf") as tmp:
            fig.savefig(tmp)
    plt.close(fig)
