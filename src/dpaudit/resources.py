"""Memory (MB) and wall time (minutes) of the jobs that grow with the data (issue 19).

Pure functions of the job's size: examples ``n``, features ``d``, classes, model
parameters ``P``, full gradients or not. The rules call them through
``rules/common.smk`` (``resources: mem_mb=<callable>``), which reads ``n, d`` from the
job's ``dataset.json`` input once it exists and from the config before (synthetic
sets give them; bundled sets have known sizes, ``BUNDLED_SHAPES``). The SLURM profile
sets no mem_mb or runtime for these rules, so the rule's value is the one a job gets
(a profile can only hold expressions of ``attempt``, not of the data).

Every value is a declared upper bound calibrated by ``bench/bench_memory.py`` (peak
RSS of extraction at n = 10^5 with full gradients and at n = 10^6, d = 100) with a
25 % margin, multiplied by the attempt number so a job the scheduler killed for memory
or time gets more on its retry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

# (n, d, classes) upper bounds of the bundled datasets before the config subsamples them
# (adult: one-hot columns of the 1994 census; purchase100: the published 197,324 x 600).
BUNDLED_SHAPES = {
    "breast_cancer": (569, 30, 2),
    "digits": (1797, 64, 10),
    "adult": (48_842, 110, 2),
    "purchase100": (197_324, 600, 100),
    "mnist": (70_000, 784, 10),
}

MB = 2**20
# A Python process with TensorFlow, Keras and the project imported, a small model built.
TF_BASE_MB = 900
# A Python process with numpy, pandas, pyarrow and scipy imported (metric and audit jobs).
NUMPY_BASE_MB = 300
# Rows of per-example gradients extraction holds at once (dpaudit.extract: at most
# 4096 rows and, when the vectors are kept, 2^24 floats per chunk); a kept chunk exists
# as float64 outer products, its float32 copy and an Arrow row group.
GRADIENT_CHUNK_FLOATS = 2**26
KEPT_CHUNK_FLOATS = 2**24
GRADIENT_CHUNK_ROWS = 4096
MARGIN = 1.25


def dataset_shape(info: Mapping[str, Any] | None, dataset: str, params: Mapping[str, Any]) -> tuple[int, int, int]:
    """(n, d, classes) from a ``dataset.json`` payload, else from the config, else the bundled size."""
    if info is not None:
        return int(info["n"]), int(info["d"]), int(info["classes"])
    if "d" in params:  # synthetic
        return int(params["n"]), int(params["d"]), int(params.get("classes", 2))
    n, d, classes = BUNDLED_SHAPES.get(dataset, (200_000, 1000, 100))
    return min(n, int(params.get("n") or n)), d, classes


def mlp_parameters(d: int, hidden_units: Sequence[int], classes: int) -> int:
    """Trainable parameters of the MLP (weights and biases); the linear mechanisms' model is 2d."""
    sizes = [int(d), *(int(h) for h in hidden_units), int(classes)]
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def model_parameters(d: int, classes: int, training: Mapping[str, Any], mechanism: str) -> int:
    if mechanism in ("output_perturbation", "objective_perturbation"):
        return 2 * int(d)
    return mlp_parameters(d, training.get("hidden_units") or [], classes)


def _mb(nbytes: float, base: int, attempt: int) -> int:
    """base + bytes with the margin, rounded up to 100 MB, times the attempt."""
    once = int(math.ceil((base + MARGIN * nbytes / MB) / 100.0) * 100)
    return once * max(int(attempt), 1)


def _minutes(seconds: float, floor: int, attempt: int) -> int:
    return int(max(floor, math.ceil(2 * seconds / 60))) * max(int(attempt), 1)


def gradient_chunk_rows(n_params: int, *, keep: bool = False) -> int:
    floats = KEPT_CHUNK_FLOATS if keep else GRADIENT_CHUNK_FLOATS
    return max(1, min(GRADIENT_CHUNK_ROWS, floats // max(int(n_params), 1)))


def extract_resources(n: int, d: int, n_params: int, *, full_gradients: bool, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``extract_per_example`` (gradients streamed in row groups)."""
    rows = min(int(n), gradient_chunk_rows(n_params, keep=full_gradients))
    # examples (Arrow column, pandas, the float32 matrix), outputs and norms (~12 float64
    # columns with their pandas/Arrow copies), one chunk's float64 factors (bounded here by
    # P values a row) and, when kept, its vectors' float64, float32, Arrow and row-group copies.
    # A numpy process (dpaudit.extract.dense_model; no TensorFlow since issue 23). bench_memory
    # (P = 6,594): 821 MB measured at n = 10^5 with vectors (1,300 declared; 1,426-1,521 MB
    # with TensorFlow before), 1,927 MB at n = 10^6 without (2,900 declared; 2,128-2,533 before).
    per_row = 4 * 4 * d + 12 * 8 * 3
    chunk = rows * n_params * 36 if full_gradients else rows * n_params * 8
    memory = _mb(n * per_row + chunk, NUMPY_BASE_MB, attempt)
    # bench_memory on one core: 6.3 s at n = 10^6, P = 6,594 without vectors, 20.8 s at n = 10^5
    # with them (136 s and 118 s with TensorFlow before); the coefficients keep the old bounds
    per_value = 2e-7 if full_gradients else 3e-8
    runtime = _minutes(30 + per_value * n * max(n_params, 1000), 10, attempt)
    return {"mem_mb": memory, "runtime": runtime}


# Recipe A's exact bound up to this many parent points (metrics.pmp.recipe_a_exact_max's default).
PMP_EXACT_MAX = 4096

def mlp_factor_width(d: int, hidden_units: Sequence[int], classes: int) -> int:
    """Σ (inputs + units) over the MLP's Dense layers: the floats per example of its gradient
    factors (``pmp_pairs.parquet``), far fewer than its parameters."""
    sizes = [int(d), *(int(h) for h in hidden_units), int(classes)]
    return sum(sizes[:-1]) + sum(sizes[1:])


# Recipe B's pilot partners (dpaudit.extract.pmp_partners.PILOT_PARTNERS) and its targets per
# Gram block (PARTNER_BLOCK); the largest-distance search's basis (dpaudit.extract.max_distance).
PMP_PILOT_PARTNERS = 32
PMP_PARTNER_BLOCK = 512
PMP_BASIS_DIMS = 24


def pmp_metric_resources(n: int, n_params: int, *, checkpoints: int, partners: int = 256,
                         reference_models: int = 0, exact_max: int = PMP_EXACT_MAX,
                         factor_width: int | None = None, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``metric_pmp`` (numpy only) for a parent set of at most ``n`` points.

    It reads ``pmp_pairs.parquet`` (``dpaudit.extract.pmp_pairs``: the final gradients'
    Dense-layer factors, ``factor_width`` = Σ (inputs + units) ≤ P floats per example, float32
    with their Arrow copy, and Recipe B's n × ``partners`` sums: the count the pmp_pairs job chose,
    read from the file when it exists (``rules/pmp.smk``), else metrics.pmp.partners_max). Recipe A
    (``dpaudit.metrics.pmp.dpsgd.recipe_a_from_factors``) up to ``exact_max`` points: the 2n × 2n
    Gram and distances with their temporaries (6 float64 copies; μ and the solver go by row
    blocks), about 1 µs of Newton steps per pair (bench/bench_pmp_scale.py: 15 s, 560 MB peak at
    2n = 4,096). Above (issue 37): the float64 clipped factor views and a gathered copy (3 × 8 bytes
    per factor), the search's basis coordinates and its sweeps' rows (2·dims + 1 rows of n),
    Recipe A's partner blocks (solved as drawn, no n·k array); its pair budget is max(2,048 pairs a
    point, 2²⁹) at about 1e-8 s each, the drawn pairs ~3 µs each (pilot and final). Recipe B: its sums,
    μ and the standard errors' pass (4 float64 copies of n × partners). With Recipe C also its
    recipe pool's ``reference_models`` × |P| ≤ n rows (four columns, then φ and the inclusion
    bits pivoted to K × n)."""
    n, partners = int(n), int(partners)
    width = int(factor_width or max(n_params, 1))
    factors = n * width * 8
    pool = 4 * 32 * n * int(reference_models)
    exact = min(n, int(exact_max))  # X has at most n points: the exact path's worst case
    recipe_a, seconds = 6 * 8 * exact * exact, 1.5e-6 * exact * exact
    if n > int(exact_max):
        # the float64 clipped factor views and a gathered copy: 3 × 8 bytes a factor until issue 47
        # measured the whole job's kernel peak (bench/bench_scale.py, 32 partners: 1,065 MB at n =
        # 10^5 and 1,858 MB at 2·10^5, where that declared 1,800 and 3,000), 2 × 8 then; 10 bytes
        # since the same job peaked at 952 and 1,571 MB in the next measurement (declared 2,200 at
        # 2·10^5: above both peaks, within 1.5× of the lower)
        search = 10 * n * width + 8 * n * (2 * PMP_BASIS_DIMS + 1) * 3 + 8 * n * PMP_BASIS_DIMS * 2
        # one block of targets at a time (Gram, μ, the solver's cells), a few n-vectors, the search's
        # 1,024 × 8,192 distance blocks
        drawn = 12 * 8 * PMP_PARTNER_BLOCK * (partners + 1) + 8 * 8 * n + 3 * 8 * 1024 * 8192
        recipe_a = max(recipe_a, search + drawn)
        seconds = max(seconds, 1e-8 * max(2048 * n, 2**29) + 3e-6 * n * (partners + PMP_PILOT_PARTNERS))
    recipe_b = 4 * 8 * n * partners
    memory = _mb(factors + recipe_a + recipe_b + pool, NUMPY_BASE_MB, attempt)
    runtime = _minutes(30 + seconds + 2e-7 * n * partners, 10, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": runtime}


def pmp_pairs_resources(n: int, factor_width: int, *, checkpoints: int, partners_max: int) -> dict[str, float]:
    """Bytes and seconds of the pmp pairs in their ``pmp_pairs`` job (issue 37; the extraction's until
    issue 47), for a parent set of at most ``n`` points: the final weights' factors kept (float32) and one checkpoint's (float32,
    with float64 norms' copy and the chunks' concatenation: 20 bytes a factor), the pilot's sums and
    its solve (6 float64 copies of n × 32), the chosen count's sums (at most ``partners_max``) held
    three times when written (the array, its Arrow column, the writer's pages) and one Gram block of
    targets (512 × (k + 1), a few float64 copies). Time: per checkpoint a Gram block product per
    target and partner (2·width flops, float32) and χ's exponentials (~40 ns a pair), pilot and
    final pass."""
    n, width, k = int(n), int(factor_width), int(partners_max)
    memory = (20 * n * width + 6 * 8 * n * PMP_PILOT_PARTNERS + 3 * 8 * n * k
              + 8 * 8 * PMP_PARTNER_BLOCK * (k + 1))
    pairs = n * (k + PMP_PILOT_PARTNERS) * int(checkpoints)
    seconds = pairs * (2 * width / 5e9 + 4e-8) + 2e-6 * n * PMP_PILOT_PARTNERS
    return {"bytes": memory, "seconds": seconds}


def train_resources(n: int, d: int, n_params: int, run: Mapping[str, Any], attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``train_model`` for one run (``run``: its grid row)."""
    batch = int(_number(run.get("batch_size"), 64))
    epochs = int(_number(run.get("epochs"), 10))
    dp = run.get("mechanism") == "dpsgd"
    # the examples six times over (Arrow column, frame, float32 matrix, TensorFlow's dataset and its
    # shuffle and batch copies), weights with optimizer slots and checkpoints, and a DP-SGD step's
    # per-example gradients of one batch. bench/bench_scale.py (d = 100, 64 hidden, batch 256):
    # 1,055 MB at n = 10^5 and 1,307 MB at 2·10^5, 2.5 KB a row; "twice" (864 bytes a row)
    # declared 1,200 MB there (issue 37).
    # A DP-SGD run's mechanism checks (issue 45: the row ledger, the weight and noise monitors' blocks)
    # add ~1.4 KB a row at the bench's sizes, declared as 2 KB (kernel peaks, bench/measured_peaks.json:
    # +144 MB at 10^5 and +276 MB at 2·10^5 rows against issue 47's measurement).
    working = (n * (6 * 4 * d + 64) + 16 * n_params * 4
               + ((3 * batch * n_params * 4 + 2000 * n) if dp else 0))
    memory = _mb(working, TF_BASE_MB, attempt)
    cost = 3e-9 * epochs * n * max(n_params, 1000) * (5 if dp else 1)
    return {"mem_mb": memory, "runtime": _minutes(60 + cost, 30, attempt)}


def canary_twin_resources(n: int, d: int, classes: int, training: Mapping[str, Any], run: Mapping[str, Any], *,
                          gradient_canaries: int, input_canaries: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``canary_scores`` for a DP-SGD run: its audit twin (issues 22, 26).

    The twin is the released MLP (d inputs) plus m = gradient_canaries coordinates of the
    update that the loss does not depend on (``dpaudit.training.steps``): per step a few
    m-vectors (norms, clip weights, mask, noised coordinates), and it keeps every step's m
    coordinate states (weights and up to two optimizer slots, float32, then stacked; issue 45)
    and sampling bits, then the float64 observations reconstructed from the states, the
    log-likelihood ratios and sums with their temporaries: ~70 bytes per step and canary (kernel peaks
    1,969 MB at 10^5 and 2,546 MB at 2·10^5 rows, bench/measured_peaks.json).
    ``n`` bounds the members (steps per epoch); the sampler draws over n + m rows per step.
    """
    m = int(gradient_canaries)
    n_params = mlp_parameters(int(d), training.get("hidden_units") or [], classes)
    batch = int(_number(run.get("batch_size"), 64))
    epochs = int(_number(run.get("epochs"), 10))
    steps = math.ceil(int(n) / max(batch, 1)) * epochs
    working = (n * (2 * 4 * d + 64) + 16 * n_params * 4 + 3 * batch * d * 4 + 70 * steps * m + 64 * (n + m)
               + 3 * 4 * int(input_canaries) * d)
    memory = _mb(working, TF_BASE_MB, attempt)
    cost = 3e-9 * epochs * n * max(n_params, 1000) * 5 + 2e-8 * steps * m
    return {"mem_mb": memory, "runtime": _minutes(60 + cost, 30, attempt)}


def metric_resources(n: int, *, grid_size: int = 0, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of a per-run metric job over n per-example rows (numpy, float64)."""
    memory = _mb(n * 40 * 8 + grid_size * 6 * 8, NUMPY_BASE_MB, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": _minutes(30 + 1e-4 * n, 10, attempt)}


def audit_resources(n: int, d: int, *, runs: int, steps: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of an identifiability audit job: full-batch DP-Adam runs in float64."""
    memory = _mb(8 * n * d * 6 + 8 * runs * steps * 8, NUMPY_BASE_MB, attempt)
    runtime = _minutes(30 + 2e-7 * runs * steps * n * d, 10, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": runtime}


def prepare_resources(n: int, d: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``prepare_dataset``: the raw table, its float32 matrix and the
    Arrow/pandas copies written to examples.parquet (~8 copies of n × d float32)."""
    memory = _mb(8 * 4 * n * d + 200 * n, NUMPY_BASE_MB, attempt)
    # floors: text parsing of a raw CSV (adult) and scikit-learn's import, unmeasured: the
    # 2,000 MB and 30 minutes below which the profile never declared a job
    return {"mem_mb": max(memory, 2000 * max(int(attempt), 1)), "runtime": _minutes(60 + 2e-7 * n * d, 30, attempt)}


def card_resources(n: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``privacy_card``: the run's n per-example outputs, the ROC over them
    (float64 columns with their sort copies) and one matplotlib figure (~200 MB imported)."""
    memory = _mb(n * 40 * 8, NUMPY_BASE_MB + 200, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": _minutes(30 + 1e-4 * n, 10, attempt)}


def simulation_resources(sizes: Sequence[int], repeats: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``simulate_epsilon_star``: one simulated set of the largest size at a
    time (members and non-members, scores, their sorts and the ε* grid: ~40 float64 per row);
    run time over every size and repeat (bench_epsilon_star: ~2e-5 s per row and repeat)."""
    largest = max((int(size) for size in sizes), default=0)
    memory = _mb(2 * largest * 40 * 8, NUMPY_BASE_MB + 200, attempt)
    rows = 2 * sum(int(size) for size in sizes) * max(int(repeats), 1)
    return {"mem_mb": max(memory, 2000 * max(int(attempt), 1)), "runtime": _minutes(300 + 4e-4 * rows, 30, attempt)}


def profile_resources(rule: str, n: int, d: int, *, draws: int, epsilons: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of a privacy-profile job on a view of n rows and d columns (numpy).

    ``profile_exact`` refits every one of the n row-removed neighbours in chunks whose two
    n × chunk float64 arrays stay within ``dpaudit.profile.neighbours.MEMORY_BUDGET_BYTES``
    (2 GiB): its memory grows with n² until that budget, then with n d; its time with n² d. ``profile_typical`` draws ``draws`` models per ε and keeps running
    sums per row (n × epsilons, never the draws × n matrix); ``profile_samples`` and
    ``profile_single`` hold the view and a few thousand models; ``profile_base`` one fit.
    """
    view = 8 * n * (d + 8)
    if rule == "profile_exact":
        chunk_arrays = min(2 * 2**30, 2 * 8 * n * n)  # neighbours.MEMORY_BUDGET_BYTES, or n x n when smaller
        memory = _mb(view * 4 + 1.5 * chunk_arrays, NUMPY_BASE_MB, attempt)
        runtime = _minutes(60 + 2e-8 * n * n * max(d, 1) * 20, 30, attempt)
    elif rule == "profile_typical":
        # running sums per rank and neighbour (n x epsilons, a few), one 2^19-element chunk of draws x n
        memory = _mb(view * 2 + 8 * n * epsilons * 6 + 8 * 2**19 * 4 + 8 * draws * (d + 8), NUMPY_BASE_MB, attempt)
        runtime = _minutes(60 + 1e-7 * draws * epsilons * n * max(d, 1), 30, attempt)
    elif rule in ("profile_base", "profile_samples", "profile_single"):
        memory = _mb(view * 4 + 8 * draws * (d + 8), NUMPY_BASE_MB + 200, attempt)
        runtime = _minutes(60 + 1e-6 * n * max(d, 1) + 1e-5 * draws * max(d, 1), 10, attempt)
    else:
        raise ValueError(f"no profile resources for rule {rule!r}")
    # floor: the 2,000 MB the profile declared for every one of them before (never measured lower)
    return {"mem_mb": max(memory, 2000 * max(int(attempt), 1)), "runtime": runtime}


def neighbour_resources(members: int, n: int, d: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``audit_neighbours``: the members × pool distance matrix (float64;
    the pool is at most the dataset's n) with the ranking's negated and flattened copies, and
    the dataset's features."""
    cells = int(members) * int(n)
    memory = _mb(8 * cells * 3 + 8 * n * d * 3, NUMPY_BASE_MB, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)),
            "runtime": _minutes(30 + 1e-8 * cells * max(d, 1), 10, attempt)}


def audit_aggregate_resources(runs: int, steps: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``audit_aggregate``: every audit run's row and every run's
    per-step rows (~12 float64 columns each, with the concatenation's copy)."""
    memory = _mb(2 * 12 * 8 * runs * (steps + 1), NUMPY_BASE_MB, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)),
            "runtime": _minutes(30 + 2e-5 * runs * (steps + 1), 10, attempt)}


def pmp_simulation_resources(trials_expmech: int, trials_gauss: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``simulate_pmp``. Memory is constant (``CONSTANT_MEMORY``); run time
    grows with the trials per point of Figs 1-3 and 4-6."""
    runtime = _minutes(600 + 60 * int(trials_expmech) + 60 * int(trials_gauss), 30, attempt)
    return {"mem_mb": 2000 * max(int(attempt), 1), "runtime": runtime}


def reference_pool_resources(n: int, d: int, classes: int, n_params: int, run: Mapping[str, Any], *,
                             models: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``reference_pool``: K reference models of one recipe trained together on
    the audit population (at most the dataset's n rows). Memory: the examples, K stacked weights
    with optimizer slots, one step's [K, batch, d] block with its per-layer activations and
    per-model noise, and the K × n logits (float32 in training, float64 φ and the Parquet
    table's copies). Run time: K times one model's training (the stacked path measures about
    3x one model at K = 16, bench_attacks; the fallback loop is K times)."""
    k = max(int(models), 1)
    batch = int(_number(run.get("batch_size"), 64))
    epochs = int(_number(run.get("epochs"), 10))
    dp = run.get("mechanism") == "dpsgd"
    # bench/bench_scale.py (K = 16, d = 100, 10 classes, 2 epochs of batch 256; issue 37): 1,965 MB
    # at n = 10^5 and 2,522 MB at 2·10^5 where the examples twice and 3 float32 copies of the
    # logits declared 1,400 and 1,800 MB: the examples as train_model holds them (6 copies) and
    # 8 copies of the K × n logits with 8 columns. Issue 47, the kernel's peaks (VmHWM, which
    # Snakemake's max_rss missed): 934 / 1,945 / 2,923 MB for the baseline recipe and 1,251 /
    # 2,115 / 3,652 MB for the DP-SGD one at n = 10^4 / 10^5 / 2·10^5, where this declared
    # 1,100 / 2,000 / 3,000: 12 columns a model and row, and for DP-SGD the K models' per-example
    # gradients of a batch (3 float32 copies) and about 2 bytes per step, model and parameter
    # (fitted: the DP-SGD pool's peak grew faster than n past 10^5 rows)
    steps = math.ceil(int(n) / max(batch, 1)) * epochs
    working = (n * (6 * 4 * d + 64) + k * 16 * n_params * 4 + k * 3 * batch * (d + 4 * max(n_params // max(d, 1), 1))
               * 4 + k * n * (int(classes) * 4 * 8 + 12 * 8)
               + (k * 3 * batch * n_params * 4 + k * steps * n_params * 2 if dp else 0))
    memory = _mb(working, TF_BASE_MB, attempt)
    cost = 3e-9 * epochs * n * max(n_params, 1000) * (5 if dp else 1) * k
    return {"mem_mb": memory, "runtime": _minutes(60 + cost, 30, attempt)}


def attack_metric_resources(n: int, classes: int, *, models: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``metric_attacks`` (numpy): the pool's K × n rows (logits as float64,
    φ at two temperatures, masks and the sorted copies of the fits) and the target's outputs."""
    k = max(int(models), 1)
    # bench/bench_scale.py (K = 16, 10 classes; issue 37): 1,235 MB at n = 10^5 and 2,322 MB at
    # 2·10^5, ~11 KB a row, where 3 float64 copies of the logits and 8 columns (5 KB a row)
    # declared 1,000 and 1,600 MB: 6 copies and 16 columns
    memory = _mb(k * n * (int(classes) * 8 * 6 + 8 * 16) + n * 40 * 8, NUMPY_BASE_MB, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)),
            "runtime": _minutes(30 + 1e-4 * n + 2e-6 * k * n * 12, 10, attempt)}


# Rules whose declared memory does not grow with any input, and why (the test that derives
# every rule's declaration at two input sizes accepts an equal mem_mb only for these).
CONSTANT_MEMORY = {
    "simulate_pmp": "Lowy et al. 2024's Figs 1-6 on synthetic data of the code's fixed sizes (exact enumeration "
                    "of C(2n, n) subsets for small n, a fixed-size Gaussian Monte Carlo), one trial at a time: "
                    "the trials per point (config) change its run time, not its memory",
}


def declared(rule: str, config: Mapping[str, Any], *, n: int = 0, d: int = 0, classes: int = 2,
             training: Mapping[str, Any] | None = None, run: Mapping[str, Any] | None = None,
             audit_runs: int = 0, audit_n: int = 0, table_sketch: Any | None = None,
             pmp_partners: int | None = None, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of one job of ``rule`` (``rules/common.smk``'s ``job_resources``).

    ``n, d, classes``: the job's dataset (or privacy-profile view); ``training`` and ``run``:
    its training settings and grid row (per-run rules); ``audit_runs``: the identifiability
    audit's runs over every block (``audit_aggregate``); ``audit_n``: the members the audit
    keeps (``audit.datasets.<name>.n``); ``table_sketch``: a table dataset's parse-time
    inspection (``prepare_dataset`` of a table); ``pmp_partners``: the partners per target of a run's
    pmp pairs file once its pmp_pairs job chose them (``metric_pmp``); ``config``: the validated config.
    """
    training = training or {}
    if rule == "prepare_dataset":
        return prepare_resources(n, d, attempt) if table_sketch is None else table_prepare_resources(table_sketch,
                                                                                                    attempt)
    if rule in ("profile_base", "profile_exact", "profile_samples", "profile_single", "profile_typical"):
        profile = config["profile"]
        return profile_resources(rule, n, d, draws=profile["draws"], epsilons=len(profile["log10_epsilons"]),
                                 attempt=attempt)
    if rule == "simulate_epsilon_star":
        options = config["simulations"]["epsilon_star"]
        return simulation_resources(options["sizes"], options["repeats"], attempt)
    if rule == "simulate_pmp":
        options = config["simulations"]["pmp"]
        return pmp_simulation_resources(options["trials_expmech"], options["trials_gauss"], attempt)
    if rule == "audit_aggregate":
        return audit_aggregate_resources(audit_runs, config["audit"]["steps"], attempt)
    if rule == "audit_block":
        return audit_resources(audit_n or n, d, runs=config["audit"]["block_size"], steps=config["audit"]["steps"],
                               attempt=attempt)
    if rule == "audit_neighbours":
        return neighbour_resources(audit_n or n, n, d, attempt)
    if rule in ("metric_mia", "metric_identifiability", "external_outputs"):  # external: an outputs file (issue 44)
        return metric_resources(n, attempt=attempt)
    if rule == "privacy_card":
        return card_resources(n, attempt)
    if rule == "metric_epsilon_star":
        return metric_resources(n, grid_size=config["metrics"]["epsilon_star"].get("grid_size", 0), attempt=attempt)
    if rule == "metric_attacks":
        return attack_metric_resources(n, classes, models=config["metrics"]["attacks"]["reference_models"],
                                       attempt=attempt)
    if run is None:
        raise ValueError(f"rule {rule!r}: no resources declared (dpaudit.resources.declared)")
    n_params = model_parameters(d, classes, training, run["mechanism"])
    if rule == "canary_scores" and run["mechanism"] == "dpsgd":
        # the audit twin's input is d + gradient_canaries wide, not the released model's d
        options = config["metrics"]["canary"]
        return canary_twin_resources(n, d, classes, training, run, gradient_canaries=options["gradient_canaries"],
                                     input_canaries=options["input_canaries"], attempt=attempt)
    if rule == "reference_pool":  # run: the recipe (a grid row without its seed)
        return reference_pool_resources(n, d, classes, n_params, run,
                                        models=config["metrics"]["attacks"]["reference_models"], attempt=attempt)
    if rule in ("train_model", "canary_scores"):  # a linear run's releases: one fit's size each
        return train_resources(n, d, n_params, run, attempt=attempt)
    pmp = config["metrics"]["pmp"]
    if rule == "extract_per_example":
        return extract_resources(n, d, n_params, full_gradients=config["extract"]["full_gradients"], attempt=attempt)
    if rule == "pmp_pairs":  # the parent set's factors at the final weights and every checkpoint (issue 47)
        width = mlp_factor_width(d, training.get("hidden_units") or [], classes)
        pairs = pmp_pairs_resources(n, width, checkpoints=pmp["checkpoints"], partners_max=pmp["partners_max"])
        # the model and the examples as extraction reads them (float32 matrix, Arrow column, keys)
        examples = n * (2 * 4 * d + 64)
        return {"mem_mb": _mb(examples + pairs["bytes"], NUMPY_BASE_MB, attempt),
                "runtime": _minutes(30 + pairs["seconds"], 10, attempt)}
    if rule == "metric_pmp" and (run["mechanism"] != "dpsgd" or run.get("microbatches")):
        # the recipes do not apply: its rows from train.json alone (rules/pmp.smk, issue 47)
        return metric_resources(0, attempt=attempt)
    if rule == "metric_pmp":  # reads the run's pmp pairs (no TensorFlow)
        models = config["metrics"]["attacks"]["reference_models"] if pmp["recipe_c"] else 0
        return pmp_metric_resources(n, n_params, checkpoints=pmp["checkpoints"],
                                    partners=pmp_partners or pmp["partners_max"],
                                    reference_models=models, exact_max=pmp["recipe_a_exact_max"],
                                    factor_width=mlp_factor_width(d, training.get("hidden_units") or [], classes),
                                    attempt=attempt)
    raise ValueError(f"rule {rule!r}: no resources declared (dpaudit.resources.declared)")


def declared_for_job(rule: str, config: Mapping[str, Any], *, dataset: str, key: str | None = None,
                     pmp_partners: int | None = None, attempt: int = 1) -> dict[str, int]:
    """``declared`` for the job of ``rule`` on ``dataset`` and, for a per-run (per-recipe) rule, the
    run (recipe) named ``key``, with the sizes rules/common.smk's ``job_resources`` gives it: the
    dataset's shape from the config (a synthetic set's n, d, classes), the dataset's training block
    over the shared one, the run's (recipe's) grid values. ``config``: validated. What the committed
    peaks (bench/measured_peaks.json, issue 47) are held to."""
    from dpaudit import config as dpconfig

    params = config["datasets"][dataset]
    n, d, classes = dataset_shape(None, dataset, params)
    training = {**{k: v for k, v in config["training"].items() if k != "allow_large_delta"},
                **params.get("training", {})}
    run = None
    if key is not None:
        runs = dpconfig.run_lookup(dpconfig.dataset_grids(config)[dataset])
        recipes = dpconfig.recipe_lookup(runs)
        run = runs[key] if key in runs else recipes[key]["params"]
    return declared(rule, config, n=n, d=d, classes=classes, training=training, run=run, pmp_partners=pmp_partners,
                    attempt=attempt)


def _number(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(number) else number


def table_prepare_resources(sketch: Any, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``prepare_dataset`` for a table dataset
    (``dpaudit.data.table.TableSketch``), from its file: the rows, and the
    features after encoding estimated from the first block (a categorical column counts
    twice the levels seen there, at most ``max_levels``). The job streams the file, so it
    holds per row 8 bytes per numeric, 4 per categorical column, the float32 features
    twice (the matrix and the Arrow column written to Parquet), the label, split and id;
    bench/bench_table.py measures the peak at 10^6 rows x 50 columns against this: 2,092 MB
    (CSV, 407 MB, 16 s) and 2,171 MB (Parquet, 230 MB, 40 s on a loaded machine) peak RSS
    for 4,100 MB declared, d = 184 features after encoding (334 estimated)."""
    rows = max(int(sketch.rows), 1)
    columns = len(sketch.columns)
    per_row = 8 * columns + 2 * 4 * int(sketch.features) + 64
    memory = _mb(rows * per_row + 4 * (1 << 22), NUMPY_BASE_MB, attempt)
    # bench_table on one core: ~2e-6 s per cell read, checked and encoded
    runtime = _minutes(30 + 2e-6 * rows * max(columns, 1) + 1e-8 * rows * int(sketch.features), 10, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": runtime}
