"""The δ policy (dpaudit.contract.delta): one range, one check, one ``auto``."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from dpaudit.contract.delta import auto_delta, check_delta, parse_delta, resolve_delta

SRC = Path(__file__).resolve().parents[2] / "src" / "dpaudit"


def test_auto_matches_negoescu_et_al():
    # Negoescu et al. 2023, Sec. 4 (δ = 1/(n ln n)): Adult n = 32,561 -> 2.956e-6; Purchase n = 208,731 -> 3.911e-7.
    delta, warnings = resolve_delta("auto", 32_561)
    assert delta == pytest.approx(2.956e-6, rel=1e-3)
    assert delta == 1 / (32_561 * math.log(32_561)) == auto_delta(32_561)
    assert warnings == []
    assert resolve_delta("auto", 208_731)[0] == pytest.approx(3.911e-7, rel=1e-3)
    assert resolve_delta(" AUTO ", 1000)[0] == pytest.approx(1.4476482730108394e-4, rel=1e-12)


def test_resolve_numeric_cases():
    n = 1000  # 1/(n ln n) = 1.448e-4, 1/n = 1e-3
    assert resolve_delta(1e-5, n) == (1e-5, [])
    # YAML 1.1 reads 1e-5 as a string.
    assert resolve_delta("1e-5", n) == (1e-5, [])
    delta, warnings = resolve_delta(5e-4, n)
    assert delta == 5e-4 and len(warnings) == 1 and "1/(n ln n)" in warnings[0]
    with pytest.raises(ValueError, match="allow_large_delta"):
        resolve_delta(1e-3, n)  # exactly 1/n
    with pytest.raises(ValueError, match="config.training.delta: .*allow_large_delta"):
        resolve_delta(0.01, n, name="config.training.delta")
    delta, warnings = resolve_delta(0.01, n, allow_large_delta=True)
    assert delta == 0.01 and len(warnings) == 1 and ">= 1/n" in warnings[0]
    # δ = 0 is not the δ of an (ε, δ) guarantee: refused (it was accepted before).
    for bad in (0.0, -1e-6, 1.0, float("nan"), float("inf"), "often", "nan", None, True):
        with pytest.raises(ValueError, match="delta"):
            resolve_delta(bad, n)
    with pytest.raises(ValueError, match="n_members"):
        resolve_delta("auto", 1)


def test_check_delta_one_range_and_the_pure_exception():
    assert check_delta(1e-5) == 1e-5
    np.testing.assert_array_equal(check_delta([1e-5, 0.5]), [1e-5, 0.5])
    for bad in (0, 1, -0.1, float("nan"), float("inf"), [0.1, 0.0], "1e-5"):
        with pytest.raises(ValueError, match=r"my_delta must .*\(0, 1\)"):
            check_delta(bad, "my_delta")
    assert check_delta(0.0, allow_pure=True) == 0.0
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        check_delta(1.0, allow_pure=True)
    with pytest.raises(ValueError):
        check_delta(float("nan"), allow_pure=True)


def test_parse_delta_accepts_yaml_strings():
    assert parse_delta("auto") == "auto"
    assert parse_delta("1e-5") == 1e-5
    assert parse_delta("2.5E-7") == 2.5e-7
    with pytest.raises(ValueError, match="config.training.delta: 'nan' is neither"):
        parse_delta("nan", "config.training.delta")


def test_no_other_delta_range_check_in_the_library():
    """Every δ range check goes through dpaudit.contract.delta (the one policy)."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.parts[-2:] == ("contract", "delta.py"):
            continue
        text = path.read_text()
        if re.search(r"def _?check_delta|def resolve_delta|delta must|delta\.strip\(\)\.lower\(\)", text):
            offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_library_callers_use_the_one_check():
    from dpaudit.dp import accounting, composition, mechanisms
    from dpaudit.metrics import identifiability

    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        mechanisms.gaussian_sigma_analytic(1.0, 1.0, float("nan"))
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        composition.rdp_to_dp([2.0], [0.1], 0.0)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        accounting.dpsgd_epsilon(1.0, 0.01, 10, 0.0)
    assert identifiability.rho_beta_expected(2.0, 0.0) == pytest.approx(identifiability.rho_beta(2.0))
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        identifiability.rho_beta_expected(2.0, float("nan"))
