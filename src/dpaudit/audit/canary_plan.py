"""The canaries of an audit twin, drawn before training (``dpaudit.audit.twin``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpaudit.logs import InputRefusal
from dpaudit.training.models import features

__all__ = ["CanaryPlan", "plan_canaries"]


@dataclass(frozen=True)
class CanaryPlan:
    """Which canaries exist and which are included (fixed before training)."""

    gradient_included: np.ndarray  # bool [m_gradient]
    input_x: np.ndarray  # float32 [m_input, d]
    input_labels: np.ndarray  # int64 [m_input], the changed labels
    input_example_ids: np.ndarray  # int64 [m_input], where the rows came from
    input_included: np.ndarray  # bool [m_input]
    gradient_norm: float
    seed: int


def plan_canaries(examples: pd.DataFrame, splits: dict[str, str], *, gradient_canaries: int,
                  input_canaries: int, gradient_norm: float, n_classes: int, seed: int) -> CanaryPlan:
    """Draw the canaries and their inclusion bits from ``seed`` (NumPy SeedSequence)."""
    if gradient_canaries < 0 or input_canaries < 0:
        raise ValueError(f"canary counts must be >= 0, got {gradient_canaries} and {input_canaries}")
    if not np.isfinite(gradient_norm) or gradient_norm <= 0:
        raise ValueError(f"canary gradient_norm must be finite and > 0, got {gradient_norm}")
    rng = np.random.default_rng([int(seed), 17])
    gradient_included = rng.random(int(gradient_canaries)) < 0.5
    pool = examples[examples["split"] == splits["nonmembers"]]
    if input_canaries > len(pool):
        raise InputRefusal(
            f"{input_canaries} input canaries requested but the non-member split {splits['nonmembers']!r} "
            f"has {len(pool)} rows; set metrics.canary.input_canaries <= {len(pool)}"
        )
    chosen = np.sort(rng.choice(len(pool), size=int(input_canaries), replace=False))
    rows = pool.iloc[chosen]
    labels = (rows["label"].to_numpy(dtype=np.int64) + 1) % int(n_classes)
    input_included = rng.random(int(input_canaries)) < 0.5
    x = features(rows) if len(rows) else np.zeros((0, 0), np.float32)
    return CanaryPlan(gradient_included=gradient_included, input_x=x, input_labels=labels,
                      input_example_ids=rows["example_id"].to_numpy(dtype=np.int64),
                      input_included=input_included, gradient_norm=float(gradient_norm), seed=int(seed))
