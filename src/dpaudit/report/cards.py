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

from dpaudit.contract import metrics as vocabulary
from dpaudit.dp.card import CardFigureRenderer, privacy_card_from_info
from dpaudit.dp.ledger import build_ledger
from dpaudit.dp.roc import roc_curve
from dpaudit.logs import Refusal
from dpaudit.metrics.canary.rows import LADDER, verdict_sentence
from dpaudit.report.banner import model_banner
from dpaudit.report.pages import page

# The privacy_card family's metrics (dpaudit.contract.metrics): the theory of the run's (ε, δ)
# and the DP-region test. The measured attack (TPR at low FPR, AUC) is the mia family's; the
# card shows it but does not write it again.
CARD_METRICS = ("exp_epsilon", "max_attack_accuracy_bound", "max_advantage_bound")
CARD_STYLE = ("body{font:14px sans-serif;max-width:60em;margin:0.8em}"
              "img{width:100%;max-width:660px;height:auto;display:block;margin:0.5em 0}h3{overflow-wrap:anywhere}"
              "table{border-collapse:collapse;margin:0.5em 0}th{text-align:left;font-weight:normal;"
              "padding:1px 10px 1px 0}td{padding:1px 6px}.warning{color:#a00}")


class DPRegionViolation(Refusal, RuntimeError):
    """A measured attack beats what the model's (ε, δ) allows: a bug or a wrong assumption."""


def _metric(mia: pd.DataFrame, name: str) -> float:
    values = mia.loc[mia["metric"] == name, "value"]
    return float(values.iloc[0]) if len(values) else math.nan


def canary_ladder_html(canary: pd.DataFrame | None, mia: pd.DataFrame) -> str:
    """The ε ladder of one run as an HTML section: each canary rung with its ceiling, the
    natural-split attack bound, and the canary verdict (values copied from the rows)."""
    if canary is None:
        return ("<h2>ε ladder</h2><p>Canary audit not computed in this run "
                "(family <code>canary</code> disabled).</p>")
    rows = []
    for rung in LADDER:
        label = rung.label
        hit = rung.rows(canary)
        if hit.empty:
            continue
        value = float(hit["value"].iloc[0])
        ceiling = hit["ceiling_max"].iloc[0] if pd.notna(hit["ceiling_max"].iloc[0]) else hit["ceiling"].iloc[0]
        delta = float(hit["delta"].iloc[0]) if "delta" in hit else math.nan
        claim = hit["claimed_epsilon"].iloc[0] if "claimed_epsilon" in hit else None
        claim_text = "—" if claim is None or pd.isna(claim) else f"{float(claim):.3f}"
        rows.append(f"<tr><td>{html.escape(label)}</td><td>{value:.3f}</td><td>{float(ceiling):.3f}</td>"
                    f"<td>{delta:.3g}</td><td>{claim_text}</td></tr>")
    natural = mia[mia["metric"] == "epsilon_lower_bound"]
    if len(natural):
        rows.append(f"<tr><td>natural split: certified attack bound</td><td>{float(natural['value'].iloc[0]):.3f}"
                    "</td><td>—</td><td>—</td><td>—</td></tr>")
    verdict, sentence = verdict_sentence(canary)
    style = ' style="color:#b00020;font-weight:bold"' if verdict == "above_promise" else ""
    line = f"<span{style}>{html.escape(sentence.upper() if verdict == 'above_promise' else sentence)}</span>"
    table = ("<table><tr><th>rung</th><th>ε</th><th>ceiling</th><th>at δ</th><th>accountant ε at that δ</th></tr>"
             + "".join(rows) + "</table>") if rows else ""
    return ("<h2>ε ladder</h2><p>Canary audit (dpaudit family <code>canary</code>): lower bounds and estimates of "
            "the model's ε from planted canaries; a ceiling is what perfect guessing would certify. The "
            "distribution-free one-run bound is computed at a δ small enough for its 2mδ term (m canaries) and "
            "judged against the accountant's ε at that δ; the many-trials bound and the claim-curve test read the "
            "gradient canaries as independent trials, at the run's own δ.</p>"
            f"{table}<p>Verdict: {line}</p>")


def build_privacy_card(outputs: pd.DataFrame, mia: pd.DataFrame, train: Mapping, dataset_info: Mapping,
                       figure_path: str | Path, *, alpha: float = 0.05, loss_column: str = "loss_ce",
                       fail_on_violation: bool = True, canary: pd.DataFrame | None = None) -> tuple[str, pd.DataFrame]:
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
        roc=roc,
        generalization_gap=_metric(mia, "generalization_gap"), utility=_metric(mia, "test_accuracy"),
        utility_name="test accuracy", figure_path=figure_path, alpha=alpha,
        renderer=CardFigureRenderer(),
    )
    row = card.row
    if fail_on_violation and (row["roc_inside_dp_region"] is False or row["lower_bound_exceeds_epsilon"]):
        raise DPRegionViolation(
            f"{row['dataset']}/{row['run']}: the measured attack ROC leaves the DP region of "
            f"ε={row['epsilon']}, δ={row['delta']} ({row['roc_violations']} point(s); DP-region test ε lower "
            f"bound {row['dp_region_epsilon_lower_bound']:.4g}). Check sampling, neighbouring relation and accountant."
        )
    figure = Path(figure_path).read_bytes()
    data_uri = "data:image/png;base64," + base64.b64encode(figure).decode()
    body = model_banner(train) + card.html.replace(f'src="{html.escape(Path(figure_path).name)}"',
                                                           f'src="{data_uri}"')
    body += canary_ladder_html(canary, mia)
    test = {"alpha": alpha, "loss": loss_column, "n_members": roc.n_members, "n_nonmembers": roc.n_nonmembers}
    records = [{"metric": m, "value": float(row[m])} for m in CARD_METRICS]
    records += [{"metric": "tpr_bound_at_fpr", "value": float(value), "fpr_target": float(target)}
                for target, value in row["tpr_bound_at_fpr"].items()]
    records += [{"metric": "dp_region_epsilon_lower_bound", "value": float(row["dp_region_epsilon_lower_bound"]), **test},
                {"metric": "roc_violations", "value": math.nan if row["roc_violations"] is None
                 else float(row["roc_violations"]), **test},
                {"metric": "roc_inside_dp_region", "value": row["roc_inside_dp_region"], **test}]
    rows = pd.DataFrame.from_records(records).astype({"fpr_target": "float64", "alpha": "float64",
                                                       "n_members": "Int64", "n_nonmembers": "Int64"})
    rows["delta"] = float(row["delta"])
    return page(f"Privacy card {row['dataset']}/{row['run']}", body, style=CARD_STYLE), rows


LEDGER_TOTALS_GLOSSARY = {
    "dataset": ("dataset", "—", "the models of this dataset are released together"),
    "n_runs": ("runs", "count", "models in the grid (the rows of one model audited twice, same_model_as, count once)"),
    "n_private": ("DP runs", "count", "models trained with DP"),
    "n_nonprivate": ("non-private runs", "count", "baselines (ε = ∞)"),
    "max_run_epsilon": ("largest run ε", "nats", "largest ε of a single DP run"),
    "basic_epsilon": ("basic composition ε", "nats", "sum of the DP runs' ε"),
    "basic_delta": ("basic composition δ", "probability", "sum of the DP runs' δ"),
    "rdp_epsilon": ("RDP composition ε", "nats", "ε of the composed Rényi-DP curves, converted once"),
    "rdp_delta": ("RDP composition δ", "probability", "δ of that conversion (+ δ of runs composed basically)"),
    "rdp_order": ("RDP order", "—", "Rényi order that gives the RDP composition ε"),
    "n_rdp_composed": ("runs composed by RDP", "count", "DP runs whose RDP curve could be composed"),
    "n_basic_fallback": ("runs composed basically", "count", "DP runs added by basic composition instead"),
    "release_all_epsilon": ("release all: ε", "nats", "smaller of basic and RDP ε; ∞ when a baseline is released"),
    "release_all_delta": ("release all: δ", "probability", "δ that goes with release-all ε"),
    "accountants": ("accountants", "—", "accountants of the runs"),
    "relations": ("neighbouring relations", "—", "neighbouring relations of the runs (one name: add_remove / replace_one)"),
    "units": ("units of protection", "—", "what one neighbour differs by (example, user)"),
    "notes": ("notes", "—", "what to watch when releasing every model"),
}
LEDGER_RUNS_GLOSSARY = {
    "dataset": ("dataset", "—", "dataset the model was trained on"),
    "mechanism": ("mechanism", "—", "baseline = non-private; dpsgd = DP-SGD; output_perturbation / "
                  "objective_perturbation = pure ε-DP logistic regression"),
    "epsilon": ("ε", "nats", "the run's accountant ε; ∞ = no DP"),
    "delta": ("δ", "probability", "the run's δ (— for baselines)"),
    "exp_epsilon": vocabulary.glossary_entry("privacy_card", "exp_epsilon"),
    "max_attack_accuracy": vocabulary.glossary_entry("privacy_card", "max_attack_accuracy_bound"),
    "max_advantage": vocabulary.glossary_entry("privacy_card", "max_advantage_bound"),
    "tpr_bound_at_fpr_0_001": ("TPR bound at FPR 10⁻³", "fraction", "largest TPR (ε, δ) allows at FPR 0.001"),
    "tpr_bound_at_fpr_0_01": ("TPR bound at FPR 10⁻²", "fraction", "largest TPR (ε, δ) allows at FPR 0.01"),
    "accountant": ("accountant", "—", "privacy accountant of the run"),
    "neighbouring_relation": ("neighbouring relation", "—", "add_remove (Poisson sampling) or replace_one"),
    "unit_of_protection": ("unit of protection", "—", "what one neighbour differs by"),
    "sampling": ("sampling", "—", "batch sampling the accountant assumes"),
    "noise_multiplier": ("noise multiplier σ", "× clip norm", "std of the Gaussian noise / clipping norm"),
    "sampling_probability": ("sampling rate q", "fraction", "probability an example is in a batch"),
    "steps": ("steps", "count", "noisy gradient steps"),
    "same_model_as": ("same model as", "—", "a model trained elsewhere audited by another entry too"),
    "counted_in_totals": ("in totals", "—", "false: another row of the same model is the one composed"),
    "notes": ("notes", "—", "caveats of this run's accounting"),
    "run": ("run", "—", "the run's full parameter string"),
}


def _without_inf_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Notes say ε = ∞ as every table does (the ledger library writes 'epsilon = inf')."""
    if "notes" in frame.columns:
        frame = frame.assign(notes=frame["notes"].astype("string").str.replace("epsilon = inf", "ε = ∞",
                                                                                 regex=False))
    return frame


def build_budget_ledger(train_infos: Sequence[Mapping]) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Per-run ledger rows, per-dataset totals and an HTML page flagging what the whole grid costs."""
    from dpaudit.report import tables

    infos = [{**info, "unit_of_protection": info.get("unit_of_protection", "example")} for info in train_infos]
    ledger = build_ledger(infos)
    totals = ledger.totals
    intro = (
        "<h3>Privacy budget ledger</h3><p>Each DP run is an (ε, δ) guarantee on its own. Releasing "
        "<strong>every model of the grid</strong> trained on the same data composes them: "
        "basic composition adds the ε's, RDP composition composes the runs' Rényi-DP curves and converts once. "
        "<em>Release all: ε</em> is the smaller of the two, and ∞ whenever a non-private baseline is released "
        "too. Click a header to sort; type in the boxes under the columns to filter. Numbers: 4 significant "
        "digits; — = not applicable.</p>"
    )
    totals_glossary = {c: v for c, v in LEDGER_TOTALS_GLOSSARY.items() if c in totals.columns}
    runs_glossary = {c: v for c, v in LEDGER_RUNS_GLOSSARY.items() if c in ledger.runs.columns}
    runs_shown = ledger.runs.copy()
    if "private" in runs_shown.columns:
        # δ, accountant and sampling describe a guarantee a baseline does not have
        for column in ("delta", "sampling_probability"):
            if column in runs_shown.columns:
                runs_shown.loc[~runs_shown["private"].astype(bool), column] = np.nan
    body = (intro + "<h4>Totals per dataset</h4>"
            + tables.interactive_table(_without_inf_text(totals), totals_glossary, table_id="dpaudit-ledger-totals")
            + "<h4>Runs</h4>"
            + tables.interactive_table(_without_inf_text(runs_shown), runs_glossary, table_id="dpaudit-ledger-runs")
            + tables.glossary_html(totals_glossary).replace("Glossary", "Glossary: totals", 1)
            + tables.glossary_html(runs_glossary).replace("Glossary", "Glossary: runs", 1))
    return ledger.runs, totals, page("Privacy budget ledger", body, style=tables.PAGE_STYLE,
                                     head=tables.offline_bundle())
