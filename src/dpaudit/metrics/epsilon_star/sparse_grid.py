"""Eq. 7 on the quantile grids of two fitted Normals, computing the Normal CDF only where it decides.

The parametric estimator's rates on a grid of 10^6 levels cost two ``ndtr`` calls per
level, yet ε* and m1..m4 depend on few of them: the filter's two ends and the points
near each term's maximum. Along a grid the other set's standardized thresholds x are
monotone (monotone levels and rounded operations), so A = ndtr(x) and B = ndtr(−x)
are monotone too, up to ndtr's wobble: its computed values are not monotone to the
last bit, but never by more than NDTR_WOBBLE relative. So the values at a segment's two
ends bound A and B on the whole segment: they settle which segments the filter keeps
whole or drops whole, and bound each term there; only the undecided segments and those
whose bound can beat a term's running maximum are computed, by the operations of the
whole-grid form on the same numbers. The values returned are therefore the same floats
(``normal_rates`` + ``epsilon_star_from_rates``, the fallback and the tests' oracle).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

# scipy's ndtr wobbles around the increasing Φ: for u <= v, ndtr(u) <= ndtr(v)·(1 + 5.4e-13)
# at worst (measured on [-38, 0]; the rounding of x²/2 in the tail's exp grows with x²), and
# ndtr(u) <= NDTR_FLOOR·(1 + that) once ndtr(v) < NDTR_FLOOR. Bounds from a segment's end values
# allow NDTR_WOBBLE, over 1000x that (tests/unit/test_epsilon_star_bootstrap.py checks it).
NDTR_WOBBLE = 1e-9
NDTR_FLOOR = 1e-300
# the sparse forms need the filter far above the floor (a kept rate is then a normal float well
# clear of it); a smaller filter takes the whole-grid form
SPARSE_MIN_DELTA = 1e-200
# grid points per segment of the point estimate's grids (10^6 levels each)
POINT_CHUNK = 1024
# bootstrap replicates: rounds of one ratio each (by decreasing ceiling) before the rest at once
SEQUENTIAL_ROUNDS = 12

# (fpr, fnr, tnr, tpr) on the member grid (own levels q, q_c; the non-members' A, B) and on the
# non-member grid (the members' A, B), as ``normal_rates`` lays them out
_RATES = (("B", "q", "A", "q_c"), ("q_c", "A", "q", "B"))
# eq. 7's terms m1..m4 as (numerator rate, denominator rate), by index into (fpr, fnr, tnr, tpr)
_TERMS = ((3, 0), (2, 1), (1, 2), (0, 3))


def wobble_bounds(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ndtr on a segment from its end values a, b: by NDTR_WOBBLE, ndtr of an argument
    between the ends' is within a factor 1 ± NDTR_WOBBLE of [min, max] (rounding of the factors is
    far below their slack). The lower bound holds where min(a, b) is a normal float above the floor,
    as at every kept end (above a filter >= SPARSE_MIN_DELTA); where it is not, it is below the
    filter and 1 − it rounds to 1, so it decides nothing."""
    low = np.minimum(a, b) * (1.0 - 2.0 * NDTR_WOBBLE)
    high = np.maximum(np.maximum(a, b), NDTR_FLOOR) * (1.0 + 2.0 * NDTR_WOBBLE)
    return low, high


def standardized_thresholds(z: np.ndarray, descending: bool, mu_tr, sd_tr, mu_pop, sd_pop,
                out: np.ndarray) -> np.ndarray:
    """The other set's standardized thresholds on one grid, into ``out``, by the same operations
    in the same order as (mu_tr + sd_tr z − mu_pop) / sd_pop (member grid) and
    (mu_tr − mu_pop − sd_pop z) / sd_tr (non-member grid)."""
    if descending:
        np.multiply(z, sd_pop, out=out)
        np.subtract(mu_tr - mu_pop, out, out=out)
        return np.divide(out, sd_tr, out=out)
    np.multiply(z, sd_tr, out=out)
    np.add(out, mu_tr, out=out)
    np.subtract(out, mu_pop, out=out)
    return np.divide(out, sd_pop, out=out)


class GridExtremes(NamedTuple):
    """What ``epsilon_star_from_rates`` reads off the kept thresholds of both grids."""

    n_kept: int
    maxima: tuple[float, float, float, float]  # of m1..m4 (NaN if nothing is kept)
    rates: tuple[float, float, float, float]  # (fpr, fnr, tnr, tpr) at the largest term's first argmax
    threshold: float  # there
    threshold_min: float  # over the kept thresholds
    threshold_max: float


class _Grid:
    """One quantile grid: thresholds c = mu + sd·z on the own range, x = (c − mu_other) / sd_other."""

    def __init__(self, own: tuple[float, float], other: tuple[float, float], q, q_c, z, span, lower):
        self.own, self.other, self.q, self.q_c, self.z, self.lower = own, other, q, q_c, z, lower
        self.starts = np.arange(span[0], span[1], POINT_CHUNK)
        self.ends = np.append(self.starts[1:], span[1])
        self.cdf: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # segment -> (A, B) on it

    def thresholds(self, at) -> np.ndarray:
        return self.own[0] + self.own[1] * self.z[at]  # as normal_rates: c = mu + sd·z

    def tails(self, at) -> tuple[np.ndarray, np.ndarray]:
        x = (self.thresholds(at) - self.other[0]) / self.other[1]
        return special.ndtr(x), special.ndtr(-x)

    def segment_cdf(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        if s not in self.cdf:
            self.cdf[s] = self.tails(slice(int(self.starts[s]), int(self.ends[s])))
        return self.cdf[s]

    def kept_run(self) -> tuple[int, int] | None:
        """The kept index range [first, last) (first == last if none); None if the kept points are
        not one run. Leaves per-segment bounds of A and B on the run in ``self.bounds``."""
        starts, ends, lower = self.starts, self.ends, self.lower
        if starts.size == 0:
            return 0, 0
        a, b = self.tails(np.concatenate((starts, ends - 1)))
        m = starts.size
        a_lo, a_hi = wobble_bounds(a[:m], a[m:])
        b_lo, b_hi = wobble_bounds(b[:m], b[m:])
        kept = np.where((a_lo > lower) & (b_lo > lower), 1, np.where((a_hi <= lower) | (b_hi <= lower), 0, -1))
        lead, trail = np.zeros(m, dtype=np.int64), ends - starts  # kept part of each segment
        for s in np.flatnonzero(kept < 0):  # the few segments the bounds leave undecided
            cdf_a, cdf_b = self.segment_cdf(int(s))
            inside = np.flatnonzero((cdf_a > lower) & (cdf_b > lower))
            kept[s] = inside.size > 0
            if inside.size:
                if inside.size != inside[-1] + 1 - inside[0]:
                    return None
                lead[s], trail[s] = inside[0], inside[-1] + 1
        ids = np.flatnonzero(kept)
        if ids.size == 0:
            return 0, 0
        head, tail = int(ids[0]), int(ids[-1])
        # one run: no dropped segment inside it, and every boundary inside it crossed by kept points
        if (ids.size != tail + 1 - head or (lead[head + 1 : tail + 1] > 0).any()
                or (trail[head:tail] < (ends - starts)[head:tail]).any()):
            return None
        run = slice(head, tail + 1)
        self.head = head
        self.run_starts, self.run_ends = starts[run] + lead[run], starts[run] + trail[run]
        # A and B at the run segments' ends: a trimmed end lies in a computed segment
        a_start, b_start, a_end, b_end = a[:m][run], b[:m][run], a[m:][run], b[m:][run]
        if lead[head]:
            cdf_a, cdf_b = self.segment_cdf(head)
            a_start[0], b_start[0] = cdf_a[lead[head]], cdf_b[lead[head]]
        if trail[tail] < ends[tail] - starts[tail]:
            cdf_a, cdf_b = self.segment_cdf(tail)
            a_end[-1], b_end[-1] = cdf_a[trail[tail] - 1], cdf_b[trail[tail] - 1]
        self.bounds = {"A": wobble_bounds(a_start, a_end), "B": wobble_bounds(b_start, b_end)}
        return int(self.run_starts[0]), int(self.run_ends[-1])

    def rate_bounds(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bound of a rate on each run segment (the levels are monotone: exact)."""
        if name in self.bounds:
            return self.bounds[name]
        levels = self.q if name == "q" else self.q_c
        first, last = levels[self.run_starts], levels[self.run_ends - 1]
        return np.minimum(first, last), np.maximum(first, last)

    def rate(self, name: str, s: int) -> np.ndarray:
        """A rate on run segment s (trimmed to the run)."""
        k = slice(int(self.run_starts[s]), int(self.run_ends[s]))
        if name in ("q", "q_c"):
            return (self.q if name == "q" else self.q_c)[k]
        segment = self.head + s
        cdf = self.segment_cdf(segment)[0 if name == "A" else 1]
        offset = int(self.starts[segment])
        return cdf[k.start - offset : k.stop - offset]


def sparse_normal_extremes(
    mu_tr: float, sd_tr: float, mu_pop: float, sd_pop: float, q: np.ndarray, q_c: np.ndarray, z: np.ndarray,
    delta: float, lower: float,
) -> GridExtremes | None:
    """eq. 7's extremes over the kept thresholds of ``normal_rates`` with filter (lower, 1 − lower):
    finite fit with positive sds, q, q_c and z monotone (the caller checks z), lower >=
    SPARSE_MIN_DELTA. None when a grid's kept points are not one run (the caller falls back)."""
    # own filter q > lower and q_c > lower: an index range, as q rises and q_c falls
    first = int(np.searchsorted(q, lower, side="right"))
    span = (first, max(first, q_c.size - int(np.searchsorted(q_c[::-1], lower, side="right"))))
    grids = (_Grid((mu_tr, sd_tr), (mu_pop, sd_pop), q, q_c, z, span, lower),
             _Grid((mu_pop, sd_pop), (mu_tr, sd_tr), q, q_c, z, span, lower))
    runs = [grid.kept_run() for grid in grids]
    if None in runs:
        return None
    n_kept = sum(last - first for first, last in runs)
    if n_kept == 0:
        nan = float("nan")
        return GridExtremes(0, (nan, nan, nan, nan), (nan, nan, nan, nan), nan, nan, nan)
    live = [g for g, (first, last) in enumerate(runs) if last > first]
    maxima, where = [], []
    for numerator, denominator in _TERMS:
        value, at = _term_max(grids, live, numerator, denominator, delta)
        maxima.append(value)
        where.append(at)
    best = int(np.argmax(maxima))
    g, s, i = where[best]
    rates = tuple(float(grids[g].rate(name, s)[i]) for name in _RATES[g])
    ends = [grids[g].thresholds(np.array([runs[g][0], runs[g][1] - 1])) for g in live]
    threshold = grids[g].thresholds(np.array([int(grids[g].run_starts[s]) + i]))[0]
    return GridExtremes(n_kept, tuple(maxima), rates, float(threshold),  # type: ignore[arg-type]
                        float(min(e[0] for e in ends)), float(max(e[1] for e in ends)))


def _term_max(grids, live, numerator: int, denominator: int, delta: float) -> tuple[float, tuple[int, int, int]]:
    """Largest value of one term over the kept points and its first position (grid, run segment,
    offset) in the member-then-non-member order, computing only segments whose ceiling reaches it."""
    ceilings, owners = [], []
    for g in live:
        grid = grids[g]
        names = _RATES[g]
        num_hi = grid.rate_bounds(names[numerator])[1] - delta  # fl(· − δ) is monotone
        den_lo, den_hi = grid.rate_bounds(names[denominator])
        # a rounded quotient is monotone in each operand; which denominator bound caps it depends
        # on the numerator's sign (every kept denominator exceeds the filter > 0)
        ceilings.append(np.where(num_hi >= 0, num_hi / den_lo, num_hi / den_hi))
        owners.append(np.stack([np.full(num_hi.size, g), np.arange(num_hi.size)], axis=1))
    ceiling, owner = np.concatenate(ceilings), np.concatenate(owners)
    best, at = -np.inf, (0, 0, 0)
    for flat in np.argsort(-ceiling, kind="stable"):
        if ceiling[flat] < best:  # no value left can reach the maximum (equal ones may come first)
            break
        g, s = (int(v) for v in owner[flat])
        names = _RATES[g]
        values = (grids[g].rate(names[numerator], s) - delta) / grids[g].rate(names[denominator], s)
        i = int(np.argmax(values))
        if values[i] > best or (values[i] == best and (g, s, i) < at):
            best, at = float(values[i]), (g, s, i)
    return best, at


# ---------------------------------------------------------------------------
# bootstrap replicates: one grid, many fits at once
# ---------------------------------------------------------------------------


class _Replicates:
    """One quantile grid of the bootstrap (``bootstrap._grids``) for many finite fits at once.

    Each replicate's grid is cut into the CHUNKs plus its sign change p of x (one segment per
    chunk and one more, empty when p falls on a chunk boundary). small = ndtr(−|x|) of the
    computed segments are rows of ``small`` (padded to a chunk); big = 1 − small is recomputed.
    """

    def __init__(self, z, descending, fits, chunk):
        self.z, self.descending, self.fits, self.chunk = z, descending, fits, chunk
        n, count = z.size, fits[0].size
        chunks = np.arange(0, n, chunk)
        at_chunks = self.x(np.broadcast_to(chunks, (count, chunks.size)), np.arange(count))
        # chunks that start before the sign change (x monotone: a prefix), then p in the last one
        before = ((at_chunks >= 0) if descending else (at_chunks < 0)).sum(axis=1)
        self.p = np.zeros(count, dtype=np.int64)
        rows = np.flatnonzero(before)
        first = chunks[before[rows] - 1]
        at = first[:, None] + np.arange(chunk)
        x = self.x(np.minimum(at, n - 1), rows)
        self.p[rows] = first + (((x >= 0) if descending else (x < 0)) & (at < n)).sum(axis=1)
        every_chunk = np.broadcast_to(chunks, (count, chunks.size))
        self.starts = np.sort(np.concatenate((every_chunk, self.p[:, None]), axis=1), axis=1)
        self.ends = np.concatenate((self.starts[:, 1:], np.full((count, 1), n)), axis=1)
        self.upper = (self.starts < self.p[:, None]) if descending else (self.starts >= self.p[:, None])
        self.row = np.full(self.starts.shape, -1)  # segment -> its row in ``small``, once computed
        self.rows = 0  # rows in use; the array grows by doubling
        self.small = np.empty((16 * count, chunk))

    def x(self, at: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """x at grid indices ``at`` (one row per replicate in ``rows``), by the operations of
        ``standardized_thresholds`` (in place on the gathered z)."""
        mu_tr, sd_tr, mu_pop, sd_pop = (a[rows][:, None] for a in self.fits)
        x = self.z[at]
        return standardized_thresholds(x, self.descending, mu_tr, sd_tr, mu_pop, sd_pop, out=x)

    def tail(self, at: np.ndarray, rows: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """small = ndtr(−|x|) as ``bootstrap._kept_run``: ndtr(x) below the sign change, ndtr(−x) above."""
        x = self.x(at, rows)
        np.negative(x, out=x, where=np.broadcast_to(upper, x.shape))
        return special.ndtr(x, out=x)

    def at(self, rows: np.ndarray, segments: np.ndarray) -> np.ndarray:
        """Grid indices of whole segments, padded to a chunk (the padding repeats or passes the end)."""
        return np.minimum(self.starts[rows, segments][:, None] + np.arange(self.chunk), self.z.size - 1)

    def compute(self, rows: np.ndarray, segments: np.ndarray) -> None:
        """small on whole segments (each (replicate, segment) pair once)."""
        pending = self.row[rows, segments] < 0
        pairs = np.unique(np.stack([rows[pending], segments[pending]]), axis=1)
        if not pairs.size:
            return
        rows, segments = pairs
        new = slice(self.rows, self.rows + rows.size)
        if new.stop > self.small.shape[0]:
            grown = np.empty((max(2 * self.small.shape[0], new.stop), self.chunk))
            grown[: self.rows] = self.small[: self.rows]
            self.small = grown
        self.small[new] = self.tail(self.at(rows, segments), rows, self.upper[rows, segments][:, None])
        self.row[rows, segments] = np.arange(new.start, new.stop)
        self.rows = new.stop


def replicate_grid_best(
    z: np.ndarray, descending: bool, fits: tuple[np.ndarray, ...], rates: tuple[np.ndarray, ...],
    bounds: tuple[np.ndarray, ...], delta: float, chunk: int,
) -> np.ndarray:
    """``bootstrap._monotone_grid_best`` of one grid for every fit (finite, positive sds; z
    non-decreasing; δ >= SPARSE_MIN_DELTA): max(1, largest kept ratio), −inf where nothing is
    kept, NaN where the kept points are not one run (for the caller's whole-grid path).

    A segment's tails are computed only when its end values leave its filter undecided (the
    run's ends) or when a ratio's ceiling on it beats the replicate's running maximum. Every value
    compared comes from the operations of the whole-grid path on the same numbers.
    """
    grid = _Replicates(z, descending, fits, chunk)
    starts, ends, upper = grid.starts, grid.ends, grid.upper
    count, width = starts.shape
    length = ends - starts
    nonempty = length > 0
    replicate = np.broadcast_to(np.arange(count)[:, None], starts.shape)
    s_first = grid.tail(np.minimum(starts, z.size - 1), np.arange(count), upper)  # (empty segments: ignored)
    s_last = grid.tail(np.maximum(ends - 1, 0), np.arange(count), upper)
    s_min, s_max = wobble_bounds(s_first, s_last)
    # kept: small > δ and big > δ; big = fl(1 − small) is non-increasing in small
    kept = np.where((s_min > delta) & (1.0 - s_max > delta), 1,
                    np.where((s_max <= delta) | (1.0 - s_min <= delta), 0, -1))
    kept[~nonempty] = 0
    lead, trail = np.zeros(starts.shape, dtype=np.int64), length.copy()  # kept part of each segment
    undecided = kept < 0
    grid.compute(replicate[undecided], np.nonzero(undecided)[1])
    rows = grid.row[undecided]
    inside = ((grid.small[rows] > delta) & (1.0 - grid.small[rows] > delta)
              & (np.arange(chunk) < length[undecided][:, None]))
    any_inside = inside.any(axis=1)
    lead[undecided] = inside.argmax(axis=1)
    trail[undecided] = chunk - inside[:, ::-1].argmax(axis=1)
    gave_up = np.zeros(count, dtype=bool)
    np.logical_or.at(gave_up, replicate[undecided],
                     any_inside & (inside.sum(axis=1) != trail[undecided] - lead[undecided]))
    kept[undecided] = any_inside
    # one run per replicate: no dropped segment inside it, every boundary inside it crossed
    is_kept = kept == 1
    has_run = is_kept.any(axis=1)
    head = is_kept.argmax(axis=1)
    tail = width - 1 - is_kept[:, ::-1].argmax(axis=1)
    position = np.arange(width)
    in_run = (position >= head[:, None]) & (position <= tail[:, None]) & has_run[:, None] & nonempty
    gave_up |= (in_run & (~is_kept | ((position > head[:, None]) & (lead > 0))
                          | ((position < tail[:, None]) & (trail < length)))).any(axis=1)
    in_run &= ~gave_up[:, None]
    run_start, run_end = starts + lead, starts + trail
    # small at the run segments' ends: a trimmed end lies in a computed segment
    trimmed = in_run & (lead > 0)
    s_first[trimmed] = grid.small[grid.row[trimmed], lead[trimmed]]
    trimmed = in_run & (trail < length)
    s_last[trimmed] = grid.small[grid.row[trimmed], trail[trimmed] - 1]
    s_min, s_max = wobble_bounds(s_first, s_last)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # outside the runs: masked below
        ceiling = ratio_ceilings(s_min, s_max, upper, np.minimum(starts, z.size - 1) // chunk, bounds, delta)
    ceiling[:, ~in_run] = -np.inf
    # each replicate's ratios by decreasing ceiling, one per round while the next ceiling beats the
    # replicate's running maximum (the loop of _monotone_grid_best); after SEQUENTIAL_ROUNDS, every
    # ratio whose ceiling still beats it at once (evaluating more than needed changes no maximum)
    flat = ceiling.transpose(1, 0, 2).reshape(count, -1)
    best, active = np.ones(count), np.arange(count)
    for _ in range(SEQUENTIAL_ROUNDS):
        top = flat[active].argmax(axis=1)
        beats = flat[active, top] > best[active]
        active, top = active[beats], top[beats]
        if not active.size:
            break
        which, segment = np.divmod(top, width)
        _evaluate(grid, rates, delta, best, which, active, segment, run_start, run_end)
        flat[active, top] = -np.inf
    else:
        rows, top = np.nonzero(flat[active] > best[active, None])
        which, segment = np.divmod(top, width)
        _evaluate(grid, rates, delta, best, which, active[rows], segment, run_start, run_end)
    return np.where(gave_up, np.nan, np.where(has_run, best, -np.inf))


def ratio_ceilings(s_min: np.ndarray, s_max: np.ndarray, upper: np.ndarray, chunk: np.ndarray,
                   bounds: tuple[np.ndarray, ...], delta: float) -> np.ndarray:
    """(4, *segments) upper bounds of eq. 7's four ratios on segments of a bootstrap grid from
    the bounds [s_min, s_max] of small = ndtr(−|x|) on each, its side of the sign change of x
    (``upper``: x >= 0, where small is the tail) and its CHUNK's bounds of the own rates
    (``bootstrap._grids``). At kept points numerators are positive and denominators too, and a
    rounded quotient or difference is monotone in each operand (see ``bootstrap._ceilings``)."""
    big_min, big_max = 1.0 - s_max, 1.0 - s_min  # big = fl(1 − small) is non-increasing in small
    t_min, b_min = np.where(upper, s_min, big_min), np.where(upper, big_min, s_min)
    t_max, b_max = np.where(upper, s_max, big_max), np.where(upper, big_max, s_max)
    lo_min, hi_min, lo_d_max, hi_d_max = (a[chunk] for a in bounds)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # ∞ and NaN bound nothing away
        return np.stack([hi_d_max / t_min, (b_max - delta) / lo_min, lo_d_max / b_min, (t_max - delta) / hi_min])


def _evaluate(grid: _Replicates, rates, delta, best, which, rows, segments, run_start, run_end) -> None:
    """Raise ``best`` of each replicate to ratio ``which`` on its run segment, computed by the
    operations of ``bootstrap._segment_max`` (m1..m4 of the member grid; m2, m1, m4, m3 of the
    non-member grid)."""
    if not rows.size:
        return
    grid.compute(rows, segments)
    for k in np.unique(which):  # one ratio at a time: only the operations of _segment_max
        pick = which == k
        r, segment = rows[pick], segments[pick]
        at, small = grid.at(r, segment), grid.small[grid.row[r, segment]]
        big = 1.0 - small  # as stored by _kept_run: fl(1 − small)
        upper = grid.upper[r, segment][:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # outside the run: masked below
            if k == 0:
                ratio = rates[3][at] / np.where(upper, small, big)
            elif k == 1:
                ratio = (np.where(upper, big, small) - delta) / rates[0][at]
            elif k == 2:
                ratio = rates[2][at] / np.where(upper, big, small)
            else:
                ratio = (np.where(upper, small, big) - delta) / rates[1][at]
        in_run = (at >= run_start[r, segment][:, None]) & (at < run_end[r, segment][:, None])
        np.maximum.at(best, r, np.where(in_run, ratio, -np.inf).max(axis=1))
