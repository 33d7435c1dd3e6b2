"""Which rows every step of a DP-SGD training drew, kept compactly (issue 45).

The sampler check (``dpaudit.dp.sampler_check``) tests the rows drawn against the sampler's
claimed law, row by row, so the loop must keep every step's positions, not only the batch
sizes. ``RowLedger`` stores them as sorted index lists with delta coding: a step's sorted
positions p_1 ≤ p_2 ≤ … are kept as the gaps p_1 + 1, p_2 − p_1, … (≥ 0; a 0 is a row drawn
twice in one step), each gap a little-endian base-128 varint (7 bits a byte, the high bit
set on every byte but a value's last). A gap below 128 takes one byte, below 16,384 two.

Memory: about (rows drawn) × (bytes per gap). The issue's budget is 1 byte per row and step
or 50 MB at the Purchase-100 paper configuration (132,207 members, B = 256, 50 epochs:
25,800 steps), whichever is smaller: 1 byte per row and step would be 3.4 GB there, so the
budget is 50 MB. The ledger holds the ~6.6 million rows drawn at ~2 bytes each (gaps of
~516 on average) plus 12 bytes per step (size and offset): ~13 MB, measured by
``bench/bench_noise_check.py``. A bit-packed matrix would take 427 MB; at the default run
(1,000 rows, B = 64, 150 steps) the ledger holds 9,600 one-byte gaps.

``summary`` reads the ledger back in chunks of steps (vectorized within a chunk, one pass)
into the sufficient statistics of the tests: per step the batch size, per row its
participation count, the histogram of the gaps between a row's consecutive inclusions and of
the spells after its last one (censored at the last step), the disjoint step pairs (2k, 2k+1)
as a 2 × 2 table, rows drawn twice in one step or one epoch, and under shuffling the rows at
the same slot of consecutive epochs. Row groups (e.g. the audit twin's canary rows, the last
rows of its population) get their own statistics from the same pass.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

__all__ = ["CHUNK_ROWS", "RowLedger", "decode_varints", "encode_varints"]

# Rows decoded at once by ``summary`` (a chunk holds a few arrays of this length, ~8 bytes each).
CHUNK_ROWS = 1 << 18
_FLUSH_ROWS = 1 << 16  # positions buffered before they are encoded together
_MAX_VARINT_BYTES = 10  # 70 bits: any uint64


def _widths(v: np.ndarray) -> np.ndarray:
    """Bytes of each value's varint."""
    widths = np.ones(v.size, dtype=np.int64)
    for k in range(1, _MAX_VARINT_BYTES):
        more = v >= np.uint64(1) << np.uint64(7 * k)
        if not more.any():
            break
        widths += more
    return widths


def encode_varints(values: np.ndarray) -> bytes:
    """Little-endian base-128 varints of non-negative integers, vectorized."""
    v = np.asarray(values, dtype=np.uint64).ravel()
    if v.size == 0:
        return b""
    widths = _widths(v)
    owner = np.repeat(np.arange(v.size), widths)
    starts = np.cumsum(widths) - widths
    within = np.arange(owner.size) - starts[owner]
    out = ((v[owner] >> (np.uint64(7) * within.astype(np.uint64))) & np.uint64(0x7F)).astype(np.uint8)
    out[within < widths[owner] - 1] |= 0x80
    return out.tobytes()


def decode_varints(data: bytes | np.ndarray) -> np.ndarray:
    """The integers ``encode_varints`` wrote (int64)."""
    b = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray | memoryview) else data
    if b.size == 0:
        return np.zeros(0, dtype=np.int64)
    last = (b & 0x80) == 0
    if not last[-1]:
        raise ValueError("truncated varint stream: its last byte continues")
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    owner = np.repeat(np.arange(ends.size), ends - starts + 1)
    within = (np.arange(b.size) - starts[owner]).astype(np.uint64)
    parts = (b & 0x7F).astype(np.uint64) << (np.uint64(7) * within)
    return np.add.reduceat(parts, starts).astype(np.int64)


class RowLedger:
    """The positions (in a population of ``population`` rows) that every step drew."""

    def __init__(self, population: int):
        if int(population) < 0:
            raise ValueError(f"population must be >= 0, got {population!r}")
        self.population = int(population)
        self._data = bytearray()
        self._sizes = array("i")  # rows drawn at every flushed step
        self._offsets = array("q", [0])  # byte offset of every flushed step, and the end
        self._pending: list[np.ndarray] = []
        self._pending_rows = 0

    # ------------------------------------------------------------------ recording

    def drew(self, positions) -> None:
        """One step's positions (any order; a row drawn twice is kept twice)."""
        rows = np.asarray(positions).astype(np.int64, copy=False).ravel()
        # one reduction: a negative position read as unsigned is ≥ 2⁶³ (min and max cost 3 µs a step)
        if rows.size and rows.view(np.uint64).max() >= self.population:
            bad = int(rows[(rows < 0) | (rows >= self.population)][0])
            raise ValueError(f"the sampler drew position {bad}, outside the population of {self.population} rows")
        self._pending.append(rows)
        self._pending_rows += rows.size
        if self._pending_rows >= _FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        sizes = np.array([r.size for r in self._pending], dtype=np.int64)
        rows = np.concatenate([np.sort(r) for r in self._pending]) if sizes.sum() else np.zeros(0, np.int64)
        gaps = np.diff(rows, prepend=-1)
        starts = np.cumsum(sizes) - sizes
        nonempty = sizes > 0
        gaps[starts[nonempty]] = rows[starts[nonempty]] + 1  # each step's first gap is from −1
        widths = _widths(gaps.astype(np.uint64))
        step_bytes = np.add.reduceat(widths, starts[nonempty]) if nonempty.any() else np.zeros(0, np.int64)
        per_step = np.zeros(sizes.size, dtype=np.int64)
        per_step[nonempty] = step_bytes
        self._data += encode_varints(gaps)
        base = self._offsets[-1]
        self._offsets.extend(base + np.cumsum(per_step))
        self._sizes.extend(sizes)
        self._pending, self._pending_rows = [], 0

    # ------------------------------------------------------------------ reading

    @property
    def steps(self) -> int:
        return len(self._sizes) + len(self._pending)

    @property
    def nbytes(self) -> int:
        """Bytes the ledger holds once flushed: the varints, and per step its size and offset (int32, int64)."""
        self._flush()
        return len(self._data) + 12 * len(self._sizes)

    def sizes(self) -> np.ndarray:
        self._flush()
        return np.asarray(self._sizes, dtype=np.int64)

    def chunks(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first step, step of every position, positions) of consecutive steps, about ``chunk_rows``
        positions at a time, sorted by step then position."""
        self._flush()
        sizes = np.asarray(self._sizes, dtype=np.int64)
        offsets = np.asarray(self._offsets, dtype=np.int64)
        ends = np.cumsum(sizes)
        first = 0
        while first < sizes.size:
            done = ends[first - 1] if first else 0
            last = int(np.searchsorted(ends, done + max(1, int(chunk_rows)), side="right"))
            last = min(max(last, first + 1), sizes.size)
            gaps = decode_varints(np.frombuffer(self._data, dtype=np.uint8)[offsets[first]:offsets[last]])
            counts = sizes[first:last]
            steps = np.repeat(np.arange(first, last, dtype=np.int64), counts)
            total = np.cumsum(gaps)
            nonempty = counts > 0
            # a running sum restarted at every step: position = (Σ of the step's gaps so far) − 1
            base = (total - gaps)[(np.cumsum(counts) - counts)[nonempty]]
            yield first, steps, total - np.repeat(base, counts[nonempty]) - 1
            first = last

    def matrix(self) -> np.ndarray:
        """[steps, population] inclusion counts (small ledgers only: tests and oracles)."""
        out = np.zeros((self.steps, self.population), dtype=np.int64)
        for _, steps, rows in self.chunks():
            np.add.at(out, (steps, rows), 1)
        return out

    def summary(self, groups: Mapping[str, tuple[int, int]] | None = None, *, steps_per_epoch: int = 1,
                chunk_rows: int = CHUNK_ROWS) -> dict[str, dict[str, Any]]:
        """Per group of rows [start, stop) (default: all rows) the sufficient statistics of
        ``dpaudit.dp.sampler_check`` (module docstring), in one pass over the ledger."""
        groups = dict(groups or {"all rows": (0, self.population)})
        for name, (start, stop) in groups.items():
            if not 0 <= int(start) <= int(stop) <= self.population:
                raise ValueError(f"row group {name!r} = [{start}, {stop}) is not inside the population "
                                 f"[0, {self.population})")
        t_total = self.steps
        spe = max(1, int(steps_per_epoch))
        last_seen = np.full(self.population, -1, dtype=np.int64)
        counts = np.zeros(self.population, dtype=np.int64)
        out = {name: {"rows": int(stop - start), "steps": t_total, "sizes": np.zeros(t_total, np.int64),
                      "gap_hist": np.zeros(max(t_total, 1), np.int64), "duplicates_in_step": 0,
                      "duplicates_in_epoch": 0, "pairs_first": 0, "pairs_second": 0, "pairs_both": 0,
                      "same_slot": 0, "consecutive_epochs": 0}
               for name, (start, stop) in groups.items()}
        pair_limit = 2 * (t_total // 2)  # steps 0 … pair_limit − 1 form the disjoint pairs (2k, 2k + 1)
        for _, steps, rows in self.chunks(chunk_rows):
            order = np.argsort(rows, kind="stable")  # by row, then step (the chunk is sorted by step)
            r, s = rows[order], steps[order]
            same = np.concatenate(([False], r[1:] == r[:-1]))
            prev = np.where(same, np.concatenate(([0], s[:-1])), last_seen[r])
            lastmask = np.concatenate((r[1:] != r[:-1], [True])) if r.size else r.astype(bool)
            last_seen[r[lastmask]] = s[lastmask]
            repeat = (prev == s) & (prev >= 0)  # the same row again in the same step
            counts += np.bincount(r[~repeat], minlength=self.population)
            gap = s - prev
            seen = (prev >= 0) & ~repeat
            in_epoch = seen & (prev // spe == s // spe)
            next_epoch = seen & (prev // spe == s // spe - 1)
            for name, (start, stop) in groups.items():
                g = out[name]
                member = (r >= start) & (r < stop)
                keep = member & ~repeat
                g["sizes"] += np.bincount(s[member], minlength=t_total)[:t_total]
                g["duplicates_in_step"] += int(np.count_nonzero(member & repeat))
                g["duplicates_in_epoch"] += int(np.count_nonzero(member & in_epoch))
                g["gap_hist"] += np.bincount(gap[member & seen], minlength=g["gap_hist"].size)[:g["gap_hist"].size]
                g["pairs_first"] += int(np.count_nonzero(keep & (s % 2 == 0) & (s < pair_limit)))
                g["pairs_second"] += int(np.count_nonzero(keep & (s % 2 == 1)))
                g["pairs_both"] += int(np.count_nonzero(keep & seen & (s % 2 == 1) & (gap == 1)))
                g["consecutive_epochs"] += int(np.count_nonzero(member & next_epoch))
                g["same_slot"] += int(np.count_nonzero(member & next_epoch & (gap == spe)))
        for name, (start, stop) in groups.items():
            g = out[name]
            g["counts"] = counts[start:stop].copy()
            tail = last_seen[start:stop]
            g["censor_hist"] = np.bincount(t_total - 1 - tail[tail >= 0], minlength=max(t_total, 1))
            g["pairs"] = int(stop - start) * (t_total // 2)
            g["steps_per_epoch"] = spe
        return out
