"""K reference ("shadow") models of one training recipe, trained together in one process.

A recipe is a grid cell without its seed (mechanism, ε, clip norm, epochs, batch size,
learning rate, architecture, dataset). Its reference models train on random halves of
the audit population P (members ∪ designated non-members): example j is in model k's
training set with probability ½, independently, from a fixed seed
(``inclusion_matrix``; the matrix is returned and must be stored with the outputs).

Trained like the target (``dpaudit.reference.accounting``): every model
retrains the recipe on its own half as ``train_model`` would on its n_k rows, with the
released model's mechanism, expected batch B, epochs, σ, clip norm, learning rate and
fixed divisor B: Poisson batches at its own rate q_k = B/n_k for steps_k = ⌊n_k/B⌋·epochs
(shuffle: batches of B, ⌊n_k/B⌋ per epoch). σ is the target's (``recipe_accounting``:
read exactly as ``train_model`` reads it, or taken from a train.json of the recipe,
``recorded``, whose q, steps and hyperparameters are checked, so the pool job repeats no
calibration); each model's ε_k is the accountant's at (σ, q_k, steps_k)
(``model_accounting``), not the target's ε: the target's q, steps and ε are kept beside
them (``ReferencePool.target``).

Vectorized path (``vectorized=True`` in the result): the MLP's Dense weights are
stacked on a leading model axis ([K, in, out]); one step feeds a [K, m, d] block
holding each model's own Poisson batch (padded to the largest, padding masked out of
the loss; gathered from P inside the step, which is traced once: the batch width is a
free dimension of its signature). DP-SGD clips per example and per model by the ghost norms of
``dpaudit.training.dense_taps.ghost_squared_norms`` (‖h_i‖²‖δ_i‖² + ‖δ_i‖² per Dense layer,
called on the K·m rows flattened; examples of different models do not interact either),
forms the clipped sums hᵀ(w ⊙ δ) with one batched matmul per layer, and adds
N(0, σ²C²) noise per model from the model's own numpy generator. The optimizers are
Keras' legacy SGD (momentum) and Adam update rules, applied per model (a baseline model
whose batch is empty skips the step, as ``train_model`` does; a DP model takes the
noise-only step). Model k's initial weights are ``build_mlp(seed=seeds[k])``'s (same
seeded initializers), its batches come from ``np.random.default_rng([seeds[k], 1])``
(``train_model``'s sampler), its noise from ``default_rng([seeds[k], 4])`` (drawn for 64
steps at a time: the same numbers as one draw per step): a model's training does not
depend on which other models share the stack.

Fallback (``vectorized=False``, logged): any model but the MLP (a CNN, a user's builder:
``dpaudit.training.architectures.build_model``, trained with ``layerwise_clipping`` as
``train_model`` trains it), Dropout, microbatches or an explicitly chosen
``vectorized_optimizer``: the same recipe and batches, one Keras model at a time through
``dpaudit.training.steps.build_train_step`` (``train_model``'s step), in this process.

Linear mechanisms (``vectorized=False``, logged): ``dpaudit.reference.linear``,
``train_linear``'s scaling, fit and noise on each model's half, one model after another
(no TensorFlow; milliseconds per model).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpaudit.contract.mechanisms import LINEAR_MECHANISMS
from dpaudit.progress import Progress
from dpaudit.reference.accounting import model_accounting, recipe_accounting
from dpaudit.training import sampling
from dpaudit.training.dense_taps import ghost_squared_norms
from dpaudit.training.params import resolve_implementation

__all__ = [
    "ReferencePool",
    "inclusion_matrix",
    "model_accounting",
    "recipe_accounting",
    "reference_seeds",
    "train_reference_models",
    "vectorization_problem",
]

# Keras legacy Adam's defaults (beta_1, beta_2, epsilon).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-7


def reference_seeds(seed: int, count: int) -> np.ndarray:
    """The training seed of each of ``count`` reference models (31-bit ints from (seed, k))."""
    return np.array([int(np.random.SeedSequence([int(seed), 7, k]).generate_state(1)[0] >> 1)
                     for k in range(int(count))], dtype=np.int64)


def inclusion_matrix(seed: int, count: int, population: int) -> np.ndarray:
    """[count, population] bool: example j in model k's training set, each with probability ½."""
    return np.random.default_rng([int(seed), 5]).random((int(count), int(population))) < 0.5


def vectorization_problem(p: dict[str, Any]) -> str | None:
    """Why the model axis cannot train this (normalized) recipe, or None."""
    if p.get("model", "mlp") != "mlp":
        return f"model {p['model']} (only the MLP's Dense layers are stacked on a model axis)"
    if p["dropout"] > 0:
        return "dropout > 0 (per-example Dropout masks are not stacked)"
    if p["mechanism"] == "dpsgd":
        if p["microbatches"] is not None:
            return "microbatches (group clipping is not stacked)"
        if p["dp_implementation"] == "vectorized_optimizer":
            return "dp_implementation vectorized_optimizer chosen explicitly"
    return None


@dataclass
class ReferencePool:
    """K reference models' outputs on P and everything needed to reuse and judge them."""

    logits: np.ndarray  # [K, |P|, C] float32, inference mode
    inclusion: np.ndarray  # [K, |P|] bool
    seeds: np.ndarray  # [K] training seeds
    noise_multiplier: float | None  # σ, the target's; None (and q, steps None) for the linear mechanisms
    sampling_probability: np.ndarray | None  # [K] each model's own q_k = B/n_k
    steps: np.ndarray | None  # [K] each model's ⌊n_k/B⌋·epochs
    epsilon: np.ndarray  # [K] each model's accountant ε at (σ, q_k, steps_k); ∞ for a baseline
    delta: float | None
    vectorized: bool
    fallback_reason: str | None
    history: dict[str, np.ndarray]  # "loss", "accuracy": [K, epochs] (training-mode, like train.json)
    train_seconds: float
    weights: list[np.ndarray] | None = None  # stacked [K, ...] arrays (kernel, bias per Dense layer)
    info: dict[str, Any] = field(default_factory=dict)
    # the recipe's target on its n members: sampling_probability, steps, steps_per_epoch,
    # noise_multiplier, epsilon, n_members (``recipe_accounting``)
    target: dict[str, Any] = field(default_factory=dict)


def _batches(inclusion: np.ndarray, seeds: np.ndarray, p: dict[str, Any], q, steps):
    """Per model, the list of its batches as positions into P (``train_model``'s samplers on
    the model's rows, at its own rate ``q[k]`` for ``steps[k]`` steps)."""
    out = []
    for k in range(inclusion.shape[0]):
        rows = np.flatnonzero(inclusion[k])
        rng = np.random.default_rng([int(seeds[k]), 1])
        if p["sampling"] == "poisson":
            gen = sampling.poisson_batches(rows.size, q[k], steps[k], rng)
        else:
            gen = sampling.shuffle_batches(rows.size, p["batch_size"], p["epochs"], rng)
        out.append([rows[idx] for idx in gen])
    return out


def _initial_weights(d: int, p: dict[str, Any], n_classes: int, seeds: np.ndarray, keras) -> list[np.ndarray]:
    """Stacked initial weights: model k's are ``build_mlp(d, p, seed=seeds[k])``'s."""
    widths = [d, *p["hidden_units"], n_classes]
    stacked = []
    for i in range(len(widths) - 1):
        kernels = [keras.initializers.GlorotUniform(seed=int(s) * 1009 + 2 * i)((widths[i], widths[i + 1]),
                                                                                 dtype="float32").numpy()
                   for s in seeds]
        stacked += [np.stack(kernels), np.zeros((len(seeds), widths[i + 1]), np.float32)]
    return stacked


class _Bias:
    """What ``ghost_squared_norms`` reads of a layer: every stacked Dense layer has a bias."""

    use_bias = True


def _stacked_step(variables, p, clip, divisor, n_noise, tf, keras, monitor=None):
    """tf.function(x_all [|P|,d], y_all [|P|], pos [K,m], mask [K,m], active [K], noise [K, n_noise])
    → (Σ loss, #correct, clipped) per model; gathers each model's batch rows of P and applies
    one update of every active model. Traced once: m is a free dimension of its signature."""
    n_layers = len(variables) // 2
    activation = keras.activations.get(p["activation"])
    dp = p["mechanism"] == "dpsgd"
    lr, momentum = float(p["learning_rate"]), float(p["momentum"])
    adam = p["optimizer"] == "adam"
    slots = [tf.Variable(tf.zeros_like(v)) for v in variables]
    slots2 = [tf.Variable(tf.zeros_like(v)) for v in variables] if adam else []
    k_models = int(variables[0].shape[0])
    iterations = tf.Variable(tf.zeros([k_models], tf.float32))

    def apply(grads, active):
        act = tf.cast(active, tf.float32)
        if adam:
            iterations.assign_add(act)
            t = tf.maximum(iterations, 1.0)
            b1, b2 = ADAM_BETAS
            lr_t = lr * tf.sqrt(1.0 - tf.pow(b2, t)) / (1.0 - tf.pow(b1, t))
        for j, (v, g) in enumerate(zip(variables, grads, strict=True)):
            shape = [k_models] + [1] * (len(v.shape) - 1)
            a = tf.reshape(act, shape)
            if adam:
                m_new = ADAM_BETAS[0] * slots[j] + (1 - ADAM_BETAS[0]) * g
                v_new = ADAM_BETAS[1] * slots2[j] + (1 - ADAM_BETAS[1]) * tf.square(g)
                delta = -tf.reshape(lr_t, shape) * m_new / (tf.sqrt(v_new) + ADAM_EPSILON)
                slots[j].assign(a * m_new + (1 - a) * slots[j])
                slots2[j].assign(a * v_new + (1 - a) * slots2[j])
                v.assign_add(a * delta)
            elif momentum:
                acc = momentum * slots[j] - lr * g
                slots[j].assign(a * acc + (1 - a) * slots[j])
                v.assign_add(a * acc)
            else:
                v.assign_add(a * (-lr * g))

    def forward(x):
        taps, h = [], x
        for i in range(n_layers):
            kernel, bias = variables[2 * i], variables[2 * i + 1]
            z = tf.matmul(h, kernel) + bias[:, None, :]
            taps.append((h, z))
            h = activation(z) if i < n_layers - 1 else z
        return h, taps

    d = int(variables[0].shape[1])
    signature = [tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64),
                 tf.TensorSpec([k_models, None], tf.int64), tf.TensorSpec([k_models, None], tf.float32),
                 tf.TensorSpec([k_models], tf.bool), tf.TensorSpec([k_models, n_noise], tf.float32)]

    @tf.function(autograph=False, input_signature=signature)
    def step(x_all, y_all, pos, mask, active, noise):
        x, y = tf.gather(x_all, pos), tf.gather(y_all, pos)
        with tf.GradientTape() as tape:
            logits, taps = forward(x)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits) * mask
            if dp:
                objective = tf.reduce_sum(losses)
            else:
                counts = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
                objective = tf.reduce_sum(tf.reduce_sum(losses, axis=1) / counts)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=2), y), tf.float32) * mask, axis=1)
        if not dp:
            grads = tape.gradient(objective, variables)
            apply(grads, active)
            return tf.reduce_sum(losses, axis=1), correct, tf.zeros([k_models])
        deltas = tape.gradient(objective, [z for _, z in taps])
        k, m = tf.shape(x)[0], tf.shape(x)[1]
        flat = [(tf.reshape(h, [k * m, -1]), None, _Bias()) for h, _ in taps]
        sq = ghost_squared_norms(flat, [tf.reshape(dl, [k * m, -1]) for dl in deltas], tf)
        norms = tf.reshape(tf.sqrt(sq), [k, m])
        weights = clip / tf.maximum(clip, norms)  # clip_grads.compute_clip_weights
        grads, clipped_sums, offset = [], [], 0
        for (h, _), dl in zip(taps, deltas, strict=True):
            wd = dl * weights[:, :, None]
            for g in (tf.matmul(h, wd, transpose_a=True), tf.reduce_sum(wd, axis=1)):
                size = int(np.prod(g.shape[1:]))
                z = tf.reshape(noise[:, offset:offset + size], tf.shape(g))
                grads.append((g + z) / divisor)
                clipped_sums.append(g)
                offset += size
        if monitor is not None:  # the noise each model's update carries (dpaudit.audit.noise_monitor)
            monitor.observe([u * divisor - g for u, g in zip(grads, clipped_sums, strict=True)], active)
        apply(grads, active)
        clipped = tf.reduce_sum(tf.cast(norms > clip, tf.float32) * mask, axis=1)
        return tf.reduce_sum(losses, axis=1), correct, clipped

    return step


def train_reference_models(
    x: np.ndarray,
    y: np.ndarray,
    params: dict[str, Any],
    *,
    n_members: int,
    count: int | None = None,
    seed: int = 0,
    inclusion: np.ndarray | None = None,
    seeds: np.ndarray | None = None,
    threads: int = 1,
    log: logging.Logger | None = None,
    return_weights: bool = False,
    force_loop: bool = False,
    recorded: Mapping[str, Any] | None = None,
) -> ReferencePool:
    """Train ``count`` reference models of the recipe ``params`` (``train_model``'s
    parameters) on halves of the audit population ``x`` [|P|, d], ``y`` [|P|].

    ``n_members``: the target's member count (the target's q = B/n, steps and σ; each
    model's own q_k, steps_k and ε_k come from its half's size, ``model_accounting``).
    ``inclusion`` [K, |P|] and ``seeds`` [K] default to ``inclusion_matrix(seed, K, |P|)``
    and ``reference_seeds(seed, K)``; pass rows of them to train a subset of a pool alone
    (it gets the same weights). Returns every model's logits on P (``ReferencePool``).
    ``force_loop`` takes the one-model-at-a-time path (tests, benchmarks). ``recorded``: a
    train.json of the recipe, whose σ and ε (the target's) are used (``recipe_accounting``).
    """
    log = log or logging.getLogger(__name__)
    acc = recipe_accounting(params, n_members, recorded)
    p = acc["params"]
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be [|P|, d] and y [|P|], got {x.shape} and {y.shape}")
    if inclusion is None:
        if count is None:
            raise ValueError("give count (K) or an inclusion matrix")
        inclusion = inclusion_matrix(seed, count, x.shape[0])
    inclusion = np.asarray(inclusion, dtype=bool)
    if inclusion.ndim != 2 or inclusion.shape[1] != x.shape[0]:
        raise ValueError(f"inclusion must be [K, |P|={x.shape[0]}], got {inclusion.shape}")
    k_models = inclusion.shape[0]
    seeds = reference_seeds(seed, k_models) if seeds is None else np.asarray(seeds, dtype=np.int64)
    if seeds.shape != (k_models,):
        raise ValueError(f"seeds must have shape ({k_models},), got {seeds.shape}")
    if count is not None and count != k_models:
        raise ValueError(f"count={count} but the inclusion matrix has {k_models} rows")
    n_classes = int(p["n_classes"] or int(y.max()) + 1)
    own = model_accounting(acc, inclusion.sum(axis=1))
    target = {key: acc[key] for key in ("sampling_probability", "steps", "steps_per_epoch", "noise_multiplier",
                                        "epsilon", "n_members")}
    per_model = {"sampling_probability": None if own["sampling_probability"] is None
                 else np.asarray(own["sampling_probability"], np.float64),
                 "steps": None if own["steps"] is None else np.asarray(own["steps"], np.int64),
                 "epsilon": np.asarray(own["epsilon"], np.float64)}
    if p["mechanism"] in LINEAR_MECHANISMS:
        from dpaudit.reference.linear import train_linear_references

        logits, history, weights, seconds = train_linear_references(x, y, p, inclusion=inclusion, seeds=seeds,
                                                                     log=log)
        return ReferencePool(
            logits=logits, inclusion=inclusion, seeds=seeds, noise_multiplier=None, **per_model, delta=0.0,
            vectorized=False, fallback_reason="linear mechanism: one exact fit per model, in a loop",
            history=history, train_seconds=seconds, weights=weights if return_weights else None,
            info={"hyperparameters": p, "n_members": acc["n_members"], "n_population": int(x.shape[0]),
                  "n_classes": 2, "steps_per_epoch": None, "evaluation_delta": p["delta"],
                  "training_rows": own["training_rows"]}, target=target)
    implementation = None
    if p["mechanism"] == "dpsgd":
        implementation = resolve_implementation(p)  # refuses inconsistent choices like train_model
    problem = "force_loop" if force_loop else vectorization_problem(p)
    batches = _batches(inclusion, seeds, p, own["sampling_probability"], own["steps"])

    from dpaudit import _tf

    _tf.configure(threads, int(seed))
    t0 = time.perf_counter()
    if problem is None:
        logits, history, weights, monitors = _train_stacked(x, y, p, own, n_classes, seeds, batches, _tf)
    else:
        log.warning("reference models of this recipe train one at a time in this process: %s", problem)
        logits, history, weights, monitors = _train_loop(x, y, p, own, n_classes, seeds, batches, implementation,
                                                         _tf)
    seconds = time.perf_counter() - t0
    noise_check = _pool_noise_check(monitors, p, own, log) if p["mechanism"] == "dpsgd" else None
    log.info("%d reference models (%s) trained in %.2fs", k_models,
             "stacked" if problem is None else "loop", seconds)
    return ReferencePool(
        logits=logits, inclusion=inclusion, seeds=seeds, noise_multiplier=acc["noise_multiplier"], **per_model,
        delta=p["delta"], vectorized=problem is None, fallback_reason=problem, history=history,
        train_seconds=seconds, weights=weights if return_weights else None,
        info={"hyperparameters": p, "n_members": acc["n_members"], "n_population": int(x.shape[0]),
              "n_classes": n_classes, "steps_per_epoch": own["steps_per_epoch"],
              "training_rows": own["training_rows"], "noise_check": noise_check}, target=target,
    )


def _pool_noise_check(monitors, p: dict[str, Any], own: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
    """The noise certificate of the pool's DP-SGD updates (every model's, pooled per variable;
    ``dpaudit.dp.noise_certificate``), or why it has none."""
    from dpaudit.audit.mechanism_checks import (
        VECTORIZED_REASON,
        ZERO_NOISE_REASON,
        not_certified,
    )
    from dpaudit.dp.noise_certificate import certify, summary_sentence

    if monitors is None or (isinstance(monitors, list) and not monitors):
        return not_certified(VECTORIZED_REASON)
    if not own["noise_multiplier"] > 0:
        return not_certified(ZERO_NOISE_REASON)
    if not isinstance(monitors, list):
        monitors = [monitors]
    stats = [m.statistics() for m in monitors]
    variables = [dict(v) for v in stats[0]["variables"]]
    for other in stats[1:]:  # the loop path: one monitor per model, the same variables
        for total, v in zip(variables, other["variables"], strict=True):
            for key in ("count", "s1", "s2", "s3", "s4", "lag", "lag_sq", "lag_count"):
                total[key] += v[key]
    samples = np.concatenate([s["samples"] for s in stats], axis=0)
    check = certify(variables, samples, stats[0]["sample_columns"], noise_multiplier=own["noise_multiplier"],
                    clip_norm=p["clip_norm"])
    check["models"] = len(stats) if len(stats) > 1 else len(stats[0]["steps_per_model"])
    (log.info if check["passed"] else log.warning)("reference pool noise certificate: %s", summary_sentence(check))
    return check


def _epoch_of(t: int, p: dict[str, Any], own: dict[str, Any], n_steps: list[int], k: int) -> int:
    if p["sampling"] == "poisson":
        return t // own["steps_per_epoch"][k]
    return t // max(1, n_steps[k] // p["epochs"])


def _train_stacked(x, y, p, own, n_classes, seeds, batches, _tf, chunk: int = 64):
    tf, keras = _tf.tf, _tf.keras
    k_models, d = len(seeds), x.shape[1]
    variables = [tf.Variable(w) for w in _initial_weights(d, p, n_classes, seeds, keras)]
    dp = p["mechanism"] == "dpsgd"
    clip = float(p["clip_norm"]) if dp else 1.0
    n_params = sum(int(np.prod(v.shape[1:])) for v in variables)
    n_steps = np.array([len(b) for b in batches])
    total = int(n_steps.max(initial=0))
    monitor = None
    if dp:
        from dpaudit.audit.noise_monitor import NoiseMonitor

        names = [f"layer_{i // 2}/{'kernel' if i % 2 == 0 else 'bias'}" for i in range(len(variables))]
        monitor = NoiseMonitor(names, [tuple(v.shape[1:]) for v in variables], steps=total, seed=int(seeds[0]),
                               models=k_models)
    step = _stacked_step(variables, p, clip, float(p["batch_size"]), n_params if dp else 0, tf, keras, monitor)
    if monitor is not None:
        step = monitor.monitored(step)
    noise_rngs = [np.random.default_rng([int(s), 4]) for s in seeds]
    epochs = p["epochs"]
    # the epoch of step t of model k is t // per_epoch[k] (``_epoch_of``)
    if p["sampling"] == "poisson":
        per_epoch = np.asarray(own["steps_per_epoch"], np.int64)
    else:
        per_epoch = np.maximum(1, n_steps // epochs)
    loss_sum = np.zeros((k_models, epochs))
    correct_sum = np.zeros((k_models, epochs))
    seen = np.zeros((k_models, epochs))
    sigma_c = own["noise_multiplier"] * clip
    x_all, y_all = tf.constant(x), tf.constant(y)
    models = np.arange(k_models)
    no_noise = tf.zeros([k_models, 0])
    results = []
    progress = Progress(f"{k_models} reference models' steps (stacked)", total, unit="steps")
    for t in range(total):
        progress.advance()
        if dp and t % chunk == 0:
            # each model's noise for the next steps in one draw per model: the same numbers
            # as one standard_normal(n_params) call per step of the model's generator
            rows = np.clip(n_steps - t, 0, chunk)
            noise_block = np.zeros((min(chunk, total - t), k_models, n_params), np.float32)
            for k in np.flatnonzero(rows):
                noise_block[: rows[k], k] = sigma_c * noise_rngs[k].standard_normal((rows[k], n_params))
        idx = [b[t] if t < len(b) else np.zeros(0, np.int64) for b in batches]
        sizes = np.array([i.size for i in idx])
        m = max(1, int(sizes.max()))
        pos = np.zeros((k_models, m), np.int64)
        mask = np.zeros((k_models, m), np.float32)
        for k, i in enumerate(idx):
            pos[k, : i.size] = i
            mask[k, : i.size] = 1.0
        alive = t < n_steps
        active = alive & (sizes > 0) if not dp else alive
        noise = tf.constant(noise_block[t % chunk]) if dp else no_noise
        ls, cs, _ = step(x_all, y_all, tf.constant(pos), tf.constant(mask), tf.constant(active), noise)
        results.append((ls, cs, alive, sizes, np.minimum(t // per_epoch, epochs - 1)))
    progress.finish()
    for ls, cs, alive, sizes, epoch in results:  # read back once the steps are queued
        k, e = models[alive], epoch[alive]
        np.add.at(loss_sum, (k, e), ls.numpy()[alive])
        np.add.at(correct_sum, (k, e), cs.numpy()[alive])
        np.add.at(seen, (k, e), sizes[alive])
    with np.errstate(invalid="ignore", divide="ignore"):
        history = {"loss": loss_sum / seen, "accuracy": correct_sum / seen}
    weights = [v.numpy() for v in variables]
    return _stacked_logits(weights, x, p, keras, tf), history, weights, monitor


def _stacked_logits(weights, x, p, keras, tf, chunk: int = 8192) -> np.ndarray:
    activation = keras.activations.get(p["activation"])
    n_layers = len(weights) // 2
    out = []
    for start in range(0, x.shape[0], chunk):
        h = tf.constant(x[start:start + chunk])[None]
        for i in range(n_layers):
            z = tf.matmul(h, weights[2 * i]) + weights[2 * i + 1][:, None, :]
            h = activation(z) if i < n_layers - 1 else z
        out.append(h.numpy())
    return np.concatenate(out, axis=1).astype(np.float32)


def _train_loop(x, y, p, own, n_classes, seeds, batches, implementation, _tf):
    """One Keras model at a time through ``build_train_step`` (``train_model``'s step)."""
    from dpaudit.audit.mechanism_checks import monitor_for
    from dpaudit.training.architectures import build_model
    from dpaudit.training.models import logits_model, predict_logits
    from dpaudit.training.steps import build_train_step

    tf = _tf.tf
    logits, weights = [], []
    k_models = len(seeds)
    loss_sum = np.zeros((k_models, p["epochs"]))
    correct_sum = np.zeros((k_models, p["epochs"]))
    seen = np.zeros((k_models, p["epochs"]))
    n_steps = [len(b) for b in batches]
    monitors = []
    for k, s in enumerate(seeds):
        # train_model's global seed for model k: without it every model's step, a graph of
        # the same ops, draws the same noise sequence (the noise certificate's finding)
        _tf.keras.utils.set_random_seed(int(s))
        model = build_model(x.shape[1], {**p, "n_classes": n_classes}, seed=int(s))  # train_model's model
        net = logits_model(model)
        monitor = None
        if p["mechanism"] == "dpsgd" and implementation != "vectorized_optimizer":
            monitor = monitor_for(net, steps=n_steps[k], seed=int(s))
            monitors.append(monitor)
        step, noise_step, _ = build_train_step(
            net, mechanism=p["mechanism"], optimizer=p["optimizer"], learning_rate=p["learning_rate"],
            momentum=p["momentum"], clip_norm=p["clip_norm"], noise_multiplier=own["noise_multiplier"],
            expected_batch_size=p["batch_size"], implementation=implementation or "fast_gradient_clipping",
            microbatches=p["microbatches"],
            dropout_seed=int(np.random.SeedSequence([int(s), 2]).generate_state(1)[0]), noise_monitor=monitor)
        drop = p["microbatches"] is not None and p["sampling"] == "shuffle"
        progress = Progress(f"reference model {k + 1}/{k_models} steps", len(batches[k]), unit="steps")
        for t, idx in enumerate(batches[k]):
            progress.advance()
            if drop and len(idx) % p["microbatches"]:
                idx = idx[: len(idx) - len(idx) % p["microbatches"]]
            if len(idx) == 0:
                if noise_step is not None:
                    noise_step()
                continue
            ls, cs, _ = step(tf.constant(x[idx]), tf.constant(y[idx]))
            e = min(_epoch_of(t, p, own, n_steps, k), p["epochs"] - 1)
            loss_sum[k, e] += float(ls)
            correct_sum[k, e] += float(cs)
            seen[k, e] += len(idx)
        progress.finish()
        logits.append(predict_logits(net, x))
        weights.append(model.get_weights())
    with np.errstate(invalid="ignore", divide="ignore"):
        history = {"loss": loss_sum / seen, "accuracy": correct_sum / seen}
    stacked = [np.stack([w[j] for w in weights]) for j in range(len(weights[0]))]
    return np.stack(logits), history, stacked, monitors
