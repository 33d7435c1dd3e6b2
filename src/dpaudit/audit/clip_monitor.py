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
updates (``CHECKED_UPDATES``, drawn once from the run's seed) the step recomputes it independently
of the path's clipping code: the Jacobian of the units' losses on the path's own tape (the forward
pass the update used, its Dropout masks included), the norms, weights and weighted sum in float64,
and the distance of the path's S from it, per variable. No reduction of the gradients is shared
with the path: only the forward pass (whose per-example independence the twin's norm check tests).

Decision: the path's S is float32, a sum of |b| terms of size ≤ C, so its rounding is a few
units of eps₃₂·Σ_i ‖clip_C(g_i)‖ (the scale). A variable's distance in those units ("rounding
units") above ``TOLERANCE`` fails, naming the variable and the update; clean runs measure < 2 and
the planted clipping bugs 10⁴ and more (``tests/unit/test_clip_certificate.py``). The failure is a
privacy failure of ``noise_check`` (test ``clipped_sum``): the noise is certified against a sum
whose sensitivity is not C.

Cost: one Jacobian (|b| × parameters floats) per checked update, inside ``tf.cond``; the
others pay a counter and the branch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CHECKED_UPDATES", "TOLERANCE", "ClipMonitor", "merge_clip_into"]

# data steps checked per training (all of them when it has fewer): a bug that moves S at a fraction f
# of the steps escapes 16 random ones with probability (1 − f)^16 (0.005 at f = 0.28)
CHECKED_UPDATES = 16
# rounding units (eps₃₂ · Σ_i ‖clip_C(g_i)‖) a variable's distance may reach
TOLERANCE = 64.0
_EPS32 = float(np.finfo(np.float32).eps)


class ClipMonitor:
    """Graph-side: at the chosen updates, the path's clipped sum against Σ_i clip_C(g_i)."""

    def __init__(self, names: Sequence[str], *, steps: int, seed: int, clip_norm: float,
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
        self.schedule = tf.constant(schedule)
        self.counter = tf.Variable(tf.zeros([], tf.int64), trainable=False)
        self.done = tf.Variable(tf.zeros([], tf.int64), trainable=False)
        # per checked update: the update's index, the scale, the largest unit norm, then each variable's distance
        self.rows = tf.Variable(tf.zeros([k, 3 + len(self.names)], tf.float64), trainable=False)
        self.k = k

    def observe(self, tape, unit_losses, clipped: Sequence[Any], variables: Sequence[Any]) -> None:
        """Inside the step, after the path formed ``clipped`` (Σ_i w_i g_i per variable) from the
        forward pass recorded on ``tape`` (persistent), ``unit_losses`` [u] on it."""
        tf = self.tf
        at = self.counter.assign_add(1) - 1
        steps = int(self.schedule.shape[0])
        due = tf.logical_and(tf.gather(self.schedule, tf.minimum(at, steps - 1)), at < steps)

        def check():
            jac = tape.jacobian(unit_losses, list(variables), unconnected_gradients=tf.UnconnectedGradients.ZERO)
            per_unit = [tf.reshape(tf.cast(j, tf.float64), [tf.shape(j)[0], -1]) for j in jac]
            norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g), axis=1) for g in per_unit]))
            weights = tf.where(norms > self.clip, self.clip / tf.maximum(norms, 1e-300), tf.ones_like(norms))
            distances = [tf.norm(tf.reshape(tf.cast(s, tf.float64), [-1]) - tf.linalg.matvec(g, weights, transpose_a=True))
                         for s, g in zip(clipped, per_unit, strict=True)]
            scale = tf.reduce_sum(weights * norms)
            row = tf.stack([tf.cast(at, tf.float64), scale, tf.reduce_max(tf.concat([norms, [0.0]], 0)), *distances])
            self.rows.scatter_nd_update([[tf.minimum(self.done, self.k - 1)]], [row])
            self.done.assign_add(1)
            return tf.constant(True)

        tf.cond(due, check, lambda: tf.constant(False))

    def finish(self) -> dict[str, Any]:
        """After training: the clipping certificate's record."""
        done = int(self.done.numpy())
        rows = self.rows.numpy()[:min(done, self.k)]
        record: dict[str, Any] = {"checked_updates": int(rows.shape[0]), "scheduled_updates": int(self.k),
                                  "clip_norm": self.clip, "tolerance": TOLERANCE, "failures": []}
        if not rows.shape[0]:
            record.update(passed=None, largest_deviation=None, reason="no update was checked")
            return record
        units = rows[:, 3:] / (_EPS32 * np.maximum(rows[:, 1:2], self.clip))
        worst = np.unravel_index(int(np.argmax(units)), units.shape)
        record.update(largest_deviation=float(units[worst]), largest_deviation_variable=self.names[worst[1]],
                      largest_deviation_update=int(rows[worst[0], 0]) + 1,
                      largest_deviation_in_c=float(rows[worst[0], 3 + worst[1]] / self.clip),
                      largest_unit_norm=float(rows[:, 2].max()))
        bad = units > TOLERANCE
        for v in np.flatnonzero(bad.any(axis=0)):
            r = int(np.flatnonzero(bad[:, v])[0])
            record["failures"].append({"variable": self.names[v], "update": int(rows[r, 0]) + 1,
                                       "deviation": float(units[r, v]), "deviation_in_c": float(rows[r, 3 + v] / self.clip)})
        record["passed"] = not record["failures"]
        return record


def merge_clip_into(noise: dict[str, Any], clipping: dict[str, Any] | None) -> dict[str, Any]:
    """``noise_check`` with the clipping certificate under ``clipping``: its failures join the
    certificate's (test ``clipped_sum``, a privacy failure) and ``passed`` requires it."""
    if clipping is None:
        return noise
    out = {**noise, "clipping": clipping}
    if clipping.get("passed") is False:
        failures = [{"variable": f["variable"], "test": "clipped_sum", "p_value": 0.0, "after_update": f["update"],
                     "deviation": f["deviation"]} for f in clipping["failures"]]
        out["failures"] = [*noise.get("failures", []), *failures]
        out["passed"] = False
        out["privacy_failure"] = True
    return out

