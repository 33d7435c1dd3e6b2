"""Audit figure: does what was measured agree with the ε the accountant promised?

Per dataset, one marker per model: accountant ε on x (non-private baselines in a
separate panel at ε = ∞, behind an axis break), and on y the certified ε lower
bound of the loss-threshold attack (mia family) with its confidence interval, and
Epsilon* (Negoescu et al.) from both estimators. A certified lower bound above
y = x would contradict the accountant; ε* above it does not (ε* is a
distributional measure, not a lower bound on the DP ε).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.contract.metrics import loss_attack_rows
from dpaudit.dp.hypothesis import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rate_bounds,
)
from dpaudit.metrics.canary.rows import LADDER
from dpaudit.plots.privacy_utility import save_figure

RUN_COLUMNS = ["dataset", "run", "mechanism", "target_epsilon", "seed", "accountant_epsilon", "accountant_delta"]
LOWER_BOUND_COLUMNS = {"value": "epsilon_lower_bound", "alpha": "alpha", "ci_method": "ci_method",
                       "tp": "tp", "fp": "fp", "n_members": "n_members", "n_nonmembers": "n_nonmembers",
                       "delta": "lower_bound_delta"}
EPSILON_STAR = {"parametric": "epsilon_star_parametric", "empirical": "epsilon_star_empirical"}
# Per estimator, the epsilon_star row's bootstrap interval and flags, copied unchanged
# (the figure draws the interval and hollow markers for flagged values).
EPSILON_STAR_DETAILS = {"boot_low": "low", "boot_high": "high", "argmax_count": "argmax_count",
                        "at_ceiling": "at_ceiling", "on_boundary": "on_boundary", "separated": "separated",
                        "none_kept": "none_kept"}
NUMERIC_DETAILS = ("boot_low", "boot_high", "argmax_count")
# An ε* whose maximising ratio rests on fewer examples than this (``argmax_count``: the
# rate in the ratio's denominator times its set size) is one or two losses deciding the value.
FEW_EXAMPLES = 2.0
# The canary audit's rungs (family canary): column -> (metric, threat model, score kind).
CANARY_RUNGS = {rung.key: rung for rung in LADDER}
# Rungs whose ceiling (what perfect guessing certifies) is drawn as a bar-end tick.
CEILING_RUNGS = ("canary_many_trials_white_box", "canary_one_run_white_box", "canary_one_run_fdp_white_box",
                 "canary_many_runs", "canary_many_trials_releases")
_CEILING_NOTE = {key: "; –: its ceiling" for key in CEILING_RUNGS}
_RUNG_STYLE = {  # colour and marker of each rung of dpaudit.metrics.canary.rows.LADDER
    "canary_gdp_white_box": ("tab:purple", "P"),
    "canary_one_run_fdp_white_box": ("tab:brown", "v"),
    "canary_many_trials_white_box": ("tab:pink", "*"),
    "canary_many_trials_releases": ("tab:gray", "*"),
    "canary_one_run_white_box": ("tab:red", "s"),
    "canary_many_runs": ("tab:olive", "X"),
    "canary_one_run_black_box": ("tab:cyan", "h"),
}
SERIES = {  # column -> (label, colour, marker), the ε ladder from strongest to weakest attacker
    **{rung.key: (rung.label + _CEILING_NOTE.get(rung.key, ""), *_RUNG_STYLE[rung.key]) for rung in LADDER},
    "epsilon_lower_bound": ("natural split: certified attack bound (CI)", "tab:blue", "o"),
    "epsilon_star_parametric": ("ε* parametric (logit loss)", "tab:orange", "D"),
    "epsilon_star_empirical": ("ε* empirical (logit loss)", "tab:green", "^"),
}


def epsilon_upper_at_threshold(tp, fp, n_members, n_nonmembers, delta, alpha: float) -> np.ndarray:
    """The optimistic end of the interval of the ε the chosen threshold witnesses.

    The lower bound uses (TPR_lo, FPR_hi); this uses the opposite one-sided
    Clopper–Pearson bounds (TPR_hi, FPR_lo) at the same α, so [lower, upper]
    covers the threshold's ε with probability ≥ 1 − 4α. +inf when FPR_lo = 0.
    """
    tp, fp = np.asarray(tp, np.int64), np.asarray(fp, np.int64)
    n_m, n_n = np.asarray(n_members, np.int64), np.asarray(n_nonmembers, np.int64)
    alpha = float(alpha)
    tpr_hi = clopper_pearson_upper(tp, n_m, alpha)
    fpr_lo = clopper_pearson_lower(fp, n_n, alpha)
    tnr_hi = clopper_pearson_upper(n_n - fp, n_n, alpha)
    fnr_lo = clopper_pearson_lower(n_m - tp, n_m, alpha)
    with np.errstate(divide="ignore"):
        upper = epsilon_from_rate_bounds(tpr_hi, fpr_lo, tnr_hi, fnr_lo, np.asarray(delta, np.float64))
    return np.maximum(upper, 0.0)


def audit_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run: accountant ε, certified ε lower bound with its interval, ε* of both estimators.

    Every value is taken from the metrics table unchanged (the test compares them);
    only ``epsilon_upper`` is derived, from the lower bound's own counts.
    """
    runs = table[RUN_COLUMNS].drop_duplicates(["dataset", "run"], ignore_index=True)
    bound = loss_attack_rows(table[(table["family"] == "mia") & (table["metric"] == "epsilon_lower_bound")])
    if bound.duplicated(["dataset", "run"]).any():
        raise ValueError("several mia epsilon_lower_bound rows for one run")
    bound = bound[["dataset", "run", *LOWER_BOUND_COLUMNS]].rename(columns=LOWER_BOUND_COLUMNS)
    audit = runs.merge(bound, on=["dataset", "run"], how="left", validate="one_to_one")
    missing = audit["epsilon_lower_bound"].isna()
    if missing.any():
        raise ValueError(f"runs without a mia epsilon_lower_bound row: {audit.loc[missing, 'run'].tolist()}")
    audit["epsilon_upper"] = np.nan
    for alpha, rows in audit.groupby("alpha"):
        audit.loc[rows.index, "epsilon_upper"] = epsilon_upper_at_threshold(
            rows["tp"].astype("int64"), rows["fp"].astype("int64"), rows["n_members"].astype("int64"),
            rows["n_nonmembers"].astype("int64"), rows["lower_bound_delta"].astype(float), float(alpha))
    for estimator, column in EPSILON_STAR.items():
        if "estimator" in table.columns:
            star = table[(table["family"] == "epsilon_star") & (table["metric"] == "epsilon_star")
                         & (table["estimator"] == estimator).fillna(False) & (table["loss"] == "logit").fillna(False)]
        else:
            star = table.iloc[0:0]
        if star.duplicated(["dataset", "run"]).any():
            raise ValueError(f"several {estimator} epsilon_star rows (logit loss) for one run")
        details = {source: f"{column}_{name}" for source, name in EPSILON_STAR_DETAILS.items()
                   if source in star.columns}
        audit = audit.merge(star[["dataset", "run", "value", *details]].rename(columns={"value": column, **details}),
                            on=["dataset", "run"], how="left", validate="one_to_one")
        audit[column] = audit[column].astype("float64")
        for source, name in EPSILON_STAR_DETAILS.items():
            target = f"{column}_{name}"
            if source in NUMERIC_DETAILS:
                audit[target] = audit[target].astype("float64") if target in audit else np.nan
            else:
                audit[target] = audit[target].astype("boolean").fillna(False).astype(bool) if target in audit else False
    audit = _with_canary_rungs(audit, table)
    order = audit["mechanism"].eq("baseline").astype(int)
    return (audit.assign(_baseline=order)
            .sort_values(["dataset", "_baseline", "accountant_epsilon", "seed"], ignore_index=True)
            .drop(columns="_baseline"))


def _with_canary_rungs(audit: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Each canary rung's value and ceiling as columns ``<rung>`` and ``<rung>_ceiling``
    (NaN where a run has no such row, e.g. the family is off or the run a baseline)."""
    if "threat_model" not in table.columns:  # no canary rows in this table
        for column in CANARY_RUNGS:
            audit[column] = audit[f"{column}_ceiling"] = np.nan
        audit["canary_verdict"] = pd.Series(pd.NA, index=audit.index, dtype="string")
        audit["canary_detectable_noise_factor"] = np.nan
        return audit
    canary = table[table["family"] == "canary"]
    for column, rung in CANARY_RUNGS.items():
        rows = rung.rows(canary)
        if rows.duplicated(["dataset", "run"]).any():
            raise ValueError(f"several canary {rung.metric} rows ({rung.threat_model}, {rung.score_kind}) for one run")
        # The audit's best case: the largest ceiling over its guess candidates where there are several.
        ceiling = "ceiling_max" if rows["ceiling_max"].notna().any() else "ceiling"
        picked = rows[["dataset", "run", "value", ceiling]].rename(
            columns={"value": column, ceiling: f"{column}_ceiling"})
        audit = audit.merge(picked, on=["dataset", "run"], how="left", validate="one_to_one")
        audit[[column, f"{column}_ceiling"]] = audit[[column, f"{column}_ceiling"]].astype("float64")
    verdicts = canary[canary["metric"] == "measured_above_promise"]
    verdicts = (verdicts[["dataset", "run", "verdict"]] if "verdict" in verdicts.columns
                else pd.DataFrame({"dataset": [], "run": [], "verdict": []}))
    audit = audit.merge(verdicts.rename(columns={"verdict": "canary_verdict"}), on=["dataset", "run"],
                        how="left", validate="one_to_one")
    factors = canary[canary["metric"] == "detectable_noise_factor"][["dataset", "run", "value"]]
    audit = audit.merge(factors.rename(columns={"value": "canary_detectable_noise_factor"}), on=["dataset", "run"],
                        how="left", validate="one_to_one")
    audit["canary_detectable_noise_factor"] = audit["canary_detectable_noise_factor"].astype("float64")
    return audit


def _flagged(rows: pd.DataFrame, column: str) -> np.ndarray:
    """ε* values at the finite-sample ceiling, on the filter boundary or decided by fewer than
    ``FEW_EXAMPLES`` examples (drawn hollow)."""
    if column not in EPSILON_STAR.values():
        return np.zeros(len(rows), dtype=bool)
    few = (rows[f"{column}_argmax_count"].astype("float64") < FEW_EXAMPLES).to_numpy(bool)  # NaN: not flagged
    return (rows[f"{column}_at_ceiling"] | rows[f"{column}_on_boundary"]).to_numpy(bool) | few


def _jitter(n_series: int) -> np.ndarray:
    """Multiplicative x offsets that keep a model's three markers side by side."""
    return np.exp(np.linspace(-0.12, 0.12, n_series))


def plot_audit(audit: pd.DataFrame, png: str | Path, pdf: str | Path | None = None) -> None:
    """The audit figure of one dataset (``audit`` = its rows of ``audit_table``)."""
    dataset = audit["dataset"].iloc[0]
    private = audit[np.isfinite(audit["accountant_epsilon"])]
    baseline = audit[~np.isfinite(audit["accountant_epsilon"])]
    values = audit[list(SERIES)].to_numpy(float)
    finite_values = values[np.isfinite(values)]
    upper = audit["epsilon_upper"].to_numpy(float)
    y_top = max([1.0, *finite_values.tolist(), *upper[np.isfinite(upper)].tolist(),
                 *private["accountant_epsilon"].tolist()]) * 1.6
    fig, (ax, ax_inf) = plt.subplots(1, 2, figsize=(9.8, 7.4), sharey=True,
                                     gridspec_kw={"width_ratios": [5, 1]})
    offsets = _jitter(len(SERIES))

    def draw(axis, x, rows, with_labels):
        for (column, (label, colour, marker)), offset in zip(SERIES.items(), offsets, strict=True):
            y = rows[column].to_numpy(float)
            shown = np.isfinite(y)
            if not shown.any():
                continue
            xs = x[shown] * offset
            flagged = _flagged(rows, column)[shown]
            axis.scatter(xs[~flagged], y[shown][~flagged], c=colour, marker=marker, s=42, edgecolors="k",
                         linewidths=0.5, zorder=3, label=label if with_labels else None)
            # Hollow: the value sits at the estimator's finite-sample ceiling or on its filter's edge.
            axis.scatter(xs[flagged], y[shown][flagged], facecolors="white", marker=marker, s=42,
                         edgecolors=colour, linewidths=1.5, zorder=3)
            if column in EPSILON_STAR.values():
                low = rows[f"{column}_low"].to_numpy(float)[shown]
                high = rows[f"{column}_high"].to_numpy(float)[shown]
                has = np.isfinite(low) & np.isfinite(high)
                axis.vlines(xs[has], np.maximum(low[has], 0.0), np.minimum(high[has], y_top / 1.05),
                            colors=colour, lw=1.0, alpha=0.8, zorder=2)
            if column in CEILING_RUNGS:
                ceiling = rows[f"{column}_ceiling"].to_numpy(float)[shown]
                has = np.isfinite(ceiling) & (ceiling < y_top)
                axis.scatter(xs[has], ceiling[has], marker="_", s=90, c=colour, linewidths=1.6, zorder=3)
            if column == "epsilon_lower_bound":
                top = rows["epsilon_upper"].to_numpy(float)[shown]
                clipped = np.minimum(top, y_top / 1.05)
                axis.vlines(xs, y[shown], clipped, colors=colour, lw=1.2, zorder=2)
                open_ended = ~np.isfinite(top) | (top > clipped)
                axis.scatter(xs[open_ended], clipped[open_ended], marker="^", c=colour, s=22, zorder=3)

    if len(private):
        x = private["accountant_epsilon"].to_numpy(float)
        draw(ax, x, private, True)
        grid = np.linspace(0.0, y_top, 400)
        ax.plot(grid, grid, color="0.3", ls="--", lw=1, label="y = x (measured = promised)", zorder=1)
        ax.fill_between(grid, grid, y_top, color="tab:red", alpha=0.06, zorder=0,
                        label="a certified bound here would contradict the accountant")
        for target, rows in private.groupby("target_epsilon"):
            at = float(rows["accountant_epsilon"].median())
            ax.axvline(at, color="0.85", lw=0.8, zorder=0)
            ax.annotate(f"target ε = {target:g}", (at, 0), xytext=(0, -28), textcoords="offset points",
                        ha="center", fontsize=8, annotation_clip=False, color="0.25")
        # Same symlog transform on both axes: y = x stays the diagonal and ε = 0 is on the axis.
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, y_top)
    else:
        ax.text(0.5, 0.5, "no DP run", transform=ax.transAxes, ha="center")
    if len(baseline):
        positions = np.arange(1, len(baseline) + 1, dtype=float)
        draw(ax_inf, positions, baseline, not len(private))
        # a model trained elsewhere without a promise has no seed: its name (issue 44)
        ax_inf.set_xticks(positions, [f"seed {int(s)}" if not pd.isna(s) else str(run)
                                      for s, run in zip(baseline["seed"], baseline["run"], strict=True)],
                          fontsize=7, rotation=90)
        ax_inf.set_xlim(0.4, len(baseline) + 0.6)
    ax_inf.set_xlabel("baselines\nε = ∞ (no DP)", labelpad=4)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(0, y_top)
    ax.set_ylabel("measured ε (symlog scale)")
    ax.set_xlabel("accountant ε (symlog scale: linear below 1)", labelpad=20)
    # Axis break: the ∞ panel is not at a finite distance from the DP runs.
    ax.spines["right"].set_visible(False)
    ax_inf.spines["left"].set_visible(False)
    ax_inf.tick_params(left=False)
    mark = {"marker": [(-1, -1.5), (1, 1.5)], "markersize": 10, "linestyle": "none", "color": "k",
            "mec": "k", "mew": 1, "clip_on": False}
    ax.plot([1, 1], [0, 1], transform=ax.transAxes, **mark)
    ax_inf.plot([0, 0], [0, 1], transform=ax_inf.transAxes, **mark)
    for axis in (ax, ax_inf):
        axis.grid(alpha=0.3, which="major")
    ticks = [t for t in (0, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256) if t <= y_top]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_locator(plt.NullLocator())
    if len(private):
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(plt.NullLocator())
    handles, labels = ax.get_legend_handles_labels()
    handles.append(plt.Line2D([], [], marker="D", ls="none", mfc="white", mec="0.3", mew=1.5))
    labels.append("hollow: ε* at its sample ceiling, on the filter edge\nor decided by < 2 examples; "
                  "bars: ε* bootstrap interval")
    # Below the axes: inside, the legend would hide markers and intervals.
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 0.02))
    undefined = sum(int(audit[f"{c}_separated"].sum() + audit[f"{c}_none_kept"].sum())
                    for c in EPSILON_STAR.values())
    if undefined:
        fig.text(0.5, 0.005, f"{undefined} ε* value(s) undefined (perfect separation or no threshold kept): "
                 "not drawn, see the ε* table", ha="center", va="bottom", fontsize=7, color="0.3")
    alpha = audit["alpha"].dropna()
    level = f"{1 - 2 * float(alpha.iloc[0]):.0%}" if len(alpha) else "?"
    title = f"{dataset}: promised vs measured privacy (natural-split bound holds w.p. ≥ {level})"
    verdicts = audit["canary_verdict"].dropna() if "canary_verdict" in audit else pd.Series(dtype=object)
    if len(verdicts):
        counts = verdicts.value_counts()
        title += ("\ncanary verdicts: " + ", ".join(
            f"{int(counts.get(v, 0))} {v.replace('_', ' ')}" for v in ("above_promise", "consistent", "too_weak")))
        factors = audit["canary_detectable_noise_factor"].dropna() if "canary_detectable_noise_factor" in audit else []
        if len(factors):
            title += (f"\nwhat the audit could have caught: it rejects, 8 times in 10, an implementation drawing "
                      f"less than {float(np.median(factors)):.2f}× the claimed noise (median over runs)")
    # over both panels: over the left one alone the lines would be cut at the figure's edge
    fig.suptitle(title, fontsize=9.5)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.89, bottom=0.33, wspace=0.06)
    save_figure(fig, png, pdf)


def audit_dataset(table: pd.DataFrame, dataset: str) -> pd.DataFrame:
    # Dataset-level families (the privacy profile of a view of this dataset) have no run.
    rows = audit_table(table[(table["dataset"] == dataset).fillna(False) & table["run"].notna()])
    if rows.empty:
        raise ValueError(f"the metrics table has no run of dataset {dataset!r}")
    return rows

