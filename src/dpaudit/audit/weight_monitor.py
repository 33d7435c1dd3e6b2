"""What each optimizer call of a DP-SGD training found and was given, recorded on the graph side
(issue 45), for the weight certificate (``dpaudit.audit.weight_certificate``).

A ``WeightMonitor`` lives beside the step (``dpaudit.training.gradient_paths.StepContext.apply``):
just before the optimizer call it reads the state the call will change (every trainable variable,
the twin's canary coordinates, the optimizer's slots the rule reads, the model's non-trainable
variables, the optimizer's step count) and the update it hands the optimizer, and writes them as
its columns of one row of a block (``dpaudit.audit.noise_monitor.StepBlock``, one concat and two
stateful ops; ``MechanismObserver`` has it share the noise monitor's). Every ``block_steps`` updates the loop's
``after_step`` hands the block to the ``RuleLedger`` (numpy, vectorized over the block's rows),
which compares each row's state with the rule applied to the row before (the first row with the
state when the monitor was built or reset); ``finish`` compares the last update with the state
after training. Rows are float32 (the variables' own dtype), so the
ledger sees the exact values the kernels computed.

The slots must exist before the step's first trace reads them; tf_keras creates them in its first
``apply_gradients``, so the monitor asks the optimizer to create them when it is built. An
optimizer that keeps no state of the rule's name is a failure of the certificate, not an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpaudit.audit.noise_monitor import StepBlock, share_blocks
from dpaudit.audit.weight_certificate import OptimizerRule, RuleLedger

__all__ = ["WeightMonitor"]


class WeightMonitor:
    """Graph-side rows of (state before the optimizer call, update) of one training; ``block=False``:
    its block comes from ``share_blocks`` before the step is traced."""

    models = 1

    def __init__(self, *, variables: Sequence[Any], optimizer: Any, rule: OptimizerRule, frozen: Sequence[Any] = (),
                 names: Sequence[str] | None = None, block: bool = True):
        from dpaudit import _tf

        self.tf = _tf.tf
        self.variables = list(variables)
        self.rule = rule
        names = [str(n) for n in (names or [v.name for v in self.variables])]
        self.dtype = self.variables[0].dtype.base_dtype
        eps = float(np.finfo(self.dtype.as_numpy_dtype).eps)
        optimizer._create_all_weights(self.variables)
        missing = []
        slots = []
        for kind in rule.slots:
            for name, v in zip(names, self.variables, strict=True):
                try:
                    slots.append(optimizer.get_slot(v, kind))
                except KeyError:
                    slots.append(None)
                    missing.append(f"{name} ({kind} slot)")
        self.frozen = list(frozen)
        self._state = [*self.variables, *slots]
        self._shapes = [tuple(v.shape) for v in self.variables] * (1 + len(rule.slots))
        self.iterations = optimizer.iterations
        sizes = [int(np.prod(v.shape, dtype=np.int64)) for v in self.variables]
        frozen_sizes = [int(np.prod(v.shape, dtype=np.int64)) for v in self.frozen]
        self.ledger_args = (rule, names, sizes, [v.name for v in self.frozen], frozen_sizes)
        self.ledger_kwargs = {"eps": eps, "missing": missing}
        self.ledger = RuleLedger(*self.ledger_args, **self.ledger_kwargs)
        self._start()
        self.width = self.ledger.width
        self.block: StepBlock | None = None
        self.columns = slice(0, self.width)
        self.start = 0  # the block's rows written before this monitor's training
        self.pending = 0
        self.folded = 0
        if block:
            share_blocks([self])

    def bind(self, block: StepBlock, columns: slice) -> None:
        """Record into ``block``'s ``columns`` (``share_blocks``)."""
        self.block, self.columns, self.start = block, columns, 0

    @property
    def block_steps(self) -> int:
        return self.block.block_steps

    def _start(self) -> None:
        """The state now (eager): the first update must find it unchanged (a weight or optimizer state
        moved before training, a data-dependent start, fails as after update 0)."""
        self.ledger.start(self._host_state())

    def start_values(self) -> list[tuple[str, np.ndarray]]:
        """The state read when the monitor was built (``_start``), per variable and in its shape: the
        trainable ones (then a twin's canary coordinates), then the non-trainable ones (float64)."""
        state, ledger = self.ledger.initial, self.ledger
        ends = np.cumsum(ledger.sizes)
        out = [(v.name, state[end - size:end].reshape(v.shape))
               for v, size, end in zip(self.variables, ledger.sizes, ends, strict=True)]
        at = ledger.p * (1 + ledger.n_slots)  # the frozen block follows the variables and their slots
        for v in self.frozen:
            size = int(np.prod(v.shape, dtype=np.int64))
            out.append((v.name, state[at:at + size].reshape(v.shape)))
            at += size
        return out

    def _host_state(self) -> np.ndarray:
        """The state ``observe`` records, read on the host (numpy: eager TensorFlow ops, their kernels rebuilt after
        every run's ``_tf.configure``, cost ~5 ms a read)."""
        dtype = self.dtype.as_numpy_dtype
        # np.asarray of the value read shares its buffer (``.numpy()`` copies it); concatenate copies once
        out = [np.zeros(int(np.prod(shape, dtype=np.int64)), dtype) if value is None else
               np.asarray(value.value()).reshape(-1) for value, shape in zip(self._state, self._shapes, strict=True)]
        out.extend(np.asarray(v.value()).reshape(-1) for v in [*self.frozen, self.iterations])
        return np.concatenate(out, dtype=dtype, casting="unsafe")

    def observe(self, updates: Sequence[Any]) -> None:
        """Inside the step, just before the optimizer call: the state it will change and the update
        it is handed (one per trainable variable, in ``variables`` order), its columns of one row.

        Raw ops: tracing ``tf.reshape(variable)`` costs ~4× a raw read and reshape (its Python
        wrappers), and every run traces its step again; the graph is the same."""
        tf, raw, dtype = self.tf, self.tf.raw_ops, self.dtype
        if self.block is None:
            raise RuntimeError("weight monitor built with block=False has no block yet: share_blocks gives it one "
                               "before the step is traced")
        block = self.block
        parts = []
        for value, shape in zip(self._state, self._shapes, strict=True):
            parts.append(tf.zeros([int(np.prod(shape, dtype=np.int64))], dtype) if value is None
                         else block.flat(raw.ReadVariableOp(resource=value.handle, dtype=dtype), dtype))
        parts.extend(block.flat(raw.ReadVariableOp(resource=v.handle, dtype=v.dtype.base_dtype), dtype)
                     for v in [*self.frozen, self.iterations])
        parts.extend(block.flat(u, dtype) for u in updates)
        self.block.stage(self, parts)

    def after_step(self) -> None:
        """The loop's call after each update (``build_train_step`` wraps its steps with it)."""
        self.pending += 1
        if self.pending == self.block_steps:
            self.fold()

    def fold(self) -> None:
        if self.pending == 0:
            return
        observed = self.block.written() - self.start
        if observed - self.folded != self.pending:
            raise RuntimeError(f"weight monitor: the step recorded {observed - self.folded} optimizer calls since the "
                               f"last fold, the loop reported {self.pending} updates; every optimizer call of the "
                               "training must go through StepContext.apply, once per update")
        self.ledger.add(self.block.rows(self.start + self.folded, self.pending)[:, 0, self.columns])
        self.folded = observed
        self.pending = 0

    def finish(self) -> dict[str, Any]:
        """After training: the last update against the state it left; the weight certificate's record."""
        self.fold()
        observed = self.block.written() - self.start
        if observed != self.folded:
            raise RuntimeError(f"weight monitor: {observed - self.folded} optimizer calls were "
                               "recorded but never reported by the loop: a step ran outside the monitored step")
        final = self._host_state()
        return self.ledger.finish(final)

    def reset(self) -> None:
        """Forget everything (a monitor reused for another training of the same step); the block's rows
        from here on are this training's (a monitor sharing the block is not reset)."""
        self.start = self.block.written()
        self.pending = 0
        self.folded = 0
        self.ledger = RuleLedger(*self.ledger_args, **self.ledger_kwargs)
        self._start()
