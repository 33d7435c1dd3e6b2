"""Metric rows of the canary family: every estimator on every score, and the verdict.

Per (threat model, score kind) of a run's ``scores.parquet``:

* ``epsilon_lb_one_run``: Steinke et al. 2023's one-run lower bound (distribution
  free; its δ term 2mδ makes it weak when m·δ is not ≪ the significance);
* ``epsilon_lb_one_run_fdp``: Mahloujifar et al. 2025's bound against the Gaussian
  trade-off curve of an exactly (ε, δ)-DP Gaussian mechanism (assumes that shape);
* ``epsilon_gdp_estimate``: Nasr et al. 2023's GDP estimate (an estimate under a
  Gaussian trade-off, not a bound);
* ``epsilon_lb_many_runs``: linear mechanisms only, Clopper–Pearson over R releases;
* ``claim_curve_rejected`` and ``epsilon_lb_many_trials``: the claim-curve test of
  ``dpaudit.dp.canary_bounds`` on independent trials (the white-box gradient canaries'
  LLR scores against the accountant's claimed trade-off curve, ``dpaudit.dp.tradeoff``;
  the linear releases against the pure-ε curve), and the (ε, δ) bound at the run's δ;
* ``detectable_noise_factor``: what this test could have caught (``dpaudit.dp.canary_power``).

Each bound carries its ceiling (what perfect guessing certifies with the same counts) in
``ceiling``. The run's ``measured_above_promise`` flag (its ``verdict`` column, and
``decided_by``) is ``above_promise`` when the claim-curve test rejects or a
distribution-free bound (one-run Steinke, many-runs, many-trials) exceeds the claim it is
judged against (the mechanism leaks more than it claims, with the audit's confidence);
``too_weak`` when the audit could not have caught an implementation drawing half the
claimed noise (detectable factor < 0.5) or, without a claim-curve test, when every
ceiling is below the claim; ``consistent`` otherwise. The GDP estimate never decides.
Metric names and meanings: ``dpaudit.contract.metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dpaudit.contract.metrics import typed_frame
from dpaudit.metrics.canary.mechanism import (
    MECHANISM_ROW_DTYPES,
    failure_sentence,
    frame_rows,
    mechanism_failure,
    mechanism_rows,
)

if TYPE_CHECKING:
    from dpaudit.dp.tradeoff import ClaimedCurve

# The statistics (dpaudit.dp.canary_bounds, canary_power, tradeoff, many_runs, and scipy.optimize
# with them, ~0.3 s) are imported by the functions that compute rows: a run the family does not
# audit (a baseline's job) and the pages that read LADDER or verdict_sentence do not pay for them.

__all__ = ["DISTRIBUTION_FREE", "LADDER", "verdict_sentence", "claimed_curve", "Rung", "ROW_DTYPES", "canary_rows", "not_applicable_rows", "recorded_claims", "run_canary_metrics",
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
    Rung("canary_many_trials_white_box", "epsilon_lb_many_trials", "white_box", "llr",
         "white box: many-trials bound (independent canaries, distribution-free, at δ)"),
    Rung("canary_one_run_white_box", "epsilon_lb_one_run", "white_box", "llr",
         "white box: one-run bound (distribution-free, at δ′ ≪ δ)"),
    Rung("canary_many_runs", "epsilon_lb_many_runs", "many_runs", "log_density_ratio",
         "many releases: bound (linear mechanisms, distribution-free)"),
    Rung("canary_many_trials_releases", "epsilon_lb_many_trials", "many_runs", "log_density_ratio",
         "many releases: many-trials bound (linear mechanisms, distribution-free, at δ = 0)"),
    Rung("canary_one_run_black_box", "epsilon_lb_one_run", "black_box", "neg_loss",
         "black box: one-run bound (last model, input canaries)"),
)

# The rung of the independent white-box trials (the claim-curve test's).
TRIALS_RUNG = next(rung for rung in LADDER if rung.metric == "epsilon_lb_many_trials")

# Rows whose bound holds for every (ε, δ)-DP mechanism; these and the claim-curve test can flag a run.
DISTRIBUTION_FREE = ("epsilon_lb_one_run", "epsilon_lb_many_runs", "epsilon_lb_many_trials")
# The threat model and score of the independent white-box trials the claim-curve test reads.
TRIALS = (TRIALS_RUNG.threat_model, TRIALS_RUNG.score_kind)
# A run whose audit cannot catch an implementation drawing this fraction of the claimed
# noise (or less) with probability 0.8 is "too weak to say", whatever it measured.
WEAK_FACTOR = 0.5

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
    "fpr_upper": "float64",
    "fnr_upper": "float64",
    "claimed_fnr": "float64",
    "mirrored": "boolean",
    "p_value": "float64",
    "claim_curve": "string",
    "power": "float64",
    "repetitions": "Int64",
    "simulation_seed": "Int64",
    "decided_by": "string",
    "confidence": "float64",
    "claimed_epsilon": "float64",
    "delta": "float64",
    "verdict": "string",
    "applicable": "boolean",
    "note": "string",
    **MECHANISM_ROW_DTYPES,
}


def verdict(bounds: Sequence[tuple[float, float, float]], *, curve_rejected: bool | None = None,
            detectable_factor: float | None = None, mechanism_failed: str | None = None) -> tuple[str, str | None]:
    """(verdict, decided_by) from (bound, ceiling_max, claimed ε) triples of distribution-free
    bounds (each against the accountant's ε at the δ the bound was computed at), the
    claim-curve test's outcome (None: no test), its detectable noise factor (module
    docstring) and the mechanism's own checks (``mechanism_failed``: ``noise_check``,
    ``sampler_check`` or ``accounting_check`` when one failed, ``dpaudit.metrics.canary.mechanism``), which
    decide first: a mechanism that does not add the noise or account the steps its claim
    assumes voids the claim whatever the canaries saw."""
    if mechanism_failed:
        return "above_promise", mechanism_failed
    if curve_rejected:
        return "above_promise", "claim_curve_test"
    if any(bound > claim for bound, _, claim in bounds):
        return "above_promise", "distribution_free_bound"
    if detectable_factor is not None and not math.isnan(detectable_factor):
        return ("too_weak", "detectable_noise_factor") if detectable_factor < WEAK_FACTOR else (
            "consistent", "claim_curve_test")
    if not bounds or all(ceiling < claim for _, ceiling, claim in bounds):
        return "too_weak", "ceilings"
    return "consistent", "distribution_free_bound"


def _curve_rows(keys: Mapping, values: np.ndarray, included: np.ndarray, curve: ClaimedCurve, *, alpha: float,
                delta: float, per_tail: int | None, claim: float, detectable: Mapping | None) -> tuple[list[dict], bool]:
    from dpaudit.dp.canary_bounds import claim_curve_test

    test = claim_curve_test(values, included, curve, alpha=alpha, delta=delta, per_tail=per_tail)
    rows = [
        {**keys, "metric": "claim_curve_rejected", "value_bool": test.rejected, "fpr_upper": test.worst_fpr_upper,
         "fnr_upper": test.worst_fnr_upper, "claimed_fnr": test.worst_claimed_fnr, "mirrored": test.worst_mirrored,
         "thresholds": test.thresholds, "p_value": test.p_value, "claim_curve": curve.describe(), "delta": delta},
        {**keys, "metric": "epsilon_lb_many_trials", "value": test.epsilon, "ceiling": test.ceiling,
         "ceiling_max": test.ceiling, "thresholds": test.thresholds, "delta": delta, "claimed_epsilon": claim},
    ]
    if detectable is not None:
        rows.append({**keys, "metric": "detectable_noise_factor", "value": detectable["factor"],
                     "power": detectable["power"], "repetitions": detectable["repetitions"],
                     "simulation_seed": detectable["seed"], "thresholds": test.thresholds, "delta": delta,
                     "note": detectable.get("note")})
    return rows, test.rejected


def canary_rows(scores: pd.DataFrame, *, accountant_epsilon: float, delta: float, alpha: float,
                guess_counts: Sequence[int] | None = None, gdp_thresholds_per_tail: int | None = 40,
                seed: int = 0, claimed_epsilon: Callable[[float], float] | None = None,
                one_run_claims: Mapping[str, Mapping] | None = None, claim_curve: ClaimedCurve | None = None, detectable: Mapping | None = None,
                mechanism: list[dict] | None = None) -> pd.DataFrame:
    """All canary rows of one run from its per-canary scores (``dpaudit.audit.twin``
    or the linear releases, ``dpaudit.audit.linear_audit``; columns threat_model,
    score_kind, included, score).

    Scores of threat model ``many_runs`` (releases of a pure ε-DP linear mechanism on D and
    D′) give ``epsilon_lb_many_runs`` at δ = 0 with two one-sided bounds at α/2 each (so
    the confidence is 1 − α like the other rows; ``seed`` draws the split).

    The distribution-free one-run bound is computed at the δ′ and judged against the
    accountant's ε there that the twin recorded (``one_run_claims``, audit.json; read, never
    recomputed). Without a record (library use) δ′ is ``one_run_delta`` and the claim
    ``claimed_epsilon(δ′)``, the accountant's ε at that δ′ (needed whenever δ′ < δ; at δ′ = δ,
    e.g. pure ε-DP, the claim is ``accountant_epsilon``); its rows carry δ′ in ``delta`` and
    the claim in ``claimed_epsilon``.

    ``claim_curve``: the accountant's claimed trade-off curve of the white-box canaries
    (independent trials): their LLR scores get the claim-curve test and the many-trials
    bound at ``delta``. The many-runs releases get the same test against the pure-ε curve.
    ``detectable``: the detectable noise factor of that test (``dpaudit.dp.canary_power``;
    keys factor, power, repetitions, seed, optional note). ``mechanism``: the rows of the
    mechanism's own checks (``dpaudit.metrics.canary.mechanism.mechanism_rows``), joined to
    the output; a failed one decides the verdict.
    """
    from dpaudit.dp import canary_bounds as cb
    from dpaudit.dp.tradeoff import pure_tradeoff
    from dpaudit.metrics.canary.many_runs import bound_from_scores

    accountant_epsilon = float(accountant_epsilon)
    if math.isnan(accountant_epsilon) or accountant_epsilon <= 0:
        raise ValueError(f"accountant_epsilon must be > 0, got {accountant_epsilon}")
    alpha = cb.check_significance(alpha)
    rows: list[dict] = []
    distribution_free: list[tuple[float, float, float]] = []
    curve_rejected: bool | None = None
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
            recorded = (one_run_claims or {}).get(threat) if method == "steinke" else None
            if recorded is not None and int(recorded["canaries"]) != values.size:
                raise ValueError(f"audit.json records the one-run claim of {recorded['canaries']} {threat} canaries, "
                                 f"the scores hold {values.size}: rerun canary_scores")
            if recorded is not None:
                at = float(recorded["delta"])
            else:
                at = cb.one_run_delta(delta, alpha, values.size) if method == "steinke" else float(delta)
            if recorded is not None:
                claim = float(recorded["epsilon"])
            elif at == delta:
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
        if included.all() or not included.any():
            continue
        if claim_curve is not None and (threat, kind) == TRIALS:
            curve_rows, rejected = _curve_rows(keys, values, included, claim_curve, alpha=alpha, delta=float(delta),
                                               per_tail=gdp_thresholds_per_tail, claim=accountant_epsilon,
                                               detectable=detectable)
            rows.extend(curve_rows)
            curve_rejected = bool(curve_rejected) or rejected
            distribution_free.append((curve_rows[1]["value"], curve_rows[1]["ceiling"], accountant_epsilon))
        if delta <= 0:
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
        keys = {**base, "threat_model": "many_runs", "score_kind": str(releases["score_kind"].iloc[0]),
                "canaries": len(releases), "included": int(releases["included"].sum())}
        curve_rows, rejected = _curve_rows(keys, releases["score"].to_numpy(np.float64),
                                           releases["included"].to_numpy(bool), pure_tradeoff(accountant_epsilon),
                                           alpha=alpha, delta=0.0, per_tail=gdp_thresholds_per_tail,
                                           claim=accountant_epsilon, detectable=detectable)
        rows.extend(curve_rows)
        curve_rejected = bool(curve_rejected) or rejected
        distribution_free.append((curve_rows[1]["value"], curve_rows[1]["ceiling"], accountant_epsilon))
    factor = None if detectable is None else float(detectable["factor"])
    mechanism = list(mechanism or [])
    failed, failed_model = mechanism_failure(mechanism)
    rows.extend({**base, **row} for row in frame_rows(mechanism))
    outcome, decided_by = verdict(distribution_free, curve_rejected=curve_rejected, detectable_factor=factor,
                                  mechanism_failed=failed)
    note = ("the mechanism's own checks (noise certificate, sampler check, accounting check), then the claim-curve "
            "test on "
            "independent trials and the distribution-free bounds (one-run, many-runs, many-trials) against the "
            "accountant's claim; the GDP estimate never decides")
    rows.append({**base, "metric": "measured_above_promise", "value_bool": outcome == "above_promise",
                 "verdict": outcome, "decided_by": decided_by, "checked_model": failed_model,
                 "ceiling_max": max((c for _, c, _ in distribution_free), default=math.nan),
                 "note": note if failed is None else failure_sentence(mechanism)})
    return typed_frame(rows, ROW_DTYPES)


def not_applicable_rows(reason: str) -> pd.DataFrame:
    """The row of a run the canary family does not audit (a non-private baseline)."""
    return typed_frame([{"metric": "measured_above_promise", "applicable": False, "note": reason}], ROW_DTYPES)


def claimed_curve(record: Mapping) -> ClaimedCurve:
    """The accountant's claimed trade-off curve of an audit twin's mechanism, as its audit.json
    records it (``claimed_curve``, written by the twin: ``dpaudit.dp.tradeoff.twin_tradeoff``);
    a record without it (written before the twin kept it) is computed the same way."""
    from dpaudit.dp.tradeoff import ClaimedCurve, twin_tradeoff

    if record.get("claimed_curve") is not None:
        return ClaimedCurve.from_record(record["claimed_curve"])
    return twin_tradeoff(record)


def run_canary_metrics(train: Mapping, scores: pd.DataFrame | None, record: Mapping | None,
                       options: Mapping, *, delta: float) -> pd.DataFrame:
    """The canary rows of one run from its train.json, scores.parquet and audit.json
    (the latter two None for a run the family does not audit)."""
    if scores is None:
        return not_applicable_rows(f"not applicable: no canary audit for mechanism {train.get('mechanism')}")
    guess_counts = options["guess_counts"]
    alpha = 1.0 - float(options["confidence"])
    per_tail = int(options["gdp_thresholds_per_tail"])
    curve = detectable = None
    trials = TRIALS_RUNG.rows(scores) if len(scores) else scores
    if train.get("mechanism") == "dpsgd" and len(trials) and record is not None:
        from dpaudit.dp.canary_power import detectable_noise_factor

        curve = claimed_curve(record)
        detectable = detectable_noise_factor(
            canaries=len(trials), q=float(record["sampling_probability"]),
            steps=int(record.get("accounted_steps", record["steps"])), sigma=float(record["noise_multiplier"]),
            curve=curve, alpha=alpha, delta=float(delta), per_tail=per_tail, seed=int(options["seed"]))
    elif record is not None and record.get("detectable_noise_factor") is not None:
        # the linear releases' factor, simulated by the job that drew them (dpaudit.audit.linear_audit)
        details = record.get("detectable_noise_factor_details") or {}
        seed = details.get("seed", options["seed"])
        detectable = {"factor": float(record["detectable_noise_factor"]), "power": details.get("power"),
                      "repetitions": details.get("repetitions"),
                      "seed": int(seed[0] if isinstance(seed, list | tuple) else seed),
                      "note": f"noise scale f × the claimed one; {details.get('route', 'simulated')} releases"}
    mechanism = mechanism_rows(train, record) if train.get("mechanism") != "baseline" else None
    return canary_rows(scores, accountant_epsilon=float(train["epsilon"]), delta=delta, alpha=alpha,
                       guess_counts=None if guess_counts == "auto" else list(guess_counts),
                       gdp_thresholds_per_tail=per_tail, seed=int(options["seed"]),
                       one_run_claims=recorded_claims(record), claim_curve=curve, detectable=detectable,
                       mechanism=mechanism)


def recorded_claims(record: Mapping | None) -> Mapping[str, Mapping] | None:
    """audit.json's ``one_run_claims`` (per threat model: canaries, δ′ and the accountant's ε
    at δ′, ``dpaudit.audit.twin.one_run_claims``), or None without a record."""
    claims = (record or {}).get("one_run_claims")
    return claims or None


def _row(table: pd.DataFrame, metric: str) -> Mapping | None:
    hit = table[(table["metric"] == metric).fillna(False).to_numpy(bool)]
    return None if hit.empty else hit.iloc[0].to_dict()


def _number(row: Mapping | None, column: str) -> float:
    value = None if row is None else row.get(column)
    return math.nan if value is None or pd.isna(value) else float(value)


# The verdicts of a model trained elsewhere, decided by its black-box bound alone (issue 44):
# (decided_by, verdict) -> the sentence.
BLACK_BOX_SENTENCES = {
    ("black_box_bound", "above_promise"): "measured above the promise: the loss-threshold attack's certified bound "
                                          "exceeds the promised ε",
    ("black_box_bound", "consistent"): "consistent with the promise as far as a black-box bound sees: the "
                                       "loss-threshold attack's certified bound stays at or below the promised ε, "
                                       "which its ceiling could have exceeded; the training itself was not checked",
    ("black_box_ceiling", "too_weak"): "audit too weak to say: trained elsewhere, so only the loss-threshold attack "
                                       "could run, and even perfect separation of its members and held-out rows "
                                       "would certify less than the promised ε",
}


def verdict_sentence(table: pd.DataFrame) -> tuple[str | None, str]:
    """(verdict, sentence): the canary verdict of one run's rows said in words, with what
    the audit could have caught (the one phrasing the dossier, the privacy card and the
    audit figure use). ``table``: the run's canary rows (or its rows of metrics.parquet)."""
    flag = _row(table, "measured_above_promise")
    verdict_value = None if flag is None else flag.get("verdict")
    if verdict_value is None or pd.isna(verdict_value):
        note = None if flag is None else flag.get("note")
        return None, str(note) if note is not None and not pd.isna(note) else "no canary verdict"
    outcome = str(verdict_value)
    curve = _row(table, "claim_curve_rejected")
    factor = _number(_row(table, "detectable_noise_factor"), "value")
    power = _number(_row(table, "detectable_noise_factor"), "power")
    caught = ""
    if not math.isnan(factor):
        times = f"{power * 10:.0f} times in 10" if not math.isnan(power) else "most of the time"
        caught = (f"this audit rejects, {times}, an implementation whose noise is below {factor:.2f}× the claim"
                  if factor > 0 else f"this audit cannot reject, {times}, even a noiseless implementation")
    decided = flag.get("decided_by")
    if (decided, outcome) in BLACK_BOX_SENTENCES:  # trained elsewhere (issue 44, dpaudit.metrics.canary.outside)
        return outcome, BLACK_BOX_SENTENCES[(decided, outcome)]
    if outcome == "above_promise" and decided in ("noise_check", "sampler_check", "accounting_check"):
        what = {"noise_check": "noise certificate", "sampler_check": "sampler check"}.get(decided, "accounting check")
        detail = flag.get("note")
        detail = "" if detail is None or pd.isna(detail) else f": {detail}"
        return outcome, f"measured above the promise by the mechanism's {what}{detail}"
    if outcome == "above_promise":
        if decided == "claim_curve_test" and curve is not None:
            return outcome, (
                "measured above the promise: the canaries put the point (FPR ≤ "
                f"{_number(curve, 'fpr_upper'):.3g}, FNR ≤ {_number(curve, 'fnr_upper'):.3g}) below the accountant's "
                f"claimed trade-off curve (FNR ≥ {_number(curve, 'claimed_fnr'):.3g} there; adjusted p = "
                f"{_number(curve, 'p_value'):.2g}): the implementation leaks more than its accountant claims")
        return outcome, ("measured above the promise: a distribution-free canary bound exceeds the accountant's ε "
                         "at the δ it is computed at")
    if outcome == "too_weak":
        if decided == "detectable_noise_factor":
            return outcome, (f"audit too weak to say: {caught}, so even half the claimed noise could go unnoticed")
        return outcome, "audit too weak to say: every distribution-free bound's ceiling is below the accountant's ε"
    if caught and curve is not None:
        return outcome, (f"consistent with the promise: the canaries stay above the accountant's claimed trade-off "
                         f"curve at all {_number(curve, 'thresholds'):.0f} thresholds (adjusted p = "
                         f"{_number(curve, 'p_value'):.2g}); {caught}")
    if caught:
        return outcome, f"consistent with the promise; {caught}"
    return outcome, "consistent with the promise: no canary bound exceeds the accountant's ε"
