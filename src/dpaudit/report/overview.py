"""The overview page ``results/index.html`` (issue 34): which models keep their promise, and how sure we are.

One row per trained model, read from ``results/tables/metrics.parquet`` through the metric
vocabulary (headers are the declared labels; numbers are shown as they are in the table, each a
traceable ``<span class="num">`` of ``dpaudit.report.pages.number``): dataset, model (a link to
its dossier), the promise (accountant ε, δ), test accuracy, the canary audit's verdict coloured
with ``decided_by`` and the detectable noise factor, the strongest attack by AUC with its AUC
interval and its TPR at FPR 1 % with its Clopper–Pearson interval, the largest certified ε lower
bound (canary distribution-free bounds, every attack's bound, the DP-region bound) with its
ceiling, and ε* with its bootstrap interval. What does not apply is "—" with the reason.

Above the table: one sentence of counts and each dataset's ladder small multiples
(``dpaudit.plots.ladder.plot_ladder_grid``) embedded as data URIs, so the page is one file that
also works inside Snakemake's report. The table sorts on a header click and filters on typed
text (a few lines of inline script, no external asset).
"""

from __future__ import annotations

import base64
import json
import math
import posixpath
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.contract import paths as P
from dpaudit.contract.external import EXTERNAL, TRAINED_OUTSIDE
from dpaudit.contract.labels import ATTACK_LABELS
from dpaudit.contract.metrics import declared
from dpaudit.metrics.canary.mechanism import READS
from dpaudit.metrics.canary.rows import DISTRIBUTION_FREE
from dpaudit.metrics.ladder import (
    MECHANISM_CHECKS,
    STRONGEST_FPR,
    decided_words,
    ladder_rows,
    model_name,
    run_verdicts,
    selected_rows,
    strongest_attacks,
    verdict_of,
)
from dpaudit.report.pages import esc, is_missing, number, page

__all__ = ["HEADING", "VERDICT_RANK", "build_overview", "certified_bounds", "landing_fragment", "overview_frame"]

HEADING = "Is each model as private as promised?"
SPEC = ".3g"
# Sort order of the verdict column: the answers a reader must act on first.
VERDICT_RANK = {"above_promise": 0, "too_weak": 1, "consistent": 2}
NO_VERDICT_RANK = 3
# The certified ε lower bounds the "largest" column compares (family, metric); the canary ones are
# DISTRIBUTION_FREE (the verdict's), the others hold for any mechanism too.
CERTIFIED = (*(("canary", m) for m in DISTRIBUTION_FREE), ("mia", "epsilon_lower_bound"),
             ("privacy_card", "dp_region_epsilon_lower_bound"))


def certified_bounds(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, the largest certified ε lower bound (on a tie, the one with the highest ceiling):
    dataset, run, family, metric, value, ceiling (ceiling_max, else ceiling; NaN where none is
    recorded), ceiling_source, and the identity columns attack, threat_model, score_kind."""
    frames = []
    for family, metric in CERTIFIED:
        rows = selected_rows(table, family, metric, {})
        rows = rows[rows["run"].notna() & np.isfinite(rows["value"].to_numpy(float))]
        ceiling = np.full(len(rows), np.nan)
        source = np.full(len(rows), None, dtype=object)
        for column in ("ceiling", "ceiling_max"):  # ceiling_max wins where it has a value
            if column in rows.columns:
                values = rows[column].astype("float64").to_numpy()
                has = ~np.isnan(values)
                ceiling[has], source[has] = values[has], column
        frames.append(pd.DataFrame({
            "dataset": rows["dataset"].to_numpy(), "run": rows["run"].to_numpy(), "family": family, "metric": metric,
            "value": rows["value"].to_numpy(float), "ceiling": ceiling, "ceiling_source": source,
            **{c: (rows[c].astype("string").to_numpy() if c in rows.columns else pd.NA)
               for c in ("attack", "threat_model", "score_kind")}}))
    bounds = pd.concat(frames, ignore_index=True)
    bounds = bounds.assign(_c=np.nan_to_num(bounds["ceiling"].to_numpy(float), nan=-1.0))
    bounds = bounds.sort_values(["dataset", "run", "value", "_c"], ascending=[True, True, False, False], kind="stable")
    return bounds.drop_duplicates(["dataset", "run"]).drop(columns="_c").reset_index(drop=True)


def overview_frame(table: pd.DataFrame) -> pd.DataFrame:
    """One row per trained model: run columns, verdict, strongest attack (AUC and interval, TPR at
    FPR 1 % and interval), largest certified bound and ceiling, ε* (largest of the logit-loss
    estimators) with its bootstrap interval, test accuracy. Metric values are the table's."""
    ladder = ladder_rows(table)
    runs = ladder.drop_duplicates(["dataset", "run"])[["dataset", "run", "mechanism", "target_epsilon", "seed",
                                                       "model", "architecture", "accountant_epsilon",
                                                       "accountant_delta", "loss_diverged", "loss_divergence_reason",
                                                       "no_skill", "no_skill_reason"]]
    frame = runs.merge(run_verdicts(table), on=["dataset", "run"], how="left", validate="one_to_one")
    best = strongest_attacks(table)
    tpr = selected_rows(table, "mia", "tpr_at_fpr", {})
    if len(tpr) and "attack" in tpr.columns:
        tpr = tpr[np.isclose(tpr["fpr_target"].astype(float), STRONGEST_FPR)]
        best = best.merge(tpr[["dataset", "run", "attack", "value", "ci_lower", "ci_upper"]].rename(
            columns={"value": "tpr", "ci_lower": "tpr_low", "ci_upper": "tpr_high"}),
            on=["dataset", "run", "attack"], how="left", validate="one_to_one")
    frame = frame.merge(best, on=["dataset", "run"], how="left", validate="one_to_one")
    bounds = certified_bounds(table).rename(columns={"family": "bound_family", "metric": "bound_metric",
                                                     "value": "bound", "ceiling": "bound_ceiling",
                                                     "attack": "bound_attack"})
    frame = frame.merge(bounds, on=["dataset", "run"], how="left", validate="one_to_one")
    star = ladder[ladder["rung"].isin(["epsilon_star_parametric", "epsilon_star_empirical"])
                  & np.isfinite(ladder["value"].to_numpy(float))]
    star = star.sort_values(["dataset", "run", "value"], ascending=[True, True, False]).drop_duplicates(["dataset",
                                                                                                         "run"])
    frame = frame.merge(star[["dataset", "run", "rung", "value", "low", "high"]].rename(
        columns={"rung": "star_rung", "value": "star", "low": "star_low", "high": "star_high"}),
        on=["dataset", "run"], how="left", validate="one_to_one")
    frame["star_estimator"] = frame["star_rung"].astype("string").str.removeprefix("epsilon_star_")
    frame = frame.merge(star_flags(table), on=["dataset", "run", "star_estimator"], how="left",
                        validate="one_to_one")
    accuracy = selected_rows(table, "mia", "test_accuracy", {})[["dataset", "run", "value"]]
    frame = frame.merge(accuracy.rename(columns={"value": "test_accuracy"}), on=["dataset", "run"], how="left",
                        validate="one_to_one")
    order = frame["mechanism"].eq("baseline").astype(int)
    return (frame.assign(_b=order).sort_values(["dataset", "_b", "mechanism", "target_epsilon", "seed"],
                                               ignore_index=True).drop(columns="_b"))


# ------------------------------------------------------------------ cells


def _num(value, family, metric, select, field="value"):
    attrs = {"data_family": family, "data_metric": metric, "data_select": json.dumps(select, sort_keys=True)}
    if field != "value":
        attrs["data_field"] = field
    return number(value, SPEC, **attrs)


def _sort_value(value) -> str:
    if is_missing(value):
        return ""
    value = float(value)
    return "1e308" if value == math.inf else repr(value)


def _missing(reason: str) -> str:
    return f'— <span class="why">{esc(reason)}</span>'


def _promise(row) -> tuple[str, str]:
    eps = row["accountant_epsilon"]
    if is_missing(eps) or math.isinf(float(eps)):
        return "ε = ∞ " + _missing("no DP: nothing promised"), _sort_value(math.inf)
    delta = number(row["accountant_delta"], ".2g", data_column="accountant_delta")
    return (f"ε = {_num(eps, 'mia', 'accountant_epsilon', {})}, δ = {delta}", _sort_value(eps))


def _verdict(row) -> tuple[str, str]:
    verdict = None if is_missing(row.get("verdict")) else str(row["verdict"])
    words, colour = verdict_of(verdict)
    rank = VERDICT_RANK.get(verdict, NO_VERDICT_RANK)
    cls = verdict or "none"
    parts = [f'<span class="badge {esc(cls)}" data-verdict="{esc(cls)}">{esc(words)}</span>']
    if verdict is None:
        note = row.get("note")
        parts.append(_missing(str(note) if not is_missing(note) else "no canary audit for this model"))
    else:
        decided = decided_words(row.get("decided_by"), row.get("checked_model"))
        if decided:
            parts.append(f'<div class="small">{esc(decided)}</div>')
        factor = row.get("detectable_noise_factor")
        if not is_missing(factor):
            parts.append('<div class="small">detectable noise factor '
                         f'{_num(factor, "canary", "detectable_noise_factor", {})}</div>')
    if bool(row["loss_diverged"]):
        parts.insert(0, '<span class="badge dnt">did not train</span>')
        rank = -1
    elif bool(row.get("no_skill", False)):  # issue 46: what was measured, not "did not train"
        reason = row.get("no_skill_reason")
        why = f'<div class="small noskill-why">{esc(reason)}</div>' if not is_missing(reason) else ""
        parts.insert(0, f'<span class="badge noskill">no skill shown</span>{why}')
        rank = -0.5
    return "".join(parts), str(rank)


def _no_checks_reason(row) -> str:
    mechanism = str(row["mechanism"])
    if mechanism == "baseline":
        return "no DP: nothing to check"
    if mechanism == EXTERNAL:  # issue 44: no training loop to read
        return f"{TRAINED_OUTSIDE}: the checks read the training loop"
    if mechanism != "dpsgd":
        return "not DP-SGD: the checks read the DP-SGD training loop"
    if not bool(row.get("has_canary")):
        return "not recorded: the canary family is off (metrics.canary.enabled)"
    return "not recorded in the metrics table"


def _failed_detail(what, name: str) -> str:
    """What a failed check names (``failed``: '; '-joined), the first two and how many more."""
    items = [] if is_missing(what) else [w for w in str(what).split("; ") if w]
    shown = "; ".join(items[:2]) + (f"; … (+{len(items) - 2} more, in the dossier)" if len(items) > 2 else "")
    return f'<div class="small">{esc(name)}: {esc(shown or "failed")}</div>'


def _checks(row) -> tuple[str, str]:
    """The released model's mechanism checks (issues 32, 45): passed, FAILED (which), or — with the
    reason; a failed check of the audit twin is said below it (it decides the verdict too); then
    what the checks read of the training (noise, rows, ...)."""
    failed, passed, notes, not_run = [], [], [], 0
    for check, (_, _, name) in MECHANISM_CHECKS.items():
        if not bool(row.get(f"{check}_released_row")):
            continue
        value = row.get(f"{check}_released")
        if is_missing(value):
            note = row.get(f"{check}_released_note")
            notes.append(f'<div class="small">{esc(name)} {_missing(str(note) if not is_missing(note) else "not run")}'
                         "</div>")
            not_run += 1
        elif bool(value):
            passed.append(name)
        else:
            failed.append(name)
            notes.insert(0, _failed_detail(row.get(f"{check}_released_failed"), name))
    # the audit's own copies of the mechanism: a DP-SGD run's twin, a linear run's many-runs releases
    others = {who: [name for check, (_, _, name) in MECHANISM_CHECKS.items()
                    if not is_missing(row.get(f"{check}_{model}")) and not bool(row[f"{check}_{model}"])]
              for model, who in (("twin", "audit twin"), ("releases", "many-runs releases"))}
    twin = [name for names in others.values() for name in names]
    if not (failed or passed or notes or twin):
        return _missing(_no_checks_reason(row)), ""
    head = []
    if failed:
        head.append(f'<strong class="fail">FAILED</strong> ({esc(", ".join(failed))})')
    if passed:
        head.append(f'<span class="pass">passed</span> ({esc(", ".join(passed))})')
    if MECHANISM_CHECKS["noise"][2] in passed and not is_missing(row.get("noise_ratio")):
        ratio = _num(row["noise_ratio"], "canary", "noise_variance_ratio_min", {"checked_model": "released"})
        notes.append(f'<div class="small">{esc(declared("canary", "noise_variance_ratio_min").label)} {ratio}</div>')
    for who, names in others.items():
        if names:
            notes.append(f'<div class="small">{who}: <strong class="fail">FAILED</strong> ({esc(", ".join(names))})'
                         "</div>")
    read = [READS[metric][0] for check, (metric, _, _) in MECHANISM_CHECKS.items()
            if metric in READS and not is_missing(row.get(f"{check}_released"))]
    if read:  # what the checks read of the training (issue 45)
        notes.append(f'<div class="small">read: {esc(", ".join(dict.fromkeys(read)))}</div>')
    # sort: a failure first, then a check not run, then all passed
    rank = 0 if failed or twin else (1 if not_run else 2)
    return ("; ".join(head) or "—") + "".join(notes), str(rank)


def _interval(row, low, high, family, metric, select, fields) -> str:
    if is_missing(row.get(low)) or is_missing(row.get(high)):
        return ""
    return (f' <span class="ci">[{_num(row[low], family, metric, select, fields[0])}, '
            f'{_num(row[high], family, metric, select, fields[1])}]</span>')


def _attack(row) -> tuple[str, str, str, str]:
    if is_missing(row.get("attack")):
        return _missing("no attack AUC for this model"), "", _missing("no attack"), ""
    attack = str(row["attack"])
    select = {"attack": attack}
    auc = (f'<span class="what">{esc(ATTACK_LABELS.get(attack, attack))}</span> AUC '
           f"{_num(row['auc'], 'mia', 'attack_auc', select)}")
    auc += (_interval(row, "auc_low", "auc_high", "mia", "attack_auc", select, ("ci_lower", "ci_upper"))
            or ' <span class="why">(no interval recorded)</span>')
    tpr_select = {"attack": attack, "fpr_target": STRONGEST_FPR}
    if is_missing(row.get("tpr")):
        tpr = _missing("not resolved: a non-member scores above every threshold at FPR ≤ 1 %")
        tpr_sort = ""
    else:
        tpr = _num(row["tpr"], "mia", "tpr_at_fpr", tpr_select) + _interval(
            row, "tpr_low", "tpr_high", "mia", "tpr_at_fpr", tpr_select, ("ci_lower", "ci_upper"))
        tpr_sort = _sort_value(row["tpr"])
    return auc, _sort_value(row["auc"]), tpr, tpr_sort


def _bound_name(row) -> str:
    metric = row["bound_metric"]
    if row["bound_family"] == "mia":
        return f"{ATTACK_LABELS.get(str(row['bound_attack']), row['bound_attack'])} attack"
    if row["bound_family"] == "privacy_card":
        return "loss ROC vs DP region"
    return f"canary {str(row['threat_model']).replace('_', ' ')}: {declared('canary', metric).label}"


def _bound(row) -> tuple[str, str]:
    if is_missing(row.get("bound")):
        return _missing("no certified bound for this model"), ""
    select = {k: row[c] for k, c in (("attack", "bound_attack"), ("threat_model", "threat_model"),
                                     ("score_kind", "score_kind")) if not is_missing(row.get(c))}
    cell = f"ε ≥ {_num(row['bound'], row['bound_family'], row['bound_metric'], select)}"
    if is_missing(row.get("bound_ceiling")):
        cell += ' <span class="small">ceiling — <span class="why">none recorded</span></span>'
    else:
        cell += (' <span class="small">ceiling ' + _num(row["bound_ceiling"], row["bound_family"],
                                                         row["bound_metric"], select, row["ceiling_source"]) + "</span>")
    return cell + f'<div class="small">{esc(_bound_name(row))}</div>', _sort_value(row["bound"])


# ε* as what it is (issue 46): the cell's caption, and its tooltip
STAR_CAPTION = "this model's empirical privacy over records, not a bound on the mechanism's ε"
STAR_TOOLTIP = ("ε* (Negoescu et al. 2023): ln of the largest likelihood ratio by which the best loss-threshold test "
                "tells this model's members from other records. It describes this trained model instance (the "
                "randomness is the draw of one record), not the training mechanism: it is an estimate, not a bound "
                "on the mechanism's ε, and may exceed the promise without contradicting it. Its interval is a "
                "bootstrap over records.")
# the flag rows of an epsilon_star row (dpaudit.metrics.epsilon_star.run) and the columns the cell reads
STAR_FLAGS = {"at_resolution": ("argmax_count", "resolution", "term", "n_tr", "n_pop"),
              "outside_bootstrap_interval": (), "epsilon_star_bias_corrected": ("ci_lower", "ci_upper"),
              "within_permutation_null": ("null_quantile", "null_p_value")}


def star_flags(table: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, run, star_estimator) of the logit loss: the ε* row's flags (at_resolution,
    outside_bootstrap_interval: value_bool) and bias-corrected form (bias_corrected, bc_low,
    bc_high), with the columns the resolution's words need; NA where a table lacks them."""
    keys = ["dataset", "run", "star_estimator"]
    out = pd.DataFrame(columns=keys)
    for metric, columns in STAR_FLAGS.items():
        rows = selected_rows(table, "epsilon_star", metric, {"loss": "logit"})
        if rows.empty or "estimator" not in rows.columns:
            continue
        value = rows["value"] if metric == "epsilon_star_bias_corrected" else rows["value_bool"]
        name = {"epsilon_star_bias_corrected": "bias_corrected"}.get(metric, metric)
        picked = pd.DataFrame({"dataset": rows["dataset"].to_numpy(), "run": rows["run"].to_numpy(),
                               "star_estimator": rows["estimator"].astype("string").to_numpy(),
                               name: value.to_numpy(),
                               **{{"ci_lower": "bc_low", "ci_upper": "bc_high"}.get(c, c): rows[c].to_numpy()
                                  for c in columns if c in rows.columns}})
        out = picked if out.empty else out.merge(picked, on=keys, how="outer", validate="one_to_one")
    for column in ("dataset", "run", "star_estimator"):
        out[column] = out[column].astype("string")
    return out


def _resolution_words(row) -> str:
    """Why the ε* sits at (empirical) or beyond (parametric) the sample's resolution, in words."""
    members = str(row.get("term")) in ("m2", "m4")
    n = row.get("n_tr") if members else row.get("n_pop")
    who = "member" if members else "non-member"
    select = {"estimator": str(row["star_estimator"]), "loss": "logit"}
    size = _num(n, "epsilon_star", "at_resolution", select, "n_tr" if members else "n_pop") if not is_missing(n) else "n"
    if str(row["star_estimator"]) == "parametric":
        count = _num(row.get("argmax_count"), "epsilon_star", "at_resolution", select, "argmax_count")
        return f"beyond the sample's resolution: rests on {count} expected {who}s of {size} (a Normal-tail extrapolation)"
    fewest = round(float(row["resolution"]) * float(n)) if not is_missing(row.get("resolution")) and not \
        is_missing(n) else 1
    return f"at the sample's resolution: rests on {'one' if fewest == 1 else fewest} {who}{'s' * (fewest > 1)} of {size}"


def _star(row) -> tuple[str, str]:
    if is_missing(row.get("star")):
        return _missing("no ε* of the logit loss for this model"), ""
    estimator = str(row["star_rung"]).removeprefix("epsilon_star_")
    select = {"estimator": estimator, "loss": "logit"}
    cell = _num(row["star"], "epsilon_star", "epsilon_star", select)
    cell += _interval(row, "star_low", "star_high", "epsilon_star", "epsilon_star", select, ("boot_low", "boot_high"))
    cell += f'<div class="small">{esc(estimator)}</div>'
    if _true(row.get("outside_bootstrap_interval")):
        bc = _num(row.get("bias_corrected"), "epsilon_star", "epsilon_star_bias_corrected", select)
        cell += (f'<div class="small flag star-outside">outside its bootstrap interval: bias-corrected {bc}'
                 + _interval(row, "bc_low", "bc_high", "epsilon_star", "epsilon_star_bias_corrected", select,
                             ("ci_lower", "ci_upper")) + "</div>")
    if _true(row.get("at_resolution")):
        cell += f'<div class="small flag star-resolution">{_resolution_words(row)}</div>'
    if _true(row.get("within_permutation_null")):
        quantile = _num(row.get("null_quantile"), "epsilon_star", "within_permutation_null", select, "null_quantile")
        cell += (f'<div class="small flag star-null">within the no-signal null: random relabellings of members and '
                 f"non-members reach {quantile}</div>")
    cell += f'<div class="small star-caption">{esc(STAR_CAPTION)}</div>'
    return f'<div class="star" title="{esc(STAR_TOOLTIP)}">{cell}</div>', _sort_value(row["star"])


def _true(value) -> bool:
    return not is_missing(value) and bool(value)


def _href(dataset: str, run: str) -> str:
    return posixpath.relpath(P.DOSSIER.format(dataset=dataset, run=run), posixpath.dirname(P.OVERVIEW))


COLUMNS = ("dataset", "model", "promise (ε, δ)", declared("mia", "test_accuracy").label, "verdict (canary audit)",
           "mechanism checks",
           f"strongest {declared('mia', 'attack_auc').label}",
           f"{declared('mia', 'tpr_at_fpr').label} 1 %", f"largest certified {declared('mia', 'epsilon_lower_bound').label}",
           f'{declared("epsilon_star", "epsilon_star").label} (estimate)')


def _row(row) -> str:
    promise, promise_sort = _promise(row)
    verdict, verdict_sort = _verdict(row)
    checks, checks_sort = _checks(row)
    auc, auc_sort, tpr, tpr_sort = _attack(row)
    bound, bound_sort = _bound(row)
    star, star_sort = _star(row)
    accuracy = (_num(row["test_accuracy"], "mia", "test_accuracy", {}) if not is_missing(row.get("test_accuracy"))
                else _missing("no test accuracy"))
    href = _href(str(row["dataset"]), str(row["run"]))
    name = model_name(row)
    model = f'<a class="dossier" href="{esc(href)}">{esc(name)}</a>'
    cells = [(esc(row["dataset"]), str(row["dataset"])), (model, name), (promise, promise_sort),
             (accuracy, _sort_value(row.get("test_accuracy"))), (verdict, verdict_sort), (checks, checks_sort),
             (auc, auc_sort),
             (tpr, tpr_sort), (bound, bound_sort), (star, star_sort)]
    tds = "".join(f'<td data-sort="{esc(sort)}">{cell}</td>' for cell, sort in cells)
    cls = ' class="dnt"' if bool(row["loss_diverged"]) else (' class="noskill"' if bool(row.get("no_skill", False))
                                                              else "")
    return f'<tr{cls} data-dataset="{esc(row["dataset"])}" data-run="{esc(row["run"])}">{tds}</tr>'


def _summary(frame: pd.DataFrame) -> str:
    verdicts = frame["verdict"].astype("string")
    counts = {v: int((verdicts == v).sum()) for v in VERDICT_RANK}
    none = int(verdicts.isna().sum())
    words = {"above_promise": "measured above the promise", "consistent": "consistent",
             "too_weak": "audit too weak to say"}
    parts = [f'<span class="badge {v}{" zero" if not counts[v] else ""}">{counts[v]} {w}</span>'
             for v, w in words.items()]
    parts.append(f'<span class="badge none{" zero" if not none else ""}">{none} with no promise to audit</span>')
    dnt = int(frame["loss_diverged"].sum())
    if dnt:
        parts.append(f'<span class="badge dnt">{dnt} did not train</span>')
    unskilled = int(frame["no_skill"].sum())
    if unskilled:
        parts.append(f'<span class="badge noskill">{unskilled} with no skill shown above the majority rate</span>')
    datasets = frame["dataset"].nunique()
    return (f'<p class="answer">{len(frame)} models on {datasets} dataset{"s" if datasets > 1 else ""}: '
            + " ".join(parts) + "</p>")


def _data_uri(png: str | Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


STYLE = """
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:0.6em 1em;color:#1b1b1b;max-width:100em}
h1{font-size:1.4em;margin:0.1em 0 0.2em}
h2{font-size:1.1em;margin:1em 0 0.3em}
.answer{margin:0.2em 0 0.5em}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:0.9em;color:#fff;white-space:nowrap}
.badge.above_promise{background:#b00020}.badge.consistent{background:#1a7f37}.badge.too_weak{background:#9a6700}
.badge.noskill{background:#e65100;margin-right:3px}tr.noskill td{background:#fff6ee}
.badge.none{background:#6e7781}.badge.zero{background:#fff;color:#666;border:1px solid #bbb}.badge.dnt{background:#b00020;border:1px dashed #fff;margin-right:3px}
.figures{display:flex;gap:8px;overflow-x:auto;margin:0.3em 0}
.figures figure{margin:0;flex:0 1 auto;min-width:280px}
.figures img{width:auto;max-width:100%;height:auto;max-height:60vh;display:block;border:1px solid #ddd}
.figures figcaption{font-size:0.85em;color:#444}
.tools{margin:0.5em 0}
.tools input{font:inherit;padding:3px 6px;width:22em;max-width:100%}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:4px 6px;border-bottom:1px solid #e4e4e4}
thead th{background:#f4f4f4;position:sticky;top:0;z-index:1}
thead th button{all:unset;cursor:pointer;font-weight:600}
thead th[aria-sort=ascending] button::after{content:" ▲"}thead th[aria-sort=descending] button::after{content:" ▼"}
tr.dnt td{background:#fdeeee}
.num{font-variant-numeric:tabular-nums}
.ci{color:#555}.small{font-size:0.85em;color:#444}.why{color:#666;font-size:0.85em}
.what{font-weight:600}.fail{color:#b00020}.pass{color:#1a7f37}.flag{color:#9a6700}.star-caption{font-style:italic}
.scroll{overflow:auto;max-height:calc(100vh - 1em)}
@media (max-width:1100px){body{font-size:13px;padding:0.4em 0.5em}th,td{padding:3px 4px}.tools input{width:16em}
td .badge{white-space:normal}.figures figure{min-width:360px}}.embedded-note{display:none;color:#555}
body.embedded .embedded-note{display:block}
"""

SCRIPT = """<script>
(function(){
  if (location.protocol === 'data:' || location.protocol === 'about:') document.body.classList.add('embedded');
  var table = document.getElementById('overview'), body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function(th, i){
    th.querySelector('button').addEventListener('click', function(){
      var up = th.getAttribute('aria-sort') !== 'ascending';
      Array.prototype.forEach.call(heads, function(h){ h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function(a, b){
        var x = a.cells[i].dataset.sort, y = b.cells[i].dataset.sort;
        if (x === '' && y !== '') return 1; if (y === '' && x !== '') return -1;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return up ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
  document.getElementById('filter').addEventListener('input', function(e){
    var words = e.target.value.toLowerCase().split(/\\s+/).filter(Boolean);
    Array.prototype.forEach.call(body.rows, function(r){
      var text = r.textContent.toLowerCase();
      r.hidden = !words.every(function(w){ return text.indexOf(w) >= 0; });
    });
  });
})();
</script>"""


def build_overview(table: pd.DataFrame, figures: Mapping[str, str | Path] | None = None) -> str:
    """The overview page of every trained model of ``table``; ``figures``: dataset → its ladder
    small multiples (PNG), embedded above the table."""
    frame = overview_frame(table)
    if frame.empty:
        raise ValueError("the metrics table has no trained model to show")
    if figures:  # the rows' datasets in the figures' order (the config's), the rest after them
        rank = {dataset: i for i, dataset in enumerate(figures)}
        frame = frame.sort_values("dataset", key=lambda d: d.map(rank).fillna(len(rank)), kind="stable",
                                  ignore_index=True)
    figs = "".join(
        f'<figure><a href="{esc(posixpath.relpath(P.fill(P.DATASET_FIGURE, name="ladder", dataset=dataset), "results"))}">'
        f'<img alt="ladder small multiples of {esc(dataset)}" src="{_data_uri(png)}"></a>'
        f"<figcaption>{esc(dataset)}: every model's ε ladder (click to enlarge)</figcaption></figure>"
        for dataset, png in (figures or {}).items())
    head = "".join(f'<th scope="col"><button type="button">{esc(c)}</button></th>' for c in COLUMNS)
    body = "".join(_row(row) for _, row in frame.iterrows())
    runs = posixpath.relpath(P.RUNS_PAGE, posixpath.dirname(P.OVERVIEW))
    html = (
        f"<h1>{esc(HEADING)}</h1>" + _summary(frame)
        + ('<p class="small">Verdict: the canary audit against the accountant\'s promise (red: the mechanism\'s '
           "noise certificate or accounting check failed, or a certified bound or the claimed trade-off curve is "
           "contradicted; amber: the audit could not have caught a 2× noise shortfall; grey: no DP, so no "
           "promise). Each ladder puts a model's numbers on one line of a shared ε axis: the tick is the promise "
           "(red beyond it), dots certified lower bounds, diamonds estimates, the faint bar the audit's reach "
           "(the largest ceiling of a certified bound: what perfect guessing could certify). Each dossier opens with the model's "
           "full ladder, every number named, with its interval.</p>")
        + (f'<div class="figures">{figs}</div>' if figs else "")
        + '<div class="tools"><input id="filter" type="search" placeholder="filter: type a dataset, mechanism, verdict…" '
        'aria-label="filter the models"> <span class="small">click a header to sort; each model links to its '
        f'dossier; every hyperparameter: <a href="{esc(runs)}">the runs table</a></span>'
        '<p class="embedded-note">Inside report.html the dossier links do not resolve: open a model from the '
        "category Dossiers, or open results/index.html.</p></div>"
        + f'<div class="scroll"><table id="overview"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
        + '<p class="small">Numbers: 3 significant digits, [low, high] = the interval the metrics table records '
          "(Hanley–McNeil for a reference-model attack's AUC, Clopper–Pearson for TPR, bootstrap for ε*). "
          f"ε*: {esc(STAR_TOOLTIP)} Flagged where its winning ratio rests on the fewest records it can use (the "
          "sample's resolution: the value is then a lattice value other models share; for the parametric fit, an "
          "extrapolation of its Normal tail below one record) or lies outside its own bootstrap interval: ε* is a "
          "maximum over thresholds, and the replicates' maxima of resampled ratios sit above it by its upward bias, "
          "so the bias-corrected form 2ε* − mean of the replicates is shown with the basic bootstrap interval "
          "(floored at 0; it corrects the first-order bias only). "
          "Each value is a row of results/tables/metrics.parquet; names and meanings: docs/metrics.md.</p>"
        + SCRIPT)
    return page("dpaudit: is each model as private as promised?", html, style=STYLE, lang="en", viewport=True,
                meta={"dpaudit-page": "overview"})


def landing_fragment(overview_page: str) -> str:
    """The overview as an HTML fragment for the report's first view: an iframe holding the whole
    page as a data URI (Snakemake inserts the workflow description with innerHTML, where a script
    would not run and the page's style would restyle the report; inside the iframe sorting and
    filtering work and the style stays the page's own). The report shows the description in a
    narrow column (``max-w-lg``) beside the rule graph, in a container that centres what it holds
    (``items-center justify-center``), so a wide iframe would be cut on the left and hide under
    the graph: the style, scoped with ``:has`` to the containers of this iframe (Snakemake 9's
    report template), lifts the width limit, aligns the view to its top left and wraps the rule
    graph below. Elsewhere it does nothing; a report template with other classes shows the iframe
    in the narrow column, still first."""
    uri = "data:text/html;charset=utf-8;base64," + base64.b64encode(overview_page.encode()).decode("ascii")
    return ("<style>.prose:has(#dpaudit-overview){max-width:none}"
            ".items-center:has(#dpaudit-overview){align-items:flex-start;justify-content:flex-start}"
            ".items-start:has(#dpaudit-overview){flex-wrap:wrap}</style>"
            f'<iframe id="dpaudit-overview" title="{esc(HEADING)}" src="{uri}" '
            'style="width:calc(100vw - 22rem);min-width:30rem;height:calc(100vh - 4rem);border:1px solid #ccc;'
            'background:#fff;display:block"></iframe>\n')
