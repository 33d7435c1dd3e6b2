"""What a DP-SGD step actually added as noise, accumulated on the graph side (issue 32).

A ``NoiseMonitor`` lives beside the step (``dpaudit.training.gradient_paths.StepContext``
and the reference pool's stacked step). At every update it receives the residual
``r = update · divisor − clipped sum`` of each variable, computed from the very tensors
handed to the optimizer, and keeps only what the certificate
(``dpaudit.dp.noise_certificate``) reads:

* per variable, in float64: Σr, Σr², Σr³, Σr⁴, the lag-one products Σ r_t·r_{t−1}
  against the previous step's r (one stored copy) and Σ(r_t·r_{t−1})²; the counts follow
  from the steps each model took;
* a fixed random sample of coordinates of every variable (``SAMPLED_PER_VARIABLE`` at
  most, chosen once from the monitor's seed), kept at every ``stride``-th step in a buffer
  of at most ``MAX_SAMPLE_ROWS`` rows (every step when the run has fewer steps than rows).

Cost: a step only writes its flat residual (float32: the recomputation's rounding is
~1e-7 of the clipped sum's size, ≤ 1e-5 of σC at B·C / σC ≤ 100) into a block of
``block_steps`` rows (8 to 256, at most ``BLOCK_FLOATS`` floats), two stateful ops whatever
the number of variables; every ``block_steps`` updates one compiled call folds the block
into the sums, vectorized over its steps. The
loop reports each update (``after_step``; ``monitored(step)`` wraps a step with it); a
fold whose count disagrees with the step's own, or rows never folded, stop the training
(``statistics()`` folds what is left). Folding inside the step (``tf.cond``) cost 25 %
of a small MLP's step: the branch's resources serialize the graph.

With a model axis (the reference pool trains K models in one step) every residual is
[K, ...] and ``active`` [K] says which models took this step; the sums run over active
models and the lag-one products over models active at both steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["BLOCK_FLOATS", "MAX_SAMPLE_ROWS", "SAMPLED_PER_VARIABLE", "NoiseMonitor"]

SAMPLED_PER_VARIABLE = 48
MAX_SAMPLE_ROWS = 2048
# A block holds BLOCK_FLOATS floats (16 MB) at most, and between MIN_BLOCK and MAX_BLOCK
# steps: the fold's compiled call costs ~0.3 ms, so a small model folds every 256 steps.
BLOCK_FLOATS = 1 << 22
MIN_BLOCK, MAX_BLOCK = 8, 256
# the power sums kept per variable, in this order
_SUMS = ("s1", "s2", "s3", "s4", "lag", "lag_sq")


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
        offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        total = int(offsets[-1])
        self._segments = tf.constant(np.repeat(np.arange(len(self.sizes), dtype=np.int32), self.sizes))
        self._sampled = tf.constant(np.concatenate([o + i for o, i in zip(offsets[:-1], self.sample_index,
                                                                            strict=True)]).astype(np.int32))
        f32, f64 = tf.float32, tf.float64

        def variable(shape, dtype=f64):
            return tf.Variable(tf.zeros(shape, dtype), trainable=False)

        # a block row: the flat residual of every model, then its active flag
        self.block_steps = int(min(MAX_BLOCK, max(MIN_BLOCK, 2 ** int(math.log2(max(1, BLOCK_FLOATS // (
            self.models * (total + 1))))))))
        self.block = variable([self.block_steps, self.models, total + 1], f32)
        self.position = variable([], tf.int64)  # updates observed (graph side)
        self.sums = variable([len(self.sizes), len(_SUMS)])
        self.pairs = variable([])
        self.previous = variable([self.models, total])
        self.previous_active = variable([self.models])
        self.counter = variable([], tf.int64)  # updates folded
        self.steps_active = variable([self.models])
        self.samples = variable([self.rows, self.models, sum(self.widths)])
        self.sample_active = variable([self.rows, self.models])
        self._constants = (self._segments, self._sampled, tf.constant(self.stride, tf.int64),
                           tf.constant(self.rows, tf.int64))
        self.pending = 0  # updates the loop reported since the last fold

    def observe(self, residuals: Sequence[Any], active=None) -> None:
        """Record one step's residuals (inside the compiled step): one row of the block, two
        stateful ops, so the step's critical path barely grows."""
        tf = self.tf
        act = tf.ones([self.models, 1], tf.float32) if active is None else tf.cast(active, tf.float32)[:, None]
        flat = tf.concat([tf.reshape(tf.cast(r, tf.float32), [self.models, -1]) for r in residuals] + [act], axis=1)
        at = self.position.assign_add(1) - 1
        self.block.scatter_nd_update([[at % self.block_steps]], [flat])

    def after_step(self) -> None:
        """The loop's call after each update it ran (``monitored`` wraps a step with it): every
        ``block_steps`` updates the block is folded into the sums by one compiled call."""
        self.pending += 1
        if self.pending == self.block_steps:
            self.fold()

    def monitored(self, step):
        """``step`` followed by ``after_step`` (the same arguments and outputs)."""
        def run(*args):
            out = step(*args)
            self.after_step()
            return out

        return run

    def fold(self) -> None:
        """Fold the block's pending rows into the sums and the samples."""
        if self.pending == 0:
            return
        observed = int(self.position.numpy())
        folded = int(self.counter.numpy())
        if observed - folded != self.pending:
            raise RuntimeError(f"noise monitor: the step observed {observed - folded} updates since the last fold, the "
                               f"loop reported {self.pending}; every update must go through the monitored step")
        _fold_function()(self.block, self.sums, self.pairs, self.previous, self.previous_active, self.counter,
                         self.steps_active, self.samples, self.sample_active, self.tf.constant(self.pending, self.tf.int64),
                         *self._constants)
        self.pending = 0

    def reset(self) -> None:
        """Forget everything observed (a monitor reused for another training of the same step)."""
        for variable in (self.block, self.position, self.sums, self.pairs, self.previous, self.previous_active,
                         self.counter, self.steps_active, self.samples, self.sample_active):
            variable.assign(self.tf.zeros_like(variable))
        self.pending = 0

    def statistics(self) -> dict[str, Any]:
        """The recorded statistics as numpy: ``variables`` (per variable its name, coordinates,
        steps, value count and sums), ``samples`` [rows, sampled coordinates] (active
        model-rows of the recorded steps side by side), ``sample_columns`` and ``steps``
        (updates observed)."""
        self.fold()  # what is left after training
        if int(self.position.numpy()) != int(self.counter.numpy()):
            raise RuntimeError(f"noise monitor: {int(self.position.numpy()) - int(self.counter.numpy())} updates were "
                               "observed but never folded: a step ran outside the monitored step")
        steps_active = self.steps_active.numpy()
        sums = self.sums.numpy()
        pairs = float(self.pairs.numpy())
        variables = []
        for i, (name, size) in enumerate(zip(self.names, self.sizes, strict=True)):
            record = dict(zip(_SUMS, (float(v) for v in sums[i]), strict=True))
            variables.append({"name": name, "coordinates": size, "steps": int(steps_active.max(initial=0)),
                              "count": float(steps_active.sum()) * size, "lag_count": pairs * size, **record})
        counter = int(self.counter.numpy())
        rows = min(self.rows, math.ceil(counter / self.stride))
        samples = self.samples.numpy()[:rows]
        active = self.sample_active.numpy()[:rows] > 0
        # one row per (step, model) that was active: each is a fresh draw under H0
        flat = samples.transpose(1, 0, 2)[active.T]
        return {"variables": variables, "samples": flat, "sample_columns": list(self.widths),
                "steps": counter, "steps_per_model": steps_active.astype(np.int64).tolist(),
                "sample_stride": int(self.stride)}


_FOLD = None


def _fold_function():
    """One compiled fold for every monitor (variables are arguments, so a loop of monitors of
    one shape traces it once)."""
    global _FOLD
    if _FOLD is None:
        from dpaudit import _tf

        _FOLD = _tf.tf.function(_fold, autograph=False, reduce_retracing=True)
    return _FOLD


def _fold(block, sums, pairs, previous, previous_active, counter, steps_active, samples, sample_active, n,
          segments, sampled, stride, rows_kept):
    """Fold the block's first n rows (steps counter .. counter + n − 1) into the sums and samples."""
    from dpaudit import _tf

    tf = _tf.tf
    f64 = tf.float64
    data = tf.cast(block[:n], f64)  # [n, K, T + 1]
    rows, act = data[:, :, :-1], data[:, :, -1]
    before = tf.concat([previous[None], rows[:-1]], axis=0)
    before_act = tf.concat([previous_active[None], act[:-1]], axis=0)
    both = act * before_act
    a, b = act[:, :, None], both[:, :, None]
    r2 = rows * rows
    product = rows * before
    terms = tf.stack([a * rows, a * r2, a * r2 * rows, a * r2 * r2, b * product, b * product * product], axis=-1)
    sums.assign_add(tf.math.segment_sum(tf.reduce_sum(terms, axis=[0, 1]), segments))
    pairs.assign_add(tf.reduce_sum(both))
    steps_active.assign_add(tf.reduce_sum(act, axis=0))
    previous.assign(rows[-1])
    previous_active.assign(act[-1])
    steps = counter + tf.range(n, dtype=tf.int64)
    keep = tf.equal(steps % stride, 0)
    where = tf.minimum(tf.boolean_mask(steps // stride, keep), rows_kept - 1)[:, None]
    samples.scatter_nd_update(where, tf.boolean_mask(tf.gather(rows, sampled, axis=2), keep))
    sample_active.scatter_nd_update(where, tf.boolean_mask(act, keep))
    counter.assign_add(n)
