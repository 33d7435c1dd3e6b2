"""What the dossier says of a model trained outside dpaudit (issue 44): what the audit saw, what it
checked and what it could not check.

The record (``dpaudit.external.importer``, in place of train.json) names the outputs file and the
ids files with their sha256, the rows of each role, the promise and how ε was had
(``promise.sentence``), and what needs the training itself (``not_checked``,
``dpaudit.contract.external.NOT_CHECKED``). The dossier's section 1 opens with this.
"""

from __future__ import annotations

from collections.abc import Mapping

from dpaudit.contract.external import TRAINED_OUTSIDE
from dpaudit.report.pages import esc

__all__ = ["outside_section", "outside_title"]

# What an outputs file lets the audit check (each a family's rows or a refusal before any job).
CHECKED = (
    "the outputs file: one finite row per example id, as many values per row as the dataset's classes, "
    "probabilities in [0, 1] summing to 1 (refused before any job otherwise)",
    "the ids: every id is one of the dataset's, no member is also held out, the ids files' rows are in the "
    "outputs file",
    "the loss-threshold membership attack on members vs held-out rows: AUC, TPR at low FPR and its certified "
    "(Clopper–Pearson) ε lower bound",
    "ε* (Negoescu et al. 2023) of this model instance",
    "the privacy card and the DP-region test of the attack's ROC against the promise",
    "identifiability (Bernau et al. 2021) from the promise",
)


def outside_title(run: str, dataset: str) -> str:
    return f"{run} (trained elsewhere) · {dataset}"


def _source(train: Mapping) -> str:
    source, membership = train.get("source") or {}, train.get("membership") or {}

    def named(role: str) -> str:
        given = membership.get(role) or {}
        if "column" in given:
            return f"column {esc(given['column'])} of the outputs file"
        if "table_column" in given:
            return f"column {esc(given['table_column'])} of the dataset's table {esc(given.get('file', ''))}"
        return f"{esc(given.get('file', '—'))} (sha256 {esc(str(given.get('sha256', ''))[:12])}…)"

    utility = ("the held-out rows" if membership.get("utility_rows") == "held_out"
               else f"the {membership.get('n_utility', 0):,} rows of {named('utility')}")
    return (f"<p><strong>{esc(TRAINED_OUTSIDE.capitalize())}.</strong> The audit sees this model only through "
            f"its outputs: {esc(source.get('outputs_kind', '—'))} of {int(source.get('rows', 0)):,} rows in "
            f"{esc(source.get('path', '—'))} ({esc(source.get('format', ''))}, sha256 "
            f"{esc(str(source.get('sha256', ''))[:12])}…). Members: {int(membership.get('n_members', 0)):,} rows "
            f"({named('members')}); held out: {int(membership.get('n_held_out', 0)):,} rows ({named('held_out')}); "
            f"test accuracy on {utility}. The dataset's own split into train, holdout and test does not apply "
            "to it: its trainer chose its members.</p>")


def outside_section(train: Mapping) -> str:
    """Section 1's opening for a model trained elsewhere: what was seen, checked and not checked."""
    promise = (train.get("promise") or {}).get("sentence", "no promise stated")
    mismatch = (train.get("promise") or {}).get("mismatch")
    checked = "".join(f"<li>{esc(item)}</li>" for item in (*CHECKED, *train.get("checked", [])))
    missing = "".join(f"<li>{esc(item['what'])}: {esc(item['reason'])}</li>" for item in train.get("not_checked", []))
    flag = ' class="flag"' if mismatch else ""
    return (_source(train) + f"<p><strong>Promise.</strong> <span{flag}>{esc(promise)}</span>.</p>"
            f"<p><strong>Checked.</strong></p><ul>{checked}</ul>"
            f"<p><strong>Not checked</strong> (each needs the training itself):</p><ul>{missing}</ul>")
