"""The clipping certificate: is the sum the noise was added to the sum of the units' own gradients,
each clipped at C? (the red team of issue 45, ``bench/bench_planted_bugs.py``).

The noise certificate (``dpaudit.dp.noise_certificate``) measures r = update · divisor − S, where S
is the clipped sum the gradient path itself computed, and the weight certificate follows the
update into the weights. Both take S on trust: a path that clips at 2C, leaves the biases or a
layer unclipped, clips the batch's sum instead of each example, clips by a norm over one layer,
or reads its norms from other Dropout masks than the gradients it sums hands the noise a sum of
sensitivity above C, and every other check passes (planted as real-code bugs: 0 of 36 runs
flagged before this check).

DP-SGD's sensitivity needs S = Σ_i clip_C(g_i), g_i the gradient of unit i's own loss (an example,
or a microbatch group's mean loss), clip_C(g) = g·min(1, C/‖g‖). At a random set of the training's
data steps (``CHECKED_UPDATES``, drawn once from the run's seed) the step checks it on its own tape
(the forward pass the update used, its Dropout masks included), without the path's clipping code:

* the sum: with n_i the norms the path clipped by, S must be the gradient of Σ_i min(1, C/n_i)·loss_i
  (the weights held fixed: one more backward pass). A path that clips at another threshold, leaves a
  variable or an example unclipped, clips per layer at C each, or clips the batch's sum fails;
* the norms: ``NORM_UNITS`` units' n_i (the batch's first and last, where indexing bugs live, and
  random ones) against the norm of their own gradient (one backward pass each on the same tape). A path
  that clips by a norm over one layer, of the batch-mean loss, or of other Dropout masks than the summed
  gradients' fails.

The 1 + ``NORM_UNITS`` backward passes are one pass traced once and run per row of coefficients
(``tf.map_fn``: w for the sum, a one-hot row per picked unit): each backward pass traced costs a run's
first step ~70 ms.

Decision: the path's S is float32, a sum of |b| terms of size ≤ C, so its rounding is a few units of
eps₃₂·Σ_i ‖clip_C(g_i)‖ (the scale). A variable's distance in those units ("rounding units") above
``TOLERANCE`` fails, naming the variable and the step; clean runs measure < 4 and the planted
clipping bugs 10⁵ and more (``bench/bench_planted_bugs.py``). A norm whose relative gap exceeds
``NORM_RTOL`` fails (both norms read the same forward pass: only rounding separates them; the
twin's norm check tests the forward pass itself against one tape per example alone). A failure is a
privacy failure of ``noise_check`` (test ``clipped_sum``): the noise is certified against a sum
whose sensitivity is not C.

Cost: on a checked step 1 + ``NORM_UNITS`` backward passes inside ``tf.cond`` (one traced); the others
pay a counter and the branch's dispatch (the ``If`` op is kept a function call: ``dpaudit._tf.functional_cond``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CHECKED_UPDATES", "TOLERANCE", "ClipMonitor", "merge_clip_into"]

# data steps checked per training (all of them when it has fewer): a bug that moves S at a fraction f
# of the steps escapes 16 random ones with probability (1 − f)^16 (0.005 at f = 0.28)
CHECKED_UPDATES = 16
# rounding units (eps₃₂ · Σ_i ‖clip_C(g_i)‖) a variable's distance may reach
TOLERANCE = 64.0
# units whose norm is recomputed from their own gradient per checked step: the batch's first and last, then
# random ones (with replacement: a bug on a share f of the units escapes 16 steps with probability
# (1 − f)^32 at least), and the relative gap allowed
# (the twin's ``NORM_CHECK_RTOL``: both norms read the same forward pass, so only rounding separates them)
NORM_UNITS = 4
NORM_RTOL = 1e-3
_EPS32 = float(np.finfo(np.float32).eps)
# power sums of the batch rows' projections recorded per checked step, and their relative tolerance
# (float64 sums of products of the same float32 values: 1e-15 apart; another row moves them by ~1/N)
_POWERS = 3
BATCH_RTOL = 1e-9


class ClipMonitor:
    """Graph-side: at the chosen updates, the path's clipped sum against Σ_i clip_C(g_i)."""

    def __init__(self, names: Sequence[str], *, steps: int, seed: int, clip_norm: float,
                 rows: tuple[np.ndarray, np.ndarray] | None = None, drop_remainder: int | None = None,
                 checks: int = CHECKED_UPDATES):
        from dpaudit import _tf

        tf = self.tf = _tf.tf
        self.names = [str(n) for n in names]
        self.clip = float(clip_norm)
        steps = max(1, int(steps))
        k = min(int(checks), steps)
        chosen = np.random.default_rng([int(seed), 45, 11]).choice(steps, k, replace=False)
        schedule = np.zeros(steps, bool)
        schedule[chosen] = True
        self.chosen = np.sort(chosen)
        # one graph, the check in a tf.cond: a second trace of the step for the checked steps would draw
        # the same noise as the first (TensorFlow seeds a traced random op alike in both traces)
        self.schedule = tf.constant(schedule)
        self.counter = tf.Variable(tf.zeros([], tf.int64), trainable=False)
        self.done = tf.Variable(tf.zeros([], tf.int64), trainable=False)
        # per checked step: its index, the scale, the largest relative norm gap, the batch's row count and power
# sums of its rows' projections, then each variable's distance
        self.rows = tf.Variable(tf.zeros([k, 3 + 1 + _POWERS + len(self.names)], tf.float64), trainable=False)
        self.k = k
        # The batch rows: every data row's projection x·r + y·r_y (float64, fixed random r); a checked
        # step records the power sums of its batch's projections, the host those of the rows drawn.
        self.rows_checked = rows is not None
        self.drop_remainder = drop_remainder
        self.expected = np.full((k, 1 + _POWERS), np.nan)
        self.pending: np.ndarray | None = None
        self.data_steps = 0
        if rows is not None:
            x, y = (np.asarray(a) for a in rows)
            x = x.reshape(len(x), -1)
            draw = np.random.default_rng([int(seed), 45, 13])
            self.projection = draw.standard_normal(x.shape[1]) / math.sqrt(max(1, x.shape[1]))
            self.label_projection = float(draw.standard_normal())
            self.fingerprints = x.astype(np.float64) @ self.projection + y.astype(np.float64) * self.label_projection
            self.where = {int(t): i for i, t in enumerate(self.chosen)}
        self.seed = int(np.random.SeedSequence([int(seed), 45, 12]).generate_state(1)[0] >> 1)

    def observe(self, tape, x, y, unit_losses, norms, clipped: Sequence[Any], variables: Sequence[Any]) -> None:
        """Inside the step, after the path formed ``clipped`` (its Σ_i w_i g_i per variable) from the
        forward pass recorded on ``tape`` (persistent): ``x``, ``y`` the batch the step trained on,
        ``unit_losses`` [u] on the tape, ``norms`` [u] the norms the path clipped by."""
        tf = self.tf
        at = self.counter.assign_add(1) - 1
        steps = int(self.schedule.shape[0])
        due = tf.logical_and(tf.gather(self.schedule, tf.minimum(at, steps - 1)), at < steps)
        variables = list(variables)

        def check():
            zero = tf.UnconnectedGradients.ZERO
            norms32 = tf.stop_gradient(tf.cast(norms, unit_losses.dtype))
            weights = tf.where(norms32 > self.clip, self.clip / tf.maximum(norms32, 1e-30), tf.ones_like(norms32))
            # the norms themselves: the batch's first and last units (where indexing bugs live) and random ones
            units = tf.shape(unit_losses)[0]
            picks = tf.concat([[0, units - 1], tf.random.stateless_uniform(
                [NORM_UNITS - 2], [self.seed, tf.cast(at, tf.int32)], 0, units, dtype=tf.int32)], axis=0)
            # One backward pass traced, run once per row of coefficients on the same tape: Σ_i w_i g_i is the
            # gradient of Σ_i w_i·loss_i (w held fixed), a picked unit's own gradient that of its loss alone.
            # (Each backward pass traced costs ~70 ms of a run's first step; the map is one.)
            coefficients = tf.concat([weights[None, :], tf.one_hot(picks, units, dtype=unit_losses.dtype)], axis=0)

            def backward(c):
                with tape:
                    target = tf.reduce_sum(c * unit_losses)
                grads = [tf.cast(g, tf.float64) for g in
                         tape.gradient(target, variables, unconnected_gradients=zero)]
                norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
                gaps = tf.stack([tf.norm(tf.reshape(tf.cast(s, tf.float64) - g, [-1]))
                                 for s, g in zip(clipped, grads, strict=True)])
                return norm, gaps

            norms_run, gaps_run = tf.map_fn(backward, coefficients, fn_output_signature=(
                tf.float64, tf.TensorSpec([len(variables)], tf.float64)))
            distances = tf.unstack(gaps_run[0], num=len(variables))  # the reference sum's, per variable
            own = norms_run[1:]
            claimed = tf.cast(tf.gather(norms32, picks), tf.float64)
            gaps = tf.abs(claimed - own) / tf.maximum(own, 1e-6)
            scale = tf.reduce_sum(tf.cast(weights * norms32, tf.float64))
            if self.rows_checked:
                flat = tf.reshape(tf.cast(x, tf.float64), [tf.shape(x)[0], -1])
                p = (tf.linalg.matvec(flat, tf.constant(self.projection, tf.float64))
                     + tf.cast(y, tf.float64) * self.label_projection)
                batch = [tf.cast(tf.shape(x)[0], tf.float64), *(tf.reduce_sum(p ** e) for e in range(1, 1 + _POWERS))]
            else:
                batch = [tf.constant(math.nan, tf.float64)] * (1 + _POWERS)
            row = tf.stack([tf.cast(at, tf.float64), scale, tf.reduce_max(gaps), *batch, *distances])
            self.rows.scatter_nd_update([[tf.minimum(self.done, self.k - 1)]], [row])
            self.done.assign_add(1)
            return tf.constant(True)

        from dpaudit import _tf

        _tf.functional_cond(due, check, lambda: tf.constant(False))


    def drew(self, positions) -> None:
        """The sampler's draw of the next step (population positions, before any canary split)."""
        self.pending = np.asarray(positions)

    def executed(self, empty: bool = False) -> None:
        """One update ran; a data step's drawn rows are the batch its step must have trained on."""
        if empty or self.pending is None:
            self.pending = None
            return
        t, drawn = self.data_steps, self.pending
        self.data_steps += 1
        self.pending = None
        if not self.rows_checked or t not in self.where:
            return
        # the data rows (a twin's shared gradient canaries are positions past them), and the
        # remainder dropped with microbatches under shuffling, as the loop does (TF Privacy's rule)
        drawn = drawn[drawn < self.fingerprints.size]
        if self.drop_remainder:
            drawn = drawn[:drawn.size - drawn.size % self.drop_remainder]
        p = self.fingerprints[drawn]
        self.expected[self.where[t]] = [p.size, *(np.sum(p ** e) for e in range(1, 1 + _POWERS))]

    def finish(self) -> dict[str, Any]:
        """After training: the clipping certificate's record."""
        done = int(self.done.numpy())
        rows = self.rows.numpy()[:min(done, self.k)]
        batch, rows = rows[:, 3:4 + _POWERS], np.concatenate([rows[:, :3], rows[:, 4 + _POWERS:]], axis=1)
        record: dict[str, Any] = {"checked_steps": int(rows.shape[0]), "scheduled_steps": int(self.k),
                                  "norms_checked": int(rows.shape[0]) * NORM_UNITS, "clip_norm": self.clip,
                                  "tolerance": TOLERANCE, "norm_rtol": NORM_RTOL, "failures": []}
        if not rows.shape[0]:
            record.update(passed=None, largest_deviation=None, reason="no data step was checked")
            return record
        units = rows[:, 3:] / (_EPS32 * np.maximum(rows[:, 1:2], self.clip))
        worst = np.unravel_index(int(np.argmax(units)), units.shape)
        record.update(largest_deviation=float(units[worst]), largest_deviation_variable=self.names[worst[1]],
                      largest_deviation_step=int(rows[worst[0], 0]) + 1,
                      largest_deviation_in_c=float(rows[worst[0], 3 + worst[1]] / self.clip),
                      largest_norm_gap=float(rows[:, 2].max()))
        bad = units > TOLERANCE
        for v in np.flatnonzero(bad.any(axis=0)):
            r = int(np.flatnonzero(bad[:, v])[0])
            record["failures"].append({"variable": self.names[v], "step": int(rows[r, 0]) + 1,
                                       "deviation": float(units[r, v]), "deviation_in_c": float(rows[r, 3 + v] / self.clip)})
        wrong = np.flatnonzero(rows[:, 2] > NORM_RTOL)
        if wrong.size:
            r = int(wrong[0])
            record["failures"].append({"variable": "(norms)", "step": int(rows[r, 0]) + 1,
                                       "deviation": float(rows[r, 2]), "deviation_in_c": None})
        if self.rows_checked:
            self._batch_rows(rows, batch, record)
        record["passed"] = not record["failures"]
        return record

    def _batch_rows(self, rows: np.ndarray, batch: np.ndarray, record: dict[str, Any]) -> None:
        """The checked steps' batches against the rows the sampler drew for them: the row count exactly,
        the power sums of the projections to float64 rounding (a different multiset of rows moves
        them by the projections' own size)."""
        steps = rows[:, 0].astype(np.int64)
        expected = self.expected[[self.where.get(int(t), 0) for t in steps]]
        magnitude = np.array([np.sum(np.abs(self.fingerprints) ** e) for e in range(1, 1 + _POWERS)])
        gaps = np.abs(batch[:, 1:] - expected[:, 1:]) / np.maximum(magnitude, 1e-300)
        count_wrong = batch[:, 0] != expected[:, 0]
        record["batch_rows_checked"] = int(np.isfinite(expected[:, 0]).sum())
        record["largest_batch_gap"] = float(np.nanmax(gaps)) if gaps.size else None
        wrong = np.flatnonzero(count_wrong | ~(gaps <= BATCH_RTOL).all(axis=1))
        if wrong.size:
            r = int(wrong[0])
            record["failures"].append({
                "variable": "(batch rows)", "test": "batch_rows", "step": int(steps[r]) + 1,
                "deviation": float(np.nanmax(gaps[r])) if np.isfinite(gaps[r]).any() else math.inf,
                "deviation_in_c": None,
                "reason": f"the step trained on {int(batch[r, 0])} rows, the sampler drew {expected[r, 0]:.0f}"
                          + ("" if batch[r, 0] != expected[r, 0] else " (other rows, or rows changed)")})


def merge_clip_into(noise: dict[str, Any], clipping: dict[str, Any] | None) -> dict[str, Any]:
    """``noise_check`` with the clipping certificate under ``clipping``: its failures join the
    certificate's (test ``clipped_sum``, a privacy failure) and ``passed`` requires it."""
    if clipping is None:
        return noise
    out = {**noise, "clipping": clipping}
    if clipping.get("passed") is False:
        failures = [{"variable": f["variable"], "test": f.get("test", "clipped_sum"), "p_value": 0.0,
                     "after_update": f["step"],
                     "deviation": f["deviation"]} for f in clipping["failures"]]
        out["failures"] = [*noise.get("failures", []), *failures]
        out["passed"] = False
        out["privacy_failure"] = True
    return out
