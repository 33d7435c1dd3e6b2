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
is in the title, with the released model's mechanism checks (issue 32: ``noise_check_passed``,
``accounting_reproduced``) below the model's name; a run flagged as not trained says so in red.
``plot_ladder_grid`` draws a dataset's models as small multiples, each model's ladder on one line
of a shared ε axis, with its verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (Agg backend, TrueType PDFs)
from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.mechanisms import MECHANISM_LABELS, MECHANISM_SHORT_LABELS
from dpaudit.contract.metrics import ATTACK_NAMES, declared
from dpaudit.metrics.canary.rows import LADDER
from dpaudit.plots.attacks import ATTACK_LABELS
from dpaudit.plots.privacy_utility import save_figure

__all__ = ["CHECKED_MODELS", "audit_reach", "DECIDED_BY_WORDS", "LADDER_RUNGS", "MECHANISM_CHECKS", "RUN_COLUMNS", "STRONGEST_FPR",
           "VERDICT_WORDS", "Rung", "checks_line", "decided_words", "ladder_rows", "mechanism_checks", "plot_ladder",
           "plot_ladder_grid", "run_verdicts", "selected_rows", "strongest_attacks"]

# The FPR at which the strongest attack's TPR is read (the overview's column, the derived rung).
STRONGEST_FPR = 0.01
# Above this ε the axis turns symlog (linear below 1): bounds near 0 and ceilings near 15 both stay readable.
LOG_FROM = 8.0
RUN_COLUMNS = ["dataset", "run", "mechanism", "target_epsilon", "seed", "accountant_epsilon", "accountant_delta",
               "loss_diverged", "loss_divergence_reason"]
# How a verdict of the canary audit (measured_above_promise's verdict column) is said, and its colour.
VERDICT_WORDS = {"above_promise": ("measured above the promise", "#b00020"),
                 "consistent": ("consistent with the promise", "#1a7f37"),
                 "too_weak": ("audit too weak to say", "#9a6700")}
NO_VERDICT = ("no promise to audit", "#555555")


@dataclass(frozen=True)
class Rung:
    """One rung: which metrics row it copies, how it is drawn (``kind``) and which columns hold
    its interval and ceiling (the first non-missing of ``ceiling`` per row)."""

    key: str
    label: str
    family: str
    metric: str
    select: dict = field(default_factory=dict)
    interval: tuple[str, str] | None = None
    ceiling: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return declared(self.family, self.metric).kind


_CANARY_SHORT = {
    "canary_gdp_white_box": "canary white box: GDP estimate",
    "canary_one_run_fdp_white_box": "canary white box: one-run f-DP bound",
    "canary_many_trials_white_box": "canary white box: many-trials bound",
    "canary_one_run_white_box": "canary white box: one-run bound",
    "canary_many_runs": "many releases: bound",
    "canary_many_trials_releases": "many releases: many-trials bound",
    "canary_one_run_black_box": "canary black box: one-run bound",
}
LADDER_RUNGS: tuple[Rung, ...] = (
    Rung("promise", "promise: accountant ε", "mia", "accountant_epsilon"),
    *(Rung(r.key, _CANARY_SHORT[r.key], "canary", r.metric, {"threat_model": r.threat_model,
                                                             "score_kind": r.score_kind},
           ceiling=("ceiling_max", "ceiling")) for r in LADDER),
    *(Rung(f"attack_{a}", f"{ATTACK_LABELS[a]} attack: certified bound", "mia", "epsilon_lower_bound",
           {"attack": a}) for a in ATTACK_NAMES),
    Rung("dp_region", "loss ROC vs DP region: certified bound", "privacy_card", "dp_region_epsilon_lower_bound"),
    *(Rung(f"epsilon_star_{e}", f"ε* {e} (logit loss)", "epsilon_star", "epsilon_star",
           {"estimator": e, "loss": "logit"}, interval=("boot_low", "boot_high")) for e in ("parametric", "empirical")),
)
STRONGEST_KEY = "strongest_attack"
STRONGEST_LABEL = "strongest attack at FPR 1 %: ln((TPR − δ)/FPR)"
ORDER = {**{r.key: i for i, r in enumerate(LADDER_RUNGS)}, STRONGEST_KEY: len(LADDER_RUNGS)}


def selected_rows(table: pd.DataFrame, family: str, metric: str, select: dict) -> pd.DataFrame:
    keep = (table["family"] == family).fillna(False) & (table["metric"] == metric).fillna(False)
    for column, wanted in select.items():
        if column not in table.columns:
            return table.iloc[0:0]
        keep &= (table[column] == wanted).fillna(False)
    return table[keep.to_numpy(bool)]


def _runs(table: pd.DataFrame) -> pd.DataFrame:
    per_run = table[table["run"].notna()]
    runs = per_run[[c for c in RUN_COLUMNS if c in per_run.columns]].drop_duplicates(["dataset", "run"],
                                                                                   ignore_index=True)
    if "loss_diverged" not in runs:
        runs["loss_diverged"] = False
    runs["loss_diverged"] = runs["loss_diverged"].astype("boolean").fillna(False).astype(bool)
    if "loss_divergence_reason" not in runs:  # a table aggregated before issue 35's flag had no reason
        runs["loss_divergence_reason"] = pd.Series(pd.NA, index=runs.index, dtype="string")
    return runs


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows[name].astype("float64").to_numpy() if name in rows.columns else np.full(len(rows), np.nan)


def strongest_attacks(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, the attack with the highest finite AUC (``ATTACK_NAMES`` order on a tie): columns
    dataset, run, attack, auc, auc_low, auc_high (the AUC row's ci_lower/ci_upper)."""
    columns = ["dataset", "run", "attack", "auc", "auc_low", "auc_high"]
    if "attack" not in table.columns:
        return pd.DataFrame(columns=columns)
    rows = selected_rows(table, "mia", "attack_auc", {})
    rows = rows[rows["attack"].notna() & np.isfinite(rows["value"].to_numpy(float))]
    rank = rows["attack"].map({a: i for i, a in enumerate(ATTACK_NAMES)}).fillna(len(ATTACK_NAMES))
    rows = rows.assign(_rank=rank.to_numpy()).sort_values(["dataset", "run", "value", "_rank"],
                                                         ascending=[True, True, False, True], kind="stable")
    best = rows.drop_duplicates(["dataset", "run"])
    return pd.DataFrame({"dataset": best["dataset"].to_numpy(), "run": best["run"].to_numpy(),
                         "attack": best["attack"].astype(str).to_numpy(), "auc": best["value"].to_numpy(float),
                         "auc_low": _column(best, "ci_lower"), "auc_high": _column(best, "ci_upper")})


# The mechanism's own checks (issue 32): canary rows whose checked_model names the model checked
# (the released one, or its audit twin). A failed one decides the verdict (decided_by = its key).
MECHANISM_CHECKS = {"noise": ("noise_check_passed", "noise_check", "noise certificate"),
                    "accounting": ("accounting_reproduced", "accounting_check", "accounting check")}
for _metric, _, _ in MECHANISM_CHECKS.values():
    declared("canary", _metric)  # the contract's names: a renamed metric fails here, at import
CHECKED_MODELS = {"released": "the released model", "twin": "its audit twin"}
# How a verdict's decided_by (dpaudit.metrics.canary.rows.verdict) is said.
DECIDED_BY_WORDS = {
    **{decided: f"the {name}" for _, decided, name in MECHANISM_CHECKS.values()},
    "claim_curve_test": "the claim-curve test",
    "distribution_free_bound": "a distribution-free bound",
    "detectable_noise_factor": "the detectable noise factor",
    "ceilings": "the bounds' ceilings",
    # a model trained outside dpaudit (issue 44, dpaudit.metrics.canary.outside): no canaries
    "black_box_bound": "the loss-threshold attack's certified bound (no canary audit: trained elsewhere)",
    "black_box_ceiling": "the loss-threshold attack's ceiling (no canary audit: trained elsewhere)",
}


def _missing_value(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def decided_words(decided_by, checked_model=None) -> str | None:
    """'decided by …' in words (None without decided_by); a mechanism check names the model it checked."""
    if _missing_value(decided_by):
        return None
    words = DECIDED_BY_WORDS.get(str(decided_by), str(decided_by).replace("_", " "))
    if str(decided_by) in {d for _, d, _ in MECHANISM_CHECKS.values()} and not _missing_value(checked_model):
        words += f" of {CHECKED_MODELS.get(str(checked_model), str(checked_model))}"
    return f"decided by {words}"


def mechanism_checks(table: pd.DataFrame) -> pd.DataFrame:
    """Per run: for each check (``noise``, ``accounting``) and checked model (``released``, ``twin``)
    ``{check}_{model}`` (the row's value_bool: True passed, False failed, NA not run or no row),
    ``{check}_{model}_note``, ``{check}_{model}_failed`` (what failed) and ``{check}_{model}_row``
    (a row exists); ``noise_ratio`` (the released model's noise_variance_ratio_min) and
    ``has_canary`` (the run has any canary row)."""
    runs = _runs(table)[["dataset", "run"]]
    canary = table[(table["family"] == "canary").fillna(False).to_numpy(bool) & table["run"].notna().to_numpy(bool)]
    runs = runs.merge(canary[["dataset", "run"]].drop_duplicates().assign(has_canary=True), on=["dataset", "run"],
                      how="left", validate="one_to_one")
    runs["has_canary"] = runs["has_canary"].astype("boolean").fillna(False).astype(bool)
    for check, (metric, _, _) in MECHANISM_CHECKS.items():
        for model in CHECKED_MODELS:
            rows = selected_rows(table, "canary", metric, {"checked_model": model})
            name = f"{check}_{model}"
            picked = pd.DataFrame({"dataset": rows["dataset"].to_numpy(), "run": rows["run"].to_numpy(),
                                   **{f"{name}{suffix}": (rows[column].to_numpy() if column in rows else pd.NA)
                                      for suffix, column in (("", "value_bool"), ("_note", "note"),
                                                             ("_failed", "failed"))},
                                   f"{name}_row": True})
            runs = runs.merge(picked, on=["dataset", "run"], how="left", validate="one_to_one")
            runs[name] = runs[name].astype("boolean")
            runs[f"{name}_note"] = runs[f"{name}_note"].astype("string")
            runs[f"{name}_failed"] = runs[f"{name}_failed"].astype("string")
            runs[f"{name}_row"] = runs[f"{name}_row"].astype("boolean").fillna(False).astype(bool)
    ratio = selected_rows(table, "canary", "noise_variance_ratio_min", {"checked_model": "released"})
    runs = runs.merge(pd.DataFrame({"dataset": ratio["dataset"].to_numpy(), "run": ratio["run"].to_numpy(),
                                    "noise_ratio": ratio["value"].to_numpy(float)}),
                      on=["dataset", "run"], how="left", validate="one_to_one")
    return runs


def checks_line(row) -> str | None:
    """The released model's mechanism checks in one line (the ladder's), or None when neither
    check has a row (no DP-SGD, or the canary family off: the overview says why)."""
    parts = []
    for check, (_, _, name) in MECHANISM_CHECKS.items():
        if not bool(row.get(f"{check}_released_row", False)):
            continue
        passed = row.get(f"{check}_released")
        parts.append(f"{name} not run" if _missing_value(passed) else f"{name} {'passed' if passed else 'FAILED'}")
    return "mechanism checks of the released model: " + ", ".join(parts) if parts else None


def run_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Per run: the canary verdict, decided_by, checked_model (the model whose check decided), note
    (NA without one), the detectable noise factor and the mechanism checks (``mechanism_checks``)."""
    runs = _runs(table)[["dataset", "run"]]
    flag = selected_rows(table, "canary", "measured_above_promise", {})
    keep = [c for c in ("verdict", "decided_by", "checked_model", "note") if c in flag.columns]
    runs = runs.merge(flag[["dataset", "run", *keep]], on=["dataset", "run"], how="left", validate="one_to_one")
    factor = selected_rows(table, "canary", "detectable_noise_factor", {})[["dataset", "run", "value"]]
    runs = runs.merge(factor.rename(columns={"value": "detectable_noise_factor"}), on=["dataset", "run"],
                      how="left", validate="one_to_one")
    for column in ("verdict", "decided_by", "checked_model", "note"):
        runs[column] = runs[column].astype("string") if column in runs else pd.Series(pd.NA, index=runs.index,
                                                                                      dtype="string")
    runs["detectable_noise_factor"] = runs["detectable_noise_factor"].astype("float64")
    return runs.merge(mechanism_checks(table), on=["dataset", "run"], how="left", validate="one_to_one")


def _rung_frame(rung: Rung, table: pd.DataFrame) -> pd.DataFrame:
    rows = selected_rows(table, rung.family, rung.metric, rung.select)
    rows = rows[rows["run"].notna()]
    if rows.duplicated(["dataset", "run"]).any():
        raise ValueError(f"several {rung.family}/{rung.metric} rows {rung.select} for one run (rung {rung.key})")
    ceiling = np.full(len(rows), np.nan)
    source = np.full(len(rows), None, dtype=object)
    for name in reversed(rung.ceiling):  # the first column of the tuple wins where it has a value
        values = _column(rows, name)
        has = ~np.isnan(values)
        ceiling[has], source[has] = values[has], name
    low = _column(rows, rung.interval[0]) if rung.interval else np.full(len(rows), np.nan)
    high = _column(rows, rung.interval[1]) if rung.interval else np.full(len(rows), np.nan)
    return pd.DataFrame({
        "dataset": rows["dataset"].to_numpy(), "run": rows["run"].to_numpy(), "rung": rung.key, "label": rung.label,
        "kind": rung.kind, "family": rung.family, "metric": rung.metric,
        "select": json.dumps(rung.select, sort_keys=True), "value": rows["value"].to_numpy(float),
        "low": low, "high": high, "interval_source": ",".join(rung.interval) if rung.interval else None,
        "ceiling": ceiling, "ceiling_source": source, "derived": False,
    })


def _strongest_frame(table: pd.DataFrame) -> pd.DataFrame:
    best = strongest_attacks(table)
    tpr = selected_rows(table, "mia", "tpr_at_fpr", {})
    if best.empty or tpr.empty or "fpr_target" not in tpr.columns:
        return pd.DataFrame()
    tpr = tpr[np.isclose(tpr["fpr_target"].astype(float), STRONGEST_FPR)]
    picked = best.merge(tpr, on=["dataset", "run", "attack"], how="inner", validate="one_to_one")
    # the run's δ (every metrics row carries its run's columns)
    delta = _column(picked, "accountant_delta")
    delta = np.where(np.isnan(delta), 0.0, delta)
    fpr = _column(picked, "fpr_realized")

    def implied(rate):
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = np.log((rate - delta) / fpr)
        # TPR ≤ δ implies nothing beyond ε ≥ 0; FPR = 0 (or no TPR) leaves ε undefined
        return np.where(np.isfinite(fpr) & (fpr > 0) & np.isfinite(rate), np.maximum(np.nan_to_num(eps, nan=0.0,
                                                                                                 neginf=0.0), 0.0),
                        np.nan)

    tprs = picked["value"].to_numpy(float)
    return pd.DataFrame({
        "dataset": picked["dataset"].to_numpy(), "run": picked["run"].to_numpy(), "rung": STRONGEST_KEY,
        "label": [f"{ATTACK_LABELS.get(a, a)}: ln((TPR − δ)/FPR) at FPR 1 %" for a in picked["attack"]],
        "kind": "estimate", "family": "mia", "metric": "tpr_at_fpr",
        "select": [json.dumps({"attack": a, "fpr_target": STRONGEST_FPR}, sort_keys=True) for a in picked["attack"]],
        "value": implied(tprs), "low": implied(_column(picked, "ci_lower")),
        "high": implied(_column(picked, "ci_upper")), "interval_source": "ci_lower,ci_upper",
        "ceiling": np.nan, "ceiling_source": None, "derived": True, "source_value": tprs,
        "fpr_realized": fpr, "delta": delta, "attack": picked["attack"].to_numpy(),
    })


def ladder_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, run, rung) of every trained model of ``table`` (metrics.parquet):
    the rung's metrics row selected by family, metric and ``select`` (JSON), its value, interval
    (``low``/``high`` from ``interval_source``) and ceiling (from ``ceiling_source``) unchanged,
    except the derived rung (``derived``: the strongest attack's ln((TPR − δ)/FPR), with the TPR in
    ``source_value``, the realized FPR and δ beside it). Run columns joined; rungs in ladder order."""
    runs = _runs(table)
    frames = [frame for frame in (*(_rung_frame(r, table) for r in LADDER_RUNGS), _strongest_frame(table))
              if len(frame)]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["dataset", "run", "rung"])
    for column in ("source_value", "fpr_realized", "delta"):
        rows[column] = rows[column].astype("float64") if column in rows else np.nan
    rows["attack"] = rows["attack"].astype("string") if "attack" in rows else pd.Series(pd.NA, index=rows.index,
                                                                                        dtype="string")
    rows["order"] = rows["rung"].map(ORDER).astype("int64")
    rows = rows.merge(runs, on=["dataset", "run"], how="inner", validate="many_to_one")
    for column in ("dataset", "run", "rung", "label", "kind", "family", "metric", "select", "interval_source",
                   "ceiling_source", "mechanism"):
        rows[column] = rows[column].astype("string")
    return rows.sort_values(["dataset", "run", "order"], ignore_index=True)


# ------------------------------------------------------------------ drawing

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


def verdict_of(verdict) -> tuple[str, str]:
    """(words, colour) of a canary verdict (``NO_VERDICT`` for NA)."""
    return VERDICT_WORDS.get(str(verdict), NO_VERDICT) if verdict is not None and verdict is not pd.NA else NO_VERDICT


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
            ax.annotate(f"{value:.3g}", (min(value, x_top), y), xytext=(5, 3), textcoords="offset points",
                        fontsize=size - 1, color="0.25")
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


def model_name(row) -> str:
    mechanism = str(row["mechanism"])
    name = MECHANISM_LABELS.get(mechanism, mechanism)
    if mechanism == EXTERNAL:  # a model trained elsewhere is named by its config entry (issue 44)
        return f"{row['run']} ({name})"
    target = row.get("target_epsilon")
    parts = [name] + ([f"ε = {float(target):g}"] if target is not None and not pd.isna(target)
                      and math.isfinite(float(target)) else [])
    if row.get("seed") is not None and not pd.isna(row.get("seed")):
        parts.append(f"seed {int(row['seed'])}")
    return " · ".join(parts)


def _title(first, verdict: pd.Series | None) -> tuple[str, str]:
    words, colour = verdict_of(verdict["verdict"] if verdict is not None else None)
    decided = decided_words(verdict.get("decided_by"), verdict.get("checked_model")) if verdict is not None else None
    title = f"Verdict: {words}" + (f" ({decided})" if decided else "")
    if bool(first["loss_diverged"]):
        title = "DID NOT TRAIN: these numbers describe a broken model\n" + title
        colour = "#b00020"
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
    subtitle = f"{model_name(first)} · {first['dataset']}" + (f"\n{checks}" if checks else "")
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
    runs = rows.drop_duplicates("run")[["run", "mechanism", "target_epsilon", "seed", "loss_diverged", "dataset"]]
    mechanisms = {m: i for i, m in enumerate(MECHANISM_LABELS)}
    runs = runs.assign(_base=(runs["mechanism"] == "baseline").astype(int),
                       _mech=runs["mechanism"].map(mechanisms).fillna(len(mechanisms)),
                       _eps=runs["target_epsilon"].astype(float).fillna(math.inf))
    return runs.sort_values(["_base", "_mech", "_eps", "seed", "run"], ignore_index=True)


def _grid_label(run) -> str:
    mechanism = str(run["mechanism"])
    parts = [MECHANISM_SHORT_LABELS.get(mechanism, mechanism)]
    if not pd.isna(run["target_epsilon"]) and math.isfinite(float(run["target_epsilon"])):
        parts[0] += f" ε={float(run['target_epsilon']):g}"
    if not pd.isna(run["seed"]):
        parts.append(f"seed {int(run['seed'])}")
    return ", ".join(parts)


def _grid_verdict(run, verdict) -> tuple[str, str]:
    if bool(run["loss_diverged"]):
        return "did not train", VERDICT_WORDS["above_promise"][1]
    value = None if verdict is None or _missing_value(verdict["verdict"]) else str(verdict["verdict"])
    words, colour = verdict_of(value)
    failed = {d: name for _, d, name in MECHANISM_CHECKS.values()}.get(
        None if verdict is None or _missing_value(verdict["decided_by"]) else str(verdict["decided_by"]))
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
