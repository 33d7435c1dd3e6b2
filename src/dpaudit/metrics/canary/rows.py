"""Metric rows of the canary family: every estimator on every score, and the verdict.

Per (threat model, score kind) of a run's ``scores.parquet``:

* ``epsilon_lb_one_run``: Steinke et al. 2023's one-run lower bound (distribution
  free; its δ term 2mδ makes it weak when m·δ is not ≪ the significance);
* ``epsilon_lb_one_run_fdp``: Mahloujifar et al. 2025's bound against the Gaussian
  trade-off curve of an exactly (ε, δ)-DP Gaussian mechanism (assumes that shape);
* ``epsilon_gdp_estimate``: Nasr et al. 2023's GDP estimate (an estimate under a
  Gaussian trade-off, not a bound);
* ``epsilon_lb_many_runs``: linear mechanisms only, Clopper–Pearson over R releases.

Each carries its ceiling (what perfect guessing certifies with the same counts) in
``ceiling``. The run's ``measured_above_promise`` flag (its ``verdict`` column) compares the distribution-free bounds
(one-run Steinke, many-runs) with the accountant's ε: ``above_promise`` when a bound
exceeds it (the mechanism leaks more than it claims, with the audit's confidence),
``too_weak`` when no such bound could have reached it (every ceiling below ε),
``consistent`` otherwise. Metric names and meanings: ``dpaudit.contract.metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpaudit.dp import canary_bounds as cb
from dpaudit.metrics.canary.many_runs import bound_from_scores

__all__ = ["DISTRIBUTION_FREE", "LADDER", "Rung", "ROW_DTYPES", "canary_rows", "not_applicable_rows", "recorded_claims", "run_canary_metrics",
           "verdict"]

@dataclass(frozen=True)
class Rung:
    """One rung of a run's ε ladder: which canary row it is and how figures and pages name it."""

    key: str
    metric: str
    threat_model: str
    score_kind: str
    label: str

    def rows(self, table: pd.DataFrame) -> pd.DataFrame:
        """This rung's rows of a canary metric table (or of ``metrics.parquet``); a rung
        whose metric is not in the table gives no rows. Per-canary score frames (no
        ``metric`` column) are selected by threat model and score kind only."""
        keep = ((table["threat_model"] == self.threat_model).fillna(False)
                & (table["score_kind"] == self.score_kind).fillna(False))
        if "metric" in table.columns:
            keep &= (table["metric"] == self.metric).fillna(False)
        return table[keep.to_numpy(bool)]


# The ε ladder, strongest attacker first: the audit figure, the canary figures, the privacy
# cards and the dossiers all read it from here.
LADDER = (
    Rung("canary_gdp_white_box", "epsilon_gdp_estimate", "white_box", "llr",
         "white box: GDP estimate (assumes a Gaussian trade-off)"),
    Rung("canary_one_run_fdp_white_box", "epsilon_lb_one_run_fdp", "white_box", "llr",
         "white box: one-run bound vs the Gaussian curve (f-DP)"),
    Rung("canary_one_run_white_box", "epsilon_lb_one_run", "white_box", "llr",
         "white box: one-run bound (distribution-free, at δ′ ≪ δ)"),
    Rung("canary_many_runs", "epsilon_lb_many_runs", "many_runs", "log_density_ratio",
         "many releases: bound (linear mechanisms, distribution-free)"),
    Rung("canary_one_run_black_box", "epsilon_lb_one_run", "black_box", "neg_loss",
         "black box: one-run bound (last model, input canaries)"),
)

# Rows whose bound holds for every (ε, δ)-DP mechanism; only these can flag a run.
DISTRIBUTION_FREE = ("epsilon_lb_one_run", "epsilon_lb_many_runs")

ROW_DTYPES: dict[str, str] = {
    "metric": "string",
    "value": "float64",
    "value_bool": "boolean",
    "threat_model": "string",
    "score_kind": "string",
    "ceiling": "float64",
    "ceiling_max": "float64",
    "mu": "float64",
    "mu_ceiling": "float64",
    "canaries": "Int64",
    "included": "Int64",
    "guesses": "Int64",
    "guesses_top": "Int64",
    "guesses_bottom": "Int64",
    "correct": "Int64",
    "candidates": "Int64",
    "thresholds": "Int64",
    "confidence": "float64",
    "claimed_epsilon": "float64",
    "delta": "float64",
    "verdict": "string",
    "applicable": "boolean",
    "note": "string",
}


def _frame(rows: Sequence[Mapping]) -> pd.DataFrame:
    columns = {}
    for column, dtype in ROW_DTYPES.items():
        values = [row.get(column) for row in rows]
        if dtype == "float64":
            columns[column] = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
        else:
            columns[column] = pd.array(values, dtype=dtype)
    return pd.DataFrame(columns)


def verdict(bounds: Sequence[tuple[float, float, float]]) -> str:
    """``above_promise`` / ``too_weak`` / ``consistent`` from (bound, ceiling_max, claimed ε)
    triples of distribution-free bounds, each against the accountant's ε at the δ the bound
    was computed at (see the module docstring)."""
    if not bounds:
        return "too_weak"
    if any(bound > claim for bound, _, claim in bounds):
        return "above_promise"
    if all(ceiling < claim for _, ceiling, claim in bounds):
        return "too_weak"
    return "consistent"


def canary_rows(scores: pd.DataFrame, *, accountant_epsilon: float, delta: float, alpha: float,
                guess_counts: Sequence[int] | None = None, gdp_thresholds_per_tail: int | None = 40,
                seed: int = 0, claimed_epsilon: Callable[[float], float] | None = None) -> pd.DataFrame:
    """All canary rows of one run from its per-canary scores (``dpaudit.training.canary``
    or the linear releases, ``dpaudit.training.canary_linear``; columns threat_model,
    score_kind, included, score).

    Scores of threat model ``many_runs`` (releases of a pure ε-DP linear mechanism on D and
    D′) give ``epsilon_lb_many_runs`` at δ = 0 with two one-sided bounds at α/2 each (so
    the confidence is 1 − α like the other rows; ``seed`` draws the split).

    The distribution-free one-run bound is computed at ``one_run_delta`` and compared with
    ``claimed_epsilon(δ′)``, the accountant's ε at that δ′ (needed whenever δ′ < δ; at δ′ = δ,
    e.g. pure ε-DP, the claim is ``accountant_epsilon``); its rows carry δ′ in ``delta`` and
    the claim in ``claimed_epsilon``.
    """
    accountant_epsilon = float(accountant_epsilon)
    if math.isnan(accountant_epsilon) or accountant_epsilon <= 0:
        raise ValueError(f"accountant_epsilon must be > 0, got {accountant_epsilon}")
    alpha = cb.check_significance(alpha)
    rows: list[dict] = []
    distribution_free: list[tuple[float, float]] = []
    base = {"confidence": 1.0 - alpha, "delta": float(delta), "applicable": True}
    one_run_groups = scores[scores["threat_model"] != "many_runs"] if len(scores) else scores
    for (threat, kind), group in (one_run_groups.groupby(["threat_model", "score_kind"], sort=True)
                                  if len(one_run_groups) else []):
        values = group["score"].to_numpy(np.float64)
        included = group["included"].to_numpy(bool)
        keys = {**base, "threat_model": threat, "score_kind": kind, "canaries": int(values.size),
                "included": int(included.sum())}
        for method, metric in (("steinke", "epsilon_lb_one_run"), ("fdp", "epsilon_lb_one_run_fdp")):
            if method == "fdp" and delta <= 0:
                continue
            at = cb.one_run_delta(delta, alpha, values.size) if method == "steinke" else float(delta)
            if at == delta:
                claim = accountant_epsilon
            elif claimed_epsilon is None:
                raise ValueError(f"the one-run bound of {threat}/{kind} is computed at δ′ = {at:.3g} < δ = {delta:.3g} "
                                 "and needs claimed_epsilon (the accountant's ε at δ′) to be judged")
            else:
                claim = float(claimed_epsilon(at))
            b = cb.one_run_audit(values, included, alpha=alpha, delta=at, method=method,
                                 guess_counts=guess_counts)
            rows.append({**keys, "metric": metric, "value": b.epsilon, "ceiling": b.ceiling, "delta": at,
                         "claimed_epsilon": claim,
                         "ceiling_max": b.ceiling_max, "guesses": b.guesses, "guesses_top": b.guesses_top,
                         "guesses_bottom": b.guesses_bottom, "correct": b.correct, "candidates": b.candidates})
            if metric in DISTRIBUTION_FREE:
                distribution_free.append((b.epsilon, b.ceiling_max, claim))
        if included.all() or not included.any() or delta <= 0:
            continue
        g = cb.gdp_estimate(values, included, alpha=alpha, delta=delta, per_tail=gdp_thresholds_per_tail)
        rows.append({**keys, "metric": "epsilon_gdp_estimate", "value": g.epsilon, "ceiling": g.ceiling,
                     "mu": g.mu, "mu_ceiling": g.mu_ceiling, "thresholds": g.thresholds,
                     "note": "estimate under a Gaussian trade-off curve, not a distribution-free bound"})
    releases = scores[scores["threat_model"] == "many_runs"] if len(scores) else scores
    if len(releases):
        bound = bound_from_scores(releases, delta=0.0, alpha=alpha / 2.0, seed=seed)
        rows.append({**base, "metric": "epsilon_lb_many_runs", "threat_model": "many_runs",
                     "score_kind": str(releases["score_kind"].iloc[0]), "value": bound["epsilon_lower_bound"],
                     "ceiling": bound["ceiling"], "ceiling_max": bound["ceiling"], "canaries": len(releases),
                     "included": int(releases["included"].sum()), "delta": 0.0,
                     "claimed_epsilon": accountant_epsilon})
        distribution_free.append((float(bound["epsilon_lower_bound"]), float(bound["ceiling"]), accountant_epsilon))
    outcome = verdict(distribution_free)
    rows.append({**base, "metric": "measured_above_promise", "value_bool": outcome == "above_promise",
                 "verdict": outcome,
                 "ceiling_max": max((c for _, c, _ in distribution_free), default=math.nan),
                 "note": "compares the distribution-free bounds (one-run, many-runs) with the accountant's epsilon"})
    return _frame(rows)


def not_applicable_rows(reason: str) -> pd.DataFrame:
    """The row of a run the canary family does not audit (a non-private baseline)."""
    return _frame([{"metric": "measured_above_promise", "applicable": False, "note": reason}])


def run_canary_metrics(train: Mapping, scores: pd.DataFrame | None, record: Mapping | None,
                       options: Mapping, *, delta: float) -> pd.DataFrame:
    """The canary rows of one run from its train.json, scores.parquet and audit.json
    (the latter two None for a run the family does not audit)."""
    if scores is None:
        return not_applicable_rows(f"not applicable: no canary audit for mechanism {train.get('mechanism')}")
    guess_counts = options["guess_counts"]
    return canary_rows(scores, accountant_epsilon=float(train["epsilon"]), delta=delta,
                       alpha=1.0 - float(options["confidence"]),
                       guess_counts=None if guess_counts == "auto" else list(guess_counts),
                       gdp_thresholds_per_tail=int(options["gdp_thresholds_per_tail"]), seed=int(options["seed"]),
                       claimed_epsilon=recorded_claims(record))


def recorded_claims(record: Mapping | None) -> Callable[[float], float] | None:
    """The accountant's ε at the δ′ the twin job evaluated (audit.json ``claimed_epsilon``:
    [[δ′, ε(δ′)], ...]); a δ′ not recorded there is an error, never a guess."""
    claims = {float(d): float(e) for d, e in (record or {}).get("claimed_epsilon", [])}
    if not claims:
        return None

    def claim(at: float) -> float:
        for recorded, value in claims.items():
            if math.isclose(recorded, at, rel_tol=1e-12, abs_tol=0.0):
                return value
        raise ValueError(f"audit.json records the accountant's ε at δ in {sorted(claims)}, not at {at!r}: "
                         "rerun canary_scores (its confidence or canary counts changed)")

    return claim
