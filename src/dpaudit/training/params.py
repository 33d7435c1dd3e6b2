"""The training parameters of one run: defaults, checks and the DP-SGD gradient path.

``normalize_params`` fills ``DEFAULTS``, coerces every value to a plain Python type and
refuses a bad one naming it (NaN means "not applicable" only for a key without a default);
a linear mechanism keeps only ``LINEAR_PARAMS``. ``resolve_implementation`` picks the
gradient path of ``dpaudit.training.steps`` ("auto": masked ghost clipping with Dropout,
fast gradient clipping without, the group-gradient path with microbatches; layerwise
clipping for any model but the MLP).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpaudit.contract.delta import check_delta
from dpaudit.contract.mechanisms import LINEAR_MECHANISMS, MECHANISMS
from dpaudit.dp import accounting
from dpaudit.training.architectures import CNN_DEFAULTS
from dpaudit.training.linear import DEFAULT_REGULARIZATION
from dpaudit.training.steps import DP_IMPLEMENTATIONS

__all__ = ["DEFAULTS", "LINEAR_PARAMS", "OPTIMIZERS", "normalize_params", "resolve_implementation"]

# The parameters a linear mechanism reads; any other parameter set for one is refused.
LINEAR_PARAMS = ("mechanism", "target_epsilon", "seed", "linear_regularization", "delta", "n_classes")
OPTIMIZERS = ("sgd", "adam")

# Equal to the defaults of workflow/schemas/config.schema.yaml for every key the
# two share (tests/unit/test_training.py compares them), except clip_norm and delta:
# a baseline has no clipping, and the library takes the resolved numeric δ only.
DEFAULTS: dict[str, Any] = {
    "mechanism": "baseline",
    "epochs": 10,
    "batch_size": 64,
    "learning_rate": 0.05,
    "optimizer": "sgd",
    "momentum": 0.9,
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
    "linear_regularization": None,  # linear mechanisms only; None = DEFAULT_REGULARIZATION
    # The model (dpaudit.training.architectures): mlp, cnn or keras:package.module:function;
    # the conv keys shape a cnn only, image_shape is the dataset's (dataset.json).
    "model": "mlp",
    **CNN_DEFAULTS,
    "image_shape": None,
}


def _finite(p: dict[str, Any], key: str, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False) -> None:
    """Refuse a non-finite (or out-of-range) number, naming the parameter; store it as float."""
    value = p[key]
    if value is None:
        return
    number = math.nan if isinstance(value, bool) else float(value)
    bad = not math.isfinite(number)
    if low is not None:
        bad |= number <= low if low_open else number < low
    if high is not None:
        bad |= number >= high if high_open else number > high
    if bad:
        bounds = []
        if low is not None:
            bounds.append(f"{'>' if low_open else '>='} {low:g}")
        if high is not None:
            bounds.append(f"{'<' if high_open else '<='} {high:g}")
        raise ValueError(f"{key} must be a finite number {' and '.join(bounds)}".rstrip() + f", got {value!r}")
    p[key] = number


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
    given = {k: _none_if_na(v) for k, v in params.items()}
    p = {**DEFAULTS, **given}
    p["mechanism"] = str(p["mechanism"])
    if p["mechanism"] not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {p['mechanism']!r}")
    if p["mechanism"] in LINEAR_MECHANISMS:
        return _normalize_linear(p, given)
    # NaN (or pandas NA) means "not applicable" only for a key without a default
    # (target_epsilon, clip_norm, microbatches, ...): elsewhere it would silently
    # become the default (a NaN momentum used to train with 0.0).
    for key, value in params.items():
        if DEFAULTS[key] is not None and value is not None and given[key] is None:
            raise ValueError(f"{key} must be a finite number, got {value!r}")
    if p.pop("linear_regularization") is not None:
        raise ValueError(f"linear_regularization applies to {LINEAR_MECHANISMS} only, not {p['mechanism']}")
    p["optimizer"] = str(p["optimizer"]).lower()
    if p["optimizer"] not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {p['optimizer']!r}")
    for key in ("epochs", "batch_size", "seed"):
        p[key] = int(p[key])
    if p["epochs"] < 1 or p["batch_size"] < 1:
        raise ValueError("epochs and batch_size must be >= 1")
    # No `or 0.0`: a NaN momentum or dropout must be refused, not become 0.
    for key in ("momentum", "dropout"):
        if p[key] is None:
            p[key] = 0.0
    _finite(p, "learning_rate", 0.0, low_open=True)
    _finite(p, "momentum", 0.0, 1.0, high_open=True)
    _finite(p, "dropout", 0.0, 1.0, high_open=True)
    p["hidden_units"] = [int(h) for h in (p["hidden_units"] or [])]
    p["activation"] = str(p["activation"])
    _model_params(p)
    if p["sampling"] not in accounting.SAMPLINGS:
        raise ValueError(f"sampling must be one of {accounting.SAMPLINGS}, got {p['sampling']!r}")
    if p["dp_implementation"] not in DP_IMPLEMENTATIONS:
        raise ValueError(f"dp_implementation must be one of {DP_IMPLEMENTATIONS}")
    if p["mechanism"] == "dpsgd":
        if p["clip_norm"] is None:
            raise ValueError("dpsgd needs clip_norm > 0")
        _finite(p, "clip_norm", 0.0, low_open=True)
        if p["accountant"] not in accounting.ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {accounting.ACCOUNTANTS}")
        if p["delta"] is None:
            raise ValueError("dpsgd needs a resolved numeric delta")
        p["delta"] = check_delta(p["delta"])
        if p["noise_multiplier"] is None:
            if p["target_epsilon"] is None:
                raise ValueError("dpsgd needs target_epsilon (or an explicit noise_multiplier)")
            _finite(p, "target_epsilon", 0.0, low_open=True)
        else:
            _finite(p, "noise_multiplier", 0.0)
        p["microbatches"] = _microbatches(p["microbatches"])
    else:
        p["clip_norm"] = None if p["clip_norm"] is None else float(p["clip_norm"])
        p["target_epsilon"] = None
        p["noise_multiplier"] = None
        # dpsgd-only, like target_epsilon: a dataset-wide value does not apply here.
        p["microbatches"] = None
        p["delta"] = None if p["delta"] is None else float(p["delta"])
    return p


def _model_params(p: dict[str, Any]) -> None:
    from dpaudit.training.architectures import model_kind

    p["model"] = str(p["model"])
    model_kind(p["model"])  # refuses an unknown model, naming training.model
    p["conv_filters"] = [int(f) for f in p["conv_filters"]]
    for key in ("conv_kernel_size", "conv_strides"):
        p[key] = int(p[key])
    if p["group_norm_groups"] is not None:
        p["group_norm_groups"] = int(p["group_norm_groups"])
    if min([*p["conv_filters"], p["conv_kernel_size"], p["conv_strides"], p["group_norm_groups"] or 1]) < 1:
        raise ValueError("conv_filters, conv_kernel_size, conv_strides and group_norm_groups must be >= 1")
    if p["image_shape"] is not None:
        p["image_shape"] = [int(s) for s in p["image_shape"]]


def _normalize_linear(p: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    mechanism = p["mechanism"]
    extra = sorted(k for k, v in given.items() if k not in LINEAR_PARAMS and v is not None)
    if extra:
        raise ValueError(f"parameter(s) {extra} do not apply to mechanism {mechanism} (it reads {LINEAR_PARAMS})")
    epsilon = p["target_epsilon"]
    if epsilon is None or not 0 < float(epsilon) < math.inf:
        raise ValueError(f"{mechanism} needs a finite target_epsilon > 0, got {epsilon!r}")
    lam = DEFAULT_REGULARIZATION if p["linear_regularization"] is None else float(p["linear_regularization"])
    if not 0 < lam < math.inf:
        raise ValueError(f"linear_regularization must be finite and > 0, got {lam!r}")
    return {
        "mechanism": mechanism,
        "target_epsilon": float(epsilon),
        "seed": int(p["seed"]),
        "linear_regularization": lam,
        # the dataset's δ: not the guarantee's (δ = 0) but the one the audits use
        "delta": None if p["delta"] is None else float(p["delta"]),
        "n_classes": None if p["n_classes"] is None else int(p["n_classes"]),
    }


def resolve_implementation(p: dict[str, Any]) -> str:
    impl = p["dp_implementation"]
    if p.get("model", "mlp") != "mlp":
        # The Dense paths read a Dense chain only; any other model has the per-layer path.
        if p["microbatches"] is not None:
            raise ValueError(f"microbatches need model mlp, got model {p['model']!r}")
        if impl not in ("auto", "layerwise_clipping"):
            raise ValueError(f"dp_implementation {impl} supports model mlp only; use auto (layerwise_clipping) "
                             f"for model {p['model']!r}")
        return "layerwise_clipping"
    if p["microbatches"] is not None:
        # Neither tensorflow-privacy path can split a Poisson batch whose size k
        # does not divide, so microbatches always use the group-gradient path.
        if impl not in ("auto", "microbatch_group_gradients"):
            raise ValueError(f"microbatches need dp_implementation auto, got {impl!r}")
        return "microbatch_group_gradients"
    if impl == "microbatch_group_gradients":
        raise ValueError("dp_implementation microbatch_group_gradients needs microbatches")
    if impl == "auto":
        return "masked_ghost_clipping" if p["dropout"] > 0 else "fast_gradient_clipping"
    if impl == "fast_gradient_clipping" and p["dropout"] > 0:
        raise ValueError(
            "fast_gradient_clipping is not exact with Dropout; use masked_ghost_clipping"
        )
    return impl
