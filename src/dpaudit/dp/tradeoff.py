"""Claimed trade-off curves: what a privacy claim promises about every membership test.

A mechanism with privacy profile δ(ε) (ε ≥ 0, both neighbouring directions) lets no
test of "included" against "excluded" beat the trade-off curve

    f(α) = sup_{ε ≥ 0} max(0, 1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α))

(FNR ≥ f(FPR); Dong, Roth, Su 2022, Prop. 2.12). f is convex, decreasing and
symmetric (f(f(α)) = α on its support), so its inverse is f itself.

``accountant_tradeoff`` is the one home of the curve a DP-SGD accountant claims: the
mechanism is the accountant's own event (``dpaudit.dp.accounting.dpsgd_event``: its
σ, q, steps and batch scheme, the shuffle variant as the accountant models it), and
any extra (ε, δ) statements (the accountant's reported ε at its δ, its profile) are
part of the claim too: f_claim is the largest of their curves, since each must hold.

* A composition of Gaussians (q = 1, or the shuffle model) is μ-GDP exactly with
  μ = √k/σ′: f(α) = Φ(Φ⁻¹(1 − α) − μ), computed as Φ(−Φ⁻¹(α) − μ) so that small α
  keeps its digits.
* A Poisson-subsampled Gaussian is dp_accounting's privacy loss distribution of the
  event (pessimistic discretization: δ(ε) is over-, f under-estimated, so a correct
  mechanism never falls below it). The supremum is taken over a grid of ε with
  spacing 0.002, refined around the best coarse ε for each α; every line in the
  supremum is a true lower bound, so the grid only ever lowers f (by < 1e-6 at the
  tested points).
* Pure ε-DP (the linear mechanisms): ``pure_tradeoff(ε)`` = max(0, 1 − e^ε α, e^{−ε}(1 − α)).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from dpaudit.dp import accounting
from dpaudit.dp.hypothesis import dp_tradeoff_curve

__all__ = ["ClaimedCurve", "accountant_tradeoff", "claimed_inputs", "pure_tradeoff", "twin_tradeoff"]

PLD_DISCRETIZATION = 1e-3
_EPS_MAX = 40.0
_FINE_STEP = 0.002
_COARSE_EVERY = 10
_FPR_BLOCK = 64


def _profile_lines_max(eps: np.ndarray, delta: np.ndarray, fpr: np.ndarray) -> np.ndarray:
    """max over the given ε of both supporting lines, per FPR ([n_fpr, n_eps] -> [n_fpr])."""
    a = fpr[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        first = 1.0 - delta[None, :] - np.exp(eps)[None, :] * a
        second = np.exp(-eps)[None, :] * (1.0 - delta[None, :] - a)
    return np.maximum(first, second)


@dataclass(frozen=True)
class ClaimedCurve:
    """A claimed trade-off curve: ``fnr(fpr)`` (and its inverse ``fpr(fnr)``).

    ``gaussian_mu``: exact μ-GDP part (None if none); ``profile_eps``/``profile_delta``: a
    tabulated privacy profile δ(ε) (empty if none); ``points``: extra (ε, δ) statements.
    ``parameters`` records what the curve depends on.
    """

    gaussian_mu: float | None = None
    profile_eps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profile_delta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    points: tuple[tuple[float, float], ...] = ()
    parameters: dict = field(default_factory=dict)

    def fnr(self, fpr) -> np.ndarray:
        """Lowest FNR the claim allows at each FPR (vectorized; values in [0, 1])."""
        alpha = np.clip(np.atleast_1d(np.asarray(fpr, dtype=np.float64)), 0.0, 1.0)
        out = np.zeros_like(alpha)
        if self.gaussian_mu is not None:
            with np.errstate(divide="ignore"):
                out = np.maximum(out, special.ndtr(-special.ndtri(alpha) - self.gaussian_mu))
        if self.profile_eps.size:
            out = np.maximum(out, self._profile_fnr(alpha))
        for eps, delta in self.points:
            out = np.maximum(out, dp_tradeoff_curve(eps, delta, alpha))
        out = np.clip(out, 0.0, 1.0)
        return out if np.ndim(fpr) else float(out[0])

    def fpr(self, fnr) -> np.ndarray:
        """The inverse curve: the lowest FPR the claim allows at each FNR. Every part is
        symmetric (module docstring), so it is ``fnr`` itself."""
        return self.fnr(fnr)

    def _profile_fnr(self, alpha: np.ndarray) -> np.ndarray:
        # in blocks of FPRs (each row is computed on its own): the [n_fpr, n_eps] temporaries stay in cache
        if alpha.size <= _FPR_BLOCK:
            return self._profile_fnr_block(alpha)
        return np.concatenate([self._profile_fnr_block(alpha[i:i + _FPR_BLOCK])
                               for i in range(0, alpha.size, _FPR_BLOCK)])

    def _profile_fnr_block(self, alpha: np.ndarray) -> np.ndarray:
        eps, delta = self.profile_eps, self.profile_delta
        coarse = np.arange(0, eps.size, _COARSE_EVERY)
        best = coarse[np.argmax(_profile_lines_max(eps[coarse], delta[coarse], alpha), axis=1)]
        window = np.clip(best[:, None] + np.arange(-_COARSE_EVERY, _COARSE_EVERY + 1)[None, :], 0, eps.size - 1)
        a = alpha[:, None]
        e, d = eps[window], delta[window]
        with np.errstate(over="ignore", invalid="ignore"):
            lines = np.maximum(1.0 - d - np.exp(e) * a, np.exp(-e) * (1.0 - d - a))
        return np.max(lines, axis=1)

    def as_record(self) -> dict:
        """The curve as JSON-ready values (an audit twin's audit.json): the tabulated δ(ε) with
        its ε grid's ends and size, so that ``from_record`` rebuilds the same curve bit for bit
        (JSON keeps every float64 exactly)."""
        eps = self.profile_eps
        return {"gaussian_mu": None if self.gaussian_mu is None else float(self.gaussian_mu),
                "profile_eps": ({"start": float(eps[0]), "stop": float(eps[-1]), "num": int(eps.size)}
                                if eps.size else None),
                "profile_delta": [float(d) for d in self.profile_delta],
                "points": [[float(e), float(d)] for e, d in self.points],
                "parameters": self.parameters}

    @classmethod
    def from_record(cls, record: dict) -> ClaimedCurve:
        """The curve ``as_record`` wrote."""
        grid = record.get("profile_eps")
        eps = np.linspace(float(grid["start"]), float(grid["stop"]), int(grid["num"])) if grid else np.zeros(0)
        delta = np.asarray(record.get("profile_delta") or [], dtype=np.float64)
        if delta.size != eps.size:
            raise ValueError(f"a recorded claimed curve has {delta.size} δ values for {eps.size} ε values")
        mu = record.get("gaussian_mu")
        return cls(gaussian_mu=None if mu is None else float(mu), profile_eps=eps, profile_delta=delta,
                   points=tuple((float(e), float(d)) for e, d in record.get("points") or ()),
                   parameters=dict(record.get("parameters") or {}))

    def describe(self) -> str:
        parts = []
        if self.gaussian_mu is not None:
            parts.append(f"μ-GDP with μ = {self.gaussian_mu:.4g}")
        if self.profile_eps.size:
            parts.append("the privacy loss distribution of the accountant's event")
        parts.extend(f"(ε = {e:.4g}, δ = {d:.3g})" for e, d in self.points)
        return " ∨ ".join(parts) if parts else "no claim"


def _tabulated_profile(delta_of_epsilon: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    eps = np.linspace(0.0, _EPS_MAX, int(round(_EPS_MAX / _FINE_STEP)) + 1)
    delta = np.clip(np.asarray(delta_of_epsilon(eps), dtype=np.float64), 0.0, 1.0)
    return eps, delta


def _gaussian_composition_mu(event) -> float | None:
    """μ of an event that is k compositions of one Gaussian (q = 1 or no subsampling), else None."""
    from dp_accounting import dp_event

    count = 1
    if isinstance(event, dp_event.SelfComposedDpEvent):
        count, event = int(event.count), event.event
    if isinstance(event, dp_event.PoissonSampledDpEvent) and event.sampling_probability == 1.0:
        event = event.event
    if isinstance(event, dp_event.GaussianDpEvent):
        sigma = float(event.noise_multiplier)
        return math.inf if sigma == 0.0 else math.sqrt(count) / sigma
    return None


def accountant_tradeoff(noise_multiplier: float, sampling_probability: float, steps: int,
                        sampling: str = "poisson", *, points: Sequence[tuple[float, float]] = (),
                        discretization: float = PLD_DISCRETIZATION) -> ClaimedCurve:
    """The trade-off curve a DP-SGD accountant claims for its event (σ, q, steps, batch
    scheme), joined with the extra (ε, δ) statements ``points`` (module docstring)."""
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import pld_privacy_accountant

    event = accounting.dpsgd_event(float(noise_multiplier), float(sampling_probability), int(steps), sampling)
    points = tuple((float(e), float(d)) for e, d in points if math.isfinite(float(e)))
    parameters = {"noise_multiplier": float(noise_multiplier), "sampling_probability": float(sampling_probability),
                  "steps": int(steps), "sampling": sampling, "points": [list(p) for p in points]}
    mu = _gaussian_composition_mu(event)
    if mu is not None:
        return ClaimedCurve(gaussian_mu=mu, points=points, parameters={**parameters, "curve": "gaussian"})
    acc = pld_privacy_accountant.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE,
                                               value_discretization_interval=float(discretization))
    acc.compose(event)
    eps, delta = _tabulated_profile(acc.get_delta)
    return ClaimedCurve(profile_eps=eps, profile_delta=delta, points=points,
                        parameters={**parameters, "curve": "pld", "pld_discretization": float(discretization)})


def claimed_inputs(record) -> tuple[float, float, int]:
    """(σ, q, T) the accountant was given, from a training's record: its ``accountant_inputs``
    (what ``dpaudit.dp.accounting.dpsgd_epsilon`` received, issue 45), or in a record written
    before it kept them the record's noise multiplier, sampling probability (the loop's B/n)
    and accounted steps."""
    inputs = record.get("accountant_inputs")
    if inputs:
        return float(inputs["noise_multiplier"]), float(inputs["sampling_probability"]), int(inputs["steps"])
    return (float(record["noise_multiplier"]), float(record["sampling_probability"]),
            int(record.get("accounted_steps", record["steps"])))


def twin_tradeoff(record) -> ClaimedCurve:
    """The claimed curve of an audit twin's mechanism from its record (audit.json): the
    accountant's event from its published inputs (σ, q, T: ``claimed_inputs``, not what the loop
    did: the canaries test the claim, and the accounting check compares the two), the batch
    scheme, joined with the accountant's own profile points [[δ, ε(δ)], ...] (``accountant_profile``)."""
    points = [(float(eps), float(at)) for at, eps in record.get("accountant_profile", [])]
    sigma, q, steps = claimed_inputs(record)
    return accountant_tradeoff(sigma, q, steps, str(record["sampling"]), points=points)


def pure_tradeoff(epsilon: float) -> ClaimedCurve:
    """The trade-off curve of pure ε-DP: max(0, 1 − e^ε α, e^{−ε}(1 − α))."""
    epsilon = float(epsilon)
    if not epsilon > 0 or math.isnan(epsilon):
        raise ValueError(f"a pure-DP claim needs epsilon > 0, got {epsilon}")
    return ClaimedCurve(points=((epsilon, 0.0),), parameters={"curve": "pure", "epsilon": epsilon})
