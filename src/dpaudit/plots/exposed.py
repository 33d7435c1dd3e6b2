"""The exposed rows of one dataset against ε (issue 24): one line per row across the target ε.

``plot_exposed_rows`` draws, for a few rows the strongest attack keeps singling out, their
score in every attacked model (one marker per seed, a line through the seeds' mean per ε)
and, beside it, the share of non-members that score at least as high (0: the row scores
above every non-member). The target ε of the private models are equally spaced categories
in increasing order; the non-private baselines have no ε and stand apart at the right, on a
tick of their own labelled "∞ (baseline)" behind a dashed separator, never at a finite
position. One attack is used for every model, so the scores are comparable along a line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.contract.labels import ATTACK_LABELS, target_epsilon
from dpaudit.dp.roc import negatives_at_or_above
from dpaudit.plots.privacy_utility import save_figure

__all__ = ["epsilon_positions", "plot_exposed_rows", "row_trajectories"]

BASELINE_GAP = 0.7  # extra distance between the largest finite ε and the baseline's tick


def epsilon_positions(targets: Sequence[float]) -> dict[float, float]:
    """x position of each target ε: finite ones at 0, 1, 2, ... in increasing order, ∞ after a gap."""
    finite = sorted({float(t) for t in targets if math.isfinite(float(t))})
    positions = {t: float(i) for i, t in enumerate(finite)}
    if any(not math.isfinite(float(t)) for t in targets):
        positions[math.inf] = (len(finite) + BASELINE_GAP) if finite else 0.0
    return positions


def row_trajectories(scores: Mapping[str, pd.DataFrame], run_params: Mapping[str, Mapping],
                     attacks: Mapping[str, str] | str, rows: Sequence[int]) -> pd.DataFrame:
    """One line per (row, run): ``example_id``, ``run``, ``attack``, ``target`` ε (∞ for a baseline),
    ``seed``, the row's ``score`` under the run's attack (``attacks``: run → attack, or one attack for
    every run), ``nonmembers_at_or_above``, ``n_nonmembers`` and the run's non-member score
    ``nonmember_q99`` (99th percentile) and ``nonmember_median``."""
    columns = ["example_id", "run", "attack", "target", "seed", "score", "nonmembers_at_or_above", "n_nonmembers",
               "nonmember_q99", "nonmember_median"]
    out = []
    wanted = [int(r) for r in rows]
    for run, frame in scores.items():
        attack = attacks if isinstance(attacks, str) else attacks.get(run)
        if attack is None or attack not in frame.columns:
            continue
        member = frame["is_member"].to_numpy(bool)
        values = frame[attack].to_numpy(np.float64)
        nonmember = values[~member]
        nonmember = np.sort(nonmember[~np.isnan(nonmember)])
        by_id = pd.Series(values, index=frame["example_id"].to_numpy(np.int64))
        present = [example_id for example_id in wanted if example_id in by_id.index]
        if not present:
            continue
        row_scores = by_id.loc[present].to_numpy(np.float64)
        above = np.where(np.isnan(row_scores), -1, negatives_at_or_above(row_scores, nonmember))
        out.append(pd.DataFrame({
            "example_id": present, "run": run, "attack": attack, "target": target_epsilon(run_params[run]),
            "seed": run_params[run].get("seed"), "score": row_scores, "nonmembers_at_or_above": above,
            "n_nonmembers": int(nonmember.size),
            "nonmember_q99": float(np.quantile(nonmember, 0.99)) if nonmember.size else math.nan,
            "nonmember_median": float(np.median(nonmember)) if nonmember.size else math.nan}))
    return pd.concat(out, ignore_index=True)[columns] if out else pd.DataFrame(columns=columns)


def _draw(ax, part: pd.DataFrame, y: np.ndarray, position: Mapping[float, float], colour, label) -> None:
    """One thin line per seed across the finite ε (the baseline is a diamond of its own, never joined)."""
    x = part["target"].map(position).to_numpy(float)
    finite = np.isfinite(part["target"].to_numpy(float))
    seeds = part["seed"].astype("string").fillna("—").to_numpy()
    for i, seed in enumerate(sorted(set(seeds))):
        chosen = (seeds == seed) & finite
        order = np.argsort(x[chosen])
        ax.plot(x[chosen][order], y[chosen][order], color=colour, lw=1.1, alpha=0.75, marker="o", ms=3.5,
                label=label if i == 0 else None)
    ax.plot(x[~finite], y[~finite], color=colour, ls="", marker="D", ms=5.5, mec="k", mew=0.5, alpha=0.9)


def plot_exposed_rows(scores: Mapping[str, pd.DataFrame], run_params: Mapping[str, Mapping],
                      strongest: Mapping[str, str], attack: str | None, rows: Sequence[int], dataset: str, png,
                      pdf=None, *, row_labels: Mapping[int, str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Against target ε, for ``rows``: the share of non-members scoring at least as high under each
    run's ``strongest`` attack (the ranking's own unit, comparable across attacks), and the raw score
    under the one ``attack`` every run has; returns both drawn tables."""
    ranked = row_trajectories(scores, run_params, strongest, rows)
    fixed = row_trajectories(scores, run_params, attack, rows) if attack else ranked.iloc[0:0]
    targets = sorted(set(ranked["target"]) | set(fixed["target"]))
    position = epsilon_positions(targets)
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.8), squeeze=False)
    ax_share, ax_score = axes[0]
    colours = plt.get_cmap("tab10")
    for i, example_id in enumerate(int(r) for r in rows):
        colour = colours(i % 10)
        label = (row_labels or {}).get(example_id, f"example {example_id}")
        part = ranked[ranked["example_id"] == example_id]
        if len(part):
            share = np.where(part["nonmembers_at_or_above"] >= 0,
                             part["nonmembers_at_or_above"] / part["n_nonmembers"].clip(lower=1), np.nan)
            _draw(ax_share, part, share, position, colour, label)
        part = fixed[fixed["example_id"] == example_id]
        if len(part):
            _draw(ax_score, part, part["score"].to_numpy(float), position, colour, None)
    if len(ranked):
        n_non = int(ranked["n_nonmembers"].max())
        one = 1.0 / max(n_non, 1)
        ax_share.set_yscale("symlog", linthresh=one, linscale=0.5)
        ax_share.set_ylim(-0.3 * one, 1.05)
        ticks = [0.0, one, *(v for v in (0.001, 0.01, 0.1, 1.0) if v >= 2 * one)]
        ax_share.set_yticks(ticks, ["0", f"1/{n_non}", *(f"{100 * v:g} %" for v in ticks[2:])])
        ax_share.minorticks_off()
    if len(fixed):
        ref = fixed.drop_duplicates("run").groupby("target", sort=True)[["nonmember_q99", "nonmember_median"]].mean()
        rx = ref.index.map(position).to_numpy(float)
        finite = np.isfinite(ref.index.to_numpy(float))
        for column, colour, style, text in (("nonmember_q99", "0.3", "--", "non-members: 99th pct. (seed mean)"),
                                            ("nonmember_median", "0.55", ":", "non-members: median (seed mean)")):
            values = ref[column].to_numpy(float)
            ax_score.plot(rx[finite], values[finite], color=colour, ls=style, lw=1, marker="_", ms=14, label=text)
            ax_score.plot(rx[~finite], values[~finite], color=colour, ls="", marker="_", ms=14)
    for ax in (ax_share, ax_score):
        ax.set_xticks([position[t] for t in targets])
        ax.set_xticklabels(["∞ (baseline)" if not math.isfinite(t) else f"{t:g}" for t in targets])
        if math.inf in position and len(position) > 1:
            ax.axvline(position[math.inf] - (1 + BASELINE_GAP) / 2, color="0.7", ls="--", lw=0.8)
        ax.set_xlabel("target ε of the model (private models in order; baseline: no ε)")
        ax.grid(alpha=0.3, axis="y", which="both")
        if position:
            ax.set_xlim(min(position.values()) - 0.4, max(position.values()) + 0.4)
    ax_share.set_ylabel("share of non-members scoring ≥ the row")
    ax_share.set_title("each model's strongest attack: non-members a threshold\nat the row also flags (0 = none)",
                       fontsize=9.5)
    name = ATTACK_LABELS.get(attack, attack) if attack else "—"
    ax_score.set_ylabel(f"{name} score (higher = more member-like)")
    ax_score.set_title(f"one attack for every model ({name}): the row's score", fontsize=9.5)
    handles, labels = ax_share.get_legend_handles_labels()
    extra_h, extra_l = ax_score.get_legend_handles_labels()
    handles += [*extra_h, plt.Line2D([], [], color="0.3", ls="", marker="D", mec="k")]
    labels += [*extra_l, "baseline (no DP), one per seed"]
    fig.legend(handles, labels, title="one line per row and seed", title_fontsize=8, loc="center left",
               bbox_to_anchor=(0.765, 0.5), fontsize=8, frameon=False)
    fig.suptitle(f"{dataset}: the rows the attacks single out most often, against ε", fontsize=10.5)
    fig.tight_layout(rect=(0, 0, 0.765, 0.95))
    save_figure(fig, png, pdf)
    return ranked, fixed
