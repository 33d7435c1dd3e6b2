"""The exposed-rows page of one dataset (issue 24): which rows stay most exposed across the grid.

For every attacked model the members are ranked by the score of its strongest attack (the
highest ``attack_auc`` of its mia rows with an ``attack`` column, ``dpaudit.report.exposure``);
the page lists the rows found in the most models' top k (``persistence``), answers "the same
rows at every ε?" with the overlap of the top-k lists (``overlap_matrix``: the mean share of
top-k rows two models have in common, for models at two target ε or, on the diagonal, for
two seeds of one ε; chance is k/n for two random top-k lists of the n members), and shows
the most persistent rows' score against ε (``dpaudit.plots.exposed``; the baselines, which
have no ε, at a separate "∞ (baseline)" position).

Every number is read from the runs' scores tables and the metrics table (AUCs); nothing
is recomputed from a model. ``results/exposed/{dataset}.html`` with the figure beside it.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.contract.labels import ATTACK_LABELS, run_label, target_epsilon
from dpaudit.report.exposure import attack_aucs, attack_exposed, strongest_attack
from dpaudit.report.pages import DOSSIER_STYLE, esc, fmt, missing_p, number, page

__all__ = ["EXPOSED_TOP", "FIGURE_ROWS", "ExposedAnalysis", "build_exposed_page", "exposed_analysis", "dataset_attack", "overlap_matrix", "persistence",
           "top_rows_per_run"]

EXPOSED_TOP = 10  # k: the rows of each model's ranking that count as its most exposed
FIGURE_ROWS = 6  # the most persistent rows drawn against ε


def top_rows_per_run(scores: Mapping[str, pd.DataFrame], attacks: Mapping[str, str], *,
                     top: int = EXPOSED_TOP) -> pd.DataFrame:
    """Each run's top ``top`` members by its attack, ties at the cut included with a ``weight``.

    ``weight`` is the chance the row is among the top ``top`` when the rows tied at the cut are
    ordered at random: 1 above the cut, (top − members above the cut) / (members tied at the cut)
    at it. A run's weights sum to ``top`` (or its member count when smaller). Other columns:
    ``attack_exposed``'s, with ``run`` and ``attack``.
    """
    columns = ["run", "attack", "rank", "tied", "example_id", "label", "score", "weight",
               "nonmembers_at_or_above", "n_nonmembers"]
    frames = []
    for run, attack in attacks.items():
        if attack is None:
            continue
        everyone = attack_exposed(scores[run], attack, top=None)
        if everyone.empty:
            continue
        cut = float(everyone["score"].iloc[min(top, len(everyone)) - 1])
        above = everyone["score"] > cut
        at = everyone["score"] == cut
        weight = np.where(above, 1.0, np.where(at, (min(top, len(everyone)) - above.sum()) / max(at.sum(), 1), 0.0))
        frames.append(everyone.assign(run=run, attack=attack, weight=weight)[above | at])
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def persistence(top: pd.DataFrame, targets: Mapping[str, float]) -> pd.DataFrame:
    """One line per row in some run's top k: ``runs_in_top`` (runs where it is above the cut),
    ``runs_tied`` (runs where it ties at the cut), ``expected`` (Σ weight: the expected number of
    runs whose top k hold it), ``epsilons`` (the target ε where it is above the cut, ∞ last),
    ``best_rank``; most expected first (ties: best rank, example_id)."""
    columns = ["example_id", "label", "runs_in_top", "runs_tied", "expected", "epsilons", "best_rank"]
    if top.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for example_id, part in top.groupby("example_id", sort=True):
        sure = part[part["weight"] >= 1.0]
        rows.append({"example_id": int(example_id), "label": part["label"].iloc[0],
                     "runs_in_top": int(sure["run"].nunique()), "runs_tied": int((part["weight"] < 1.0).sum()),
                     "expected": float(part["weight"].sum()),
                     "epsilons": sorted({targets[r] for r in sure["run"]}), "best_rank": int(part["rank"].min())})
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["expected", "best_rank", "example_id"], ascending=[False, True, True],
                           kind="mergesort", ignore_index=True)


def overlap_matrix(top: pd.DataFrame, targets: Mapping[str, float], k: int) -> pd.DataFrame:
    """Expected share of two runs' top-k rows in common (Σ_rows weight_A · weight_B / k: ties at the
    cut broken at random, independently per run), averaged over the run pairs at target ε (row,
    column); the diagonal pairs different seeds of one ε (NaN with one seed). Index and columns:
    the sorted ε. Two random top-k lists of n rows share k/n on average."""
    weights = {run: dict(zip(part["example_id"], part["weight"], strict=True))
               for run, part in top.groupby("run", sort=True)}
    eps = sorted({targets[r] for r in weights})
    matrix = pd.DataFrame(np.nan, index=eps, columns=eps)
    for a, b in itertools.combinations_with_replacement(eps, 2):
        pairs = [(r, s) for r in weights for s in weights if r < s and {targets[r], targets[s]} == {a, b}]
        if pairs:
            shared = [sum(w * weights[s].get(e, 0.0) for e, w in weights[r].items()) / k for r, s in pairs]
            matrix.loc[a, b] = matrix.loc[b, a] = float(np.mean(shared))
    return matrix


def dataset_attack(strongest: Mapping[str, str], aucs: Mapping[str, Mapping[str, float]]) -> str | None:
    """The one attack of the figure: strongest on the most runs (ties: higher mean AUC over those runs)."""
    counts: dict[str, int] = {}
    for attack in strongest.values():
        if attack is not None:
            counts[attack] = counts.get(attack, 0) + 1
    if not counts:
        return None

    def mean_auc(attack):
        values = [float(aucs[run][attack]) for run in aucs if attack in aucs[run]]
        return float(np.mean(values)) if values else -math.inf

    return max(counts, key=lambda a: (counts[a], mean_auc(a)))


def _eps_text(eps: float) -> str:
    return "∞ (baseline)" if not math.isfinite(eps) else fmt(eps, "g")


def _overlap_html(matrix: pd.DataFrame, k: int, n_members: int) -> str:
    head = "".join(f"<th>ε = {esc(_eps_text(e))}</th>" for e in matrix.columns)
    body = "".join(
        f"<tr><th scope='row'>ε = {esc(_eps_text(a))}</th>"
        + "".join(f'<td class="v">{fmt(100 * matrix.loc[a, b], ".0f") + " %" if pd.notna(matrix.loc[a, b]) else "—"}</td>'
                  for b in matrix.columns) + "</tr>"
        for a in matrix.index)
    return (f"<table class='overlap'><thead><tr><th>top-{k} lists shared</th>{head}</tr></thead><tbody>{body}"
            f"</tbody></table><p class='sub'>Cell: mean share of the top-{k} rows two models have in common, over "
            f"every pair of models at the two ε (diagonal: two seeds of one ε). Two random top-{k} lists of the "
            f"{n_members} members share {fmt(100 * k / max(n_members, 1), '.2g')} % on average.</p>")


def _answer(matrix: pd.DataFrame, persistent: pd.DataFrame, top: pd.DataFrame, k: int, n_members: int) -> str:
    eps = list(matrix.index)
    runs = top["run"].nunique()
    every_run = persistent[persistent["runs_in_top"] == runs]
    every_eps = persistent[[set(e) >= set(eps) for e in persistent["epsilons"]]] if len(persistent) else persistent
    across = [matrix.loc[a, b] for a, b in itertools.combinations(eps, 2) if pd.notna(matrix.loc[a, b])]
    within = [matrix.loc[a, a] for a in eps if pd.notna(matrix.loc[a, a])]
    chance = k / max(n_members, 1)
    parts = [f"<strong>{len(every_eps)}</strong> row(s) are in the top {k} of some model at every ε "
             f"({len(eps)} ε values, baseline included) and <strong>{len(every_run)}</strong> in the top {k} of "
             f"every one of the {runs} models (rows tied at a model's cut not counted)."]
    if across:
        mean_across = float(np.mean(across))
        text = (f"Two models at different ε share {fmt(100 * mean_across, '.2g')} % of their top-{k} rows on "
                f"average (chance {fmt(100 * chance, '.2g')} %)")
        if within:
            mean_within = float(np.mean(within))
            text += f", two seeds of one ε {fmt(100 * mean_within, '.2g')} %"
            if mean_within <= 2 * chance:
                verdict = ("even two seeds of one ε barely agree, so the top of the ranking is mostly the seed's "
                           "draw and says little about ε")
            elif mean_across >= 0.5 * mean_within:
                verdict = ("a row exposed at one ε is about as often exposed at another ε as under another seed: "
                           "the exposure follows the row more than ε")
            else:
                verdict = "which rows are exposed changes with ε more than with the seed"
            text += f": {verdict}"
        parts.append(text + ".")
    return "<p>" + " ".join(parts) + "</p>"


@dataclass
class ExposedAnalysis:
    """What the exposed-rows page and its figure read, computed once (``exposed_analysis``)."""

    order: list
    targets: dict
    aucs: dict
    strongest: dict
    top_frame: pd.DataFrame
    persistent: pd.DataFrame
    matrix: pd.DataFrame
    n_members: int
    top: int
    figure_rows: int
    attack: str | None = None
    figure_ids: list = field(default_factory=list)
    row_labels: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)
    run_params: dict = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.order or self.top_frame.empty

    def figure(self) -> dict:
        """The arguments of ``dpaudit.plots.exposed.plot_exposed_rows`` (before the dataset and files)."""
        if self.empty:
            return {"scores": {}, "run_params": {}, "strongest": {}, "attack": None, "rows": []}
        return {"scores": {r: self.scores[r] for r in self.order}, "run_params": self.run_params,
                "strongest": self.strongest, "attack": self.attack, "rows": self.figure_ids,
                "row_labels": self.row_labels}


def exposed_analysis(table: pd.DataFrame, dataset: str, scores: Mapping[str, pd.DataFrame],
                     run_params: Mapping[str, Mapping], *, top: int = EXPOSED_TOP,
                     figure_rows: int = FIGURE_ROWS) -> ExposedAnalysis:
    """Each attacked model's strongest attack and top rows, the rows' persistence and overlap across ε,
    and the rows the figure draws."""
    order = sorted(scores, key=lambda r: (target_epsilon(run_params[r]), run_params[r].get("seed") or 0, r))
    targets = {run: target_epsilon(run_params[run]) for run in order}
    aucs = {run: attack_aucs(table, dataset, run) for run in order}
    strongest = {run: strongest_attack({a: row["value"] for a, row in aucs[run].items()}, scores[run].columns)
                 for run in order}
    top_frame = top_rows_per_run(scores, {r: strongest[r] for r in order}, top=top)
    persistent = persistence(top_frame, targets)
    matrix = overlap_matrix(top_frame, targets, top)
    n_members = max((int(scores[r]["is_member"].sum()) for r in order), default=0)
    analysis = ExposedAnalysis(order=order, targets=targets, aucs=aucs, strongest=strongest, top_frame=top_frame,
                               persistent=persistent, matrix=matrix, n_members=n_members, top=top,
                               figure_rows=figure_rows, scores=dict(scores), run_params=dict(run_params))
    if not analysis.empty:
        analysis.attack = dataset_attack(strongest, {r: {a: row["value"] for a, row in aucs[r].items()}
                                                     for r in order})
        analysis.figure_ids = [int(e) for e in persistent["example_id"].head(figure_rows)]
        analysis.row_labels = {
            int(r.example_id): f"example {int(r.example_id)} (label {r.label}; top of {int(r.runs_in_top)}/{len(order)})"
            for r in persistent.head(figure_rows).itertuples()}
    return analysis


def build_exposed_page(analysis: ExposedAnalysis, dataset: str, *, png: str | Path,
                       flags: Mapping[int, Sequence[str]] | None = None) -> str:
    """Standalone HTML page of the dataset's most exposed rows across its attacked models, with the figure
    ``png`` embedded (drawn before by ``dpaudit.plots.exposed.plot_exposed_rows`` from ``analysis.figure()``)."""
    order, aucs, strongest, top = analysis.order, analysis.aucs, analysis.strongest, analysis.top
    top_frame, persistent, matrix, n_members = (analysis.top_frame, analysis.persistent, analysis.matrix,
                                                analysis.n_members)
    run_params, figure_rows = analysis.run_params, analysis.figure_rows
    body = [f"<h1>Most exposed rows: {esc(dataset)}</h1>",
            f"<p class='sub'>The members each attacked model's strongest reference-model attack singles out "
            f"first (its top {top}), across the {len(order)} attacked models of {esc(dataset)}. Read from the "
            "models' attack scores (results/attacks/…/scores.parquet) and the metrics table's attack AUCs.</p>"]
    if analysis.empty:
        body.append(missing_p("No attacked model with attack scores and AUC rows: nothing to rank."))
        return page(f"Exposed rows: {dataset}", "".join(body), style=DOSSIER_STYLE,
                    meta={"dpaudit-dataset": dataset}, lang="en", viewport=True)
    body.append("<h2>The same rows at every ε?</h2>")
    body.append(_answer(matrix, persistent, top_frame, top, n_members))
    body.append(_overlap_html(matrix, top, n_members))
    body.append("<p class='sub'>The seeds of one ε share their reference models (one pool per training recipe, "
                "rules/attacks.smk), so part of the diagonal's agreement can come from the shared pool rather than "
                "from the rows; models at different ε have different pools.</p>")
    body.append("<h2>Rows most often in a model's top " + str(top) + "</h2>")
    shown = persistent.head(max(20, figure_rows))
    rows = "".join(
        f"<tr><td data-h='example id'>{int(r.example_id)}</td><td data-h='label'>{esc(r.label)}</td>"
        f"<td class='v' data-h='models'>{int(r.runs_in_top)} of {len(order)}"
        f"{f' (+{int(r.runs_tied)} tied at the cut)' if r.runs_tied else ''}</td>"
        f"<td class='v' data-h='expected'>{fmt(r.expected, '.3g')}</td>"
        f"<td data-h='at ε'>{esc(', '.join(_eps_text(e) for e in r.epsilons))}</td>"
        f"<td class='v' data-h='best rank'>{int(r.best_rank)}</td>"
        f"<td data-h='also singled out by'>{esc('; '.join((flags or {}).get(int(r.example_id), [])) or '—')}</td></tr>"
        for r in shown.itertuples())
    body.append("<table class='exposed'><thead><tr><th>example id</th><th>label</th><th>in the top of</th>"
                "<th>expected models (ties at random)</th><th>at ε</th><th>best rank</th><th>also singled out by</th>"
                "</tr></thead><tbody>" + rows
                + "</tbody></table>")
    if len(persistent) > len(shown):
        body.append(f"<p class='sub'>{len(persistent) - len(shown)} more row(s) reach some model's top {top} "
                    "less often; not listed.</p>")
    attack, figure_ids = analysis.attack, analysis.figure_ids
    data_uri = "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode()
    body.append("<h2>Their score against ε</h2>")
    body.append(f"<p>The {len(figure_ids)} rows above with the most expected models. Left: the share of "
                "non-members that score at least as high under each model's strongest attack (the ranking's own "
                "unit, comparable across attacks; 0 = the row scores above every non-member). Right: the raw "
                f"score under one attack for every model, <strong>{esc(ATTACK_LABELS.get(attack, attack))}"
                "</strong> (the strongest attack on the most models), beside the non-members' median and 99th "
                "percentile. One thin line per row and seed across the private models' target ε; the baselines "
                "have no ε and stand apart at the right, labelled ∞ (baseline), one diamond per seed.</p>")
    body.append(f'<img src="{data_uri}" alt="score of the most persistent rows against target ε, and the share '
                f'of non-members scoring at least as high">')
    body.append("<h2>Each model's strongest attack and its top rows</h2>")
    lines = []
    for run in order:
        attack_r = strongest[run]
        part = top_frame[top_frame["run"] == run]
        sure, tied = part[part["weight"] >= 1.0], part[part["weight"] < 1.0]
        auc = number(aucs[run][attack_r]["value"], ".3f", data_family="mia", data_metric="attack_auc",
                     data_select=json.dumps({"attack": attack_r}), data_run=run) if attack_r else "—"
        ids = ", ".join(f"{int(e)}" for e in sure["example_id"])
        if len(tied):
            ids += (f"{'; then ' if len(sure) else ''}{top - len(sure)} of the {len(tied)} members tied at score "
                    f"{fmt(tied['score'].iloc[0])}")
        k0 = int(part["nonmembers_at_or_above"].iloc[0]) if len(part) else -1
        chance = aucs[run][attack_r].get("ci_lower") if attack_r else None
        if chance is not None and pd.notna(chance) and float(chance) <= 0.5:
            auc += " <span class='flag'>(interval holds 0.5)</span>"
        first = ("above every non-member" if k0 == 0 else f"above all but {k0} of {int(part['n_nonmembers'].iloc[0])}"
                 ) if len(part) else "—"
        lines.append(f"<tr><td data-h='model'>{esc(run_label(run_params[run]))}</td>"
                     f"<td data-h='strongest attack'>{esc(ATTACK_LABELS.get(attack_r, attack_r or '—'))}</td>"
                     f"<td class='v' data-h='AUC'>{auc}</td><td data-h='rank 1 scores'>{first}</td>"
                     f"<td data-h='top rows'>{esc(ids)}</td></tr>")
    body.append("<table class='exposed'><thead><tr><th>model</th><th>strongest attack (highest AUC)</th><th>AUC</th>"
                f"<th>rank 1 scores</th><th>top {top} (example ids, most exposed first)</th></tr></thead><tbody>"
                + "".join(lines) + "</tbody></table>")
    return page(f"Exposed rows: {dataset}", "".join(body), style=DOSSIER_STYLE,
                meta={"dpaudit-dataset": dataset}, lang="en", viewport=True)
