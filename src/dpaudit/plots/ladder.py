"""The ladder figure of one model (issue 34): where the measured leakage sits against the promise.

One horizontal ε axis (symlog, linear below 1, once the values pass ``LOG_FROM``) and one row
("rung") per number, top to bottom:

* the promise: the accountant's ε (``mia``/``accountant_epsilon``); ε = ∞ for a model trained
  without DP, written as such at the axis' right end, never drawn at a finite place;
* the canary audit's rungs (``dpaudit.metrics.canary.rows.LADDER``), each with its ceiling
  (what perfect guessing certifies with the same counts) as a faint bar from 0;
* each attack's certified ε lower bound (``mia``/``epsilon_lower_bound`` by ``attack``) and the
  loss attack's DP-region bound (``privacy_card``/``dp_region_epsilon_lower_bound``);
* ε* of both estimators (logit loss) with its bootstrap interval;
* the ε implied by the strongest attack's (highest AUC) TPR at FPR 1 %: ln((TPR − δ)/FPR) at its
  realized FPR, a point estimate (not a bound) with the TPR's Clopper–Pearson interval carried
  through the same formula. It is the one derived rung; every other rung is a metrics.parquet
  row copied unchanged (``ladder_rows``; the figure's Parquet holds them, one row per rung).

The verdict of the canary audit (``measured_above_promise``'s ``verdict`` and ``decided_by``)
is in the title, with the released model's mechanism checks (issues 32, 45: ``noise_check_passed``,
``sampler_check_passed``, ``accounting_reproduced``) below the model's name; a run flagged as not trained says so in red, one
that shows no skill above the majority rate says that, in orange (issue 46). Where a dataset has
several architectures, each model's name carries its own (``dpaudit.contract.architectures``).
``plot_ladder_grid`` draws a dataset's models as small multiples, each model's ladder on one line
of a shared ε axis, with its verdict.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.mechanisms import MECHANISM_LABELS, MECHANISM_SHORT_LABELS
from dpaudit.metrics.ladder import (
    LADDER_RUNGS,
    MECHANISM_CHECKS,
    NO_SKILL_COLOUR,
    STRONGEST_LABEL,
    VERDICT_WORDS,
    checks_line,
    decided_words,
    ladder_rows,
    missing_value,
    model_name,
    run_verdicts,
    verdict_of,
)
from dpaudit.plots.privacy_utility import save_figure

__all__ = ["audit_reach", "plot_ladder", "plot_ladder_grid", "write_ladders"]

# ------------------------------------------------------------------ drawing

# Above this ε the axis turns symlog (linear below 1): bounds near 0 and ceilings near 15 both stay readable.
LOG_FROM = 8.0

_KIND_STYLE = {  # kind -> (colour, marker, filled)
    "guarantee": ("black", "|", True),
    "bound": ("tab:blue", "o", True),
    "estimate": ("tab:orange", "D", False),
}


def _x_top(rows: pd.DataFrame) -> float:
    values = np.concatenate([rows[c].to_numpy(float) for c in ("value", "low", "high", "ceiling")])
    finite = values[np.isfinite(values)]
    return max(1.0, float(finite.max()) if finite.size else 1.0) * 1.12


def _scale(ax, x_top: float) -> None:
    if x_top > LOG_FROM:
        ax.set_xscale("symlog", linthresh=1.0, linscale=0.6)
        ticks = [t for t in (0, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if t <= x_top]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlim(0, x_top)


def _draw(ax, rows: pd.DataFrame, keys: list[str], x_top: float, *, labels: bool, small: bool) -> None:
    """One model's rungs on ``ax`` at rows ``keys`` (top to bottom)."""
    y_of = {key: i for i, key in enumerate(keys)}
    size = 5 if small else 7
    promise = rows[rows["rung"] == "promise"]
    eps = float(promise["value"].iloc[0]) if len(promise) else math.nan
    if math.isfinite(eps):
        ax.axvline(eps, color="black", ls="--", lw=1.0, zorder=1)
        ax.axvspan(eps, x_top, color="tab:red", alpha=0.07, zorder=0)
    for _, row in rows.iterrows():  # a dozen rungs: drawing, not arithmetic
        y = y_of[row["rung"]]
        value = float(row["value"])
        colour, marker, filled = _KIND_STYLE[row["kind"]]
        if row["rung"] == "promise":
            if math.isinf(value):  # no finite place on the axis: said in words at its right end
                ax.annotate("ε = ∞ (no DP)" if small else "ε = ∞: no DP, nothing promised", (x_top, y),
                            xytext=(-36, 0), textcoords="offset points", ha="right", va="center", fontsize=size)
                ax.annotate("", (x_top, y), xytext=(-32, 0), textcoords="offset points",
                            arrowprops={"arrowstyle": "->", "lw": 1.2})
            else:
                ax.annotate(f"ε = {value:.3g}", (value, y), xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize=size)
            continue
        if np.isfinite(row["ceiling"]):  # what perfect guessing could certify: the audit's reach
            ax.barh(y, min(float(row["ceiling"]), x_top), height=0.55, color=colour, alpha=0.14, zorder=1)
        if np.isfinite(row["low"]) and np.isfinite(row["high"]):
            ax.plot([row["low"], min(float(row["high"]), x_top)], [y, y], color=colour, lw=1.4, zorder=2)
        if not np.isfinite(value):
            ax.annotate("not resolved" if row["derived"] else "not defined", (0, y), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=size - 1, color="0.4")
            continue
        ax.scatter([min(value, x_top)], [y], marker=marker, s=22 if small else 36, zorder=3,
                   c=colour if filled else "white", edgecolors=colour, linewidths=1.2)
        if not small:
            flags = row.get("flags")
            said = "" if missing_value(flags) else f" ({flags})"  # an ε* at its resolution or off its interval
            ax.annotate(f"{value:.3g}{said}", (min(value, x_top), y), xytext=(5, 3), textcoords="offset points",
                        fontsize=size - 1, color="#9a6700" if said else "0.25")
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.set_yticks(range(len(keys)))
    if labels:
        # small multiples: one label per row for every panel (the strongest attack differs by model)
        label_of = {} if small else dict(zip(rows["rung"], rows["label"], strict=False))
        ax.set_yticklabels([label_of.get(k, _label(k)) for k in keys], fontsize=size)
    else:
        ax.tick_params(axis="y", labelleft=False)
    ax.tick_params(axis="x", labelsize=size)
    ax.grid(axis="x", alpha=0.3)
    _scale(ax, x_top)


def _label(key: str) -> str:
    return next((r.label for r in LADDER_RUNGS if r.key == key), STRONGEST_LABEL)


def _title(first, verdict: pd.Series | None) -> tuple[str, str]:
    words, colour = verdict_of(verdict["verdict"] if verdict is not None else None)
    decided = decided_words(verdict.get("decided_by"), verdict.get("checked_model")) if verdict is not None else None
    title = f"Verdict: {words}" + (f" ({decided})" if decided else "")
    if bool(first["loss_diverged"]):
        title = "DID NOT TRAIN: these numbers describe a broken model\n" + title
        colour = "#b00020"
    elif bool(first.get("no_skill", False)):
        reason = "" if missing_value(first.get("no_skill_reason")) else str(first["no_skill_reason"])
        said = reason.removeprefix("no skill shown") if reason.startswith("no skill shown") else f": {reason}"
        title = "NO SKILL SHOWN" + (said if reason else " above the majority rate") + "\n" + title
        colour = NO_SKILL_COLOUR
    return title, colour


def plot_ladder(rows: pd.DataFrame, verdict: pd.Series | None, png: str | Path, pdf: str | Path | None = None) -> None:
    """The ladder figure of one model (``rows``: its rows of ``ladder_rows``; ``verdict``: its row of
    ``run_verdicts`` or None)."""
    if rows.empty:
        raise ValueError("no ladder rows to draw")
    first = rows.iloc[0]
    keys = list(dict.fromkeys(rows.sort_values("order")["rung"]))
    title, colour = _title(first, verdict)
    checks = checks_line(verdict) if verdict is not None else None
    # the title sits over the axes (69 % of the width): the checks wrap, one more line each
    subtitle = f"{model_name(first)} · {first['dataset']}" + (f"\n{textwrap.fill(checks, 78)}" if checks else "")
    # inches above the axes: the title's lines, the model's name and its checks
    top = 0.75 + 0.2 * (title.count("\n") + subtitle.count("\n"))
    height = 0.3 * len(keys) + top + 0.85
    fig, ax = plt.subplots(figsize=(8.6, height))
    # fixed margins (no tight_layout: it draws the figure once more, per model)
    fig.subplots_adjust(left=0.31, right=0.97, top=1 - top / height, bottom=0.8 / height)
    _draw(ax, rows, keys, _x_top(rows), labels=True, small=False)
    fig.text(0.01, 1 - 0.1 / height, title, fontsize=10.5, color=colour, va="top")
    ax.set_title(subtitle, fontsize=9, loc="left")
    scale = "symlog: linear below 1" if _x_top(rows) > LOG_FROM else "linear"
    ax.set_xlabel(f"ε ({scale}); dashed line: the promise; red: where a certified bound contradicts it", fontsize=8)
    handles = [plt.Line2D([], [], marker="o", ls="none", color="tab:blue", label="certified lower bound"),
               plt.Rectangle((0, 0), 1, 1, color="tab:blue", alpha=0.14, label="its ceiling (perfect guessing)"),
               plt.Line2D([], [], marker="D", ls="-", color="tab:orange", mfc="white", label="estimate, interval")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7.5, frameon=False)
    save_figure(fig, png, pdf)


# The verdict in the small multiples' right margin (few words: the figure is shown ~400 px wide).
GRID_VERDICT = {"above_promise": "above the promise", "consistent": "consistent", "too_weak": "too weak to say"}


def _grid_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """The dataset's models top to bottom: mechanism (declared order), target ε, seed; baselines last."""
    runs = rows.drop_duplicates("run")[["run", "mechanism", "target_epsilon", "seed", "loss_diverged", "no_skill",
                                        "architecture", "dataset"]]
    mechanisms = {m: i for i, m in enumerate(MECHANISM_LABELS)}
    runs = runs.assign(_base=(runs["mechanism"] == "baseline").astype(int),
                       _mech=runs["mechanism"].map(mechanisms).fillna(len(mechanisms)),
                       _arch=runs["architecture"].fillna(""), _eps=runs["target_epsilon"].astype(float).fillna(math.inf))
    return runs.sort_values(["_base", "_mech", "_arch", "_eps", "seed", "run"], ignore_index=True)


def _grid_label(run) -> str:
    mechanism = str(run["mechanism"])
    if mechanism == EXTERNAL:  # models trained elsewhere are told apart by their config entry (issue 44)
        return str(run["run"])
    parts = [MECHANISM_SHORT_LABELS.get(mechanism, mechanism)]
    if not pd.isna(run["target_epsilon"]) and math.isfinite(float(run["target_epsilon"])):
        parts[0] += f" ε={float(run['target_epsilon']):g}"
    if not pd.isna(run["seed"]):
        parts.append(f"seed {int(run['seed'])}")
    if not missing_value(run["architecture"]):
        parts.append(str(run["architecture"]))
    return ", ".join(parts)


def _grid_verdict(run, verdict) -> tuple[str, str]:
    if bool(run["loss_diverged"]):
        return "did not train", VERDICT_WORDS["above_promise"][1]
    if bool(run["no_skill"]):
        return "no skill shown", NO_SKILL_COLOUR
    value = None if verdict is None or missing_value(verdict["verdict"]) else str(verdict["verdict"])
    words, colour = verdict_of(value)
    failed = {d: name for _, d, name in MECHANISM_CHECKS.values()}.get(
        None if verdict is None or missing_value(verdict["decided_by"]) else str(verdict["decided_by"]))
    if failed:  # the verdict's reason is the mechanism itself: say which check
        return f"{failed} FAILED", colour
    return GRID_VERDICT.get(value, "no promise") if value else "no promise", colour


def audit_reach(rows: pd.DataFrame) -> pd.Series:
    """Per run (index), the largest ceiling of its certified bounds: the most the audit could have
    certified (an estimate's ceiling, e.g. the GDP estimate's, certifies nothing); runs without one left out."""
    bounds = rows[(rows["kind"] == "bound").to_numpy(bool)]
    return bounds.assign(_c=bounds["ceiling"].astype(float)).groupby("run")["_c"].max().dropna()


def plot_ladder_grid(rows: pd.DataFrame, verdicts: pd.DataFrame, png: str | Path, pdf: str | Path | None = None) -> None:
    """One dataset's models as small multiples of the ladder, one line per model (its ladder folded
    onto one row, shared ε axis), legible at the ~400 px the overview shows it: the promise (tick,
    red beyond it; ε = ∞ said at the right end), the audit's reach (the largest ceiling of a certified
    bound, faint bar),
    every certified lower bound (dots) and every estimate (diamonds), and the verdict at the right."""
    if rows.empty:
        raise ValueError("no ladder rows to draw")
    runs = _grid_runs(rows)
    by_run = verdicts.set_index("run") if len(verdicts) else None
    labels = [_grid_label(run) for _, run in runs.iterrows()]
    words = [_grid_verdict(run, by_run.loc[run["run"]] if by_run is not None and run["run"] in by_run.index
                           else None) for _, run in runs.iterrows()]
    y_of = dict(zip(runs["run"], range(len(runs)), strict=True))
    x_top = _x_top(rows)
    # fixed margins from the text lengths (DejaVu Sans: ~0.6 em a character; no tight_layout's second
    # draw); fonts of 9–10 pt on a 2.4 in axis stay ~10 px tall when the overview shrinks it to ~400 px
    left, right = 0.15 + 0.083 * max(map(len, labels)), 0.2 + 0.08 * max(len(w) for w, _ in words)
    width, top, bottom = 2.4, 0.5, 0.85
    height = 0.3 * len(runs) + top + bottom
    total = left + width + right
    fig, ax = plt.subplots(figsize=(total, height))
    fig.subplots_adjust(left=left / total, right=1 - right / total, top=1 - top / height, bottom=bottom / height)
    y = rows["run"].map(y_of).to_numpy(float)
    value, kind, rung = rows["value"].to_numpy(float), rows["kind"].to_numpy(str), rows["rung"].to_numpy(str)
    promise = rung == "promise"
    finite = promise & np.isfinite(value)
    ax.barh(y[finite], x_top - value[finite], left=value[finite], height=0.8, color="tab:red", alpha=0.09, zorder=0)
    ax.scatter(value[finite], y[finite], marker="|", s=160, c="black", linewidths=1.8, zorder=4)
    for row_y in y[promise & ~np.isfinite(value)]:  # no finite place on the axis: said in words
        ax.text(x_top, row_y, "ε = ∞ ", ha="right", va="center", fontsize=9, color="0.3")
    reach = audit_reach(rows)
    ax.barh(reach.index.map(y_of).to_numpy(float), np.minimum(reach.to_numpy(float), x_top), height=0.5,
            color="tab:blue", alpha=0.14, zorder=1)
    shown = ~promise & np.isfinite(value)
    for which, (colour, marker, filled) in _KIND_STYLE.items():
        keep = shown & (kind == which)
        if which != "guarantee" and keep.any():
            ax.scatter(np.minimum(value[keep], x_top), y[keep], marker=marker, s=30, zorder=3, linewidths=1.2,
                       c=colour if filled else "white", edgecolors=colour, alpha=0.85)
    ax.set_yticks(range(len(runs)), labels, fontsize=10)
    for i, (text, colour) in enumerate(words):
        ax.text(1.03, i, text, transform=ax.get_yaxis_transform(), va="center", fontsize=9.5, color=colour)
    ax.set_ylim(len(runs) - 0.5, -0.5)
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(axis="x", alpha=0.3)
    _scale(ax, x_top)
    ax.set_title(f"{rows['dataset'].iloc[0]}: each model's ε ladder", fontsize=10.5, loc="left")
    ax.set_xlabel(f"ε ({'symlog, linear below 1' if x_top > LOG_FROM else 'linear'})", fontsize=9)
    handles = [plt.Line2D([], [], marker="|", ls="none", color="black", markersize=10, label="promise"),
               plt.Line2D([], [], marker="o", ls="none", color="tab:blue", label="certified bound"),
               plt.Line2D([], [], marker="D", ls="none", color="tab:orange", mfc="white", label="estimate"),
               plt.Rectangle((0, 0), 1, 1, color="tab:blue", alpha=0.14, label="audit's reach")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9, frameon=False, handletextpad=0.3,
               columnspacing=0.8, handlelength=1.2)
    save_figure(fig, png, pdf)


def write_ladders(table: pd.DataFrame, dataset: str, runs, pngs, data, *, grid_png, grid_pdf,
                  grid_data) -> dict[str, str]:
    """Every ladder file of one dataset (the dossier job's): per run in ``runs`` its PNG and the
    Parquet of its rungs, and the dataset's small multiples (PNG, PDF) with their Parquet. A PDF
    per model cost ~0.8 s each (TrueType subsetting), most of the ladders' time on the default
    run: the PDF is the dataset's, every model on one page. Returns run → PNG path."""
    from dpaudit.io import write_parquet

    rows = ladder_rows(table[(table["dataset"] == dataset).fillna(False).to_numpy(bool)])
    verdicts = run_verdicts(table[(table["dataset"] == dataset).fillna(False).to_numpy(bool)])
    by_run = verdicts.set_index("run")
    written = {}
    for run, png, path in zip(runs, pngs, data, strict=True):
        mine = rows[rows["run"] == run]
        if mine.empty:
            raise ValueError(f"the metrics table has no rung of {dataset}/{run} (no mia accountant_epsilon row?)")
        write_parquet(path, mine.reset_index(drop=True))
        plot_ladder(mine, by_run.loc[run] if run in by_run.index else None, png)
        written[run] = str(png)
    write_parquet(grid_data, rows[rows["run"].isin(list(runs))].reset_index(drop=True))
    plot_ladder_grid(rows[rows["run"].isin(list(runs))], verdicts, grid_png, grid_pdf)
    return written
