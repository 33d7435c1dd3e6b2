"""Train a baseline or DP-SGD Keras model on the members split (the training driver).

Output and objective perturbation of logistic regression (numpy/scipy, no
TensorFlow training) are dispatched to ``dpaudit.training.linear``.

Parameters are checked and filled here (``normalize_params``), the noise is
calibrated by ``dpaudit.training.accounting``, batches come from
``dpaudit.training.sampling``, and each update is one step of
``dpaudit.training.steps`` (the DP-SGD update rule, microbatching and the gradient
implementations are documented there; ``build_train_step`` stays importable
from here).

The accountant is NOT told about microbatches (as in TF Privacy, Negoescu et al. 2023's library): it assumes each
example moves the noised sum by at most C, while one added or removed example can
move a clipped group mean by up to 2C (see ``MICROBATCH_ACCOUNTING_NOTE``).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.config import LINEAR_MECHANISMS
from dpaudit.io import atomic_path
from dpaudit.training import accounting, sampling
from dpaudit.training.linear import DEFAULT_REGULARIZATION, train_linear
from dpaudit.training.models import build_mlp, features, logits_model, predict_logits, save_model
from dpaudit.training.steps import DP_IMPLEMENTATIONS, build_train_step, optimizer_class_name

__all__ = [
    "DEFAULTS",
    "DP_IMPLEMENTATIONS",
    "MECHANISMS",
    "MICROBATCH_ACCOUNTING_NOTE",
    "OPTIMIZERS",
    "build_train_step",
    "normalize_params",
    "train_model",
]

MECHANISMS = ("baseline", "dpsgd", *LINEAR_MECHANISMS)
# The parameters a linear mechanism reads; any other parameter set for one is refused.
LINEAR_PARAMS = ("mechanism", "target_epsilon", "seed", "linear_regularization", "delta", "n_classes")
OPTIMIZERS = ("sgd", "adam")

MICROBATCH_ACCOUNTING_NOTE = (
    "The accountant treats each example's sensitivity as C (per-example clipping) and "
    "ignores microbatching (as in TF Privacy, Negoescu et al. 2023's library). With microbatches, one example added to or "
    "removed from the batch changes the clipped mean gradient of its group, and that "
    "clipped group mean can move by up to 2C (norm C before and after, opposite "
    "directions) under add/remove-one. The reported epsilon therefore follows the "
    "Epsilon* paper's (TF Privacy's) convention and is not a proven (epsilon, delta) "
    "bound when microbatches is set."
)

DEFAULTS: dict[str, Any] = {
    "mechanism": "baseline",
    "epochs": 10,
    "batch_size": 64,
    "learning_rate": 0.1,
    "optimizer": "sgd",
    "momentum": 0.0,
    "hidden_units": [64],
    "activation": "relu",
    "dropout": 0.0,
    "clip_norm": None,
    "target_epsilon": None,
    "noise_multiplier": None,
    "delta": None,
    "accountant": "rdp",
    "sampling": "poisson",
    "seed": 0,
    "dp_implementation": "auto",
    "n_classes": None,
    "microbatches": None,
    "linear_regularization": None,  # linear mechanisms only; None = DEFAULT_REGULARIZATION
}


def _none_if_na(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        if value is pd.NA:
            return None
    except TypeError:
        pass
    return value


def _microbatches(value: Any) -> int | None:
    if value is None:
        return None
    # A pandas column mixing ints and missing values arrives as float (32.0).
    if isinstance(value, bool) or not float(value).is_integer() or float(value) < 1:
        raise ValueError(f"microbatches must be None or an integer >= 1, got {value!r}")
    return int(value)


def normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults, coerce to plain Python types and check values."""
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training parameters: {sorted(unknown)}")
    given = {k: _none_if_na(v) for k, v in params.items()}
    p = {**DEFAULTS, **given}
    p["mechanism"] = str(p["mechanism"])
    if p["mechanism"] not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {p['mechanism']!r}")
    if p["mechanism"] in LINEAR_MECHANISMS:
        return _normalize_linear(p, given)
    if p.pop("linear_regularization") is not None:
        raise ValueError(f"linear_regularization applies to {LINEAR_MECHANISMS} only, not {p['mechanism']}")
    p["optimizer"] = str(p["optimizer"]).lower()
    if p["optimizer"] not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {p['optimizer']!r}")
    for key in ("epochs", "batch_size", "seed"):
        p[key] = int(p[key])
    if p["epochs"] < 1 or p["batch_size"] < 1:
        raise ValueError("epochs and batch_size must be >= 1")
    p["learning_rate"] = float(p["learning_rate"])
    p["momentum"] = float(p["momentum"] or 0.0)
    p["dropout"] = float(p["dropout"] or 0.0)
    p["hidden_units"] = [int(h) for h in (p["hidden_units"] or [])]
    p["activation"] = str(p["activation"])
    if p["sampling"] not in accounting.SAMPLINGS:
        raise ValueError(f"sampling must be one of {accounting.SAMPLINGS}, got {p['sampling']!r}")
    if p["dp_implementation"] not in DP_IMPLEMENTATIONS:
        raise ValueError(f"dp_implementation must be one of {DP_IMPLEMENTATIONS}")
    if p["mechanism"] == "dpsgd":
        if p["clip_norm"] is None or not float(p["clip_norm"]) > 0:
            raise ValueError("dpsgd needs clip_norm > 0")
        p["clip_norm"] = float(p["clip_norm"])
        if p["accountant"] not in accounting.ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {accounting.ACCOUNTANTS}")
        if p["delta"] is None:
            raise ValueError("dpsgd needs a resolved numeric delta")
        p["delta"] = float(p["delta"])
        if p["noise_multiplier"] is None:
            if p["target_epsilon"] is None:
                raise ValueError("dpsgd needs target_epsilon (or an explicit noise_multiplier)")
            p["target_epsilon"] = float(p["target_epsilon"])
        else:
            p["noise_multiplier"] = float(p["noise_multiplier"])
        p["microbatches"] = _microbatches(p["microbatches"])
    else:
        p["clip_norm"] = None if p["clip_norm"] is None else float(p["clip_norm"])
        p["target_epsilon"] = None
        p["noise_multiplier"] = None
        # dpsgd-only, like target_epsilon: a dataset-wide value does not apply here.
        p["microbatches"] = None
        p["delta"] = None if p["delta"] is None else float(p["delta"])
    return p


def _normalize_linear(p: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    mechanism = p["mechanism"]
    extra = sorted(k for k, v in given.items() if k not in LINEAR_PARAMS and v is not None)
    if extra:
        raise ValueError(f"parameter(s) {extra} do not apply to mechanism {mechanism} (it reads {LINEAR_PARAMS})")
    epsilon = p["target_epsilon"]
    if epsilon is None or not 0 < float(epsilon) < math.inf:
        raise ValueError(f"{mechanism} needs a finite target_epsilon > 0, got {epsilon!r}")
    lam = DEFAULT_REGULARIZATION if p["linear_regularization"] is None else float(p["linear_regularization"])
    if not 0 < lam < math.inf:
        raise ValueError(f"linear_regularization must be finite and > 0, got {lam!r}")
    return {
        "mechanism": mechanism,
        "target_epsilon": float(epsilon),
        "seed": int(p["seed"]),
        "linear_regularization": lam,
        # the dataset's δ: not the guarantee's (δ = 0) but the one the audits use
        "delta": None if p["delta"] is None else float(p["delta"]),
        "n_classes": None if p["n_classes"] is None else int(p["n_classes"]),
    }


def _resolve_implementation(p: dict[str, Any]) -> str:
    impl = p["dp_implementation"]
    if p["microbatches"] is not None:
        # Neither tensorflow-privacy path can split a Poisson batch whose size k
        # does not divide, so microbatches always use the group-gradient path.
        if impl not in ("auto", "microbatch_group_gradients"):
            raise ValueError(f"microbatches need dp_implementation auto, got {impl!r}")
        return "microbatch_group_gradients"
    if impl == "microbatch_group_gradients":
        raise ValueError("dp_implementation microbatch_group_gradients needs microbatches")
    if impl == "auto":
        return "masked_ghost_clipping" if p["dropout"] > 0 else "fast_gradient_clipping"
    if impl == "fast_gradient_clipping" and p["dropout"] > 0:
        raise ValueError(
            "fast_gradient_clipping is not exact with Dropout; use masked_ghost_clipping"
        )
    return impl


def train_model(
    examples: pd.DataFrame,
    splits: dict[str, str],
    params: dict[str, Any],
    model_path: str | Path,
    *,
    threads: int,
    log: logging.Logger,
    run: str | None = None,
    dataset: str | None = None,
    checkpoints: int = 0,
    checkpoint_path: str | Path | None = None,
) -> dict[str, Any]:
    """Train on ``splits['members']``, save the model (no optimizer), return train info.

    ``run`` and ``dataset`` (the run's name in the grid, its dataset) only label
    error messages.
    ``checkpoints = K > 0`` also saves the weights at K evenly spaced step
    indices (the first is the initialisation) to ``checkpoint_path`` (.npz, see
    ``_CheckpointRecorder``): the practical-membership-privacy family (Recipe B)
    recomputes per-example clipped gradients at each of them.
    """
    wall0 = time.perf_counter()
    p = normalize_params(params)
    model_path = Path(model_path)
    if model_path.suffix not in (".keras", ".h5"):
        raise ValueError(f"model_path must end in .keras or .h5, got {model_path}")
    if p["mechanism"] in LINEAR_MECHANISMS:
        return train_linear(examples, splits, p, model_path, threads=threads, log=log, run=run, dataset=dataset,
                            checkpoints=checkpoints, checkpoint_path=checkpoint_path)

    members = examples[examples["split"] == splits["members"]]
    utility = examples[examples["split"] == splits["utility"]]
    if len(members) < 2:
        raise ValueError(f"members split {splits['members']!r} has {len(members)} examples")
    n = len(members)
    if p["batch_size"] > n:
        # q = B/n > 1 has no meaning, and training with n instead would differ
        # silently from the run's name and its recorded parameters.
        raise ValueError(
            f"grid batch_size={p['batch_size']}"
            + (f" of run {run!r}" if run is not None else "")
            + f" exceeds the {n} examples of the members split {splits['members']!r};"
            f" set batch_size <= {n}"
        )

    from dpaudit import _tf

    tf = _tf.tf
    _tf.configure(threads, p["seed"])

    x = features(members)
    y = members["label"].to_numpy(dtype=np.int64)
    x_util = features(utility) if len(utility) else x[:0]
    y_util = utility["label"].to_numpy(dtype=np.int64)
    n, d = x.shape
    n_classes = int(p["n_classes"] or int(examples["label"].max()) + 1)
    batch_size = p["batch_size"]
    q = batch_size / n
    spe = sampling.steps_per_epoch(n, batch_size)
    steps = spe * p["epochs"]
    k = p["microbatches"]
    if k is not None and k > batch_size:
        # Most groups would be empty in every step; almost surely a config error.
        raise ValueError(f"microbatches={k} exceeds the batch size {batch_size}")

    privacy: dict[str, Any]
    implementation = None
    noise_multiplier = 0.0
    if p["mechanism"] == "dpsgd":
        implementation = _resolve_implementation(p)
        if p["noise_multiplier"] is None:
            t_cal = time.perf_counter()
            noise_multiplier = accounting.calibrate_noise(
                p["target_epsilon"], q, steps, p["delta"], p["accountant"], p["sampling"]
            )
            log.info(
                "calibrated noise_multiplier=%.5f for target epsilon=%g (%s, %s) in %.1fs",
                noise_multiplier, p["target_epsilon"], p["accountant"], p["sampling"],
                time.perf_counter() - t_cal,
            )
        else:
            noise_multiplier = p["noise_multiplier"]
        privacy = accounting.dpsgd_epsilon(
            noise_multiplier, q, steps, p["delta"], p["accountant"], p["sampling"]
        )
    else:
        privacy = {
            "epsilon": math.inf,
            "accountant": None,
            "orders": None,
            "neighbouring_relation": None,
            "amplification": None,
        }

    model = build_mlp(d, {**p, "n_classes": n_classes}, seed=p["seed"])
    dropout_seed = [p["seed"], 2]  # masked_ghost_clipping's per-example Dropout masks
    net = logits_model(model)
    step, noise_step, opt = build_train_step(
        net,
        mechanism=p["mechanism"],
        optimizer=p["optimizer"],
        learning_rate=p["learning_rate"],
        momentum=p["momentum"],
        clip_norm=p["clip_norm"],
        noise_multiplier=noise_multiplier,
        expected_batch_size=batch_size,
        implementation=implementation or "fast_gradient_clipping",
        microbatches=k,
        dropout_seed=int(np.random.SeedSequence(dropout_seed).generate_state(1)[0]),
    )

    sampler_seed = [p["seed"], 1]
    rng = np.random.default_rng(sampler_seed)
    if p["sampling"] == "poisson":
        batches = sampling.poisson_batches(n, q, steps, rng)
    else:
        batches = sampling.shuffle_batches(n, batch_size, p["epochs"], rng)

    # As TF Privacy: with fixed-size batches, drop the remainder so k divides the batch.
    drop_remainder = k is not None and p["sampling"] == "shuffle"
    history: list[dict[str, Any]] = []
    empty_batches = 0
    dropped = 0
    all_fractions: list[float] = []
    recorder = _CheckpointRecorder(checkpoints, steps, model) if checkpoints else None
    train0 = time.perf_counter()
    for epoch in range(1, p["epochs"] + 1):
        t0 = time.perf_counter()
        loss_sum = correct = seen = 0.0
        fractions: list[float] = []
        for _ in range(spe):
            if recorder is not None:
                recorder.before_step()
            idx = next(batches)
            if drop_remainder and len(idx) % k:
                dropped += len(idx) % k
                idx = idx[: len(idx) - len(idx) % k]
            if len(idx) == 0:
                empty_batches += 1
                if noise_step is not None:
                    noise_step()
                continue
            ls, cs, fraction = step(tf.constant(x[idx]), tf.constant(y[idx]))
            loss_sum += float(ls)
            correct += float(cs)
            seen += len(idx)
            fractions.append(float(fraction))
        all_fractions.extend(fractions)
        seconds = time.perf_counter() - t0
        record = {
            "epoch": epoch,
            "loss": loss_sum / seen if seen else math.nan,
            "accuracy": correct / seen if seen else math.nan,
            "examples_seen": int(seen),
            "seconds": seconds,
        }
        if p["mechanism"] == "dpsgd":
            # Mean over the epoch's non-empty steps of the per-step share of
            # examples (or non-empty groups) whose gradient norm exceeded C.
            record["clipped_fraction"] = float(np.mean(fractions)) if fractions else math.nan
        if len(x_util):
            logits_u = predict_logits(net, x_util).astype(np.float64)
            lse = np.logaddexp.reduce(logits_u, axis=1)
            record["utility_loss"] = float(np.mean(lse - logits_u[np.arange(len(y_util)), y_util]))
            record["utility_accuracy"] = float(np.mean(np.argmax(logits_u, axis=1) == y_util))
        history.append(record)
        log.info(
            "epoch %d/%d loss=%.4f accuracy=%.4f utility_accuracy=%s time=%.2fs",
            epoch, p["epochs"], record["loss"], record["accuracy"],
            f"{record['utility_accuracy']:.4f}" if "utility_accuracy" in record else "n/a",
            seconds,
        )
    train_seconds = time.perf_counter() - train0
    if recorder is not None:
        if checkpoint_path is None:
            raise ValueError("checkpoints > 0 needs a checkpoint_path")
        recorder.save(checkpoint_path)

    save_model(model, model_path)

    info: dict[str, Any] = {
        "mechanism": p["mechanism"],
        "optimizer": p["optimizer"],
        "optimizer_class": optimizer_class_name(opt),
        "dp_implementation": implementation,
        "hyperparameters": {k: v for k, v in p.items()},
        "epochs": p["epochs"],
        "batch_size": batch_size,
        "learning_rate": p["learning_rate"],
        "momentum": p["momentum"],
        "hidden_units": p["hidden_units"],
        "activation": p["activation"],
        "dropout": p["dropout"],
        "clip_norm": p["clip_norm"],
        "target_epsilon": p["target_epsilon"],
        "sampling": p["sampling"],
        "sampling_probability": q,
        "steps": steps,
        "steps_per_epoch": spe,
        "expected_batch_size": float(batch_size),
        "empty_batches": empty_batches,
        "microbatches": k,
        "microbatch_dropped_examples": int(dropped),
        "accounting_note": MICROBATCH_ACCOUNTING_NOTE if k is not None else None,
        "clipped_fraction": (
            (float(np.mean(all_fractions)) if all_fractions else math.nan)
            if p["mechanism"] == "dpsgd"
            else None
        ),
        "noise_multiplier": float(noise_multiplier),
        "delta": p["delta"],
        "epsilon": float(privacy["epsilon"]),
        "accountant": privacy["accountant"],
        "orders": privacy["orders"],
        "neighbouring_relation": privacy["neighbouring_relation"],
        "amplification": privacy["amplification"],
        "n_members": int(n),
        "n_utility": int(len(x_util)),
        "n_features": int(d),
        "n_classes": n_classes,
        "splits": dict(splits),
        "seeds": {"seed": p["seed"], "init": p["seed"], "sampler": sampler_seed,
                  "dropout_masks": dropout_seed, "tf_global": p["seed"]},
        "threads": int(threads),
        "history": history,
        "train_seconds": train_seconds,
        "wall_time_seconds": time.perf_counter() - wall0,
        "model_file": model_path.name,
        "versions": _tf.versions(),
    }
    return info


class _CheckpointRecorder:
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
