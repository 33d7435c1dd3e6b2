"""The guidance page of one dataset (issue 18): the largest grid ε meeting each stated target.

For each limit a user may state (``DEFAULT_TARGETS``, limits from the config's
``dossier.targets``) and each private mechanism of the dataset: the largest target ε of the
grid whose models all meet it (every seed), with their test accuracy, read from
``results/tables/metrics.parquet``; the frontier figure is ``dpaudit.plots.guidance``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dpaudit.contract.external import EXTERNAL
from dpaudit.contract.mechanisms import LINEAR_MECHANISMS, MECHANISM_LABELS
from dpaudit.report.pages import DOSSIER_STYLE, SIG, esc, fmt, number, page
from dpaudit.report.run_view import label_of


@dataclass(frozen=True)
class Target:
    """A limit a user may state: the metric of each model must stay at or below ``limit``."""

    name: str
    family: str
    metric: str
    limit: float | None  # None: the profile's low regime (the limit is each view's ε_low)
    wording: str
    select: tuple[tuple[str, str], ...] = ()


DEFAULT_TARGETS = (
    Target("rho_beta", "identifiability", "rho_beta", 0.75, "maximum posterior belief ρ_β"),
    Target("advantage", "identifiability", "advantage_bound_any_dp", 0.25,
           "maximum membership advantage (any (ε, δ)-DP mechanism)"),
    Target("epsilon_pmp", "pmp", "epsilon_pmp", 1.0, "maximum PMP ε̃ (Recipe B, whole trajectory)",
           (("method", "dpsgd_clt"),)),
    Target("low_regime", "profile", "epsilon_low", None, "stay in the privacy profile's low regime"),
)


@dataclass
class Choice:
    """The answer for one target and one mechanism."""

    target: Target
    mechanism: str
    epsilon: float | None  # the largest grid (target) ε meeting the target; None: none meets it
    sentence: str
    utility: str = ""


def _test_accuracy(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["family"] == "mia") & (frame["metric"] == "test_accuracy")]


def _utility_text(rows: pd.DataFrame) -> str:
    acc = _test_accuracy(rows).sort_values("seed" if "seed" in rows.columns else "run")
    if acc.empty:
        return "no test accuracy"
    spans = [number(r["value"], SIG, data_family="mia", data_metric="test_accuracy", data_select="{}",
                    data_run=r["run"]) for _, r in acc.iterrows()]
    return "test accuracy " + ", ".join(spans) + (f" ({len(spans)} seeds)" if len(spans) > 1 else "")


def _choose(table: pd.DataFrame, dataset: str, mechanism: str, target: Target) -> Choice:
    rows = table[(table["dataset"] == dataset) & (table["mechanism"] == mechanism)]
    families = set(table["family"].dropna().unique())
    if target.family not in families:
        return Choice(target, mechanism, None, f"not computed in this run (family {target.family} disabled)")
    eps_column = pd.to_numeric(rows["target_epsilon"], errors="coerce").astype(float)
    grid = sorted(set(eps_column.dropna()))
    if target.family == "profile":
        if mechanism not in LINEAR_MECHANISMS:
            return Choice(target, mechanism, None, "not applicable: the privacy profile describes private "
                                                   "logistic regression")
        lows = table[(table["family"] == "profile") & (table["dataset"] == dataset)
                     & (table["metric"] == "epsilon_low")].dropna(subset=["value"])
        if lows.empty:
            return Choice(target, mechanism, None, f"no ε_low of a profile view of {dataset} in this run")
        low = lows.loc[lows["value"].idxmin()]
        low_html = number(low["value"], SIG, data_family="profile", data_metric="epsilon_low",
                          data_select=json.dumps({"view": low["view"]}), data_dataset=dataset)
        meeting = [e for e in grid if e <= float(low["value"])]
        where = f"ε_low = {low_html} (view {esc(low['view'])}, the smallest over views)"
        if not meeting:
            return Choice(target, mechanism, None, f"no ε of the grid is at or below {where}")
        chosen = max(meeting)
        return Choice(target, mechanism, chosen, f"ε = {fmt(chosen)} is the largest grid ε at or below {where}",
                      _utility_text(rows[eps_column == chosen]))
    metric = rows[(rows["family"] == target.family) & (rows["metric"] == target.metric)]
    for column, wanted in target.select:
        metric = metric[metric[column].astype("string") == wanted] if column in metric.columns else metric.iloc[0:0]
    metric = metric.dropna(subset=["value"])
    if metric.empty:
        return Choice(target, mechanism, None, f"no {esc(label_of(target.family, target.metric))} for "
                                               f"{MECHANISM_LABELS.get(mechanism, mechanism)} in this run")
    select = json.dumps(dict(target.select))
    worst_per_eps = {}
    for eps in grid:
        at = metric[pd.to_numeric(metric["target_epsilon"], errors="coerce").astype(float) == eps]
        if not at.empty:
            worst_per_eps[eps] = at.loc[at["value"].idxmax()]  # every seed must meet the target
    limit = fmt(target.limit)
    label = esc(label_of(target.family, target.metric))

    def span(row):
        return number(row["value"], SIG, data_family=target.family, data_metric=target.metric,
                      data_select=select, data_run=row["run"])

    meeting = [eps for eps, row in worst_per_eps.items() if float(row["value"]) <= target.limit]
    if not meeting:
        smallest = min(worst_per_eps)
        return Choice(target, mechanism, None,
                      f"no ε of the grid meets {label} ≤ {limit}: the smallest, ε = {fmt(smallest)}, "
                      f"gives {span(worst_per_eps[smallest])}")
    chosen = max(meeting)
    above = [eps for eps in worst_per_eps if eps > chosen]
    text = (f"ε = {fmt(chosen)} is the largest grid ε with {label} ≤ {limit} "
            f"(largest over seeds: {span(worst_per_eps[chosen])})")
    if above:
        nxt = min(above)
        text += f"; the next, ε = {fmt(nxt)}, gives {span(worst_per_eps[nxt])}"
    return Choice(target, mechanism, chosen, text, _utility_text(rows[eps_column == chosen]))


def guidance_choices(table: pd.DataFrame, dataset: str,
                     targets: Sequence[Target] = DEFAULT_TARGETS) -> list[Choice]:
    """For each target and private mechanism of the dataset: the largest grid ε meeting it."""
    rows = table[table["dataset"] == dataset]
    # a model trained elsewhere has no grid ε to choose (issue 44)
    mechanisms = [m for m in MECHANISM_LABELS if m not in ("baseline", EXTERNAL) and (rows["mechanism"] == m).any()]
    return [_choose(table, dataset, m, t) for t in targets for m in mechanisms]


def targets_from_config(options: Mapping | None) -> tuple[Target, ...]:
    """DEFAULT_TARGETS with the limits of a ``{name: limit}`` mapping (unknown names refused)."""
    options = dict(options or {})
    unknown = set(options) - {t.name for t in DEFAULT_TARGETS}
    if unknown:
        raise ValueError(f"unknown guidance target(s) {sorted(unknown)}; known: {[t.name for t in DEFAULT_TARGETS]}")
    return tuple(Target(t.name, t.family, t.metric, float(options[t.name]) if t.name in options and
                        t.limit is not None else t.limit, t.wording, t.select) for t in DEFAULT_TARGETS)


def build_guidance(table: pd.DataFrame, dataset: str, *, png: str | Path,
                   targets: Sequence[Target] = DEFAULT_TARGETS, choices: Sequence[Choice] | None = None) -> str:
    """The guidance page of one dataset (standalone HTML) with its frontier figure ``png`` embedded: drawn
    before, by ``dpaudit.plots.guidance.draw_guidance`` from the same ``choices`` (computed here when None)."""
    if choices is None:
        choices = guidance_choices(table, dataset, targets)
    lines = {}
    for choice in choices:
        lines.setdefault(choice.target.name, []).append(choice)
    items = []
    for target in targets:
        wording = esc(target.wording) + (f" ≤ {fmt(target.limit)}" if target.limit is not None else "")
        answers = "".join(
            f'<li data-target="{esc(target.name)}" data-mechanism="{esc(c.mechanism)}" '
            f'data-epsilon="{"" if c.epsilon is None else repr(c.epsilon)}"><strong>'
            f"{esc(MECHANISM_LABELS.get(c.mechanism, c.mechanism))}</strong>: {c.sentence}"
            + (f"; {c.utility}" if c.utility else "") + ".</li>"
            for c in lines.get(target.name, []))
        items.append(f"<h2>{wording}</h2><ul>{answers or '<li>no private model in this run.</li>'}</ul>")
    data_uri = "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode()
    intro = ("<p>For each limit a user may state, the largest ε of the grid whose models all meet it "
             "(every seed), per mechanism, with their test accuracy. The limits' values are those of the "
             "table below each heading; the figure draws each answer as a vertical line on the "
             "privacy–utility frontier.</p>")
    figure = (f'<img src="{data_uri}" alt="test accuracy against accountant ε, one point per model, '
              'the targets as vertical lines">')
    body = f"<h1>Choosing ε: {esc(dataset)}</h1>{intro}{figure}{''.join(items)}"
    return page(f"Guidance to choose ε: {dataset}", body, style=DOSSIER_STYLE, meta={"dpaudit-dataset": dataset},
                lang="en", viewport=True)
