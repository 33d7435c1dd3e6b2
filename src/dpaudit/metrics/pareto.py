"""Privacy-utility Pareto frontier (Negoescu et al. 2023, Sec. 4: the convex hull of strategies in the direction that improves privacy or utility).

Points are strategies: x = eps* (lower is better), y = utility (higher is
better). The paper's frontier is "the convex hull of strategies in this plane,
taken in a direction that improves the privacy or the utility"; it is read here
as the upper convex hull of the non-dominated points, running from the
lowest-x point to the highest-y point. Points lying exactly on a hull edge
(collinear) count as on the frontier, so a tie never hides a strategy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["ParetoFrontier", "nondominated_mask", "pareto_frontier", "upper_hull"]


@dataclass(frozen=True)
class ParetoFrontier:
    """Masks over the input points and the frontier in increasing-x order.

    ``frontier_index`` lists input indices on the convex frontier sorted by
    (x, y); duplicated points all appear. ``step_x``/``step_y`` trace the plain
    step-shaped non-dominated frontier for plotting.
    """

    nondominated: np.ndarray
    on_frontier: np.ndarray
    frontier_index: np.ndarray
    step_x: np.ndarray
    step_y: np.ndarray


def _validate(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length ({x.size} vs {y.size})")
    return x, y


def nondominated_mask(x: ArrayLike, y: ArrayLike) -> np.ndarray:
    """True where no other point has x' <= x and y' >= y with one strict; NaN points are False.

    Exact duplicates do not dominate each other.
    """
    x, y = _validate(x, y)
    ok = np.isfinite(x) & np.isfinite(y)
    xs, ys = x[ok], y[ok]
    # quadratic, but strategy counts are in the tens to hundreds
    weakly_better = (xs[None, :] <= xs[:, None]) & (ys[None, :] >= ys[:, None])
    strictly = (xs[None, :] < xs[:, None]) | (ys[None, :] > ys[:, None])
    dominated = (weakly_better & strictly).any(axis=1)
    mask = np.zeros(x.size, dtype=bool)
    mask[np.flatnonzero(ok)] = ~dominated
    return mask


def upper_hull(x: ArrayLike, y: ArrayLike) -> np.ndarray:
    """Indices of the upper convex hull (monotone chain), left to right, collinear points kept."""
    x, y = _validate(x, y)
    order = np.lexsort((y, x))
    hull: list[int] = []
    for i in order:
        # a duplicate of the last vertex adds nothing to the geometry
        if hull and x[hull[-1]] == x[i] and y[hull[-1]] == y[i]:
            continue
        # a later point at the same x is higher (lexsort), so the lower one is not upper hull
        while hull and x[hull[-1]] == x[i]:
            hull.pop()
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            cross = (x[a] - x[o]) * (y[i] - y[o]) - (y[a] - y[o]) * (x[i] - x[o])
            if cross > 0:  # a lies strictly below the chord o -> i
                hull.pop()
            else:
                break
        hull.append(int(i))
    return np.asarray(hull, dtype=np.int64)


def pareto_frontier(x: ArrayLike, y: ArrayLike) -> ParetoFrontier:
    """Non-dominated points and their upper convex hull (x lower-better, y higher-better)."""
    x, y = _validate(x, y)
    nd = nondominated_mask(x, y)
    idx = np.flatnonzero(nd)
    on = np.zeros(x.size, dtype=bool)
    if idx.size:
        vertices = idx[upper_hull(x[idx], y[idx])]
        vx, vy = x[vertices], y[vertices]
        # restore duplicates of hull vertices that the hull skipped
        on[idx] = ((x[idx][:, None] == vx[None, :]) & (y[idx][:, None] == vy[None, :])).any(axis=1)
    front = np.flatnonzero(on)
    front = front[np.lexsort((y[front], x[front]))]
    steps = idx[np.lexsort((y[idx], x[idx]))]
    return ParetoFrontier(
        nondominated=nd,
        on_frontier=on,
        frontier_index=front,
        step_x=x[steps],
        step_y=y[steps],
    )
