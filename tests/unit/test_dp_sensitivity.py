"""Sensitivity: the lecture's quiz (Geambasu's DP lecture) and local-sensitivity examples.

Oracle: exhaustive enumeration of every dataset of size ≤ 4 over a ≤ 4-value domain
(brute_force_sensitivity only enumerates; the query and its answer are written
here), compared with the lecture's answers (corrected where the slides are wrong). Exact integer/rational answers,
so tolerances are float round-off (1e-12).
"""

import itertools
import math

import pytest

from dpaudit.dp.sensitivity import (
    bounded_mean_sensitivity,
    bounded_sum_sensitivity,
    brute_force_sensitivity,
    count_sensitivity,
    distance,
    histogram_sensitivity,
    local_sensitivity,
    neighbours,
)

COLOURS = ("brown", "blue", "green", "other")
SIZES = range(0, 5)


def gs(f, domain, relation, sizes=SIZES, p=1):
    return brute_force_sensitivity(f, domain, sizes, relation, p)["sensitivity"]


def test_e1_count_brown_eyes():
    def f(x):
        return sum(r == "brown" for r in x)

    assert gs(f, COLOURS, "add_remove") == 1
    assert gs(f, COLOURS, "replace_one") == 1
    assert count_sensitivity("add_remove") == count_sensitivity("replace_one") == 1


def test_e2_histogram_of_four_colours():
    def f(x):
        return [sum(r == c for r in x) for c in COLOURS]

    assert gs(f, COLOURS, "add_remove") == 1
    # Quiz note: 2 under "modify" (replace-one); √2 in L2.
    assert gs(f, COLOURS, "replace_one") == 2
    assert gs(f, COLOURS, "replace_one", p=2) == pytest.approx(math.sqrt(2), abs=1e-12)
    assert histogram_sensitivity("add_remove") == 1
    assert histogram_sensitivity("replace_one") == 2
    assert histogram_sensitivity("replace_one", p=2) == pytest.approx(math.sqrt(2), abs=1e-12)


def test_e3_brown_eyes_and_taller_than_6ft():
    domain = list(itertools.product(("brown", "other"), (True, False)))

    def f(x):
        return [sum(e == "brown" for e, _ in x), sum(t for _, t in x)]

    assert gs(f, domain, "add_remove") == 2


def test_e4_families_in_10027_and_in_nyc():
    # Quiz: only option "c. 3" survived extraction; 2 is the correct answer.
    domain = ("10027", "10025", "outside")

    def f(x):
        return [sum(z == "10027" for z in x), sum(z in ("10027", "10025") for z in x)]

    assert gs(f, domain, "add_remove") == 2


def test_e5_families_per_nyc_zip_is_a_partition():
    domain = ("10027", "10025", "10001")

    def f(x):
        return [sum(z == c for z in x) for c in domain]

    assert gs(f, domain, "add_remove") == 1
    assert gs(f, domain, "replace_one") == 2


@pytest.mark.parametrize("n", [2, 3, 4])
def test_e6_average_age_with_public_n(n):
    # Ages 0–120, N public (fixed size, replace-one): 120/N, answer (d).
    domain = (0, 40, 120)

    def f(x):
        return sum(x) / len(x)

    assert gs(f, domain, "replace_one", sizes=[n]) == pytest.approx(120 / n, abs=1e-12)
    assert bounded_mean_sensitivity(0, 120, n) == pytest.approx(120 / n, abs=1e-12)


def test_bounded_mean_slide_formula_too_small_when_range_straddles_zero():
    # The bounded-mean slide: max(|L|,|U|)/N is wrong when L < 0 < U; |U−L|/N is right.
    n, lo, hi = 2, -1.0, 1.0
    true = gs(lambda x: sum(x) / len(x), (lo, 0.0, hi), "replace_one", sizes=[n])
    assert true == pytest.approx(bounded_mean_sensitivity(lo, hi, n), abs=1e-12)
    assert max(abs(lo), abs(hi)) / n < true


def test_bounded_sum_sensitivity_both_relations():
    lo, hi = -3.0, 5.0
    domain = (-3.0, 0.0, 5.0)

    def f(x):
        return sum(min(max(v, lo), hi) for v in x)

    assert gs(f, domain, "add_remove") == bounded_sum_sensitivity(lo, hi, "add_remove") == 5
    assert gs(f, domain, "replace_one") == bounded_sum_sensitivity(lo, hi, "replace_one") == 8


def test_add_remove_neighbours_and_distance():
    x = ("a", "b")
    nb = set(neighbours(x, ("a", "b"), "add_remove"))
    assert ("a",) in nb and ("b",) in nb and ("a", "b", "a") in nb
    assert all(distance(x, y, "add_remove") == 1 for y in nb)
    rb = set(neighbours(x, ("a", "b"), "replace_one"))
    assert rb == {("b", "b"), ("a", "a")}
    with pytest.raises(ValueError, match="relation"):
        list(neighbours(x, ("a",), "hamming"))


def median(x):
    return sorted(x)[len(x) // 2]


@pytest.mark.parametrize(("n", "zeros", "expected"), [(5, 3, 1.0), (5, 4, 0.0),
                                                       (9, 5, 1.0), (9, 6, 0.0)])
def test_e15_local_sensitivity_of_the_median(n, zeros, expected):
    # The lecture's median example: (n+1)/2 zeros and (n−1)/2 ones: LS = 1; one more zero: LS = 0.
    x = (0.0,) * zeros + (1.0,) * (n - zeros)
    assert local_sensitivity(median, x, (0.0, 0.5, 1.0), "replace_one") == expected


def test_e16_spike_function_local_sensitivity():
    # The lecture's local-sensitivity example (corrected): the slide says LS = 0 on x's neighbours, but x is itself one of
    # their neighbours, so LS = 10M there; LS = 0 only at distance ≥ 2.
    domain = (0, 1)
    x0 = (0, 1, 1)

    def f(x):
        return 10_000_000.0 if tuple(x) == x0 else 0.0

    for x in itertools.product(domain, repeat=3):
        d = distance(x, x0, "replace_one")
        ls = local_sensitivity(f, x, domain, "replace_one")
        assert ls == (10_000_000.0 if d <= 1 else 0.0), (x, d, ls)
