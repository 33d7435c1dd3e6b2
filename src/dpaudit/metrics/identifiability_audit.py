"""The DI adversary's audit of full-batch DP-SGD / DP-Adam (Bernau et al. 2021, Alg. 1).

The adversary knows D and its neighbour D′ and sees the noisy clipped gradient sum
released at every step. At each step this loop computes, at the current weights,
the clipped per-example gradient sums μ_t (over D) and μ′_t (over D′), the local
sensitivity LS_t = ‖μ_t − μ′_t‖, the noise σ_t = z·LS_t (``ls`` mode) or z·GS
(``gs`` mode), draws ONE noise vector used for both the release r_t and the
optimizer step (as the authors' code does), and accumulates the adversary's log-likelihood ratio
⟨r_t − (μ_t + μ′_t)/2, μ_t − μ′_t⟩/σ_t² in float64.

Why numpy and not TensorFlow: the audited models are small MLPs (Adult 108-6-6-1,
Purchase-100 600-128-100, digits 64-h-10) without layers that couple examples, so
every per-example gradient is an outer product a_i δ_iᵀ. Its norm is
‖a_i‖·‖δ_i‖ and the clipped sum is Aᵀ diag(c) Δ: two matrix products per layer,
exact in float64, no per-example vectors, no TensorFlow start-up (seconds per job).
With no coupling, μ′_t = μ_t − ḡ(x*) (+ ḡ(x′) when bounded) is exact, and
d_t = ḡ(x*) − ḡ(x′) is computed directly rather than as a difference of two sums.
Convolutional or batch-norm models (the paper's MNIST CNN) are not supported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from dpaudit.metrics import identifiability as idf
from dpaudit.metrics.identifiability_grid import block_run_ids

NEIGHBOURHOODS = ("bounded", "unbounded")
MODES = ("ls", "gs")
OPTIMIZERS = ("adam", "sgd")
OUTPUTS = ("softmax", "sigmoid")
# tf.compat.v1.train.AdamOptimizer defaults, the optimizer of the authors' code.
ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-8


# ------------------------------------------------------------------ the model


@dataclass
class MLP:
    """Dense ReLU network; output ``softmax`` (C units, cross-entropy) or
    ``sigmoid`` (1 unit, binary cross-entropy: the authors' Adult model)."""

    sizes: list[int]
    output: str
    weights: list[np.ndarray] = field(default_factory=list)
    biases: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def glorot(cls, input_dim: int, hidden: Sequence[int], classes: int, output: str, rng) -> MLP:
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        if output == "sigmoid" and classes != 2:
            raise ValueError(f"a sigmoid output needs 2 classes, the data has {classes}")
        out_units = 1 if output == "sigmoid" else classes
        sizes = [int(input_dim), *map(int, hidden), out_units]
        model = cls(sizes, output)
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            limit = math.sqrt(6.0 / (fan_in + fan_out))  # Keras' glorot_uniform, zero biases
            model.weights.append(rng.uniform(-limit, limit, size=(fan_in, fan_out)))
            model.biases.append(np.zeros(fan_out))
        return model

    @property
    def n_params(self) -> int:
        return sum(w.size + b.size for w, b in zip(self.weights, self.biases, strict=True))

    def flat(self) -> np.ndarray:
        return np.concatenate([p.ravel() for pair in zip(self.weights, self.biases, strict=True) for p in pair])

    def set_flat(self, theta: np.ndarray) -> None:
        at = 0
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            self.weights[i] = theta[at:at + w.size].reshape(w.shape)
            at += w.size
            self.biases[i] = theta[at:at + b.size]
            at += b.size

    def _forward(self, x):
        activations = [x]
        h = x
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
            activations.append(h)
        return activations

    def losses(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """Per-example loss and correctness."""
        return self.losses_from_logits(self._forward(x)[-1], y)

    def losses_from_logits(self, logits, y) -> tuple[np.ndarray, np.ndarray]:
        if self.output == "sigmoid":
            z = logits[:, 0]
            # BCE = softplus(z) − y z, stable for either sign.
            loss = np.logaddexp(0.0, z) - y * z
            return loss, (z > 0).astype(int) == y
        loss = special.logsumexp(logits, axis=1) - logits[np.arange(len(y)), y]
        return loss, logits.argmax(axis=1) == y

    def clipped_gradients(self, x, y, clip: float, keep: Sequence[int] = (), logits_out: list | None = None):
        """Sum of per-example gradients clipped to L2 norm ``clip``, the unclipped
        per-example norms, and the clipped gradient vectors of the rows ``keep``
        (the logits are appended to ``logits_out`` so callers need no second pass)."""
        activations = self._forward(x)
        logits = activations[-1]
        if logits_out is not None:
            logits_out.append(logits)
        if self.output == "sigmoid":
            delta = (special.expit(logits[:, 0]) - y)[:, None]
        else:
            delta = special.softmax(logits, axis=1)
            delta[np.arange(len(y)), y] -= 1.0
        deltas = [None] * len(self.weights)
        for i in range(len(self.weights) - 1, -1, -1):
            deltas[i] = delta
            if i:
                delta = (delta @ self.weights[i].T) * (activations[i] > 0)
        # ‖a_i δ_iᵀ‖_F² = ‖a_i‖²‖δ_i‖², plus ‖δ_i‖² for the bias.
        sq = np.zeros(len(x))
        for a, d in zip(activations[:-1], deltas, strict=True):
            dd = np.einsum("ij,ij->i", d, d)
            sq += np.einsum("ij,ij->i", a, a) * dd + dd
        norms = np.sqrt(sq)
        scale = np.minimum(1.0, clip / np.maximum(norms, 1e-300))
        parts, kept = [], [[] for _ in keep]
        for a, d in zip(activations[:-1], deltas, strict=True):
            ds = d * scale[:, None]
            parts += [(a.T @ ds).ravel(), ds.sum(axis=0)]
            for slot, row in enumerate(keep):
                kept[slot] += [np.outer(a[row], ds[row]).ravel(), ds[row]]
        return np.concatenate(parts), norms, [np.concatenate(k) for k in kept]


# ------------------------------------------------------------- the audit loop


@dataclass
class AuditSetup:
    """One audited configuration: data, neighbour, privacy and training settings."""

    x: np.ndarray            # D, (n, d) float64
    y: np.ndarray            # labels of D
    x_alt: np.ndarray | None  # x′ (bounded) or None (unbounded)
    y_alt: int | None
    star: int                # row of x* in D
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int
    neighbourhood: str
    mode: str
    noise_multiplier: float
    steps: int = 30
    clip_norm: float = 3.0
    learning_rate: float = 0.005
    optimizer: str = "adam"
    hidden: tuple[int, ...] = (6, 6)
    output: str = "softmax"
    true_dataset: str = "D"  # "D" (the authors' b = 0) or "random"

    def __post_init__(self):
        if self.neighbourhood not in NEIGHBOURHOODS:
            raise ValueError(f"neighbourhood must be one of {NEIGHBOURHOODS}, got {self.neighbourhood!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if (self.neighbourhood == "bounded") != (self.x_alt is not None):
            raise ValueError("a bounded neighbour needs x′ (x_alt); an unbounded one must not have it")
        if self.true_dataset not in ("D", "random"):
            raise ValueError(f"true_dataset must be 'D' or 'random', got {self.true_dataset!r}")
        # Numbers from outside: a NaN clip norm or learning rate used to run every step
        # on NaN weights and report "health failures: 0".
        for name, value, low, open_low in (("noise_multiplier", self.noise_multiplier, 0.0, False),
                                           ("clip_norm", self.clip_norm, 0.0, True),
                                           ("learning_rate", self.learning_rate, 0.0, True)):
            number = float(value)
            if not math.isfinite(number) or number < low or (open_low and number == low):
                raise ValueError(f"AuditSetup {name} must be a finite number {'>' if open_low else '>='} {low:g}, "
                                 f"got {value!r}")
        if int(self.steps) < 1:
            raise ValueError(f"AuditSetup steps must be >= 1, got {self.steps!r}")
        for name in ("x", "x_test"):
            array = np.asarray(getattr(self, name), dtype=np.float64)
            if array.ndim != 2 or len(array) == 0:
                raise ValueError(f"AuditSetup {name} must be a non-empty (rows, features) array, got shape "
                                 f"{array.shape}")
            if not np.isfinite(array).all():
                raise ValueError(f"AuditSetup {name} holds non-finite features")
        if self.x_alt is not None and not np.isfinite(np.asarray(self.x_alt, dtype=np.float64)).all():
            raise ValueError("AuditSetup x_alt holds non-finite features")
        if len(self.y) != len(self.x) or len(self.y_test) != len(self.x_test):
            raise ValueError("AuditSetup y and y_test must have one label per row of x and x_test")
        if not 0 <= int(self.star) < len(self.x):
            raise ValueError(f"AuditSetup star must be a row of x (0..{len(self.x) - 1}), got {self.star}")

    @property
    def global_sensitivity(self) -> float:
        return (2.0 if self.neighbourhood == "bounded" else 1.0) * self.clip_norm


def _run_seeds(seed: int, run_id: int) -> tuple[int, int, int]:
    init, noise, coin = np.random.SeedSequence([int(seed), int(run_id)]).generate_state(3)
    return int(init), int(noise), int(coin)


def audit_run(setup: AuditSetup, run_id: int, seed: int, keep_vectors: bool = False):
    """One audited training run: (run row, step rows, vector rows)."""
    s = setup
    seed_init, seed_noise, seed_coin = _run_seeds(seed, run_id)
    noise_rng = np.random.default_rng(seed_noise)
    b_true = 0 if s.true_dataset == "D" else int(np.random.default_rng(seed_coin).integers(2))
    model = MLP.glorot(s.x.shape[1], s.hidden, s.classes, s.output, np.random.default_rng(seed_init))
    theta = model.flat()
    p = theta.size
    n = len(s.x)
    n_true = n if (b_true == 0 or s.neighbourhood == "bounded") else n - 1
    m1 = np.zeros(p)
    m2 = np.zeros(p)
    x_eval = s.x if s.x_alt is None else np.vstack([s.x, s.x_alt])
    y_eval = s.y if s.x_alt is None else np.append(s.y, s.y_alt)
    alt_row = n if s.x_alt is not None else None
    keep = [s.star] if alt_row is None else [s.star, alt_row]
    log_odds = 0.0
    steps, vectors = [], []
    for t in range(1, s.steps + 1):
        model.set_flat(theta)
        # One pass over D ∪ {x′}: per-example gradients do not interact in an MLP.
        logits = []
        total, norms, kept = model.clipped_gradients(x_eval, y_eval, s.clip_norm, keep, logits)
        g_star = kept[0]
        g_alt = kept[1] if alt_row is not None else np.zeros(p)
        mu = total - g_alt  # over D
        d = g_star - g_alt
        mu_prime = mu - d
        ls = float(np.linalg.norm(d))
        scale = ls if s.mode == "ls" else s.global_sensitivity
        sigma = s.noise_multiplier * scale
        noise = noise_rng.standard_normal(p) * sigma
        release = (mu if b_true == 0 else mu_prime) + noise
        if sigma > 0:
            llr = float(idf.log_likelihood_ratio(release, mu, mu_prime, sigma))
            # η_t from the adversary's LLR, not from the noise draw: a wrong LLR fails the KS check.
            eta = float(idf.standardized_llr(llr, ls, sigma, b_true))
        else:  # x* and x′ give identical clipped gradients: nothing to tell apart
            llr, eta = 0.0, math.nan
        log_odds += llr
        d_norms = norms[:n]
        losses, correct = model.losses_from_logits(logits[0][:n], s.y)  # before this step's update
        _, test_correct = model.losses(s.x_test, s.y_test)
        steps.append({
            "t": t, "ls_t": ls, "gs": s.global_sensitivity, "sigma_t": sigma,
            "eff_mult_t": sigma / ls if ls > 0 else math.inf,
            "llr_t": llr, "cum_llr_t": log_odds, "belief_t": float(special.expit(log_odds)),
            "belief_unbiased_t": float(special.expit(llr)), "eta_t": eta,
            "noise_sq_over_p": float(noise @ noise / (sigma**2 * p)) if sigma > 0 else math.nan,
            "mu_norm": float(np.linalg.norm(mu)), "mu_prime_norm": float(np.linalg.norm(mu_prime)),
            "grad_norm_xstar": float(norms[s.star]),
            "grad_norm_xprime": float(norms[alt_row]) if alt_row is not None else math.nan,
            "frac_clipped": float(np.mean(d_norms > s.clip_norm)),
            "median_unclipped_norm": float(np.median(d_norms)),
            "train_loss_t": float(losses.mean()), "train_acc_t": float(correct.mean()),
            "test_acc_t": float(test_correct.mean()),
        })
        if keep_vectors:
            for kind, vec in (("mu_D", mu), ("mu_Dp", mu_prime), ("release", release),
                              ("g_xstar", g_star), ("g_xprime", g_alt), ("noise", noise)):
                vectors.append({"t": t, "kind": kind, "values": vec.astype(np.float32)})
        # The update uses the released gradient itself (same noise draw, as the authors' code does).
        grad = release / n_true
        if s.optimizer == "adam":
            m1 = ADAM_BETA1 * m1 + (1 - ADAM_BETA1) * grad
            m2 = ADAM_BETA2 * m2 + (1 - ADAM_BETA2) * grad * grad
            lr_t = s.learning_rate * math.sqrt(1 - ADAM_BETA2**t) / (1 - ADAM_BETA1**t)
            theta = theta - lr_t * m1 / (np.sqrt(m2) + ADAM_EPSILON)
        else:
            theta = theta - s.learning_rate * grad
    model.set_flat(theta)
    member_loss, member_correct = model.losses(s.x, s.y)
    test_loss, test_correct = model.losses(s.x_test, s.y_test)
    mi = yeom_advantage(member_loss, test_loss[: len(member_loss)])
    ls_all = np.array([row["ls_t"] for row in steps])
    sig_all = np.array([row["sigma_t"] for row in steps])
    with np.errstate(divide="ignore", invalid="ignore"):
        m_sum = float(np.sum(np.where(sig_all > 0, ls_all**2 / (2 * sig_all**2), 0.0)))
    belief_d = float(special.expit(log_odds))
    run = {
        "run_id": int(run_id), "seed_init": seed_init, "seed_noise": seed_noise, "b_true": b_true,
        "final_logodds": log_odds, "final_belief_D": belief_d,
        "win": bool((log_odds > 0) == (b_true == 0)),
        "M_sum": m_sum, "predicted_adv": float(idf.advantage_from_distance(math.sqrt(2 * m_sum))),
        "train_acc": float(member_correct.mean()), "test_acc": float(test_correct.mean()), "mi_adv": mi,
        "n": n, "n_params": p,
    }
    return run, steps, vectors


def yeom_advantage(member_losses, nonmember_losses) -> float:
    """Yeom et al.'s attack: "member" if the loss is at most the mean training loss;
    advantage = TPR − FPR."""
    threshold = float(np.mean(member_losses))
    return float(np.mean(member_losses <= threshold) - np.mean(nonmember_losses <= threshold))


def audit_block(setup: AuditSetup, run_ids: Sequence[int], seed: int, vector_runs: int = 0):
    """Runs ``run_ids`` of one configuration: (runs, steps, vectors) frames."""
    runs, steps, vectors = [], [], []
    for run_id in run_ids:
        run, run_steps, run_vectors = audit_run(setup, run_id, seed, keep_vectors=run_id < vector_runs)
        runs.append(run)
        steps += [{"run_id": int(run_id), **row} for row in run_steps]
        vectors += [{"run_id": int(run_id), **row} for row in run_vectors]
    vec_frame = pd.DataFrame(vectors, columns=["run_id", "t", "kind", "values"])
    return pd.DataFrame(runs), pd.DataFrame(steps), vec_frame


# -------------------------------------------------------------- neighbours


def ssim_matrix(a_images: np.ndarray, b_images: np.ndarray, data_range: float, win_size: int = 7,
                chunk: int = 4096) -> np.ndarray:
    """Mean SSIM of every pair (a_i, b_j) of 2-D images, as scikit-image's
    ``structural_similarity`` with its defaults (uniform 7×7 window, sample
    covariance, K1 = 0.01, K2 = 0.03, border windows cropped), vectorised over
    pairs: one matrix product per window position."""
    a = np.asarray(a_images, dtype=np.float64)
    b = np.asarray(b_images, dtype=np.float64)
    h, w = a.shape[1:]
    if min(h, w) < win_size:
        raise ValueError(f"images of {h}x{w} are smaller than the SSIM window {win_size}")
    npix = win_size * win_size
    cov_norm = npix / (npix - 1.0)
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2
    # skimage crops (win_size − 1)//2 from each side of the full filtered image: the
    # kept positions are exactly the windows that fit inside the image.
    positions = [(i, j) for i in range(h - win_size + 1) for j in range(w - win_size + 1)]
    out = np.zeros((len(a), len(b)))
    for start in range(0, len(b), chunk):
        bb = b[start:start + chunk]
        acc = np.zeros((len(a), len(bb)))
        for i, j in positions:
            wa = a[:, i:i + win_size, j:j + win_size].reshape(len(a), npix)
            wb = bb[:, i:i + win_size, j:j + win_size].reshape(len(bb), npix)
            ux, uy = wa.mean(1), wb.mean(1)
            vx = cov_norm * (np.mean(wa * wa, 1) - ux * ux)
            vy = cov_norm * (np.mean(wb * wb, 1) - uy * uy)
            vxy = cov_norm * ((wa @ wb.T) / npix - np.outer(ux, uy))
            num = (2 * np.outer(ux, uy) + c1) * (2 * vxy + c2)
            den = (ux[:, None] ** 2 + uy[None, :] ** 2 + c1) * (vx[:, None] + vy[None, :] + c2)
            acc += num / den
        out[:, start:start + chunk] = acc / len(positions)
    return out


DISTANCES = ("ssim", "hamming", "manhattan", "euclidean")


def distance_matrix(a: np.ndarray, b: np.ndarray, distance: str, image_shape=None, data_range=None) -> np.ndarray:
    from scipy.spatial.distance import cdist

    if distance == "ssim":
        if image_shape is None or data_range is None:
            raise ValueError("the ssim distance needs image_shape and data_range")
        pixels = math.prod(int(k) for k in image_shape)
        if pixels != a.shape[1] or pixels != b.shape[1]:
            raise ValueError(f"image_shape {list(image_shape)} ({pixels} pixels) does not match the d = {a.shape[1]} "
                             "features of the data; write an image_shape whose product is d")
        if not (math.isfinite(float(data_range)) and float(data_range) > 0):
            raise ValueError(f"the ssim data_range must be a finite number > 0, got {data_range!r}")
        shape = (-1, *image_shape)
        return 1.0 - ssim_matrix(a.reshape(shape), b.reshape(shape), data_range)
    if distance == "hamming":
        # Count of differing features (= squared Euclidean on binary data).
        return cdist(a, b, "sqeuclidean")
    if distance == "manhattan":
        return cdist(a, b, "cityblock")
    if distance == "euclidean":
        return cdist(a, b, "euclidean")
    raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")


def rank_neighbours(members: np.ndarray, pool: np.ndarray, distance: str, top: int = 10,
                    unbounded_criterion: str = "pool_max", image_shape=None, data_range=None) -> pd.DataFrame:
    """Dataset-sensitivity pairs (Eqs. 18, 20): the ``top`` most and least dissimilar
    (x*, x′) pairs (bounded) and x* candidates (unbounded), as row indices.

    Bounded: argmax over x ∈ D, x′ ∈ pool of d(x, x′). Unbounded: ``within_D``
    ranks x by Σ_{y∈D} d(x, y) (the paper's Eq. 18, the authors' MNIST code);
    ``pool_max`` by max_{x′∈pool} d(x, x′) (the authors' Purchase and Adult code).
    """
    cross = distance_matrix(members, pool, distance, image_shape, data_range)
    rows = []
    flat = cross.ravel()
    k = min(top, flat.size)
    # Only the ends of the ranking are kept: partial selection, not a full sort of n·|pool|.
    highest = np.argpartition(-flat, k - 1)[:k]
    lowest = np.argpartition(flat, k - 1)[:k]
    highest = highest[np.lexsort((highest, -flat[highest]))]
    lowest = lowest[np.lexsort((lowest, flat[lowest]))]
    for direction, picked in (("max", highest), ("min", lowest)):
        for rank, index in enumerate(picked, start=1):
            i, j = divmod(int(index), cross.shape[1])
            rows.append({"neighbourhood": "bounded", "rank": f"{direction}{rank}", "idx_x": i,
                         "idx_xprime": j, "score": float(flat[index]), "criterion": "pair"})
    if unbounded_criterion == "within_D":
        score = distance_matrix(members, members, distance, image_shape, data_range).sum(axis=1)
    elif unbounded_criterion == "pool_max":
        score = cross.max(axis=1)
    else:
        raise ValueError(f"unbounded_criterion must be 'within_D' or 'pool_max', got {unbounded_criterion!r}")
    order = np.argsort(score, kind="stable")
    for direction, picked in (("max", order[::-1][:top]), ("min", order[:top])):
        for rank, i in enumerate(picked, start=1):
            rows.append({"neighbourhood": "unbounded", "rank": f"{direction}{rank}", "idx_x": int(i),
                         "idx_xprime": -1, "score": float(score[i]), "criterion": unbounded_criterion})
    frame = pd.DataFrame(rows)
    frame["distance"] = distance
    return frame


# ------------------------------------------------------------ configuration


def describe(setup: AuditSetup, rho: float, delta: float, conversion: str) -> dict[str, Any]:
    """The parameters every audit row carries."""
    return {
        "neighbourhood": setup.neighbourhood, "sens_mode": setup.mode, "rho_target": float(rho),
        "eps_target": float(idf.epsilon_from_rho_beta(rho)), "delta": float(delta), "k": setup.steps,
        "clip_norm": setup.clip_norm, "noise_multiplier": setup.noise_multiplier, "conversion": conversion,
        "learning_rate": setup.learning_rate, "optimizer": setup.optimizer, "output": setup.output,
        "hidden_units": ",".join(map(str, setup.hidden)), "true_dataset": setup.true_dataset,
    }


# -------------------------------------------------------------- data of a job


def _examples(examples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ordered = examples.sort_values("example_id", kind="stable")
    x = np.stack(ordered["x"].to_numpy()).astype(np.float64)
    return (ordered["example_id"].to_numpy(np.int64), ordered["split"].astype(str).to_numpy(),
            ordered["label"].to_numpy(np.int64), x)


def raw_features(x: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
    """Undo the recorded standardization (for distances on the raw scale, e.g. pixels)."""
    preprocessing = info.get("preprocessing", {})
    if preprocessing.get("pixel_scale"):
        return x * float(preprocessing["pixel_scale"])
    std = preprocessing.get("standardize")
    if not std or std.get("columns") != "all":
        return x
    return x * np.asarray(std["scale"]) + np.asarray(std["mean"])


def audit_data(examples: pd.DataFrame, info: Mapping[str, Any], n: int, test_size: int | None = None,
               pool: str = "nonmembers") -> dict[str, Any]:
    """D = the first ``n`` members (by example_id); the candidate pool = the non-member
    split (``nonmembers``) or the members after the first n (``other_members``: the
    authors' MNIST pool, without test images, so no test image can be a neighbour); the test set = the first
    ``test_size`` rows of the utility split (all if None): it is evaluated at every
    step of every run, so its size sets much of the cost."""
    ids, split, label, x = _examples(examples)
    splits = info["splits"]
    members = np.flatnonzero(split == splits["members"])
    if len(members) < int(n):
        raise ValueError(f"audit n={n} but the dataset has only {len(members)} members ({splits['members']!r})")
    if pool == "nonmembers":
        candidates = np.flatnonzero(split == splits["nonmembers"])
    elif pool == "other_members":
        candidates = members[int(n):]
    else:
        raise ValueError(f"audit pool must be 'nonmembers' or 'other_members', got {pool!r}")
    members = members[: int(n)]
    test = np.flatnonzero(split == splits["utility"])
    if test_size is not None:
        test = test[: int(test_size)]
    return {"ids": ids, "label": label, "x": x, "members": members, "pool": candidates, "test": test,
            "classes": int(info.get("classes") or label.max() + 1)}


def neighbour_table(examples: pd.DataFrame, info: Mapping[str, Any], options: Mapping[str, Any],
                    top: int) -> pd.DataFrame:
    """Ranked dataset-sensitivity pairs of one dataset, with example ids."""
    data = audit_data(examples, info, options["n"], pool=options.get("pool", "nonmembers"))
    raw = raw_features(data["x"], info)
    distance = options["distance"]
    image_shape = options.get("image_shape") or info.get("preprocessing", {}).get("image_shape")
    data_range = options.get("data_range")
    if distance == "ssim":
        if data_range is None:
            data_range = float(raw.max() - raw.min())
    frame = rank_neighbours(raw[data["members"]], raw[data["pool"]], distance, top,
                            options.get("unbounded_criterion", "within_D" if distance == "ssim" else "pool_max"),
                            image_shape, data_range)
    frame["example_id_x"] = data["ids"][data["members"][frame["idx_x"]]]
    frame["example_id_xprime"] = np.where(frame["idx_xprime"] >= 0,
                                          data["ids"][data["pool"][frame["idx_xprime"].clip(lower=0)]], -1)
    frame["data_range"] = np.nan if data_range is None else float(data_range)
    frame["scale"] = "raw" if distance == "ssim" else "prepared features"
    if distance == "ssim":
        frame["ssim_check"] = _skimage_check(raw, data, frame, image_shape, data_range)
    return frame


def _skimage_check(raw, data, frame, image_shape, data_range) -> np.ndarray:
    """Recompute the bounded pairs' 1 − SSIM with scikit-image itself (the reference
    the vectorised ``ssim_matrix`` reproduces); NaN for unbounded rows."""
    from skimage.metrics import structural_similarity

    out = np.full(len(frame), np.nan)
    for row, (i, j, kind) in enumerate(zip(frame["idx_x"], frame["idx_xprime"], frame["neighbourhood"], strict=True)):
        if kind == "bounded":
            a = raw[data["members"][i]].reshape(image_shape)
            b = raw[data["pool"][j]].reshape(image_shape)
            out[row] = 1.0 - structural_similarity(a, b, data_range=data_range)
    return out


def choose_neighbour(neighbours: pd.DataFrame, neighbourhood: str, pair: str) -> tuple[int, int]:
    """(example id of x*, example id of x′ or −1) for a ranked pair such as ``max1``."""
    chosen = neighbours[(neighbours["neighbourhood"] == neighbourhood) & (neighbours["rank"] == pair)]
    if len(chosen) != 1:
        raise ValueError(f"no {neighbourhood} neighbour ranked {pair!r} in the dataset-sensitivity table "
                         f"(ranks kept: {sorted(set(neighbours['rank']))})")
    return int(chosen["example_id_x"].iloc[0]), int(chosen["example_id_xprime"].iloc[0])


def audit_setup(data: Mapping[str, Any], options: Mapping[str, Any], audit: Mapping[str, Any],
                neighbourhood: str, mode: str, rho: float, star_id: int, alt_id: int) -> AuditSetup:
    position = {int(e): i for i, e in enumerate(data["ids"])}
    members = data["members"]
    star_rows = np.flatnonzero(data["ids"][members] == star_id)
    if len(star_rows) != 1:
        raise ValueError(f"x* (example_id {star_id}) is not among the first {len(members)} members")
    test = data["test"]
    x_alt = y_alt = None
    if neighbourhood == "bounded":
        if alt_id < 0 or alt_id not in position or position[alt_id] in set(members):
            raise ValueError(f"x′ (example_id {alt_id}) must be a record outside D")
        x_alt, y_alt = data["x"][position[alt_id]], int(data["label"][position[alt_id]])
        test = test[data["ids"][test] != alt_id]  # x′ leaves the test set (as in the authors' code)
    z = idf.noise_multiplier_for_rho_beta(rho, audit["steps"], options["delta"], audit["conversion"])
    return AuditSetup(
        x=data["x"][members], y=data["label"][members], x_alt=x_alt, y_alt=y_alt, star=int(star_rows[0]),
        x_test=data["x"][test], y_test=data["label"][test], classes=data["classes"],
        neighbourhood=neighbourhood, mode=mode, noise_multiplier=z, steps=int(audit["steps"]),
        clip_norm=float(audit["clip_norm"]), learning_rate=float(options["learning_rate"]),
        optimizer=audit["optimizer"], hidden=tuple(options["hidden_units"]), output=options["output"],
        true_dataset=audit["true_dataset"],
    )


def run_audit_block(examples: pd.DataFrame, info: Mapping[str, Any], neighbours: pd.DataFrame,
                    dataset: str, options: Mapping[str, Any], audit: Mapping[str, Any],
                    config: str, params: Mapping[str, Any], block: int):
    """Runs of one block of one configuration, every row keyed by its configuration."""
    data = audit_data(examples, info, options["n"], options.get("test_size"), options.get("pool", "nonmembers"))
    explicit = options.get("neighbour")
    if params["pair"] == "explicit":
        if not explicit:
            raise ValueError(f"audit.datasets.{dataset}: pair 'explicit' needs a neighbour: {{x_star, x_prime}}")
        star_id, alt_id = int(explicit["x_star"]), int(explicit.get("x_prime", -1))
        if params["neighbourhood"] == "unbounded":
            alt_id = -1
    else:
        star_id, alt_id = choose_neighbour(neighbours, params["neighbourhood"], params["pair"])
    setup = audit_setup(data, options, audit, params["neighbourhood"], params["mode"], params["rho_beta"],
                        star_id, alt_id)
    run_ids = block_run_ids(block, params["runs"], audit["block_size"])
    runs, steps, vectors = audit_block(setup, run_ids, int(audit["seed"]), int(audit["vector_runs"]))
    keys = {"dataset": dataset, "config": config, "neighbourhood": params["neighbourhood"],
            "sens_mode": params["mode"], "rho_target": float(params["rho_beta"]), "pair": params["pair"]}
    described = describe(setup, params["rho_beta"], options["delta"], audit["conversion"])
    runs = runs.assign(**{**described, **keys, "example_id_xstar": star_id, "example_id_xprime": alt_id,
                          "block": int(block)})
    steps = steps.assign(**keys)
    vectors = vectors.assign(**keys)
    return runs, steps, vectors
