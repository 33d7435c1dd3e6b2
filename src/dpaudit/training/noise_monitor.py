"""What a DP-SGD step actually added as noise, accumulated on the graph side (issue 32).

A ``NoiseMonitor`` lives beside the step (``dpaudit.training.gradient_paths.StepContext``
and the reference pool's stacked step). At every update it receives the residual
``r = update · divisor − clipped sum`` of each variable, computed from the very tensors
handed to the optimizer, and keeps in float64 ``tf.Variable``s only what the certificate
(``dpaudit.dp.noise_certificate``) reads:

* per variable: the number of values, Σr, Σr², Σr³, Σr⁴, the lag-one products
  Σ r_t·r_{t−1} against the previous step's r (one stored copy), Σ(r_t·r_{t−1})² and
  their count;
* a fixed random sample of coordinates of every variable (``SAMPLED_PER_VARIABLE`` at
  most, chosen once from the monitor's seed), written at each step into row
  ``t // stride`` of a buffer of at most ``MAX_SAMPLE_ROWS`` rows, so a row holds the last
  step of its stride (every step when the run has fewer steps than rows).

With a model axis (the reference pool trains K models in one step) every residual is
[K, ...] and ``active`` [K] says which models took this step; the sums run over active
models and the lag-one products over models active at both steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_SAMPLE_ROWS", "SAMPLED_PER_VARIABLE", "NoiseMonitor"]

SAMPLED_PER_VARIABLE = 48
MAX_SAMPLE_ROWS = 2048
_SUMS = ("count", "s1", "s2", "s3", "s4", "lag", "lag_sq", "lag_count")


class NoiseMonitor:
    """Graph-side sufficient statistics of the noise of one training (module docstring)."""

    def __init__(self, names: Sequence[str], shapes: Sequence[Sequence[int]], *, steps: int, seed: int,
                 models: int = 1):
        from dpaudit import _tf

        tf = self.tf = _tf.tf
        self.names = [str(n) for n in names]
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        self.models = int(models)
        self.steps = max(1, int(steps))
        rows = min(self.steps, MAX_SAMPLE_ROWS)
        self.stride = math.ceil(self.steps / rows)
        self.rows = math.ceil(self.steps / self.stride)
        rng = np.random.default_rng([int(seed), 6])
        self.sample_index = [np.sort(rng.choice(size, min(size, SAMPLED_PER_VARIABLE), replace=False)).astype(np.int64)
                             for size in self.sizes]
        self.widths = [int(i.size) for i in self.sample_index]
        f64 = tf.float64
        self.sums = [{k: tf.Variable(tf.zeros([], f64), trainable=False) for k in _SUMS} for _ in self.sizes]
        self.previous = [tf.Variable(tf.zeros([self.models, size], f64), trainable=False) for size in self.sizes]
        self.previous_active = tf.Variable(tf.zeros([self.models], f64), trainable=False)
        self.counter = tf.Variable(tf.zeros([], tf.int64), trainable=False)
        self.samples = tf.Variable(tf.zeros([self.rows, self.models, sum(self.widths)], f64), trainable=False)
        self.sample_active = tf.Variable(tf.zeros([self.rows, self.models], f64), trainable=False)
        self.steps_active = tf.Variable(tf.zeros([self.models], f64), trainable=False)

    def observe(self, residuals: Sequence[Any], active=None) -> None:
        """Record one step's residuals (inside the compiled step; its ops run with the step)."""
        tf = self.tf
        f64 = tf.float64
        act = tf.ones([self.models], f64) if active is None else tf.cast(active, f64)
        both = act * self.previous_active
        row = tf.minimum(self.counter // self.stride, self.rows - 1)
        sampled = []
        for r, size, sums, previous, index in zip(residuals, self.sizes, self.sums, self.previous,
                                                    self.sample_index, strict=True):
            r = tf.reshape(tf.cast(r, f64), [self.models, size])
            weighted = r * act[:, None]
            r2 = r * r
            product = r * previous
            sums["count"].assign_add(tf.reduce_sum(act) * size)
            sums["s1"].assign_add(tf.reduce_sum(weighted))
            sums["s2"].assign_add(tf.reduce_sum(weighted * r))
            sums["s3"].assign_add(tf.reduce_sum(weighted * r2))
            sums["s4"].assign_add(tf.reduce_sum(weighted * r * r2))
            sums["lag"].assign_add(tf.reduce_sum(tf.reduce_sum(product, axis=1) * both))
            sums["lag_sq"].assign_add(tf.reduce_sum(tf.reduce_sum(product * product, axis=1) * both))
            sums["lag_count"].assign_add(tf.reduce_sum(both) * size)
            previous.assign(r)
            sampled.append(tf.gather(r, index, axis=1))
        self.samples.scatter_nd_update([[row]], [tf.concat(sampled, axis=1)])
        self.sample_active.scatter_nd_update([[row]], [act])
        self.previous_active.assign(act)
        self.steps_active.assign_add(act)
        self.counter.assign_add(1)

    def reset(self) -> None:
        """Forget everything observed (a monitor reused for another training of the same step)."""
        for variable in (*[v for sums in self.sums for v in sums.values()], *self.previous, self.previous_active,
                         self.counter, self.samples, self.sample_active, self.steps_active):
            variable.assign(self.tf.zeros_like(variable))

    def statistics(self) -> dict[str, Any]:
        """The recorded statistics as numpy: ``variables`` (per variable its name, coordinates,
        steps and sums), ``samples`` [rows, sampled coordinates] (active model-rows of the
        recorded steps side by side), ``sample_columns`` and ``steps`` (updates observed)."""
        steps_active = self.steps_active.numpy()
        variables = []
        for name, size, sums in zip(self.names, self.sizes, self.sums, strict=True):
            record = {k: float(v.numpy()) for k, v in sums.items()}
            variables.append({"name": name, "coordinates": size, "steps": int(steps_active.max(initial=0)), **record})
        rows = min(self.rows, math.ceil(int(self.counter.numpy()) / self.stride))
        samples = self.samples.numpy()[:rows]
        active = self.sample_active.numpy()[:rows] > 0
        # one row per (step, model) that was active: each is a fresh draw under H0
        flat = samples.transpose(1, 0, 2)[active.T]
        return {"variables": variables, "samples": flat, "sample_columns": list(self.widths),
                "steps": int(self.counter.numpy()), "steps_per_model": steps_active.astype(np.int64).tolist(),
                "sample_stride": int(self.stride)}
