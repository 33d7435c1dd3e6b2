"""The one interface between a training and what watches it (issue 43).

``train_model`` knows nothing of the audit: it calls a ``TrainingObserver`` that its caller
passes in (``dpaudit.audit.mechanism_checks.MechanismObserver`` for the released run, its audit
twin and the reference pools) at the moments an auditor needs, and an audit twin hands it
its ``TwinCanaries`` (``dpaudit.audit.canary_plan.CanaryPlan`` satisfies it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

__all__ = ["TrainingObserver", "TwinCanaries"]


class TrainingObserver(Protocol):
    """What watches one DP-SGD training, called by ``dpaudit.training.train.train_model``."""

    def initialized(self, rebuild: Callable[[], Any]) -> None:
        """The model is built: ``rebuild()`` builds it again from its configuration and seed alone (no
        data); its weights are what the training must start from (a data-dependent start is a bug)."""

    def noise_monitor(self, net, *, steps: int, seed: int, canaries: int) -> Any:
        """The graph-side recorder the step hands its noise to (``build_train_step(noise_monitor=...)``),
        or None; not called on a path whose noise the step cannot expose (vectorized_optimizer)."""

    def clip_monitor(self, net, *, steps: int, seed: int, clip_norm: float, rows: tuple[np.ndarray, np.ndarray],
                     drop_remainder: int | None) -> Any:
        """The graph-side recorder that, at data steps of its choosing, checks the path's clipped sum and
        norms on the step's tape and the batch against the rows drawn (``build_train_step(clip_monitor=...)``),
        or None: ``rows`` the training's (x, y), the population's first rows; ``drop_remainder`` k when the
        loop drops each drawn batch's last |b| mod k rows (microbatches under shuffling)."""

    def weight_monitor(self, *, variables: list, optimizer: Any, frozen: list, rule: dict[str, Any]) -> Any:
        """The graph-side recorder that reads, just before every optimizer call, the state the call
        changes and the update it is handed (``build_train_step(weight_monitor=...)``), or None:
        ``variables`` the model's trainable variables then the canary coordinates, ``frozen`` the
        model's non-trainable ones, ``rule`` the claimed optimizer, learning_rate and momentum."""

    def sampler(self, *, sampling: str, population: int, rate: float, batch_size: int,
                steps_per_epoch: int, canary_rows: int = 0, canaries_shared: bool = False,
                canary_rate: float | None = None) -> None:
        """The sampler the loop draws from: its law, population and rate. ``canary_rows``: an audit
        twin's included gradient canaries, the last ``canary_rows`` positions of the population when
        ``canaries_shared`` (one Poisson sampler for all), else drawn by their own Poisson sampler at
        ``canary_rate`` (``drew_canaries``)."""

    def drew(self, rows: np.ndarray) -> None:
        """The positions in the population that one step's sampler call drew (before any canary split)."""

    def drew_canaries(self, rows: np.ndarray) -> None:
        """The positions among the canary rows that one step's own canary sampler drew (a twin
        whose canaries are not shared with the population's sampler)."""

    def executed(self, empty: bool = False) -> None:
        """One update ran (``empty``: the noise-only update of an empty batch)."""

    def saved(self, path, variables: list) -> None:
        """The released model was written to ``path`` after the last step: ``variables`` the model's (trainable
        and non-trainable) whose values it must hold."""

    def checks(self, *, noise_multiplier: float, clip_norm: float, published_epsilon: float, delta: float,
               privacy: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
        """After the last step: the keys the training's record (train.json) gains."""


class TwinCanaries(Protocol):
    """The canaries an audit twin trains with (``train_model(canaries=...)``)."""

    input_x: np.ndarray
    input_labels: np.ndarray
    input_included: np.ndarray
    gradient_included: np.ndarray
    gradient_norm: float
    seed: int
