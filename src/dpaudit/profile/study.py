"""Artifacts of the privacy-profile study (LeBlond et al. 2023), one function per workflow step.

Every frame carries its row ids (1-based rows of the source file) and the parameters its
numbers depend on (ε, β, seed, Λ, draws), so the Parquet files stand on their own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_json
from dpaudit.profile import mechanisms, model, neighbours, profiles
from dpaudit.profile.data import ProfileView


def _columns(prefix: str, values: np.ndarray) -> dict:
    return {f"{prefix}_{k}": values[:, k] for k in range(values.shape[1])}


def base_artifacts(view: ProfileView, lam: float) -> dict:
    """Base model A(x), per-example arrays and worst-case neighbour shifts Δ_i (Okumura sphere)."""
    base = model.fit(view.features, view.labels, lam)
    ex = model.per_example(view.features, view.labels, base.weights)
    centres, radii = neighbours.removal_spheres(base.weights, ex.gradients, lam)
    shifts, delta = neighbours.worst_case_shifts(base.weights, ex.gradients, lam)
    ids = view.row_ids
    data = pd.DataFrame({"row_id": ids, **_columns("x", view.features), "t": view.labels.astype(np.int8),
                         "x_norm": np.linalg.norm(view.features, axis=1)})
    per_example = pd.DataFrame({"row_id": ids, "t": view.labels.astype(np.int8), "margin": ex.margins,
                                "loss": ex.losses, "s": ex.weights, "hess_w": ex.hessian_weights,
                                **_columns("grad", ex.gradients), "lam": lam})
    ranks = np.empty(ids.size, dtype=np.int64)
    ranks[np.argsort(delta, kind="stable")] = np.arange(ids.size)
    worst = pd.DataFrame({"row_id": ids, **_columns("Delta", shifts), "delta_norm": delta, **_columns("R", centres),
                          "r": radii, "rank_by_delta": ranks, "lam": lam})
    record = {**base.record(), "feature_names": list(view.feature_names), "view": view.metadata,
              "y_max_row_id": int(ids[np.argmax(delta)]), "delta_max": float(delta.max())}
    return {"data": data, "per_example": per_example, "worst_case": worst, "base": record}


def shifts_of(worst: pd.DataFrame) -> np.ndarray:
    return worst[[c for c in worst.columns if c.startswith("Delta_")]].to_numpy()


def exact_artifact(view: ProfileView, weights: np.ndarray, worst: pd.DataFrame, lam: float) -> pd.DataFrame:
    exact = neighbours.retrain_removed(view.features, view.labels, weights, lam)
    return pd.DataFrame({"row_id": view.row_ids, **_columns("DeltaExact", exact.shifts),
                         "delta_exact": np.linalg.norm(exact.shifts, axis=1),
                         "rel_dev": neighbours.relative_deviation(shifts_of(worst), exact.shifts),
                         "final_grad_norm": exact.gradient_norms, "n_iter": exact.n_iter, "lam": lam})


def sample_artifact(view: ProfileView, weights: np.ndarray, worst: pd.DataFrame, *, lam: float,
                    log10_epsilons, samples: int, neighbour_count: int, seed: int) -> pd.DataFrame:
    """Figs. 1/8: samples of 𝒜(x) and of 𝒜(y_i) for the first neighbour_count rows, both mechanisms.

    Objective perturbation retrains on y_i (diffprivlib 0.6.3 algorithm, C = 1/(nΛ) with the base n);
    output perturbation centres y_i's noise on A_wc(y_i) with the base β = nΛε/2.
    """
    n, d = view.features.shape
    if not 1 <= neighbour_count <= n:
        raise ValueError(f"profile.samples.neighbours = {neighbour_count}: must be between 1 and the view's {n} rows")
    shifts = shifts_of(worst)
    chosen = np.arange(neighbour_count)
    c_value = 1.0 / (n * lam)
    rows = []
    for e_index, log_eps in enumerate(log10_epsilons):
        eps = float(10.0**log_eps)
        beta = mechanisms.output_perturbation_beta(n, lam, eps)
        for source_index, row in enumerate([-1, *chosen.tolist()]):
            keep = np.arange(n) != row
            job_seed = [seed, e_index, source_index]
            rng = np.random.default_rng(job_seed)
            centre = weights if row < 0 else weights + shifts[row]
            noise = mechanisms.l2_laplace_noise(rng, samples, d, beta)
            for k in range(samples):
                rows.append(("output_perturbation", eps, beta, row, k, noise[k], centre + noise[k], job_seed, {}))
            rng = np.random.default_rng([*job_seed, 1])
            for k in range(samples):
                w, info = mechanisms.objective_perturbation(view.features[keep], view.labels[keep], eps, c_value, rng)
                rows.append(("objective_perturbation", eps, np.nan, row, k, None, w, [*job_seed, 1], info))
    frame = pd.DataFrame({
        "mechanism": [r[0] for r in rows], "eps": [r[1] for r in rows], "beta": [r[2] for r in rows],
        "source": ["base" if r[3] < 0 else "neighbor" for r in rows],
        "neighbor_row_id": [int(view.row_ids[r[3]]) if r[3] >= 0 else 0 for r in rows],
        "sample_idx": [r[4] for r in rows], "seed": [str(r[7]) for r in rows],
        "noise_norm": [float(np.linalg.norm(r[5])) if r[5] is not None else r[8]["noise_norm"] for r in rows],
        "eps_prime": [r[8].get("epsilon_prime", np.nan) for r in rows],
        "Delta_reg": [r[8].get("extra_regularizer", np.nan) for r in rows],
        "C": [r[8].get("C", np.nan) for r in rows],
        "algorithm": [r[8].get("algorithm", "chaudhuri2011-alg1-l2-laplace") for r in rows],
    })
    weights_matrix = np.array([r[6] for r in rows])
    return frame.assign(**_columns("w", weights_matrix), lam=lam)


def single_model_artifact(worst: pd.DataFrame, *, n: int, lam: float, log10_epsilon: float,
                          seed: int) -> tuple[pd.DataFrame, dict]:
    """Fig. 4: M = A(x) and M = A(x) + 3δ_max(1, 1, …)/√d (recorded as offsets u = M − A(x))."""
    shifts = shifts_of(worst)
    d = shifts.shape[1]
    eps = float(10.0**log10_epsilon)
    beta = mechanisms.output_perturbation_beta(n, lam, eps)
    delta_max = float(worst["delta_norm"].max())
    offsets = {"centre": np.zeros(d), "off_centre": 3 * delta_max * np.ones(d) / np.sqrt(d)}
    frames = []
    for name, offset in offsets.items():
        single = profiles.single_profile(offset, shifts, beta)
        rank = np.empty(shifts.shape[0], dtype=np.int64)
        rank[single.row_index] = np.arange(shifts.shape[0])
        frames.append(pd.DataFrame({"M_id": name, "eps": eps, "beta": beta, "lam": lam, "seed": seed,
                                    **{f"u_{k}": offset[k] for k in range(d)}, "row_id": worst["row_id"].to_numpy(),
                                    "l": single.loss, "abs_l": np.abs(single.loss), "rank": rank}))
    return pd.concat(frames, ignore_index=True), {k: v.tolist() for k, v in offsets.items()}


def typical_artifacts(worst: pd.DataFrame, *, view_name: str, dataset: str, n: int, lam: float, log10_epsilons,
                      draws: int, seed: int, tracked_rows: int = 8) -> dict:
    """Figs. 5–7: typical profiles, per-neighbour means, thresholds and the metric rows.

    The metric rows (family ``profile``, dataset-level: no run) carry the source ``dataset``
    in the key and the view's name in the ``view`` column.
    """
    shifts = shifts_of(worst)
    d = shifts.shape[1]
    row_ids = worst["row_id"].to_numpy()
    delta = worst["delta_norm"].to_numpy()
    epsilons = 10.0 ** np.asarray(log10_epsilons, dtype=np.float64)
    result = profiles.typical_profiles(shifts, epsilons, n=n, lam=lam, draws=draws, seed=seed)
    sorted_delta = np.sort(delta)
    count = delta.size
    beta = result.beta[:, None]
    common = {"K": draws, "seed": seed, "lam": lam}
    typical = pd.DataFrame({
        "eps": np.repeat(result.epsilon, count), "beta": np.repeat(result.beta, count),
        "rank": np.tile(np.arange(count), result.epsilon.size),
        "mean_abs_l": result.mean_abs_loss.ravel(), "mean_abs_l_over_beta": (result.mean_abs_loss / beta).ravel(),
        "se_abs_l": result.se_abs_loss.ravel(), "sorted_delta": np.tile(sorted_delta, result.epsilon.size),
        "avg_then_sort_over_beta": (result.average_then_sort / beta).ravel(), **common})
    order = np.argsort(delta, kind="stable")
    picks = np.unique(np.concatenate([order[np.linspace(0, count - 1, tracked_rows).astype(int)], [order[-1]]]))
    per_neighbour = pd.DataFrame({
        "eps": np.repeat(result.epsilon, picks.size), "beta": np.repeat(result.beta, picks.size),
        "row_id": np.tile(row_ids[picks], result.epsilon.size), "delta": np.tile(delta[picks], result.epsilon.size),
        "mean_l": result.mean_loss[:, picks].ravel(), "mean_abs_l": result.mean_abs_loss_per_row[:, picks].ravel(),
        "var_l": result.var_loss[:, picks].ravel(), **common})
    per_neighbour = per_neighbour.assign(beta_delta=per_neighbour["beta"] * per_neighbour["delta"],
                                         mean_l_over_beta=per_neighbour["mean_l"] / per_neighbour["beta"],
                                         mean_abs_l_over_beta=per_neighbour["mean_abs_l"] / per_neighbour["beta"])
    thresholds = profiles.regime_thresholds(result.epsilon, result.mean_abs_loss / beta, sorted_delta)
    # t_d(τ) of the per-neighbour progress; ε(τ) = 2 t_d(τ)/(nΛδ_max) predicts where the farthest neighbour
    # (the top rank) leaves the low plateau (τ_low) and reaches the high one (τ_high): see profiles.regime_thresholds.
    transition = {tau: profiles.transition_t(d, tau) for tau in (profiles.TAU_LOW, profiles.TAU_MID, profiles.TAU_HIGH)}
    delta_max = float(sorted_delta[-1])
    predicted_low, predicted_high = (profiles.predicted_epsilon(transition[tau], n=n, lam=lam, delta=delta_max)
                                     for tau in (profiles.TAU_LOW, profiles.TAU_HIGH))
    summary = {
        "eps_low": thresholds.eps_low, "eps_low_predicted": predicted_low,
        "eps_high": thresholds.eps_high, "eps_high_predicted": predicted_high,
        "beta_star": float(mechanisms.output_perturbation_beta(n, lam, predicted_low)), "delta_max": delta_max,
        "y_max_row_id": int(row_ids[np.argmax(delta)]),
        "t_d_tau_low": transition[profiles.TAU_LOW], "t_d_tau_mid": transition[profiles.TAU_MID],
        "t_d_tau_high": transition[profiles.TAU_HIGH],
    }
    definitions = {"tau_low": thresholds.tau_low, "tau_mid": profiles.TAU_MID, "tau_high": thresholds.tau_high,
                   "rank_floor": thresholds.rank_floor, "low_plateau": "mean of the 3 smallest ε",
                   "high_plateau": "sorted δ", "predicted": "ε(τ) = 2 t_d(τ)/(nΛδ_max); β* = nΛ eps_low_predicted/2",
                   "c_d": profiles.small_t_slope(d), "n": n, "d": d, **common}
    values = {"epsilon_low": thresholds.eps_low, "epsilon_low_predicted": predicted_low,
              "epsilon_high": thresholds.eps_high, "epsilon_high_predicted": predicted_high,
              "beta_star": summary["beta_star"], "delta_max": delta_max}
    records = [{"metric": name, "value": float(value)} for name, value in values.items()]
    records[-1]["y_max_row_id"] = summary["y_max_row_id"]  # the row behind δ_max: a column, not a value
    records += [{"metric": "t_d", "value": float(transition[tau]), "tau": float(tau)}
                for tau in (profiles.TAU_LOW, profiles.TAU_MID, profiles.TAU_HIGH)]
    frame = pd.DataFrame.from_records(records).astype({"y_max_row_id": "Int64", "tau": "float64"})
    frame = frame.assign(view=view_name, n=n, d=d, tau_low=thresholds.tau_low, tau_mid=profiles.TAU_MID,
                         tau_high=thresholds.tau_high, draws=draws, profile_seed=seed, lam=lam,
                         epsilon_grid_min=float(result.epsilon.min()), epsilon_grid_max=float(result.epsilon.max()))
    metrics = metric_rows("profile", frame, dataset=dataset)
    return {"typical": typical, "per_neighbour": per_neighbour, "metrics": metrics,
            "thresholds": {**summary, "definitions": definitions}}


def read_thresholds(path) -> dict:
    """thresholds.json with every summary number as a float.

    dpaudit.io.write_json stores NaN (a threshold the ε grid misses) and ±inf as the strings
    'nan'/'inf', and read_json keeps them strings; the figures and tables need floats.
    """
    record = read_json(path)
    return {key: (value if key in ("definitions", "y_max_row_id") else float(value)) for key, value in record.items()}


def base_weights(record: dict) -> np.ndarray:
    return np.array([record[f"w_{k}"] for k in range(int(record["d"]))])
