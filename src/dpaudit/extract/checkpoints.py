"""Weight checkpoints and the applicability of the pmp family's recipes (Lowy et al. 2024).

Recipes A and B of ``dpaudit.metrics.pmp`` need the per-example CE gradients of the
parent set X at the final weights (Recipe A) and at every checkpoint training wrote
to ``checkpoints.npz`` (Recipe B). ``extract_per_example`` computes them in numpy
(``dpaudit.extract.extract.write_pmp_pairs_of_model``) and keeps what the recipes need
(``dpaudit.extract.pmp_pairs``). The metric's code depends on this module too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dpaudit.io import reading

__all__ = ["load_checkpoints", "not_applicable"]


def not_applicable(train: Mapping) -> str | None:
    """Why Recipes A, B and C do not apply to a run (its ``train.json``), or None when they do."""
    eps = float(train["epsilon"])
    if not math.isfinite(eps):
        return ("not applicable: non-private run (epsilon = inf); PMP bounds need the Gaussian noise of DP-SGD, "
                "and a finite PMP value for it would be made up")
    if train.get("mechanism") != "dpsgd":
        return (f"not applicable: mechanism {train.get('mechanism')} (epsilon = {eps:g}) is not DP-SGD; "
                "Recipes A, B and C bound DP-SGD's Gaussian noise on clipped gradients")
    if train.get("microbatches"):
        return ("not applicable: microbatches clip group means, not examples; Recipes A and B assume "
                "per-example clipping")
    return None


def load_checkpoints(path) -> list[dict]:
    """The weights of ``checkpoints.npz`` (``dpaudit.training.train``): start step, steps represented, arrays."""
    with reading(path), np.load(path) as data:
        starts = data["start_step"]
        steps = data["steps_represented"]
        out = []
        for k in range(starts.size):
            keys = sorted((key for key in data.files if key.startswith(f"w{k}_")),
                          key=lambda key: int(key.split("_")[1]))
            out.append({"start_step": int(starts[k]), "steps": int(steps[k]),
                        "weights": [data[key] for key in keys]})
    return out
