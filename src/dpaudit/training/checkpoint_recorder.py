"""Weights of a DP-SGD or baseline run at K evenly spaced steps (``train_model(checkpoints=K)``),
for the practical-membership-privacy family's Recipe B (``dpaudit.extract.checkpoints``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.io import atomic_path

__all__ = ["CheckpointRecorder"]


class CheckpointRecorder:
    """Weights at K evenly spaced step indices t_0 = 0 < t_1 < ... (before that step runs).

    Checkpoint k stands for the T_k = t_{k+1} − t_k steps that follow it. The
    .npz holds ``start_step`` and ``steps_represented`` (int64, length K) and
    ``w{k}_{j}`` (the j-th weight array of ``model.get_weights()`` at checkpoint k).
    """

    def __init__(self, count: int, total_steps: int, model):
        count = int(count)
        if count < 1:
            raise ValueError(f"checkpoints must be >= 1, got {count}")
        self.starts = np.unique(np.linspace(0, total_steps, count, endpoint=False).astype(np.int64))
        self.total_steps = int(total_steps)
        self.model = model
        self.step = 0
        self.weights: list[list[np.ndarray]] = []

    def before_step(self) -> None:
        if len(self.weights) < self.starts.size and self.step == self.starts[len(self.weights)]:
            self.weights.append([w.copy() for w in self.model.get_weights()])
        self.step += 1

    def save(self, path: str | Path) -> None:
        arrays = {f"w{k}_{j}": w for k, ws in enumerate(self.weights) for j, w in enumerate(ws)}
        ends = np.r_[self.starts[1:], self.total_steps]
        with atomic_path(path, suffix=".npz") as tmp:
            np.savez(tmp, start_step=self.starts, steps_represented=ends - self.starts, **arrays)
