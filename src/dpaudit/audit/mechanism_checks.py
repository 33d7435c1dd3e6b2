"""The DP-SGD mechanism measured whole (issues 32, 45): the noise certificate's monitor and the
sampler's bookkeeping of one training, and the three checks train.json records.

``SamplerLedger`` keeps what the loop's sampler did (population, rate, the rows every step
drew in a ``dpaudit.audit.row_ledger.RowLedger``, updates executed, empty-batch noise steps
included); ``monitor_for`` builds the graph-side ``NoiseMonitor`` over a model's trainable
variables (and the twin's canary coordinates); ``mechanism_checks`` turns both into
``noise_check`` (``dpaudit.dp.noise_certificate``), ``accounting_check``
(``dpaudit.dp.accounting_check``) and ``sampler_check`` (``dpaudit.dp.sampler_check``). ``MechanismObserver`` is the
training observer (``dpaudit.training.observer.TrainingObserver``) that does all three for
one training: the released run and its audit twin pass one to ``train_model``.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.audit.clip_monitor import ClipMonitor, merge_clip_into
from dpaudit.audit.noise_monitor import NoiseMonitor, share_blocks
from dpaudit.audit.row_ledger import RowLedger
from dpaudit.audit.weight_certificate import OptimizerRule, merge_into
from dpaudit.audit.weight_monitor import WeightMonitor
from dpaudit.dp import accounting_check, noise_certificate, sampler_check

__all__ = ["CANARY_VARIABLE", "VECTORIZED_REASON", "ZERO_NOISE_REASON", "MechanismObserver", "SamplerLedger",
           "initial_state_check",
           "mechanism_checks", "monitor_for", "not_certified", "released_file_check"]

CANARY_VARIABLE = "canary_coordinates"
ZERO_NOISE_REASON = "the noise multiplier is 0: no noise is claimed (ε = ∞), so there is none to certify"
VECTORIZED_REASON = ("the vectorized_optimizer path draws its noise inside tensorflow-privacy, which exposes "
                     "neither the noise nor the clipped sum; choose fast_gradient_clipping (or auto) to certify it")


@dataclass
class SamplerLedger:
    """What the training loop's sampler actually did: every step's rows (``RowLedger``), the
    updates executed; an audit twin's canary rows (the population's last ``canary_rows`` when
    ``canaries_shared``, else their own Poisson sampler's ledger)."""

    sampling: str
    population: int
    rate: float
    batch_size: int
    steps_per_epoch: int
    canary_rows: int = 0
    canaries_shared: bool = False
    canary_rate: float | None = None  # the canaries' own sampler's (None: the population's rate)
    steps_executed: int = 0
    empty_batches: int = 0
    rows: RowLedger = field(init=False)
    canaries: RowLedger | None = field(init=False)

    def __post_init__(self) -> None:
        self.rows = RowLedger(self.population)
        self.canaries = RowLedger(self.canary_rows) if self.canary_rows and not self.canaries_shared else None

    def drew(self, positions) -> None:
        self.rows.drew(positions)

    def drew_canaries(self, positions) -> None:
        if self.canaries is None:
            raise RuntimeError("drew_canaries: this sampler has no canary rows of their own")
        self.canaries.drew(positions)

    def executed(self, empty: bool = False) -> None:
        self.steps_executed += 1
        self.empty_batches += int(empty)

    @property
    def batch_sizes(self) -> np.ndarray:
        return self.rows.sizes()

    def ledger_bytes(self) -> int:
        return self.rows.nbytes + (self.canaries.nbytes if self.canaries is not None else 0)

    def groups(self) -> list[dict[str, Any]]:
        """The row groups the sampler check tests (``dpaudit.dp.sampler_check.check_sampler``)."""
        ranges = {"all rows": (0, self.population)}
        if self.canary_rows and self.canaries_shared:
            ranges["canary rows"] = (self.population - self.canary_rows, self.population)
        summary = self.rows.summary(ranges, steps_per_epoch=self.steps_per_epoch)
        groups = [{"name": name, "claim": self.sampling if name == "all rows" else "poisson", "rate": self.rate,
                   **stats} for name, stats in summary.items()]
        if self.canaries is not None:
            own = self.canaries.summary({"canary rows": (0, self.canary_rows)}, steps_per_epoch=self.steps_per_epoch)
            rate = self.rate if self.canary_rate is None else self.canary_rate
            groups.append({"name": "canary rows", "claim": "poisson", "rate": rate, **own["canary rows"]})
        return groups

    def record(self) -> dict[str, Any]:
        sizes = self.batch_sizes
        rows_drawn = int(sizes.sum())
        cells = self.rows.steps * self.population + (self.canaries.steps * self.canary_rows if self.canaries else 0)
        ledger = self.ledger_bytes()
        return {"sampling": self.sampling, "population": int(self.population), "rate": float(self.rate),
                "batch_size": int(self.batch_size), "steps_per_epoch": int(self.steps_per_epoch),
                "rows_drawn": rows_drawn, "steps_executed": int(self.steps_executed),
                "empty_batches": int(self.empty_batches),
                "realized_rate": (rows_drawn / (self.steps_executed * self.population)
                                  if self.steps_executed and self.population else math.nan),
                "batch_size_min": int(sizes.min()) if sizes.size else None,
                "batch_size_max": int(sizes.max()) if sizes.size else None,
                "batch_sizes": sizes.tolist(),
                "canary_rows": int(self.canary_rows), "canaries_shared": bool(self.canaries_shared),
                "ledger_bytes": int(ledger), "ledger_bytes_per_row_step": ledger / cells if cells else None}


def monitor_for(net, *, steps: int, seed: int, canaries: int = 0, block: bool = True) -> NoiseMonitor:
    """A noise monitor over ``net``'s trainable variables, then ``canaries`` canary coordinates
    (``block=False``: its block from ``share_blocks``)."""
    variables = net.trainable_variables
    names = [v.name for v in variables] + ([CANARY_VARIABLE] if canaries else [])
    shapes = [tuple(v.shape) for v in variables] + ([(int(canaries),)] if canaries else [])
    return NoiseMonitor(names, shapes, steps=steps, seed=seed, block=block)


def not_certified(reason: str) -> dict[str, Any]:
    """The ``noise_check`` record of a run whose noise was not measured, with the reason."""
    return {"certified": False, "passed": None, "reason": reason}


def mechanism_checks(monitor: NoiseMonitor | None, ledger: SamplerLedger, *, noise_multiplier: float,
                     clip_norm: float, published_epsilon: float, delta: float, privacy: dict[str, Any],
                     not_certified_reason: str | None = None, weights: dict[str, Any] | None = None) -> dict[str, Any]:
    """``noise_check`` and ``accounting_check`` of one DP-SGD training (train.json keys); ``weights``:
    the weight certificate's record (``dpaudit.audit.weight_certificate``), joined to ``noise_check``."""
    if monitor is None:
        noise = not_certified(not_certified_reason or VECTORIZED_REASON)
    elif not noise_multiplier > 0:
        noise = not_certified(ZERO_NOISE_REASON)
    else:
        stats = monitor.statistics()
        noise = noise_certificate.certify(stats["variables"], stats["samples"], stats["sample_columns"],
                                          noise_multiplier=noise_multiplier, clip_norm=clip_norm)
        noise["monitored_updates"] = stats["steps"]
        noise["sample_stride"] = stats["sample_stride"]
        if stats["steps"] != ledger.steps_executed:
            noise["passed"] = False
            noise["failures"].append({"variable": "(all)", "test": "updates_observed", "p_value": 0.0})
    inputs = {"noise_multiplier": privacy["noise_multiplier"], "sampling_probability": privacy["sampling_probability"],
              "steps": privacy["steps"], "delta": privacy["delta"]}
    accounting = accounting_check.reproduce_accounting(
        published_epsilon=published_epsilon, delta=delta, accountant_inputs=inputs, loop=ledger.record(),
        noise_multiplier_drawn=noise_multiplier, noise_check=noise, accountant=privacy["accountant"])
    # after the accounting check, which asks only whether the noise drawn is N(0, σ²C²)
    noise = merge_into(noise, weights, steps_executed=ledger.steps_executed)
    t0 = time.perf_counter()
    sampler = sampler_check.check_sampler(ledger.groups(), rate=ledger.rate, batch_size=ledger.batch_size)
    sampler.update(seconds=time.perf_counter() - t0, ledger_bytes=ledger.ledger_bytes())
    return {"noise_check": noise, "accounting_check": accounting, "sampler_check": sampler}


def _start_against(initial: list[tuple[str, np.ndarray]], rebuilt) -> dict[str, Any]:
    """``initial_state_check``'s comparison: the record of the start against the rebuild (or the
    exception the rebuild raised)."""
    if isinstance(rebuilt, Exception):
        return {"variables": None, "passed": False, "largest_difference": math.inf, "variable": None,
                "reason": f"the model could not be built again from its configuration and seed alone "
                          f"({type(rebuilt).__name__}: {rebuilt}): its start needs more, e.g. the data"}
    fresh = [*rebuilt.trainable_variables, *rebuilt.non_trainable_variables]
    model = [*initial[:len(rebuilt.trainable_variables)], *initial[len(initial) - len(rebuilt.non_trainable_variables):]]
    if len(model) != len(fresh) or any(a.shape != tuple(b.shape) for (_, a), b in zip(model, fresh, strict=False)):
        return {"variables": len(fresh), "passed": False, "largest_difference": math.inf, "variable": None,
                "reason": "the model's variables are not the rebuilt model's (another architecture than its "
                          "configuration builds)"}
    gaps = [float(np.max(np.abs(a.astype(np.float64) - np.asarray(b.value(), np.float64)), initial=0.0))
            for (_, a), b in zip(model, fresh, strict=True)]
    worst = int(np.argmax(gaps)) if gaps else 0
    return {"variables": len(fresh), "passed": not any(g > 0 for g in gaps),
            "largest_difference": max(gaps, default=0.0), "variable": model[worst][0] if gaps else None}


def initial_state_check(weights: dict[str, Any], initial: list[tuple[str, np.ndarray]], rebuilt) -> dict[str, Any]:
    """The weight certificate's record with ``initialization``: the model's variables when the step was
    built against a build from the configuration and seed alone (``rebuilt``, no data; builders are
    refused unless two builds with one seed agree, ``training.architectures.check_model``). Any
    difference fails (test ``weights_rule``, update 0): the start read the data (a bias set from the
    labels' frequencies, a normalization adapted to the members, a seed drawn from the rows)."""
    record = _start_against(initial, rebuilt)
    out = {**weights, "initialization": record}
    if not record["passed"]:
        out["passed"] = False
        out["failures"] = [*weights["failures"], {
            "variable": record["variable"] or "(all)", "after_update": 0, "deviation": math.inf,
            "reason": "the initial weights differ from a build from the configuration and seed alone: the "
                      "initialization depends on the data"}]
    return out


def released_file_check(weights: dict[str, Any], path, variables: list) -> dict[str, Any]:
    """The weight certificate's record with ``released_file``: the model file the training wrote (``path``)
    must hold exactly the model's variables as the certificate last read them (``variables``, trainable and
    non-trainable, read after the last update): compared bit for bit as multisets of arrays (a .keras file
    stores them by layer). A file that holds other weights (another model saved, a change after the last
    certified update, a non-private fine-tuning before saving) fails (test ``released_file``): the
    certificate would vouch for weights nobody received."""
    from dpaudit.io import saved_weight_arrays

    def key(array: np.ndarray) -> tuple:
        array = np.ascontiguousarray(array)
        return array.dtype.str, array.shape, array.tobytes()

    try:
        saved = saved_weight_arrays(path)
    except Exception as error:  # noqa: BLE001 (any unreadable file is this check's failure, named)
        saved, problem = [], f"the model file could not be read back ({type(error).__name__}: {error})"
    else:
        problem = None
    model = [(v.name, key(np.asarray(v.value()))) for v in variables]
    remaining = Counter(key(array) for array in saved)
    missing = []
    for name, k in model:
        if remaining[k]:
            remaining[k] -= 1
        else:
            missing.append(name)
    extra = sum(remaining.values())
    record = {"file": str(Path(path).name), "arrays_in_file": len(saved), "variables": len(model),
              "passed": problem is None and not missing and not extra}
    if not record["passed"]:
        record["reason"] = problem or (
            f"the saved file does not hold {len(missing)} of the model's {len(model)} certified variables"
            + (f" (first: {missing[0]})" if missing else "") + (f" and holds {extra} other array(s)" if extra else ""))
    out = {**weights, "released_file": record}
    if not record["passed"]:
        out["passed"] = False
        out["failures"] = [*weights["failures"], {
            "variable": missing[0] if missing else "(file)", "test": "released_file",
            "after_update": int(weights.get("updates", 0)), "deviation": math.inf, "reason": record["reason"]}]
    return out


class MechanismObserver:
    """The mechanism checks of one DP-SGD training, as its observer (``train_model(observer=...)``):
    the noise monitor the step records into, the weight monitor (issue 45: the weights moved only by
    the optimizer's rule on the certified update), the sampler's ledger (every step's rows), and at the
    end ``noise_check``, ``accounting_check``, ``sampler_check``, ``sampler`` and ``accountant_inputs``
    for train.json (logged in one line each).

    The two monitors write one row of one block per update (``share_blocks``, when the weight
    monitor is built: two variables and a scatter fewer than a block each): ``weight_monitor`` must
    be called before the step is traced (``build_train_step`` does). ``check_weights = False``
    leaves the weight certificate out (issue 32's checks alone)."""

    check_weights = True

    def __init__(self) -> None:
        self.monitor: NoiseMonitor | None = None
        self.weights: WeightMonitor | None = None
        self.ledger: SamplerLedger | None = None
        self.clipping: ClipMonitor | None = None
        self.rebuild: Any = None
        self.released: tuple[Any, list] | None = None  # (the model file written, the model's variables)

    def saved(self, path, variables: list) -> None:
        self.released = (path, list(variables))

    def initialized(self, rebuild) -> None:
        self.rebuild = rebuild

    def noise_monitor(self, net, *, steps: int, seed: int, canaries: int) -> NoiseMonitor:
        self.monitor = monitor_for(net, steps=steps, seed=seed, canaries=canaries, block=False)
        return self.monitor

    def clip_monitor(self, net, *, steps: int, seed: int, clip_norm: float, rows: tuple[np.ndarray, np.ndarray],
                     drop_remainder: int | None) -> ClipMonitor:
        """The clipping certificate's monitor (``dpaudit.audit.clip_monitor``; the red team's clipping and
        batch bugs): it also hears every draw and update, to check the batches against the rows drawn."""
        self.clipping = ClipMonitor([v.name for v in net.trainable_variables], steps=steps, seed=seed,
                                    clip_norm=clip_norm, rows=rows, drop_remainder=drop_remainder)
        return self.clipping

    def weight_monitor(self, *, variables: list, optimizer: Any, frozen: list,
                       rule: dict[str, Any]) -> WeightMonitor | None:
        self.weights = (WeightMonitor(variables=variables, optimizer=optimizer, rule=OptimizerRule(**rule),
                                      frozen=frozen, block=False) if self.check_weights else None)
        share_blocks([self.monitor, self.weights])
        if self.monitor is not None and self.weights is not None and self.monitor.block is self.weights.block:
            self.monitor.residual_from(self.weights)  # the updates are in the row already (not with float64 weights)
        return self.weights

    def sampler(self, *, sampling: str, population: int, rate: float, batch_size: int,
                steps_per_epoch: int, canary_rows: int = 0, canaries_shared: bool = False,
                canary_rate: float | None = None) -> None:
        self.ledger = SamplerLedger(sampling, population, rate, batch_size, steps_per_epoch,
                                    canary_rows=canary_rows, canaries_shared=canaries_shared, canary_rate=canary_rate)

    def drew(self, rows: np.ndarray) -> None:
        self.ledger.drew(rows)
        if self.clipping is not None:
            self.clipping.drew(rows)

    def drew_canaries(self, rows: np.ndarray) -> None:
        self.ledger.drew_canaries(rows)

    def executed(self, empty: bool = False) -> None:
        self.ledger.executed(empty=empty)
        if self.clipping is not None:
            self.clipping.executed(empty=empty)

    def checks(self, *, noise_multiplier: float, clip_norm: float, published_epsilon: float, delta: float,
               privacy: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
        weights = self.weights.finish() if self.weights is not None else None
        if weights is not None and self.rebuild is not None:
            try:
                rebuilt = self.rebuild()
            except Exception as error:  # noqa: BLE001 (a builder that needs more than its configuration and seed)
                rebuilt = error
            # the state the step started from (the weight certificate held it unchanged until the first update)
            weights = initial_state_check(weights, self.weights.start_values(), rebuilt)
        if weights is not None and self.released is not None:
            weights = released_file_check(weights, *self.released)
        checks = mechanism_checks(self.monitor, self.ledger, noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                                  published_epsilon=published_epsilon, delta=delta, privacy=privacy, weights=weights)
        if self.clipping is not None:  # the clipping certificate joins noise_check (test clipped_sum)
            checks["noise_check"] = merge_clip_into(checks["noise_check"], self.clipping.finish())
        for name, passed, sentence in (
                ("noise certificate", checks["noise_check"].get("passed"),
                 noise_certificate.summary_sentence(checks["noise_check"])),
                ("accounting check", checks["accounting_check"]["reproduced"],
                 accounting_check.summary_sentence(checks["accounting_check"])),
                ("sampler check", checks["sampler_check"]["passed"],
                 sampler_check.summary_sentence(checks["sampler_check"]))):
            (log.info if passed is not False else log.warning)("%s: %s", name, sentence)
        return {**checks, "sampler": self.ledger.record(),
                "accountant_inputs": checks["accounting_check"]["accountant_inputs"]}
