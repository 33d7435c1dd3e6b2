"""Many-runs audit of the pure-ε linear mechanisms (output and objective perturbation).

Training takes milliseconds, so the audit releases the mechanism R times on D (the
run's members, scaled into the unit ball as ``dpaudit.training.linear`` does) and R
times on a neighbour D′ (the mechanisms' relation is ``replace_one``: one row of D
replaced), scores every release by the EXACT log-density ratio
``score(w) = log p_D(w) − log p_D′(w)`` (the Neyman–Pearson statistic: no test of
D against D′ does better at any false-positive rate) and turns the two score
samples into a Clopper–Pearson ε lower bound with
``dpaudit.metrics.mia.epsilon_lower_bound`` (threshold chosen on one half, counted
on the other; member = a release on D, loss = −score).

The pieces:

* the neighbour D′ (``crafted_pair`` by default, or ``worst_replacement``):
  ``dpaudit.audit.linear_neighbours``;
* the releases and their exact log-density ratios (output perturbation: L2-Laplace noise
  around the minimizer; objective perturbation: batched exact Newton on the perturbed
  objectives and the change-of-variables density): ``dpaudit.audit.linear_releases``;
* what the claim-curve test of these releases could have caught (the detectable noise
  factor, bisection in ``dpaudit.dp.canary_power``): ``dpaudit.audit.linear_detection``;
* this module: the audit of one run (``linear_release_scores``) and the canary family's
  entry point (``linear_canary_scores``).

The CEILING stored beside the bound is what perfect separation certifies with the
same evaluation counts (TP = n_eval, FP = 0; ``dp.hypothesis.epsilon_from_counts``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.audit.linear_detection import DETECTION_REPETITIONS, linear_detectable_factor
from dpaudit.audit.linear_neighbours import (
    crafted_pair,
    ratio_ceiling,
    replace_row,
    worst_replacement,
)
from dpaudit.audit.linear_releases import (
    objective_log_ratio,
    objective_perturbation_noise_of,
    objective_perturbation_releases,
    output_log_ratio,
)
from dpaudit.contract.mechanisms import LINEAR_MECHANISMS
from dpaudit.dp.noise_certificate import certify_l2_laplace_releases
from dpaudit.profile import mechanisms as profile_mechanisms
from dpaudit.profile import model as profile_model
from dpaudit.training.linear import NEIGHBOURING_RELATION, feature_scale

__all__ = [
    "MECHANISMS",
    "NEIGHBOURS",
    "SCORE_COLUMNS",
    "SCORE_KIND",
    "THREAT_MODEL",
    "linear_canary_scores",
    "linear_release_scores",
]

THREAT_MODEL = "many_runs"  # the canary family's name for this audit
SCORE_KIND = "log_density_ratio"
MECHANISMS = LINEAR_MECHANISMS  # the mechanisms this audit covers (dpaudit.contract.mechanisms)
SCORE_COLUMNS = ("canary_id", "included", "score", "threat_model")
NEIGHBOURS = ("crafted", "worst_replacement")
# Noise streams: rng = default_rng([seed, stream]); D releases, D′ releases (the detection's
# simulated implementations draw from stream canary_linear_detection.DETECTION_STREAM = 2).
_STREAM_INCLUDED, _STREAM_EXCLUDED = 0, 1


def linear_release_scores(x_members: np.ndarray, labels: np.ndarray, *, mechanism: str, epsilon: float,
                          lam: float, releases: int, seed: int, solver: str = "newton", candidates: int = 16,
                          noise_factor: float = 1.0, example_ids: np.ndarray | None = None,
                          neighbour: str = "crafted", alpha: float | None = 0.05, per_tail: int | None = 40,
                          detection_repetitions: int = DETECTION_REPETITIONS,
                          detection_route: str = "frozen_hessian") -> dict[str, Any]:
    """``releases`` releases of a linear mechanism on D and as many on its neighbour D′, scored.

    The bound from these scores is ``dpaudit.metrics.canary.many_runs``; this half trains and
    scores only (plus the detectable noise factor, ``canary_linear_detection``), so the
    canary_scores job does not depend on the attack statistics.

    ``x_members`` are the raw member features (scaled here by their largest row norm, as the
    training job does), ``labels`` 0/1.
    ``neighbour``: ``"crafted"`` (default; ``crafted_pair``: D = members ∪ {canary in},
    D′ = members ∪ {canary out}) or ``"worst_replacement"`` (D = members, D′ = one member
    replaced, ``worst_replacement``). ``row`` is the 0-based row of D that D′ replaces (n, the
    canary, for the crafted pair); ``example_id`` the replaced member's id when ``example_ids``
    is given (None for the crafted pair); ``replacement_x`` D′'s row and ``canary_x`` D's
    (None for worst_replacement), in the scaled feature space (× ``feature_scale`` for raw units).
    ``noise_factor`` scales the drawn noise: 1 is the mechanism; tests pass 0.1 to break it
    (never a config value). Returns the neighbour, the per-release scores (``SCORE_COLUMNS``;
    canary_id = release index, D releases first; ``included`` = released on D, score =
    log p_D − log p_D′, higher = "looks like D": the claim-curve test's convention) and, unless
    ``alpha`` is None, ``detectable_noise_factor`` of the claim-curve test at (``alpha``,
    ``per_tail``, δ = 0, these ``releases``) with its details (``detectable_factor``).
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if neighbour not in NEIGHBOURS:
        raise ValueError(f"neighbour must be one of {NEIGHBOURS}, got {neighbour!r}")
    if int(releases) < 2:
        raise ValueError(f"releases must be at least 2 per side, got {releases!r}")
    if not noise_factor > 0:
        raise ValueError(f"noise_factor must be positive, got {noise_factor!r}")
    releases = int(releases)
    wall0 = time.perf_counter()
    x_raw = np.asarray(x_members, dtype=np.float64)
    y = np.asarray(labels)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0/1 (binary logistic regression)")
    if example_ids is not None and len(example_ids) != len(x_raw):
        raise ValueError(f"example_ids has {len(example_ids)} entries for {len(x_raw)} member rows")
    scale = feature_scale(x_raw)
    x_scaled, t_scaled = x_raw / scale, 2.0 * y.astype(np.float64) - 1.0
    n_members, d = x_scaled.shape
    about: dict[str, Any]
    if neighbour == "crafted":
        pair = crafted_pair(x_scaled, t_scaled, lam,
                            criterion="minimizer" if mechanism == "output_perturbation" else "gradient")
        x, t = np.vstack([x_scaled, pair.x_in]), np.append(t_scaled, pair.t_in)
        row, z, t_z, shift = n_members, pair.x_out, pair.t_out, pair.shift
        about = {"row": row, "example_id": None, "canary_x": pair.x_in, "canary_t": pair.t_in,
                 "removal_rank": None, "profile_row": None, "criterion": pair.criterion,
                 "first_order_shift_norm": pair.first_order_shift_norm,
                 "gradient_change_norm": pair.gradient_change_norm, "shift_bound": pair.shift_bound,
                 "weights_norm": pair.weights_norm, "ratio_ceiling": ratio_ceiling(pair.weights_norm)}
    else:
        replacement = worst_replacement(x_scaled, t_scaled, lam, candidates=candidates)
        x, t = x_scaled, t_scaled
        row, z, t_z, shift = replacement.row, replacement.x, replacement.t, replacement.shift
        about = {"row": row,
                 "example_id": None if example_ids is None else np.asarray(example_ids)[row].item(),
                 "canary_x": None, "canary_t": None, "removal_rank": replacement.removal_rank,
                 "profile_row": replacement.profile_row, "criterion": "minimizer",
                 "first_order_shift_norm": replacement.first_order_shift_norm}
    n = x.shape[0]
    x_prime, t_prime = replace_row(x, t, row, z, t_z)
    shift_norm = float(np.linalg.norm(shift))
    rng_in = np.random.default_rng([seed, _STREAM_INCLUDED])
    rng_out = np.random.default_rng([seed, _STREAM_EXCLUDED])
    t0 = time.perf_counter()
    record: dict[str, Any] = {}
    if mechanism == "output_perturbation":
        if solver != "newton":
            raise ValueError("output perturbation has no solver choice (exact Newton fit)")
        beta = float(profile_mechanisms.output_perturbation_beta(n, lam, epsilon))
        center = profile_model.fit(x, t, lam, allow_zero_rows=True).weights
        released_in = center[None, :] + noise_factor * profile_mechanisms.l2_laplace_noise(rng_in, releases, d, beta)
        released_out = (center + shift)[None, :] + noise_factor * profile_mechanisms.l2_laplace_noise(
            rng_out, releases, d, beta)
        release_seconds = time.perf_counter() - t0
        scores_in = output_log_ratio(released_in, center, shift, beta)
        scores_out = output_log_ratio(released_out, center, shift, beta)
        record |= {"beta": beta, "pair_epsilon": beta * shift_norm}
        noise = np.vstack([released_in - center[None, :], released_out - (center + shift)[None, :]])
        # the promise's scale derived again (not β's code): 1/β = 2/(nΛε), Chaudhuri et al. 2011 Alg. 1
        claimed = (2.0 / (n * lam * epsilon), "1/β = 2/(nΛε), Chaudhuri et al. 2011 Alg. 1")
    else:
        released_in, info = objective_perturbation_releases(x, t, epsilon, lam, releases, rng_in, solver=solver,
                                                            noise_factor=noise_factor)
        released_out, info_out = objective_perturbation_releases(x_prime, t_prime, epsilon, lam, releases, rng_out,
                                                                 solver=solver, noise_factor=noise_factor)
        release_seconds = time.perf_counter() - t0
        args = (x, t, info["ridge"], info["noise_scale"], row, z, t_z)
        scores_in = objective_log_ratio(released_in, *args)
        scores_out = objective_log_ratio(released_out, *args)
        noise = np.vstack([objective_perturbation_noise_of(released_in, x, t, info["ridge"]),
                           objective_perturbation_noise_of(released_out, x_prime, t_prime, info["ridge"])])
        claimed = (info["noise_scale"], "2/ε′ of diffprivlib 0.6.3's objective perturbation")
        record |= {"noise_scale": info["noise_scale"], "ridge": info["ridge"], "epsilon_prime": info["epsilon_prime"],
                   "extra_regularizer": info["extra_regularizer"], "C": info["C"],
                   "newton_iterations": max(info["newton_iterations"] or 0, info_out["newton_iterations"] or 0)
                   if solver == "newton" else None,
                   "pair_epsilon": None}
    score_seconds = time.perf_counter() - t0 - release_seconds
    # the 2R draws of the mechanism's noise, certified in aggregate: the norm's law and the direction's
    # uniformity (issue 45); the trained model's one draw only has its norm tested (dpaudit.training.linear)
    record["noise_check"] = certify_l2_laplace_releases(noise, claimed[0], claimed_from=claimed[1])
    frame = pd.DataFrame({
        "canary_id": np.arange(2 * releases, dtype=np.int64),
        "included": np.repeat([True, False], releases),
        "score": np.concatenate([scores_in, scores_out]),
        "threat_model": pd.array([THREAT_MODEL] * (2 * releases), dtype="string"),
    })
    detection: dict[str, Any] = {"detectable_noise_factor": None, "detectable_noise_factor_details": None}
    if alpha is not None:
        detection = linear_detectable_factor(
            mechanism=mechanism, epsilon=epsilon, alpha=alpha, per_tail=per_tail, seed=seed, releases=releases,
            x=x, t=t, row=row, z=z, t_z=t_z, shift_norm=shift_norm, beta=record.get("beta"),
            ridge=record.get("ridge"), noise_scale=record.get("noise_scale"), neighbour=neighbour,
            repetitions=detection_repetitions, route=detection_route)
    return {
        "mechanism": mechanism, "epsilon": float(epsilon), "lam": float(lam),
        "seed": int(seed), "releases": releases, "solver": solver,
        "noise_factor": float(noise_factor), "neighbouring_relation": NEIGHBOURING_RELATION,
        "threat_model": THREAT_MODEL, "n": int(n), "n_members": int(n_members), "d": int(d),
        "feature_scale": scale, "neighbour": neighbour,
        "replacement_x": z, "replacement_t": float(t_z),
        "shift_norm": shift_norm, "sensitivity": 2.0 / (n * lam),
        "shift_fraction": shift_norm / (2.0 / (n * lam)),
        **about,
        "score_max_abs": float(np.abs(np.concatenate([scores_in, scores_out])).max()),
        **record,
        **detection,
        "release_seconds": release_seconds, "score_seconds": score_seconds,
        "wall_seconds": time.perf_counter() - wall0,
        "scores": frame,
    }


def linear_canary_scores(examples: pd.DataFrame, splits: dict[str, str], params: dict[str, Any],
                         train: dict[str, Any], options: dict[str, Any], *, log) -> tuple[pd.DataFrame, dict]:
    """The canary family's scores and record of one released linear run (``train``: its
    train.json): ``linear_release_scores`` on the run's members with the run's ε and Λ."""
    from dpaudit.training.models import features

    hyper = train["hyperparameters"]
    members = examples[examples["split"] == splits["members"]]
    result = linear_release_scores(features(members).astype(np.float64), members["label"].to_numpy(np.int64),
                                   mechanism=str(params["mechanism"]), epsilon=float(hyper["target_epsilon"]),
                                   lam=float(hyper["linear_regularization"]),
                                   releases=int(options["linear_releases"]), seed=int(options["seed"]),
                                   example_ids=members["example_id"].to_numpy(np.int64),
                                   neighbour=str(options.get("linear_neighbour", "crafted")),
                                   alpha=1.0 - float(options.get("confidence", 0.95)),
                                   per_tail=options.get("gdp_thresholds_per_tail", 40))
    scores = result.pop("scores").assign(score_kind=SCORE_KIND, example_id=pd.NA)
    scores["example_id"] = scores["example_id"].astype("Int64")
    record = {key: (value.tolist() if isinstance(value, np.ndarray) else value) for key, value in result.items()}
    log.info("linear releases: %d per side scored in %.1fs (neighbour %s, row %d, shift %.3g = %.3g of the "
             "sensitivity; detectable noise factor %s)", result["releases"], result["wall_seconds"],
             result["neighbour"], result["row"], result["shift_norm"], result["shift_fraction"],
             result["detectable_noise_factor"])
    return scores, record
