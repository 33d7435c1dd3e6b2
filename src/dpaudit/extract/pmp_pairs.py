"""What Recipes A and B of the pmp family need from the per-example gradients (Lowy et al. 2024).

``extract_per_example`` computes the parent set X's per-example gradients at the final
weights and at every checkpoint (in numpy, ``dpaudit.extract.dense_model``) and keeps only this
(``pmp_pairs.parquet``, issue 23: ~15x smaller than the float32 vectors it replaces);
``metric_pmp`` reads it. Numpy only: both jobs import it.

One row per example of X (X's order): ``example_id``, ``is_member`` and

* Recipe A (one full-batch step at the final weights needs every pair's distance, 4n²
  values, more than the vectors when n > P; above ``metrics.pmp.recipe_a_exact_max`` the
  drawn pairs' distances and the largest distance, ``clipped_pair_distances`` and
  ``max_clipped_distance``): the gradient in factors. A Dense layer's
  per-example kernel gradient is the outer product of its input a and its bias gradient
  δ, so ⟨g_i, g_j⟩ = Σ_l (⟨a_li, a_lj⟩ + 1)·⟨δ_li, δ_lj⟩. ``layer_inputs`` (float32, the
  layers' inputs concatenated, from a forward pass), ``layer_deltas`` (float32, the bias
  gradients, ∂loss/∂pre-activation) and ``grad_norm`` (float64, the whole vector's norm,
  exact from the float64 factors) give the metric the clipped distances
  (``clipped_distances``). Equal to the distances of the vectors up to float32 rounding
  (see ``docs/architecture.md``).
* Recipe B (the whole transcript): per target ``chi_sum`` = Σ_k T_k χ_k(x, x') over the
  checkpoints for each of its drawn partners (``dpaudit.extract.pmp_partners``: block-shared
  draws; the count a pilot chose, its options and seed are in the metadata), in float64 (null
  without checkpoints). The extraction computes it from each checkpoint's Dense-layer factors
  (``sized_trajectory_chi_sums`` over ``trajectory_chi_sums_from_factors``: a float32 Gram block
  per block of targets, never a 2n × P matrix); ``trajectory_chi_sums`` is the same sum from the
  vectors, which ``dpaudit.metrics.pmp.dpsgd.recipe_b_trajectory`` uses (and may project).

Floats are written with Parquet's byte-stream-split encoding (zstd compresses the
exponent bytes apart from the mantissas).

The schema's metadata (``METADATA_KEY``, JSON) holds the layer sizes, the steps each
checkpoint stands for and the options the pairs depend on (partner count and seed,
projection, clip norm, noise multiplier, parent set); ``metric_pmp`` refuses a file whose
options differ from its own. A run the recipes do not apply to gets the schema with no rows.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpaudit.extract.pmp_partners import (
    CHI_DTYPE,
    PARTNER_BLOCK,
    PILOT_PARTNERS,
    block_inner_products,
    choose_partner_count,
    draw_partners,
    partner_blocks,
    partners_drawn,
)
from dpaudit.io import atomic_path, reading

__all__ = ["METADATA_KEY", "clip_rows", "clipped_distances", "clipped_factor_views", "sized_trajectory_chi_sums",
           "clipped_pair_distances", "draw_partners", "factor_norms_sq", "norms_sq",
           "max_clipped_distance",
           "factor_pair_inner_products", "projection_matrix", "project_rows",
           "read_pmp_pairs", "replace_one_chi", "trajectory_chi_sums", "trajectory_chi_sums_from_factors",
           "write_pmp_pairs"]

METADATA_KEY = b"dpaudit.pmp_pairs"
FLOAT_COLUMNS = ("grad_norm", "layer_inputs", "layer_deltas", "chi_sum")


def clip_rows(gradients: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """clip_C(g) = g·min(1, C/‖g‖) row-wise (float64), and the clipped norms.

    Scales a float64 copy in place (one 2n × P float64 matrix at a time, not two)."""
    g = np.array(gradients, dtype=np.float64)
    norms = np.linalg.norm(g, axis=1)
    factor, _ = _clip_scales(norms, clip)
    g *= factor[:, None]
    return g, norms * factor


def projection_matrix(n_columns: int, dim: int, seed: int) -> np.ndarray | None:
    """Seeded Gaussian JL matrix (E‖xA‖² = ‖x‖²), or None when ``n_columns`` ≤ ``dim`` (or dim = 0)."""
    if dim <= 0 or n_columns <= dim:
        return None
    return np.random.default_rng(seed).standard_normal((n_columns, dim)) / math.sqrt(dim)


def project_rows(rows: np.ndarray, matrix: np.ndarray | None) -> np.ndarray:
    """Rows times the projection (unchanged without one). Callers keep exact norms
    separately: only differences between rows are approximated."""
    rows = np.asarray(rows, dtype=np.float64)
    return rows if matrix is None else rows @ matrix


def replace_one_chi(norm_sq_a, norm_sq_b, inner_ab) -> np.ndarray:
    """χ = e^{‖a‖²} − 2e^{⟨a,b⟩} + e^{‖b‖²} ≥ 0: the small-q χ² term of the Poisson-subsampled
    replace-one Gaussian (1 − q)N(0) + qN(a) vs (1 − q)N(0) + qN(b), written with expm1
    around e^{⟨a,b⟩} so near-equal gradients do not cancel."""
    inner_ab = np.asarray(inner_ab, dtype=np.float64)
    chi = np.exp(inner_ab) * (np.expm1(np.asarray(norm_sq_a) - inner_ab)
                              + np.expm1(np.asarray(norm_sq_b) - inner_ab))
    return np.maximum(chi, 0.0)


def _pair_inner_products(a: np.ndarray, rows_i: np.ndarray, rows_j: np.ndarray,
                         block_rows: int = 1024) -> np.ndarray:
    """⟨a_i, a_j⟩ for the given pairs, through blocks of the Gram matrix (memory
    block_rows × len(a), never pairs × columns)."""
    out = np.empty(rows_i.size)
    order = np.argsort(rows_i, kind="stable")
    sorted_i = rows_i[order]
    for start in range(0, a.shape[0], block_rows):
        stop = min(start + block_rows, a.shape[0])
        lo, hi = np.searchsorted(sorted_i, [start, stop])
        if lo == hi:
            continue
        gram = a[start:stop] @ a.T
        pick = order[lo:hi]
        out[pick] = gram[rows_i[pick] - start, rows_j[pick]]
    return out


def _squared_distances(a: np.ndarray, rows_i: np.ndarray, rows_j: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", a, a)
    return np.maximum(sq[rows_i] + sq[rows_j] - 2.0 * _pair_inner_products(a, rows_i, rows_j), 0.0)


def trajectory_chi_sums(checkpoints, *, noise_multiplier: float, clip: float, n_partners: int, seed: int,
                        projection_dim: int = 0) -> dict:
    """Σ_k T_k χ_k(x, x') of Recipe B per (target, partner), from per-checkpoint clipped gradients.

    ``checkpoints``: an iterable of dicts with ``steps`` (T_k) and ``clipped`` (2n × P clipped
    per-example gradients at θ_k), consumed one at a time. Returns ``targets``, ``partners``
    (flat, target-major), ``total`` (float64), ``steps`` (Σ T_k), ``checkpoints`` (count),
    ``projection_dim`` (0 without a projection). Inner products come from the (projected,
    seeded) distances, norms are exact.
    """
    scale = 1.0 / (float(noise_multiplier) * float(clip))
    drawn = {}  # one projection for every checkpoint: the same seeded map, drawn once

    def terms(ckpt, targets, partners):
        clipped = np.asarray(ckpt["clipped"], dtype=np.float64)
        if "matrix" not in drawn:
            drawn["matrix"] = projection_matrix(clipped.shape[1], int(projection_dim), int(seed))
        norm_sq = np.einsum("ij,ij->i", clipped, clipped) * scale**2  # exact, before projection
        dist_sq = _squared_distances(project_rows(clipped, drawn["matrix"]) * scale, targets, partners)
        return norm_sq, 0.5 * (norm_sq[targets] + norm_sq[partners] - dist_sq)

    sums = _chi_sums(checkpoints, rows=lambda ckpt: len(ckpt["clipped"]), terms=terms, n_partners=n_partners,
                     seed=seed)
    return sums | {"projection_dim": 0 if drawn["matrix"] is None else int(projection_dim)}


def _chi_sums(checkpoints, *, rows, terms, n_partners: int, seed: int) -> dict:
    """Σ_k T_k χ_k per drawn (target, partner) of the vectors' path: ``rows(ckpt)``
    is a checkpoint's row count, ``terms(ckpt, targets, partners)`` its scaled clipped squared
    norms (per row) and inner products (per pair). The partners are drawn at the first."""
    targets = partners = total = n_parent = None
    steps_total = count = 0
    for k, ckpt in enumerate(checkpoints):
        n_rows = rows(ckpt)
        if n_parent is None:
            n_parent = n_rows
            targets, partners = draw_partners(n_parent, n_partners, seed)
            total = np.zeros(targets.size)
        if n_rows != n_parent:
            raise ValueError(f"checkpoint {k} has {n_rows} rows, expected {n_parent}")
        norm_sq, inner = terms(ckpt, targets, partners)
        total += int(ckpt["steps"]) * replace_one_chi(norm_sq[targets], norm_sq[partners], inner)
        steps_total += int(ckpt["steps"])
        count += 1
    if count == 0:
        raise ValueError("Recipe B needs at least one checkpoint")
    return {"targets": targets, "partners": partners, "total": total, "steps": steps_total, "checkpoints": count}


def norms_sq(inputs: Sequence[np.ndarray], deltas: Sequence[np.ndarray], biases: Sequence[bool]) -> np.ndarray:
    """‖g‖² = Σ_l (‖a_l‖² + [layer l has a bias])·‖δ_l‖² per row (float64), from each Dense
    layer's inputs a_l and bias gradients δ_l: the one home of this sum (extraction's
    ``dpaudit.extract.dense_model`` and the factor norms below)."""
    total = np.zeros(len(inputs[0]))
    for a, d, bias in zip(inputs, deltas, biases, strict=True):
        total += (np.einsum("ij,ij->i", a, a) + float(bias)) * np.einsum("ij,ij->i", d, d)
    return total


def factor_norms_sq(inputs: np.ndarray, deltas: np.ndarray, layers: Sequence[Sequence[int]]) -> np.ndarray:
    """‖g‖² = Σ_l (‖a_l‖² + 1)·‖δ_l‖² per row (float64), from the Dense-layer factors."""
    inputs_l, deltas_l = zip(*_layer_views(inputs, deltas, layers), strict=True)
    return norms_sq(inputs_l, deltas_l, [True] * len(inputs_l))


def factor_pair_inner_products(inputs: np.ndarray, deltas: np.ndarray, layers: Sequence[Sequence[int]],
                               targets: np.ndarray, partners: np.ndarray, *, block_pairs: int = 1 << 16) -> np.ndarray:
    """⟨g_t, g_p⟩ = Σ_l (⟨a_lt, a_lp⟩ + 1)·⟨δ_lt, δ_lp⟩ for the given pairs (float64).

    Two ways to the same numbers (up to float64 rounding): gathering each pair's factors,
    ``block_pairs`` pairs at a time (n·k·Σ(inputs + units) products, where a Gram matrix of the
    vectors costs n²·P: Adult's 32,560-point parent set, 2·10⁹ against 7.5·10¹² per
    checkpoint), or, when the parent set is small against its pairs (n² ≤ 64 × pairs, the
    default run's: 13× faster at n = 1,797) and the pairs come target by target, a block of
    targets' rows of the factors' Gram matrices at a time (matrix products, no gathered copies).
    """
    views = _layer_views(inputs, deltas, layers)
    targets, partners = np.asarray(targets), np.asarray(partners)
    n_rows = len(views[0][0]) if views else 0
    if targets.size and n_rows * n_rows <= 64 * targets.size and np.all(targets[1:] >= targets[:-1]):
        return _gram_pair_inner_products(views, n_rows, targets, partners)
    out = np.empty(targets.size)
    for start in range(0, targets.size, block_pairs):
        t, p = targets[start:start + block_pairs], partners[start:start + block_pairs]
        block = np.zeros(t.size)
        for a, d in views:
            block += (np.einsum("ij,ij->i", a[t], a[p]) + 1.0) * np.einsum("ij,ij->i", d[t], d[p])
        out[start:start + block_pairs] = block
    return out


def _gram_pair_inner_products(views, n_rows: int, targets: np.ndarray, partners: np.ndarray,
                              block_rows: int = 256) -> np.ndarray:
    """``factor_pair_inner_products`` of target-sorted pairs from ``block_rows`` rows of the Gram
    matrices at a time (block_rows × n float64 per layer)."""
    out = np.empty(targets.size)
    bounds = np.searchsorted(targets, np.arange(0, n_rows + block_rows, block_rows).clip(max=n_rows))
    for k, first in enumerate(range(0, n_rows, block_rows)):
        lo, hi = bounds[k], bounds[k + 1]
        if lo == hi:
            continue
        rows = slice(first, min(first + block_rows, n_rows))
        gram = sum((a[rows] @ a.T + 1.0) * (d[rows] @ d.T) for a, d in views)
        out[lo:hi] = gram[targets[lo:hi] - first, partners[lo:hi]]
    return out


def _layer_views(inputs, deltas, layers, dtype=np.float64) -> list[tuple[np.ndarray, np.ndarray]]:
    inputs = np.asarray(inputs, dtype=dtype)
    deltas = np.asarray(deltas, dtype=dtype)
    views, a0, d0 = [], 0, 0
    for width_in, width_out in layers:
        views.append((inputs[:, a0:a0 + int(width_in)], deltas[:, d0:d0 + int(width_out)]))
        a0, d0 = a0 + int(width_in), d0 + int(width_out)
    return views


def trajectory_chi_sums_from_factors(checkpoints, *, noise_multiplier: float, clip: float, n_partners: int,
                                     seed, progress=None) -> dict:
    """``trajectory_chi_sums`` from each checkpoint's Dense-layer factors instead of its vectors.

    ``checkpoints``: dicts with ``steps``, ``inputs``, ``deltas`` (2n rows each) and ``layers``.
    Norms come from the factors in float64; the inner products from one Gram block per block of
    targets and its shared partners (``dpaudit.extract.pmp_partners``: the draw, and the float32
    products' tolerance): the clipped inner product is s_t·s_p·⟨g_t, g_p⟩ with s = min(1, C/‖g‖).
    Memory: the factors, a block's Gram and the 2n × k sums, never a 2n × P matrix or n·k
    indices. Returns ``total`` (2n × k float64, target-major), ``partners`` (k), ``steps``,
    ``checkpoints`` and ``projection_dim`` 0. ``progress``: a ``dpaudit.progress.Progress``
    advanced by one per block of targets per checkpoint.
    """
    scale_sq = 1.0 / (float(noise_multiplier) * float(clip)) ** 2
    total = None
    steps_total = count = 0
    n_parent = k = None
    for index, ckpt in enumerate(checkpoints):
        n_rows = len(ckpt["inputs"])
        if len(ckpt["deltas"]) != n_rows:
            raise ValueError(f"a checkpoint has {n_rows} rows of inputs, {len(ckpt['deltas'])} of deltas")
        if n_parent is None:
            n_parent, k = n_rows, partners_drawn(n_rows, n_partners)
            total = np.zeros((n_rows, k))
        if n_rows != n_parent:
            raise ValueError(f"checkpoint {index} has {n_rows} rows, expected {n_parent}")
        norm_sq = factor_norms_sq(ckpt["inputs"], ckpt["deltas"], ckpt["layers"])
        factor, _ = _clip_scales(np.sqrt(norm_sq), clip)
        clipped_sq = norm_sq * factor**2 * scale_sq
        views = _layer_views(ckpt["inputs"], ckpt["deltas"], ckpt["layers"], dtype=CHI_DTYPE)
        steps = int(ckpt["steps"])
        for start, stop, shared, columns in partner_blocks(n_rows, k, seed):
            inner = block_inner_products(views, start, stop, shared, columns, dtype=CHI_DTYPE)
            partner = shared[columns]
            inner *= factor[start:stop, None] * factor[partner] * scale_sq
            total[start:stop] += steps * replace_one_chi(clipped_sq[start:stop, None], clipped_sq[partner], inner)
            if progress is not None:
                progress.advance()
        steps_total += steps
        count += 1
    if count == 0:
        raise ValueError("Recipe B needs at least one checkpoint")
    return {"total": total, "partners": int(k), "steps": steps_total, "checkpoints": count, "projection_dim": 0}


def sized_trajectory_chi_sums(checkpoints, *, n_parent: int, n_checkpoints: int, noise_multiplier: float,
                              clip: float, seed: int, sampling_rate: float, delta: float,
                              relative_standard_error: float, partners_max: int, log=None) -> dict:
    """``trajectory_chi_sums_from_factors`` at the partner count a pilot asks for (issue 37).

    ``checkpoints``: a callable returning a fresh iterator over the ``n_checkpoints`` checkpoints'
    factors of ``n_parent`` rows (one checkpoint in memory at a time; a pass for the pilot's
    ``PILOT_PARTNERS`` partners and, when the chosen count is larger, a second for it, both drawn
    with ``seed``: the sums are those of the draw (2n, k, seed)). ``choose_partner_count`` sizes it so the standard error of the
    largest ε̃_x is about ``relative_standard_error`` of it. The result adds ``pilot_epsilon``
    and ``pilot_standard_error``."""
    from dpaudit.progress import Progress

    blocks = -(-int(n_parent) // PARTNER_BLOCK) * int(n_checkpoints)
    with Progress("Recipe B pilot chi sums", total=blocks, unit="blocks", log=log) as progress:
        pilot = trajectory_chi_sums_from_factors(checkpoints(), noise_multiplier=noise_multiplier, clip=clip,
                                                 n_partners=min(PILOT_PARTNERS, int(partners_max)),
                                                 seed=int(seed), progress=progress)
    chosen = choose_partner_count(pilot["total"], n_parent, sampling_rate=sampling_rate, delta=delta,
                                  relative_standard_error=relative_standard_error, partners_max=partners_max)
    if log is not None:
        log.info("Recipe B: pilot of %d partners: largest eps~ %.4g, standard error %.3g there; %d partners "
                 "per target for a relative standard error %.3g (at most %d)", pilot["partners"],
                 chosen["pilot_epsilon"], chosen["pilot_standard_error"], chosen["partners"],
                 relative_standard_error, partners_max)
    if chosen["partners"] == pilot["partners"]:  # the pilot is the draw (n, k, seed) asks for: no second pass
        sums = pilot
    else:
        with Progress("Recipe B chi sums", total=blocks, unit="blocks", log=log) as progress:
            sums = trajectory_chi_sums_from_factors(checkpoints(), noise_multiplier=noise_multiplier, clip=clip,
                                                    n_partners=chosen["partners"], seed=int(seed), progress=progress)
    return sums | {key: chosen[key] for key in ("pilot_epsilon", "pilot_standard_error")}


def clipped_distances(inputs: np.ndarray, deltas: np.ndarray, grad_norm: np.ndarray,
                      layers: Sequence[Sequence[int]], clip: float) -> np.ndarray:
    """‖clip_C(g_i) − clip_C(g_j)‖ (2n × 2n, float64) from the gradients' Dense-layer factors.

    ⟨g_i, g_j⟩ = Σ_l (⟨a_li, a_lj⟩ + 1)·⟨δ_li, δ_lj⟩ (kernel = a ⊗ δ, bias = δ); with the
    clip factors s = min(1, C/‖g‖), d² = s_i²‖g_i‖² + s_j²‖g_j‖² − 2 s_i s_j ⟨g_i, g_j⟩,
    clamped at 0 (``dpaudit.metrics.pmp.gaussian.pairwise_distances`` on the clipped vectors).
    """
    factor, clipped_sq = _clip_scales(grad_norm, clip)
    gram = np.zeros((factor.size, factor.size))
    for a, d in _layer_views(inputs, deltas, layers):
        gram += (a @ a.T + 1.0) * (d @ d.T)
    d2 = clipped_sq[:, None] + clipped_sq[None, :] - 2.0 * (factor[:, None] * factor[None, :]) * gram
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def _clip_scales(grad_norm, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """(s = min(1, C/‖g‖), ‖clip_C(g)‖²) per row, as ``clipped_distances`` computes them."""
    norms = np.asarray(grad_norm, dtype=np.float64)
    factor = np.minimum(1.0, float(clip) / np.where(norms > 0, norms, 1.0))
    return factor, (norms * factor) ** 2


def clipped_factor_views(inputs, deltas, grad_norm, layers: Sequence[Sequence[int]], clip: float):
    """(per-layer (a, s·δ) float64 views, ‖clip_C(g)‖² per row): the clip factors s scale the
    bias factors, so the kernel gradient a ⊗ sδ and these views' Gram are the clipped ones."""
    factor, clipped_sq = _clip_scales(grad_norm, clip)
    return [(a, d * factor[:, None]) for a, d in _layer_views(inputs, deltas, layers)], clipped_sq


def max_clipped_distance(inputs: np.ndarray, deltas: np.ndarray, grad_norm: np.ndarray,
                         layers: Sequence[Sequence[int]], clip: float, *, block_rows: int = 512) -> float:
    """max_ij ‖clip_C(g_i) − clip_C(g_j)‖ = ``clipped_distances(...).max()`` without the 2n × 2n matrix.

    Row blocks of b = ``block_rows`` targets against the partners from the block on (the
    matrix is symmetric: half of its 2n² · Σ(inputs + units) products), three b × 2n float64
    matrices at peak. The clip factors s scale the bias factors δ (the kernel gradient a ⊗ sδ
    is the clipped one), so the block is the clipped Gram G, and row i's largest
    ‖c_i‖² + ‖c_j‖² − 2G_ij is found before adding ‖c_i‖². Equal to the full matrix's max up
    to rounding (a few ulps: BLAS uses gemm on blocks, syrk on the whole matrix)."""
    factor, clipped_sq = _clip_scales(grad_norm, clip)
    views = [(a, d * factor[:, None]) for a, d in _layer_views(inputs, deltas, layers)]
    m = factor.size
    largest = 0.0
    for start in range(0, m, int(block_rows)):
        stop = min(start + int(block_rows), m)
        gram = None
        for a, d in views:
            term = a[start:stop] @ a[start:].T
            term += 1.0
            term *= d[start:stop] @ d[start:].T
            if gram is None:
                gram = term
            else:
                gram += term
            del term
        gram *= -2.0
        gram += clipped_sq[None, start:]
        rows = np.arange(stop - start)
        gram[rows, rows] = -clipped_sq[start:stop]  # the diagonal's distance is 0
        row_max = gram.max(axis=1) + clipped_sq[start:stop]
        largest = max(largest, float(row_max.max()))
        del gram
    return math.sqrt(max(largest, 0.0))


def clipped_pair_distances(inputs: np.ndarray, deltas: np.ndarray, grad_norm: np.ndarray,
                           layers: Sequence[Sequence[int]], clip: float, targets: np.ndarray,
                           partners: np.ndarray) -> np.ndarray:
    """‖clip_C(g_t) − clip_C(g_p)‖ for the given pairs (float64, from the factors: pairs ·
    Σ(inputs + units) products, ``factor_pair_inner_products``)."""
    factor, clipped_sq = _clip_scales(grad_norm, clip)
    inner = factor_pair_inner_products(inputs, deltas, layers, targets, partners)
    d2 = clipped_sq[targets] + clipped_sq[partners] - 2.0 * (factor[targets] * factor[partners]) * inner
    np.maximum(d2, 0.0, out=d2)
    d2[targets == partners] = 0.0
    return np.sqrt(d2, out=d2)


def schema(n_inputs: int, n_deltas: int, metadata: Mapping[str, Any] | None = None) -> pa.Schema:
    fields = [("example_id", pa.int64()), ("is_member", pa.bool_()), ("grad_norm", pa.float64()),
              ("layer_inputs", pa.list_(pa.float32(), int(n_inputs))),
              ("layer_deltas", pa.list_(pa.float32(), int(n_deltas))),
              ("chi_sum", pa.list_(pa.float64()))]
    meta = None if metadata is None else {METADATA_KEY: json.dumps(dict(metadata), sort_keys=True).encode()}
    return pa.schema(fields, metadata=meta)


def write_pmp_pairs(path: str | os.PathLike, *, example_id=None, is_member=None, grad_norm=None, inputs=None,
                    deltas=None, layers: Sequence[Sequence[int]] = (), trajectory: Mapping | None = None,
                    metadata: Mapping[str, Any] | None = None) -> int:
    """Write the file (no rows when ``example_id`` is None); returns its number of rows."""
    meta = {**(metadata or {}), "layers": [[int(a), int(b)] for a, b in layers]}
    n_inputs = sum(int(a) for a, _ in layers)
    n_deltas = sum(int(b) for _, b in layers)
    if trajectory is not None:
        meta |= {"checkpoints": int(trajectory["checkpoints"]), "trajectory_steps": int(trajectory["steps"]),
                 "projection_dim_used": int(trajectory["projection_dim"])}
    table_schema = schema(n_inputs, n_deltas, meta)
    with atomic_path(path, suffix=".parquet") as tmp:
        if example_id is None:
            pq.write_table(table_schema.empty_table(), tmp, compression="zstd")
            return 0
        n = len(example_id)
        if trajectory is None:
            chi = pa.nulls(n, pa.list_(pa.float64()))
        else:
            total = np.asarray(trajectory["total"], dtype=np.float64).reshape(-1)
            if total.size % n:
                raise ValueError("Recipe B's sums must be target-major with the same partner count per target")
            offsets = pa.array(np.arange(n + 1, dtype=np.int32) * (total.size // n))  # < 2^31: k ≤ 10^4
            chi = pa.ListArray.from_arrays(offsets, pa.array(total))
        columns = [pa.array(np.asarray(example_id, np.int64)), pa.array(np.asarray(is_member, bool)),
                   pa.array(np.asarray(grad_norm, np.float64)),
                   pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(inputs, np.float32).reshape(-1)), n_inputs),
                   pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(deltas, np.float32).reshape(-1)), n_deltas),
                   chi]
        pq.write_table(pa.Table.from_arrays(columns, schema=table_schema), tmp, compression="zstd",
                       use_dictionary=["example_id", "is_member"], use_byte_stream_split=list(FLOAT_COLUMNS))
    return n


def read_pmp_pairs(path: str | os.PathLike) -> dict | None:
    """The file as arrays (``example_id``, ``is_member``, ``grad_norm``, ``inputs``, ``deltas``
    (float32 matrices), ``total`` (Recipe B's sums, flat and target-major; None without
    checkpoints)) and its ``metadata``; None for a file without rows."""
    with reading(path):
        table = pq.read_table(path)
    if table.num_rows == 0:
        return None
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    n = table.num_rows

    def matrix(name):
        column = table.column(name).combine_chunks()
        return column.flatten().to_numpy().reshape(n, column.type.list_size)

    out = {"example_id": table.column("example_id").to_numpy(), "is_member": table.column("is_member").to_numpy(),
           "grad_norm": table.column("grad_norm").to_numpy(), "inputs": matrix("layer_inputs"),
           "deltas": matrix("layer_deltas"), "metadata": meta, "total": None}
    if meta.get("checkpoints"):
        sums = table.column("chi_sum").combine_chunks()
        if len(set(sums.value_lengths().to_numpy().tolist())) != 1:
            raise ValueError(f"{path}: Recipe B's targets have different partner counts; delete it and run again")
        out["total"] = sums.flatten().to_numpy()
    return out
