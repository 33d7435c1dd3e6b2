"""Sensitivity: analytic values per query type and a brute-force checker (Geambasu's DP lecture: sensitivity).

Neighbouring relations are named explicitly, never "Hamming"/"L1" (the slides and
libraries use those words the other way round):

- ``"add_remove"``: x′ is x with one record added or removed;
- ``"replace_one"``: x′ is x with one record replaced by another (same size).

Datasets in the brute-force helpers are tuples of records (order kept, so
non-symmetric queries are handled too); a query maps a dataset to a scalar or a
vector, and sensitivities are measured in the L1 or L2 norm (``p``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence

import numpy as np

__all__ = [
    "RELATIONS",
    "bounded_mean_sensitivity",
    "bounded_sum_sensitivity",
    "brute_force_sensitivity",
    "count_sensitivity",
    "datasets",
    "distance",
    "histogram_sensitivity",
    "local_sensitivity",
    "neighbours",
]

RELATIONS = ("add_remove", "replace_one")


def _check_relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    return relation


# ---------------------------------------------------------------- analytic values


def count_sensitivity(relation: str = "add_remove") -> float:
    """A counting query moves by at most 1 under either relation."""
    _check_relation(relation)
    return 1.0


def histogram_sensitivity(relation: str = "add_remove", p: int = 1) -> float:
    """Disjoint-bin counts: 1 under add/remove; a replaced record leaves one bin and
    enters another, so 2 (L1) or √2 (L2) under replace-one."""
    _check_relation(relation)
    if relation == "add_remove":
        return 1.0
    return 2.0 if p == 1 else math.sqrt(2.0)


def bounded_sum_sensitivity(lower: float, upper: float, relation: str = "add_remove") -> float:
    """Sum of values clamped to [L, U]: max(|L|,|U|) add/remove, |U−L| replace-one."""
    _check_relation(relation)
    if relation == "add_remove":
        return float(max(abs(lower), abs(upper)))
    return float(abs(upper - lower))


def bounded_mean_sensitivity(lower: float, upper: float, n: int) -> float:
    """Mean of n values in [L, U] with n public (replace-one): |U−L|/n.

    The slides give max(|L|,|U|)/n, which equals this only when L = 0 or U = 0 and
    is too small when L < 0 < U (the lecture's bounded-mean slide).
    """
    return float(abs(upper - lower)) / n


# ---------------------------------------------------------------- brute force


def datasets(domain: Sequence[Hashable], sizes: Iterable[int]) -> Iterable[tuple]:
    """Every dataset (tuple of records) over ``domain`` with a size in ``sizes``."""
    for n in sizes:
        yield from itertools.product(domain, repeat=n)


def neighbours(x: tuple, domain: Sequence[Hashable], relation: str) -> Iterable[tuple]:
    """Every x′ ~ x under ``relation`` (insertions at every position, so ordered
    queries see every neighbour)."""
    _check_relation(relation)
    x = tuple(x)
    if relation == "add_remove":
        for i in range(len(x)):
            yield x[:i] + x[i + 1:]
        for i in range(len(x) + 1):
            for v in domain:
                yield x[:i] + (v,) + x[i:]
    else:
        for i in range(len(x)):
            for v in domain:
                if v != x[i]:
                    yield x[:i] + (v,) + x[i + 1:]


def _norm(a, b, p) -> float:
    diff = np.atleast_1d(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return float(np.linalg.norm(diff, ord=p))


def local_sensitivity(f: Callable, x: tuple, domain: Sequence[Hashable],
                      relation: str = "add_remove", p: int = 1) -> float:
    """LS_f(x) = max over x′ ~ x of ‖f(x) − f(x′)‖_p, for this one x.

    Calibrating noise to this is not DP (Geambasu's DP lecture, local sensitivity): the scale itself leaks x.
    """
    fx = f(tuple(x))
    return max((_norm(fx, f(y), p) for y in neighbours(x, domain, relation)), default=0.0)


def brute_force_sensitivity(f: Callable, domain: Sequence[Hashable], sizes: Iterable[int],
                            relation: str = "add_remove", p: int = 1) -> dict:
    """Global sensitivity of ``f`` over every dataset with a size in ``sizes``.

    Under add/remove only the removals are enumerated: every addition pair is a
    removal pair seen from the larger dataset, so the pairs with the larger
    dataset within ``sizes`` are all covered (a neighbour of size max+1 is not).
    Returns the sensitivity and one pair that attains it.
    """
    _check_relation(relation)
    sizes = sorted(set(sizes))
    cache: dict[tuple, object] = {}

    def value(d):
        if d not in cache:
            cache[d] = f(d)
        return cache[d]

    best, arg = 0.0, None
    for x in datasets(domain, sizes):
        if relation == "add_remove":
            if len(x) == 0 or (len(x) - 1) not in sizes:
                continue
            pairs = (x[:i] + x[i + 1:] for i in range(len(x)))
        else:
            pairs = neighbours(x, domain, relation)
        fx = value(x)
        for y in pairs:
            d = _norm(fx, value(y), p)
            if d > best:
                best, arg = d, (x, y)
    return {"sensitivity": best, "pair": arg}


def distance(x: tuple, y: tuple, relation: str = "replace_one") -> int:
    """Neighbour-graph distance between two datasets.

    replace-one: positions that differ (same size only); add/remove: size of the
    multiset symmetric difference (order is ignored).
    """
    _check_relation(relation)
    if relation == "replace_one":
        if len(x) != len(y):
            raise ValueError("replace-one distance needs datasets of equal size")
        return sum(a != b for a, b in zip(x, y, strict=True))
    from collections import Counter

    cx, cy = Counter(x), Counter(y)
    return sum(((cx - cy) + (cy - cx)).values())
