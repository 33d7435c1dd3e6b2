"""The short dataset card of the dossier (issue 25): what the model was trained and audited on.

Read from ``dataset.json`` only: rows per split, class balance, features after encoding,
dropped columns and rows, and where the preprocessing statistics were fitted. Fitted on
members (the default), they are computed from the training data outside the DP
guarantee, and the card says so; ``fit_on: holdout`` keeps the guarantee end to end.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["dataset_card", "fit_sentence"]


def fit_sentence(info: Mapping[str, Any]) -> str:
    """One sentence on where the scaling and categories were fitted and what that means for the guarantee."""
    pre = info.get("preprocessing") or {}
    if pre.get("fitted_on_members"):
        return ("The standardization and the one-hot categories were fitted on the members (training split): "
                "those statistics are computed from members outside the DP guarantee, which covers the training "
                "steps only. Write fit_on: holdout under this dataset to keep the guarantee end to end.")
    if pre.get("fit_on") == "holdout":
        return ("The standardization and the one-hot categories were fitted on the holdout split (non-members), "
                "so no statistic of the members enters the model outside the DP guarantee.")
    return "Nothing was fitted to the data before training (fixed transforms), so the DP guarantee covers it all."


def dataset_card(info: Mapping[str, Any]) -> str:
    """HTML of the card (a paragraph and a small table)."""
    names = list(info.get("label_names") or [])
    per_split = info.get("n_per_split") or {}
    counts = info.get("class_counts") or {}
    rows = []
    for split, n in per_split.items():
        balance = counts.get(split, {})
        total = sum(balance.values()) or 1
        text = ", ".join(f"{escape(names[int(k)] if int(k) < len(names) else k)} {v / total:.1%}"
                         for k, v in list(balance.items())[:10])
        more = " …" if len(balance) > 10 else ""
        role = {"train": "members", "holdout": "non-members", "test": "utility"}.get(split, "")
        rows.append(f"<tr><td>{escape(split)} ({role})</td><td>{int(n):,}</td><td>{text}{more}</td></tr>")
    table = info.get("table") or {}
    facts = [f"{int(info.get('n', 0)):,} rows, {int(info.get('classes', 0))} classes, "
             f"{int(info.get('d', 0))} features after encoding"]
    if table:
        facts.append(f"read from {escape(str(table.get('path')))} ({escape(str(table.get('format')))}, sha256 "
                     f"{escape(str(table.get('sha256', ''))[:12])}…, {int(table.get('rows', 0)):,} rows × "
                     f"{int(table.get('columns', 0))} columns)")
        dropped = table.get("columns_dropped") or []
        facts.append(f"dropped columns: {escape(', '.join(dropped)) if dropped else 'none'}; rows dropped for "
                     f"missing cells: {int(table.get('rows_dropped', 0)):,}")
        unseen = {c["name"]: sum(c["unseen_rows"].values()) for c in table.get("column_roles", [])
                  if c.get("unseen_rows") and sum(c["unseen_rows"].values())}
        if unseen:
            facts.append("rows with a category unseen in the fit split (all-zero block): "
                         + ", ".join(f"{escape(k)} {v:,}" for k, v in unseen.items()))
    return ("<p>" + "; ".join(facts) + ".</p>"
            "<table><tr><th>split</th><th>rows</th><th>class balance</th></tr>" + "".join(rows) + "</table>"
            f"<p>{escape(fit_sentence(info))}</p>")
