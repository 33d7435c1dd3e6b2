"""What a DP-SGD step actually added as noise, recorded on the graph side, folded on the host (issue 32).

A ``NoiseMonitor`` lives beside the step (``dpaudit.training.gradient_paths.StepContext``
and the reference pool's stacked step). At every update it receives the residual
``r = update · divisor − clipped sum`` of each variable, computed from the very tensors
handed to the optimizer (in the step; or, when the weight monitor writes those updates into
the same row, on the host from the row in float32: the values the step's Mul and Sub give,
``residual_from``), and keeps only what the certificate
(``dpaudit.dp.noise_certificate``) reads:

* per variable, in float64: Σr, Σr², Σr³, Σr⁴, the lag-one products Σ r_t·r_{t−1}
  against the previous step's r (one stored copy) and Σ(r_t·r_{t−1})²; the counts follow
  from the steps each model took;
* a fixed random sample of coordinates of every variable (``SAMPLED_PER_VARIABLE`` at
  most, chosen once from the monitor's seed), kept at every ``stride``-th step in a buffer
  of at most ``MAX_SAMPLE_ROWS`` rows (every step when the run has fewer steps than rows).

Cost: a step only writes its flat residual (float32: the recomputation's rounding is
~1e-7 of the clipped sum's size, ≤ 1e-5 of σC at B·C / σC ≤ 100) into a block of
``block_steps`` rows (8 to 256, at most ``BLOCK_FLOATS`` floats and the updates + 1), two stateful ops whatever
the number of variables (``StepBlock``; the weight monitor of ``dpaudit.audit.weight_monitor``
writes its columns of the same row when the two share a block: two variables, a scatter and a
host read fewer, ~6 ms less to build, trace and instantiate on the default MLP); every
``block_steps`` updates the host reads the block once (without copying it) and folds it into
float64 sums in numpy, a few steps at a time (cache-sized chunks: 3× faster than the whole
block at once), vectorized over its steps (2–3× faster than the compiled fold it
replaces, which every run's ``_tf.configure`` also made TensorFlow build again: ~35 ms a run). The
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

__all__ = ["BLOCK_FLOATS", "MAX_SAMPLE_ROWS", "SAMPLED_PER_VARIABLE", "NoiseMonitor", "StepBlock", "share_blocks"]

SAMPLED_PER_VARIABLE = 48
MAX_SAMPLE_ROWS = 2048
# A block holds BLOCK_FLOATS floats (16 MB) at most, and between MIN_BLOCK and MAX_BLOCK
# steps: a small model folds every 256 steps (a fold costs ~1 ms plus ~4 ns a value).
BLOCK_FLOATS = 1 << 22
MIN_BLOCK, MAX_BLOCK = 8, 256
# float64 values of the steps folded at once (512 KB an array; 1 << 15 and 1 << 17 were slower)
FOLD_VALUES = 1 << 16
# the power sums kept per variable, in this order
_SUMS = ("s1", "s2", "s3", "s4", "lag", "lag_sq")


class StepBlock:
    """The graph-side record of one or more monitors: every update writes one row [K, width]
    (each monitor's columns side by side, in ``monitors`` order) with one concat and one scatter,
    and the host reads the rows every ``block_steps`` updates (``rows``: the block's buffer, no
    copy). ``position`` counts the rows written.

    Inside the step each monitor hands its columns to ``stage``; the last of them writes the row,
    so monitors called one after the other (``StepContext.apply``) write once per update."""

    def __init__(self, monitors: Sequence[Any]):
        from dpaudit import _tf

        tf = self.tf = _tf.tf
        self.monitors = list(monitors)
        first = self.monitors[0]
        self.models, self.dtype = int(first.models), first.dtype
        width = int(sum(int(m.width) for m in self.monitors))
        # no more rows than the training's updates and one (a noise monitor knows them): a smaller block
        # to create, and a short training's rows are all folded after it, with the checks
        steps = min((int(m.steps) for m in self.monitors if getattr(m, "steps", None)), default=MAX_BLOCK)
        self.block_steps = int(min(MAX_BLOCK, max(MIN_BLOCK, steps + 1), max(MIN_BLOCK, 2 ** int(math.log2(max(
            1, BLOCK_FLOATS // (self.models * width)))))))
        # one model: rank-1 rows, so a monitor's rank-1 tensors (biases, their slots) need no reshape
        self._row_shape = [width] if self.models == 1 else [self.models, width]
        self.block = tf.Variable(tf.zeros([self.block_steps, *self._row_shape], self.dtype), trainable=False)
        self.position = tf.Variable(tf.zeros([], tf.int64), trainable=False)  # rows written (graph side)
        self._block_steps, self._one = np.int64(self.block_steps), np.int64(1)
        self._flat_shape = np.array([-1] if self.models == 1 else [self.models, -1], np.int32)
        self._shape_const: tuple | None = None
        self._graph: Any = None  # the graph being traced, and what its monitors have staged
        self._staged: dict[int, list] = {}

    def flat(self, tensor: Any, dtype: Any) -> Any:
        """``tensor`` ([K, …], or […] with one model) as a part of a row, cast to ``dtype`` (raw ops:
        cheaper to trace; no reshape where it has the row's rank already)."""
        raw = self.tf.raw_ops
        if tensor.dtype != dtype:
            tensor = raw.Cast(x=tensor, DstT=dtype)
        if tensor.shape.rank == len(self._row_shape):
            return tensor
        graph = self.tf.compat.v1.get_default_graph()
        if self._shape_const is None or self._shape_const[0] is not graph:  # one constant a graph
            self._shape_const = (graph, self.tf.constant(self._flat_shape))
        return raw.Reshape(tensor=tensor, shape=self._shape_const[1])

    def stage(self, monitor: Any, parts: Sequence[Any]) -> None:
        """Inside the step: ``monitor``'s columns of this update's row (``flat`` tensors); once every
        monitor of the block has staged its own, the row is written."""
        tf = self.tf
        graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        if graph is not self._graph:  # a new trace: nothing staged in another graph is kept
            self._graph, self._staged = graph, {}
        if id(monitor) in self._staged:
            raise RuntimeError(f"{type(monitor).__name__}: recorded twice in one update before the monitors sharing "
                               "its block all recorded theirs; every monitor records once per optimizer call")
        self._staged[id(monitor)] = list(parts)
        if len(self._staged) == len(self.monitors):
            staged, self._staged = self._staged, {}
            self._write([p for m in self.monitors for p in staged[id(m)]])

    def _write(self, parts: list) -> None:
        """Raw ops: the step is traced again every run, and the wrappers of ``Variable.assign_add`` and
        ``scatter_nd_update`` cost more to trace than the ops."""
        tf, raw = self.tf, self.tf.raw_ops
        at = raw.ReadVariableOp(resource=self.position.handle, dtype=tf.int64)  # rows written before this one
        raw.ResourceScatterUpdate(resource=self.block.handle, indices=raw.FloorMod(x=at, y=self._block_steps),
                                  updates=raw.ConcatV2(values=parts, axis=len(self._row_shape) - 1))
        raw.AssignAddVariableOp(resource=self.position.handle, value=self._one)

    def written(self) -> int:
        """Rows written so far (host side)."""
        return int(self.position.numpy())

    def rows(self, first: int, n: int) -> np.ndarray:
        """Rows ``first`` … ``first + n − 1`` [n, K, width] (n ≤ ``block_steps``): a view of the block's
        buffer unless they wrap around its end. A scatter leaves a variable in copy-on-read mode, where
        every read copies the whole block (3 ms for the default MLP's); out of it the read shares the
        buffer, and the next scatter copies it only if a view is still alive."""
        raw = self.tf.raw_ops
        raw.DisableCopyOnRead(resource=self.block.handle)
        data = np.asarray(raw.ReadVariableOp(resource=self.block.handle, dtype=self.dtype))
        data = data.reshape(self.block_steps, self.models, -1)  # a view
        at = int(first) % self.block_steps
        return data[at:at + n] if at + n <= self.block_steps else data[(at + np.arange(n)) % self.block_steps]


def share_blocks(monitors: Sequence[Any]) -> None:
    """A block for every monitor built without one (``block=False``): those of one dtype and model
    count share one, so the step writes their columns as one row."""
    groups: dict[tuple, list] = {}
    for monitor in monitors:
        if monitor is not None and monitor.block is None:
            groups.setdefault((monitor.dtype, int(monitor.models)), []).append(monitor)
    for members in groups.values():
        block, at = StepBlock(members), 0
        for monitor in members:
            monitor.bind(block, slice(at, at + int(monitor.width)))
            at += int(monitor.width)


class NoiseMonitor:
    """Graph-side sufficient statistics of the noise of one training (module docstring).

    ``block=False``: no block yet; ``share_blocks`` gives it one (shared with the weight monitor
    by ``dpaudit.audit.mechanism_checks.MechanismObserver``) before the step is traced."""

    def __init__(self, names: Sequence[str], shapes: Sequence[Sequence[int]], *, steps: int, seed: int,
                 models: int = 1, block: bool = True):
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
        self._segments = np.repeat(np.arange(len(self.sizes), dtype=np.int64), self.sizes)
        self._sampled = np.concatenate([o + i for o, i in zip(offsets[:-1], self.sample_index, strict=True)]).astype(
            np.int64)
        # its columns of a block row: the flat residual of every model, then its active flag
        self.width, self.dtype = total + 1, tf.float32
        self.block: StepBlock | None = None
        self.columns = slice(0, self.width)
        self.start = 0  # the block's rows written before this monitor's training
        self._updates: tuple | None = None  # (first column, sizes) of a weight monitor's updates in the block
        self._host: tuple | None = None  # (columns, float32 divisor) of the residual formed on the host
        self.pending = 0  # updates the loop reported since the last fold
        self._zero()
        if block:
            share_blocks([self])

    def bind(self, block: StepBlock, columns: slice) -> None:
        """Record into ``block``'s ``columns`` (``share_blocks``)."""
        self.block, self.columns, self.start = block, columns, 0

    def residual_from(self, weights: Any) -> None:
        """``weights`` (``dpaudit.audit.weight_monitor.WeightMonitor``) writes the updates into this
        monitor's block: ``observe_update`` then writes the clipped sums only and the fold forms
        the residual from both in float32, as the step's Mul and Sub would (two ops fewer a
        variable in the step: 3–8 ms less to trace, instantiate and run on the default models)."""
        if weights.block is not self.block:
            raise ValueError("residual_from: the weight monitor writes another block")
        self._updates = (weights.columns.start + weights.ledger.state_width, list(weights.ledger.sizes))

    def observe_update(self, updates: Sequence[Any], clipped: Sequence[Any], divisor: float,
                       extra: Sequence[Any] = ()) -> None:
        """Inside the step: the residuals ``update · divisor − clipped`` of the tensors handed to the
        optimizer (one per variable), then ``extra`` residuals (the canary coordinates')."""
        raw = self.tf.raw_ops
        sizes = [int(np.prod(u.shape, dtype=np.int64)) for u in updates]
        k = len(sizes)
        if (self._updates is not None and sizes == self.sizes[:k] == self._updates[1][:k]
                and all(u.dtype == self.tf.float32 for u in updates)):
            self._host = (int(sum(sizes)), np.float32(divisor))
            self.observe([*clipped, *extra])
            return
        self._host = None
        d = self.tf.constant(divisor, updates[0].dtype)
        self.observe([*(raw.Sub(x=raw.Mul(x=u, y=d), y=c) for u, c in zip(updates, clipped, strict=True)), *extra])

    @property
    def residual_on_host(self) -> bool:
        """Whether the traced step writes the clipped sums and the fold forms the residual."""
        return self._host is not None

    @property
    def block_steps(self) -> int:
        return self.block.block_steps

    def _zero(self) -> None:
        """The folded statistics, host side (float64)."""
        total = int(sum(self.sizes))
        self.sums = np.zeros((len(self.sizes), len(_SUMS)))
        self.pairs = 0.0
        self.previous = np.zeros((self.models, total))
        self.previous_active = np.zeros(self.models)
        self.counter = 0  # updates folded
        self.steps_active = np.zeros(self.models)
        self.samples = np.zeros((self.rows, self.models, sum(self.widths)))
        self.sample_active = np.zeros((self.rows, self.models))

    def observe(self, residuals: Sequence[Any], active=None) -> None:
        """Record one step's residuals (inside the compiled step): its columns of one row of the
        block (``StepBlock``), so the step's critical path barely grows."""
        tf = self.tf
        if self.block is None:
            raise RuntimeError("noise monitor built with block=False has no block yet: share_blocks gives it one "
                               "before the step is traced (MechanismObserver.weight_monitor does)")
        if active is None:
            act = tf.ones([1] if self.models == 1 else [self.models, 1], tf.float32)
        else:
            act = tf.reshape(tf.cast(active, tf.float32), [-1] if self.models == 1 else [self.models, 1])
        self.block.stage(self, [*(self.block.flat(r, tf.float32) for r in residuals), act])

    def after_step(self) -> None:
        """The loop's call after each update it ran (``monitored`` wraps a step with it): every
        ``block_steps`` updates the block is folded into the sums (``fold``)."""
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
        """Fold the block's pending rows into the sums and the samples (numpy, float64: a compiled
        fold cost more, and after every run's ``_tf.configure`` its function was built again)."""
        if self.pending == 0:
            return
        observed = self.block.written() - self.start
        if observed - self.counter != self.pending:
            raise RuntimeError(f"noise monitor: the step observed {observed - self.counter} updates since the last "
                               f"fold, the loop reported {self.pending}; every update must go through the monitored "
                               "step")
        rows = self.block.rows(self.start + self.counter, self.pending)
        mine = rows[:, :, self.columns]
        if self._host is not None:  # the residual of the first variables, from the updates' columns
            width, divisor = self._host
            at = self._updates[0]
            residual = np.multiply(rows[:, :, at:at + width], divisor)  # float32, as the step's Mul and Sub
            np.subtract(residual, mine[:, :, :width], out=residual)
            mine = np.concatenate([residual, mine[:, :, width:]], axis=2)
        self._fold(mine)
        self.pending = 0

    def _fold(self, block: np.ndarray) -> None:
        """Fold ``block`` [n, K, coordinates + 1] (steps counter .. counter + n − 1), a few steps at a
        time: the float64 temporaries of a chunk stay in the CPU's cache (the default MLP's 150 steps
        at once took 3× as long, most of it the first touch of fresh pages)."""
        chunk = max(1, FOLD_VALUES // (block.shape[1] * block.shape[2]))
        for at in range(0, block.shape[0], chunk):
            self._fold_rows(block[at:at + chunk])

    def _fold_rows(self, block: np.ndarray) -> None:
        n = block.shape[0]
        data = block.astype(np.float64)
        rows, act = data[:, :, :-1], data[:, :, -1]
        both = act * np.concatenate([self.previous_active[None], act[:-1]], axis=0)
        segments, variables = self._segments, len(self.sizes)

        def summed(weights, values):  # Σ over steps, models and each variable's coordinates
            return np.bincount(segments, weights=np.einsum("nk,nkt->t", weights, values), minlength=variables)

        square = rows * rows
        work = square * rows
        sums = [summed(act, rows), summed(act, square), summed(act, work)]
        np.multiply(square, square, out=work)
        sums.append(summed(act, work))
        product = square  # reused: r_t · r_{t−1}
        np.multiply(rows[1:], rows[:-1], out=product[1:])
        np.multiply(rows[0], self.previous, out=product[0])
        sums.append(summed(both, product))
        np.multiply(product, product, out=work)
        sums.append(summed(both, work))
        self.sums += np.stack(sums, axis=1)
        self.pairs += float(both.sum())
        self.steps_active += act.sum(axis=0)
        self.previous = rows[-1].copy()
        self.previous_active = act[-1].copy()
        steps = self.counter + np.arange(n)
        keep = steps % self.stride == 0
        where = np.minimum(steps[keep] // self.stride, self.rows - 1)
        self.samples[where] = rows[keep][:, :, self._sampled]
        self.sample_active[where] = act[keep]
        self.counter += n

    def reset(self) -> None:
        """Forget everything observed (a monitor reused for another training of the same step); the
        block's rows from here on are this training's (a monitor sharing the block is not reset)."""
        self.start = self.block.written()
        self.pending = 0
        self._zero()

    def statistics(self) -> dict[str, Any]:
        """The recorded statistics as numpy: ``variables`` (per variable its name, coordinates,
        steps, value count and sums), ``samples`` [rows, sampled coordinates] (active
        model-rows of the recorded steps side by side), ``sample_columns`` and ``steps``
        (updates observed)."""
        self.fold()  # what is left after training
        observed = self.block.written() - self.start
        if observed != self.counter:
            raise RuntimeError(f"noise monitor: {observed - self.counter} updates were "
                               "observed but never folded: a step ran outside the monitored step")
        steps_active = self.steps_active
        sums = self.sums
        pairs = float(self.pairs)
        variables = []
        for i, (name, size) in enumerate(zip(self.names, self.sizes, strict=True)):
            record = dict(zip(_SUMS, (float(v) for v in sums[i]), strict=True))
            variables.append({"name": name, "coordinates": size, "steps": int(steps_active.max(initial=0)),
                              "count": float(steps_active.sum()) * size, "lag_count": pairs * size, **record})
        counter = self.counter
        rows = min(self.rows, math.ceil(counter / self.stride))
        samples = self.samples[:rows]
        active = self.sample_active[:rows] > 0
        # one row per (step, model) that was active: each is a fresh draw under H0
        flat = samples.transpose(1, 0, 2)[active.T]
        return {"variables": variables, "samples": flat, "sample_columns": list(self.widths),
                "steps": counter, "steps_per_model": steps_active.astype(np.int64).tolist(),
                "sample_stride": int(self.stride)}
