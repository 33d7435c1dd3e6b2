"""Figures 1–8 of LeBlond et al. 2023 (privacy profile), from the family's Parquet artifacts.

The privacy loss l is written ℓ in labels: a sans-serif l between bars reads as |||.

Parameter-space plots show shifts from A(x) (w − A(x)): the neighbour cloud is 1e−3 of |A(x)|.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.plots.privacy_utility import save_figure
from dpaudit.profile import profiles

FIGURES = [f"fig{k}" for k in range(1, 9)]
_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 9}


def _matrix(frame: pd.DataFrame, prefix: str) -> np.ndarray:
    return frame[[c for c in frame.columns if c.startswith(prefix + "_")]].to_numpy()


def _sample_grid(samples: pd.DataFrame, mechanism: str, title: str):
    chosen = samples[samples["mechanism"] == mechanism]
    eps_values = sorted(chosen["eps"].unique())
    cols = min(4, len(eps_values))
    rows = int(np.ceil(len(eps_values) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    cmap = plt.get_cmap("tab20")
    for ax, eps in zip(axes.ravel(), eps_values, strict=False):
        at = chosen[chosen["eps"] == eps]
        neighbours = at[at["source"] == "neighbor"]
        ids = neighbours["neighbor_row_id"].to_numpy()
        order = {row: k for k, row in enumerate(np.unique(ids))}
        w = _matrix(neighbours, "w")
        ax.scatter(w[:, 0], w[:, 1], s=7, c=[cmap(order[r] % 20) for r in ids], alpha=0.6, linewidths=0,
                   label="mechanism on neighbours y_i")
        base = _matrix(at[at["source"] == "base"], "w")
        ax.scatter(base[:, 0], base[:, 1], marker="x", c="black", s=18, label="mechanism on x")
        ax.set_title(f"log10 ε = {np.log10(eps):.2g}")
        ax.set_xlabel("w₀")
        ax.set_ylabel("w₁")
    for ax in axes.ravel()[len(eps_values):]:
        ax.axis("off")
    axes[0, 0].legend(loc="best", fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def figure_samples(samples, mechanism, title):
    return _sample_grid(samples, mechanism, title)


def figure_exact_vs_worst_case(worst: pd.DataFrame, exact: pd.DataFrame):
    wc, ex = _matrix(worst, "Delta"), _matrix(exact, "DeltaExact")
    fig, ax = plt.subplots(figsize=(5, 4.5))
    ax.scatter(ex[:, 0], ex[:, 1], s=14, facecolors="none", edgecolors="tab:blue", label="exact A(y_i) − A(x)")
    ax.scatter(wc[:, 0], wc[:, 1], s=3, c="tab:orange", label="A_wc(y_i) − A(x)")
    ax.scatter([0], [0], marker="x", c="black", s=40, label="A(x)")
    ax.set_xlabel("w₀ − A(x)₀")
    ax.set_ylabel("w₁ − A(x)₁")
    ax.set_title(f"Worst-case vs exact neighbours (max rel. dev {exact['rel_dev'].max():.2e})")
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    return fig


def figure_spheres(worst: pd.DataFrame, exact: pd.DataFrame):
    wc, ex = _matrix(worst, "Delta"), _matrix(exact, "DeltaExact")
    picks = {"largest ‖A_wc − A(y)‖/‖A(y) − A(x)‖": int(np.argmax(exact["rel_dev"].to_numpy())),
             "y_max (largest δ)": int(np.argmax(worst["delta_norm"].to_numpy()))}
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.3))
    for ax, (name, i) in zip(axes, picks.items(), strict=True):
        centre, radius = wc[i] / 2, worst["r"].to_numpy()[i]
        theta = np.linspace(0, 2 * np.pi, 400)
        ax.plot(centre[0] + radius * np.cos(theta), centre[1] + radius * np.sin(theta), c="grey", label="Okumura sphere")
        ax.scatter([0], [0], marker="x", c="black", s=40, label="A(x)")
        ax.scatter(*ex[i], marker="o", facecolors="none", edgecolors="tab:blue", s=50, label="exact A(y_i)")
        ax.scatter(*wc[i], marker="*", c="tab:orange", s=60, label="A_wc(y_i)")
        ax.set_xlim(centre[0] - 3 * radius, centre[0] + 3 * radius)
        ax.set_ylim(centre[1] - 3 * radius, centre[1] + 3 * radius)
        ax.set_aspect("equal")
        ax.set_title(f"{name}: row {int(worst['row_id'].iloc[i])}")
        ax.set_xlabel("w₀ − A(x)₀")
        ax.set_ylabel("w₁ − A(x)₁")
        ax.ticklabel_format(style="sci", scilimits=(-2, 2))  # shifts ~1e−4: plain labels ran into each other
    axes[0].legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    return fig


def figure_single_model(worst: pd.DataFrame, single: pd.DataFrame):
    shifts = _matrix(worst, "Delta")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.3))
    span = 1.3 * np.abs(shifts).max()
    for ax, (name, rows) in zip(axes, single.groupby("M_id", sort=False), strict=True):
        u = _matrix(rows.iloc[:1], "u")[0]
        beta = float(rows["beta"].iloc[0])
        lo = np.minimum(shifts.min(axis=0), u) - 0.2 * span
        hi = np.maximum(shifts.max(axis=0), u) + 0.2 * span
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
        grid = np.column_stack([gx.ravel(), gy.ravel()])
        field = np.abs(profiles.privacy_loss(u, grid, beta)).reshape(gx.shape)
        mesh = ax.pcolormesh(gx, gy, field, cmap="coolwarm", shading="auto", rasterized=True)  # 4e4 cells
        by_row = rows.set_index("row_id").loc[worst["row_id"], "abs_l"].to_numpy()
        ax.scatter(shifts[:, 0], shifts[:, 1], c=by_row, cmap="coolwarm", vmin=field.min(), vmax=field.max(),
                   marker="*", s=30, edgecolors="black", linewidths=0.3)
        ax.scatter(*u, marker="P", c="lime", s=60, edgecolors="black", label="M")
        ax.scatter([0], [0], marker="x", c="black", s=40, label="A(x)")
        fig.colorbar(mesh, ax=ax, label="|ℓ| = β |‖P − M‖ − ‖A(x) − M‖|  (ℓ: privacy loss)")
        ax.set_title(f"M {'= A(x)' if name == 'centre' else 'off centre'}, ε = {rows['eps'].iloc[0]:g}")
        ax.set_xlabel("w₀ − A(x)₀")
        ax.set_ylabel("w₁ − A(x)₁")
        ax.ticklabel_format(style="sci", scilimits=(-2, 2))
        ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    return fig


def figure_typical(typical: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(6, 4.3))
    eps_values = np.sort(typical["eps"].unique())
    cmap = plt.get_cmap("viridis")
    for k, eps in enumerate(eps_values):
        rows = typical[typical["eps"] == eps]
        ax.plot(rows["rank"], rows["mean_abs_l_over_beta"], c=cmap(k / max(len(eps_values) - 1, 1)), lw=0.9)
    first = typical[typical["eps"] == eps_values[0]]
    ax.plot(first["rank"], first["sorted_delta"], "k--", lw=1, label="sorted δ (β → ∞ limit)")
    ax.set_yscale("log")
    ax.set_xlabel("rank k (ascending |ℓ|)")
    ax.set_ylabel("typical profile P̄(k; ε)/β")
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(np.log10(eps_values[0]), np.log10(eps_values[-1])))
    fig.colorbar(sm, ax=ax, label="log10 ε")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title("Typical privacy profile (sort, then average)")
    fig.tight_layout()
    return fig


def figure_ranks_vs_beta(typical: pd.DataFrame, thresholds: dict):
    fig, ax = plt.subplots(figsize=(6, 4.3))
    count = int(typical["rank"].max()) + 1
    for q in (0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0):
        rank = min(count - 1, int(round(q * (count - 1))))
        rows = typical[typical["rank"] == rank].sort_values("beta")
        ax.plot(rows["beta"], rows["mean_abs_l_over_beta"], marker=".", lw=1, label=f"rank {q:.0%}")
    beta_of = float(typical["beta"].iloc[0] / typical["eps"].iloc[0])
    grid = np.sort(typical["eps"].unique())
    for key, name, style in (("eps_low", "ε_low", "--"), ("eps_high", "ε_high", "-.")):
        predicted, tau = thresholds[f"{key}_predicted"], thresholds["definitions"][key.replace("eps", "tau")]
        ax.axvline(predicted * beta_of, c="k", ls=style, lw=1,
                   label=f"predicted {name} = {predicted:.3g} (τ = {tau:g})")
        if np.isfinite(thresholds[key]):
            ax.axvline(thresholds[key] * beta_of, c="tab:grey", ls=style, lw=2, alpha=0.7,
                       label=f"measured {name} = {thresholds[key]:.3g}")
        else:  # NaN: the grid never met the definition; say so instead of leaving the line out
            ax.plot([], [], ls="none", label=f"measured {name}: not reached\non this ε grid ({grid[0]:.3g}–{grid[-1]:.3g})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("β = nΛε/2")
    ax.set_ylabel("P̄(k)/β")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
    ax.set_title("Profile ranks against β")
    fig.tight_layout()
    return fig


def figure_per_neighbour(per_neighbour: pd.DataFrame, thresholds: dict, d: int):
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    y_max = thresholds["y_max_row_id"]
    for row_id, rows in per_neighbour.groupby("row_id"):
        rows = rows.sort_values("beta")
        style = {"lw": 2.0, "c": "black"} if row_id == y_max else {"lw": 0.9}
        label = f"row {row_id}{' (y_max)' if row_id == y_max else ''}"
        axes[0, 0].plot(rows["beta"], rows["mean_abs_l_over_beta"], label=label, **style)
        axes[0, 1].plot(rows["beta_delta"], rows["mean_abs_l_over_beta"] / rows["delta"], **style)
        axes[1, 0].plot(rows["beta"], np.abs(rows["mean_l_over_beta"]), **style)
        axes[1, 1].plot(rows["beta_delta"], np.abs(rows["mean_l_over_beta"]) / rows["delta"], **style)
    t = np.geomspace(per_neighbour["beta_delta"].min(), per_neighbour["beta_delta"].max(), 80)
    g_curve, h_curve = profiles.universal_curves(t, d, order=200)
    axes[0, 1].plot(t, h_curve / t, "r--", lw=1.2, label="H_d(t)/t (quadrature)")
    axes[1, 1].plot(t, np.abs(g_curve) / t, "r--", lw=1.2, label="G_d(t)/t (quadrature)")
    for ax in (axes[0, 0], axes[1, 0]):
        ax.axvline(thresholds["beta_star"], c="k", ls=":", lw=1)
        ax.set_xlabel("β")
    for ax in (axes[0, 1], axes[1, 1]):
        ax.axvline(thresholds["beta_star"] * thresholds["delta_max"], c="k", ls=":", lw=1)
        ax.set_xlabel("t = βδ_i")
        ax.legend(loc="lower right", fontsize=7)
    axes[0, 0].set_ylabel("mean |ℓ| / β")
    axes[0, 1].set_ylabel("mean |ℓ| / (βδ_i)")
    axes[1, 0].set_ylabel("|mean ℓ| / β  (KL / β)")
    axes[1, 1].set_ylabel("|mean ℓ| / (βδ_i)")
    for ax in axes.ravel():
        ax.set_xscale("log")
        ax.set_yscale("log")
    # The rows' legend goes below the panels: inside one it would hide lines wherever the data fall.
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def write_profile_figures(outputs: dict, *, samples=None, worst=None, exact=None, single=None, typical=None,
                          per_neighbour=None, thresholds=None, d: int = 2) -> None:
    """Write the figures named in ``outputs`` ({"fig1": (png, pdf), ...}) from the artifacts they need."""
    builders = {
        "fig1": lambda: figure_samples(samples, "objective_perturbation",
                                       "Objective perturbation (diffprivlib 0.6.3 algorithm): M ~ A(x) and M ~ A(y_i)"),
        "fig2": lambda: figure_exact_vs_worst_case(worst, exact),
        "fig3": lambda: figure_spheres(worst, exact),
        "fig4": lambda: figure_single_model(worst, single),
        "fig5": lambda: figure_typical(typical),
        "fig6": lambda: figure_ranks_vs_beta(typical, thresholds),
        "fig7": lambda: figure_per_neighbour(per_neighbour, thresholds, d),
        "fig8": lambda: figure_samples(samples, "output_perturbation",
                                       "Output perturbation with A_wc neighbours: M ~ A(x) and M ~ A(y_i)"),
    }
    with plt.rc_context(_RC):
        for name, (png, pdf) in outputs.items():
            build = builders[name]
            save_figure(build(), Path(png), Path(pdf))
