"""Train a baseline or DP-SGD Keras model on the members split.

DP-SGD update (Abadi et al. 2016; seed001 §4), per step with batch b ⊆ members:

    θ ← opt( (Σ_{i∈b} clip_C(g_i) + N(0, σ²C²I)) / B ),   B = q·n the EXPECTED batch size

Dividing by the fixed B (not the random |b|) keeps the noise scale data-independent,
which is what the Poisson-subsampled Gaussian accountant analyses.

Two tensorflow-privacy components do the clipping and noising; both are exact:

* ``fast_gradient_clipping`` (``clip_grads.compute_clipped_gradients_and_outputs``
  + ``gradient_clipping_utils.add_aggregate_noise``): per-example gradient norms of
  Dense layers from one extra backward pass (ghost norms). Used when the model has
  no Dropout: its norm pass runs the layers in inference mode and a second forward
  pass draws new Dropout masks, so with Dropout the norms would not belong to the
  gradients being clipped.
* ``vectorized_optimizer`` (``VectorizedDPKeras{SGD,Adam}Optimizer``): the Jacobian
  of the per-example loss vector from ONE forward pass, so clip factors and
  gradients share the Dropout masks. Used when dropout > 0.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.io import atomic_path
from dpaudit.training import accounting, sampling
from dpaudit.training.models import build_mlp, features, logits_model, predict_logits

MECHANISMS = ("baseline", "dpsgd")
OPTIMIZERS = ("sgd", "adam")
DP_IMPLEMENTATIONS = ("auto", "fast_gradient_clipping", "vectorized_optimizer")

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


def normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults, coerce to plain Python types and check values."""
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training parameters: {sorted(unknown)}")
    p = {**DEFAULTS, **{k: _none_if_na(v) for k, v in params.items()}}
    p["mechanism"] = str(p["mechanism"])
    if p["mechanism"] not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {p['mechanism']!r}")
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
    else:
        p["clip_norm"] = None if p["clip_norm"] is None else float(p["clip_norm"])
        p["target_epsilon"] = None
        p["noise_multiplier"] = None
        p["delta"] = None if p["delta"] is None else float(p["delta"])
    return p


def _resolve_implementation(p: dict[str, Any]) -> str:
    impl = p["dp_implementation"]
    if impl == "auto":
        return "vectorized_optimizer" if p["dropout"] > 0 else "fast_gradient_clipping"
    if impl == "fast_gradient_clipping" and p["dropout"] > 0:
        raise ValueError("fast_gradient_clipping is not exact with Dropout; use vectorized_optimizer")
    return impl


def _optimizer_class_name(opt) -> str:
    from dpaudit import _tf

    # tensorflow-privacy's factory names every DP class "DPOptimizerClass".
    for name in ("VectorizedDPKerasSGDOptimizer", "VectorizedDPKerasAdamOptimizer"):
        if isinstance(opt, getattr(_tf, name)):
            return name
    return f"{type(opt).__module__.split('.')[0]}.{type(opt).__name__}"


def build_train_step(
    net,
    *,
    mechanism: str,
    optimizer: str,
    learning_rate: float,
    momentum: float = 0.0,
    clip_norm: float | None = None,
    noise_multiplier: float = 0.0,
    expected_batch_size: float | None = None,
    implementation: str = "fast_gradient_clipping",
):
    """Return ``(step, noise_step, optimizer_object)`` for a logits-output model ``net``.

    ``step(x, y)`` applies one update and returns (summed CE, #correct) of the batch
    (training-mode logits). ``noise_step()`` is the DP update of an empty Poisson
    batch: noise only, N(0, σ²C²)/B. For the baseline it is None.
    """
    from dpaudit import _tf

    tf, keras = _tf.tf, _tf.keras
    d = int(net.input_shape[-1])
    signature = [tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)]
    variables = net.trainable_variables

    def plain_optimizer():
        if optimizer == "sgd":
            return keras.optimizers.legacy.SGD(learning_rate=learning_rate, momentum=momentum)
        return keras.optimizers.legacy.Adam(learning_rate=learning_rate)

    def batch_stats(y, logits):
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
        return losses, correct

    if mechanism == "baseline":
        opt = plain_optimizer()

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            with tf.GradientTape() as tape:
                losses, correct = batch_stats(y, net(x, training=True))
                loss = tf.reduce_mean(losses)
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
            return tf.reduce_sum(losses), correct

        return step, None, opt

    if mechanism != "dpsgd":
        raise ValueError(f"unknown mechanism {mechanism!r}")
    clip = float(clip_norm)
    sigma = float(noise_multiplier)
    big_b = float(expected_batch_size)

    if implementation == "fast_gradient_clipping":
        opt = plain_optimizer()
        # The fast path reads the per-example loss from net.loss; "sum" reduction so
        # the clipped gradient is Σ_i clip_C(g_i), divided by B below.
        net.compile(
            optimizer=opt,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum"),
        )
        registry = _tf.tfp_layer_registry.make_default_layer_registry()
        base_apply = opt.apply_gradients

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            clipped, logits, _ = _tf.clip_grads.compute_clipped_gradients_and_outputs(
                input_model=net,
                l2_norm_clip=clip,
                layer_registry=registry,
                x_batch=x,
                y_batch=y,
                clipping_loss=net.loss,
            )
            noised = _tf.gradient_clipping_utils.add_aggregate_noise(
                clipped, tf.shape(y)[0], clip, sigma, loss_reduction="sum"
            )
            opt.apply_gradients(zip([g / big_b for g in noised], variables, strict=True))
            losses, correct = batch_stats(y, logits)
            return tf.reduce_sum(losses), correct

    elif implementation == "vectorized_optimizer":
        cls = (
            _tf.VectorizedDPKerasSGDOptimizer
            if optimizer == "sgd"
            else _tf.VectorizedDPKerasAdamOptimizer
        )
        kwargs = {"momentum": momentum} if optimizer == "sgd" else {}
        opt = cls(
            l2_norm_clip=clip,
            noise_multiplier=sigma,
            num_microbatches=None,
            learning_rate=learning_rate,
            **kwargs,
        )
        # The DP class refuses apply_gradients before its own gradient call; the
        # noise-only update of an empty batch goes to the parent Keras optimizer.
        base_apply = super(cls, opt).apply_gradients

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            with tf.GradientTape() as tape:
                logits = net(x, training=True)
                losses, correct = batch_stats(y, logits)
            grads_and_vars = opt._compute_gradients(losses, variables, tape=tape)
            # The optimizer returns (Σ clip_C(g_i) + N(0, σ²C²)) / |b|; rescaling by
            # |b|/B gives the same sum divided by the expected batch size B.
            scale = tf.cast(tf.shape(y)[0], tf.float32) / big_b
            opt.apply_gradients([(g * scale, v) for g, v in grads_and_vars])
            return tf.reduce_sum(losses), correct

    else:
        raise ValueError(f"unknown DP implementation {implementation!r}")

    @tf.function(input_signature=[], autograph=False)
    def noise_step():
        zeros = [tf.zeros_like(v) for v in variables]
        noised = _tf.gradient_clipping_utils.add_aggregate_noise(
            zeros, 1, clip, sigma, loss_reduction="sum"
        )
        base_apply(zip([g / big_b for g in noised], variables, strict=True))
        return tf.constant(0.0), tf.constant(0.0)

    return step, noise_step, opt


def train_model(
    examples: pd.DataFrame,
    splits: dict[str, str],
    params: dict[str, Any],
    model_path: str | Path,
    *,
    threads: int,
    log: logging.Logger,
) -> dict[str, Any]:
    """Train on ``splits['members']``, save the model (no optimizer), return train info."""
    wall0 = time.perf_counter()
    p = normalize_params(params)
    model_path = Path(model_path)
    if model_path.suffix not in (".keras", ".h5"):
        raise ValueError(f"model_path must end in .keras or .h5, got {model_path}")

    from dpaudit import _tf

    tf = _tf.tf
    _tf.configure(threads, p["seed"])

    members = examples[examples["split"] == splits["members"]]
    utility = examples[examples["split"] == splits["utility"]]
    if len(members) < 2:
        raise ValueError(f"members split {splits['members']!r} has {len(members)} examples")
    x = features(members)
    y = members["label"].to_numpy(dtype=np.int64)
    x_util = features(utility) if len(utility) else x[:0]
    y_util = utility["label"].to_numpy(dtype=np.int64)
    n, d = x.shape
    n_classes = int(p["n_classes"] or int(examples["label"].max()) + 1)
    batch_size = min(p["batch_size"], n)
    q = batch_size / n
    spe = sampling.steps_per_epoch(n, batch_size)
    steps = spe * p["epochs"]

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
    )

    sampler_seed = [p["seed"], 1]
    rng = np.random.default_rng(sampler_seed)
    if p["sampling"] == "poisson":
        batches = sampling.poisson_batches(n, q, steps, rng)
    else:
        batches = sampling.shuffle_batches(n, batch_size, p["epochs"], rng)

    history: list[dict[str, Any]] = []
    empty_batches = 0
    train0 = time.perf_counter()
    for epoch in range(1, p["epochs"] + 1):
        t0 = time.perf_counter()
        loss_sum = correct = seen = 0.0
        for _ in range(spe):
            idx = next(batches)
            if len(idx) == 0:
                empty_batches += 1
                if noise_step is not None:
                    noise_step()
                continue
            ls, cs = step(tf.constant(x[idx]), tf.constant(y[idx]))
            loss_sum += float(ls)
            correct += float(cs)
            seen += len(idx)
        seconds = time.perf_counter() - t0
        record = {
            "epoch": epoch,
            "loss": loss_sum / seen if seen else math.nan,
            "accuracy": correct / seen if seen else math.nan,
            "examples_seen": int(seen),
            "seconds": seconds,
        }
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

    # Saved without the optimizer: a model saved with a DP optimizer does not load
    # without custom objects (DESIGN §9). Only the logits view was compiled, never
    # the saved Sequential, so the .keras format (which has no include_optimizer
    # switch) stores no optimizer either.
    with atomic_path(model_path, suffix=model_path.suffix) as tmp:
        if model_path.suffix == ".h5":
            model.save(tmp, include_optimizer=False)
        else:
            model.save(tmp)

    info: dict[str, Any] = {
        "mechanism": p["mechanism"],
        "optimizer": p["optimizer"],
        "optimizer_class": _optimizer_class_name(opt),
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
        "seeds": {"seed": p["seed"], "init": p["seed"], "sampler": sampler_seed, "tf_global": p["seed"]},
        "threads": int(threads),
        "history": history,
        "train_seconds": train_seconds,
        "wall_time_seconds": time.perf_counter() - wall0,
        "model_file": model_path.name,
        "versions": _tf.versions(),
    }
    return info
