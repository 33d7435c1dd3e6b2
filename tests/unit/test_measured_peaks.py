"""Issue 47: every job's declared memory at or above its measured kernel peak.

bench/measured_peaks.json holds the peak resident memory (VmHWM) of every run of every rule that
declares memory, measured by ``bench/bench_scale.py --record`` (each run's own peak, from its log's
closing line) with the bench's config at each size. A declaration of dpaudit.resources below one
of them fails here: on a cluster that limit kills the job (reference_pool peaked at 3.78 GB against
3,000 MB declared at 2·10^5 rows).
"""

import json
from pathlib import Path

import pytest

from dpaudit.config import validate_config
from dpaudit.resources import declared_for_job

PEAKS = Path(__file__).resolve().parents[2] / "bench" / "measured_peaks.json"
# How far above a peak a declaration may be where the estimate can be that tight (issue 47: 1.5x),
# from which size on: below it a job's fixed part (the interpreter, TensorFlow) dominates.
TIGHT = 1.5
TIGHT_FROM = {"train_model": 10_000, "canary_scores": 10_000, "reference_pool": 10_000, "metric_attacks": 100_000,
              "metric_pmp": 200_000}
# The others, and why not.
LOOSE = {
    "metric_mia": "a metric job's 1,000 MB floor, far above its peak at these sizes (264 MB at 2·10^5)",
    "metric_identifiability": "the metric floor; it reads train.json only",
    "metric_epsilon_star": "the metric floor (520 MB at 2·10^5)",
    "privacy_card": "the metric floor",
    "prepare_dataset": "the 2,000 MB floor of a raw CSV's parsing, which the synthetic data does not exercise",
    "extract_per_example": "a gradient chunk of any model (a Keras model's flat per-example gradients; the MLP's "
                           "factors are smaller): 1.6-1.7x at 2·10^5",
    "pmp_pairs": "declared for metrics.pmp.partners_max partners (256); the pilot inside the job chose 32 here",
}


def _entries():
    data = json.loads(PEAKS.read_text())
    return [(n, size["config"], peak) for n, size in sorted(data["sizes"].items(), key=lambda item: int(item[0]))
            for peak in size["peaks"]]


def test_the_peaks_file_holds_measurements():
    entries = _entries()
    sizes = {int(n) for n, _, _ in entries}
    assert sizes == {10_000, 100_000, 200_000}, sizes
    rules = {peak["rule"] for _, _, peak in entries}
    # every rule of the bench's grid that declares memory and grows with the data was measured
    assert {"prepare_dataset", "train_model", "extract_per_example", "pmp_pairs", "metric_pmp", "reference_pool",
            "canary_scores", "metric_attacks", "metric_mia", "metric_epsilon_star", "privacy_card"} <= rules, rules


@pytest.mark.parametrize(("n", "config", "peak"), _entries(),
                         ids=[f"{n}-{peak['rule']}-{(peak['key'] or '')[:40]}" for n, _, peak in _entries()])
def test_each_declaration_is_at_or_above_its_measured_peak(n, config, peak):
    declared = declared_for_job(peak["rule"], validate_config(json.loads(json.dumps(config))),
                                dataset=peak["dataset"], key=peak["key"],
                                pmp_partners=peak.get("pmp_partners"))["mem_mb"]
    assert declared >= peak["peak_mb"], (
        f"{peak['rule']} at n = {n}: declared {declared} MB below its measured kernel peak {peak['peak_mb']} MB "
        "(bench/measured_peaks.json): raise its estimate in dpaudit.resources")


def test_the_declaration_is_within_1_5_times_the_peak_where_the_estimate_can_be_that_tight():
    rules = {peak["rule"] for _, _, peak in _entries()}
    assert rules == set(TIGHT_FROM) | set(LOOSE), rules ^ (set(TIGHT_FROM) | set(LOOSE))
    for n, config, peak in _entries():
        # metric_pmp of a run the recipes do not apply to reads train.json only: the metric floor
        applies = peak["rule"] != "metric_pmp" or "pmp_partners" in peak
        if peak["rule"] in TIGHT_FROM and int(n) >= TIGHT_FROM[peak["rule"]] and applies:
            declared = declared_for_job(peak["rule"], validate_config(json.loads(json.dumps(config))),
                                        dataset=peak["dataset"], key=peak["key"],
                                        pmp_partners=peak.get("pmp_partners"))["mem_mb"]
            assert declared <= TIGHT * peak["peak_mb"], (n, peak["rule"], declared, peak["peak_mb"])
