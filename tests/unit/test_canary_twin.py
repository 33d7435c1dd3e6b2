"""The white- and black-box canary audit of DP-SGD: the real step code (tiny TF models) and a
numpy mirror of the canaries' observations for the statistical checks."""

import logging

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpaudit.audit.mechanism_checks import MechanismObserver
from dpaudit.audit.twin import plan_canaries, run_canary_twin, twin_observations
from dpaudit.dp import accounting
from dpaudit.dp.canary_power import subsampled_gaussian_llr
from dpaudit.metrics.canary.rows import canary_rows, claimed_curve, recorded_claims, verdict
from dpaudit.training.steps import MechanismPolicy
from tests.unit.test_training import SPLITS
from tests.unit.test_training import _frame as training_frame

LOG = logging.getLogger("test_canary_twin")


def _frame():
    return training_frame(n_train=200, n_hold=80, n_test=40)


# q = 20/200, 2 epochs = 20 steps; δ = 1e-5 keeps the one-run bound's δ term 2mδ = 0.02
# below the 5 % significance with m = 1,000 gradient canaries.
PARAMS = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "learning_rate": 0.05, "optimizer": "sgd",
          "momentum": 0.9, "hidden_units": [8], "clip_norm": 1.0, "target_epsilon": 1.0, "delta": 1e-5,
          "accountant": "rdp", "sampling": "poisson", "seed": 1}


def _twin(policy=None, factor=10.0, input_canaries=40, seed=0, canaries=1000, params=None):
    return run_canary_twin(_frame(), SPLITS, params or PARAMS, gradient_canaries=canaries,
                           input_canaries=input_canaries, gradient_norm_factor=factor, seed=seed, threads=1, log=LOG,
                           policy=policy or MechanismPolicy())


def _rows(scores, record):
    return canary_rows(scores, accountant_epsilon=record["epsilon"], delta=record["delta"], alpha=0.05,
                       one_run_claims=recorded_claims(record), claim_curve=claimed_curve(record))


def _value(rows, metric, threat="white_box", kind="llr"):
    hit = rows[(rows["metric"] == metric) & (rows["threat_model"] == threat) & (rows["score_kind"] == kind)]
    assert len(hit) == 1, (metric, threat, kind)
    return float(hit["value"].iloc[0])


def _verdict(rows):
    return rows.loc[rows["metric"] == "measured_above_promise", "verdict"].iloc[0]


def test_correct_twin_observations_follow_the_subsampled_gaussian_the_auditor_assumes():
    scores, record = _twin()
    assert record["epsilon"] == pytest.approx(1.0, abs=0.01) and record["observed_steps"] == record["steps"] == 20
    white = scores[scores["threat_model"] == "white_box"]
    plain = white[white["score_kind"] == "sum"]
    sigma, q, steps = record["noise_multiplier"], record["sampling_probability"], record["steps"]
    # The plain sum over T steps of u = s + σz: N(0, Tσ²) for an excluded canary; an
    # included one adds Binomial(T, q) draws of 1. Two-sided checks at α = 1e-3 (seeded).
    out = plain.loc[~plain["included"], "score"].to_numpy()
    inc = plain.loc[plain["included"], "score"].to_numpy()
    assert stats.kstest(out / (sigma * np.sqrt(steps)), "norm").pvalue > 1e-3
    shift = inc.mean() - out.mean()
    se = np.sqrt(inc.var() / inc.size + out.var() / out.size)
    assert abs(shift - steps * q) < 3.3 * se
    rows = _rows(scores, record)
    assert _verdict(rows) != "above_promise"
    assert _value(rows, "epsilon_lb_one_run") <= record["epsilon"]
    black = scores[scores["threat_model"] == "black_box"]
    assert len(black) == 40 and black["example_id"].notna().all()


def test_noise_ten_times_too_small_is_caught_and_flagged():
    # Power (issue 17): the step draws σ/10 while the accountant claims ε = 1.
    scores, record = _twin(MechanismPolicy(noise_factor=0.1))
    rows = _rows(scores, record)
    assert _value(rows, "epsilon_lb_one_run") > 1.0
    assert _verdict(rows) == "above_promise"


def test_clipping_disabled_is_caught_and_flagged():
    # Power: clipping off; a canary's gradient (10 C, like an outlier example's) enters
    # unclipped while the noise stays σC.
    scores, record = _twin(MechanismPolicy(clip_factor=float("inf")), input_canaries=0)
    rows = _rows(scores, record)
    assert _value(rows, "epsilon_lb_one_run") > 1.0
    assert _verdict(rows) == "above_promise"


def test_twin_starts_from_the_released_models_initialisation(tmp_path):
    from dpaudit.training.train import train_model

    params = {**PARAMS, "epochs": 1, "target_epsilon": None, "noise_multiplier": 1e-6, "learning_rate": 1e-30}
    released = train_model(_frame(), SPLITS, params, tmp_path / "m.keras", threads=1, log=LOG, observer=MechanismObserver())
    from dpaudit import _tf

    weights = _tf.keras.models.load_model(tmp_path / "m.keras").get_weights()
    plan = plan_canaries(_frame(), SPLITS, gradient_canaries=7, input_canaries=0, gradient_norm=1.0,
                         n_classes=2, seed=0)
    twin = train_model(_frame(), SPLITS, params, None, threads=1, log=LOG, canaries=plan, observer=MechanismObserver())
    twin_weights = twin["canary_net"].get_weights()
    # learning rate 1e-30: the weights stay the initialisation up to 1e-25; the twin is the
    # released architecture (the canaries' coordinates are not weights of the model).
    assert [w.shape for w in twin_weights] == [w.shape for w in weights]
    assert np.abs(weights[0]).min() > 1e-6  # so the check below is not vacuous
    for a, b in zip(twin_weights, weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-25)
    assert released["steps"] == twin["steps"]


def _mirror_scores(rng, m, q, sigma, steps):
    """numpy mirror of the white-box twin: u_t = s_t + σz_t at each canary's coordinate."""
    included = rng.random(m) < 0.5
    sampled = (rng.random((steps, m)) < q) & included
    u = sampled + sigma * rng.standard_normal((steps, m))
    return pd.DataFrame({"included": included, "score": subsampled_gaussian_llr(u, q, sigma),
                         "threat_model": "white_box", "score_kind": "llr"})


def test_correct_dpsgd_mirror_is_flagged_no_more_often_than_the_confidence_allows():
    # Validity over 20 seeds: the Poisson-subsampled Gaussian at the accountant's σ for
    # ε = 2 (q = 0.1, 50 steps, δ = 1e-5). Each audit certifies above ε with probability
    # ≤ 5 %; more than 3 of 20 has probability 0.016 under that bound.
    q, steps, delta, eps = 0.1, 50, 1e-5, 2.0
    sigma = accounting.calibrate_noise(eps, q, steps, delta, "rdp", "poisson")
    claimed = accounting.dpsgd_epsilon(sigma, q, steps, delta, "rdp", "poisson")["epsilon"]
    rng = np.random.default_rng(2024)
    flagged, bounds = 0, []

    def accountant_at(at):
        return accounting.dpsgd_epsilon(sigma, q, steps, at, "rdp", "poisson")["epsilon"]

    for _ in range(20):
        rows = canary_rows(_mirror_scores(rng, 1000, q, sigma, steps), accountant_epsilon=claimed,
                           delta=delta, alpha=0.05, claimed_epsilon=accountant_at)
        flagged += _verdict(rows) == "above_promise"
        bounds.append(_value(rows, "epsilon_lb_one_run"))
    assert flagged <= 3, bounds


def test_verdict_names_the_three_outcomes_and_the_test_that_decided():
    assert verdict([(1.5, 3.0, 1.0)]) == ("above_promise", "distribution_free_bound")
    assert verdict([(0.2, 0.5, 1.0)]) == ("too_weak", "ceilings")
    assert verdict([(0.2, 3.0, 1.0)]) == ("consistent", "distribution_free_bound")
    # each bound against its own claim
    assert verdict([(1.5, 3.0, 2.0), (0.1, 0.5, 1.0)]) == ("consistent", "distribution_free_bound")
    assert verdict([]) == ("too_weak", "ceilings")
    # the claim-curve test decides first; a weak audit says so whatever its ceilings
    assert verdict([(0.2, 0.5, 1.0)], curve_rejected=True) == ("above_promise", "claim_curve_test")
    assert verdict([(0.2, 3.0, 1.0)], curve_rejected=False, detectable_factor=0.4) == (
        "too_weak", "detectable_noise_factor")
    assert verdict([(0.2, 0.5, 1.0)], curve_rejected=False, detectable_factor=0.8) == (
        "consistent", "claim_curve_test")


def test_canary_rows_are_declared_in_the_metric_vocabulary():
    from dpaudit.contract.metrics import metric_rows
    from dpaudit.metrics.canary.rows import not_applicable_rows

    rng = np.random.default_rng(0)
    rows = canary_rows(_mirror_scores(rng, 200, 0.1, 1.0, 10), accountant_epsilon=2.0, delta=1e-5, alpha=0.05,
                       claimed_epsilon=lambda at: 2.5)
    written = metric_rows("canary", rows, dataset="d", run="r")
    flag = written[written["metric"] == "measured_above_promise"]
    assert flag["value_bool"].notna().all() and flag["value"].isna().all()
    assert set(written["metric"]) == {"epsilon_lb_one_run", "epsilon_lb_one_run_fdp", "epsilon_gdp_estimate",
                                      "measured_above_promise"}
    curve = claimed_curve({"noise_multiplier": 1.0, "sampling_probability": 0.1, "steps": 10,
                           "sampling": "poisson", "accountant_profile": [[1e-5, 2.5]]})
    rows = canary_rows(_mirror_scores(rng, 200, 0.1, 1.0, 10), accountant_epsilon=2.0, delta=1e-5, alpha=0.05,
                       claimed_epsilon=lambda at: 2.5, claim_curve=curve,
                       detectable={"factor": 0.7, "power": 0.8, "repetitions": 50, "seed": 0})
    written = metric_rows("canary", rows, dataset="d", run="r")
    assert {"claim_curve_rejected", "epsilon_lb_many_trials", "detectable_noise_factor"} <= set(written["metric"])
    flag = written[written["metric"] == "measured_above_promise"]
    assert flag["decided_by"].iloc[0] == "claim_curve_test"
    na = metric_rows("canary", not_applicable_rows("baseline"), dataset="d", run="r")
    assert na["value_bool"].isna().all() and not na["applicable"].any()


def test_privacy_card_ladder_copies_the_rows_and_flags_a_broken_run_in_red():
    from dpaudit.report.cards import canary_ladder_html

    rng = np.random.default_rng(3)
    leaky = _mirror_scores(rng, 1000, 0.1, 0.05, 20)  # σ far below what ε = 1 needs
    rows = canary_rows(leaky, accountant_epsilon=1.0, delta=1e-5, alpha=0.05, claimed_epsilon=lambda at: 1.2)
    mia = pd.DataFrame({"metric": ["epsilon_lower_bound"], "value": [0.25]})
    page = canary_ladder_html(rows, mia)
    assert "MEASURED ABOVE THE PROMISE" in page and "#b00020" in page
    one_run = _value(rows, "epsilon_lb_one_run")
    assert f"{one_run:.3f}" in page and "0.250" in page
    assert "family <code>canary</code> disabled" in canary_ladder_html(None, mia)


# ---------------------------------------------------------------- issue 22: the real step's power and
# the independence of the canaries. Tiny model, q = 0.1, 4 epochs = 40 steps, ε = 1, 2,000 gradient
# canaries; each planted bug below is a bug of the data path or the noise that a clone could carry.

POWER_PARAMS = {**PARAMS, "epochs": 4}


def _claim_test(policy, canaries=2000):
    scores, record = _twin(policy, input_canaries=0, canaries=canaries, params=POWER_PARAMS)
    rows = _rows(scores, record)
    flag = rows[rows["metric"] == "measured_above_promise"].iloc[0]
    curve = rows[rows["metric"] == "claim_curve_rejected"].iloc[0]
    return record, bool(curve["value_bool"]), flag


def test_correct_twin_is_not_rejected_by_the_claim_curve_test():
    record, rejected, flag = _claim_test(MechanismPolicy())
    assert record["canary_sampler"] == "shared_poisson" and record["norm_checks"] > 0
    assert not rejected and flag["verdict"] != "above_promise"


@pytest.mark.parametrize(("policy", "canaries"), [(MechanismPolicy(noise_factor=0.5), 2000),
                                                  (MechanismPolicy(clip_factor=2.0), 2000),
                                                  (MechanismPolicy(sample_rate_factor=2.0), 4000)],
                         ids=["noise_x0.5", "data_clipped_at_2C", "data_sampled_at_2q"])
def test_planted_bugs_in_the_real_step_are_rejected_by_the_claim_curve_test(policy, canaries):
    # Measured p-values (seed 0) at alpha 0.05 over 40 steps: 0.017 and 0.0057 with 2,000 canaries; the
    # doubled rate is the weakest signal: p = 0.038, then 0.084 once the noise came from the step's own
    # generator (another draw of the same law; seed 1: 0.056), so it gets 4,000 canaries (p = 0.0011,
    # seed 1: 0.0035).
    record, rejected, flag = _claim_test(policy, canaries)
    assert record["planted_bug"] == policy.as_dict()
    assert rejected and flag["verdict"] == "above_promise" and flag["decided_by"] == "claim_curve_test"


def test_a_fast_path_norm_that_is_not_the_gradients_stops_the_twin():
    with pytest.raises(RuntimeError, match=r"per-example gradient norm of example_id \d+ at step 1 .* one tape"):
        _twin(MechanismPolicy(norm_factor=0.5), input_canaries=0, canaries=10)


def test_microbatch_group_norms_are_checked_and_a_wrong_one_stops_the_twin():
    """issue 32: the microbatch path's group norms get the per-example paths' norm check (one tape
    of the group's mean loss)."""
    params = {**PARAMS, "microbatches": 4}
    scores, record = _twin(input_canaries=0, canaries=10, params=params)
    assert record["dp_implementation"] == "microbatch_group_gradients" and record["norm_checks"] > 0
    assert record["noise_check"]["passed"] and record["accounting_check"]["reproduced"]
    with pytest.raises(RuntimeError, match=r"norm of microbatch group \d+ at step 1 .* one tape"):
        _twin(MechanismPolicy(norm_factor=0.5), input_canaries=0, canaries=10, params=params)


def test_norm_check_passes_on_the_masked_ghost_path_with_dropout():
    scores, record = _twin(input_canaries=0, canaries=10, params={**PARAMS, "dropout": 0.3})
    assert record["dp_implementation"] == "masked_ghost_clipping" and record["norm_checks"] > 0


def _twin_arrays(m=400, epochs=4):
    from dpaudit.training.train import train_model

    plan = plan_canaries(_frame(), SPLITS, gradient_canaries=m, input_canaries=0, gradient_norm=10.0,
                         n_classes=2, seed=0)
    info = train_model(_frame(), SPLITS, {**PARAMS, "epochs": epochs}, None, threads=1, log=LOG, canaries=plan, observer=MechanismObserver())
    return plan, info


def test_canary_sampling_bits_are_independent_bernoulli_q_across_canaries_and_steps():
    plan, info = _twin_arrays(m=1000, epochs=6)
    sampled = info["canary_sampled"]  # steps x m
    q = info["sampling_probability"]
    included = plan.gradient_included
    assert not sampled[:, ~included].any()  # an excluded canary is never sampled
    bits = sampled[:, included].astype(np.float64)
    t, k = bits.shape
    # Rate: Binomial(t·k, q), two-sided z < 4.
    assert abs(bits.mean() - q) < 4 * np.sqrt(q * (1 - q) / bits.size)
    # Pairs across canaries (same step, neighbouring canaries) and across steps (same canary,
    # consecutive steps): both-sampled frequency q² under independence; z < 4 for each.
    across = (bits[:, :-1] * bits[:, 1:]).mean()
    over_time = (bits[:-1] * bits[1:]).mean()
    for observed, count in ((across, t * (k - 1)), (over_time, (t - 1) * k)):
        assert abs(observed - q**2) < 4 * np.sqrt(q**2 * (1 - q**2) / count)
    # Per-step counts across canaries: Binomial(k, q) (dispersion within 4 standard errors of 1).
    counts = bits.sum(axis=1)
    dispersion = counts.var(ddof=1) / (k * q * (1 - q))
    assert abs(dispersion - 1) < 4 * np.sqrt(2 / (t - 1))


def test_excluded_canary_observations_are_independent_gaussian_noise():
    plan, info = _twin_arrays(m=400, epochs=6)
    sigma = info["noise_multiplier"]
    # reconstructed from the canary coordinates' consecutive weights (SGD with momentum 0.9)
    u = twin_observations(info, PARAMS)[:, ~plan.gradient_included] / sigma  # steps x m_out
    # N(0, 1) after dividing by σ: KS at 1e-3, and the pairwise correlation of coordinates
    # within 4/√steps of 0 on average (mean |r| of independent columns ≈ 0.8/√steps).
    assert stats.kstest(u.ravel(), "norm").pvalue > 1e-3
    r = np.corrcoef(u.T)
    off = r[~np.eye(len(r), dtype=bool)]
    assert abs(off.mean()) < 4 / np.sqrt(u.shape[0] * len(r))
    assert np.abs(off).mean() < 1.2 * np.sqrt(2 / np.pi) / np.sqrt(u.shape[0])


def test_data_logits_do_not_depend_on_the_canaries():
    # Same plan (inclusion bits, hence the same sampler draws) with canary gradients of norm
    # 1·C and 10·C, and with noise off on the canaries' side only through their values: every
    # data weight, hence every data logit, is bit-identical.
    from dpaudit.training.models import features, predict_logits
    from dpaudit.training.train import train_model

    logits = []
    for norm in (1.0, 10.0):
        plan = plan_canaries(_frame(), SPLITS, gradient_canaries=50, input_canaries=0, gradient_norm=norm,
                             n_classes=2, seed=0)
        info = train_model(_frame(), SPLITS, {**PARAMS, "epochs": 2}, None, threads=1, log=LOG, canaries=plan, observer=MechanismObserver())
        x = features(_frame()[_frame()["split"] == SPLITS["members"]])
        logits.append(predict_logits(info["canary_net"], x))
        observations = twin_observations(info, PARAMS)
    np.testing.assert_array_equal(logits[0], logits[1])
    assert np.abs(observations).max() > 0


def test_verdict_sentence_says_what_the_audit_could_have_caught():
    from dpaudit.metrics.canary.rows import verdict_sentence

    rng = np.random.default_rng(5)
    curve = claimed_curve({"noise_multiplier": 1.0, "sampling_probability": 0.1, "steps": 10,
                           "sampling": "poisson", "accountant_profile": []})
    detectable = {"factor": 0.72, "power": 0.8, "repetitions": 50, "seed": 0}
    clean = canary_rows(_mirror_scores(rng, 2000, 0.1, 1.0, 10), accountant_epsilon=2.0, delta=1e-5, alpha=0.05,
                        claimed_epsilon=lambda at: 2.5, claim_curve=curve, detectable=detectable)
    outcome, sentence = verdict_sentence(clean)
    assert outcome == "consistent" and sentence.startswith(
        "consistent with the promise: the canaries stay above the accountant's claimed trade-off curve at all ")
    assert sentence.endswith("; this audit rejects, 8 times in 10, an implementation whose noise is below 0.72× the "
                             "claim")
    weak = canary_rows(_mirror_scores(rng, 2000, 0.1, 1.0, 10), accountant_epsilon=2.0, delta=1e-5, alpha=0.05,
                       claimed_epsilon=lambda at: 2.5, claim_curve=curve, detectable={**detectable, "factor": 0.3})
    outcome, sentence = verdict_sentence(weak)
    assert outcome == "too_weak" and "below 0.30× the claim" in sentence
    leaky = canary_rows(_mirror_scores(rng, 2000, 0.1, 0.4, 10), accountant_epsilon=2.0, delta=1e-5, alpha=0.05,
                        claimed_epsilon=lambda at: 2.5, claim_curve=curve, detectable=detectable)
    outcome, sentence = verdict_sentence(leaky)
    assert outcome == "above_promise" and "below the accountant's claimed trade-off curve" in sentence


def test_the_workflow_twin_reuses_the_released_noise_and_refuses_another_mechanism(tmp_path, caplog):
    # canary_scores (the workflow's entry) gives the twin the released run's σ from its
    # train.json instead of calibrating it again; the twin's own accountant ε, q and steps must
    # then be the released run's. Oracle: train_model's own train.json for the same run.
    from dpaudit.audit.twin import canary_scores
    from dpaudit.training.train import train_model

    frame = _frame()
    released = train_model(frame, SPLITS, PARAMS, tmp_path / "m.keras", threads=1, log=LOG, observer=MechanismObserver())
    options = {"gradient_canaries": 200, "input_canaries": 10, "gradient_norm_factor": 10.0, "seed": 0,
               "confidence": 0.95}
    caplog.clear()  # the released run's own calibration line
    with caplog.at_level(logging.INFO):
        _, record = canary_scores(frame, SPLITS, PARAMS, released, options, threads=1, log=LOG, run="r")
    assert any("audit twin:" in r.getMessage() for r in caplog.records)  # INFO lines are captured
    assert not any("calibrated noise_multiplier" in r.getMessage() for r in caplog.records)
    assert record["noise_multiplier"] == released["noise_multiplier"]
    for key in ("sampling_probability", "steps", "epsilon"):
        assert record[key] == pytest.approx(released[key], rel=1e-12)
    # a train.json of another mechanism (ε of a longer run) is refused by name
    with pytest.raises(RuntimeError, match="epsilon=.*the twin would not audit the released mechanism"):
        canary_scores(frame, SPLITS, PARAMS, {**released, "epsilon": released["epsilon"] * 1.5}, options,
                      threads=1, log=LOG, run="r")


def test_the_twin_records_the_claimed_curve_the_readers_use_bit_for_bit(tmp_path):
    # audit.json carries the claimed curve (issue 23: metric_canary and plot_canary read it and
    # import no dp_accounting). Oracle: the curve computed again from the record's accountant
    # event and profile points; after a JSON round trip every FNR is the same float.
    import json
    import subprocess
    import sys

    from dpaudit.dp.tradeoff import twin_tradeoff
    from dpaudit.io import read_json, write_json

    _, record = _twin(canaries=50, input_canaries=0)
    write_json(tmp_path / "audit.json", record)
    recorded = read_json(tmp_path / "audit.json")
    alpha = np.concatenate([np.geomspace(1e-9, 0.5, 400), np.linspace(0.5, 1.0, 101)])
    expected = twin_tradeoff(record)
    read_back = claimed_curve(recorded)
    np.testing.assert_array_equal(read_back.fnr(alpha), expected.fnr(alpha))
    assert read_back.parameters == json.loads(json.dumps(expected.parameters))
    assert read_back.describe() == expected.describe()
    # reading it loads no accountant
    code = ("import sys; from dpaudit.io import read_json; from dpaudit.metrics.canary.rows import claimed_curve; "
            f"claimed_curve(read_json({str(tmp_path / 'audit.json')!r})).fnr(0.1); "
            "assert 'dp_accounting' not in sys.modules, 'dp_accounting imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_run_the_family_does_not_audit_loads_no_statistics():
    # a baseline's metric_canary job writes its not-applicable row without the statistics modules
    # (and the scipy.optimize they import), which rows.py imports only where rows are computed
    import subprocess
    import sys

    code = ("import sys; from dpaudit.metrics.canary.rows import run_canary_metrics; "
            "run_canary_metrics({'mechanism': 'baseline'}, None, None, {}, delta=1e-5); "
            "loaded = [m for m in ('scipy.optimize', 'dpaudit.dp.canary_bounds', 'dpaudit.dp.canary_power') "
            "if m in sys.modules]; assert not loaded, loaded")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_more_input_canaries_than_non_members_is_a_one_line_refusal():
    from dpaudit.logs import InputRefusal

    # a Refusal: the job prints one line, no traceback (dpaudit.logs.job_logging, issue 46)
    with pytest.raises(InputRefusal, match=r"81 input canaries requested but the non-member split 'holdout' has 80 "
                                           r"rows; set metrics.canary.input_canaries <= 80"):
        plan_canaries(_frame(), SPLITS, gradient_canaries=0, input_canaries=81, gradient_norm=1.0, n_classes=2,
                      seed=0)


def test_a_shuffled_twin_with_input_canaries_reproduces_its_accounting():
    """Under shuffling the twin's input canaries join the rows (B of N + m a step), so each row is
    drawn at B/(N + m) < the accountant's q = B/N, still at most once an epoch: fewer draws than
    accounted, recorded as a note, not a failed check (it failed before: q = 0.1 against 0.0939)."""
    scores, record = _twin(input_canaries=20, canaries=10, params={**PARAMS, "sampling": "shuffle"})
    check = record["accounting_check"]
    assert check["reproduced"], check["problems"]
    assert check["sampler_rate"] < check["accountant_inputs"]["sampling_probability"]
    assert any("fewer draws than accounted" in note for note in check["notes"])
    assert record["sampler_check"]["passed"]


def test_an_accountant_given_a_lower_rate_than_shuffling_drew_fails():
    from dpaudit.dp.accounting_check import reproduce_accounting

    loop = {"sampling": "shuffle", "population": 1000, "rate": 0.064, "rows_drawn": 64 * 150, "steps_executed": 150,
            "steps_per_epoch": 15, "batch_size": 64}
    check = reproduce_accounting(published_epsilon=4.0, delta=1e-5, accountant_inputs={
        "noise_multiplier": 1.0, "sampling_probability": 0.032, "steps": 150, "delta": 1e-5}, loop=loop,
        noise_multiplier_drawn=1.0, noise_check=None, accountant="rdp")
    assert not check["reproduced"] and "the accountant was given q = 0.032" in check["problems"][0]
