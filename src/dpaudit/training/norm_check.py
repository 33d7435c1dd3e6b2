"""The audit twin's per-example norm check, decided on what DP needs (issues 22, 32, 45).

DP-SGD's sensitivity bound asks two things of every clipped unit (an example, or a microbatch
group): the gradient the step summed is the unit's own (it does not depend on the other examples
of the batch), and it was clipped at its own norm (the clip weight min(1, C/‖g‖) read the norm of
that very gradient). At every step the twin checks ``NORM_CHECK_EXAMPLES`` random units three ways
(``dpaudit.training.gradient_paths.StepContext.checked``):

* ``fast``: the norm the gradient path clipped by;
* ``batched``: the norm of the unit's gradient through the step's own forward pass (one more
  backward pass on the step's tape): the gradient that was summed, with the same float32 rounding;
* ``alone``: the norm from one tape of the unit alone through Keras' own layer calls, and ``gap``,
  the largest difference of its logits there from the step's, relative to max(1, |logit|).

Decision:

* ``fast`` ≠ ``batched`` (relative difference > ``NORM_CHECK_RTOL``): the path clips by a norm that
  is not the norm of the gradient it sums: the twin stops (a real norm bug);
* ``alone`` ≠ ``batched`` and the logits differ beyond rounding (``gap`` > ``FORWARD_RTOL``): the
  unit's forward pass depends on the batch: the twin stops;
* ``alone`` ≠ ``batched`` with logits equal to rounding: float32 rounding put a pre-activation on
  the other side of a kink (ReLU, max pooling) alone than in the batch. The values are continuous
  across a kink, the derivative is not, so the two gradients differ while both are the unit's
  own; the summed one was clipped at its own norm. Counted (``kinks``), not a stop. A backward
  pass that mixed examples while the forward pass did not would also land here: no layer
  ``layer_clipping`` covers does that (``model_chain`` refuses layers that mix examples).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FORWARD_RTOL", "NormCheck"]

# float32 logits of one example alone and in a batch agree to ~1e-6 relative; a layer that mixes
# examples moves them by O(1/B)
FORWARD_RTOL = 1e-4


@dataclass
class NormCheck:
    """The twin's norm checks of one training (``dpaudit.training.train``'s loop calls it per step)."""

    rtol: float
    run: str | None
    implementation: str | None
    member_ids: np.ndarray
    n: int
    checks: int = 0
    kinks: int = 0
    largest_kink: float = 0.0

    def _unit(self, j: int, rows: np.ndarray | None, groups: np.ndarray | None) -> str:
        if groups is not None:
            return f"microbatch group {int(groups[j])}"
        row = int(rows[j])
        return f"example_id {int(self.member_ids[row])}" if row < self.n else f"input canary {row - self.n}"

    def __call__(self, fast: np.ndarray, batched: np.ndarray, alone: np.ndarray, gap: np.ndarray, *, step: int,
                 rows: np.ndarray | None = None, groups: np.ndarray | None = None) -> None:
        """Check one step's units; stop (RuntimeError) on a norm that is not the summed gradient's
        or on a forward pass that depends on the batch."""
        label = f"run {self.run!r}" if self.run is not None else "this run"
        fast, batched, alone, gap = (np.asarray(a, np.float64) for a in (fast, batched, alone, gap))
        self.checks += fast.size
        wrong = np.abs(fast - batched) > self.rtol * np.maximum(np.abs(batched), 1e-6)
        if wrong.any():
            j = int(np.flatnonzero(wrong)[0])
            raise RuntimeError(
                f"audit twin of {label}: the per-example gradient norm of {self._unit(j, rows, groups)} at step "
                f"{step} is {fast[j]:.6g} on the {self.implementation} path but the gradient it summed has norm "
                f"{batched[j]:.6g} (relative difference {abs(fast[j] - batched[j]) / max(batched[j], 1e-6):.3g} > "
                f"{self.rtol:g}; one tape per example alone: {alone[j]:.6g}): this implementation clips gradients by "
                "norms that are not theirs, so its DP guarantee does not hold")
        differs = np.abs(alone - batched) > self.rtol * np.maximum(np.abs(alone), 1e-6)
        mixed = differs & (gap > FORWARD_RTOL)
        if mixed.any():
            j = int(np.flatnonzero(mixed)[0])
            raise RuntimeError(
                f"audit twin of {label}: the gradient summed for {self._unit(j, rows, groups)} at step {step} is not "
                f"its own: its norm is {batched[j]:.6g} in the batch and {alone[j]:.6g} from one tape alone, and its "
                f"logits differ by {gap[j]:.3g} (relative; rounding is below {FORWARD_RTOL:g}): the "
                f"{self.implementation} path's forward pass depends on the other examples of the batch, so its DP "
                "guarantee does not hold")
        if differs.any():
            self.kinks += int(differs.sum())
            relative = np.abs(alone - batched)[differs] / np.maximum(np.abs(alone[differs]), 1e-6)
            self.largest_kink = max(self.largest_kink, float(relative.max()))

    def record(self) -> dict[str, Any]:
        """What the twin's record keeps of its norm checks."""
        return {"norm_checks": int(self.checks), "norm_check_kinks": int(self.kinks),
                "norm_check_largest_kink": float(self.largest_kink)}
