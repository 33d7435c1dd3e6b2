"""Section 2 of the dossier, the attacks side by side (issue 34): the loss threshold and the
reference-model attacks (LiRA online and offline, RMIA; ``metrics.attacks``), each with its AUC and
interval, its TPR at the fixed FPRs with Clopper–Pearson intervals and its certified ε lower bound.

Numbers are the metrics table's ``mia`` rows of each ``attack`` (``dpaudit.report.run_view``), shown
as traceable numbers; an attack without a row says so.
"""

from __future__ import annotations

import math

from dpaudit.contract.labels import ATTACK_LABELS
from dpaudit.contract.metrics import ATTACK_NAMES
from dpaudit.report.pages import esc, missing_p
from dpaudit.report.run_view import Found, RunView, label_of

FPR_TARGETS = (0.001, 0.01)
_FPR_TEXT = {0.001: "10⁻³", 0.01: "10⁻²"}


def _with_interval(found: Found | None) -> str:
    if found is None:
        return "—"
    if found.get("ci_lower") is None or found.get("ci_upper") is None:
        return found.num()
    return f"{found.num()} <span class='flag'>[{found.num('ci_lower')}, {found.num('ci_upper')}]</span>"


def _tpr(found: Found | None) -> str:
    if found is not None and math.isnan(found.value):  # one non-member already exceeds the rate
        return "— <span class='missing'>not resolved</span>"
    return _with_interval(found)


def attack_table(view: RunView) -> str:
    """The attacks of this model side by side, or why there are none beyond the loss threshold."""
    rows = []
    for attack in ATTACK_NAMES:
        auc = view.find("mia", "attack_auc", attack=attack)
        if auc is None:
            continue
        tprs = [view.find("mia", "tpr_at_fpr", attack=attack, fpr_target=t) for t in FPR_TARGETS]
        bound = view.find("mia", "epsilon_lower_bound", attack=attack)
        cells = [("AUC [interval]", _with_interval(auc)),
                 *((f"TPR at FPR ≤ {_FPR_TEXT[t]}", _tpr(f)) for t, f in zip(FPR_TARGETS, tprs, strict=True)),
                 (label_of("mia", "epsilon_lower_bound"), bound.num() if bound is not None else "—")]
        rows.append(f'<tr><th scope="row">{esc(ATTACK_LABELS.get(attack, attack))}</th>'
                    + "".join(f'<td class="v" data-h="{esc(h)}">{c}</td>' for h, c in cells) + "</tr>")
    reference = [a for a in ATTACK_NAMES if a != "loss" and view.find("mia", "attack_auc", attack=a) is not None]
    if not reference:
        return missing_p("Reference-model attacks (LiRA, RMIA): not run for this model (metrics.attacks is off).")
    head = ("<thead><tr><th>attack</th><th>AUC [interval]</th>"
            + "".join(f"<th>TPR at FPR ≤ {_FPR_TEXT[t]} [interval]</th>" for t in FPR_TARGETS)
            + f"<th>{esc(label_of('mia', 'epsilon_lower_bound'))}</th></tr></thead>")
    return ("<h3>The attacks side by side</h3><p>The loss threshold and the reference-model attacks on the same "
            "members and non-members: AUC with its interval, TPR at a fixed FPR with its Clopper–Pearson interval "
            "(— where one non-member already exceeds the rate), and the ε lower bound each certifies.</p>"
            f'<table class="dossier-rows attacks">{head}<tbody>{"".join(rows)}</tbody></table>')
