"""The sampler's law row by row (issue 45): the row ledger and the sampler check.

Oracles:
- the ledger returns every step's positions as drawn (duplicates and empty steps included),
  and its one-pass summary equals the same statistics counted from the dense inclusion matrix;
- every statistic and p-value of ``dpaudit.dp.sampler_check`` against scipy.stats on the
  ledger's recorded rows (binom, chi2, chisquare, chi2_contingency, fisher_exact), to 1e-9.
Power: each planted sampler bug through the real training loop (TensorFlow step) is flagged
with decided_by = sampler_check, the twin's canary rows included.
Validity: the correct samplers (numpy mirror, the loop's own sampler functions) over 20 seeds
at ε ∈ {1, 4}, released runs and twins, Poisson and shuffle: at most one flag.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpaudit.audit.mechanism_checks import SamplerLedger
from dpaudit.audit.row_ledger import RowLedger, decode_varints, encode_varints
from dpaudit.dp import sampler_check
from dpaudit.metrics.canary.mechanism import mechanism_failure, mechanism_rows
from dpaudit.training import sampling
from dpaudit.training.steps import MechanismPolicy

RTOL = 1e-9


def _ledger(batches, population):
    ledger, kept = RowLedger(population), []
    for idx in batches:
        ledger.drew(idx)
        kept.append(np.sort(np.asarray(idx, dtype=np.int64)))
    return ledger, kept


def _dense(kept, population):
    out = np.zeros((len(kept), population), dtype=np.int64)
    for t, idx in enumerate(kept):
        np.add.at(out[t], idx, 1)
    return out


# ------------------------------------------------------------------ the ledger


def test_varints_round_trip_at_every_width():
    values = np.array([0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**35 + 17, 2**62], dtype=np.int64)
    assert np.array_equal(decode_varints(encode_varints(values)), values)
    assert len(encode_varints(np.array([127]))) == 1 and len(encode_varints(np.array([128]))) == 2
    with pytest.raises(ValueError, match="truncated"):
        decode_varints(encode_varints(np.array([300]))[:1])


def test_ledger_returns_every_step_as_drawn_and_its_summary_is_the_dense_count():
    rng = np.random.default_rng(3)
    n, steps, spe = 500, 120, 12
    batches = [np.flatnonzero(rng.random(n) < 0.08) for _ in range(steps)]
    batches[5] = np.array([7, 3, 3, 499, 0])  # unsorted, one row twice
    batches[9] = np.array([], dtype=np.int64)
    ledger, kept = _ledger(batches, n)
    dense = _dense(kept, n)
    assert np.array_equal(ledger.matrix(), dense)
    assert np.array_equal(ledger.sizes(), [len(b) for b in batches])
    groups = {"all rows": (0, n), "last rows": (400, n)}
    small = ledger.summary(groups, steps_per_epoch=spe, chunk_rows=100)  # many chunks
    whole = ledger.summary(groups, steps_per_epoch=spe)
    for name, (start, stop) in groups.items():
        for key, value in whole[name].items():
            assert np.array_equal(small[name][key], value), (name, key)
        g, block = whole[name], dense[:, start:stop]
        present = block > 0
        assert np.array_equal(g["sizes"], block.sum(axis=1))
        assert np.array_equal(g["counts"], present.sum(axis=0))
        assert g["duplicates_in_step"] == int((block - present).sum())
        # gaps between consecutive inclusions, censored spells after the last one
        gaps, censored = [], []
        for column in present.T:
            when = np.flatnonzero(column)
            gaps.extend(np.diff(when))
            if when.size:
                censored.append(steps - 1 - when[-1])
        assert np.array_equal(g["gap_hist"], np.bincount(gaps, minlength=steps))
        assert np.array_equal(g["censor_hist"], np.bincount(censored, minlength=steps))
        first, second = present[0:steps - 1:2], present[1:steps:2]
        assert (g["pairs_first"], g["pairs_second"], g["pairs_both"], g["pairs"]) == (
            int(first.sum()), int(second.sum()), int((first & second).sum()), first.size)
        epochs = present.reshape(steps // spe, spe, -1).sum(axis=1)
        assert g["duplicates_in_epoch"] == int(np.clip(epochs - 1, 0, None).sum())


def test_ledger_memory_is_far_below_one_byte_per_row_and_step():
    # the default run's sampler: 1,000 rows, q = 0.064, 150 steps
    n, q, steps = 1000, 0.064, 150
    ledger, kept = _ledger(sampling.poisson_batches(n, q, steps, np.random.default_rng(0)), n)
    drawn = sum(k.size for k in kept)
    # one byte a gap below 128 (mean gap ~16; a step's first gap is its first position + 1)
    assert ledger.nbytes <= 1.01 * drawn + steps + 12 * steps
    assert ledger.nbytes / (n * steps) < 0.1


def test_positions_outside_the_population_are_refused():
    with pytest.raises(ValueError, match="position 10, outside the population of 10 rows"):
        RowLedger(10).drew(np.array([1, 10]))
    with pytest.raises(ValueError, match="position -1, outside the population of 10 rows"):
        RowLedger(10).drew(np.array([3, -1]))


# ------------------------------------------------------------------ statistics against scipy


def _summary(batches, n, spe, groups=None):
    ledger, kept = _ledger(batches, n)
    summary = ledger.summary(groups or {"all rows": (0, n)}, steps_per_epoch=spe)
    return summary, _dense(kept, n)


def _two_sided(cdf, sf):
    return min(1.0, 2.0 * min(cdf, sf))


@pytest.mark.parametrize("bug", [None, "shuffled", "truncated"])
def test_poisson_tests_equal_scipy_on_recorded_ledgers(bug):
    n, q, spe, epochs = 400, 0.05, 20, 6
    steps = spe * epochs
    rng = np.random.default_rng(11)
    batches = (sampling.planted_batches(bug, n, q, steps, spe, rng) if bug
               else sampling.poisson_batches(n, q, steps, rng))
    summary, dense = _summary(batches, n, spe, {"all rows": (0, n), "canary rows": (300, n)})
    check = sampler_check.check_sampler([{"name": k, "claim": "poisson", **v} for k, v in summary.items()],
                                        rate=q, batch_size=20)
    for group, (start, stop) in (("all rows", (0, n)), ("canary rows", (300, n))):
        x = dense[:, start:stop] > 0
        rows = stop - start
        tests = next(g for g in check["groups"] if g["name"] == group)["tests"]
        sizes, counts = x.sum(axis=1), x.sum(axis=0)
        # dispersion: Satterthwaite's χ² with the term variance 2 + the binomial's excess kurtosis
        for name, values, trials in (("sizes_dispersion", sizes, rows), ("counts_dispersion", counts, steps)):
            law = stats.binom(trials, q)
            d = float(((values - law.mean()) ** 2).sum() / law.var())
            v = 2.0 + float(law.stats(moments="k"))
            chi = stats.chi2(2 * values.size / v)
            assert tests[name]["statistic"] == pytest.approx(d, rel=RTOL)
            assert tests[name]["p_value"] == pytest.approx(_two_sided(chi.cdf(2 * d / v), chi.sf(2 * d / v)),
                                                           rel=RTOL)
        law = stats.binom(rows, q)
        top, bottom = sizes.max(), sizes.min()
        assert tests["sizes_max"]["p_value"] == pytest.approx(
            _two_sided(law.cdf(top) ** steps, 1 - law.cdf(top - 1) ** steps), rel=RTOL)
        assert tests["sizes_min"]["p_value"] == pytest.approx(
            _two_sided(1 - law.sf(bottom) ** steps, law.sf(bottom - 1) ** steps), rel=RTOL)
        # histograms: the reported bins, counted again, against scipy's chisquare
        for name, values, trials in (("sizes_law", sizes, rows), ("counts_law", counts, steps)):
            if name not in tests:
                continue
            bins = tests[name]["bins"]
            law = stats.binom(trials, q)
            observed = [np.count_nonzero((values >= a) & (values <= b)) for a, b in bins]
            expected = [law.cdf(b) - law.cdf(a - 1) for a, b in bins]
            expected[0], expected[-1] = law.cdf(bins[0][1]), law.sf(bins[-1][0] - 1)
            got = stats.chisquare(observed, np.array(expected) * values.size)
            assert tests[name]["statistic"] == pytest.approx(got.statistic, rel=RTOL)
            assert tests[name]["p_value"] == pytest.approx(got.pvalue, rel=RTOL)
        never, p0 = int((counts == 0).sum()), (1 - q) ** steps
        assert tests["never_drawn"]["p_value"] == pytest.approx(
            _two_sided(stats.binom.cdf(never, rows, p0), stats.binom.sf(never - 1, rows, p0)), rel=RTOL)
        first, second = x[0::2], x[1::2]
        table = [[int((first & second).sum()), int((first & ~second).sum())],
                 [int((~first & second).sum()), int((~first & ~second).sum())]]
        lag = _two_sided(stats.fisher_exact(table, "less").pvalue, stats.fisher_exact(table, "greater").pvalue)
        assert tests["lag_one"]["p_value"] == pytest.approx(lag, rel=RTOL)
        # gaps: per lag the spells at risk and ended, from each row's inclusion times
        at_risk, ended = np.zeros(steps), np.zeros(steps)
        for column in x.T:
            when = np.flatnonzero(column)
            for a, b in zip(when[:-1], when[1:], strict=True):
                at_risk[1:b - a + 1] += 1
                ended[b - a] += 1
            if when.size:
                at_risk[1:steps - when[-1]] += 1
        lags = tests["gaps"]["lags"]
        table = np.array([[ended[a:b + 1].sum(), at_risk[a:b + 1].sum() - ended[a:b + 1].sum()] for a, b in lags])
        got = stats.chi2_contingency(table, correction=False)
        assert tests["gaps"]["statistic"] == pytest.approx(got.statistic, rel=RTOL)
        assert tests["gaps"]["p_value"] == pytest.approx(got.pvalue, rel=RTOL)
    if bug is None:
        assert check["passed"]
    else:
        assert not check["passed"] and check["privacy_failure"]


def test_shuffle_tests_equal_scipy_and_catch_broken_promises():
    n, batch, epochs = 210, 20, 8  # 10 steps an epoch, 10 rows left out of each
    spe = n // batch
    batches = list(sampling.shuffle_batches(n, batch, epochs, np.random.default_rng(2)))
    summary, dense = _summary(batches, n, spe)
    check = sampler_check.check_sampler([{"name": "all rows", "claim": "shuffle", **summary["all rows"]}],
                                        rate=batch / n, batch_size=batch)
    assert check["passed"]
    tests = check["groups"][0]["tests"]
    x = dense > 0
    slots = np.where(x.reshape(epochs, spe, n).any(axis=1), x.reshape(epochs, spe, n).argmax(axis=1), -1)
    both = (slots[1:] >= 0) & (slots[:-1] >= 0)
    same = int((both & (slots[1:] == slots[:-1])).sum())
    assert tests["fresh_permutation"]["p_value"] == pytest.approx(
        _two_sided(stats.binom.cdf(same, both.sum(), 1 / spe), stats.binom.sf(same - 1, both.sum(), 1 / spe)),
        rel=RTOL)
    counts, keep = x.sum(axis=0), spe * batch / n
    law = stats.binom(epochs, keep)
    d = float(((counts - law.mean()) ** 2).sum() / law.var())
    assert tests["left_out_dispersion"]["statistic"] == pytest.approx(d, rel=RTOL)
    # broken promises: a row twice in an epoch and a short batch (exact, void the guarantee)
    broken = [b.copy() for b in batches]
    broken[1][0] = broken[0][0]
    broken[3] = broken[3][:-1]
    summary, _ = _summary(broken, n, spe)
    check = sampler_check.check_sampler([{"name": "all rows", "claim": "shuffle", **summary["all rows"]}],
                                        rate=batch / n, batch_size=batch)
    assert {f["test"] for f in check["failures"]} >= {"once_per_epoch", "batch_size_exact"}
    assert check["privacy_failure"]
    # the same permutation every epoch: recorded, but the per-epoch bound still holds
    repeated = batches[:spe] * epochs
    summary, _ = _summary(repeated, n, spe)
    check = sampler_check.check_sampler([{"name": "all rows", "claim": "shuffle", **summary["all rows"]}],
                                        rate=batch / n, batch_size=batch)
    assert not check["passed"] and not check["privacy_failure"]
    assert "fresh_permutation" in {f["test"] for f in check["failures"]}
    assert "the guarantee holds" in sampler_check.summary_sentence(check)


# ------------------------------------------------------------------ validity (numpy mirror)


def _mirror_check(seed, eps, kind):
    """One correct run's sampler check through SamplerLedger, as MechanismObserver keeps it: the
    loop's own sampler functions, seeded as train_model seeds them ([seed, 1])."""
    n, batch, epochs = (600, 20, 3) if eps == 1.0 else (1000, 64, 10)
    spe, q = n // batch, batch / n
    rng = np.random.default_rng([seed, 1])
    if kind == "shuffle":
        ledger = SamplerLedger("shuffle", n, q, batch, spe)
        for idx in sampling.shuffle_batches(n, batch, epochs, rng):
            ledger.drew(idx)
    else:  # a released run, or a twin whose 300 canary rows share the sampler
        canaries = 300 if kind == "twin" else 0
        ledger = SamplerLedger("poisson", n + canaries, q, batch, spe, canary_rows=canaries,
                               canaries_shared=bool(canaries))
        for idx in sampling.poisson_batches(n + canaries, q, spe * epochs, rng):
            ledger.drew(idx)
    return sampler_check.check_sampler(ledger.groups(), rate=q, batch_size=batch)


def test_correct_samplers_flag_at_most_once_over_20_seeds_at_two_epsilons():
    flags = []
    for eps in (1.0, 4.0):
        for seed in range(20):
            for kind in ("released", "twin", "shuffle"):
                check = _mirror_check(seed, eps, kind)
                assert check["tests"] >= (2 if kind == "shuffle" else 9)
                if not check["passed"]:
                    flags.append((eps, seed, kind, check["failures"]))
    assert len(flags) <= 1, flags


def test_correct_poisson_sampler_keeps_the_family_level_over_600_ledgers():
    # family-wise 1e-3: expected 0.6 flags in 600; five or more has probability 4e-4
    flags = sum(not _mirror_check(seed, 1.0, "twin")["passed"] for seed in range(100, 700))
    assert flags <= 4


# ------------------------------------------------------------------ power through the real loop


@pytest.mark.parametrize("bug", sampling.SAMPLER_BUGS)
def test_planted_sampler_bugs_are_flagged_through_the_training_loop(bug):
    from tests.unit.test_noise_certificate import _decided_by, _train

    info = _train(MechanismPolicy(sampler_bug=bug))
    assert info["planted_bug"] == {"sampler_bug": bug}
    assert not info["sampler_check"]["passed"] and info["sampler_check"]["privacy_failure"]
    # the rest of the mechanism is the claimed one: the noise passes
    assert info["noise_check"]["passed"]
    assert _decided_by(info) == ("above_promise", "sampler_check")
    rows = mechanism_rows(info, None)
    row = next(r for r in rows if r["metric"] == "sampler_check_passed")
    assert row["value_bool"] is False and row["failed"] and "DP guarantee does not hold" in row["note"]


def test_a_correct_run_records_its_ledger_and_passes():
    from tests.unit.test_noise_certificate import _train

    info = _train()
    check, sampler = info["sampler_check"], info["sampler"]
    assert check["passed"] and check["tests"] >= 9 and [g["name"] for g in check["groups"]] == ["all rows"]
    # about a byte a row drawn (gaps of ~30 rows), 12 a step: far below 1 byte per row and step
    assert sampler["ledger_bytes"] <= 1.1 * sampler["rows_drawn"] + 13 * sampler["steps_executed"]
    assert sampler["ledger_bytes_per_row_step"] < 0.1
    assert mechanism_failure(mechanism_rows(info, None)) == (None, None)


def _twin(policy, params, input_canaries=0):
    import logging

    from dpaudit.audit.twin import run_canary_twin
    from tests.unit.test_canary_twin import PARAMS, _frame
    from tests.unit.test_training import SPLITS

    return run_canary_twin(_frame(), SPLITS, {**PARAMS, "epochs": 4, **params}, gradient_canaries=400,
                           input_canaries=input_canaries, gradient_norm_factor=10.0, seed=0, threads=1,
                           log=logging.getLogger("test_sampler_check"), policy=policy)[1]


def test_the_twins_canary_rows_go_through_the_same_tests():
    # shared Poisson sampler: the canary rows are a group of the population's ledger
    record = _twin(MechanismPolicy(), {})
    groups = {g["name"]: g for g in record["sampler_check"]["groups"]}
    assert record["sampler_check"]["passed"] and set(groups) == {"all rows", "canary rows"}
    assert groups["canary rows"]["rows"] == record["gradient_included"]
    # a sampler drawing every row at most once an epoch: the canary rows show it too
    record = _twin(MechanismPolicy(sampler_bug="shuffled"), {})
    failed = {f["group"] for f in record["sampler_check"]["failures"]}
    assert failed == {"all rows", "canary rows"}
    rows = mechanism_rows({"mechanism": "dpsgd"}, record)
    assert mechanism_failure(rows) == ("sampler_check", "twin")
    # shuffled batches: the canaries keep their own Poisson draw at the released q = B/n, checked as
    # Poisson. With included input canaries ⌊n_train/B⌋ exceeds the loop's steps an epoch: each of
    # the loop's epochs must still be one permutation (before issue 45 its epochs straddled two
    # permutations and this check found rows drawn twice within an epoch)
    record = _twin(MechanismPolicy(), {"sampling": "shuffle"}, input_canaries=40)
    groups = {g["name"]: g for g in record["sampler_check"]["groups"]}
    assert record["input_included"] >= 20 and groups["all rows"]["rows"] == 200 + record["input_included"]
    assert record["sampler_check"]["passed"], record["sampler_check"]["failures"]
    assert (groups["all rows"]["claim"], groups["canary rows"]["claim"]) == ("shuffle", "poisson")
    assert groups["canary rows"]["rate"] == pytest.approx(20 / 200, rel=RTOL)
    assert groups["all rows"]["tests"]["once_per_epoch"]["statistic"] == 0


def test_the_claimed_curve_is_built_from_the_accountants_inputs():
    # the accountant is given q/2 while the loop draws at q: the canaries test the claim (q/2)
    record = _twin(MechanismPolicy(accountant_rate_factor=0.5), {})
    q = record["sampling_probability"]
    assert record["accountant_inputs"]["sampling_probability"] == pytest.approx(q / 2, rel=RTOL)
    assert record["claimed_curve"]["parameters"]["sampling_probability"] == pytest.approx(q / 2, rel=RTOL)
    # the accounting check compares the two
    assert not record["accounting_check"]["reproduced"]
    assert mechanism_failure(mechanism_rows({"mechanism": "dpsgd"}, record)) == ("accounting_check", "twin")
