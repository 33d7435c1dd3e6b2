"""Figures of the canary audit, per dataset.

* Guesses figure: the white-box one-run bound (Steinke et al. 2023) of each DP-SGD
  model against the number of guesses r (the top-r canary scores), with the ceiling
  perfect guessing reaches at that r. Where the bound stops growing with r, more
  guesses do not help; where it hugs the ceiling, more canaries would.
* Trade-off panel: per target ε (first seed), the accountant's claimed trade-off curve
  (``dpaudit.dp.tradeoff.accountant_tradeoff``: the privacy loss distribution of its
  event joined with its (ε, δ) profile; the curve the claim-curve test reads), the canaries' empirical trade-off (FNR against FPR of the
  white-box likelihood-ratio score) and the Gaussian curve of the fitted GDP μ. An
  empirical curve below the accountant's would be a violation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import special

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.dp.canary_bounds import guesses_curve
from dpaudit.metrics.canary.rows import LADDER, claimed_curve, recorded_claims
from dpaudit.plots.privacy_utility import save_figure

__all__ = ["canary_figures", "empirical_tradeoff", "guesses_table", "plot_guesses",
           "plot_tradeoff"]

# The white-box rung whose scores the figures draw (its GDP row gives the fitted μ).
WHITE_BOX = next(rung for rung in LADDER if rung.metric == "epsilon_gdp_estimate")


def _white_box(scores: pd.DataFrame) -> pd.DataFrame:
    return WHITE_BOX.rows(scores)


def guesses_table(runs: Sequence[Mapping], scores: Sequence[pd.DataFrame], *, alpha: float) -> pd.DataFrame:
    """``guesses_curve`` of every audited DP-SGD run (``runs``: dicts with dataset, run,
    target_epsilon, seed, accountant_epsilon, delta, and claims: audit.json's one-run claims,
    ``dpaudit.metrics.canary.rows.recorded_claims``), stacked with its run keys."""
    frames = []
    for run, frame in zip(runs, scores, strict=True):
        white = _white_box(frame)
        if white.empty:
            continue
        # the δ′ of the certified rows and the accountant's ε there, as the twin recorded them
        recorded = (run.get("claims") or {}).get(WHITE_BOX.threat_model)
        if recorded is None:
            raise ValueError(f"audit.json of run {run['run']!r} records no one-run claim of its white-box canaries: "
                             "rerun canary_scores")
        at, claim = float(recorded["delta"]), float(recorded["epsilon"])
        curve = guesses_curve(white["score"].to_numpy(float), white["included"].to_numpy(bool),
                              alpha=alpha, delta=at)
        frames.append(curve.assign(**{k: run[k] for k in ("dataset", "run", "target_epsilon", "seed",
                                                           "accountant_epsilon")}, claimed_epsilon=claim))
    if not frames:
        return pd.DataFrame(columns=["dataset", "run", "target_epsilon", "seed", "accountant_epsilon", "guesses",
                                     "correct", "epsilon", "ceiling", "canaries", "alpha", "delta", "claimed_epsilon"])
    return pd.concat(frames, ignore_index=True)


def _target_colours(targets) -> dict:
    cmap = plt.get_cmap("viridis")
    targets = sorted(set(float(t) for t in targets))
    return {t: cmap(0.15 + 0.7 * i / max(len(targets) - 1, 1)) for i, t in enumerate(targets)}


def plot_guesses(table: pd.DataFrame, dataset: str, png: str | Path, pdf: str | Path | None = None) -> None:
    fig, ax = plt.subplots(figsize=(7.4, 5.6))
    if table.empty:
        ax.text(0.5, 0.5, "no DP-SGD run with gradient canaries", ha="center", transform=ax.transAxes)
    colours = _target_colours(table["target_epsilon"]) if len(table) else {}
    ceiling_drawn = False
    for (target, seed), rows in table.groupby(["target_epsilon", "seed"], sort=True):
        colour = colours[float(target)]
        style = "-" if seed == table["seed"].min() else "--"
        ax.plot(rows["guesses"], rows["epsilon"], style, marker="o", ms=4, color=colour,
                label=f"target ε {target:g}, seed {seed}: accountant ε {rows['accountant_epsilon'].iloc[0]:.2f} at δ, "
                      f"{rows['claimed_epsilon'].iloc[0]:.2f} at δ′")
        if not ceiling_drawn:
            ax.plot(rows["guesses"], rows["ceiling"], color="0.4", lw=1.2, ls=":",
                    label="ceiling: all r guesses right")
            ceiling_drawn = True
        claim = float(rows["claimed_epsilon"].iloc[0])
        if np.isfinite(claim):
            ax.axhline(claim, color=colour, lw=0.7, alpha=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("guesses r (the r highest white-box canary scores guessed 'in')")
    ax.set_ylabel("one-run ε lower bound (Steinke et al. 2023)")
    level = f"{1 - float(table['alpha'].iloc[0]):.0%}" if len(table) else ""
    m = int(table["canaries"].iloc[0]) if len(table) else 0
    at = float(table["delta"].iloc[0]) if len(table) else float("nan")
    ax.set_title(f"{dataset}: one-run bound vs guesses at δ′ = {at:.2g}\n({m} gradient canaries, {level} confidence "
                 "per point; thin lines: accountant ε at δ′)", fontsize=9)
    ax.grid(alpha=0.3)
    # below the axes: beside them the labels would be cut, inside they would hide the curves
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.3, top=0.89)
    save_figure(fig, png, pdf)


def empirical_tradeoff(scores: np.ndarray, included: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, FNR) of "in iff score ≥ t" over every distinct t (and t = +inf)."""
    scores = np.asarray(scores, np.float64)
    included = np.asarray(included, bool)
    pos, neg = np.sort(scores[included]), np.sort(scores[~included])
    t = np.concatenate([np.unique(scores), [np.inf]])
    fpr = (neg.size - np.searchsorted(neg, t, side="left")) / neg.size
    fnr = np.searchsorted(pos, t, side="left") / pos.size
    return fpr, fnr


def plot_tradeoff(panels: Sequence[Mapping], dataset: str, png: str | Path, pdf: str | Path | None = None) -> None:
    """``panels``: dicts with target_epsilon, accountant_epsilon, curve (the claimed
    trade-off curve, ``dpaudit.dp.tradeoff``), mu (the GDP estimate) and scores (white-box frame)."""
    count = max(len(panels), 1)
    fig, axes = plt.subplots(1, count, figsize=(3.9 * count, 4.4), squeeze=False)
    grid = np.concatenate([np.geomspace(1e-6, 1e-2, 60), np.linspace(0.01, 1.0, 100)])
    for ax, panel in zip(axes[0], panels, strict=False):
        white = _white_box(panel["scores"])
        fpr, fnr = empirical_tradeoff(white["score"].to_numpy(float), white["included"].to_numpy(bool))
        ax.plot(grid, panel["curve"].fnr(grid), color="k", lw=1.6,
                label="accountant's claimed curve (PLD of its event ∨ its (ε, δ) profile)")
        ax.step(fpr, fnr, where="post", color="tab:blue", lw=1.0, label="canaries (white box, LLR score)")
        mu = float(panel["mu"])
        ax.plot(grid, special.ndtr(special.ndtri(1.0 - grid) - mu), color="tab:orange", ls="--",
                label="Gaussian curve of the GDP estimate μ (panel title)")
        ax.plot(grid, 1.0 - grid, color="0.7", lw=0.8, ls=":", label="no privacy loss (FNR = 1 − FPR)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("FPR (excluded canaries guessed in)")
        ax.set_title(f"target ε = {panel['target_epsilon']:g}\naccountant ε {panel['accountant_epsilon']:.2f}, "
                     f"GDP μ = {mu:.2f}", fontsize=9)
        ax.grid(alpha=0.3)
    if not panels:
        axes[0][0].text(0.5, 0.5, "no DP-SGD run with gradient canaries", ha="center")
    axes[0][0].set_ylabel("FNR (included canaries guessed out)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(f"{dataset}: trade-off curves, accountant vs canaries (first seed per target)", fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.3, top=0.84, wspace=0.25)
    save_figure(fig, png, pdf)


def canary_figures(table: pd.DataFrame, records: Sequence[Mapping], scores: Sequence[pd.DataFrame], dataset: str,
                   *, alpha: float, guesses_png, guesses_pdf, tradeoff_png, tradeoff_pdf) -> pd.DataFrame:
    """Both figures of one dataset from the metrics table, the audit twins' records
    (audit.json) and their scores; returns the guesses table (the figure's data)."""
    keys = table[table["dataset"] == dataset].drop_duplicates(["dataset", "run"]).set_index("run")
    runs = []
    for record in records:
        row = keys.loc[record["run"]]
        runs.append({"dataset": dataset, "run": record["run"], "target_epsilon": float(row["target_epsilon"]),
                     "seed": int(row["seed"]), "accountant_epsilon": float(record["epsilon"]),
                     "delta": float(record["delta"]),
                     "claims": recorded_claims(record)})
    guesses = guesses_table(runs, scores, alpha=alpha)
    plot_guesses(guesses, dataset, guesses_png, guesses_pdf)
    gdp = WHITE_BOX.rows(table[(table["dataset"] == dataset) & (table["family"] == "canary")]).set_index("run")
    panels, seen = [], set()
    for run, record, frame in sorted(zip(runs, records, scores, strict=True),
                                     key=lambda item: (item[0]["target_epsilon"], item[0]["seed"])):
        if run["target_epsilon"] in seen or _white_box(frame).empty or run["run"] not in gdp.index:
            continue
        seen.add(run["target_epsilon"])
        panels.append({**run, "curve": claimed_curve(record), "mu": float(gdp.loc[run["run"], "mu"]),
                       "scores": frame})
    plot_tradeoff(panels, dataset, tradeoff_png, tradeoff_pdf)
    return guesses
