"""Per-dataset figures over all trained models: attack ROCs, TPR at low FPR, loss
histograms, training curves and utility across seeds.

Colour encodes the target ε (one colour per grid value, darker = more private);
non-private baselines (ε = ∞) are black. ε is shown as grid categories, so a
baseline never sits at a finite-looking ε position.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.metrics import loss_attack_rows
from dpaudit.dp.roc import roc_curve
from dpaudit.plots.privacy_utility import save_figure

BASELINE_COLOUR = "black"
FIGURES = ("roc", "tpr_at_low_fpr", "loss_histograms", "training_curves", "utility")


def epsilon_label(target_epsilon: float) -> str:
    return "ε = ∞ (no DP)" if not np.isfinite(target_epsilon) else f"ε = {target_epsilon:g}"


def epsilon_colours(targets) -> dict[float, str]:
    """Target ε → colour: viridis from dark (small ε) to light; +inf (baselines) black."""
    finite = sorted({float(t) for t in targets if np.isfinite(t)})
    cmap = plt.get_cmap("viridis")
    colours = {t: cmap(0.85 * i / max(len(finite) - 1, 1)) for i, t in enumerate(finite)}
    colours[float("inf")] = BASELINE_COLOUR
    return colours


def run_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of one dataset with ``target`` (+inf for baselines; a model trained elsewhere: its
    promise's ε, +inf without one) in plotting order."""
    runs = runs.copy()
    target = runs["target_epsilon"].astype(float).to_numpy()
    outside = (runs["mechanism"] == EXTERNAL).to_numpy(bool)
    if outside.any():
        target = np.where(outside, runs["accountant_epsilon"].astype(float), target)
    runs["target"] = np.where(runs["mechanism"] == "baseline", np.inf, target)
    return runs.sort_values(["target", "seed"], ignore_index=True)


def _legend_by_epsilon(ax, colours, **kwargs):
    handles = [plt.Line2D([], [], color=c, lw=2) for c in colours.values()]
    ax.legend(handles, [epsilon_label(t) for t in colours], **kwargs)


def plot_rocs(runs: pd.DataFrame, outputs: Mapping[str, pd.DataFrame], splits: Mapping, loss: str,
              dataset: str, png, pdf=None) -> None:
    """Every model's loss-threshold attack ROC on log–log axes, coloured by target ε."""
    runs = run_frame(runs)
    colours = epsilon_colours(runs["target"])
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    smallest_fpr = 1.0
    for row in runs.itertuples():
        frame = outputs[row.run]
        members = frame.loc[frame["split"] == splits["members"], loss].to_numpy(np.float64)
        nonmembers = frame.loc[frame["split"] == splits["nonmembers"], loss].to_numpy(np.float64)
        roc = roc_curve(members, nonmembers)
        # Points with FPR or TPR = 0 have no place on log axes; the curve starts at the first non-zero.
        shown = (roc.fpr > 0) & (roc.tpr > 0)
        ax.step(roc.fpr[shown], roc.tpr[shown], where="post", color=colours[row.target], lw=1.3, alpha=0.85)
        smallest_fpr = min(smallest_fpr, 1.0 / roc.n_nonmembers)
    grid = np.geomspace(smallest_fpr, 1, 50)
    ax.plot(grid, grid, color="0.5", ls="--", lw=1, label="chance (TPR = FPR)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(smallest_fpr, 1)
    ax.set_ylim(smallest_fpr, 1.05)
    ax.set_xlabel(f"false-positive rate (non-members flagged; smallest step 1/{int(round(1 / smallest_fpr))})")
    ax.set_ylabel("true-positive rate (members flagged)")
    ax.set_title(f"{dataset}: loss-threshold attack ROC of every model ({loss})", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    _legend_by_epsilon(ax, colours, loc="lower right", fontsize=8, title="target ε", title_fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)


def plot_tpr_at_low_fpr(table: pd.DataFrame, runs: pd.DataFrame, dataset: str, png, pdf=None,
                        fpr_targets=(1e-3, 1e-2)) -> pd.DataFrame:
    """TPR at FPR 10⁻³ and 10⁻² against target ε, one point per model; returns the plotted rows."""
    runs = run_frame(runs)
    colours = epsilon_colours(runs["target"])
    rows = loss_attack_rows(table[(table["family"] == "mia") & (table["metric"] == "tpr_at_fpr")])
    rows = rows[np.isclose(rows["fpr_target"].astype(float).to_numpy()[:, None], np.asarray(fpr_targets)).any(1)]
    data = rows[["run", "fpr_target", "fpr_realized", "value", "n_nonmembers"]].merge(
        runs[["run", "target", "seed", "accountant_epsilon"]], on="run")
    categories = sorted(colours)
    fig, axes = plt.subplots(1, len(fpr_targets), figsize=(4.4 * len(fpr_targets), 4.2), sharey=True,
                             squeeze=False)
    for ax, target_fpr in zip(axes[0], fpr_targets, strict=True):
        chosen = data[np.isclose(data["fpr_target"].astype(float), target_fpr)]
        for i, eps in enumerate(categories):
            points = chosen[chosen["target"] == eps]
            x = i + np.linspace(-0.12, 0.12, max(len(points), 1))[: len(points)]
            ax.scatter(x, points["value"], color=colours[eps], edgecolors="k", linewidths=0.5, s=40, zorder=3)
        ax.axhline(target_fpr, color="0.5", ls="--", lw=1, label=f"chance (TPR = {target_fpr:g})")
        ax.set_xticks(range(len(categories)), [epsilon_label(e).replace(" (no DP)", "\n(no DP)") for e in categories],
                      fontsize=8)
        n = chosen["n_nonmembers"].dropna()
        note = f"; {int(n.iloc[0])} non-members" if len(n) else ""
        ax.set_title(f"TPR at FPR ≤ {target_fpr:g}{note}", fontsize=9)
        ax.set_xlabel("target ε of the model (grid value)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0, 0].set_ylabel("attack true-positive rate")
    fig.suptitle(f"{dataset}: low-FPR success of the loss-threshold attack, one point per model", fontsize=10)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    return data


def plot_loss_histograms(runs: pd.DataFrame, outputs: Mapping[str, pd.DataFrame], splits: Mapping, loss: str,
                         dataset: str, png, pdf=None) -> tuple[str, str]:
    """Member vs non-member loss histograms of the most and the least private model.

    Most private = smallest accountant ε; least private = largest (a baseline, ε = ∞, when there is one).
    """
    runs = run_frame(runs).sort_values(["accountant_epsilon", "seed"], ignore_index=True)
    chosen = [runs.iloc[0], runs.iloc[-1]]
    values = np.concatenate([outputs[r.run][loss].to_numpy(np.float64) for r in chosen])
    positive = values[values > 0]
    low = max(positive.min(), 1e-8) if positive.size else 1e-8
    bins = np.geomspace(low, max(values.max(), low * 10), 50)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.0), sharex=True)
    for ax, row, title in zip(axes, chosen, ("most private", "least private"), strict=True):
        frame = outputs[row.run]
        for split, colour, label in ((splits["members"], "tab:red", "members (training)"),
                                     (splits["nonmembers"], "tab:blue", "non-members (holdout)")):
            losses = np.clip(frame.loc[frame["split"] == split, loss].to_numpy(np.float64), low, None)
            ax.hist(losses, bins=bins, histtype="step", lw=1.5, color=colour, density=True,
                    label=f"{label}, n = {losses.size}")
        eps = "∞ (no DP)" if not np.isfinite(row.accountant_epsilon) else f"{row.accountant_epsilon:.3g}"
        which = f"seed {int(row.seed)}" if not pd.isna(row.seed) else row.run  # a model trained elsewhere: its name
        ax.set_title(f"{title}: {row.mechanism}, accountant ε = {eps}, {which}", fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel(f"per-example loss {loss} (log scale; < {low:.1g} drawn at {low:.1g})")
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("density")
    fig.suptitle(f"{dataset}: what the attack sees — member vs non-member losses", fontsize=10)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    return chosen[0].run, chosen[-1].run


def history_frame(train_infos: Mapping[str, Mapping]) -> pd.DataFrame:
    """Long per-epoch rows (run, epoch, loss, accuracy, clipped_fraction, ...) from train.json histories."""
    frames = [pd.DataFrame(info.get("history", [])).assign(run=run) for run, info in train_infos.items()]
    frames = [f for f in frames if len(f)]
    if not frames:  # only models trained elsewhere (issue 44): no curve to draw
        return pd.DataFrame({"run": pd.Series(dtype=str), "epoch": pd.Series(dtype="int64")})
    return pd.concat(frames, ignore_index=True)


def plot_training_curves(runs: pd.DataFrame, history: pd.DataFrame, dataset: str, png, pdf=None) -> None:
    """Training loss, training accuracy and the clipped fraction per epoch, one line per model."""
    runs = run_frame(runs)
    colours = epsilon_colours(runs["target"])
    history = history.merge(runs[["run", "target"]], on="run")
    panels = [("loss", "training loss (mean over the epoch)"), ("accuracy", "training accuracy"),
              ("clipped_fraction", "fraction of clipped gradients (DP-SGD)")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9))
    for ax, (column, label) in zip(axes, panels, strict=True):
        if column not in history.columns or history[column].isna().all():
            ax.text(0.5, 0.5, f"no {column} recorded", transform=ax.transAxes, ha="center")
        else:
            for _run, rows in history.groupby("run", sort=False):
                rows = rows.sort_values("epoch")
                ax.plot(rows["epoch"], rows[column], color=colours[rows["target"].iloc[0]], lw=1.2, alpha=0.85,
                        marker=".")
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[2].set_ylim(-0.02, 1.02)
    _legend_by_epsilon(axes[0], colours, fontsize=8, title="target ε", title_fontsize=8)
    fig.suptitle(f"{dataset}: training curves of every model (from train.json)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, png, pdf)


def utility_spread(summary: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per target ε and mechanism across seeds: mean, standard deviation, min, max, number of seeds.

    Mechanisms are kept apart: DP-SGD and output perturbation at the same ε are different models.
    """
    runs = run_frame(summary)
    return (runs.groupby(["target", "mechanism"])["test_accuracy"]
            .agg(mean="mean", std="std", min="min", max="max", n_seeds="count").reset_index())


_MECHANISM_TICK = {"output_perturbation": "output pert.", "objective_perturbation": "objective pert."}


def _target_label(target: float, mechanism: str) -> str:
    """Tick label of one (target ε, mechanism) group; the mechanism is named unless baseline or DP-SGD."""
    label = epsilon_label(target).replace(" (no DP)", "\n(no DP)")
    return f"{label}\n{_MECHANISM_TICK[mechanism]}" if mechanism in _MECHANISM_TICK else label


def plot_utility(summary: pd.DataFrame, dataset: str, png, pdf=None) -> pd.DataFrame:
    """Test accuracy against target ε: every seed as a point, mean ± standard deviation as a bar."""
    runs = run_frame(summary)
    colours = epsilon_colours(runs["target"])
    spread = utility_spread(summary)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(spread)), 4.2))
    for i, row in enumerate(spread.itertuples()):
        points = runs[(runs["target"] == row.target) & (runs["mechanism"] == row.mechanism)]["test_accuracy"]
        ax.scatter(np.full(len(points), i) + np.linspace(-0.1, 0.1, len(points)), points,
                   color=colours[row.target], edgecolors="k", linewidths=0.5, s=36, zorder=3)
        ax.errorbar(i + 0.25, row.mean, yerr=0 if np.isnan(row.std) else row.std, fmt="_", color="0.2",
                    capsize=4, markersize=12, zorder=2)
        ax.annotate(f"{row.mean:.3f} ± {0 if np.isnan(row.std) else row.std:.3f}\n({row.n_seeds} seeds)",
                    (i + 0.3, row.mean), fontsize=7, va="center")
    ax.set_xticks(range(len(spread)), [_target_label(r.target, r.mechanism) for r in spread.itertuples()], fontsize=8)
    ax.set_xlim(-0.5, len(spread) - 0.1)
    ax.set_xlabel("target ε of the model (grid value)")
    ax.set_ylabel("test accuracy (utility split)")
    ax.set_title(f"{dataset}: utility across seeds (points = seeds, bar = mean ± sd)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    return spread


def plot_model_figures(table: pd.DataFrame, summary: pd.DataFrame, outputs: Mapping[str, pd.DataFrame],
                       train_infos: Mapping[str, Mapping], dataset_info: Mapping, loss: str, dataset: str,
                       paths: Mapping[str, tuple[str | Path, str | Path]]) -> None:
    """All five figures of one dataset; ``paths`` maps each name of FIGURES to (png, pdf)."""
    table = table[table["dataset"] == dataset]
    summary = summary[summary["dataset"] == dataset]
    splits = dataset_info["splits"]
    plot_rocs(summary, outputs, splits, loss, dataset, *paths["roc"])
    plot_tpr_at_low_fpr(table, summary, dataset, *paths["tpr_at_low_fpr"])
    plot_loss_histograms(summary, outputs, splits, loss, dataset, *paths["loss_histograms"])
    plot_training_curves(summary, history_frame(train_infos), dataset, *paths["training_curves"])
    plot_utility(summary, dataset, *paths["utility"])
