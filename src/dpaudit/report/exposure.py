"""Section 4 of the dossier, exposure of individual rows, and the per-row attack ranking (issue 24).

With the reference-model attacks' per-example scores (``results/attacks/{dataset}/{run}/scores.parquet``,
``dpaudit.metrics.attack_rows``) the members are ranked by the score of the run's strongest
attack: the attack whose ``attack_auc`` row is the highest of the run's mia rows with an
``attack`` column (ties: the order of ``dpaudit.contract.metrics.ATTACK_NAMES``). Each row's
``nonmembers_at_or_above`` is how many non-members of the audit population score at least as
high under that attack: a threshold placed at the row flags exactly those non-members, so the
row "scores above all but k non-members". Without scores the members are ranked by their loss
(``most_exposed``), and the section says so.

Rows other families single out are flagged (``flagged_rows``): the privacy profile's δ_max row of
each view of the dataset (metrics table, ``y_max_row_id``: a 1-based row of the source, which is
example_id + 1 for the built-in sources breast_cancer and adult), the worst-case neighbour of the
linear mechanisms' many-runs canary audit (its record's ``example_id``) and the identifiability
audit's x* (``example_id_xstar`` of ``audit_runs.parquet``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from dpaudit.contract.labels import ATTACK_LABELS
from dpaudit.contract.mechanisms import LINEAR_MECHANISMS, MECHANISM_LABELS
from dpaudit.contract.metrics import ATTACK_NAMES
from dpaudit.dp.roc import negatives_at_or_above
from dpaudit.report.pages import SIG, esc, fmt, missing_p, number
from dpaudit.report.run_view import RunView

__all__ = ["AUDIT_RUN_COLUMNS", "PROFILE_SOURCES", "TOP_ROWS", "attack_aucs", "attack_exposed", "flagged_rows",
           "most_exposed", "nonmembers_at_or_above", "strongest_attack"]

TOP_ROWS = 5
# Sources of a privacy-profile view whose 1-based row ids are the dataset's example_id + 1
# (dpaudit.profile.data keeps every raw row; dpaudit.data numbers the same rows from 0).
PROFILE_SOURCES = ("breast_cancer", "adult")
# What flagged_rows reads of the identifiability audit's runs table (results/tables/audit_runs.parquet).
AUDIT_RUN_COLUMNS = ["dataset", "pair", "example_id_xstar"]


# ------------------------------------------------------------------ the ranking


def attack_aucs(table: pd.DataFrame, dataset: str, run: str) -> dict[str, pd.Series]:
    """attack → its ``attack_auc`` row (value, ci_lower, ci_upper) of one run, in ATTACK_NAMES order."""
    if "attack" not in table.columns:
        return {}
    rows = table[(table["dataset"] == dataset) & (table["run"] == run) & (table["family"] == "mia")
                 & (table["metric"] == "attack_auc")]
    rows = rows[rows["attack"].notna()]
    found = {str(row["attack"]): row for _, row in rows.iterrows()}
    order = [a for a in ATTACK_NAMES if a in found] + sorted(a for a in found if a not in ATTACK_NAMES)
    return {a: found[a] for a in order}


def strongest_attack(aucs: Mapping[str, float], available: Iterable[str] | None = None) -> str | None:
    """The attack with the highest finite AUC (first in ``aucs``' order on a tie), among ``available``."""
    allowed = None if available is None else set(available)
    best, best_auc = None, -math.inf
    for attack, auc in aucs.items():
        auc = float(auc)
        if (allowed is None or attack in allowed) and math.isfinite(auc) and auc > best_auc:
            best, best_auc = attack, auc
    return best


# For each score, how many non-member scores are ≥ it (the statistics home's rank count).
nonmembers_at_or_above = negatives_at_or_above


def attack_exposed(scores: pd.DataFrame, attack: str, *, top: int | None = TOP_ROWS) -> pd.DataFrame:
    """Members ranked by ``attack``'s score (higher = more likely a member; ties by example_id).

    Columns: ``rank`` (competition rank: 1 + the members scoring strictly higher, so tied rows
    share it), ``tied`` (members with this exact score, the row included), ``example_id``,
    ``label``, ``score``, ``nonmembers_at_or_above``, ``n_nonmembers``; ``top=None`` keeps every
    scored member. RMIA's score is a fraction of its population samples, so ties are common.
    """
    member = scores["is_member"].to_numpy(bool)
    values = scores[attack].to_numpy(np.float64)
    members = scores.loc[member & ~np.isnan(values)]
    ranked = pd.DataFrame({"example_id": members["example_id"].to_numpy(np.int64),
                           "label": members["label"].to_numpy() if "label" in members else pd.NA,
                           "score": members[attack].to_numpy(np.float64)})
    nonmember = values[~member]
    ranked["nonmembers_at_or_above"] = nonmembers_at_or_above(ranked["score"], nonmember)
    ranked["n_nonmembers"] = int((~np.isnan(nonmember)).sum())
    ascending = np.sort(ranked["score"].to_numpy())
    at_or_below = np.searchsorted(ascending, ranked["score"].to_numpy(), side="right")
    above = ascending.size - at_or_below
    ranked["tied"] = at_or_below - np.searchsorted(ascending, ranked["score"].to_numpy(), side="left")
    ranked.insert(0, "rank", (above + 1).astype(np.int64))
    ranked = ranked.sort_values(["score", "example_id"], ascending=[False, True], kind="mergesort")
    return (ranked if top is None else ranked.head(top)).reset_index(drop=True)


def most_exposed(outputs: pd.DataFrame, splits: Mapping, *, loss_column: str = "loss_ce",
                 top: int = TOP_ROWS) -> pd.DataFrame:
    """Members ranked by how far below the non-members their loss is.

    ``nonmember_fraction_below`` is the fraction of non-members whose loss is at most the
    member's loss: the false-positive rate of a loss threshold placed at that member. The
    smallest fraction (ties: smaller loss first) is the member a loss-threshold attack
    singles out first.
    """
    members = outputs[outputs["split"] == splits["members"]]
    nonmember_losses = np.sort(outputs.loc[outputs["split"] == splits["nonmembers"], loss_column].to_numpy(np.float64))
    losses = members[loss_column].to_numpy(np.float64)
    below = np.searchsorted(nonmember_losses, losses, side="right") / max(len(nonmember_losses), 1)
    ranked = members.assign(loss=losses, nonmember_fraction_below=below)
    ranked = ranked.sort_values(["nonmember_fraction_below", "loss"], kind="mergesort")
    columns = [c for c in ("example_id", "label", "loss", "nonmember_fraction_below") if c in ranked.columns]
    return ranked[columns].head(top).reset_index(drop=True)


# ------------------------------------------------------------------ rows other families single out


def flagged_rows(table: pd.DataFrame, dataset: str, *, canary_records: Mapping[str, Mapping] | None = None,
                 audit_runs: pd.DataFrame | None = None) -> dict[int, list[str]]:
    """example_id → why another family singles the row out (privacy profile, worst-case neighbour, DI audit x*)."""
    flags: dict[int, list[str]] = {}

    def add(example_id, text):
        if example_id is None or (isinstance(example_id, float) and math.isnan(example_id)) or int(example_id) < 0:
            return
        texts = flags.setdefault(int(example_id), [])
        if text not in texts:
            texts.append(text)

    if dataset in PROFILE_SOURCES and "y_max_row_id" in table.columns:
        rows = table[(table["dataset"] == dataset) & (table["family"] == "profile") & (table["metric"] == "delta_max")]
        rows = rows.sort_values("view", kind="stable") if "view" in rows.columns else rows.iloc[0:0]
        for _, row in rows.iterrows():
            if pd.notna(row["y_max_row_id"]):
                add(int(row["y_max_row_id"]) - 1,
                    f"privacy-profile δ_max row of view {row['view']} (source row {int(row['y_max_row_id'])})")
    worst = {}
    for run, record in sorted((canary_records or {}).items()):
        if record and "shift_norm" in record and record.get("example_id") is not None:
            worst.setdefault(int(record["example_id"]), []).append(run)
    for example_id, runs in worst.items():
        add(example_id, "worst-case neighbour of the linear canary audit"
            + (f" ({len(runs)} runs)" if len(runs) > 1 else ""))
    if audit_runs is not None and len(audit_runs):
        rows = audit_runs[audit_runs["dataset"] == dataset] if "dataset" in audit_runs.columns else audit_runs
        for example_id, group in rows.groupby("example_id_xstar", sort=True):
            pairs = sorted(group["pair"].astype(str).unique()) if "pair" in group.columns else []
            add(example_id, "x* of the identifiability audit" + (f" (pair {', '.join(pairs)})" if pairs else ""))
    return flags


def user_ids_of(ids: pd.DataFrame | None, dataset_info: Mapping) -> dict[int, str] | None:
    """example_id → the user's own id, from ids.parquet, when the dataset's ids are the user's
    text ids (``dataset_info["ids"]``); None when example_id is the user's id already."""
    from dpaudit.data.datasets import TEXT_IDS

    if ids is None or (dataset_info.get("ids") or {}).get("kind") != TEXT_IDS:
        return None
    return dict(zip(ids["example_id"].to_numpy(np.int64).tolist(), ids["id"].astype(str).tolist(), strict=True))


def _user_head(user_ids: Mapping[int, str] | None) -> str:
    return "<th>your id</th>" if user_ids else ""


def _user_cell(user_ids: Mapping[int, str] | None, example_id) -> str:
    """The user's own id of a row (a table's text ids, ids.parquet), when the dataset has them."""
    if not user_ids:
        return ""
    return f'<td data-h="your id">{esc(user_ids.get(int(example_id), "—"))}</td>'


def _flag_cell(flags: Mapping[int, Sequence[str]] | None, example_id: int) -> str:
    texts = (flags or {}).get(int(example_id), [])
    return "; ".join(esc(t) for t in texts) if texts else "—"


# ------------------------------------------------------------------ the section


def _attack_ranking(view: RunView, scores: pd.DataFrame, flags, user_ids=None) -> str | None:
    aucs = attack_aucs(view.table, view.dataset, view.run)
    available = [a for a in aucs if a in scores.columns]
    attack = strongest_attack({a: aucs[a]["value"] for a in available})
    if attack is None:
        return None
    top = attack_exposed(scores, attack)
    everyone = attack_exposed(scores, attack, top=None)

    def auc_num(name):
        return number(aucs[name]["value"], ".3f", data_family="mia", data_metric="attack_auc",
                      data_select=json.dumps({"attack": name}))

    others = [f"{esc(ATTACK_LABELS.get(a, a))} {auc_num(a)}" for a in available if a != attack]
    best = aucs[attack]
    runner = max((a for a in available if a != attack), key=lambda a: float(aucs[a]["value"]), default=None)
    lo, hi = best.get("ci_lower"), best.get("ci_upper")
    close = (runner is not None and lo is not None and pd.notna(lo)
             and float(aucs[runner]["value"]) >= float(lo))
    n_non = int(top["n_nonmembers"].iloc[0]) if len(top) else 0
    text = (f"<p>Ranked by <strong>{esc(ATTACK_LABELS.get(attack, attack))}</strong>, the strongest attack on this "
            f"model: its AUC {auc_num(attack)} is the highest of the attacks run on it"
            + (f" ({', '.join(others)})" if others else "") + ". "
            + (f"Its AUC interval ({fmt(lo, '.3f')}–{fmt(hi, '.3f')}) holds the runner-up's AUC, so the choice "
               "between them is not statistically clear. " if close else "")
            + ("The interval also holds 0.5: the attack is not distinguishable from guessing on this model, and "
               "its ranking of the rows is mostly noise. " if lo is not None and pd.notna(lo) and float(lo) <= 0.5
               else "")
            + f"A member's rank among non-members is how many of the {n_non} non-members score at least as "
            "high: a threshold at that member flags exactly them, so it scores above all but that many "
            "non-members.</p>")
    rows = "".join(
        f'<tr><td data-h="rank">{int(r.rank)}{f" ({int(r.tied)} tied)" if r.tied > 1 else ""}</td>'
        f'<td data-h="example id">{number(r.example_id, ".0f", data_source="attack_scores", data_key=int(r.example_id), data_field="example_id")}</td>'
        f'{_user_cell(user_ids, r.example_id)}'
        f'<td data-h="label">{esc(r.label)}</td>'
        f'<td class="v" data-h="score">{number(r.score, SIG, data_source="attack_scores", data_key=int(r.example_id), data_field=attack)}</td>'
        f'<td class="v" data-h="non-members scoring ≥ it">{int(r.nonmembers_at_or_above)} of {int(r.n_nonmembers)}</td>'
        f'<td data-h="also singled out by">{_flag_cell(flags, r.example_id)}</td></tr>'
        for r in top.itertuples())
    out = [text, '<table class="exposed"><thead><tr><th>rank</th><th>example id</th>' + _user_head(user_ids)
                 + "<th>label</th>"
                 f"<th>{esc(ATTACK_LABELS.get(attack, attack))} score</th><th>non-members scoring ≥ it</th>"
                 "<th>also singled out by</th></tr></thead><tbody>" + rows + "</tbody></table>"]
    if len(top):
        first = top.iloc[0]
        k = int(first["nonmembers_at_or_above"])
        out.append(f"<p>The most exposed member, example {int(first['example_id'])}, "
                   + ("scores above every non-member" if k == 0 else f"scores above all but {k} of the {n_non} non-members")
                   + f" under {esc(ATTACK_LABELS.get(attack, attack))}.</p>")
        last = float(top["score"].iloc[-1])
        tied = int((everyone["score"] == last).sum()) - int((top["score"] == last).sum())
        if tied > 0:
            out.append(f"<p>{tied} more member(s) tie with the last row shown (score {fmt(last)}): the attack "
                       "cannot tell them apart, and rows of equal score are listed by example id.</p>")
    flagged = {int(e) for e in (flags or {})}
    if flagged:
        ranks = everyone.set_index("example_id")["rank"]
        listed = ", ".join(f"example {e} rank {int(ranks[e])} of {len(everyone)} members" for e in sorted(flagged)
                           if e in ranks.index)
        if listed:
            out.append(f"<p>Rows other audits single out, ranked among the members by this attack: {listed}.</p>")
    return "".join(out)


def _loss_ranking(outputs, splits, loss_column, flags, why: str, user_ids=None) -> str:
    top = most_exposed(outputs, splits, loss_column=loss_column)
    n_non = int((outputs["split"] == splits["nonmembers"]).sum())
    rows = "".join(
        f'<tr><td data-h="example id">{number(r.example_id, ".0f", data_source="outputs", data_key=int(r.example_id), data_field="example_id")}</td>'
        f'{_user_cell(user_ids, r.example_id)}'
        f'<td data-h="label">{esc(r.label) if "label" in top.columns else "—"}</td>'
        f'<td class="v" data-h="loss">{number(r.loss, SIG, data_source="outputs", data_key=int(r.example_id), data_field=loss_column)}</td>'
        f'<td class="v" data-h="non-members with loss ≤ it">{fmt(r.nonmember_fraction_below, ".3g")}</td>'
        f'<td data-h="also singled out by">{_flag_cell(flags, r.example_id)}</td></tr>'
        for r in top.itertuples())
    out = [f"<p>This is the <strong>loss ranking</strong> ({esc(why)}). Ranked by the fraction of the {n_non} "
           f"non-members whose {esc(loss_column)} is at most the member's own: a loss threshold at that member "
           "flags only that fraction of non-members, so the members at the top are those the loss-threshold "
           "attack singles out first.</p>"
           '<table class="exposed"><thead><tr><th>example id</th>' + _user_head(user_ids) + "<th>label</th><th>loss</th>"
           "<th>non-members with loss ≤ it</th><th>also singled out by</th></tr></thead><tbody>" + rows
           + "</tbody></table>"]
    first = top.iloc[0] if len(top) else None
    if first is not None:
        share = float(first["nonmember_fraction_below"])
        out.append(f"<p>The most exposed member, example {int(first['example_id'])}, has a loss "
                   + ("below every non-member's" if share == 0 else f"that {fmt(100 * share, '.3g')}% of non-members reach")
                   + ".</p>")
    return "".join(out)


def exposure(view: RunView, eps: float, *, outputs, splits, loss_column, canary_record,
             profile_rows: pd.DataFrame, attack_scores: pd.DataFrame | None = None,
             flags: Mapping[int, Sequence[str]] | None = None, user_ids: Mapping[int, str] | None = None) -> str:
    """Section 4: the members an attack singles out first, and the linear mechanisms' worst case;
    ``user_ids`` (example_id → the user's own id) adds a column of them."""
    out = []
    ranked = _attack_ranking(view, attack_scores, flags, user_ids) if attack_scores is not None else None
    if ranked is not None:
        out.append(ranked)
    elif outputs is None or splits is None:
        out.append(missing_p("Per-example outputs not given: the most exposed rows are not shown."))
    else:
        why = ("no reference-model attack scores for this model: metrics.attacks disabled or the model not attacked"
               if attack_scores is None else "the attack scores have no attack with an AUC row for this model")
        out.append(_loss_ranking(outputs, splits, loss_column, flags, why, user_ids))
    mechanism = view.column("mechanism")
    if mechanism in LINEAR_MECHANISMS:
        if canary_record and "shift_norm" in canary_record:
            rec = canary_record
            out.append(
                "<p><strong>Worst-case neighbour of the privacy profile.</strong> Row "
                f"{number(rec.get('row'), '.0f', data_source='audit', data_field='row')} (example id "
                f"{number(rec.get('example_id'), '.0f', data_source='audit', data_field='example_id')}) moves the "
                f"non-private fit the most when replaced: shift ‖Δ‖ = "
                f"{number(rec.get('shift_norm'), SIG, data_source='audit', data_field='shift_norm')}. "
                "The many-runs audit above replaces this row.</p>")
        else:
            out.append(missing_p("Worst-case neighbour: no canary audit record for this model (family canary "
                                  "disabled or the audit did not run)."))
        out.append(regime(view, eps, profile_rows))
    else:
        out.append(missing_p(f"Worst-case neighbour and profile regime: apply to the linear mechanisms only, "
                              f"not to {MECHANISM_LABELS.get(mechanism, mechanism)}."))
    return "".join(out)


def regime(view: RunView, eps: float, profile_rows: pd.DataFrame) -> str:
    """Where the model's ε falls among the privacy profile's ε_low and ε_high of each view of its dataset."""
    if "profile" not in view.families:
        return missing_p("Profile regime: not computed in this run (family profile disabled).")
    rows = profile_rows[(profile_rows["family"] == "profile") & (profile_rows["dataset"] == view.dataset)]
    if rows.empty:
        return missing_p(f"Profile regime: no privacy-profile view of {view.dataset} in this run.")
    items = []
    for view_name, group in rows.groupby("view", sort=True):
        low = group[group["metric"] == "epsilon_low"]
        high = group[group["metric"] == "epsilon_high"]

        def cell(frame, metric, name=view_name):
            if frame.empty:
                return None, "not computed"
            value = float(frame["value"].iloc[0])
            return value, number(value, SIG, data_family="profile", data_metric=metric,
                                 data_select=json.dumps({"view": name}), data_dataset=view.dataset)

        low_v, low_html = cell(low, "epsilon_low")
        high_v, high_html = cell(high, "epsilon_high")
        if low_v is None or high_v is None or math.isnan(low_v) or math.isnan(high_v):
            regime_text = "not computed (the profile's ε grid misses a plateau)"
        elif eps <= low_v:
            regime_text = "low regime (ε ≤ ε_low): the typical neighbour barely moves the released model"
        elif eps < high_v:
            regime_text = "between ε_low and ε_high: the released model starts to reveal its neighbours"
        else:
            regime_text = "high regime (ε ≥ ε_high): the top-ranked neighbour's progress has reached its plateau"
        items.append(f"<li>view {esc(view_name)}: ε_low = {low_html}, ε_high = {high_html}; "
                     f"ε = {fmt(eps)} is in the {regime_text}.</li>")
    return "<p><strong>Privacy-profile regime.</strong></p><ul>" + "".join(items) + "</ul>"
