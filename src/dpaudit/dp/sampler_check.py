"""The sampler's law, row by row (issue 45): did the rows every step drew follow the law the
accountant assumes?

The loop keeps which rows each step drew (``dpaudit.audit.row_ledger.RowLedger``); its
``summary`` hands this module the sufficient statistics of one group of rows (all rows, or
the audit twin's canary rows), and ``check_sampler`` tests them at the sampler's stated rate
q over T steps. Under a Poisson claim every row is an independent Bernoulli(q) draw at every
step, so:

* ``sizes_dispersion``: Σ_t (|b_t| − Nq)² / (Nq(1 − q)), two-sided. Its terms have mean 1 and
  variance v = 2 + 1/(Nq(1 − q)) − 6/N (the binomial's fourth moment), so 2D/v is referred to
  χ² with 2T/v degrees of freedom (Satterthwaite's moment match; v = 2 gives χ²_T). Fixed-size
  batches have no spread (bug class: a fixed-size or capped sampler accounted as Poisson).
* ``sizes_max``, ``sizes_min``: the largest and the smallest batch, exact: P(max ≤ m) = F(m)^T,
  P(max ≥ m) = 1 − F(m − 1)^T and alike for the minimum, F the Binomial(N, q) CDF; each
  two-sided (twice the smaller tail). Batches capped at their expected size have a maximum
  that Binomial batches exceed almost surely (Binomial(284, 0.225): all 40 batches ≤ 64 has
  probability ~1e-11).
* ``sizes_law``: the histogram of the T sizes against Binomial(N, q), Pearson's χ² over bins
  of adjacent values each expecting ≥ ``MIN_EXPECTED`` (the tails pooled into the end bins):
  any other shape of the batch-size law.
* ``counts_dispersion``: the same dispersion test over the rows' participation counts
  c_i ~ Binomial(T, q) (independent across rows). Shuffled batches draw each row about once an
  epoch (variance ≈ 0 against Tq(1 − q)); a batch composition repeated every epoch multiplies
  the variance by the number of epochs; rows drawn at unequal rates spread it.
* ``counts_law``: the histogram of the counts against Binomial(T, q), as ``sizes_law``.
* ``never_drawn``: the rows never drawn, Binomial(N, (1 − q)^T) exactly, two-sided: rows the
  sampler cannot reach (or far too many reached).
* ``lag_one``: independence of consecutive steps on the disjoint step pairs (2k, 2k + 1): the
  2 × 2 table (drawn at 2k, drawn at 2k + 1) over rows and pairs, Fisher's exact test given its
  margins (two-sided, twice the smaller hypergeometric tail); it does not involve q. Shuffled
  batches almost never draw a row at two consecutive steps of one epoch.
* ``gaps``: the gaps between a row's consecutive inclusions are Geometric(q) under Poisson
  sampling, i.e. the hazard of a next inclusion at lag g (given none before) is q at every
  lag. The test counts, per lag, the inclusion spells at risk (the gaps ≥ g and the spells
  after a row's last inclusion, censored at the last step) and the spells ending there, bins
  adjacent lags so each bin expects ≥ ``MIN_EXPECTED`` of both, and tests the hazard's
  homogeneity across bins (Pearson's χ² of the bins × (ended, continued) table, bins − 1
  degrees of freedom; asymptotically valid since each bin's count is a martingale in the
  spells). It does not involve q. A repeated epoch ends every spell at lag = the epoch's
  length; shuffling makes short gaps rare and gaps near an epoch common.
* ``no_duplicates``: no row drawn twice in one step (a sampler with replacement).

Under a shuffle claim (``dpaudit.dp.accounting``: each row at most once an epoch, the
replace-one Gaussian composed per epoch) the promises are exact and tested as such:

* ``batch_size_exact``: every batch holds exactly B rows;
* ``once_per_epoch``: no row drawn twice within an epoch;

and two tests of the permutation's randomness, which the accountant's bound does not need
(their failures are recorded with ``privacy_failure`` false, like more noise than claimed):

* ``left_out_dispersion``, ``left_out_law``: with ⌊N/B⌋·B < N rows used an epoch, each row's
  count of epochs is Binomial(E, ⌊N/B⌋B/N): the rows left out are drawn afresh;
* ``fresh_permutation``: a row in consecutive epochs lands at the same step of the epoch with
  probability 1/(steps an epoch): Binomial, two-sided (the same order every epoch).

Every p-value is compared with α/m, m the number of tests run over all groups (Bonferroni),
so a correct sampler fails the check with probability at most α (``FAMILY_ALPHA``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import special

from dpaudit.dp.hypothesis import two_sided_binomial_p, two_sided_chi2_p, two_sided_hypergeom_p
from dpaudit.dp.noise_certificate import FAMILY_ALPHA

__all__ = ["FAMILY_ALPHA", "MIN_EXPECTED", "NON_VOIDING", "binned_goodness_of_fit", "binomial_extremes",
           "check_sampler", "dispersion", "hazard_homogeneity", "summary_sentence"]

# Expected count per bin of the χ² tests (Pearson's approximation in the far tail needs more
# than the textbook 5: the check compares p with ~5e-5).
MIN_EXPECTED = 10.0
# Tests whose failure does not void the accountant's bound (module docstring).
NON_VOIDING = ("left_out_dispersion", "left_out_law", "fresh_permutation")
_TAIL = 1e-12  # the bins of a goodness of fit span the law's values between these quantiles


def dispersion(values, trials: int, p: float) -> dict[str, Any] | None:
    """Σ (x − np)² / (np(1 − p)) of independent Binomial(``trials``, p) values, two-sided
    (module docstring); None where the law has no spread or there are fewer than two values."""
    x = np.asarray(values, dtype=np.float64)
    variance = trials * p * (1.0 - p)
    if x.size < 2 or not variance > 0:
        return None
    term_variance = 2.0 + 1.0 / variance - 6.0 / trials
    if not term_variance > 1e-9:
        return None
    statistic = float(np.sum((x - trials * p) ** 2) / variance)
    return {"statistic": statistic, "ratio": statistic / x.size, "dof": 2.0 * x.size / term_variance,
            "p_value": two_sided_chi2_p(2.0 * statistic / term_variance, 2.0 * x.size / term_variance)}


def binomial_extremes(values, trials: int, p: float) -> dict[str, dict[str, Any]]:
    """The largest and the smallest of independent Binomial(``trials``, p) values, exact two-sided."""
    x = np.asarray(values, dtype=np.int64)
    n = x.size

    def cdf(m):  # P(X ≤ m)
        return 0.0 if m < 0 else 1.0 if m >= trials else float(special.bdtr(m, trials, p))

    def sf(m):  # P(X > m)
        return 1.0 if m < 0 else 0.0 if m >= trials else float(special.bdtrc(m, trials, p))

    def none_of(prob):  # (1 − prob)^n, accurate for prob near 0
        with np.errstate(divide="ignore"):
            return float(np.exp(n * np.log1p(-prob)))

    def some_of(prob):  # 1 − (1 − prob)^n, accurate for prob near 0
        with np.errstate(divide="ignore"):
            return float(-np.expm1(n * np.log1p(-prob)))

    top, bottom = int(x.max()), int(x.min())
    all_below, any_above = none_of(sf(top)), some_of(sf(top - 1))  # every value ≤ top; one ≥ top
    all_above, any_below = none_of(cdf(bottom - 1)), some_of(cdf(bottom))  # every value ≥ bottom; one ≤
    return {"max": {"statistic": top, "expected": trials * p, "p_below": all_below, "p_above": any_above,
                    "p_value": float(min(1.0, 2.0 * min(all_below, any_above)))},
            "min": {"statistic": bottom, "expected": trials * p, "p_below": any_below, "p_above": all_above,
                    "p_value": float(min(1.0, 2.0 * min(any_below, all_above)))}}


def _bins(expected: np.ndarray, minimum: float) -> list[tuple[int, int]]:
    """Adjacent index ranges [lo, hi) each expecting ≥ ``minimum`` (the last takes the rest)."""
    bins, start, running, left = [], 0, 0.0, float(expected.sum())
    for i, e in enumerate(expected):
        running += float(e)
        left -= float(e)
        if running >= minimum and left >= minimum:
            bins.append((start, i + 1))
            start, running = i + 1, 0.0
    if start < expected.size:
        if bins and running < minimum:
            bins[-1] = (bins[-1][0], expected.size)
        else:
            bins.append((start, expected.size))
    return bins


def binned_goodness_of_fit(values, trials: int, p: float, *, minimum: float = MIN_EXPECTED) -> dict[str, Any] | None:
    """Pearson's χ² of independent Binomial(``trials``, p) values against that law, adjacent values
    binned to expect ≥ ``minimum`` each, the tails pooled into the end bins (upper tail p-value,
    bins − 1 degrees of freedom); None with fewer than two bins."""
    x = np.asarray(values, dtype=np.int64)
    if x.size == 0 or not 0.0 < p < 1.0:
        return None
    lo = int(min(x.min(), max(0.0, special.bdtrik(_TAIL, trials, p) - 1)))
    hi = int(max(x.max(), min(float(trials), special.bdtrik(1.0 - _TAIL, trials, p) + 1)))
    support = np.arange(lo, hi + 1)
    cdf = special.bdtr(support, trials, p)
    pmf = np.diff(np.concatenate(([0.0], cdf)))
    pmf[-1] += 1.0 - cdf[-1]  # the upper tail into the last value; the first already holds P(X ≤ lo)
    expected = x.size * pmf
    observed = np.bincount(x - lo, minlength=support.size).astype(np.float64)
    bins = _bins(expected, minimum)
    if len(bins) < 2:
        return None
    e = np.array([expected[a:b].sum() for a, b in bins])
    o = np.array([observed[a:b].sum() for a, b in bins])
    statistic = float(np.sum((o - e) ** 2 / e))
    return {"statistic": statistic, "dof": len(bins) - 1, "p_value": float(special.chdtrc(len(bins) - 1, statistic)),
            "bins": [[int(support[a]), int(support[b - 1])] for a, b in bins],
            "observed": o.astype(int).tolist(), "expected": e.tolist()}


def hazard_homogeneity(gap_hist, censor_hist, *, minimum: float = MIN_EXPECTED) -> dict[str, Any] | None:
    """The gaps between a row's inclusions against a geometric law of any rate: the hazard of the
    next inclusion, per bin of lags, homogeneous (module docstring); None with fewer than two bins."""
    gaps = np.asarray(gap_hist, dtype=np.float64)
    cens = np.asarray(censor_hist, dtype=np.float64)
    size = max(gaps.size, cens.size)
    gaps, cens = np.pad(gaps, (0, size - gaps.size)), np.pad(cens, (0, size - cens.size))
    if size < 3:
        return None
    at_risk = (np.cumsum(gaps[::-1])[::-1] + np.cumsum(cens[::-1])[::-1])[1:]  # lags 1 … size − 1
    events = gaps[1:]
    total_risk, total_events = float(at_risk.sum()), float(events.sum())
    if not total_risk > 0 or not 0 < total_events < total_risk:
        return None
    rate = total_events / total_risk
    bins = _bins(np.minimum(rate, 1.0 - rate) * at_risk, minimum)
    if len(bins) < 2:
        return None
    # the bins are adjacent and cover every lag; counts are integers, so the sums are exact in any order
    starts = np.array([a for a, _ in bins])
    ended, risk = np.add.reduceat(events, starts), np.add.reduceat(at_risk, starts)
    table = np.stack([ended, risk - ended], axis=1)
    expected = risk[:, None] * np.array([[rate, 1.0 - rate]])
    statistic = float(np.sum((table - expected) ** 2 / expected))
    return {"statistic": statistic, "dof": len(bins) - 1, "p_value": float(special.chdtrc(len(bins) - 1, statistic)),
            "rate": rate, "lags": [[a + 1, b] for a, b in bins], "hazard": (ended / risk).tolist()}


def _exact(violations: int, what: str) -> dict[str, Any]:
    return {"statistic": int(violations), "p_value": 0.0 if violations else 1.0, "exact": what}


def _poisson_tests(g: Mapping[str, Any], q: float) -> dict[str, dict[str, Any] | None]:
    rows, steps = int(g["rows"]), int(g["steps"])
    sizes, counts = np.asarray(g["sizes"]), np.asarray(g["counts"])
    extremes = binomial_extremes(sizes, rows, q) if steps and rows else {"max": None, "min": None}
    never = int(np.count_nonzero(counts == 0))
    p_never = (1.0 - q) ** steps
    lag = None
    if g["pairs"] and 0 < g["pairs_first"] < g["pairs"] and 0 < g["pairs_second"] < g["pairs"]:
        first, second, both, pairs = (int(g[k]) for k in ("pairs_first", "pairs_second", "pairs_both", "pairs"))
        lag = {"statistic": both, "after_drawn": both / first, "after_not_drawn": (second - both) / (pairs - first),
               "p_value": two_sided_hypergeom_p(both, pairs, first, second)}
    return {
        "sizes_dispersion": dispersion(sizes, rows, q),
        "sizes_max": extremes["max"],
        "sizes_min": extremes["min"],
        "sizes_law": binned_goodness_of_fit(sizes, rows, q),
        "counts_dispersion": dispersion(counts, steps, q),
        "counts_law": binned_goodness_of_fit(counts, steps, q),
        "never_drawn": ({"statistic": never, "expected": rows * p_never,
                         "p_value": two_sided_binomial_p(never, rows, p_never)} if rows else None),
        "lag_one": lag,
        "gaps": hazard_homogeneity(g["gap_hist"], g["censor_hist"]),
        "no_duplicates": _exact(int(g["duplicates_in_step"]), "rows drawn twice in one step"),
    }


def _shuffle_tests(g: Mapping[str, Any], batch_size: int) -> dict[str, dict[str, Any] | None]:
    rows, steps, spe = int(g["rows"]), int(g["steps"]), int(g["steps_per_epoch"])
    sizes, counts = np.asarray(g["sizes"]), np.asarray(g["counts"])
    epochs = steps // spe if spe else 0
    keep = spe * batch_size / rows if rows else 1.0
    tests = {
        "batch_size_exact": _exact(int(np.count_nonzero(sizes != batch_size)), f"batches not of {batch_size} rows"),
        "once_per_epoch": _exact(int(g["duplicates_in_epoch"]) + int(g["duplicates_in_step"]),
                                 "rows drawn twice within an epoch"),
        "left_out_dispersion": None, "left_out_law": None, "fresh_permutation": None,
    }
    if epochs >= 2 and 0.0 < keep < 1.0:
        tests["left_out_dispersion"] = dispersion(counts, epochs, keep)
        tests["left_out_law"] = binned_goodness_of_fit(counts, epochs, keep)
    if spe >= 2 and g["consecutive_epochs"]:
        same, pairs = int(g["same_slot"]), int(g["consecutive_epochs"])
        tests["fresh_permutation"] = {"statistic": same, "expected": pairs / spe,
                                      "p_value": two_sided_binomial_p(same, pairs, 1.0 / spe)}
    return tests


def check_sampler(groups: Sequence[Mapping[str, Any]], *, rate: float, batch_size: int,
                  alpha: float = FAMILY_ALPHA) -> dict[str, Any]:
    """The record train.json keeps under ``sampler_check``. ``groups``: per group of rows its
    ``name``, ``claim`` (poisson or shuffle), optionally its own ``rate`` (default ``rate``) and
    the statistics of ``RowLedger.summary``."""
    per_group, tests = [], []
    for g in groups:
        if not int(g["rows"]) or not int(g["steps"]):
            continue
        claim, q = str(g["claim"]), float(g.get("rate", rate))
        found = _poisson_tests(g, q) if claim == "poisson" else _shuffle_tests(g, int(batch_size))
        run = {name: result for name, result in found.items() if result is not None}
        per_group.append({"name": str(g["name"]), "claim": claim, "rate": q, "rows": int(g["rows"]),
                          "steps": int(g["steps"]), "tests": run,
                          "skipped": sorted(k for k, v in found.items() if v is None)})
        tests.extend((str(g["name"]), name, float(result["p_value"])) for name, result in run.items())
    level = alpha / max(1, len(tests))
    failures = [{"group": group, "test": name, "p_value": p} for group, name, p in tests if p <= level]
    for group in per_group:
        group["passed"] = all(float(r["p_value"]) > level for r in group["tests"].values())
    return {
        "checked": True,
        "passed": not failures,
        "privacy_failure": any(f["test"] not in NON_VOIDING for f in failures),
        "rate": float(rate),
        "batch_size": int(batch_size),
        "family_alpha": float(alpha),
        "tests": len(tests),
        "level": level,
        "failures": failures,
        "groups": per_group,
    }


def _problem(failure: Mapping[str, Any], groups: Mapping[str, Mapping[str, Any]]) -> str:
    group = groups.get(failure["group"], {})
    result = group.get("tests", {}).get(failure["test"], {})
    rows, steps, who = group.get("rows", 0), group.get("steps", 0), failure["group"]
    test = failure["test"]
    said = {
        "sizes_dispersion": lambda: f"{who}: batch sizes vary {result.get('ratio', math.nan):.3g}× as much as "
                                    f"Poisson sampling's Binomial({rows:,}, {group.get('rate', math.nan):.4g}) would",
        "sizes_max": lambda: (f"{who}: no batch of {steps:,} holds more than {result.get('statistic')} rows "
                              f"(expected {result.get('expected', math.nan):.4g} a batch; Binomial batches stay this "
                              f"small with probability {result.get('p_below', math.nan):.2g}): batches capped?"
                              if result.get("p_below", 1) < result.get("p_above", 1) else
                              f"{who}: a batch of {result.get('statistic')} rows (expected "
                              f"{result.get('expected', math.nan):.4g}), beyond Binomial({rows:,}, q)'s reach in "
                              f"{steps:,} steps"),
        "sizes_min": lambda: (f"{who}: no batch of {steps:,} holds fewer than {result.get('statistic')} rows "
                              f"(expected {result.get('expected', math.nan):.4g} a batch): batches padded?"
                              if result.get("p_above", 1) < result.get("p_below", 1) else
                              f"{who}: a batch of only {result.get('statistic')} rows (expected "
                              f"{result.get('expected', math.nan):.4g})"),
        "sizes_law": lambda: f"{who}: the batch sizes do not follow Binomial({rows:,}, q)",
        "counts_dispersion": lambda: f"{who}: the rows' participation counts vary {result.get('ratio', math.nan):.3g}× "
                                     f"as much as Binomial({steps:,}, q) would (shuffled or repeated batches, or "
                                     "rows drawn at unequal rates)",
        "counts_law": lambda: f"{who}: the rows' participation counts do not follow Binomial({steps:,}, q)",
        "never_drawn": lambda: f"{who}: {result.get('statistic')} of {rows:,} rows never drawn (expected "
                               f"{result.get('expected', math.nan):.3g})",
        "lag_one": lambda: f"{who}: a row drawn at one step is drawn at the next with frequency "
                           f"{result.get('after_drawn', math.nan):.3g}, after not being drawn "
                           f"{result.get('after_not_drawn', math.nan):.3g}: steps are not independent",
        "gaps": lambda: f"{who}: the gaps between a row's draws are not geometric (hazard by lag "
                        f"{', '.join(f'{h:.2g}' for h in result.get('hazard', [])[:6])}…)",
        "no_duplicates": lambda: f"{who}: {result.get('statistic')} rows drawn twice in one step",
        "batch_size_exact": lambda: f"{who}: {result.get('statistic')} batches not of exactly B rows",
        "once_per_epoch": lambda: f"{who}: {result.get('statistic')} rows drawn twice within one epoch",
        "left_out_dispersion": lambda: f"{who}: the rows left out of an epoch are not drawn afresh",
        "left_out_law": lambda: f"{who}: the rows left out of an epoch are not drawn afresh",
        "fresh_permutation": lambda: f"{who}: {result.get('statistic')} rows at the same step of consecutive epochs "
                                     f"(expected {result.get('expected', math.nan):.3g}): the permutation is not fresh",
    }
    return said.get(test, lambda: f"{who}: {test}")()


def summary_sentence(check: Mapping[str, Any] | None) -> str:
    """The sampler check in words (the dossier's promise section, the rows' note)."""
    if not check:
        return "the rows drawn were not recorded (a run trained before the sampler check existed)"
    if not check.get("checked", False):
        return f"the rows drawn were not checked: {check.get('reason', 'no record')}"
    groups = {g["name"]: g for g in check.get("groups", [])}
    read = "; ".join(f"{g['name']}: {g['rows']:,} rows × {g['steps']:,} steps, {g['claim']} at q = "
                     f"{g.get('rate', check['rate']):.4g}" for g in groups.values())
    if check["passed"]:
        return (f"the rows every step drew were read ({read}): consistent with the claimed samplers "
                f"({check['tests']} tests, family-wise level {check['family_alpha']:g})")
    problems = "; ".join(dict.fromkeys(_problem(f, groups) for f in check["failures"]))
    if not check.get("privacy_failure", True):
        return (f"the rows every step drew were read ({read}): each row at most once an epoch as the accountant "
                f"needs, but the permutation is not uniform: {problems}; the guarantee holds")
    return (f"the rows every step drew ({read}) do not follow the sampler the accountant analyses: {problems}; "
            "the released model exists, but its DP guarantee does not hold")
