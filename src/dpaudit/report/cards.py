"""Privacy card of one trained model and the budget ledger, from workflow artifacts.

Glue between the per-run files (outputs.parquet, the MIA metric rows, train.json,
dataset.json) and dpaudit.dp.card / dpaudit.dp.ledger.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.dp.card import CardFigureRenderer, privacy_card_from_info
from dpaudit.dp.ledger import build_ledger
from dpaudit.metrics.mia import roc_curve

CARD_METRICS = (
    "exp_epsilon", "max_attack_accuracy", "max_advantage", "tpr_bound_at_fpr_0_001",
    "tpr_bound_at_fpr_0_01", "attack_tpr_at_fpr_0_001", "attack_tpr_at_fpr_0_01", "attack_auc",
    "dp_region_eps_lower_bound", "roc_violations",
)


class DPRegionViolation(RuntimeError):
    """A measured attack beats what the model's (ε, δ) allows: a bug or a wrong assumption."""


def _metric(mia: pd.DataFrame, name: str) -> float:
    values = mia.loc[mia["metric"] == name, "value"]
    return float(values.iloc[0]) if len(values) else math.nan


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>body{{font:13px sans-serif;max-width:52em}}"
        "table{border-collapse:collapse;margin:0.5em 0}th{text-align:left;font-weight:normal;"
        "padding:1px 10px 1px 0}td{padding:1px 6px}.warning{color:#a00}</style></head><body>"
        f"{body}</body></html>\n"
    )


def build_privacy_card(outputs: pd.DataFrame, mia: pd.DataFrame, train: Mapping, dataset_info: Mapping,
                       figure_path: str | Path, *, alpha: float = 0.05, loss_column: str = "loss_ce",
                       fail_on_violation: bool = True) -> tuple[str, pd.DataFrame]:
    """Return (self-contained HTML card, long metric rows) of one model.

    The attack ROC is the loss-threshold attack on members vs non-members, the same
    attack as the ``mia`` family; its points are checked against the DP region of
    the run's (ε, δ) with Clopper–Pearson bounds (Bonferroni over the ROC points).
    """
    splits = dataset_info["splits"]
    members = outputs.loc[outputs["split"] == splits["members"], loss_column].to_numpy(np.float64)
    nonmembers = outputs.loc[outputs["split"] == splits["nonmembers"], loss_column].to_numpy(np.float64)
    roc = roc_curve(members, nonmembers)
    card = privacy_card_from_info(
        {**train, "unit_of_protection": train.get("unit_of_protection", "example")},
        fpr=roc.fpr[1:], tpr=roc.tpr[1:], n_members=roc.n_members, n_nonmembers=roc.n_nonmembers,
        generalization_gap=_metric(mia, "generalization_gap"), utility=_metric(mia, "test_accuracy"),
        utility_name="test accuracy", figure_path=figure_path, alpha=alpha,
        renderer=CardFigureRenderer(),
    )
    row = card.row
    if fail_on_violation and (row["roc_inside_dp_region"] is False or row["lower_bound_exceeds_epsilon"]):
        raise DPRegionViolation(
            f"{row['dataset']}/{row['run']}: the measured attack ROC leaves the DP region of "
            f"ε={row['epsilon']}, δ={row['delta']} ({row['roc_violations']} point(s); DP-region test ε lower "
            f"bound {row['dp_region_eps_lower_bound']:.4g}). Check sampling, neighbouring relation and accountant."
        )
    figure = Path(figure_path).read_bytes()
    data_uri = "data:image/png;base64," + base64.b64encode(figure).decode()
    body = card.html.replace(f'src="{html.escape(Path(figure_path).name)}"', f'src="{data_uri}"')
    rows = pd.DataFrame({
        "metric": list(CARD_METRICS) + ["roc_inside_dp_region"],
        "value": [float(row[m]) if row[m] is not None else math.nan for m in CARD_METRICS]
        + [math.nan if row["roc_inside_dp_region"] is None else float(row["roc_inside_dp_region"])],
    })
    rows["delta"] = float(row["delta"])
    rows["alpha"] = alpha
    rows["loss"] = loss_column
    rows["n_members"] = roc.n_members
    rows["n_nonmembers"] = roc.n_nonmembers
    return _page(f"Privacy card {row['dataset']}/{row['run']}", body), rows


def build_budget_ledger(train_infos: Sequence[Mapping]) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Per-run ledger rows, per-dataset totals and an HTML page flagging what the whole grid costs."""
    infos = [{**info, "unit_of_protection": info.get("unit_of_protection", "example")} for info in train_infos]
    ledger = build_ledger(infos)
    totals = ledger.totals
    shown = totals.copy()
    for column in shown.select_dtypes("number").columns:
        shown[column] = shown[column].map(lambda v: "∞" if v == math.inf else f"{v:.4g}")
    intro = (
        "<h3>Privacy budget ledger</h3><p>Each DP run is an (ε, δ) guarantee on its own. Releasing "
        "<strong>every model of the grid</strong> trained on the same data composes them: "
        "<code>basic_epsilon</code> adds the ε's, <code>rdp_epsilon</code> composes the runs' RDP "
        "curves and converts once. <code>release_all_epsilon</code> is the smaller of the two, and ∞ "
        "whenever a non-private baseline is released too.</p>"
    )
    page = _page("Privacy budget ledger", intro + shown.to_html(index=False, border=0)
                 + "<h4>Runs</h4>" + ledger.runs.to_html(index=False, border=0, float_format="%.4g"))
    return ledger.runs, totals, page
