"""Privacy dossier of one trained model (issue 18).

Every family's answer for one model on one page, read from ``results/tables/metrics.parquet``
through the metric vocabulary (``dpaudit.contract.metrics``): labels, units and kinds come
from ``declared(family, metric)``; a number in the table is shown as it is, never
recomputed. Each shown number is a ``<span class="num">`` carrying where it came from
(family, metric and the parameter values that select its row, or the run column, or the
per-example file), so a test can check every number on the page against the table.

Sections: 1 Promise (accountant ε, δ, accountant, neighbouring relation, sampling, what the
guarantee covers); 2 Measured (the canary ε ladder with ceilings, the natural-split bound,
the attack's TPR at FPR 10⁻³ and AUC, the verdict); 3 Distributional and practical (ε*,
PMP ε̃, identifiability); 4 Exposure of individual rows (``dpaudit.report.exposure``: the
members the run's strongest reference-model attack singles out, or the loss ranking without
attack scores; for linear mechanisms the worst-case neighbour and the privacy profile's
regime); 5 Utility across
seeds and the budget ledger. A family that did not run says so; nothing crashes on a
missing family or file.

The sentences are written from the numbers: which sentence a verdict gets depends on the
values it quotes. The run's rows are read through ``dpaudit.report.run_view``, the page is
``dpaudit.report.pages.page``; the guidance page to choose ε is ``dpaudit.report.guidance``
(``build_guidance`` is importable from here too).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.config import GRID_COLUMNS
from dpaudit.contract.architectures import shown_architectures
from dpaudit.contract.external import EXTERNAL, is_external
from dpaudit.contract.mechanisms import MECHANISM_LABELS
from dpaudit.contract.metrics import declared
from dpaudit.dp.card import GUARANTEE_SCOPE
from dpaudit.metrics.canary.mechanism import MECHANISM_ORDER, READS
from dpaudit.metrics.canary.rows import DISTRIBUTION_FREE, LADDER, verdict_sentence
from dpaudit.report.attack_rows import attack_table
from dpaudit.report.banner import TRAINING_FLAGS, model_banner
from dpaudit.report.dataset_card import dataset_card

# Section 4 has its own module; most_exposed and TOP_ROWS are importable from here as before.
from dpaudit.report.exposure import TOP_ROWS as TOP_ROWS
from dpaudit.report.exposure import exposure
from dpaudit.report.exposure import most_exposed as most_exposed

# The guidance page has its own module; importable from here as before.
from dpaudit.report.guidance import build_guidance as build_guidance
from dpaudit.report.outside import outside_section, outside_title
from dpaudit.report.pages import (
    DOSSIER_STYLE,
    SIG,
    Line,
    esc,
    fmt,
    is_missing,
    missing_p,
    number,
    page,
    rows_table,
)
from dpaudit.report.run_view import Found, RunView, kind_of, label_of

# A configuration is a grid row (dpaudit.config) without its seed.
CONFIGURATION_COLUMNS = tuple(c for c in GRID_COLUMNS if c != "seed")
# PMP methods (dpaudit.metrics.pmp.run) → (recipe, the metric that is its ε̃)
PMP_METHODS = {
    "gauss_single_step": ("Recipe A (one full-batch step at the final weights)", "epsilon_pmp"),
    "dpsgd_clt": ("Recipe B (whole training trajectory, CLT)", "epsilon_pmp"),
    "empirical_lira": ("Recipe C (the recipe's reference models, Clopper–Pearson)", "empirical_epsilon_lower_bound"),
    "empirical_lira_point": ("Recipe C (the recipe's reference models, plug-in)", "empirical_epsilon_point"),
}


# ------------------------------------------------------------------ the title


def model_title(mechanism: str, target_epsilon, seed, dataset: str, architecture=None) -> str:
    """Short title of a model: mechanism display name, target ε, seed, the architecture (given
    where the dataset has several, ``dpaudit.contract.architectures``), dataset."""
    name = MECHANISM_LABELS.get(mechanism, mechanism)
    parts = [name]
    if not is_missing(target_epsilon) and math.isfinite(float(target_epsilon)):
        parts.append(f"target ε = {float(target_epsilon):g}")
    if not is_missing(seed):
        parts.append(f"seed {int(seed)}")
    if not is_missing(architecture):
        parts.append(str(architecture))
    parts.append(dataset)
    return " · ".join(parts)


# ------------------------------------------------------------------ section 1


def _promise(view: RunView, train: Mapping) -> tuple[str, float]:
    acc = view.find("mia", "accountant_epsilon")
    eps = acc.value if acc is not None else float(view.column("accountant_epsilon") or math.nan)
    private = math.isfinite(eps)
    relation = train.get("neighbouring_relation")
    ident = view.find_all("identifiability", "rho_beta")
    if relation is None and ident:
        relation = ident[0].get("neighbouring_relation")
    accountant = view.column("accountant") or train.get("accountant")
    sampling = view.column("sampling") or train.get("sampling")
    eps_html = acc.num() if acc is not None else view.column_num("accountant_epsilon")
    lines = [Line(esc(label_of("mia", "accountant_epsilon")), eps_html,
                  f"accountant: {esc(accountant or '—')}" if private else "no accountant (no DP)",
                  (f"The accountant certifies ({eps_html}, δ)-DP for this training run."
                   if private and not is_external(train) else
                   f"Promised for this model: ({eps_html}, δ)-DP; dpaudit could not see its training keep it."
                   if private else "Trained without differential privacy: nothing bounds what it reveals."
                   if not is_external(train) else "No promise stated: nothing bounds what it reveals."),
                  kind_of("mia", "accountant_epsilon"))]
    if private:
        delta_html = view.column_num("accountant_delta", ".3g")
        delta = view.column("accountant_delta")
        lines.append(Line("δ", delta_html, "pure ε-DP (δ = 0)" if delta == 0 else "",
                          "The probability with which the ε bound may fail." if delta
                          else "No failure probability: the ε bound holds for every outcome.", "guarantee"))
        stated_only = is_external(train) and relation is None  # an (ε, δ) promise without its mechanism
        lines.append(Line("neighbouring relation", esc(relation or "—"), "",
                          "not stated with the promise" if stated_only else
                          "replacing one training example by another" if relation == "replace_one"
                          else "adding or removing one training example", ""))
        lines.append(Line("sampling", esc(sampling or "—"), "",
                          "The batch sampling the accountant assumes; another sampling voids the ε."
                          if sampling else "not stated with the promise" if stated_only
                          else "No batch sampling: one exact fit of all rows.", ""))
        exp = view.find("privacy_card", "exp_epsilon")
        accuracy = view.find("privacy_card", "max_attack_accuracy_bound")
        if exp is not None:
            lines.append(Line(esc(label_of("privacy_card", "exp_epsilon")), exp.num(), "",
                              f"One example changes the odds of any outcome by at most a factor {exp.num()}.",
                              kind_of("privacy_card", "exp_epsilon")))
        if accuracy is not None:
            lines.append(Line(esc(label_of("privacy_card", "max_attack_accuracy_bound")), accuracy.num(), "",
                              f"No attack tells members from non-members with balanced accuracy above "
                              f"{accuracy.num()} (0.5 is guessing).", kind_of("privacy_card", "max_attack_accuracy_bound")))
        lines.extend(_mechanism_lines(view))
    body = rows_table(lines)
    if private:
        body += f"<p><strong>What the guarantee covers.</strong> {esc(GUARANTEE_SCOPE)}</p>"
    return body, eps


# ------------------------------------------------------------------ section 2

def _claim(found: Found, eps: float) -> tuple[float, str]:
    """The ε a bound is judged against, and how to say it: the accountant's ε at the δ the
    bound was computed at (``claimed_epsilon``; the one-run bound uses a δ′ ≪ δ), else ε."""
    claim = found.get("claimed_epsilon")
    if is_missing(claim) or float(claim) == eps:
        return eps, f"the promise ε = {fmt(eps)}"
    return float(claim), (f"the accountant's ε = {found.num('claimed_epsilon')} at the bound's "
                          f"δ′ = {found.num('delta', '.2g')}")


def _bound_sentence(found: Found, eps: float) -> str:
    value = found.value
    kind = declared(found.family, found.metric).kind
    eps, promise = _claim(found, eps)
    ceiling = found.get("ceiling_max", found.get("ceiling"))
    what = "estimate" if kind == "estimate" else "bound"
    if math.isnan(value):
        return "Not defined for this audit (see the note)."
    if value > eps:
        text = (f"This {what} exceeds {promise}: the audit measures more leakage than "
                "the accountant allows.")
    elif value == 0 and kind == "estimate":
        text = "Under a Gaussian trade-off curve the canaries look like ε = 0: no leakage visible."
    elif value == 0:
        text = "The audit rejects no ε > 0: no leakage detected at this audit's strength."
    elif kind == "estimate":
        text = f"Under a Gaussian trade-off curve the canaries look like ε ≈ {found.num()}, below the promise."
    else:
        level = (f" at {found.num('confidence', '.3g', scale=100)}% confidence" if found.get("confidence") is not None
                 else f" at level α = {found.num('alpha', '.3g')}" if found.get("alpha") is not None else "")
        text = f"DP with ε below {found.num()} is rejected{level}; {promise} is not contradicted."
    if kind != "estimate" and ceiling is not None and float(ceiling) < eps:
        text += f" Even perfect guessing could certify no more than the ceiling, which is below {promise}."
    return text


def _ladder_confidence(found: Found) -> str:
    parts = []
    confidence = found.get("confidence")
    if confidence is not None:
        parts.append(f"{found.num('confidence', '.3g', scale=100)}% confidence")
    if found.get("ceiling") is not None:
        parts.append(f"ceiling {found.num('ceiling')}")
    if found.get("ceiling_max") is not None and found.metric != "epsilon_lb_many_runs":
        parts.append(f"largest ceiling {found.num('ceiling_max')}")
    if found.get("canaries") is not None:
        parts.append(f"{found.num('canaries', '.0f')} canaries" if found.get("threat_model") != "many_runs"
                     else f"{found.num('canaries', '.0f')} releases per side")
    return "; ".join(parts)


def _measured(view: RunView, eps: float) -> str:
    parts = []
    lines: list[Line] = []
    why = view.missing_family("canary")
    if why is None:
        for rung in LADDER:
            for found in view.find_all("canary", rung.metric, threat_model=rung.threat_model,
                                       score_kind=rung.score_kind):
                lines.append(Line(esc(rung.label), found.num(), _ladder_confidence(found),
                                  _bound_sentence(found, eps), kind_of("canary", rung.metric)))
    natural = view.find("mia", "epsilon_lower_bound", attack="loss")
    if natural is not None:
        conf = f"level α = {natural.num('alpha', '.3g')}" if natural.get("alpha") is not None else ""
        conf += f"; threshold chosen by {esc(natural.get('ci_method', '—'))}"
        lines.append(Line("natural split (loss-threshold attack on members vs non-members)", natural.num(), conf,
                          _bound_sentence(natural, eps), kind_of("mia", "epsilon_lower_bound")))
    tpr = view.find("mia", "tpr_at_fpr", attack="loss", fpr_target=0.001)
    if tpr is not None:
        lines.append(Line("attack TPR at FPR ≤ 10⁻³", tpr.num(),
                          f"{tpr.num('n_members', '.0f')} members, {tpr.num('n_nonmembers', '.0f')} non-members",
                          f"Flagging at most 1 in 1000 non-members, the attack finds a fraction {tpr.num()} of the members"
                          + (" (with so few non-members this FPR is not resolved)."
                             if is_missing(tpr.get("n_nonmembers")) or float(tpr.get("n_nonmembers")) < 1000 else "."),
                          kind_of("mia", "tpr_at_fpr")))
    auc = view.find("mia", "attack_auc", attack="loss")
    if auc is not None:
        lines.append(Line(esc(label_of("mia", "attack_auc")), auc.num(), "",
                          f"Area under the attack's ROC: {auc.num()}, where 0.5 is chance and 1 is perfect.",
                          kind_of("mia", "attack_auc")))
    parts.append(rows_table(lines))
    parts.append(attack_table(view))
    parts.append(_verdict(view, eps))
    return "".join(parts)


def _verdict(view: RunView, eps: float) -> str:
    why = view.missing_family("canary")
    if why is not None:
        return f'<p class="verdict weak">Verdict: {esc(why)}; no canary audit to compare with the promise.</p>'
    flag = view.find("canary", "measured_above_promise")
    if flag is None:
        return '<p class="verdict weak">Verdict: the canary audit wrote no verdict for this model.</p>'
    verdict = flag.get("verdict")
    if verdict is None or not bool(flag.get("applicable", True)):
        note = flag.get("note") or "not applicable"
        return f'<p class="verdict weak">Verdict: no promise to audit ({esc(note)}).</p>'
    bounds = [f for metric in DISTRIBUTION_FREE for f in view.find_all("canary", metric) if not math.isnan(f.value)]
    if not bounds and str(flag.get("decided_by", "")).startswith("black_box"):  # trained elsewhere (issue 44)
        bounds = [f for f in view.find_all("mia", "epsilon_lower_bound") if not math.isnan(f.value)]
    best = max(bounds, key=lambda f: f.value - _claim(f, eps)[0]) if bounds else None
    best_html = best.num() if best is not None else "—"
    claim_text = _claim(best, eps)[1] if best is not None else f"the promise ε = {fmt(eps)}"
    ceiling = flag.num("ceiling_max")
    _, sentence = verdict_sentence(view.family_rows("canary"))
    said = esc(sentence) + "."
    if verdict == "above_promise":
        return ('<p class="verdict bad" data-verdict="above_promise">Verdict: ' + said +
                f" The largest distribution-free bound is ε ≥ {best_html} against {claim_text}. "
                "The guarantee does not hold as stated (a bug, or a wrong assumption about sampling, "
                "neighbouring relation or accountant).</p>")
    if verdict == "too_weak":
        return ('<p class="verdict weak" data-verdict="too_weak">Verdict: ' + said +
                f" Perfect guessing would certify at most ε = {ceiling}; the measured bound is ε ≥ {best_html} "
                f"against {claim_text}.</p>")
    return ('<p class="verdict" data-verdict="consistent">Verdict: ' + said +
            f" The largest distribution-free bound, ε ≥ {best_html}, stays at or below {claim_text}, "
            f"and the audit could have certified up to {ceiling}.</p>")


# ------------------------------------------------------------------ section 3


def _estar_flags(found: Found, view: RunView | None = None) -> str:
    flags = []
    if found.get("boot_low") is not None and found.get("boot_high") is not None:
        level = found.get("boot_level")
        flags.append(f"bootstrap {fmt(100 * float(level), '.3g') + '% ' if level is not None else ''}"
                     f"interval {found.num('boot_low')} – {found.num('boot_high')}")
    if found.get("at_ceiling") is True or found.get("at_ceiling") is np.True_:
        flags.append(f'<span class="flag">at the ceiling {found.num("ceiling")}: the data only say ε* ≥ it</span>')
    if found.get("on_boundary") in (True, np.True_):
        flags.append('<span class="flag">argmax on the threshold grid\'s boundary</span>')
    if found.get("argmax_count") is not None:
        # the parametric fit's count is an expectation (rate x set size), not whole examples
        expected = "expected " if found.get("estimator") == "parametric" else ""
        flags.append(f"{expected}examples behind the ratio {found.num('argmax_count')}")
    return "; ".join(flags + (_estar_issue46_flags(found, view) if view is not None else []))


def _estar_issue46_flags(found: Found, view: RunView) -> list[str]:
    """The flags of issue 46 (rows of their own, same estimator and loss): at the sample's
    resolution, outside its bootstrap interval with the bias-corrected form, and within the
    label-permutation null (the empirical estimator)."""
    select = {"estimator": found.get("estimator"), "loss": found.get("loss")}
    flags = []
    at = view.find("epsilon_star", "at_resolution", **select)
    if at is not None and at.get("value_bool") in (True, np.True_):
        members = str(at.get("term")) in ("m2", "m4")
        n = at.num("n_tr" if members else "n_pop")
        who = "member" if members else "non-member"
        # the parametric fit extrapolates below one record; the empirical value sits on one
        fewest = round(float(at.get("resolution", 0.0)) * float(at.get("n_tr" if members else "n_pop", 0)))
        where, rests = (("beyond", f"under one expected {who}") if select["estimator"] == "parametric"
                        else ("at", f"{'one' if fewest <= 1 else fewest} {who}{'s' * (fewest > 1)}"))
        flags.append(f'<span class="flag">{where} the sample\'s resolution: the ratio rests on {rests} of {n}, the '
                     f"fewest it can use (resolution {at.num('resolution')})</span>")
    out = view.find("epsilon_star", "outside_bootstrap_interval", **select)
    corrected = view.find("epsilon_star", "epsilon_star_bias_corrected", **select)
    if out is not None and out.get("value_bool") in (True, np.True_) and corrected is not None:
        flags.append(f'<span class="flag">outside its own bootstrap interval: the replicates, maxima of resampled '
                     f"ratios, sit above it by the estimator's upward bias; bias-corrected {corrected.num()} "
                     f"[{corrected.num('ci_lower')}, {corrected.num('ci_upper')}] (basic bootstrap, first-order)"
                     "</span>")
    null = view.find("epsilon_star", "within_permutation_null", **select)
    if null is not None and null.get("value_bool") in (True, np.True_):
        flags.append(f'<span class="flag">within the no-signal null: losses relabelled at random (members and '
                     f"non-members exchanged, sizes kept) reach {null.num('null_quantile')} at its "
                     f"{null.num('null_level')} quantile, so this value does not rise above the sample's noise floor "
                     f"(permutation p = {null.num('null_p_value')}, {null.num('null_permutations')} relabellings)"
                     "</span>")
    return flags


def _distributional(view: RunView, eps: float) -> str:
    out = ["<h3>Epsilon*</h3>"]
    why = view.missing_family("epsilon_star")
    if why:
        out.append(missing_p(f"ε*: {why}."))
    else:
        lines = []
        rows = view.find_all("epsilon_star", "epsilon_star")
        rows.sort(key=lambda f: (str(f.get("loss", "")), str(f.get("estimator", ""))))
        for found in rows:
            value = found.value
            meaning = (f"The best loss-threshold test separates this model's members from the population "
                       f"with a likelihood ratio up to e^{found.num()}: this model instance's empirical privacy over "
                       "records, an estimate and not a bound on the training mechanism's ε"
                       + (f", above the promise ε = {fmt(eps)}." if math.isfinite(eps) and value > eps else "."))
            lines.append(Line(f"ε* ({esc(found.get('estimator'))}, loss {esc(found.get('loss'))})", found.num(),
                              _estar_flags(found, view), meaning, kind_of("epsilon_star", "epsilon_star")))
        out.append(rows_table(lines))
    out.append("<h3>Practical membership privacy ε̃</h3>")
    why = view.missing_family("pmp")
    if why:
        out.append(missing_p(f"PMP ε̃: {why}."))
    else:
        lines = []
        for method, (recipe, metric) in PMP_METHODS.items():
            for found in view.find_all("pmp", metric, method=method):
                status = found.get("status", "ok")
                conf = "" if status == "ok" else f'<span class="flag">status {esc(status)}</span>'
                if found.get("note"):
                    conf += (" " if conf else "") + esc(found.get("note"))
                kind = kind_of("pmp", metric)
                label = found.get("label") or declared("pmp", metric).meaning
                if math.isnan(found.value):
                    lines.append(Line(esc(recipe), found.num(), conf, f"Not computed for this model ({esc(label)}).",
                                      kind))
                    continue
                meaning = (f"{esc(str(label)[:1].upper() + str(label)[1:])}: ε̃ = {found.num()}"
                           + (f", {'above' if found.value > eps else 'below'} the promise ε = {fmt(eps)}."
                              if math.isfinite(eps) and not math.isnan(found.value) else "."))
                lines.append(Line(esc(recipe), found.num(), conf, meaning, kind))
        out.append(rows_table(lines) if lines else missing_p("PMP ε̃: no recipe applies to this model."))
    out.append("<h3>Identifiability</h3>")
    why = view.missing_family("identifiability")
    if why:
        out.append(missing_p(f"ρ_β, ρ_α: {why}."))
    else:
        lines = []
        texts = {
            "rho_beta": "An adversary who knows all but one row believes at most this strongly which of two "
                        "neighbouring datasets was used (0.5 is no information).",
            "rho_alpha_thm2": "The identifiability adversary's expected advantage against a Gaussian mechanism "
                              "calibrated classically to this (ε, δ).",
            "advantage_bound_any_dp": "No (ε, δ)-DP mechanism lets any attack reach a membership advantage "
                                      "(TPR − FPR) above this.",
        }
        for metric, text in texts.items():
            found = view.find("identifiability", metric)
            if found is None:
                continue
            applicable = found.get("applicable", True)
            conf = "" if applicable in (True, np.True_, "True") else '<span class="flag">not applicable</span>'
            label = {"rho_beta": "ρ_β", "rho_alpha_thm2": "ρ_α (Theorem 2)"}.get(metric, label_of("identifiability", metric))
            meaning = (f"{text} Value: {found.num()}." if not math.isnan(found.value)
                       else "Not defined for this model (no DP guarantee).")
            lines.append(Line(esc(label), found.num(), conf, meaning, kind_of("identifiability", metric)))
        out.append(rows_table(lines))
    return "".join(out)


# ------------------------------------------------------------------ section 5


def _configuration(table: pd.DataFrame, view: RunView) -> pd.DataFrame:
    """Rows of the runs that share this run's grid row except the seed."""
    same = table[table["dataset"] == view.dataset]
    if view.column("mechanism") == EXTERNAL:  # a model trained elsewhere has no siblings (issue 44)
        return same[same["run"] == view.run]
    for column in CONFIGURATION_COLUMNS:
        if column not in same.columns:
            continue
        value = view.first.get(column)
        if is_missing(value):
            same = same[same[column].isna()]
        else:
            same = same[same[column].astype("string") == str(value)]
    return same


def _utility(table: pd.DataFrame, view: RunView, ledger: pd.DataFrame | None) -> str:
    acc = view.find("mia", "test_accuracy")
    out = []
    if acc is None:
        out.append(missing_p("Test accuracy: no mia row for this model."))
    else:
        siblings = _configuration(table, view)
        siblings = siblings[(siblings["family"] == "mia") & (siblings["metric"] == "test_accuracy")]
        siblings = siblings.sort_values("seed") if "seed" in siblings.columns else siblings
        spans = [number(r["value"], SIG, data_family="mia", data_metric="test_accuracy", data_select="{}",
                        data_run=r["run"]) for _, r in siblings.iterrows()]
        if len(siblings) > 1:
            low = siblings.loc[siblings["value"].idxmin()]
            high = siblings.loc[siblings["value"].idxmax()]
            spread = (f"range over {len(siblings)} seeds: "
                      f"{number(low['value'], SIG, data_family='mia', data_metric='test_accuracy', data_select='{}', data_run=low['run'])}"
                      f" – {number(high['value'], SIG, data_family='mia', data_metric='test_accuracy', data_select='{}', data_run=high['run'])}")
            meaning = (f"Top-1 accuracy on held-out data is {acc.num()}; this configuration's {len(spans)} seeds "
                       f"give {', '.join(spans)}.")
        else:
            spread = "one seed only: no spread"
            meaning = f"Top-1 accuracy on held-out data is {acc.num()}."
        out.append(rows_table([Line(esc(label_of("mia", "test_accuracy")), acc.num(), spread, meaning,
                                kind_of("mia", "test_accuracy"))]))
    if ledger is None:
        out.append(missing_p("Budget ledger: not available (results/tables/budget_ledger.parquet not given)."))
    else:
        row = ledger[(ledger["dataset"] == view.dataset) & (ledger["run"] == view.run)]
        if row.empty:
            out.append(missing_p("Budget ledger: this model has no ledger row."))
        else:
            row = row.iloc[0]
            n_private = int(((ledger["dataset"] == view.dataset) & ledger["private"].astype(bool)).sum()) \
                if "private" in ledger.columns else None
            eps_html = number(row["epsilon"], SIG, data_source="ledger", data_field="epsilon")
            if bool(row.get("private", True)):
                text = (f"Releasing this model spends ε = {eps_html}, δ = "
                        f"{number(row['delta'], '.3g', data_source='ledger', data_field='delta')} of the budget of "
                        f"{esc(view.dataset)}'s training data")
                if n_private:
                    text += f"; the ledger composes it with the other {n_private - 1} DP model(s) of the grid"
                out.append(f"<p>{text}.</p>")
            else:
                out.append("<p>This model is non-private: releasing it spends an unbounded budget (ε = ∞), "
                           "whatever the DP models of the grid spend.</p>")
    return "".join(out)


# Why the twin's canaries keep their own Poisson draw under shuffling: the released run's batches
# (B rows, ⌊n/B⌋ steps an epoch) cannot also hold m ≫ n canaries once each per epoch.
SHUFFLE_CANARY_SCOPE = (
    "With shuffled batches the audit twin's gradient canaries are drawn by their own Poisson sampler at the run's "
    "rate, not through the permutation (a permutation of the members and the canaries would change the batch "
    "size or the step count of the run it mirrors). The canary audit therefore covers the noise and the clipping; "
    "the permutation sampler is covered by the sampler check (every batch exactly B rows, each row at most once "
    "an epoch, a fresh permutation) and the accounting check (the steps executed), and the canaries' own Poisson "
    "draws by the twin's sampler check.")


# What the white-box canaries observe (issue 45; dpaudit.audit.twin): their coordinates are a variable the
# optimizer call updates with the model's weights, read back after every update.
CANARY_OBSERVATION = (
    "The audit twin's white-box canaries own coordinates of a variable of their own, which the same optimizer "
    "call updates with the model's weights; each step's observation is reconstructed from that variable's "
    "consecutive states with the optimizer's rule. What reaches the optimizer call reaches them; a change of the "
    "model's weights outside that call does not, and is what the weight certificate (in the noise check) reads.")


def _mechanism_lines(view: RunView) -> list[Line]:
    """The released model's mechanism measured whole (issues 32, 45): its noise certificate,
    sampler check and accounting check, each with what it read, in the words their rows carry."""
    lines = []
    for metric, _ in MECHANISM_ORDER:
        found = view.find("canary", metric, checked_model="released")
        if found is None:
            continue
        passed = found.get("value_bool")
        value = "not measured" if passed is None else ("passed" if bool(passed) else "FAILED")
        flag = "" if passed is None else (f"family-wise level {found.get('family_alpha'):g}"
                                          if found.get("family_alpha") is not None else "")
        read = f"Read: {READS[metric][1]}. " if metric in READS else ""
        note = found.get("note") or ""
        note = note[:1].upper() + note[1:]  # a sentence of its own after what was read
        lines.append(Line(esc(label_of("canary", metric)), esc(value), esc(flag), esc(read + note),
                          kind_of("canary", metric)))
    if any(line.what == esc(label_of("canary", "accounting_reproduced")) for line in lines):  # DP-SGD
        lines.append(Line("what the white-box canaries observe", "their coordinates' states", "",
                          esc(CANARY_OBSERVATION), ""))
    if lines and view.column("sampling") == "shuffle":
        lines.append(Line("what the canaries cover", "noise and clipping", "", esc(SHUFFLE_CANARY_SCOPE), ""))
    return lines


# ------------------------------------------------------------------ the dossier


def _architecture(table: pd.DataFrame, dataset: str, run: str):
    """The run's architecture label where its dataset has several, else None."""
    if "model" not in table.columns:
        return None
    runs = table.loc[(table["dataset"] == dataset).fillna(False).to_numpy(bool) & table["run"].notna().to_numpy(bool),
                     ["dataset", "run", "model"]].drop_duplicates("run")
    shown = shown_architectures(runs)[(runs["run"] == run).to_numpy(bool)]
    return None if shown.empty or is_missing(shown.iloc[0]) else str(shown.iloc[0])


def _ladder_img(png: str | Path | None, title: str) -> str:
    """The model's ladder figure as a data URI (the dossier stays one standalone file)."""
    if png is None:
        return ""
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    return (f'<img class="ladder" alt="ε ladder of {esc(title)}: the promise, each certified bound with its '
            f'ceiling, the estimates and the verdict" src="data:image/png;base64,{data}">')


def build_dossier(table: pd.DataFrame, dataset: str, run: str, *, train: Mapping | None = None,
                  outputs: pd.DataFrame | None = None, splits: Mapping | None = None,
                  canary_record: Mapping | None = None, ledger: pd.DataFrame | None = None,
                  loss_column: str = "loss_ce", dataset_info: Mapping | None = None,
                  attack_scores: pd.DataFrame | None = None, row_flags: Mapping[int, Sequence[str]] | None = None,
                  ladder_png: str | Path | None = None, user_ids: Mapping[int, str] | None = None) -> str:
    """Standalone HTML dossier of one trained model (no external file, no script); with
    ``dataset_info`` (dataset.json) it opens with the dataset card. With ``attack_scores`` (the
    run's ``scores.parquet``) section 4 ranks members by the strongest attack, else by loss;
    ``row_flags`` (``dpaudit.report.exposure.flagged_rows``) names rows other audits single out;
    ``ladder_png`` (``dpaudit.plots.ladder``) is embedded at the top of the page; ``user_ids``
    (example_id → the user's own id, from ids.parquet) shows them beside the example ids."""
    view = RunView(table, dataset, run)
    train = dict(train or {})
    title = model_title(view.column("mechanism") or train.get("mechanism", "?"), view.column("target_epsilon"),
                        view.column("seed"), dataset, _architecture(table, dataset, run))
    promise, eps = _promise(view, train)
    outside = is_external(train)  # issue 44: its own split and what was and was not checked open section 1
    if outside:
        title, promise = outside_title(run, dataset), outside_section(train) + promise
    # train.json's flag, or the metrics table's copy of it (every row of the run carries it)
    flagged = {**train, **{key: view.column(key) for key in TRAINING_FLAGS
                           if view.column(key) is not None and not train.get("loss_diverged")}}
    body = [f"<h1>Privacy dossier: {esc(title)}</h1>", model_banner(flagged),
            _ladder_img(ladder_png, title),
            f'<p class="sub">Run {esc(run)}. Every number below is read from results/tables/metrics.parquet '
            "(or, in section 4, the model's per-example outputs or attack scores and audit record); kinds: guarantee, bound "
            "(certified at the stated confidence), point estimate, measurement, diagnostic.</p>",
            *(["<h2>Dataset</h2>", dataset_card(dataset_info)] if dataset_info and not outside else []),
            "<h2>1 Promise</h2>", promise,
            "<h2>2 Measured</h2>", _measured(view, eps),
            "<h2>3 Distributional and practical</h2>", _distributional(view, eps),
            "<h2>4 Exposure of individual rows</h2>",
            exposure(view, eps, outputs=outputs, splits=splits, loss_column=loss_column,
                     canary_record=canary_record, profile_rows=table, attack_scores=attack_scores,
                     flags=row_flags, user_ids=user_ids),
            "<h2>5 Utility and budget</h2>", _utility(table, view, ledger)]
    return page(f"Dossier: {title}", "".join(body), style=DOSSIER_STYLE,
                meta={"dpaudit-dataset": dataset, "dpaudit-run": run}, lang="en", viewport=True)
