"""The weight certificate (issue 45): the weights moved only by the optimizer's rule applied to the
certified update, and the white-box canaries read from their coordinates' consecutive states.

Oracles:
- TensorFlow's own optimizer kernels (tf_keras' legacy SGD, momentum, Adam) applied to random
  states and updates over nine orders of magnitude: the ledger's rule in float64 agrees with every
  value they produce within its rounding bound (largest deviation < 8 rounding units; the pass
  level is ``TOLERANCE`` = 64);
- on clean runs of the real step, the residual read from the weights (the update recovered from
  consecutive weights, or Adam's first moment, with the inverse rule, times the divisor, minus the
  numpy oracle's clipped sum of test_training) equals the noise monitor's residual (update ×
  divisor − the path's clipped sum) to 1e-3·σC, for SGD, momentum 0.9 and Adam on every
  dp_implementation (float32 weights: the recovered update carries ~1e-7·|θ|/η of rounding);
- the canaries' observations reconstructed from their states equal the noise monitor's residual
  at their coordinates plus their clipped gradient, to 1e-3·σ.
Power: stray updates planted through the real TensorFlow step (``MechanismPolicy.stray_update``)
and the vectorized optimizer's noise at 0.8σ are flagged with decided_by noise_check, naming the
variable and the update; a weight moved between two steps by the loop is too.
Validity: 120 correct trainings (five gradient paths × three optimizers × ε ∈ {1, 4} × 4 seeds,
tiny models; the 20-seed version is bench/bench_noise_check.py --validity) flag at most once.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.audit.mechanism_checks import MechanismObserver, monitor_for
from dpaudit.audit.twin import plan_canaries, twin_observations
from dpaudit.audit.weight_certificate import (
    TOLERANCE,
    OptimizerRule,
    RuleLedger,
    updates_from_states,
)
from dpaudit.audit.weight_monitor import WeightMonitor
from dpaudit.dp import accounting, noise_certificate
from dpaudit.metrics.canary.mechanism import mechanism_failure, mechanism_rows
from dpaudit.metrics.canary.rows import verdict
from dpaudit.training.models import build_mlp, logits_model
from dpaudit.training.steps import MechanismPolicy, build_train_step
from dpaudit.training.train import train_model

from .test_training import SPLITS, _frame, numpy_clipped_sum, numpy_microbatch_clipped_sum

tf, keras = _tf.tf, _tf.keras
LOG = logging.getLogger("test_weight_certificate")

RULES = {"sgd": {"optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.0},
         "momentum": {"optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.9},
         "adam": {"optimizer": "adam", "learning_rate": 0.01, "momentum": 0.0}}


def _optimizer(rule: dict):
    if rule["optimizer"] == "sgd":
        return keras.optimizers.legacy.SGD(learning_rate=rule["learning_rate"], momentum=rule["momentum"])
    return keras.optimizers.legacy.Adam(learning_rate=rule["learning_rate"])


def _wide(rng, shape):
    """Values of random sign over nine orders of magnitude, some exactly zero."""
    values = np.sign(rng.normal(size=shape)) * 10.0 ** rng.uniform(-6, 3, size=shape)
    values[rng.random(shape) < 0.05] = 0.0
    return values.astype(np.float32)


# ------------------------------------------------------------------ the rule against TF's kernels


@pytest.mark.parametrize("rule", [
    {"optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.0},
    {"optimizer": "sgd", "learning_rate": 3.0, "momentum": 0.9},
    {"optimizer": "sgd", "learning_rate": 1e-4, "momentum": 0.5},
    {"optimizer": "adam", "learning_rate": 1e-3, "momentum": 0.0},
    {"optimizer": "adam", "learning_rate": 0.5, "momentum": 0.0},
], ids=["sgd", "momentum_lr3", "momentum_lr1e-4", "adam", "adam_lr0.5"])
def test_rule_agrees_with_tensorflow_kernels_within_its_rounding_bound(rule):
    rng = np.random.default_rng(0)
    shapes = [(40, 30), (30,), (7, 3, 2)]
    variables = [tf.Variable(_wide(rng, s)) for s in shapes]
    opt = _optimizer(rule)
    monitor = WeightMonitor(variables=variables, optimizer=opt, rule=OptimizerRule(**rule))

    @tf.function(autograph=False)
    def apply(*updates):
        monitor.observe(updates)
        opt.apply_gradients(zip(updates, variables, strict=True), experimental_aggregate_gradients=False)

    for _ in range(40):  # several blocks of 8..256 rows, and their joins
        apply(*(tf.constant(_wide(rng, s)) for s in shapes))
        monitor.after_step()
    record = monitor.finish()
    assert record["passed"] and record["updates"] == record["compared"] == 40, record["failures"]
    assert record["largest_deviation"] < 8.0 < TOLERANCE


def test_ledger_names_the_variable_and_the_update_of_a_small_departure():
    rule = OptimizerRule("sgd", 0.1, 0.9)
    rng = np.random.default_rng(1)
    theta, accum = rng.normal(size=6), np.zeros(6)
    rows = []
    for t in range(1, 6):
        u = rng.normal(size=6)
        rows.append(np.concatenate([theta, accum, [t - 1.0], u]))
        (theta, accum), _ = rule.step(theta, [accum], u, np.array([t - 1.0]), 2.0 ** -23)
        if t == 3:  # one coordinate of the second variable moves by 1 % of a typical step after update 3
            theta = theta.copy()
            theta[4] += 1e-2 * 0.1
    ledger = RuleLedger(rule, ["a", "b"], [4, 2], [], [], eps=2.0 ** -23)
    ledger.add(np.array(rows))
    record = ledger.finish(np.concatenate([theta, accum, [5.0]]))
    assert not record["passed"] and record["updates"] == 5
    assert record["failures"] == [{"variable": "b", "after_update": 3, "deviation": pytest.approx(
        record["largest_deviation"])}]
    assert record["largest_deviation"] > 10 * TOLERANCE


@pytest.mark.parametrize("name", sorted(RULES))
def test_ledger_record_is_the_same_whatever_the_blocks_and_chunks(monkeypatch, name):
    """The ledger compares each row with the next however the rows arrive: at once, in blocks of 4,
    or in chunks of 1 and 2 rows inside a block (``CHUNK_VALUES``); the record is identical, and a
    departure after update 6 (a chunk's and a block's edge for some of them) is named the same."""
    from dpaudit.audit import weight_certificate

    rule = OptimizerRule(**RULES[name])
    rng = np.random.default_rng(3)
    p, slots = 6, len(rule.slots)
    theta, state, rows = rng.normal(size=p), [np.abs(rng.normal(size=p)) * 1e-3 for _ in range(slots)], []
    for t in range(11):
        u = rng.normal(size=p)
        rows.append(np.concatenate([theta, *state, [float(t)], u]).astype(np.float32))
        values, _ = rule.step(rows[-1][:p].astype(np.float64), [rows[-1][p * (1 + j):p * (2 + j)].astype(np.float64)
                                                                for j in range(slots)], u, np.array([float(t)]),
                              2.0 ** -23)
        theta, *state = values
        if t == 6:
            theta = theta + np.r_[0.0, 0.0, 0.0, 0.0, 1e-2, 0.0]
    rows = np.array(rows)
    final = np.concatenate([theta, *state, [11.0]])

    def record(blocks, chunk_rows=None):
        if chunk_rows is not None:
            monkeypatch.setattr(weight_certificate, "CHUNK_VALUES", chunk_rows * rows.shape[1])
        ledger = RuleLedger(rule, ["a", "b"], [4, 2], [], [], eps=2.0 ** -23)
        ledger.start(rows[0, :ledger.state_width])
        for at in range(0, len(rows), blocks):
            ledger.add(rows[at:at + blocks])
        monkeypatch.undo()
        return ledger.finish(final)

    want = record(len(rows))
    assert not want["passed"] and want["updates"] == 11 and want["compared"] == 11
    assert [(f["variable"], f["after_update"]) for f in want["failures"]] == [("b", 7)]
    for blocks, chunk_rows in ((4, None), (len(rows), 1), (len(rows), 2), (4, 2), (1, None)):
        assert record(blocks, chunk_rows) == want, (blocks, chunk_rows)


# ------------------------------------------------------------------ the residual from the weights


def _tiny(seed, dropout=0.0):
    tf.keras.utils.set_random_seed(seed)
    return logits_model(build_mlp(3, {"hidden_units": [4], "n_classes": 3, "dropout": dropout}, seed=seed))


PATHS = [("fast_gradient_clipping", None, 0.0), ("masked_ghost_clipping", None, 0.3),
         ("microbatch_group_gradients", 4, 0.0), ("layerwise_clipping", None, 0.0), ("vectorized_optimizer", None, 0.0)]


@pytest.mark.parametrize("optimizer", list(RULES))
@pytest.mark.parametrize(("implementation", "microbatches", "dropout"), PATHS, ids=[p[0] for p in PATHS])
def test_residual_from_the_weights_equals_the_residual_from_the_update(optimizer, implementation, microbatches,
                                                                       dropout):
    _tf.configure(2, 0)
    rule = RULES[optimizer]
    net = _tiny(3, dropout)
    steps, clip, sigma, batch, divisor = 12, 1.0, 1.0, 8, 10.0
    rng = np.random.default_rng(4)
    masks = [(rng.random((batch, 4)) >= dropout).astype(np.float32) / (1 - dropout)] if dropout else None
    noise = monitor_for(net, steps=steps, seed=0)
    assert all(w == size for w, size in zip(noise.widths, noise.sizes, strict=True))  # every coordinate sampled
    observer = MechanismObserver()
    step, _, opt = build_train_step(
        net, mechanism="dpsgd", optimizer=rule["optimizer"], learning_rate=rule["learning_rate"],
        momentum=rule["momentum"], clip_norm=clip, noise_multiplier=sigma, expected_batch_size=divisor,
        implementation=implementation, microbatches=microbatches, noise_monitor=noise,
        dropout_masks=(lambda m: [tf.constant(masks[0])]) if dropout else None,
        weight_monitor=observer.weight_monitor)
    k = len(net.trainable_variables)
    states, clipped = [], []

    def state():
        slots = [opt.get_slot(v, "m").numpy() for v in net.trainable_variables] if optimizer == "adam" else []
        return [v.numpy().astype(np.float64) for v in net.trainable_variables], slots

    states.append(state())
    for _ in range(steps):
        x = (rng.normal(size=(batch, 3)) * 2).astype(np.float32)
        y = rng.integers(0, 3, batch)
        weights = [v.numpy() for v in net.trainable_variables]
        if microbatches:
            c, _ = numpy_microbatch_clipped_sum(weights, x, y, clip, microbatches)
        else:
            c, _ = numpy_clipped_sum(weights, x, y, clip, masks)
        clipped.append(c)
        step(tf.constant(x), tf.constant(y))
        states.append(state())
    got = noise.statistics()["samples"]  # [steps, all coordinates]: the residual from the update
    from_weights = []
    for i in range(k):
        layers = [0] if optimizer != "adam" else [0, 1]
        stacked = np.stack([np.stack([s[0][i], *([s[1][i]] if optimizer == "adam" else [])]) for s in states])
        u = updates_from_states(OptimizerRule(**rule), stacked[:, layers])
        # the microbatch path divides by the number of groups k, the others by B
        from_weights.append((u * (microbatches or divisor) - np.stack([c[i] for c in clipped])).reshape(steps, -1))
    from_weights = np.concatenate(from_weights, axis=1)
    assert np.max(np.abs(from_weights - got)) < 1e-3 * sigma * clip
    record = observer.weights.finish()
    assert record["passed"] and record["updates"] == steps and record["largest_deviation"] < 8.0


def test_canary_observations_read_from_their_states_are_the_noise_they_carry():
    """For SGD, momentum 0.9 and Adam: the twin's white-box observations, reconstructed from the canary
    coordinates' consecutive states, equal the noise monitor's residual at those coordinates plus
    their clipped gradient (C when sampled: gradient norm 10·C), ÷ C."""
    frame = _frame(n_train=200, d=4)
    for rule in RULES.values():
        params = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "hidden_units": [4], "clip_norm": 1.5,
                  "target_epsilon": 2.0, "delta": 1e-4, "seed": 2, **rule}
        plan = plan_canaries(frame, SPLITS, gradient_canaries=30, input_canaries=0, gradient_norm=15.0, n_classes=2,
                             seed=0)
        observer = MechanismObserver()
        info = train_model(frame, SPLITS, params, None, threads=2, log=LOG, canaries=plan, observer=observer)
        observations = twin_observations(info, params)  # [steps, m]
        stats = observer.monitor.statistics()
        width = stats["sample_columns"][-1]
        index = observer.monitor.sample_index[-1]  # the canary coordinates the monitor samples
        residual = stats["samples"][:, -width:]
        sampled = info["canary_sampled"][:, index]
        expected = residual / params["clip_norm"] + sampled
        assert observations.shape == info["canary_sampled"].shape
        np.testing.assert_allclose(observations[:, index], expected, atol=1e-3 * info["noise_multiplier"])
        assert info["noise_check"]["passed"] and info["noise_check"]["weights"]["passed"]


# ------------------------------------------------------------------ power through the real step

POWER = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "hidden_units": [8], "clip_norm": 1.0,
         "target_epsilon": 4.0, "delta": 1e-4, "seed": 5, "optimizer": "sgd", "momentum": 0.9}


def _train(policy, **overrides):
    with tempfile.TemporaryDirectory(prefix="dpaudit-weights-") as folder:
        return train_model(_frame(n_train=300, d=6), SPLITS, {**POWER, **overrides}, Path(folder) / "model.keras",
                           threads=2, log=LOG, policy=policy, observer=MechanismObserver())


def _decided_by(info):
    failed, _ = mechanism_failure(mechanism_rows(info, None))
    return verdict([], mechanism_failed=failed)


@pytest.mark.parametrize(("policy", "overrides", "variable"), [
    (MechanismPolicy(stray_update="extra_step"), {}, "dense_0/kernel:0"),
    (MechanismPolicy(stray_update="extra_step"), {"optimizer": "adam", "learning_rate": 0.01}, "dense_0/kernel:0"),
    (MechanismPolicy(stray_update="second_optimizer"), {}, "dense_0/kernel:0"),
    (MechanismPolicy(stray_update="second_optimizer"), {"dp_implementation": "layerwise_clipping"}, "dense_0/kernel:0"),
    (MechanismPolicy(stray_update="data_state"), {}, "planted_state:0 (non-trainable)"),
    (MechanismPolicy(stray_update="data_state"), {"dp_implementation": "vectorized_optimizer"},
     "planted_state:0 (non-trainable)"),
], ids=["extra_step", "extra_step_adam", "second_optimizer", "second_optimizer_layerwise", "data_state",
        "data_state_vectorized"])
def test_stray_updates_are_flagged_naming_the_variable_and_the_update(policy, overrides, variable):
    info = _train(policy, **overrides)
    assert info["planted_bug"] == policy.as_dict()
    weights = info["noise_check"]["weights"]
    assert not weights["passed"] and weights["failures"][0] == {
        "variable": variable, "after_update": 1, "deviation": pytest.approx(weights["failures"][0]["deviation"])}
    assert weights["failures"][0]["deviation"] > 1e3 * TOLERANCE  # ≥ 1e5 rounding units; clean runs < 8
    assert any(f["test"] == "weights_rule" for f in info["noise_check"]["failures"])
    assert _decided_by(info) == ("above_promise", "noise_check")
    assert "moved outside the optimizer's rule" in noise_certificate.summary_sentence(info["noise_check"])


def test_vectorized_optimizer_noise_at_0_8_sigma_is_flagged_from_what_reached_the_weights():
    info = _train(MechanismPolicy(noise_factor=0.8), dp_implementation="vectorized_optimizer")
    check = info["noise_check"]
    assert check["certified"] and check["weights"]["passed"]  # the weights moved by the update it measured
    assert any(f["test"] == "variance" for f in check["failures"])
    assert check["variance_ratio_max"] < 0.8 and _decided_by(info) == ("above_promise", "noise_check")


def _watched_step(seed):
    """A tiny model's SGD-momentum DP-SGD step with a weight monitor: (net, observer, step, optimizer)."""
    net = _tiny(seed)
    observer = MechanismObserver()
    step, _, opt = build_train_step(net, mechanism="dpsgd", optimizer="sgd", learning_rate=0.1, momentum=0.9,
                                    clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=8.0,
                                    weight_monitor=observer.weight_monitor)
    return net, observer, step, opt


def _steps(step, count):
    rng = np.random.default_rng(0)
    for t in range(1, count + 1):
        step(tf.constant(rng.normal(size=(8, 3)).astype(np.float32)), tf.constant(rng.integers(0, 3, 8)))
        yield t


def test_a_weight_moved_by_the_loop_between_two_steps_is_flagged():
    net, observer, step, _ = _watched_step(1)
    for t in _steps(step, 5):
        if t == 4:
            net.trainable_variables[1].assign_add(tf.fill([4], 1e-5))
    record = observer.weights.finish()
    assert not record["passed"] and record["failures"][0]["variable"] == "dense_0/bias:0"
    assert record["failures"][0]["after_update"] == 4


def test_a_state_moved_before_the_first_update_is_flagged():
    # e.g. a momentum buffer warm-started from the data after the step was built
    net, observer, step, opt = _watched_step(2)
    opt.get_slot(net.trainable_variables[2], "momentum").assign_add(tf.fill([4, 3], 1e-3))
    for _ in _steps(step, 3):
        pass
    record = observer.weights.finish()
    assert not record["passed"] and record["failures"][0]["after_update"] == 0
    assert record["failures"][0]["variable"] == f"{net.trainable_variables[2].name} (momentum slot)"


@pytest.mark.parametrize("implementation", ["fast_gradient_clipping", "layerwise_clipping"])
def test_a_start_that_read_the_data_is_flagged(monkeypatch, implementation):
    """A data-dependent initialization (the output bias set from the members' label frequencies, as
    some code does for class imbalance) between the model's build and the step's: every other check
    passes (it happens before the weight monitor reads its start state); the rebuild from the seed
    alone differs (found by the red team, bench/bench_planted_bugs.py's data_dependent_init)."""
    import dpaudit.training.train as train_module

    frame = _frame(n_train=300, d=6)
    counts = np.bincount(frame.loc[frame["split"] == "train", "label"].to_numpy(), minlength=3) + 1.0
    real = train_module.logits_model

    def leaky(model):
        net = real(model)
        bias = net.trainable_variables[-1]
        bias.assign(np.log(counts[:bias.shape[0]] / counts.sum()).astype(np.float32))
        return net

    monkeypatch.setattr(train_module, "logits_model", leaky)
    info = _train(MechanismPolicy(), dp_implementation=implementation)
    record = info["noise_check"]["weights"]["initialization"]
    assert not record["passed"] and record["variable"] == info["noise_check"]["weights"]["failures"][-1]["variable"]
    assert record["variable"].endswith("bias:0") and record["largest_difference"] > 0.1
    assert _decided_by(info) == ("above_promise", "noise_check")


def test_a_correct_start_equals_the_rebuild():
    info = _train(MechanismPolicy())
    record = info["noise_check"]["weights"]["initialization"]
    assert record["passed"] and record["largest_difference"] == 0.0 and record["variables"] == 4


def test_the_saved_file_holds_the_certified_weights():
    record = _train(MechanismPolicy())["noise_check"]["weights"]["released_file"]
    assert record["passed"] and record["arrays_in_file"] == record["variables"] == 4


@pytest.mark.parametrize("change", ["one_ulp", "fresh_model"])
def test_a_saved_file_other_than_the_certified_model_is_flagged(monkeypatch, change):
    """The training certified, the file written another model: one weight one float step away (a change
    between the last certified update and the save, undone after it), or a freshly initialized clone."""
    import dpaudit.training.train as train_module

    real = train_module.save_model

    def save(model, path):
        if change == "fresh_model":
            return real(_tf.keras.models.clone_model(model), path)
        bias = model.trainable_variables[-1]
        kept = bias.numpy()
        bias.assign(np.nextafter(kept, np.float32(np.inf)))
        real(model, path)
        bias.assign(kept)
        return None

    monkeypatch.setattr(train_module, "save_model", save)
    info = _train(MechanismPolicy())
    record = info["noise_check"]["weights"]["released_file"]
    assert not record["passed"] and "does not hold" in record["reason"]
    failure = next(f for f in info["noise_check"]["failures"] if f["test"] == "released_file")
    assert change == "fresh_model" or failure["variable"].endswith("bias:0")
    assert _decided_by(info) == ("above_promise", "noise_check")
    assert "the saved model file is not the certified model" in noise_certificate.summary_sentence(info["noise_check"])


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_the_released_file_check_reads_both_formats_bit_for_bit(suffix, tmp_path):
    from dpaudit.audit.mechanism_checks import released_file_check
    from dpaudit.training.models import save_model

    net = _tiny(3)
    path = tmp_path / f"m{suffix}"
    save_model(net, path)
    variables = [*net.trainable_variables, *net.non_trainable_variables]
    clean = released_file_check({"passed": True, "failures": [], "updates": 7}, path, variables)
    assert clean["passed"] and clean["released_file"]["arrays_in_file"] == len(variables)
    variables[0].assign_add(np.full(variables[0].shape, 1e-7, np.float32))
    moved = released_file_check({"passed": True, "failures": [], "updates": 7}, path, variables)
    assert not moved["passed"] and moved["failures"][0]["test"] == "released_file"
    assert moved["failures"][0]["variable"] == variables[0].name and moved["failures"][0]["after_update"] == 7


# ------------------------------------------------------------------ validity


def validity_run(seeds: int) -> tuple[int, list]:
    """The correct mechanism on every gradient path and optimizer at ε ∈ {1, 4}, ``seeds`` runs each (this test's
    4, bench/bench_noise_check.py --validity N): (runs, flags), a flag a failed noise or weight certificate."""
    flags, runs = [], 0
    rng = np.random.default_rng(11)
    x_all = rng.normal(size=(300, 3)).astype(np.float32)
    y_all = rng.integers(0, 3, 300)
    steps, q = 24, 0.05
    for implementation, microbatches, dropout in PATHS:
        for name, rule in RULES.items():
            net = _tiny(7, dropout)
            noise = monitor_for(net, steps=steps, seed=1)
            observer = MechanismObserver()
            sigmas = {eps: accounting.calibrate_noise(eps, q, steps, 1e-4, "rdp", "poisson") for eps in (1.0, 4.0)}
            built = {}
            for eps, sigma in sigmas.items():
                built[eps] = build_train_step(
                    net, mechanism="dpsgd", optimizer=rule["optimizer"], learning_rate=rule["learning_rate"],
                    momentum=rule["momentum"], clip_norm=1.0, noise_multiplier=sigma, expected_batch_size=15.0,
                    implementation=implementation, microbatches=microbatches, noise_monitor=noise,
                    weight_monitor=observer.weight_monitor)[:2]
                built[eps] = (*built[eps], observer.weights)
            initial = [v.numpy() for v in net.trainable_variables]
            for eps, sigma in sigmas.items():
                step, noise_step, weights = built[eps]
                for _ in range(seeds):
                    for v, w in zip(net.trainable_variables, initial, strict=True):
                        v.assign(w)
                    noise.reset()
                    weights.reset()
                    for _ in range(steps):
                        idx = np.flatnonzero(rng.random(300) < q)
                        if idx.size == 0:
                            noise_step()
                        else:
                            step(tf.constant(x_all[idx]), tf.constant(y_all[idx]))
                    got = noise.statistics()
                    check = noise_certificate.certify(got["variables"], got["samples"], got["sample_columns"],
                                                      noise_multiplier=sigma, clip_norm=1.0)
                    record = weights.finish()
                    runs += 1
                    if not check["passed"] or not record["passed"]:
                        flags.append((implementation, name, eps, check["failures"], record["failures"]))
    return runs, flags


def test_correct_mechanism_flags_at_most_once_in_120_trainings_on_every_path_and_optimizer():
    """Five gradient paths × SGD, momentum 0.9, Adam × ε ∈ {1, 4} × 4 seeds: each (path, optimizer)
    step traced once, its weights and monitors reset between runs. A flag is a failed noise
    certificate or weight certificate; at family-wise 1e-3 the expected count is 0.12."""
    runs, flags = validity_run(4)
    assert runs == 120 and len(flags) <= 1, flags


def test_a_builder_that_needs_more_than_its_seed_fails_the_start():
    from dpaudit.audit.mechanism_checks import initial_state_check

    base = {"passed": True, "failures": [], "updates": 3}
    out = initial_state_check(base, [("dense/kernel:0", np.zeros((2, 2), np.float32))],
                              TypeError("build_model() missing 1 required positional argument: 'x'"))
    assert not out["passed"] and out["failures"][-1]["after_update"] == 0
    assert "could not be built again" in out["initialization"]["reason"] and base["passed"]
