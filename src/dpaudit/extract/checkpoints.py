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

from dpaudit.contract.external import TRAINED_OUTSIDE, is_external
from dpaudit.io import reading

__all__ = ["FLAT_GRADIENT_LIMIT", "external_problem", "load_checkpoints", "not_applicable"]

# Most float32 values of a parent set's flat per-example gradients (2n × P) that Recipes A and B
# hold for a model that is not a Dense stack (``dpaudit.extract.keras_model``): 1 GiB.
FLAT_GRADIENT_LIMIT = 2**28


def not_applicable(train: Mapping) -> str | None:
    """Why Recipes A, B and C do not apply to a run (its ``train.json``), or None when they do."""
    if is_external(train):  # issue 44: no checkpoints or reference pool of its training
        return external_problem(train)
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
    model, params = train.get("model") or "mlp", train.get("n_trainable_parameters")
    if model != "mlp" and params is not None and 2 * int(train["n_members"]) * int(params) > FLAT_GRADIENT_LIMIT:
        # beyond the MLP, the recipes read the flat per-example gradients of the parent set X
        return (f"not applicable: model {model} has {int(params)} parameters, and Recipes A and B would hold "
                f"the flat per-example gradients of the parent set (2n × P = {2 * int(train['n_members'])} × "
                f"{int(params)} floats > {FLAT_GRADIENT_LIMIT}); the Dense factor form applies to the mlp only")
    return None


def external_problem(train: Mapping) -> str | None:
    """Why Recipe A does not apply to a model trained elsewhere (its record), or None when it does: a
    model file whose per-example gradients dpaudit computed (``dpaudit.external.gradients``) at its final
    weights, under a DP-SGD promise that states the clip norm C. Recipes B and C never apply to it."""
    gradients = train.get("per_example_gradients") or {}
    if not gradients.get("available"):
        return (f"not applicable: {TRAINED_OUTSIDE}; Recipes A and B need its per-example gradients at its "
                "weights and checkpoints, Recipe C reference models trained like it"
                + (f" ({gradients['reason']})" if gradients.get("reason") else ""))
    if train.get("promised_mechanism") != "dpsgd":
        return ("not applicable: the promise states no DP-SGD inputs (noise_multiplier, sampling_probability, "
                "steps, delta); Recipe A bounds DP-SGD's Gaussian noise on clipped gradients")
    if train.get("clip_norm") is None:
        return ("not applicable: Recipe A needs the clip norm C, and the promise does not state it; add "
                "promise.clip_norm (the clipping norm the optimizer ran with)")
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
