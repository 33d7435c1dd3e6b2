"""Figures of the reference-model attacks (issue 24), one set per dataset.

* ``plot_attack_rocs``: every attack's ROC on log–log axes, one panel per target model (the
  loss threshold included, from the per-example scores table of ``metric_attacks``);
* ``plot_attack_tpr``: TPR at FPR 10⁻³ and 10⁻² against the target ε, per attack, with the
  rows' two-sided Clopper–Pearson intervals; baselines (ε = ∞) on their own tick at the
  right; a target the non-members cannot resolve is drawn hollow at its interval's top;
* ``plot_reference_accuracy``: the reference models' accuracy on their IN and OUT examples
  next to the target models' train and test accuracy, per recipe (are they matched?); under
  each recipe's tick its reference models' median training rows n_k and their largest
  accountant ε_k (they retrain the recipe on their own halves of P at q_k = B/n_k, so
  their ε is not the target's; ``reference_tick``).

Every number is read from the metric table, the scores or the pool's record; the ROC is the
statistics home's (``dpaudit.dp.roc.roc_curve`` on −score: higher score = member).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.contract.labels import ATTACK_LABELS, run_label, target_epsilon
from dpaudit.dp.roc import roc_curve
from dpaudit.external.recipe import RECIPE_PREFIX
from dpaudit.plots.privacy_utility import save_figure

__all__ = ["plot_attack_rocs", "plot_attack_tpr", "plot_reference_accuracy", "reference_tick"]

ATTACK_STYLE = {"loss": ("0.45", "o", ":"), "lira_online": ("tab:red", "s", "-"),
                "lira_offline": ("tab:orange", "^", "--"), "rmia": ("tab:blue", "D", "-.")}


def plot_attack_rocs(scores: Mapping[str, pd.DataFrame], runs: Mapping[str, Mapping], attacks: Sequence[str],
                     dataset: str, png, pdf=None) -> None:
    """One log–log panel per target model (``scores``: run → scores table) with every attack's ROC."""
    order = sorted(scores, key=lambda r: (target_epsilon(runs[r]), runs[r].get("seed") or 0))
    ncols = min(4, max(len(order), 1))
    nrows = max(1, math.ceil(len(order) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.1 * nrows + 0.6), squeeze=False,
                             sharex=True, sharey=True)
    smallest = 1.0
    for ax, run in zip(axes.flat, order, strict=False):
        frame = scores[run]
        member = frame["is_member"].to_numpy(bool)
        for attack in attacks:
            if attack not in frame.columns:
                continue
            s = frame[attack].to_numpy(np.float64)
            roc = roc_curve(-s[member], -s[~member])
            shown = (roc.fpr > 0) & (roc.tpr > 0)
            colour, _, style = ATTACK_STYLE.get(attack, ("k", "o", "-"))
            ax.step(roc.fpr[shown], roc.tpr[shown], where="post", color=colour, ls=style, lw=1.4,
                    label=ATTACK_LABELS.get(attack, attack))
            smallest = min(smallest, 1.0 / max(roc.n_nonmembers, 1))
        ax.set_title(run_label(runs[run]), fontsize=8.5)
        ax.grid(alpha=0.3, which="both")
    for ax in axes.flat[len(order):]:
        ax.set_visible(False)
    grid = np.geomspace(smallest, 1, 50)
    for ax in axes.flat[: len(order)]:
        ax.plot(grid, grid, color="0.6", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(smallest, 1)
        ax.set_ylim(smallest, 1.05)
    for ax in axes[-1]:
        ax.set_xlabel("FPR (non-members flagged)")
    for ax in axes[:, 0]:
        ax.set_ylabel("TPR (members flagged)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="0.6", lw=0.8, ls="--"))
    labels.append("chance")
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle(f"{dataset}: membership-inference ROC of every attack on every model "
                 f"(smallest FPR step 1/{int(round(1 / smallest))})", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    save_figure(fig, png, pdf)


def _tpr_rows(table: pd.DataFrame, dataset: str, fpr_targets: Sequence[float]) -> pd.DataFrame:
    rows = table[(table["dataset"] == dataset) & (table["family"] == "mia") & (table["metric"] == "tpr_at_fpr")]
    rows = rows[np.isclose(rows["fpr_target"].astype(float).to_numpy()[:, None], np.asarray(fpr_targets)).any(1)]
    rows = rows.copy()
    rows["target"] = np.where(rows["mechanism"] == "baseline", np.inf, rows["target_epsilon"].astype(float))
    return rows


def plot_attack_tpr(table: pd.DataFrame, dataset: str, png, pdf=None,
                    fpr_targets: Sequence[float] = (1e-3, 1e-2), attacks: Sequence[str] | None = None) -> pd.DataFrame:
    """TPR at each FPR target against target ε, one marker per model and attack, with intervals."""
    rows = _tpr_rows(table, dataset, fpr_targets)
    attacks = [a for a in (attacks or ATTACK_LABELS) if (rows["attack"] == a).any()]
    targets = sorted(set(rows["target"]))
    position = {t: i for i, t in enumerate(targets)}
    fig, axes = plt.subplots(1, len(fpr_targets), figsize=(5.2 * len(fpr_targets), 5.0), squeeze=False,
                             sharey=True)
    width = 0.6 / max(len(attacks), 1)
    for ax, fpr in zip(axes[0], fpr_targets, strict=True):
        chosen = rows[np.isclose(rows["fpr_target"].astype(float), fpr)]
        for j, attack in enumerate(attacks):
            colour, marker, _ = ATTACK_STYLE.get(attack, ("k", "o", "-"))
            part = chosen[chosen["attack"] == attack].sort_values(["target", "seed"])
            offset = (j - (len(attacks) - 1) / 2) * width
            for _, group in part.groupby("target", sort=True):
                x = position[group["target"].iloc[0]] + offset + np.linspace(-0.25, 0.25, len(group) + 2)[1:-1] * width
                resolved = group["resolved"].fillna(True).astype(bool).to_numpy()
                value = group["value"].to_numpy(float)
                lo, hi = group["ci_lower"].to_numpy(float), group["ci_upper"].to_numpy(float)
                ok = resolved & np.isfinite(value)
                ax.errorbar(x[ok], value[ok], yerr=[value[ok] - lo[ok], hi[ok] - value[ok]], fmt=marker,
                            color=colour, ms=5, lw=1, capsize=2, mec="k", mew=0.4)
                ax.scatter(x[~ok], hi[~ok], marker=marker, facecolors="none", edgecolors=colour, s=28)
            ax.plot([], [], marker=marker, color=colour, ls="", label=ATTACK_LABELS.get(attack, attack))
        ax.axhline(fpr, color="0.5", ls="--", lw=1, label="chance (TPR = the FPR target)")
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylim(0, 1.05)
        ax.set_xticks(range(len(targets)))
        ax.set_xticklabels(["∞ (baseline)" if not math.isfinite(t) else f"{t:g}" for t in targets])
        if any(not math.isfinite(t) for t in targets) and len(targets) > 1:
            ax.axvline(len(targets) - 1.5, color="0.75", lw=0.8)
        ax.set_xlabel("target ε of the model")
        ax.set_title(f"TPR at FPR ≤ {fpr:g}", fontsize=10)
        ax.grid(alpha=0.3, axis="y", which="both")
    axes[0, 0].set_ylabel("TPR (two-sided Clopper–Pearson interval)")
    handles, labels = axes[0, -1].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], marker="o", ls="", markerfacecolor="none", markeredgecolor="0.3"))
    labels.append("not resolved (FPR target below 1/non-members): drawn at its interval's upper bound")
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"{dataset}: attack power at low FPR against ε, every seed; the baselines have no ε "
                 "(right of the line)", fontsize=9.5)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    save_figure(fig, png, pdf)
    return rows


def reference_tick(pool: Mapping) -> str:
    """The second line of a recipe's tick: its models' median n_k and largest ε_k (empty for
    a record without them)."""
    rows, eps = pool.get("training_rows"), pool.get("reference_epsilon_max")
    if not rows:
        return ""
    text = f"refs: n_k≈{int(np.median(rows))}"
    if eps is not None and math.isfinite(float(eps)):
        text += f", ε_k≤{float(eps):.3g}"
    return "\n" + text


def recipe_tick(pool: Mapping) -> str:
    """A recipe's tick: its grid values, or for a model trained elsewhere's reference recipe (issue 44:
    σ is its promise's, no target ε) the model's name and σ."""
    recipe = pool["recipe"]
    if str(pool.get("recipe_name", "")).startswith(RECIPE_PREFIX):
        sigma = recipe.get("noise_multiplier")
        return f"{pool['runs'][0]} (trained elsewhere)\n" + ("baseline" if sigma is None else f"DP-SGD σ = {sigma:g}")
    return run_label({**recipe, "seed": None}).replace(" ε", "\nε")


def plot_reference_accuracy(pools: Mapping[str, Mapping], table: pd.DataFrame, dataset: str, png,
                            pdf=None) -> pd.DataFrame:
    """Reference models' IN / OUT accuracy (box per recipe) beside the targets' train / test accuracy."""
    recipes = sorted(pools, key=lambda r: target_epsilon(pools[r]["recipe"]))
    acc = table[(table["dataset"] == dataset) & (table["family"] == "mia")
                & table["metric"].isin(["train_accuracy", "test_accuracy"])]
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 1.7 * len(recipes) * 2), 4.2), sharey=True, squeeze=False)
    data = []
    panels = (("in_accuracy", "train_accuracy", "fit: reference models on their IN rows, targets on members"),
              ("out_accuracy", "test_accuracy", "generalization: reference OUT rows, targets on the test split"))
    for ax, (ref_key, target_metric, title) in zip(axes[0], panels, strict=True):
        boxes = [np.asarray([v for v in pools[r][ref_key] if v is not None], dtype=float) for r in recipes]
        ax.boxplot(boxes, positions=np.arange(len(recipes)), widths=0.45, showfliers=True,
                   medianprops={"color": "tab:blue"})
        for i, recipe in enumerate(recipes):
            runs = pools[recipe]["runs"]
            values = acc[(acc["metric"] == target_metric) & acc["run"].isin(runs)]["value"].to_numpy(float)
            ax.scatter(np.full(len(values), i + 0.33), values, marker="D", color="tab:red", edgecolors="k",
                       linewidths=0.5, s=30, zorder=3)
            data += [{"recipe": recipe, "who": "reference", "metric": ref_key, "value": v} for v in boxes[i]]
            data += [{"recipe": recipe, "who": "target", "metric": target_metric, "value": v} for v in values]
        ax.set_xticks(range(len(recipes)))
        ax.set_xticklabels([recipe_tick(pools[r]) + reference_tick(pools[r]) for r in recipes], fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    k = max((len(pools[r]["in_accuracy"]) for r in recipes), default=0)
    axes[0, 0].set_ylabel("accuracy")
    handles = [plt.Line2D([], [], color="tab:blue", lw=2), plt.Line2D([], [], marker="D", color="tab:red", ls="",
                                                                       mec="k")]
    fig.legend(handles, [f"reference models (K = {k} per recipe; box: quartiles, whiskers 1.5 IQR, circles beyond)",
                         "target models (one per seed)"], fontsize=8, loc="lower center", ncol=2, frameon=False)
    fig.suptitle(f"{dataset}: are the reference models trained like the targets?", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    save_figure(fig, png, pdf)
    return pd.DataFrame(data)
