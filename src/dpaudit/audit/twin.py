"""Audit twins of DP-SGD runs: the released run's training with canaries planted.

An audit twin trains on the released run's data with its hyperparameters, sampling
rate, step count, noise multiplier, optimizer and gradient code path
(``dpaudit.training.train.train_model`` and ``dpaudit.training.steps``), plus two
kinds of canaries, each included independently with probability ½:

* gradient canaries (white box): canary i owns one coordinate of the update that the
  loss does not depend on (a first-layer weight of an input no data row uses, in
  effect); while included, it is a row of the population the batch sampler draws from
  at the run's rate q, and contributes a gradient of norm ``gradient_norm`` that the
  step clips with the data's clip weights. The canaries' coordinates are a variable of
  their own (not a weight of the model: m more inputs would cost m × width weights), updated by
  the same optimizer call as the model's weights. The auditor reads that variable's state after
  every update (its weights, and the optimizer's slots for it) and reconstructs each step's
  noised sum at every canary coordinate with the inverse of the optimizer's rule
  (``twin_observations``, ``dpaudit.audit.weight_certificate.canary_observations``): what an
  observer of all iterates reconstructs. Whatever the optimizer call does to its inputs reaches
  the canaries; what moves the model's weights outside that call does not reach them, and is the
  weight certificate's to catch (``noise_check["weights"]``).

Why the gradient canaries are independent trials of the claimed mechanism (Nasr et al.
2023, Sec. 4): canary i's inclusion bit is its own fair coin; given it, its per-step
sampling bits are independent Bernoulli(q) draws of the sampler (one uniform per row
and step, rows independent), its noise is the Gaussian of its own coordinate
(independent across coordinates and steps), and no data row or other canary touches its
coordinate. Its observation sequence is therefore an independent draw of the
Poisson-subsampled Gaussian mechanism composed over the run's steps, which is what the
claim-curve test of ``dpaudit.dp.canary_bounds`` needs (no 2mδ term).
* input canaries (black box): rows of the non-member split with their label changed
  to the next class, so that a model that memorises them fits them against the data.
  The included ones join the training set; the auditor sees the final model only.

The released model is not touched: the twin is a separate training run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.audit.canary_plan import CanaryPlan, plan_canaries
from dpaudit.audit.linear_audit import linear_canary_scores
from dpaudit.audit.mechanism_checks import MechanismObserver
from dpaudit.audit.weight_certificate import OptimizerRule, canary_observations
from dpaudit.contract.mechanisms import LINEAR_MECHANISMS
from dpaudit.dp import accounting
from dpaudit.dp.canary_bounds import one_run_delta
from dpaudit.dp.canary_power import subsampled_gaussian_llr
from dpaudit.dp.tradeoff import claimed_inputs, twin_tradeoff
from dpaudit.training.models import predict_logits
from dpaudit.training.params import normalize_params
from dpaudit.training.steps import CORRECT, MechanismPolicy
from dpaudit.training.train import train_model

__all__ = ["CanaryPlan", "canary_scores", "plan_canaries", "run_canary_twin", "twin_observations"]


def twin_observations(info: dict[str, Any], params: dict[str, Any]) -> np.ndarray:
    """The white-box canaries' observations [steps, m] (noised sum at each canary coordinate ÷ C) of
    an audit twin's ``train_model`` info, reconstructed from the canary coordinates' consecutive
    states with the inverse of the run's optimizer rule."""
    p = normalize_params(params)
    rule = OptimizerRule(p["optimizer"], p["learning_rate"], p["momentum"])
    names = list(info["canary_state_names"])
    states = np.asarray(info["canary_states"])[:, [names.index("weights"), *(names.index(s) for s in rule.slots)]]
    divisor = p["microbatches"] if p["microbatches"] is not None else p["batch_size"]
    return canary_observations(rule, states, divisor, p["clip_norm"])


def run_canary_twin(examples: pd.DataFrame, splits: dict[str, str], params: dict[str, Any], *,
                    gradient_canaries: int, input_canaries: int, gradient_norm_factor: float, seed: int,
                    threads: int, log: logging.Logger, run: str | None = None, confidence: float = 0.95,
                    policy: MechanismPolicy = CORRECT) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Train the audit twin of a DP-SGD run; return per-canary scores and the twin's record.

    Scores (higher = looks included): white box ``llr`` (``dpaudit.dp.canary_power.subsampled_gaussian_llr`` with
    the run's q and σ, as the auditor knows them) and ``sum`` (Σ_t u_t); black box
    ``neg_loss`` (minus the final twin's cross-entropy on the canary's changed label).
    ``policy`` plants a bug on purpose (``dpaudit.training.steps.MechanismPolicy``; power tests).
    """
    p = normalize_params(params)
    if p["mechanism"] != "dpsgd":
        raise ValueError(f"audit twins are for dpsgd runs, got {p['mechanism']}")
    n_classes = int(p["n_classes"] or int(examples["label"].max()) + 1)
    plan = plan_canaries(examples, splits, gradient_canaries=gradient_canaries, input_canaries=input_canaries,
                         gradient_norm=gradient_norm_factor * p["clip_norm"], n_classes=n_classes, seed=seed)
    t0 = time.perf_counter()
    info = train_model(examples, splits, params, None, threads=threads, log=log, run=run,
                       canaries=plan, policy=policy, observer=MechanismObserver())
    seconds = time.perf_counter() - t0
    observations = twin_observations(info, params)
    info.pop("canary_states")
    info.pop("canary_sampled")
    net = info.pop("canary_net")
    q, sigma = info["sampling_probability"], info["noise_multiplier"]
    frames = []
    if gradient_canaries:
        ids = np.arange(gradient_canaries, dtype=np.int64)
        for kind, score in (("llr", subsampled_gaussian_llr(observations, q, sigma)),
                            ("sum", observations.astype(np.float64).sum(axis=0))):
            frames.append(pd.DataFrame({"canary_id": ids, "included": plan.gradient_included,
                                        "score": score, "threat_model": "white_box", "score_kind": kind,
                                        "example_id": pd.array([None] * gradient_canaries, dtype="Int64")}))
    if input_canaries:
        logits = predict_logits(net, plan.input_x).astype(np.float64)
        lse = np.logaddexp.reduce(logits, axis=1)
        loss = lse - logits[np.arange(input_canaries), plan.input_labels]
        frames.append(pd.DataFrame({"canary_id": np.arange(input_canaries, dtype=np.int64),
                                    "included": plan.input_included, "score": -loss,
                                    "threat_model": "black_box", "score_kind": "neg_loss",
                                    "example_id": pd.array(plan.input_example_ids, dtype="Int64")}))
    scores = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    record = {
        "gradient_canaries": int(gradient_canaries),
        "gradient_included": int(plan.gradient_included.sum()),
        "input_canaries": int(input_canaries),
        "input_included": int(plan.input_included.sum()),
        "gradient_norm": plan.gradient_norm,
        "gradient_norm_factor": float(gradient_norm_factor),
        "canary_seed": int(seed),
        "sampling_probability": q,
        "noise_multiplier": sigma,
        "clip_norm": p["clip_norm"],
        "steps": info["steps"],
        "observed_steps": int(observations.shape[0]),
        "epsilon": info["epsilon"],
        "delta": info["delta"],
        "accountant": info["accountant"],
        "sampling": info["sampling"],
        "twin_train_seconds": seconds,
        # the training loop alone, measured like the released run's train_seconds (train.json)
        "twin_loop_seconds": info["train_seconds"],
        "dp_implementation": info["dp_implementation"],
        "planted_bug": policy.as_dict(),
        "accounted_steps": info["accounted_steps"],
        "canary_sampler": info["canary_sampler"],
        "norm_checks": info["norm_checks"],
        "norm_check_kinks": info["norm_check_kinks"],
        "norm_check_largest_kink": info["norm_check_largest_kink"],
        "history": info["history"],
        # the twin's own mechanism checks (issue 32): its noise, canary coordinates included
        "noise_check": info.get("noise_check"),
        "accounting_check": info.get("accounting_check"),
        "sampler": info.get("sampler"),
        "sampler_check": info.get("sampler_check"),
        # what the accountant was given: the claim the canaries test (dpaudit.dp.tradeoff.claimed_inputs)
        "accountant_inputs": info.get("accountant_inputs"),
    }
    record["accountant_profile"] = accountant_profile(record)
    # the claim the canary rows and figures test against, computed here where the accountant is
    # loaded anyway: metric_canary and plot_canary read it and import no dp_accounting
    record["claimed_curve"] = twin_tradeoff(record).as_record()
    record["one_run_claims"] = one_run_claims(record, alpha=1.0 - float(confidence),
                                              canaries={"white_box": int(gradient_canaries),
                                                        "black_box": int(input_canaries)})
    log.info("audit twin: %d gradient and %d input canaries, %d steps in %.1fs",
             gradient_canaries, input_canaries, info["steps"], seconds)
    return scores, record


def canary_scores(examples: pd.DataFrame, splits: dict[str, str], params: dict[str, Any], train: dict[str, Any],
                  options: dict[str, Any], *, threads: int, log: logging.Logger,
                  run: str | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-canary scores and the audit's record for one released run (``train`` is its
    train.json): the audit twin for DP-SGD, many releases for the linear mechanisms."""
    mechanism = params["mechanism"]
    if mechanism == "dpsgd":
        # The released run's σ, as its train.json records it: calibrating it again from the
        # target ε costs seconds of accountant calls and gives the same number. The twin's
        # accountant ε at that σ (its own q and steps) must then be the released one.
        released = float(train["noise_multiplier"])
        scores, record = run_canary_twin(
            examples, splits, {**params, "noise_multiplier": released},
            gradient_canaries=int(options["gradient_canaries"]),
            input_canaries=int(options["input_canaries"]),
            gradient_norm_factor=float(options["gradient_norm_factor"]), seed=int(options["seed"]),
            confidence=float(options["confidence"]), threads=threads, log=log, run=run)
        for key in ("sampling_probability", "steps", "epsilon"):
            if not np.isclose(record[key], float(train[key]), rtol=1e-9, atol=0.0):
                raise RuntimeError(
                    f"audit twin of run {run!r}: {key}={record[key]!r} at the released noise_multiplier "
                    f"{released!r}, the released model {train[key]!r}: the twin would not audit the released mechanism"
                )
        record["released_train_seconds"] = train.get("train_seconds")
        return scores, record
    if mechanism in LINEAR_MECHANISMS:
        return linear_canary_scores(examples, splits, params, train, options, log=log)
    raise ValueError(f"the canary audit covers dpsgd and {LINEAR_MECHANISMS}, not {mechanism!r}")


# δ at which the twin records the accountant's own profile (with the run's δ): the claim's
# (ε, δ) statements that the claimed trade-off curve joins (``dpaudit.dp.tradeoff``).
PROFILE_DELTAS = tuple(float(d) for d in np.geomspace(1e-12, 0.1, 23))


def accountant_profile(record: dict[str, Any]) -> list[list[float]]:
    """[[δ, ε(δ)], ...]: the run's accountant (the σ, q and steps it was given, batch scheme) at
    ``PROFILE_DELTAS`` and the run's δ, through the same code path as the run's ε."""
    deltas = sorted({*PROFILE_DELTAS, float(record["delta"])})
    sigma, q, steps = claimed_inputs(record)
    eps = accounting.dpsgd_profile(sigma, q, steps, deltas, record["accountant"], record["sampling"])
    return [[float(d), float(e)] for d, e in zip(deltas, eps, strict=True)]


def one_run_claims(record: dict[str, Any], *, alpha: float, canaries: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per threat model with canaries, the δ′ = ``one_run_delta`` its one-run bound is computed
    at and the accountant's ε there (the σ, q and steps the twin's accountant was given, its
    accountant and sampling): {"white_box": {"canaries": m, "delta": δ′, "epsilon": ε(δ′)}, ...}. Recorded
    once in audit.json; ``dpaudit.metrics.canary.rows`` and the figures read it."""
    claims = {}
    for threat, m in canaries.items():
        if m <= 0:
            continue
        at = one_run_delta(record["delta"], alpha, m)
        sigma, q, steps = claimed_inputs(record)
        eps = accounting.dpsgd_epsilon(sigma, q, steps, at, record["accountant"], record["sampling"])["epsilon"]
        claims[threat] = {"canaries": int(m), "delta": float(at), "epsilon": float(eps)}
    return claims
