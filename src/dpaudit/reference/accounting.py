"""The accounting of a recipe's reference models (issue 24): the target's, and each model's own.

A recipe's target runs ``train_model`` on its n members: sampling rate q = B/n, steps =
⌊n/B⌋·epochs, σ calibrated to the target ε (or given), the fixed divisor B
(``recipe_accounting``, the same functions and arguments as ``train_model``).

A reference model is the recipe retrained, as a practitioner would, on its own training
set: model k's n_k rows of the audit population P (a random half, so n_k ≈ |P|/2, which
is not n: 0.75·n with the default 50/25/25 split). It keeps everything the recipe fixes
(expected batch B, epochs, σ, clip norm, learning rate, optimizer, the divisor B) and
runs ``train_model``'s accounting on n_k members (``model_accounting``):

* Poisson: q_k = B/n_k, steps_k = ⌊n_k/B⌋·epochs (its expected batch is B, its updates
  as large and as noisy as the target's);
* shuffle: fixed batches of B, ⌊n_k/B⌋ of them per epoch (the sampler already did this).

Each model has its own rate, as ``train_model`` on the model's half would: model k IS the
run ``train_model`` releases with seed ``seeds[k]`` on those rows. A common rate
B/(|P|/2) for every model would give one ε but make every model's expected batch
q·n_k ≠ B by the spread of n_k (a few per cent), and no model a ``train_model`` run.

The models' ε therefore differ from the target's: with the same σ and the same expected
number of draws per example (epochs), a larger q amplifies less, so ε_k > ε when
n_k < n (shuffle: ε depends on σ and epochs only, ε_k = ε). ``model_accounting`` computes
every ε_k with ``dpaudit.dp.accounting.dpsgd_epsilon``, the function ``train_model`` calls,
with the same arguments (one call per distinct n_k; the target's recorded ε when n_k =
n). This imports dp_accounting (about 1 s) in the pool job, which otherwise reads σ and
the target's ε from the recipe's train.json: the price of recording each model's own
claim rather than the target's, which the models do not carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpaudit.contract.mechanisms import LINEAR_MECHANISMS
from dpaudit.dp import accounting
from dpaudit.training import sampling
from dpaudit.training.params import normalize_params

__all__ = ["REFERENCE_RULE", "model_accounting", "recipe_accounting"]

REFERENCE_RULE = ("each reference model retrains the recipe on its own half of P as train_model would on "
                  "n_k rows: expected batch B (q_k = B/n_k, Poisson), steps_k = floor(n_k/B)*epochs, the "
                  "target's noise multiplier, clip norm, learning rate and divisor B; its accountant epsilon "
                  "is its own (reference_epsilon), not the target's (target_epsilon)")


def recipe_accounting(params: dict[str, Any], n_members: int,
                      recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """q, steps, σ and the accountant's ε of the recipe's TARGET, as ``train_model`` computes
    them for a run on ``n_members`` members (same functions, same arguments).

    ``recorded``: the train.json of one of the recipe's runs. Its σ and ε are taken as they
    are (the target's own numbers; the noise calibration, seconds of accountant calls, is
    not repeated) once its q, steps and member count are checked to be the recipe's."""
    p = normalize_params(params)
    n = int(n_members)
    if p["mechanism"] in LINEAR_MECHANISMS:  # one exact fit: pure ε, no steps or sampling
        return {"params": p, "sampling_probability": None, "steps": None, "steps_per_epoch": None,
                "noise_multiplier": None, "epsilon": p["target_epsilon"], "n_members": n}
    batch_size = p["batch_size"]
    q = batch_size / n
    spe = sampling.steps_per_epoch(n, batch_size)
    steps = spe * p["epochs"]
    sigma, epsilon = 0.0, math.inf
    if recorded is not None:
        _check_recorded(recorded, p, n, q, steps)
    if p["mechanism"] == "dpsgd" and recorded is not None:
        sigma, epsilon = float(recorded["noise_multiplier"]), float(recorded["epsilon"])
    elif p["mechanism"] == "dpsgd":
        if p["noise_multiplier"] is None:
            sigma = accounting.calibrate_noise(p["target_epsilon"], q, steps, p["delta"], p["accountant"],
                                               p["sampling"])
        else:
            sigma = p["noise_multiplier"]
        epsilon = float(accounting.dpsgd_epsilon(sigma, q, steps, p["delta"], p["accountant"],
                                                 p["sampling"])["epsilon"])
    return {"params": p, "sampling_probability": q, "steps": steps, "steps_per_epoch": spe,
            "noise_multiplier": float(sigma), "epsilon": epsilon, "n_members": n}


def _check_recorded(recorded: Mapping[str, Any], p: dict[str, Any], n: int, q: float, steps: int) -> None:
    """Refuse a train.json that is not a run of the recipe ``p`` on ``n`` members."""
    keys = ("target_epsilon", "noise_multiplier", "delta", "accountant", "sampling", "batch_size", "epochs",
            "clip_norm")
    hyper = recorded.get("hyperparameters") or {}
    want = {"mechanism": p["mechanism"], "n_members": n, "sampling_probability": q, "steps": steps,
            **{key: p[key] for key in keys}}
    got = {"mechanism": recorded.get("mechanism"), "n_members": recorded.get("n_members"),
           "sampling_probability": recorded.get("sampling_probability"), "steps": recorded.get("steps"),
           **{key: hyper.get(key) for key in keys}}
    if got != want:
        raise ValueError(f"the recorded run is not of this recipe: it has {got}, the recipe {want}")


def model_accounting(acc: Mapping[str, Any], training_rows) -> dict[str, Any]:
    """Each reference model's own accounting (module docstring) from the target's ``acc``
    (``recipe_accounting``) and the models' training-set sizes n_k [K].

    Returns ``training_rows`` [K], ``noise_multiplier`` (the target's σ) and, per model, ``sampling_probability`` (B/n_k),
    ``steps_per_epoch`` (⌊n_k/B⌋), ``steps`` and ``epsilon`` (``dpsgd_epsilon`` at the
    target's σ; ∞ for a baseline; the recipe's pure ε for a linear mechanism), each a
    list of K Python numbers (None for the linear mechanisms' q and steps)."""
    p = acc["params"]
    rows = [int(s) for s in np.asarray(training_rows).reshape(-1)]
    out: dict[str, Any] = {"training_rows": rows, "noise_multiplier": acc["noise_multiplier"]}
    if p["mechanism"] in LINEAR_MECHANISMS:
        return {**out, "sampling_probability": None, "steps_per_epoch": None, "steps": None,
                "epsilon": [float(acc["epsilon"])] * len(rows)}
    batch_size, epochs = p["batch_size"], p["epochs"]
    short = [(k, s) for k, s in enumerate(rows) if s < batch_size]
    if short:
        k, s = short[0]
        raise ValueError(f"reference model {k} has {s} training rows (its half of the audit population P), fewer "
                         f"than batch_size={batch_size}: the recipe cannot be retrained on it as train_model would "
                         f"(q = B/n_k > 1); {len(short)} of {len(rows)} models are short. Use a smaller "
                         "batch_size or more members and non-members")
    q = [batch_size / s for s in rows]  # train_model's float: batch_size / n
    spe = [sampling.steps_per_epoch(s, batch_size) for s in rows]
    steps = [e * epochs for e in spe]
    if p["mechanism"] != "dpsgd":
        epsilon = [math.inf] * len(rows)
    else:
        known = {int(acc["n_members"]): float(acc["epsilon"])}  # the target's own (recorded) call
        for s, qk, tk in zip(rows, q, steps, strict=True):
            if s not in known:
                known[s] = float(accounting.dpsgd_epsilon(acc["noise_multiplier"], qk, tk, p["delta"],
                                                          p["accountant"], p["sampling"])["epsilon"])
        epsilon = [known[s] for s in rows]
    return {**out, "sampling_probability": q, "steps_per_epoch": spe, "steps": steps, "epsilon": epsilon}
