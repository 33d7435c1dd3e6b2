"""Teaching figures F1–F5 of Geambasu's DP lecture (its worked examples) and the DP-region drawing used by
the privacy cards.

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas directly,
never through pyplot: no global figure state, no GUI backend, safe to call from
parallel jobs. Every ``figure_*`` function writes a PNG to ``path`` and returns
the path.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy import optimize, stats

from dpaudit.dp.composition import (
    advanced_composition,
    rdp_laplace,
    rdp_to_dp,
    split_budget,
)
from dpaudit.dp.hypothesis import tpr_bound
from dpaudit.dp.mechanisms import (
    exponential_mechanism_probabilities,
    gaussian_sigma_analytic,
    laplace_scale,
)
from dpaudit.io import atomic_path
from dpaudit.plots.text import number, scientific

__all__ = [
    "draw_dp_region",
    "figure_composition",
    "figure_dp_roc_region",
    "figure_exponential_selection",
    "figure_laplace_error",
    "figure_laplace_vs_gaussian",
    "rdp_per_query_budget",
]

_RDP_ORDERS = np.concatenate([np.linspace(1.05, 2, 20), np.linspace(2.25, 12, 40),
                              np.arange(13, 257)])


def _new_figure(width=6.4, height=4.0, ncols=1):
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols)
    return fig, axes


def _save(fig, path, dpi=120) -> Path:
    """PNG at ``path`` and, next to it, a PDF with TrueType fonts (set in dpaudit.plots)."""
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    with atomic_path(path.with_suffix(".pdf"), suffix=".pdf") as tmp:
        fig.savefig(tmp, format="pdf")
    return path


def draw_dp_region(ax, eps, delta, *, log=True, color="tab:blue", alpha=0.15, label=None,
                   n_grid=400, fpr_min=1e-5):
    """Shade the set of (FPR, TPR) pairs an (ε,δ)-DP mechanism allows any test.

    ε = inf shades nothing (every ROC is allowed) but still labels the legend.
    """
    if log:
        fpr = np.logspace(math.log10(fpr_min), 0, n_grid)
    else:
        fpr = np.linspace(0, 1, n_grid)
    if math.isinf(eps):
        ax.plot([], [], color=color, label=label)
        return
    upper = tpr_bound(fpr, eps, delta)
    lower = 1.0 - tpr_bound(1.0 - fpr, eps, delta)
    lower = np.maximum(lower, fpr_min if log else 0.0)
    ax.fill_between(fpr, lower, upper, color=color, alpha=alpha, linewidth=0)
    ax.plot(fpr, upper, color=color, linewidth=1.2, label=label)


# ---------------------------------------------------------------- F1


def figure_laplace_vs_gaussian(path, eps: float = 1.0, delta: float = 1e-5,
                               sensitivity: float = 1.0) -> Path:
    """F1: Laplace(Δ/ε) and the analytic Gaussian at the same (ε, δ), linear and log."""
    b = laplace_scale(sensitivity, eps)
    sigma = gaussian_sigma_analytic(sensitivity, eps, delta)
    z = np.linspace(-6 * max(b, sigma), 6 * max(b, sigma), 1201)
    fig, (ax1, ax2) = _new_figure(10, 4, ncols=2)
    for ax, log in ((ax1, False), (ax2, True)):
        ax.plot(z, stats.laplace.pdf(z, scale=b), color="tab:blue",
                label=f"Laplace, b = {b:.3g} ({eps:g}-DP)")
        ax.plot(z, stats.norm.pdf(z, scale=sigma), color="tab:red",
                label=f"Gaussian, σ = {sigma:.3g} (({eps:g}, {number(delta)})-DP)")
        ax.set_xlabel("noise z")
        ax.set_ylabel("density" + (" (log)" if log else ""))
        if log:
            ax.set_yscale("log")
            ax.set_ylim(1e-8, None)
    ax1.set_title("Laplace has the heavier tail, Gaussian needs δ > 0")
    ax2.set_title("log density: the Gaussian tail drops faster")
    ax1.legend(fontsize=8)
    return _save(fig, path)


# ---------------------------------------------------------------- F2


def figure_laplace_error(path, eps: float = 1.0, sensitivity: float = 1.0, counts=None,
                         coverage: float = 0.999) -> Path:
    """F2: absolute and relative error of a Laplace count against the count's size.

    The absolute error does not depend on the count (±b·ln(1/(1−coverage)) ≈ ±7 at
    ε = 1, 99.9%); the relative error is large for small counts, small for large ones.
    """
    counts = np.logspace(0, 6, 61) if counts is None else np.asarray(counts, dtype=np.float64)
    b = laplace_scale(sensitivity, eps)
    half_width = b * math.log(1.0 / (1.0 - coverage))
    fig, (ax1, ax2) = _new_figure(10, 4, ncols=2)
    ax1.plot(counts, np.full_like(counts, half_width), color="tab:blue",
             label=f"{coverage:.1%} half-width = {half_width:.2f}")
    ax1.plot(counts, np.full_like(counts, b), color="tab:orange", label=f"E|z| = {b:.2f}")
    ax1.set_xscale("log")
    ax1.set_xlabel("true count")
    ax1.set_ylabel("absolute error")
    ax1.set_title(f"Laplace noise, ε = {eps:g}, Δ = {sensitivity:g}")
    ax1.legend(fontsize=8)
    ax2.plot(counts, half_width / counts, color="tab:blue", label=f"{coverage:.1%} bound")
    ax2.plot(counts, b / counts, color="tab:orange", label="mean")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("true count")
    ax2.set_ylabel("relative error")
    ax2.set_title("relative error shrinks as 1/count")
    ax2.legend(fontsize=8)
    return _save(fig, path)


# ---------------------------------------------------------------- F3


def _rdp_total(eps_query, k, delta):
    return rdp_to_dp(_RDP_ORDERS, k * rdp_laplace(_RDP_ORDERS, eps_query), delta,
                     conversion="dp_accounting")[0]


def rdp_per_query_budget(eps_total: float, k: int, delta: float) -> float:
    """Largest per-query Laplace ε such that k of them compose (RDP) to ε_total at δ."""
    def gap(log_e):
        return _rdp_total(math.exp(log_e), k, delta) - eps_total
    return math.exp(optimize.brentq(gap, math.log(eps_total / k) - 1.0,
                                    math.log(eps_total), xtol=1e-10))


def figure_composition(path, eps: float = 0.1, delta_prime: float = 1e-6, k_max: int = 100_000,
                       eps_global: float = 1.0, k_budget: int = 50_000) -> Path:
    """F3: total ε of k Laplace(ε) queries under basic, advanced and RDP composition
    (left), and the per-query budget that fits ε_global at k_budget (right)."""
    k = np.unique(np.logspace(0, math.log10(k_max), 120).astype(int))
    basic = k * eps
    adv, _ = advanced_composition(eps, 0.0, k, delta_prime)
    rdp1 = rdp_laplace(_RDP_ORDERS, eps)
    rdp = np.array([rdp_to_dp(_RDP_ORDERS, kk * rdp1, delta_prime, "dp_accounting")[0]
                    for kk in k])
    fig, (ax1, ax2) = _new_figure(10, 4, ncols=2)
    ax1.plot(k, basic, label="basic kε")
    ax1.plot(k, adv, label=f"advanced (δ′ = {number(delta_prime)})")
    ax1.plot(k, rdp, label=f"RDP (δ = {number(delta_prime)})")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("number of queries k")
    ax1.set_ylabel("total ε")
    ax1.set_title(f"k Laplace queries at ε = {eps:g} each")
    ax1.legend(fontsize=8)
    budgets = {
        "basic": split_budget(eps_global, k_budget, "basic"),
        "advanced": split_budget(eps_global, k_budget, "advanced", delta_prime),
        "RDP": rdp_per_query_budget(eps_global, k_budget, delta_prime),
    }
    names = list(budgets)
    ax2.bar(names, [budgets[n] for n in names], color=["tab:blue", "tab:orange", "tab:green"])
    for i, n in enumerate(names):
        ax2.annotate(scientific(budgets[n]), (i, budgets[n]), ha="center", va="bottom", fontsize=8)
    ax2.set_ylabel("per-query ε")
    ax2.set_title(f"budget per query: global ε = {eps_global:g}, k = {k_budget:,}")
    return _save(fig, path)


# ---------------------------------------------------------------- F4


def figure_exponential_selection(path, scores=(30, 25, 20, 15, 10),
                                 labels=("brown", "blue", "green", "hazel", "grey"),
                                 eps_grid=None, sensitivity: float = 1.0) -> Path:
    """F4: selection probability of each candidate against ε (exponential mechanism)."""
    eps_grid = np.logspace(-2, 1, 200) if eps_grid is None else np.asarray(eps_grid)
    scores = np.asarray(scores, dtype=np.float64)
    probs = np.stack([exponential_mechanism_probabilities(scores, e, sensitivity)
                      for e in eps_grid])
    fig, ax = _new_figure()
    for j in range(scores.size):
        name = labels[j] if labels is not None and j < len(labels) else f"y{j}"
        ax.plot(eps_grid, probs[:, j], label=f"{name} (q = {scores[j]:g})")
    ax.axhline(1.0 / scores.size, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("selection probability")
    ax.set_title(f"Exponential mechanism, Δq = {sensitivity:g}")
    ax.legend(fontsize=8)
    return _save(fig, path)


# ---------------------------------------------------------------- F5


def figure_dp_roc_region(path, eps_list=(0.5, 1.0, 2.0, 4.0, 8.0), delta: float = 1e-5,
                         fpr=None, tpr=None, roc_label: str = "membership-inference ROC",
                         log: bool = True) -> Path:
    """F5: the (ε,δ)-DP region in ROC space for several ε, with an empirical ROC
    overlaid when ``fpr``/``tpr`` are given (log-log by default: the low-FPR corner
    is where DP's promise matters)."""
    fig, ax = _new_figure(5.5, 5.0)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for i, e in enumerate(eps_list):
        draw_dp_region(ax, e, delta, log=log, color=colors[i % len(colors)], alpha=0.08,
                       label=f"ε = {e:g}")
    _finish_roc_axes(ax, log, delta, fpr, tpr, roc_label)
    return _save(fig, path)


def _finish_roc_axes(ax, log, delta, fpr, tpr, roc_label, fpr_min=1e-5):
    grid = np.logspace(math.log10(fpr_min), 0, 50) if log else np.linspace(0, 1, 50)
    ax.plot(grid, grid, color="grey", linestyle=":", linewidth=1, label="chance")
    if fpr is not None and tpr is not None:
        f = np.asarray(fpr, dtype=np.float64)
        t = np.asarray(tpr, dtype=np.float64)
        keep = (f > 0) & (t > 0) if log else np.ones(f.shape, bool)
        ax.plot(f[keep], t[keep], color="black", linewidth=1.5, label=roc_label)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(fpr_min, 1)
        ax.set_ylim(fpr_min, 1.05)
    else:
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(f"DP region in ROC space (δ = {number(delta)})")
    ax.legend(fontsize=7, loc="lower right")


def all_teaching_figures(paths: dict) -> None:
    """Write F1-F5 with the lecture's default parameters; ``paths`` maps f1..f5 to PNG paths."""
    figure_laplace_vs_gaussian(paths["f1"])
    figure_laplace_error(paths["f2"])
    figure_composition(paths["f3"])
    figure_exponential_selection(paths["f4"])
    figure_dp_roc_region(paths["f5"])
