"""The accountant's inputs reproduced from what the training loop did (issue 32).

A DP-SGD run publishes ε from an accountant given (σ, q, T, δ). The loop records what
its sampler and its steps actually did (``dpaudit.training.train``): the population the
sampler drew from, the rate it drew at, the rows drawn at every step and the updates it
executed, empty-batch noise steps included. ``reproduce_accounting`` then checks:

* ``rate``: the accountant's q equals the sampler's rate, and the rows actually drawn
  agree with it (under shuffling a lower rate than accounted, each row still at most once an
  epoch, is a note: an audit twin's input canaries join the shuffled rows). Under Poisson sampling Σ_t |b_t| ~ Binomial(T·N, q): an exact two-sided
  binomial test at level ``ALPHA``. Under shuffling the realized rate Σ|b_t| / (T·N) must
  equal B/N. Whether the rows follow the sampler's law (the batch sizes' law, each row's
  participation, independence across steps) is the sampler check's
  (``dpaudit.dp.sampler_check``, issue 45);
* ``steps``: the accountant's T equals the updates executed;
* ``noise``: the noise multiplier given to the accountant equals the one the step drew
  with, and the noise certificate (``dpaudit.dp.noise_certificate``) measured it;
* ``epsilon``: ε recomputed at the run's δ from the realized values (σ, the sampler's
  rate, the executed steps), by the run's own kind of accountant but by code that shares none
  with the calibration (``dpaudit.dp.accounting``, dp_accounting's accountants): an RDP run's ε by
  ``dpaudit.dp.rdp_series`` (the subsampled Gaussian's RDP series in numpy, every one of
  dp_accounting's default orders, events built here; ~4 ms where dp_accounting's Python series
  took ~45 ms, a fixed cost of every checked run); a PLD run's by dp_accounting's privacy loss
  distribution built directly from the Gaussian mechanism (pessimistic), composed T times; under
  shuffling, the replace-one Gaussian of sensitivity 2 composed once per executed epoch. The PLD's
  value discretization is ``pld_interval``: the pessimistic rounding raises ε by about k·T·h²
  (h the interval; k ≤ 1.15 measured over σ ∈ [0.3, 4], q ∈ [0.002, 0.3], T ∈ [20, 25,800]), so
  h = √(``PLD_RELATIVE_BIAS``·ε/T), within ``PLD_INTERVAL_RANGE``, keeps that rise near 0.1 % of
  ε, far inside the tolerance (a fixed 1e-3 rose 2 % at T = 25,800 and failed a correct run). It
  must not exceed the published ε by more than ``EPSILON_RTOL`` (an RDP run's recomputation
  equals dp_accounting's to 1e-11). The same kind is needed: RDP's slack over PLD
  (10–20 %) would hide an RDP accountant counting half the steps from a PLD recomputation
  (σ 0.78 → 0.72 at ε = 4, 90 steps: PLD 3.98 ≤ the published RDP 4.00), while a PLD recomputation
  that exceeds an RDP claim implies the RDP recomputation does too (PLD is the tighter bound), so
  an RDP run is not also recomputed by PLD.

``reproduced`` is True when every check passes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from dpaudit.dp.hypothesis import two_sided_binomial_p

__all__ = ["ALPHA", "EPSILON_RTOL", "PLD_INTERVAL_RANGE", "PLD_MIN_SIGMA", "PLD_RELATIVE_BIAS", "RECOMPUTED_WITH",
           "clear_cache", "pld_interval", "recomputed_epsilon", "reproduce_accounting",
           "summary_sentence"]

ALPHA = 5e-4
# Below this σ the privacy loss of one step spans more values than a PLD grid at PLD_INTERVAL
# can hold (σ = 1e-6 asks for 5e14 points); the RDP recomputation still runs.
PLD_MIN_SIGMA = 0.2
EPSILON_RTOL = 0.01
PLD_INTERVAL_RANGE = (1e-4, 1e-2)
PLD_RELATIVE_BIAS = 1e-3
_EXACT_RTOL = 1e-9
RECOMPUTED_WITH = {
    "rdp": "dpaudit.dp.rdp_series: RDP of the Poisson-subsampled Gaussian over dp_accounting's default orders",
    "pld": "dp_accounting PLD of the Gaussian mechanism, pessimistic, value discretization pld_interval(ε, T)",
}


def pld_interval(epsilon: float, steps: int) -> float:
    """The PLD recomputation's value discretization: its pessimistic rise (≈ T·h²) near
    ``PLD_RELATIVE_BIAS`` of ε (module docstring)."""
    low, high = PLD_INTERVAL_RANGE
    wanted = math.sqrt(PLD_RELATIVE_BIAS * max(float(epsilon), 1e-3) / max(1, int(steps)))
    return min(high, max(low, wanted))


def recomputed_epsilon(noise_multiplier: float, rate: float, steps: int, delta: float, sampling: str,
                       steps_per_epoch: int | None = None, accountant: str = "pld",
                       pld_value_interval: float = 1e-3) -> float:
    """ε at δ of the mechanism the loop ran: from dp_accounting's PLD of the Gaussian mechanism
    (``accountant="pld"``), or ``dpaudit.dp.rdp_series`` over dp_accounting's default orders
    (``"rdp"``, every order evaluated: the fractional-order series is not monotone in the order,
    e.g. at σ = 8, q = 0.3, so no order can be skipped by a bound from its neighbours and still
    give its value), the events built here. Remembered within the process by its inputs (the
    seeds of one batch job share σ, q, T and δ; the value is a pure function of them).
    ``pld_value_interval``: the PLD's value discretization (``pld_interval`` in a check)."""
    return _recomputed_epsilon(float(noise_multiplier), float(rate), int(steps), float(delta), str(sampling),
                               None if steps_per_epoch is None else int(steps_per_epoch), str(accountant),
                               float(pld_value_interval) if accountant == "pld" else None)


def clear_cache() -> None:
    """Forget the remembered recomputations (benchmarks of a job's first run)."""
    _recomputed_epsilon.cache_clear()


@functools.lru_cache(maxsize=256)
def _recomputed_epsilon(noise_multiplier: float, rate: float, steps: int, delta: float, sampling: str,
                        steps_per_epoch: int | None, accountant: str, interval: float | None) -> float:
    if noise_multiplier <= 0:
        return math.inf
    epochs = math.ceil(int(steps) / max(1, int(steps_per_epoch or 1)))
    if accountant == "rdp":
        from dpaudit.dp import rdp_series
        from dpaudit.dp.accounting import DEFAULT_RDP_ORDERS

        orders = DEFAULT_RDP_ORDERS
        if sampling == "poisson":
            rdp = int(steps) * rdp_series.poisson_gaussian_rdp(noise_multiplier, rate, orders)
        else:  # the replace-one Gaussian: sensitivity 2, i.e. noise multiplier σ/2, once per epoch
            rdp = epochs * rdp_series.poisson_gaussian_rdp(noise_multiplier / 2.0, 1.0, orders)
        return rdp_series.epsilon(orders, rdp, delta)
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    if sampling == "poisson":
        pld = pld_lib.from_gaussian_mechanism(standard_deviation=float(noise_multiplier), sensitivity=1.0,
                                              pessimistic_estimate=True, value_discretization_interval=interval,
                                              sampling_prob=float(rate))
        count = int(steps)
    else:
        pld = pld_lib.from_gaussian_mechanism(standard_deviation=float(noise_multiplier), sensitivity=2.0,
                                              pessimistic_estimate=True, value_discretization_interval=interval)
        count = epochs
    return float(pld.self_compose(count).get_epsilon_for_delta(float(delta)))


def _same(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=_EXACT_RTOL, abs_tol=0.0)


def reproduce_accounting(*, published_epsilon: float, delta: float, accountant_inputs: Mapping[str, Any],
                         loop: Mapping[str, Any], noise_multiplier_drawn: float,
                         noise_check: Mapping[str, Any] | None, accountant: str = "pld") -> dict[str, Any]:
    """The record train.json keeps under ``accounting_check``.

    ``accountant_inputs``: (noise_multiplier, sampling_probability, steps, delta) as the
    accountant's event received them (``dpaudit.dp.accounting.dpsgd_epsilon``).
    ``loop``: sampling, population, rate (the sampler's), rows_drawn, steps_executed,
    steps_per_epoch, batch_size. ``noise_multiplier_drawn``: σ the steps drew with.
    """
    sampling = str(loop["sampling"])
    population, executed = int(loop["population"]), int(loop["steps_executed"])
    rate, rows = float(loop["rate"]), int(loop["rows_drawn"])
    draws = executed * population
    realized = rows / draws if draws else math.nan
    problems: list[str] = []
    notes: list[str] = []
    q_acc, t_acc = float(accountant_inputs["sampling_probability"]), int(accountant_inputs["steps"])
    sigma_acc = float(accountant_inputs["noise_multiplier"])
    if not _same(q_acc, rate):
        if sampling == "shuffle" and rate < q_acc:
            # each row at most once an epoch, at a lower rate than accounted: an audit twin's input
            # canaries join the shuffled rows (B of N + m a step); shuffle's ε rests on the epochs alone
            notes.append(f"the accountant was given q = {q_acc:.6g}; the shuffled sampler drew each of its "
                         f"{population:,} rows at {rate:.6g}, at most once an epoch: fewer draws than accounted")
        else:
            problems.append(f"the accountant was given q = {q_acc:.6g}, the sampler drew at {rate:.6g}")
    if sampling == "poisson":
        rate_p = two_sided_binomial_p(rows, draws, q_acc)
        if rate_p <= ALPHA:
            problems.append(f"{rows:,} rows drawn in {executed:,} steps from {population:,}: realized rate "
                            f"{realized:.6g} against the accountant's q = {q_acc:.6g} (binomial p = {rate_p:.2g})")
    else:
        rate_p = None
        if not _same(realized, float(loop["batch_size"]) / population):
            problems.append(f"realized rate {realized:.6g} differs from B/N = {loop['batch_size']}/{population}")
    if t_acc != executed:
        problems.append(f"the accountant was given T = {t_acc:,} steps, the loop executed {executed:,}")
    if not _same(sigma_acc, noise_multiplier_drawn):
        problems.append(f"the accountant was given σ = {sigma_acc:.6g}, the steps drew σ = {noise_multiplier_drawn:.6g}")
    if not _same(float(accountant_inputs["delta"]), delta):
        problems.append(f"the accountant was given δ = {accountant_inputs['delta']:.3g}, the run's δ is {delta:.3g}")
    if noise_check is not None and noise_check.get("certified") and noise_check.get(
            "privacy_failure", not noise_check.get("passed")):
        problems.append("the noise certificate failed: the noise drawn is not N(0, σ²C²)")
    limit = float(published_epsilon) * (1.0 + EPSILON_RTOL)
    recomputed = None
    if accountant == "pld" and noise_multiplier_drawn < PLD_MIN_SIGMA:
        problems.append(f"σ = {noise_multiplier_drawn:.3g} < {PLD_MIN_SIGMA}: the PLD recomputation is out of reach "
                        "(its grid would not fit in memory), so this PLD claim cannot be reproduced")
    else:
        recomputed = recomputed_epsilon(noise_multiplier_drawn, rate, executed, delta, sampling,
                                        loop.get("steps_per_epoch"), accountant=accountant,
                                        pld_value_interval=pld_interval(published_epsilon, executed))
        if not recomputed <= limit:
            problems.append(f"ε recomputed by {accountant.upper()} from the loop's σ, rate and steps is "
                            f"{recomputed:.4g} > the published {published_epsilon:.4g} (+{EPSILON_RTOL:.0%})")
    return {
        "reproduced": not problems,
        "problems": problems,
        "notes": notes,
        "published_epsilon": float(published_epsilon),
        "recomputed_epsilon": recomputed,
        "recomputed_with": RECOMPUTED_WITH.get(accountant, accountant),
        "pld_value_interval": pld_interval(published_epsilon, executed) if accountant == "pld" else None,
        "accountant": accountant,
        "epsilon_rtol": EPSILON_RTOL,
        "delta": float(delta),
        "accountant_inputs": {k: accountant_inputs[k] for k in ("noise_multiplier", "sampling_probability", "steps",
                                                                "delta")},
        "sampler_rate": rate,
        "realized_rate": realized,
        "rate_p_value": rate_p,
        "rate_alpha": ALPHA,
        "population": population,
        "rows_drawn": rows,
        "steps_executed": executed,
        "noise_multiplier_drawn": float(noise_multiplier_drawn),
        "sampling": sampling,
    }


def summary_sentence(check: Mapping[str, Any] | None) -> str:
    """The accounting check in words."""
    if not check:
        return "the accountant's inputs were not reproduced (a run trained before the check existed)"
    if check["reproduced"]:
        again = check["recomputed_epsilon"]
        said = f"{again:.3g}" if again is not None else "not computable"
        return (f"the accountant's inputs match the loop ({check['steps_executed']:,} steps at a realized rate "
                f"{check['realized_rate']:.4g}); ε recomputed by {check['accountant'].upper()} code independent of "
                f"the calibration is "
                f"{said} ≤ the published {check['published_epsilon']:.3g} (+{check['epsilon_rtol']:.0%})")
    return "the accountant's inputs do not match what the loop did: " + "; ".join(check["problems"])
