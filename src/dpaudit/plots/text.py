"""Numbers as figure text: powers of ten with Unicode superscripts (10⁻⁶), not 1e-06 or 10^6."""

from __future__ import annotations

import math

_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(exponent: int) -> str:
    return str(int(exponent)).translate(_SUPERSCRIPTS)


def number(value: float) -> str:
    """``value`` as a reader writes it: exact powers of ten from 10⁻³ or 10³ on as 10ⁿ, else ``:g``."""
    value = float(value)
    if value > 0 and math.isfinite(value):
        exponent = round(math.log10(value))
        if abs(exponent) >= 3 and math.isclose(value, 10.0**exponent, rel_tol=1e-12):
            return "10" + superscript(exponent)
    return f"{value:g}"


def scientific(value: float, digits: int = 3) -> str:
    """``value`` as m × 10ⁿ with ``digits`` significant digits (2.00 × 10⁻⁵, not 2.00e-05)."""
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa} × 10{superscript(int(exponent))}"
