"""The δ policy: one range, one check, one ``auto``.

Range. The δ of an (ε, δ) guarantee lies in the open interval (0, 1):

* δ = 0 is a pure ε-DP statement, not an (ε, δ) one. The pure-ε mechanisms of this
  project (``output_perturbation`` and ``objective_perturbation``, LeBlond et al. 2023) never
  pass a δ through this check: their train.json records δ = 0 with accountant
  ``pure``, and the families that evaluate them use the dataset's δ
  (``evaluation_delta``). The only other legitimate δ = 0 is a *test* of a pure
  ε-DP claim: the ε lower bound from attack rates (``dpaudit.dp.hypothesis``, the
  MIA family) and the δ-adjusted belief ρ_β + δ(1 − ρ_β) of the identifiability
  family reduce to their pure-ε forms at δ = 0, and so does ε* (Negoescu et al. 2023, Fig. 3
  simulations evaluate it at δ = 0), and so do the canary audit's one-run bounds
  (``dpaudit.dp.canary_bounds``; the many-runs bound of the linear mechanisms tests
  their pure ε claim). Those callers say so explicitly
  with ``check_delta(..., allow_pure=True)``; nothing else admits 0.
* δ ≥ 1 makes every mechanism (ε, δ)-DP, so it states nothing.

``auto``. The configuration's ``training.delta: auto`` resolves to 1/(n ln n) with n
the number of members (training examples), Negoescu et al. 2023, Sec. 4's δ ≪ 1/n in the
natural-log reading ((log n)/n would exceed 1/n). It is resolved in one place:
``resolve_delta``, called by the prepare_dataset job, which writes the result to
dataset.json; every later job reads that number.

Size. A numeric δ ≥ 1/n allows releasing one random member's record in the clear
((0, 1/n)-DP), so ``resolve_delta`` refuses it unless ``allow_large_delta`` and
warns above 1/(n ln n). The config validation applies the same rule at parse time
when n is known before any job (``dpaudit.config``).

Numbers written as strings. YAML 1.1 (PyYAML, hence Snakemake) reads a float only
with a dot and a signed exponent, so ``1e-5`` (and ``1.0e5``) arrive as *strings*;
``parse_delta`` accepts such a string as the number it spells (the config validation
converts every numeric string where the schema expects a number).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

AUTO = "auto"
RANGE = "(0, 1)"
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_delta(value, name: str = "delta") -> float | str:
    """A configured δ as written: ``'auto'`` (any case, surrounding blanks ignored) or a
    number in (0, 1); a numeric string such as ``'1e-5'`` (YAML 1.1) is that number."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == AUTO:
            return AUTO
        if not _NUMBER.match(text):
            raise ValueError(f"{name}: {value!r} is neither 'auto' nor a number; write 'auto' or a number in {RANGE}")
        value = float(text)
    return check_delta(value, name)


def check_delta(delta, name: str = "delta", *, allow_pure: bool = False):
    """δ as a float (or a float64 array for array input) if it lies in (0, 1).

    ``allow_pure`` also admits exactly 0, for the tests of a pure ε-DP claim listed
    in the module docstring. NaN, ±inf, booleans and non-numbers are refused with a
    ValueError naming ``name``.
    """
    if isinstance(delta, bool) or isinstance(delta, str):
        raise ValueError(f"{name} must be a number in {RANGE}, got {delta!r}")
    try:
        values = np.asarray(delta, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in {RANGE}, got {delta!r}") from None
    ok = (values > 0) & (values < 1)
    if allow_pure:
        ok |= values == 0
    if not np.all(ok):
        allowed = "[0, 1) (0 = pure ε-DP)" if allow_pure else RANGE
        raise ValueError(f"{name} must lie in {allowed}, got {delta!r}")
    return float(values) if values.ndim == 0 else values


def auto_delta(n_members: int) -> float:
    """1/(n ln n): the value of ``delta: auto`` for n members (n ≥ 2)."""
    n = int(n_members)
    if n < 2:
        raise ValueError(f"n_members must be at least 2 to resolve delta, got {n_members}")
    return 1.0 / (n * math.log(n))


def large_delta_problem(delta: float, n_members: int) -> str | None:
    """The message for a δ ≥ 1/n (None when δ < 1/n)."""
    n = int(n_members)
    if delta < 1.0 / n:
        return None
    return (f"delta={delta:g} >= 1/n = {1.0 / n:g} (n = {n} members): such a δ allows releasing a whole "
            f"record; write a smaller delta (e.g. auto = {auto_delta(n):.3g}) or set "
            "training.allow_large_delta: true")


def resolve_delta(delta, n_members: int, allow_large_delta: bool = False, name: str = "delta") -> tuple[float, list[str]]:
    """The one resolution of a configured δ against n members: (δ, warnings).

    ``'auto'`` → 1/(n ln n). A number (or numeric string) must lie in (0, 1); δ ≥ 1/n
    is refused unless ``allow_large_delta`` (then a warning), and δ above
    1/(n ln n) gets a warning.
    """
    rule = auto_delta(n_members)
    value = parse_delta(delta, name)
    if value == AUTO:
        return rule, []
    warnings: list[str] = []
    problem = large_delta_problem(value, n_members)
    if problem is not None:
        if not allow_large_delta:
            raise ValueError(f"{name}: {problem}")
        warnings.append(problem + " (allowed by allow_large_delta)")
    elif value > rule:
        warnings.append(f"delta={value:g} exceeds the rule of thumb 1/(n ln n) = {rule:.4g} (n = {int(n_members)} members)")
    return value, warnings


def evaluation_delta(train: Mapping) -> float:
    """The δ a run's attack metrics (MIA ε lower bound, ε*) are evaluated at, from its train.json.

    Its guarantee's δ, except for a pure ε-DP run (δ = 0: output or objective perturbation),
    which is (ε, δ)-DP for every δ and is audited at the dataset's δ like the rest of the
    grid (``evaluation_delta`` in its train.json); ε* needs δ > 0.
    """
    return float(train.get("evaluation_delta", train["delta"]))
