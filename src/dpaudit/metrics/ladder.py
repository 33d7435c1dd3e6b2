"""The ladder's data (issue 34): each model's rungs read from the metrics table, its verdict and its
mechanism checks, in words. The figures (``dpaudit.plots.ladder``) and the overview page
(``dpaudit.report.overview``) both read them here (issue 43: a page imports no figure module).

Every rung is a metrics.parquet row copied unchanged (``ladder_rows``), except the one derived rung:
the strongest attack's (highest AUC) ln((TPR − δ)/FPR) at FPR 1 %, a point estimate (not a bound).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpaudit.contract.architectures import shown_architectures
from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.labels import ATTACK_LABELS
from dpaudit.contract.mechanisms import MECHANISM_LABELS
from dpaudit.contract.metrics import ATTACK_NAMES, declared
from dpaudit.metrics.canary.rows import LADDER

__all__ = ["CHECKED_MODELS", "DECIDED_BY_WORDS", "LADDER_RUNGS", "MECHANISM_CHECKS", "NO_SKILL_COLOUR", "NO_VERDICT", "ORDER", "RUN_COLUMNS", "Rung", "STRONGEST_FPR", "STRONGEST_KEY", "STRONGEST_LABEL", "VERDICT_WORDS", "checks_line", "decided_words", "ladder_rows", "mechanism_checks", "missing_value", "model_name", "run_verdicts", "selected_rows", "strongest_attacks", "verdict_of"]

# The FPR at which the strongest attack's TPR is read (the overview's column, the derived rung).
STRONGEST_FPR = 0.01
RUN_COLUMNS = ["dataset", "run", "mechanism", "target_epsilon", "seed", "model", "accountant_epsilon",
               "accountant_delta", "loss_diverged", "loss_divergence_reason", "no_skill", "no_skill_reason"]
# A model whose held-out accuracy is not significantly above the majority rate (train.json's no_skill)
NO_SKILL_COLOUR = "#e65100"
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
    for flag in ("loss_diverged", "no_skill"):  # (a table aggregated before issue 35 or 46 lacks them)
        runs[flag] = (runs[flag] if flag in runs else pd.Series(False, index=runs.index)).astype(
            "boolean").fillna(False).astype(bool)
    for column in ("loss_divergence_reason", "no_skill_reason", "model"):
        if column not in runs:
            runs[column] = pd.Series(pd.NA, index=runs.index, dtype="string")
    runs["architecture"] = shown_architectures(runs)  # NA unless the dataset has several (issue 46)
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
                    "sampler": ("sampler_check_passed", "sampler_check", "sampler check"),
                    "accounting": ("accounting_reproduced", "accounting_check", "accounting check")}
for _metric, _, _ in MECHANISM_CHECKS.values():
    declared("canary", _metric)  # the contract's names: a renamed metric fails here, at import
CHECKED_MODELS = {"released": "the released model", "twin": "its audit twin",
                  "releases": "its many-runs audit's releases"}
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


def missing_value(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def decided_words(decided_by, checked_model=None) -> str | None:
    """'decided by …' in words (None without decided_by); a mechanism check names the model it checked."""
    if missing_value(decided_by):
        return None
    words = DECIDED_BY_WORDS.get(str(decided_by), str(decided_by).replace("_", " "))
    if str(decided_by) in {d for _, d, _ in MECHANISM_CHECKS.values()} and not missing_value(checked_model):
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
        parts.append(f"{name} not run" if missing_value(passed) else f"{name} {'passed' if passed else 'FAILED'}")
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
    flags = _estimate_flags(rung, rows, table)
    return pd.DataFrame({
        "dataset": rows["dataset"].to_numpy(), "run": rows["run"].to_numpy(), "rung": rung.key, "label": rung.label,
        "kind": rung.kind, "family": rung.family, "metric": rung.metric,
        "select": json.dumps(rung.select, sort_keys=True), "value": rows["value"].to_numpy(float),
        "low": low, "high": high, "interval_source": ",".join(rung.interval) if rung.interval else None,
        "ceiling": ceiling, "ceiling_source": source, "derived": False, "flags": flags,
    })


# An ε* rung's flags (issue 46, metrics.parquet's flag rows of the same loss and estimator), said beside its value.
ESTIMATE_FLAGS = {"at_resolution": "at the sample's resolution", "outside_bootstrap_interval": "outside its interval",
                  "within_permutation_null": "within the no-signal null"}


def _estimate_flags(rung: Rung, rows: pd.DataFrame, table: pd.DataFrame) -> np.ndarray:
    """Per row of ``rows`` (one per run), the words of its raised flags, or None."""
    words = np.full(len(rows), None, dtype=object)
    if rung.family != "epsilon_star" or not len(rows) or "value_bool" not in table.columns:
        return words
    raised = {}
    for metric, said in ESTIMATE_FLAGS.items():
        flagged = selected_rows(table, rung.family, metric, rung.select)
        for key in flagged.loc[flagged["value_bool"].astype("boolean").fillna(False).to_numpy(bool),
                               ["dataset", "run"]].itertuples(index=False):
            raised.setdefault(tuple(key), []).append(said)
    for i, key in enumerate(rows[["dataset", "run"]].itertuples(index=False)):
        if tuple(key) in raised:
            words[i] = ", ".join(raised[tuple(key)])
    return words


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
    rows["flags"] = (rows["flags"].astype("string") if "flags" in rows
                     else pd.Series(pd.NA, index=rows.index, dtype="string"))
    for column in ("dataset", "run", "rung", "label", "kind", "family", "metric", "select", "interval_source",
                   "ceiling_source", "mechanism"):
        rows[column] = rows[column].astype("string")
    return rows.sort_values(["dataset", "run", "order"], ignore_index=True)




def verdict_of(verdict) -> tuple[str, str]:
    """(words, colour) of a canary verdict (``NO_VERDICT`` for NA)."""
    return VERDICT_WORDS.get(str(verdict), NO_VERDICT) if verdict is not None and verdict is not pd.NA else NO_VERDICT


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
    if not missing_value(row.get("architecture")):  # a dataset with several architectures (issue 46)
        parts.append(str(row["architecture"]))
    return " · ".join(parts)
