"""The weight certificate (issue 45): did the model's weights move only by the optimizer's rule
applied to the certified update?

The noise certificate (``dpaudit.dp.noise_certificate``) reads the update the step hands the
optimizer, u_t = (Σ_i clip_C(g_i) + z_t) / B. The accountant's guarantee is about the weights,
and they are a function of the u_t only if nothing else moves them: no second optimizer or
regulariser step computed from the data, no buffer of raw gradients mixed in, no non-trainable
state that follows the data. This module checks, update by update, that

    state_{t+1} = rule(state_t, u_t)

where state is every trainable variable (the model's and the audit twin's canary coordinates),
the optimizer's state that the rule reads (momentum accumulator; Adam's first and second moments
and step count) and every non-trainable variable of the model (which the rule leaves unchanged).
``state_t`` is read inside the step just before the optimizer call (``dpaudit.audit.weight_monitor``),
so ``state_{t+1}`` is what the next update found, whatever ran in between: the optimizer call
itself, code after it in the step, the training loop between steps. The last update is compared
with the state after training.

The rule is the one the run claims (its optimizer, learning rate and momentum; Adam's β₁, β₂, ε
are tf_keras' legacy defaults, which no dpaudit config changes), evaluated in float64 from the
float32 values, in the form of TensorFlow's kernels (``ResourceApplyGradientDescent``,
``ResourceApplyKerasMomentum``, ``ResourceApplyAdam``):

* SGD: θ' = θ − η·u;
* momentum μ: a' = μ·a − η·u, θ' = θ + a';
* Adam: m' = m + (u − m)(1 − β₁), v' = v + (u² − v)(1 − β₂),
  θ' = θ − α_t·m'/(√v' + ε), α_t = η·√(1 − β₂ᵗ)/(1 − β₁ᵗ), t the optimizer's step count + 1.

The kernel computes in float32, so each value may differ from the float64 rule by its rounding:
at most a few units of eps·S, S the sum of the absolute values of the terms that make it (for Adam
with the propagated rounding of m', v' and of α_t, whose β powers float32 rounds to 1 ulp). A value
passes when |actual − expected| ≤ ``TOLERANCE``·eps·S; the deviation is recorded in those units
("rounding units"). A correct step stays below ~4; one extra step of the clipped sum, or a second
optimizer's, is ~10⁵ and more. Any change of a non-trainable variable or of the step count other
than +1 fails likewise. A failure names the variable and the update after which it was seen.

The audit twin's white-box canaries read their observations from their coordinates' consecutive
states with the inverse of the same rule (``canary_observations``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ADAM_DEFAULTS", "TOLERANCE", "OptimizerRule", "RuleLedger", "canary_observations", "merge_into",
           "updates_from_states"]

# tf_keras' legacy Adam (the class dpaudit's steps and tensorflow-privacy's vectorized Adam build on)
ADAM_DEFAULTS = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}
# A value passes within this many rounding units (eps·S); clean steps measure ≤ ~4.
TOLERANCE = 64.0
# the largest number of failures kept in the record (the first per variable)
MAX_FAILURES = 20
# float64 values of a chunk of rows compared at once (512 KB an array: the comparison's temporaries
# stay in the CPU's cache; the default MLP's 150 rows at once took 3.8× as long, 1 << 15 and 1 << 17
# were slower)
CHUNK_VALUES = 1 << 16


def _f32(value: float) -> float:
    """The float32 value a TensorFlow hyperparameter holds, as a float64."""
    return float(np.float32(value))


@dataclass(frozen=True)
class OptimizerRule:
    """The update rule a run claims: ``optimizer`` ("sgd" or "adam"), η, μ (SGD only)."""

    optimizer: str
    learning_rate: float
    momentum: float = 0.0

    def __post_init__(self):
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"the weight certificate knows the rules of sgd and adam, not {self.optimizer!r}")

    @property
    def slots(self) -> tuple[str, ...]:
        """The optimizer's state per variable that the rule reads (tf_keras' slot names)."""
        if self.optimizer == "adam":
            return ("m", "v")
        return ("momentum",) if self.momentum else ()

    def as_dict(self) -> dict[str, Any]:
        out = {"optimizer": self.optimizer, "learning_rate": float(self.learning_rate)}
        if self.optimizer == "sgd":
            out["momentum"] = float(self.momentum)
        else:
            out.update(ADAM_DEFAULTS)
        return out

    def step(self, theta: np.ndarray, slots: Sequence[np.ndarray], update: np.ndarray, iteration: np.ndarray,
             eps: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """([θ', *slots'] expected, [their rounding scales S]) of one update, float64, vectorized
        over leading axes; ``iteration`` the optimizer's step count before the update (shape
        broadcastable to θ's leading axes plus one)."""
        lr = _f32(self.learning_rate)
        u = update
        if self.optimizer == "sgd" and not self.momentum:
            step = lr * u
            new = theta - step
            return [new], [np.abs(theta) + np.abs(step) + np.abs(new)]
        if self.optimizer == "sgd":
            mu = _f32(self.momentum)
            (a,) = slots
            # in place, the same values: mu·|a| = |mu·a| for mu, lr > 0
            kept, given = mu * a, lr * u
            a_new = kept - given
            s_a = np.abs(kept, out=kept)
            s_a += np.abs(given, out=given)
            s_a += np.abs(a_new, out=given)
            new = theta + a_new
            s_theta = np.abs(theta)
            s_theta += np.abs(new, out=given)
            s_theta += s_a
            return [new, a_new], [s_theta, s_a]
        b1, b2, epsilon = (_f32(ADAM_DEFAULTS[k]) for k in ("beta_1", "beta_2", "epsilon"))
        m, v = slots
        t = iteration + 1.0
        b1p, b2p = b1 ** t, b2 ** t
        alpha = lr * np.sqrt(1.0 - b2p) / (1.0 - b1p)
        # α_t's relative rounding in eps units: float32's β powers are 1 ulp off, which 1 − βᵗ magnifies
        kappa = b2p / (1.0 - b2p) + 2.0 * b1p / (1.0 - b1p) + 8.0
        m_new = m + (u - m) * (1.0 - b1)
        s_m = np.abs(m) + (np.abs(u) + np.abs(m)) * (1.0 - b1) + np.abs(m_new)
        u2 = u * u
        v_new = v + (u2 - v) * (1.0 - b2)
        s_v = np.abs(v) + (u2 + np.abs(v)) * (1.0 - b2) + np.abs(v_new)
        root = np.sqrt(v_new)
        den = root + epsilon
        step = alpha * m_new / den
        with np.errstate(divide="ignore", invalid="ignore"):
            via_v = np.where(root > 0, alpha * np.abs(m_new) * s_v / (2.0 * root * den * den), 0.0)
        s_step = np.abs(step) * kappa + alpha * s_m / den + via_v
        new = theta - step
        return [new, m_new, v_new], [np.abs(theta) + np.abs(new) + s_step, s_m, s_v]

    def update_from(self, before: Sequence[np.ndarray], after: Sequence[np.ndarray],
                    previous_step: np.ndarray | None = None) -> np.ndarray:
        """The update u the rule turned ``before`` into ``after`` with (float64): SGD from the weights,
        u = (θ − θ')/η; momentum from the weights too, u = (μ·Δθ_prev − Δθ)/η with Δθ_prev the
        previous update's weight change (``previous_step``; zero at the first); Adam from its first
        moment, u = m + (m' − m)/(1 − β₁). ``before``/``after``: [θ, *slots] in ``slots`` order."""
        lr = _f32(self.learning_rate)
        if self.optimizer == "sgd":
            delta = after[0] - before[0]
            if not self.momentum:
                return -delta / lr
            previous = np.zeros_like(delta) if previous_step is None else previous_step
            return (_f32(self.momentum) * previous - delta) / lr
        b1 = _f32(ADAM_DEFAULTS["beta_1"])
        return before[1] + (after[1] - before[1]) / (1.0 - b1)


def updates_from_states(rule: OptimizerRule, states: np.ndarray) -> np.ndarray:
    """[T, ...] updates from [T + 1, 1 + len(rule.slots), ...] consecutive states (weights, then the
    rule's slots; the first row is the state before the first update), vectorized over T."""
    s = np.asarray(states, dtype=np.float64)
    before, after = s[:-1], s[1:]
    if rule.optimizer == "sgd" and rule.momentum:
        delta = after[:, 0] - before[:, 0]
        previous = np.concatenate([np.zeros_like(delta[:1]), delta[:-1]])
        return rule.update_from([before[:, 0]], [after[:, 0]], previous)
    return rule.update_from([before[:, k] for k in range(s.shape[1])], [after[:, k] for k in range(s.shape[1])])


def canary_observations(rule: OptimizerRule, states: np.ndarray, divisor: float, clip_norm: float) -> np.ndarray:
    """The white-box canaries' observations [T, m] (noised sum at each canary coordinate ÷ C) from their
    coordinates' states [T + 1, 1 + slots, m] after each update (the first row: before the first),
    with the inverse of the optimizer's rule: what an observer of every iterate reconstructs."""
    return updates_from_states(rule, states) * (float(divisor) / float(clip_norm))


@dataclass
class _Segment:
    name: str
    start: int
    stop: int


class RuleLedger:
    """Compares each update's state with the rule applied to the previous one (numpy, float64).

    Rows (``add``) are what ``dpaudit.audit.weight_monitor.WeightMonitor`` records at each update,
    flat: the P trainable coordinates, each slot's P coordinates, the F non-trainable
    coordinates, the optimizer's step count, then the update's P coordinates.
    """

    def __init__(self, rule: OptimizerRule, names: Sequence[str], sizes: Sequence[int], frozen_names: Sequence[str],
                 frozen_sizes: Sequence[int], *, eps: float, tolerance: float = TOLERANCE,
                 missing: Sequence[str] = ()):
        self.rule, self.eps, self.tolerance = rule, float(eps), float(tolerance)
        self.sizes = [int(s) for s in sizes]
        self.p = int(sum(self.sizes))
        self.f = int(sum(int(s) for s in frozen_sizes))
        self.n_slots = len(rule.slots)
        self.state_width = self.p * (1 + self.n_slots) + self.f + 1
        self.width = self.state_width + self.p
        segments, at = [], 0
        for kind in ("", *rule.slots):
            for name, size in zip(names, self.sizes, strict=True):
                segments.append(_Segment(name if not kind else f"{name} ({kind} slot)", at, at + size))
                at += size
        for name, size in zip(frozen_names, frozen_sizes, strict=True):
            segments.append(_Segment(f"{name} (non-trainable)", at, at + int(size)))
            at += int(size)
        segments.append(_Segment("optimizer step count", at, at + 1))
        self.segments = [s for s in segments if s.stop > s.start]
        self._starts = np.array([s.start for s in self.segments])
        self.missing = list(missing)
        self.initial: np.ndarray | None = None
        self.previous: np.ndarray | None = None
        self.updates = 0
        self.compared = 0
        k = len(self.segments)
        self.largest = np.zeros(k)
        self.largest_update = np.zeros(k, np.int64)
        self.largest_absolute = np.zeros(k)
        self.largest_step = np.zeros(k)
        self.first_failure = np.full(k, -1, np.int64)

    def _expected(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p, ns = self.p, self.n_slots
        theta = rows[:, :p]
        slots = [rows[:, p * (1 + j):p * (2 + j)] for j in range(ns)]
        frozen = rows[:, p * (1 + ns):p * (1 + ns) + self.f]
        iteration = rows[:, self.state_width - 1:self.state_width]
        update = rows[:, self.state_width:]
        values, scales = self.rule.step(theta, slots, update, iteration, self.eps)
        expected = np.concatenate([*values, frozen, iteration + 1.0], axis=1)
        # a non-trainable value and the step count have no rounding to allow: any change fails
        scale = np.concatenate([*scales, np.zeros_like(frozen), np.zeros_like(iteration)], axis=1)
        return expected, scale

    def start(self, state: np.ndarray) -> None:
        """The state when the training's step was built: the first update must find it unchanged."""
        self.initial = np.asarray(state, dtype=np.float64).reshape(self.state_width)

    def _compare(self, expected: np.ndarray, scale: np.ndarray, actual: np.ndarray, first_update: int,
                 rows_before: np.ndarray, count: bool = True) -> None:
        absolute = np.subtract(actual, expected)
        np.abs(absolute, out=absolute)
        with np.errstate(divide="ignore", invalid="ignore"):
            # an exact value (scale 0: a non-trainable variable, the step count) in units of eps·1e-30
            units = np.multiply(scale, self.eps)
            np.maximum(units, self.eps * 1e-30, out=units)
            np.divide(absolute, units, out=units)
        units[np.isnan(units)] = np.inf  # a NaN anywhere is a failure
        per_segment = np.maximum.reduceat(units, self._starts, axis=1)  # [n, segments]
        at_row = np.argmax(per_segment, axis=0)
        peak = per_segment[at_row, np.arange(per_segment.shape[1])]
        better = peak > self.largest
        for j in np.flatnonzero(better):
            seg = self.segments[j]
            row = int(at_row[j])
            col = seg.start + int(np.argmax(units[row, seg.start:seg.stop]))
            self.largest[j] = peak[j]
            self.largest_update[j] = first_update + row
            self.largest_absolute[j] = absolute[row, col]
            self.largest_step[j] = abs(expected[row, col] - rows_before[row, col])
        failing = per_segment > self.tolerance
        for j in np.flatnonzero(failing.any(axis=0) & (self.first_failure < 0)):
            self.first_failure[j] = first_update + int(np.argmax(failing[:, j]))
        self.compared += expected.shape[0] if count else 0

    def add(self, block: np.ndarray) -> None:
        """Rows of consecutive updates (each compared with the next; the last waits for the next block)."""
        rows = np.asarray(block).reshape(-1, self.width)  # float32 as recorded: cast chunk by chunk
        n, sw = rows.shape[0], self.state_width
        if not n:
            return
        first = rows[:1].astype(np.float64)
        if self.previous is not None:  # the last row of the block before, against this block's first
            expected, scale = self._expected(self.previous[None])
            self._compare(expected, scale, first[:, :sw], self.compared + 1, self.previous[None, :sw])
        elif self.initial is not None:  # before update 1: nothing may move the state from its start
            start = self.initial[None]
            self._compare(start, np.zeros_like(start), first[:, :sw], 0, start, count=False)
        # chunks of consecutive rows overlapping by one, small enough that the comparison's
        # float64 temporaries stay in the CPU's cache (the same comparisons in the same order)
        chunk = max(1, CHUNK_VALUES // self.width)
        for at in range(0, n - 1, chunk):
            part = rows[at:at + chunk + 1].astype(np.float64)
            expected, scale = self._expected(part[:-1])
            self._compare(expected, scale, part[1:, :sw], self.compared + 1, part[:-1, :sw])
        self.updates += n
        self.previous = rows[-1].astype(np.float64)

    def finish(self, final_state: np.ndarray) -> dict[str, Any]:
        """Compare the last update with the state after training; the record (``noise_check["weights"]``)."""
        if self.previous is not None:
            final = np.asarray(final_state, dtype=np.float64).reshape(1, self.state_width)
            expected, scale = self._expected(self.previous[None])
            self._compare(expected, scale, final, self.compared + 1, self.previous[None, :self.state_width])
        return self.record()

    def record(self) -> dict[str, Any]:
        failures = []
        for j in np.argsort(np.where(self.first_failure >= 0, self.first_failure, np.iinfo(np.int64).max),
                            kind="stable"):
            if self.first_failure[j] < 0 or len(failures) >= MAX_FAILURES:
                break
            failures.append({"variable": self.segments[j].name, "after_update": int(self.first_failure[j]),
                             "deviation": float(self.largest[j])})
        failures = [{"variable": f"{name} (optimizer state)", "after_update": 0, "deviation": math.inf,
                     "reason": "the optimizer keeps no such state"} for name in self.missing] + failures
        top = int(np.argmax(self.largest)) if self.largest.size else 0
        record = {
            "checked": True,
            "passed": not failures and self.compared == self.updates and self.updates > 0,
            "rule": self.rule.as_dict(),
            "updates": int(self.updates),
            "compared": int(self.compared),
            "coordinates": int(self.p),
            "non_trainable_coordinates": int(self.f),
            "tolerance": self.tolerance,
            "unit": "rounding units: |actual − rule| / (eps · Σ|terms|), float eps of the variables' dtype",
            "largest_deviation": float(self.largest[top]) if self.largest.size else 0.0,
            "largest_deviation_variable": self.segments[top].name if self.segments else None,
            "largest_deviation_after_update": int(self.largest_update[top]) if self.largest.size else 0,
            "largest_deviation_absolute": float(self.largest_absolute[top]) if self.largest.size else 0.0,
            "largest_deviation_step": float(self.largest_step[top]) if self.largest.size else 0.0,
            "failures": failures,
        }
        return record


def merge_into(noise: dict[str, Any], weights: dict[str, Any] | None, *, steps_executed: int) -> dict[str, Any]:
    """``noise_check`` with the weight certificate under ``weights``: its failures join the
    certificate's (test ``weights_rule``, a privacy failure) and ``passed`` requires both."""
    if weights is None:
        return noise
    weights = dict(weights)
    if weights["updates"] != steps_executed:
        weights["passed"] = False
        weights["failures"] = [*weights["failures"], {"variable": "(all)", "after_update": int(weights["updates"]),
                                                      "deviation": math.inf,
                                                      "reason": f"{weights['updates']} updates recorded, "
                                                                f"{steps_executed} executed"}]
    out = {**noise, "weights": weights}
    if not weights["passed"]:
        failures = [{"variable": f["variable"], "test": f.get("test", "weights_rule"), "p_value": 0.0,
                     "after_update": f["after_update"], "deviation": f["deviation"],
                     **({"reason": f["reason"]} if "reason" in f else {})} for f in weights["failures"]]
        if not failures:  # nothing compared (no update recorded)
            failures = [{"variable": "(all)", "test": "weights_rule", "p_value": 0.0, "after_update": 0,
                         "deviation": math.inf}]
        out["failures"] = [*noise.get("failures", []), *failures]
        out["passed"] = False
        out["privacy_failure"] = True
    return out
