"""Train a baseline or DP-SGD Keras model on the members split (the training driver).

Output and objective perturbation of logistic regression (numpy/scipy, no
TensorFlow training) are dispatched to ``dpaudit.training.linear``.

Parameters are checked and filled by ``dpaudit.training.params`` (``normalize_params``), the noise is
calibrated by ``dpaudit.dp.accounting``, batches come from
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.contract.mechanisms import LINEAR_MECHANISMS
from dpaudit.dp import accounting
from dpaudit.logs import InputRefusal
from dpaudit.progress import Progress
from dpaudit.training import architectures, sampling
from dpaudit.training.architectures import build_model, shaping_keys
from dpaudit.training.checkpoint_recorder import CheckpointRecorder
from dpaudit.training.divergence import (
    LOSS_DIVERGENCE_RATIO,
    constant_predictor_loss,
    divergence_reason,
    loss_divergence,
    training_verdict,
)
from dpaudit.training.linear import train_linear
from dpaudit.training.models import features, logits_model, predict_logits, save_model
from dpaudit.training.norm_check import NormCheck
from dpaudit.training.observer import TrainingObserver, TwinCanaries
from dpaudit.training.params import normalize_params, resolve_implementation
from dpaudit.training.steps import (
    CORRECT,
    NORM_CHECK_EXAMPLES,
    NORM_CHECK_RTOL,
    MechanismPolicy,
    build_train_step,
    checks_norms,
    optimizer_class_name,
)

__all__ = [
    "LOSS_DIVERGENCE_RATIO",
    "MICROBATCH_ACCOUNTING_NOTE",
    "build_train_step",
    "constant_predictor_loss",
    "divergence_reason",
    "loss_divergence",
    "train_model",
]

MICROBATCH_ACCOUNTING_NOTE = (
    "The accountant treats each example's sensitivity as C (per-example clipping) and "
    "ignores microbatching (as in TF Privacy, Negoescu et al. 2023's library). With microbatches, one example added to or "
    "removed from the batch changes the clipped mean gradient of its group, and that "
    "clipped group mean can move by up to 2C (norm C before and after, opposite "
    "directions) under add/remove-one. The reported epsilon therefore follows the "
    "Epsilon* paper's (TF Privacy's) convention and is not a proven (epsilon, delta) "
    "bound when microbatches is set."
)

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
    canaries: TwinCanaries | None = None,
    policy: MechanismPolicy = CORRECT,
    observer: TrainingObserver | None = None,
) -> dict[str, Any]:
    """Train on ``splits['members']``, save the model (no optimizer), return train info.

    ``run`` and ``dataset`` (the run's name in the grid, its dataset) only label
    error messages.
    ``checkpoints = K > 0`` also saves the weights at K evenly spaced step
    indices (the first is the initialisation) to ``checkpoint_path`` (.npz, see
    ``dpaudit.training.checkpoint_recorder.CheckpointRecorder``): the practical-membership-privacy family (Recipe B)
    recomputes per-example clipped gradients at each of them.

    ``canaries`` (``dpaudit.training.observer.TwinCanaries``, e.g. the audit's ``CanaryPlan``) turns the run into an audit twin: the included
    input canaries join the members, the gradient canaries get their own coordinates of
    the update (``dpaudit.training.steps.build_train_step``; the model is the released
    run's, initialised alike), and ``info["canary_states"]`` holds their state before the first and after
    every update ((steps + 1) × (1 + slots) × m: the coordinates' weights, then the optimizer's slots
    named in ``info["canary_state_names"]``), from which the auditor reconstructs each step's noised
    update at every canary's coordinate with the optimizer's rule (``dpaudit.audit.twin``), and
    ``info["canary_sampled"]`` which canaries each step sampled (steps × m, bool); ``model_path`` may then be None
    (no model is saved) and ``info["canary_net"]`` is the trained logits model. With
    Poisson sampling the included gradient canaries are rows of the population the
    batch sampler draws from (one call, one Bernoulli(q) per row and step, so a wrong
    rate or sampler shows in them); with ``shuffle`` they keep their own Poisson(q) draw
    (a permutation would put all m canaries into the batches). The twin also checks the
    path's per-example norms at every step (``NORM_CHECK_EXAMPLES`` random positions) against
    the gradient it summed and against one tape per example alone, and stops on what voids DP
    (``dpaudit.training.norm_check``). ``policy`` (``dpaudit.training.steps.MechanismPolicy``) plants a
    bug on purpose, for power tests only.

    ``observer`` (``dpaudit.training.observer.TrainingObserver``) watches a DP-SGD training whole:
    it is handed the step's noise, every sampler draw and every executed update, and what its
    ``checks`` return joins ``info`` (the released run, its twin and the reference pools pass
    ``dpaudit.audit.mechanism_checks.MechanismObserver``: ``noise_check``, ``accounting_check``,
    ``sampler``, ``accountant_inputs``, issue 32). Without one nothing is checked or recorded.

    The work is in three parts: ``_setup`` (parameters, data, accountant, model, step),
    ``_loop`` (the epochs) and ``_record`` (train.json).
    """
    wall0 = time.perf_counter()
    p = normalize_params(params)
    if canaries is not None or not policy.correct:
        if p["mechanism"] != "dpsgd":
            raise ValueError(f"canary twins and planted bugs apply to dpsgd runs, not {p['mechanism']}")
    if (policy.sample_rate_factor != 1.0 or policy.sampler_bug) and p["sampling"] != "poisson":
        raise ValueError("MechanismPolicy.sample_rate_factor and sampler_bug apply to Poisson sampling only")
    if model_path is not None or canaries is None:
        model_path = Path(model_path)
        if model_path.suffix not in (".keras", ".h5"):
            raise ValueError(f"model_path must end in .keras or .h5, got {model_path}")
    if p["mechanism"] in LINEAR_MECHANISMS:
        return train_linear(examples, splits, p, model_path, threads=threads, log=log, run=run, dataset=dataset,
                            checkpoints=checkpoints, checkpoint_path=checkpoint_path)
    setup = _setup(examples, splits, p, threads=threads, log=log, run=run, dataset=dataset, canaries=canaries,
                   policy=policy, observer=observer)
    recorder = CheckpointRecorder(checkpoints, setup.steps, setup.model) if checkpoints else None
    loop = _loop(setup, log=log, run=run, dataset=dataset, canaries=canaries, recorder=recorder)
    if recorder is not None:
        if checkpoint_path is None:
            raise ValueError("checkpoints > 0 needs a checkpoint_path")
        recorder.save(checkpoint_path)
    if model_path is not None:
        save_model(setup.model, model_path)
        if setup.observer is not None:
            setup.observer.saved(model_path, [*setup.net.trainable_variables, *setup.net.non_trainable_variables])
    info = _record(setup, loop, log=log, run=run, model_path=model_path)
    info["wall_time_seconds"] = time.perf_counter() - wall0
    if canaries is not None:
        info.update(_twin_info(loop.observations, loop.sampled, setup.m_gradient, setup.shared_sampler,
                               loop.norm_checks, setup.net, setup.n_train, setup.opt))
    return info


@dataclass
class _Setup:
    """What ``_setup`` prepares for the loop and the record."""

    p: dict[str, Any]
    x: np.ndarray
    y: np.ndarray
    x_util: np.ndarray
    y_util: np.ndarray
    member_ids: np.ndarray
    n: int
    d: int
    n_classes: int
    n_train: int
    m_gradient: int
    steps: int
    spe: int
    implementation: str | None
    noise_multiplier: float
    privacy: dict[str, Any]
    model: Any
    net: Any
    step: Any
    noise_step: Any
    opt: Any
    check_norms: bool
    observer: TrainingObserver | None
    batches: Any
    canary_rows: np.ndarray
    shared_sampler: bool
    sampler_seed: list
    dropout_seed: list
    policy: MechanismPolicy
    splits: dict[str, str]
    threads: int


@dataclass
class _Loop:
    """What the loop did."""

    history: list
    fractions: list
    observations: list  # the canaries' states after each update
    sampled: list
    norm_checks: NormCheck
    dropped: int
    empty_batches: int
    train_seconds: float


def _setup(examples: pd.DataFrame, splits: dict[str, str], p: dict[str, Any], *, threads: int,
           log: logging.Logger, run: str | None, dataset: str | None, canaries: TwinCanaries | None,
           policy: MechanismPolicy, observer: TrainingObserver | None) -> _Setup:
    """Parameters, data, accountant, model, step, sampler and noise monitor of a Keras run."""
    members = examples[examples["split"] == splits["members"]]
    utility = examples[examples["split"] == splits["utility"]]
    if len(members) < 2:
        raise InputRefusal(f"members split {splits['members']!r} has {len(members)} examples")
    n = len(members)
    # The message of the parse-time check (dpaudit.config), which catches it already
    # where n is known before the data are downloaded.
    problem = sampling.batch_size_problem(p["batch_size"], n, dataset or "(unnamed)",
                                 f"run {run!r}" if run is not None else "grid")
    if problem is not None:
        raise InputRefusal(problem)

    from dpaudit import _tf

    threads = _tf.configure(threads, p["seed"])  # the count the process's pools really use

    x = features(members)
    y = members["label"].to_numpy(dtype=np.int64)
    x_util = features(utility) if len(utility) else x[:0]
    y_util = utility["label"].to_numpy(dtype=np.int64)
    n, d = x.shape
    n_classes = int(p["n_classes"] or int(examples["label"].max()) + 1)
    batch_size = p["batch_size"]
    q = batch_size / n
    m_gradient = 0
    if canaries is not None:
        # The sampling rate, the divisor B and the step count stay the released run's:
        # an included input canary is one more example sampled at rate q.
        if canaries.input_included.any():
            x = np.concatenate([x, canaries.input_x[canaries.input_included]]).astype(np.float32)
            y = np.concatenate([y, canaries.input_labels[canaries.input_included]])
        n_train = len(x)
        m_gradient = int(canaries.gradient_included.size)
    else:
        n_train = n
    spe = sampling.steps_per_epoch(n, batch_size)
    steps = spe * p["epochs"]
    k = p["microbatches"]
    if k is not None and k > batch_size:
        # Most groups would be empty in every step; almost surely a config error.
        raise InputRefusal(f"microbatches={k} exceeds the batch size {batch_size}")

    implementation, noise_multiplier, privacy = _privacy(p, q, steps, log, policy)

    model = build_model(d, {**p, "n_classes": n_classes}, seed=p["seed"])
    dropout_seed = [p["seed"], 2]  # masked_ghost_clipping's per-example Dropout masks
    net = logits_model(model)
    if p["mechanism"] != "dpsgd":
        observer = None  # a baseline's training has no mechanism to watch
    monitor = clip_monitor = None
    if observer is not None:
        # the declared builder itself, not this driver's name for it: a start changed anywhere in the driver
        # (a wrapped builder included) differs from it
        observer.initialized(lambda: architectures.build_model(d, {**p, "n_classes": n_classes}, seed=p["seed"]))
        monitor = observer.noise_monitor(net, steps=steps, seed=p["seed"], canaries=m_gradient)
        clip_monitor = observer.clip_monitor(
            net, steps=steps, seed=p["seed"], clip_norm=p["clip_norm"], rows=(x, y),
            drop_remainder=k if k is not None and p["sampling"] == "shuffle" else None)
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
        gradient_canaries=m_gradient,
        canary_gradient_norm=None if canaries is None else canaries.gradient_norm,
        check_norms=canaries is not None,
        policy=policy,
        noise_monitor=monitor,
        noise_seed=int(np.random.SeedSequence([p["seed"], 9]).generate_state(1)[0]),
        weight_monitor=observer.weight_monitor if observer is not None else None,
        clip_monitor=clip_monitor,
    )
    check_norms = canaries is not None and checks_norms(implementation, has_dropout=bool(p["dropout"]))

    sampler_seed = [p["seed"], 1]
    rng = np.random.default_rng(sampler_seed)
    canary_rows = np.flatnonzero(canaries.gradient_included) if m_gradient else np.zeros(0, np.int64)
    shared_sampler = m_gradient > 0 and p["sampling"] == "poisson"
    population = n_train + (canary_rows.size if shared_sampler else 0)
    if p["sampling"] == "poisson":
        rate = q * policy.sample_rate_factor
        batches = (sampling.planted_batches(policy.sampler_bug, population, rate, steps, spe, rng)
                   if policy.sampler_bug else sampling.poisson_batches(population, rate, steps, rng))
    else:
        rate = batch_size / n_train
        batches = sampling.shuffle_batches(n_train, batch_size, p["epochs"], rng, per_epoch=spe)
    if observer is not None:
        observer.sampler(sampling=p["sampling"], population=population, rate=rate, batch_size=batch_size,
                         steps_per_epoch=spe, canary_rows=canary_rows.size, canaries_shared=shared_sampler,
                         canary_rate=q)
    member_ids = members["example_id"].to_numpy() if "example_id" in members.columns else np.arange(n)
    return _Setup(p=p, x=x, y=y, x_util=x_util, y_util=y_util, member_ids=member_ids, n=n, d=d,
                  n_classes=n_classes, n_train=n_train, m_gradient=m_gradient, steps=steps, spe=spe,
                  implementation=implementation, noise_multiplier=noise_multiplier, privacy=privacy, model=model,
                  net=net, step=step, noise_step=noise_step, opt=opt, check_norms=check_norms, observer=observer,
                  batches=batches, canary_rows=canary_rows, shared_sampler=shared_sampler,
                  sampler_seed=sampler_seed, dropout_seed=dropout_seed, policy=policy,
                  splits=dict(splits), threads=threads)


def _loop(s: _Setup, *, log: logging.Logger, run: str | None, dataset: str | None, canaries: TwinCanaries | None,
          recorder: CheckpointRecorder | None) -> _Loop:
    """The epochs: batches from the sampler, one step each (noise only for an empty batch)."""
    from dpaudit import _tf

    tf = _tf.tf
    p, x, y = s.p, s.x, s.y
    k = p["microbatches"]
    m_gradient, n_train = s.m_gradient, s.n_train
    own_canary_rng = check_rng = None
    observations: list[np.ndarray] = []
    sampled: list[np.ndarray] = []
    if m_gradient:
        own_canary_rng = np.random.default_rng([p["seed"], canaries.seed, 3])
    if canaries is not None:
        # which examples' norms are checked: its own stream, so the batches stay the same
        check_rng = np.random.default_rng([p["seed"], canaries.seed, 5])
    norm_check = NormCheck(NORM_CHECK_RTOL, run, s.implementation, s.member_ids, s.n)
    updates = 0
    q = p["batch_size"] / s.n

    def canary_mask_of(idx):
        """(data positions, [m] 0/1 canary mask) of one batch of the population."""
        mask = np.zeros(m_gradient, np.float32)
        if s.shared_sampler:
            mask[s.canary_rows[idx[idx >= n_train] - n_train]] = 1.0
            return idx[idx < n_train], mask
        own = np.flatnonzero(own_canary_rng.random(s.canary_rows.size) < q)
        if s.observer is not None:
            s.observer.drew_canaries(own)
        mask[s.canary_rows[own]] = 1.0
        return idx, mask

    # As TF Privacy: with fixed-size batches, drop the remainder so k divides the batch.
    drop_remainder = k is not None and p["sampling"] == "shuffle"
    history: list[dict[str, Any]] = []
    empty_batches = 0
    dropped = 0
    all_fractions: list[float] = []
    observer = s.observer
    train0 = time.perf_counter()
    progress = Progress("training steps" if canaries is None else "audit twin steps", s.spe * p["epochs"],
                        unit="steps", log=log)
    for epoch in range(1, p["epochs"] + 1):
        t0 = time.perf_counter()
        loss_sum = correct = seen = 0.0
        fractions: list[float] = []
        for _ in range(s.spe):
            progress.advance()
            updates += 1
            if recorder is not None:
                recorder.before_step()
            idx = next(s.batches)
            if observer is not None:
                observer.drew(idx)
            extra = ()
            if m_gradient:
                idx, mask = canary_mask_of(idx)
                sampled.append(mask > 0)
                extra = (tf.constant(mask),)
            if drop_remainder and len(idx) % k:
                dropped += len(idx) % k
                idx = idx[: len(idx) - len(idx) % k]
            if len(idx) == 0:
                empty_batches += 1
                if s.noise_step is not None:
                    out = s.noise_step(*extra)
                    if observer is not None:
                        observer.executed(empty=True)
                    if extra:
                        observations.append(out[3].numpy())
                continue
            positions = None
            if s.check_norms:  # examples, or the microbatch path's groups
                units = len(idx) if k is None else min(k, len(idx))
                positions = check_rng.integers(0, units, NORM_CHECK_EXAMPLES).astype(np.int32)
                extra = (*extra, tf.constant(positions))
            ls, cs, fraction, *observed = s.step(tf.constant(x[idx]), tf.constant(y[idx]), *extra)
            if observer is not None:
                observer.executed()
            if m_gradient:
                observations.append(observed[0].numpy())
            if positions is not None:
                norm_check(*(t.numpy() for t in observed[-4:]), step=updates,
                           rows=idx[positions] if k is None else None, groups=positions if k is not None else None)
            if not math.isfinite(loss := float(ls)):
                label = f"run {run!r}" if run is not None else "this run"
                raise InputRefusal(
                    f"{label} (dataset {dataset}): training loss became non-finite ({loss}) at epoch {epoch}, "
                    f"learning_rate={p['learning_rate']:g}; the model file is not written. Lower learning_rate "
                    "(grid key learning_rate) or check the features for huge values"
                )
            loss_sum += loss
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
        record.update(_utility(s.net, s.x_util, s.y_util))
        history.append(record)
        log.info(
            "epoch %d/%d loss=%.4f accuracy=%.4f utility_accuracy=%s time=%.2fs",
            epoch, p["epochs"], record["loss"], record["accuracy"],
            f"{record['utility_accuracy']:.4f}" if "utility_accuracy" in record else "n/a",
            seconds,
        )
    progress.finish()
    return _Loop(history=history, fractions=all_fractions, observations=observations, sampled=sampled,
                 norm_checks=norm_check, dropped=dropped, empty_batches=empty_batches,
                 train_seconds=time.perf_counter() - train0)



def _record(s: _Setup, loop: _Loop, *, log: logging.Logger, run: str | None,
            model_path: Path | None) -> dict[str, Any]:
    """train.json of a Keras run: hyperparameters, accountant, the mechanism's checks, history."""
    from dpaudit import _tf

    p, history = s.p, loop.history
    k = p["microbatches"]
    # Did the released model learn (dpaudit.training.divergence)?
    verdict = training_verdict(history, s.y, predict_logits(s.net, s.x), s.y_util,
                               predict_logits(s.net, s.x_util) if len(s.x_util) else None,
                               learning_rate=p["learning_rate"], run=run, n_classes=s.n_classes)
    for warning in verdict["warnings"]:
        log.warning(warning)
    for note in ("training_note", "instability_note"):
        if verdict[note] is not None:
            log.info("note: %s", verdict[note])
    batch_size = p["batch_size"]
    info: dict[str, Any] = {
        "mechanism": p["mechanism"],
        "optimizer": p["optimizer"],
        "optimizer_class": optimizer_class_name(s.opt),
        "dp_implementation": s.implementation,
        "hyperparameters": {key: v for key, v in p.items()},
        "epochs": p["epochs"],
        "batch_size": batch_size,
        "learning_rate": p["learning_rate"],
        "momentum": p["momentum"],
        **{key: p[key] for key in shaping_keys(p["model"])},  # every parameter that shapes the model
        "n_trainable_parameters": int(sum(int(np.prod(v.shape)) for v in s.net.trainable_variables)),
        "clip_norm": p["clip_norm"],
        "target_epsilon": p["target_epsilon"],
        "sampling": p["sampling"],
        "sampling_probability": batch_size / s.n,
        "steps": s.steps,
        "steps_per_epoch": s.spe,
        "expected_batch_size": float(batch_size),
        "empty_batches": loop.empty_batches,
        "microbatches": k,
        "microbatch_dropped_examples": int(loop.dropped),
        "accounting_note": MICROBATCH_ACCOUNTING_NOTE if k is not None else None,
        "clipped_fraction": (
            (float(np.mean(loop.fractions)) if loop.fractions else math.nan)
            if p["mechanism"] == "dpsgd"
            else None
        ),
        "noise_multiplier": float(s.noise_multiplier),
        "delta": p["delta"],
        "epsilon": float(s.privacy["epsilon"]),
        "accounted_steps": s.privacy.get("steps"),
        "accountant": s.privacy["accountant"],
        "orders": s.privacy["orders"],
        "neighbouring_relation": s.privacy["neighbouring_relation"],
        "amplification": s.privacy["amplification"],
        "n_members": int(s.n),
        "n_utility": int(len(s.x_util)),
        "n_features": int(s.d),
        "n_classes": s.n_classes,
        "splits": dict(s.splits),
        "seeds": {"seed": p["seed"], "init": p["seed"], "sampler": s.sampler_seed,
                  "dropout_masks": s.dropout_seed, "tf_global": p["seed"], "noise_sample": [p["seed"], 6]},
        "threads": int(s.threads),
        "history": history,
        **verdict,
        "train_seconds": loop.train_seconds,
        "model_file": None if model_path is None else model_path.name,
        "versions": _tf.versions(),
    }
    if s.observer is not None:
        t0 = time.perf_counter()
        info.update(s.observer.checks(noise_multiplier=s.noise_multiplier, clip_norm=p["clip_norm"],
                                      published_epsilon=info["epsilon"], delta=p["delta"], privacy=s.privacy, log=log),
                    mechanism_check_seconds=time.perf_counter() - t0)
    if not s.policy.correct:
        info["planted_bug"] = s.policy.as_dict()
    return info


def _twin_info(states: list, sampled: list, m_gradient: int, shared_sampler: bool, norm_check: NormCheck,
               net, n_train: int, opt) -> dict[str, Any]:
    """What an audit twin adds to its train info (``train_model(canaries=...)``)."""
    names = ["weights", *opt.get_slot_names()] if m_gradient else ["weights"]
    # the canary coordinates and their slots start at zero (StepContext's variable, tf_keras' slots)
    initial = np.zeros((1, len(names), m_gradient), np.float32)
    return {
        "canary_states": np.concatenate([initial, np.stack(states)]) if states else initial,
        "canary_state_names": names,
        "canary_sampled": np.stack(sampled) if sampled else np.zeros((0, m_gradient), bool),
        "canary_sampler": "shared_poisson" if shared_sampler else "own_poisson",
        **norm_check.record(),
        "canary_net": net,
        "n_members_with_canaries": int(n_train),
    }


def _privacy(p: dict[str, Any], q: float, steps: int, log: logging.Logger,
             policy: MechanismPolicy = CORRECT) -> tuple[str | None, float, dict]:
    """(gradient path, noise multiplier, accountant's answer) of a run; a baseline has ε = ∞."""
    if p["mechanism"] != "dpsgd":
        return None, 0.0, {
            "epsilon": math.inf,
            "accountant": None,
            "orders": None,
            "neighbouring_relation": None,
            "amplification": None,
        }
    implementation = resolve_implementation(p)
    # what the accountant is given: q and T, unless a planted bug changes them (power tests only)
    q = q * policy.accountant_rate_factor
    steps = max(1, round(steps * policy.accountant_steps_factor))
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
    return implementation, noise_multiplier, privacy


def _utility(net, x_util: np.ndarray, y_util: np.ndarray) -> dict[str, float]:
    """Mean cross-entropy and accuracy on the utility split (empty when it has no rows)."""
    if not len(x_util):
        return {}
    logits_u = predict_logits(net, x_util).astype(np.float64)
    lse = np.logaddexp.reduce(logits_u, axis=1)
    return {"utility_loss": float(np.mean(lse - logits_u[np.arange(len(y_util)), y_util])),
            "utility_accuracy": float(np.mean(np.argmax(logits_u, axis=1) == y_util))}

