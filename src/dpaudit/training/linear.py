"""Output and objective perturbation of L2-regularized logistic regression as grid mechanisms.

LeBlond et al. 2023 on Chaudhuri et al. (2011): binary labels t ∈ {−1, +1}
(dataset labels 0/1 mapped by t = 2y − 1), no intercept, mean-form objective

    J(w) = (1/n) Σ_j ln(1 + exp(−t_j wᵀx̃_j)) + (Λ/2)‖w‖²,

with Λ = ``linear_regularization``. Both mechanisms are pure ε-DP (δ = 0) for
replace-one neighbours (Chaudhuri's relation: one row replaced, n fixed) when every
row has ‖x̃‖ ≤ 1:

* ``output_perturbation`` (Chaudhuri Alg. 1): the exact minimizer plus noise of
  density ∝ exp(−β‖b‖₂), β = nΛε/2 (L2 sensitivity 2/(nΛ)); E‖b‖ = d/β.
* ``objective_perturbation``: diffprivlib 0.6.3's LogisticRegression without an
  intercept (its sum-form variant of Chaudhuri Alg. 2 with C = 1/(nΛ); its ε′ and
  Δ use 0.5α where Alg. 2 uses α = 1/C, which only adds noise or regularization,
  so the ε-DP claim of Alg. 2 carries over). Like Alg. 2 it assumes the exact
  minimizer; diffprivlib's L-BFGS settings (maxiter 100, pgtol 1e−4) are kept.

The maths lives in ``dpaudit.profile`` (Newton fit, β, L2-Laplace noise, objective
perturbation); this module only prepares the members split, calls it and releases
the weights as a Keras model (``dpaudit.training.models.build_linear``) so
extraction, metrics and cards read it like any other run.

Features: every row is divided by the largest row norm of the members split
(LeBlond et al. 2023's unit-ball scaling), recorded as ``feature_scale`` and built into the saved model.
That scale is computed from the private rows; this data-dependent step is outside
the ε-DP guarantee, as in the source.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from dpaudit.contract.mechanisms import LINEAR_MECHANISMS
from dpaudit.io import atomic_path
from dpaudit.profile import mechanisms as profile_mechanisms
from dpaudit.profile import model as profile_model
from dpaudit.training.divergence import majority_rate, no_skill_reason
from dpaudit.training.models import build_linear, features, save_model

__all__ = [
    "DEFAULT_REGULARIZATION",
    "FEATURE_SCALING_NOTE",
    "GRADIENT_NOTE",
    "NEIGHBOURING_RELATION",
    "feature_scale",
    "release_weights",
    "train_linear",
]

DEFAULT_REGULARIZATION = 1.0  # LeBlond et al. 2023: Λ = 1 (the schema's default too)
NEIGHBOURING_RELATION = "replace_one"
ACCOUNTANT = "pure"  # exact pure ε-DP by the mechanism's theorem, no numerical accountant
NOISE_SEED_STREAM = 3  # rng = default_rng([seed, 3]); DP-SGD uses [seed, 1] and [seed, 2]

FEATURE_SCALING_NOTE = (
    "Rows are divided by feature_scale, the largest row norm of the members split (LeBlond et al. 2023's unit-ball scaling), "
    "so every training row has norm <= 1 as the sensitivity analysis needs; the saved model applies the "
    "same scale (a Rescaling layer). The scale is computed from the private training rows: this "
    "data-dependent step is outside the epsilon-DP guarantee, as in the source. Non-member rows may "
    "have norm > 1 after it; they are not trained on."
)
GRADIENT_NOTE = (
    "The Keras model's logits layer is a bias-free Dense(2) with kernel columns (0, w): the extracted "
    "per-example gradient is over both columns, which hold opposite copies of the logistic-loss gradient, "
    "so grad_norm = sqrt(2) x the norm of the gradient of ln(1 + exp(-t w.x)) over w (scaled features)."
)
PRIVACY_NOTES = {
    "output_perturbation": (
        "Pure epsilon-DP (delta = 0) for replace-one neighbours with rows in the unit ball: Chaudhuri et al. "
        "2011 Thm 6, L2 sensitivity 2/(n Lambda) of the exact minimizer, noise density ~ exp(-beta ||b||), "
        "beta = n Lambda epsilon / 2. Not claimed for add/remove neighbours (a removal changes n; LeBlond et al. 2023 "
        "give 2/((n-1) Lambda) for it)."
    ),
    "objective_perturbation": (
        "Pure epsilon-DP (delta = 0) for replace-one neighbours with rows in the unit ball: Chaudhuri et al. "
        "2011 Alg. 2 as implemented by diffprivlib 0.6.3 (its 0.5 alpha constants are conservative). The "
        "theorem assumes the exact minimizer of the perturbed objective; L-BFGS stops at diffprivlib's "
        "tolerance (pgtol 1e-4, at most 100 iterations)."
    ),
}


def feature_scale(x_members: np.ndarray) -> float:
    """Largest row norm of the members (float64): dividing by it puts every member in the unit ball."""
    norms = np.linalg.norm(np.asarray(x_members, dtype=np.float64), axis=1)
    scale = float(norms.max()) if norms.size else 0.0
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"cannot scale features: the largest member row norm is {scale!r}")
    return scale


def release_weights(x: np.ndarray, t: np.ndarray, mechanism: str, epsilon: float, lam: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    """Released weights of one run and what to record about them.

    ``x`` (n × d, rows in the unit ball) and ``t`` (±1) are the training rows after
    scaling. The non-private minimizer A(x) is always computed (Newton, exact) so its
    norm is recorded; output perturbation adds noise to it, objective perturbation
    solves its own perturbed objective.
    """
    if mechanism not in LINEAR_MECHANISMS:
        raise ValueError(f"mechanism must be one of {LINEAR_MECHANISMS}, got {mechanism!r}")
    base = profile_model.fit(x, t, lam, allow_zero_rows=True)
    n, d = x.shape
    record: dict[str, Any] = {
        "nonprivate_weights_norm": float(np.linalg.norm(base.weights)),
        "nonprivate_objective": base.objective,
        "newton_iterations": base.n_iter,
    }
    if mechanism == "output_perturbation":
        beta = profile_mechanisms.output_perturbation_beta(n, lam, epsilon)
        released = profile_mechanisms.output_perturbation(base.weights, beta, 1, rng)[0]
        record |= {
            "beta": float(beta),
            "sensitivity": 2.0 / (n * lam),
            "noise_norm": float(np.linalg.norm(released - base.weights)),
            "expected_noise_norm": d / float(beta),
            "algorithm": "chaudhuri-2011-alg1-output-perturbation",
        }
    else:
        released, info = profile_mechanisms.objective_perturbation(x, t, epsilon, 1.0 / (n * lam), rng, data_norm=1.0)
        record |= {
            "beta": None,
            "C": info["C"],
            "epsilon_prime": info["epsilon_prime"],
            "extra_regularizer": info["extra_regularizer"],
            "noise_scale": info["noise_scale"],
            "noise_norm": info["noise_norm"],
            "expected_noise_norm": d * info["noise_scale"],
            "lbfgs_iterations": info["lbfgs_iterations"],
            "algorithm": info["algorithm"],
        }
    record["released_weights_norm"] = float(np.linalg.norm(released))
    from dpaudit.dp.noise_certificate import certify_l2_laplace

    if mechanism == "output_perturbation":  # the promise's scale, derived here again: 1/β = 2/(nΛε)
        scale, claimed_from = 2.0 / (n * lam * epsilon), "1/β = 2/(nΛε), Chaudhuri et al. 2011 Alg. 1"
    else:
        scale, claimed_from = record["noise_scale"], "2/ε′ of diffprivlib 0.6.3's objective perturbation"
    record["noise_check"] = certify_l2_laplace(record["noise_norm"], d, scale, claimed_from=claimed_from)
    return released, record


def _loss_and_accuracy(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """Mean logistic (= 2-class cross-entropy) loss and accuracy of σ(w·x) on labels 0/1."""
    if not len(x):
        return math.nan, math.nan
    t = 2.0 * y - 1.0
    margins = t * (x @ weights)
    return float(np.mean(np.logaddexp(0.0, -margins))), float(np.mean((expit(x @ weights) >= 0.5) == (y == 1)))


def train_linear(examples: pd.DataFrame, splits: dict[str, str], p: dict[str, Any], model_path: Path, *,
                 threads: int, log: logging.Logger, run: str | None = None, dataset: str | None = None,
                 checkpoints: int = 0, checkpoint_path: str | Path | None = None) -> dict[str, Any]:
    """Fit, perturb and save one linear run; return its train info (``p`` from normalize_params)."""
    wall0 = time.perf_counter()
    mechanism = p["mechanism"]
    members = examples[examples["split"] == splits["members"]]
    utility = examples[examples["split"] == splits["utility"]]
    labels = examples["label"].to_numpy(dtype=np.int64)
    n_classes = int(p["n_classes"] or int(labels.max()) + 1)
    if n_classes != 2 or not np.isin(labels, (0, 1)).all():
        where = f"dataset {dataset!r}" if dataset is not None else "the dataset"
        raise ValueError(
            f"mechanism {mechanism}" + (f" of run {run!r}" if run is not None else "")
            + f" is binary logistic regression, but {where} has {n_classes} classes "
            f"(labels {sorted(np.unique(labels).tolist())[:10]})"
        )
    if len(members) < 2:
        raise ValueError(f"members split {splits['members']!r} has {len(members)} examples")

    x_raw = features(members).astype(np.float64)
    y = members["label"].to_numpy(dtype=np.int64)
    scale = feature_scale(x_raw)
    x = x_raw / scale
    n, d = x.shape
    lam, epsilon = p["linear_regularization"], p["target_epsilon"]
    noise_seed = [p["seed"], NOISE_SEED_STREAM]
    t0 = time.perf_counter()
    weights, record = release_weights(x, 2.0 * y - 1.0, mechanism, epsilon, lam, np.random.default_rng(noise_seed))
    seconds = time.perf_counter() - t0
    log.info("%s: n=%d d=%d Λ=%g ε=%g feature_scale=%.4g ‖w_nonprivate‖=%.4g noise norm=%.4g (expected %.4g)",
             mechanism, n, d, lam, epsilon, scale, record["nonprivate_weights_norm"], record["noise_norm"],
             record["expected_noise_norm"])

    loss, accuracy = _loss_and_accuracy(x, y, weights)
    history = {"epoch": 1, "loss": loss, "accuracy": accuracy, "examples_seen": int(n), "seconds": seconds,
               "note": "one record: the released model (an exact fit, no epochs)"}
    if len(utility):
        x_util = features(utility).astype(np.float64) / scale
        history["utility_loss"], history["utility_accuracy"] = _loss_and_accuracy(
            x_util, utility["label"].to_numpy(dtype=np.int64), weights)

    # the no-skill rule of the Keras runs (dpaudit.training.divergence), on the same rows
    scored = utility if len(utility) else members
    scored_labels = scored["label"].to_numpy(dtype=np.int64)
    scored_accuracy = history.get("utility_accuracy", accuracy) if len(utility) else accuracy
    skill = no_skill_reason(int(round(scored_accuracy * len(scored))), len(scored), majority_rate(scored_labels),
                            where="held-out" if len(utility) else "training")
    if skill is not None:
        log.warning("%s", skill)

    from dpaudit import _tf

    threads = _tf.configure(threads, p["seed"])  # the count the process's pools really use
    model = build_linear(weights, scale)
    save_model(model, model_path)
    if checkpoints:
        # The pmp family reads checkpoints of DP-SGD runs only; a linear run has no
        # trajectory, so its file holds no checkpoint (zero steps represented).
        if checkpoint_path is None:
            raise ValueError("checkpoints > 0 needs a checkpoint_path")
        with atomic_path(checkpoint_path, suffix=".npz") as tmp:
            np.savez(tmp, start_step=np.zeros(0, np.int64), steps_represented=np.zeros(0, np.int64))

    not_applicable = dict.fromkeys(
        ("optimizer", "optimizer_class", "dp_implementation", "epochs", "batch_size", "learning_rate", "momentum",
         "hidden_units", "activation", "dropout", "clip_norm", "sampling", "sampling_probability", "steps",
         "steps_per_epoch", "expected_batch_size", "empty_batches", "microbatches", "microbatch_dropped_examples",
         "accounting_note", "clipped_fraction", "noise_multiplier", "orders", "amplification"))
    return {
        "mechanism": mechanism,
        **not_applicable,
        "hyperparameters": dict(p),
        "target_epsilon": epsilon,
        "linear_regularization": lam,
        "objective": "mean-form: (1/n) sum ln(1 + exp(-t w.x)) + (Lambda/2) ||w||^2, no intercept, t = 2 y - 1",
        "delta": 0.0,
        "epsilon": float(epsilon),
        "accountant": ACCOUNTANT,
        "neighbouring_relation": NEIGHBOURING_RELATION,
        "privacy_note": PRIVACY_NOTES[mechanism],
        # ε* needs δ > 0 and the grid's other runs are audited at the dataset's δ: a
        # pure ε-DP run is (ε, δ)-DP for every δ ≥ 0, so its audits use that δ too.
        "evaluation_delta": p["delta"],
        # one exact fit, no training loss to diverge (the key every train.json carries)
        "loss_diverged": False,
        "loss_divergence_reason": None,
        "no_skill": skill is not None,
        "no_skill_reason": skill,
        "training_note": None,
        "instability_note": None,
        "warnings": [] if skill is None else [f"run {run!r}: {skill}" if run is not None else skill],
        **record,
        "feature_scale": scale,
        "feature_scale_rows": "members",
        "feature_scaling_note": FEATURE_SCALING_NOTE,
        "gradient_note": GRADIENT_NOTE,
        "n_members": int(n),
        "n_utility": int(len(utility)),
        "n_features": int(d),
        "n_classes": n_classes,
        "splits": dict(splits),
        "seeds": {"seed": p["seed"], "noise": noise_seed, "tf_global": p["seed"]},
        "threads": int(threads),
        "history": [history],
        "train_seconds": seconds,
        "wall_time_seconds": time.perf_counter() - wall0,
        "model_file": model_path.name,
        "versions": {**_tf.versions(), "scipy": _scipy_version()},
    }


def _scipy_version() -> str:
    import scipy

    return scipy.__version__
