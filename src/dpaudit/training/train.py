"""Train a baseline or DP-SGD Keras model on the members split.

DP-SGD update (Abadi et al. 2016; seed001 §4), per step with batch b ⊆ members:

    θ ← opt( (Σ_{i∈b} clip_C(g_i) + N(0, σ²C²I)) / B ),   B = q·n the EXPECTED batch size

Dividing by the fixed B (not the random |b|) keeps the noise scale data-independent,
which is what the Poisson-subsampled Gaussian accountant analyses.

Microbatches (``microbatches = k``; TF Privacy's ``num_microbatches``, seed002 §4 and
§9.9): b is cut into k contiguous groups b_1..b_k and the MEAN gradient of each group
is clipped:

    θ ← opt( (Σ_j clip_C(mean_{i∈b_j} g_i) + N(0, σ²C²I)) / k )

k = 1 clips the batch-mean gradient. The divisor k is TF Privacy's and, like B,
does not depend on the data. Group sizes follow ``np.array_split``: the first
|b| mod k groups get one example more, so a Poisson batch of any size m ≥ 1 is
split as evenly as possible. A batch with m < k examples has k − m EMPTY groups;
an empty group contributes a zero gradient (not clipped, not counted in the
clipped fraction) and the divisor stays k. With ``sampling: shuffle`` the last
|b| mod k examples of each batch are dropped (seed002 §9.9), so k divides the
batch and the groups are exactly TF Privacy's ``reshape(loss, [k, -1])`` rows.

The accountant is NOT told about microbatches (seed002 §9.8): it assumes each
example moves the noised sum by at most C, while one added or removed example can
move a clipped group mean by up to 2C (see ``MICROBATCH_ACCOUNTING_NOTE``).

Three gradient implementations, all exact:

* ``fast_gradient_clipping`` (tensorflow-privacy ``clip_grads.compute_gradient_norms``
  + ``compute_clip_weights`` + ``gradient_clipping_utils.add_aggregate_noise``):
  per-example gradient norms of Dense layers from one extra backward pass (ghost
  norms). Used when the model has no Dropout: its norm pass runs the layers in
  inference mode and a second forward pass draws new Dropout masks, so with
  Dropout the norms would not belong to the gradients being clipped.
* ``vectorized_optimizer`` (``VectorizedDPKeras{SGD,Adam}Optimizer``): the Jacobian
  of the per-example loss vector from ONE forward pass, so clip factors and
  gradients share the Dropout masks. Used when dropout > 0.
* ``microbatch_group_gradients`` (ours; used whenever microbatches is set): one
  forward and one backward pass give each Dense layer's input h_i and the
  gradient δ_i of Σ_j mean_{i∈b_j} loss_i at its pre-activation; a group's kernel
  gradient is Σ_{i∈b_j} h_i δ_iᵀ, one batched matmul over the k groups. Dropout
  masks are shared because there is a single forward pass.

Every step also reports the fraction of clipping units (examples, or non-empty
groups) whose gradient norm exceeded C (seed001 §4).
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
DP_IMPLEMENTATIONS = (
    "auto",
    "fast_gradient_clipping",
    "vectorized_optimizer",
    "microbatch_group_gradients",
)

MICROBATCH_ACCOUNTING_NOTE = (
    "The accountant treats each example's sensitivity as C (per-example clipping) and "
    "ignores microbatching (seed002 §9.8). With microbatches, one example added to or "
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
        p["microbatches"] = _microbatches(p["microbatches"])
    else:
        p["clip_norm"] = None if p["clip_norm"] is None else float(p["clip_norm"])
        p["target_epsilon"] = None
        p["noise_multiplier"] = None
        # dpsgd-only, like target_epsilon: a dataset-wide value does not apply here.
        p["microbatches"] = None
        p["delta"] = None if p["delta"] is None else float(p["delta"])
    return p


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


def _dense_chain(net, keras) -> list:
    """The Dense/Dropout layers of a ``build_mlp`` logits view, in call order."""
    chain = []
    for layer in net.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        if not isinstance(layer, (keras.layers.Dense, keras.layers.Dropout)):
            raise ValueError(
                f"per-example/group gradients support Dense and Dropout layers only, got {layer.name!r}"
            )
        chain.append(layer)
    owned = {v.ref() for layer in chain for v in layer.trainable_variables}
    if any(v.ref() not in owned for v in net.trainable_variables):
        raise ValueError("every trainable variable must belong to a Dense layer of the chain")
    return chain


def _tapped_forward(chain, x, tf):
    """Training-mode logits plus (input, pre-activation, layer) of every Dense layer.

    Dense is computed by hand (same ops as ``Dense.call`` on 2-D input) so the
    pre-activation is a tensor on the caller's tape: its gradient δ_i together with
    the layer input h_i gives per-example or per-group kernel gradients without a
    Jacobian.
    """
    taps = []
    h = x
    for layer in chain:
        if hasattr(layer, "kernel"):
            z = tf.matmul(h, layer.kernel)
            if layer.use_bias:
                z = tf.nn.bias_add(z, layer.bias)
            taps.append((h, z, layer))
            h = layer.activation(z)
        else:
            h = layer(h, training=True)
    return h, taps


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
    microbatches: int | None = None,
):
    """Return ``(step, noise_step, optimizer_object)`` for a logits-output model ``net``.

    ``step(x, y)`` applies one update and returns (summed CE, #correct, clipped
    fraction) of the batch (training-mode logits); the clipped fraction is the share
    of examples (or of non-empty microbatch groups) whose gradient norm exceeded C,
    NaN for the baseline. ``noise_step()`` is the DP update of an empty Poisson
    batch: noise only, N(0, σ²C²)/B (or /k with microbatches). For the baseline it
    is None. ``implementation="microbatch_group_gradients"`` needs ``microbatches``.
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
            return tf.reduce_sum(losses), correct, tf.constant(math.nan)

        return step, None, opt

    if mechanism != "dpsgd":
        raise ValueError(f"unknown mechanism {mechanism!r}")
    clip = float(clip_norm)
    sigma = float(noise_multiplier)
    if (implementation == "microbatch_group_gradients") != (microbatches is not None):
        raise ValueError("microbatches go with implementation microbatch_group_gradients only")
    # TF Privacy divides by the number of microbatches; per-example DP-SGD by B.
    divisor = float(microbatches) if microbatches is not None else float(expected_batch_size)

    def fraction_above_clip(norms):
        return tf.reduce_mean(tf.cast(norms > clip, tf.float32))

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
            # clip_grads.compute_clipped_gradients_and_outputs, unrolled so the
            # per-example norms are available for the clipped fraction.
            norms = _tf.clip_grads.compute_gradient_norms(
                net, registry, x, y, trainable_vars=variables
            )
            weights = _tf.clip_grads.compute_clip_weights(clip, norms)
            with tf.GradientTape() as tape:
                logits = net(x, training=True)
                clipped_loss = net.loss(y, logits, weights)
            clipped = tape.gradient(
                clipped_loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO
            )
            noised = _tf.gradient_clipping_utils.add_aggregate_noise(
                clipped, tf.shape(y)[0], clip, sigma, loss_reduction="sum"
            )
            opt.apply_gradients(zip([g / divisor for g in noised], variables, strict=True))
            losses, correct = batch_stats(y, logits)
            return tf.reduce_sum(losses), correct, fraction_above_clip(norms)

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
        chain = _dense_chain(net, keras)

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            # Persistent: the optimizer's Jacobian and the norm pass read one
            # forward pass, so both see the same Dropout masks.
            with tf.GradientTape(persistent=True) as tape:
                logits, taps = _tapped_forward(chain, x, tf)
                losses, correct = batch_stats(y, logits)
                summed = tf.reduce_sum(losses)
            grads_and_vars = opt._compute_gradients(losses, variables, tape=tape)
            # Examples do not interact, so ∂Σloss/∂z_i is example i's own δ_i and
            # its Dense-kernel gradient h_i δ_iᵀ has squared norm ‖h_i‖²‖δ_i‖².
            deltas = tape.gradient(summed, [z for _, z, _ in taps])
            del tape
            sq = 0.0
            for (h, _, layer), delta in zip(taps, deltas, strict=True):
                dd = tf.reduce_sum(tf.square(delta), axis=1)
                sq += tf.reduce_sum(tf.square(h), axis=1) * dd
                if layer.use_bias:
                    sq += dd
            # The optimizer returns (Σ clip_C(g_i) + N(0, σ²C²)) / |b|; rescaling by
            # |b|/B gives the same sum divided by the expected batch size B.
            scale = tf.cast(tf.shape(y)[0], tf.float32) / divisor
            opt.apply_gradients([(g * scale, v) for g, v in grads_and_vars])
            return summed, correct, fraction_above_clip(tf.sqrt(sq))

    elif implementation == "microbatch_group_gradients":
        k = int(microbatches)
        if k < 1:
            raise ValueError(f"microbatches must be >= 1, got {k}")
        opt = plain_optimizer()
        base_apply = opt.apply_gradients
        chain = _dense_chain(net, keras)

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            m = tf.shape(y)[0]
            # np.array_split sizes: the first m mod k groups hold one example more.
            sizes = m // k + tf.cast(tf.range(k) < m % k, tf.int32)
            starts = tf.cumsum(sizes, exclusive=True)
            group = tf.repeat(tf.range(k), sizes)
            weight = 1.0 / tf.cast(tf.gather(sizes, group), tf.float32)
            with tf.GradientTape() as tape:
                logits, taps = _tapped_forward(chain, x, tf)
                losses, correct = batch_stats(y, logits)
                # Σ_j mean_{i∈b_j} loss_i: its δ at each pre-activation carries the
                # 1/|b_j| of the group mean.
                group_mean_sum = tf.reduce_sum(losses * weight)
            deltas = tape.gradient(group_mean_sum, [z for _, z, _ in taps])
            # Groups laid out as a [k, width] grid of example positions (padded by
            # masking), so the group gradients are one batched matmul per layer.
            width = (m + k - 1) // k
            slot = tf.range(width)
            valid = slot[None, :] < sizes[:, None]
            pos = tf.minimum(starts[:, None] + slot[None, :], m - 1)
            mask = tf.cast(valid, tf.float32)[:, :, None]
            sq = tf.zeros([k])
            group_grads = {}
            for (h, _, layer), delta in zip(taps, deltas, strict=True):
                dg = tf.gather(delta, pos) * mask
                gk = tf.matmul(tf.gather(h, pos), dg, transpose_a=True)
                sq += tf.reduce_sum(tf.square(gk), axis=[1, 2])
                group_grads[layer.kernel.ref()] = gk
                if layer.use_bias:
                    gb = tf.reduce_sum(dg, axis=1)
                    sq += tf.reduce_sum(tf.square(gb), axis=1)
                    group_grads[layer.bias.ref()] = gb
            norms = tf.sqrt(sq)
            # C / max(C, ‖g‖) = min(1, C/‖g‖), and 1 for an empty group's zero gradient.
            factors = clip / tf.maximum(clip, norms)
            clipped = [tf.tensordot(factors, group_grads[v.ref()], axes=1) for v in variables]
            noised = _tf.gradient_clipping_utils.add_aggregate_noise(
                clipped, k, clip, sigma, loss_reduction="sum"
            )
            opt.apply_gradients(zip([g / divisor for g in noised], variables, strict=True))
            nonempty = sizes > 0
            n_clipped = tf.reduce_sum(tf.cast(tf.logical_and(norms > clip, nonempty), tf.float32))
            fraction = n_clipped / tf.reduce_sum(tf.cast(nonempty, tf.float32))
            return tf.reduce_sum(losses), correct, fraction

    else:
        raise ValueError(f"unknown DP implementation {implementation!r}")

    @tf.function(input_signature=[], autograph=False)
    def noise_step():
        zeros = [tf.zeros_like(v) for v in variables]
        noised = _tf.gradient_clipping_utils.add_aggregate_noise(
            zeros, 1, clip, sigma, loss_reduction="sum"
        )
        base_apply(zip([g / divisor for g in noised], variables, strict=True))
        return tf.constant(0.0), tf.constant(0.0), tf.constant(math.nan)

    return step, noise_step, opt


def train_model(
    examples: pd.DataFrame,
    splits: dict[str, str],
    params: dict[str, Any],
    model_path: str | Path,
    *,
    threads: int,
    log: logging.Logger,
    checkpoints: int = 0,
    checkpoint_path: str | Path | None = None,
) -> dict[str, Any]:
    """Train on ``splits['members']``, save the model (no optimizer), return train info.

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
    )

    sampler_seed = [p["seed"], 1]
    rng = np.random.default_rng(sampler_seed)
    if p["sampling"] == "poisson":
        batches = sampling.poisson_batches(n, q, steps, rng)
    else:
        batches = sampling.shuffle_batches(n, batch_size, p["epochs"], rng)

    # seed002 §9.9: with fixed-size batches, drop the remainder so k divides the batch.
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
        "seeds": {"seed": p["seed"], "init": p["seed"], "sampler": sampler_seed, "tf_global": p["seed"]},
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
