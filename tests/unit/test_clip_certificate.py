"""The clipping certificate (``dpaudit.audit.clip_monitor``): the sum the noise is added to is the sum of
each unit's own gradient clipped at C. Oracle: the analytic per-example gradients of a ReLU MLP in
float64 (``tests.unit.test_training.numpy_per_example_grads``); power: clipping bugs planted in the real
TensorFlow step of the released run, which no other check of ``noise_check`` sees; validity: the correct
mechanism on every gradient path and optimizer at ε ∈ {1, 4}."""

import logging

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.audit.clip_monitor import NORM_RTOL, TOLERANCE, ClipMonitor, merge_clip_into
from dpaudit.audit.mechanism_checks import MechanismObserver
from dpaudit.dp.noise_certificate import summary_sentence
from dpaudit.training.gradient_paths import StepContext
from dpaudit.training.steps import CORRECT, MechanismPolicy
from dpaudit.training.train import train_model
from tests.unit.test_training import SPLITS, _frame, numpy_per_example_grads

LOG = logging.getLogger("test_clip_certificate")
tf = _tf.tf
keras = _tf.keras

# q = 20/200, 2 epochs: 20 data steps, every one of them checked (16 drawn of 20)
PARAMS = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "hidden_units": [8], "clip_norm": 1.0,
          "learning_rate": 0.1, "momentum": 0.9, "optimizer": "sgd", "target_epsilon": 4.0, "delta": 1e-4,
          "accountant": "rdp", "sampling": "poisson", "seed": 1}


def _train(path, policy=CORRECT, **overrides):
    return train_model(_frame(n_train=200, n_hold=50, n_test=50), SPLITS, {**PARAMS, **overrides},
                       path / "m.keras", threads=1, log=LOG, policy=policy,
                       observer=MechanismObserver())


def _clip_failures(info):
    return [f for f in info["noise_check"]["failures"] if f["test"] == "clipped_sum"]


# ------------------------------------------------------------------ oracle


def _observe(net, x, y, clipped, norms, clip=1.0):
    """One checked step of a monitor over ``net`` with the given path outputs (numpy); its record."""
    monitor = ClipMonitor([v.name for v in net.trainable_variables], steps=1, seed=0, clip_norm=clip)

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape(persistent=True) as tape:
            logits = net(tf.constant(x), training=True)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(y), logits)
        monitor.observe(tape, tf.constant(x), tf.constant(y), losses, tf.constant(norms, tf.float32),
                        [tf.constant(c, tf.float32) for c in clipped], net.trainable_variables)
        return losses

    step()
    return monitor.finish()


def _net(seed=0, d=5, hidden=7, classes=3):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((d,)), keras.layers.Dense(hidden, activation="relu"),
                             keras.layers.Dense(classes)])


def test_the_reference_is_the_analytic_clipped_sum_and_measures_a_departure_exactly():
    rng = np.random.default_rng(0)
    net = _net()
    x = (3.0 * rng.normal(size=(16, 5))).astype(np.float32)
    y = rng.integers(0, 3, 16)
    grads = numpy_per_example_grads(net.get_weights(), x, y)
    norms = np.sqrt(sum(np.sum(g.reshape(16, -1) ** 2, axis=1) for g in grads))
    assert (norms > 1.0).sum() >= 4 and (norms < 1.0).sum() >= 1  # clipped and unclipped examples both
    weights = np.minimum(1.0, 1.0 / norms)
    oracle = [np.tensordot(weights, g, axes=1) for g in grads]
    record = _observe(net, x, y, oracle, norms)
    # float64 oracle rounded to float32 against the float32 tape: a few rounding units at most
    assert record["passed"] and record["largest_deviation"] < 4.0, record
    assert record["largest_norm_gap"] < 1e-5
    # a departure Δ of one variable is measured as ‖Δ‖ (in units of C), to the float32 rounding of the sum
    delta = np.zeros_like(oracle[3])
    delta[1] = 0.05
    record = _observe(net, x, y, [*oracle[:3], oracle[3] + delta], norms)
    assert not record["passed"] and record["failures"][0]["variable"] == net.trainable_variables[3].name
    assert record["largest_deviation_in_c"] == pytest.approx(0.05, rel=1e-4)
    # the sum clipped at 2C: each clipped example adds (min(1, 2/n) − min(1, 1/n))·g
    doubled = [np.tensordot(np.minimum(1.0, 2.0 / norms), g, axes=1) for g in grads]
    expected = [np.linalg.norm(a - b) for a, b in zip(doubled, oracle, strict=True)]
    record = _observe(net, x, y, doubled, norms)
    assert record["largest_deviation_in_c"] == pytest.approx(max(expected), rel=1e-4)
    # norms 1 % off (all consistent with the sum they weighted): the norm test, not the sum test
    off = norms * 1.01
    record = _observe(net, x, y, [np.tensordot(np.minimum(1.0, 1.0 / off), g, axes=1) for g in grads], off)
    assert record["largest_deviation"] < 4.0
    assert record["largest_norm_gap"] == pytest.approx(0.01, rel=1e-3) and record["largest_norm_gap"] > NORM_RTOL
    assert [f["variable"] for f in record["failures"]] == ["(norms)"]


def test_a_failure_joins_noise_check_as_a_privacy_failure_and_a_pass_changes_nothing():
    noise = {"certified": True, "passed": True, "privacy_failure": False, "failures": []}
    ok = {"passed": True, "failures": []}
    assert merge_clip_into(noise, ok) == {**noise, "clipping": ok}
    bad = {"passed": False, "failures": [{"variable": "dense/bias:0", "step": 3, "deviation": 1e6,
                                          "deviation_in_c": 0.4}]}
    merged = merge_clip_into(noise, bad)
    assert merged["passed"] is False and merged["privacy_failure"] is True
    assert merged["failures"] == [{"variable": "dense/bias:0", "test": "clipped_sum", "p_value": 0.0,
                                   "after_update": 3, "deviation": 1e6}]
    assert merge_clip_into(noise, None) is noise


# ------------------------------------------------------------------ power, through the real step


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_clipping_at_2c_in_the_released_run_fails_the_noise_check(eps, tmp_path):
    info = _train(tmp_path, MechanismPolicy(clip_factor=2.0), target_epsilon=eps)
    failures = _clip_failures(info)
    assert failures and info["noise_check"]["passed"] is False and info["noise_check"]["privacy_failure"]
    assert info["noise_check"]["clipping"]["largest_deviation"] > 1e3 * TOLERANCE
    # the noise itself is right: the noise certificate's own tests pass, so the clipping check decides
    assert {f["test"] for f in info["noise_check"]["failures"]} == {"clipped_sum"}
    sentence = summary_sentence(info["noise_check"])
    assert "not added to a sum of sensitivity C" in sentence and "its sensitivity is not C" in sentence


def test_norms_that_are_not_the_gradients_fail_the_released_run_not_only_the_twin(tmp_path):
    info = _train(tmp_path, MechanismPolicy(norm_factor=0.5))
    assert [f["variable"] for f in _clip_failures(info)] == ["(norms)"]
    assert info["noise_check"]["clipping"]["largest_norm_gap"] == pytest.approx(0.5, rel=1e-3)


def test_biases_summed_unclipped_fail_naming_the_bias(monkeypatch, tmp_path):
    """A bug of another kind than the tests' policies: the masked ghost path sums its biases' gradients raw."""
    original = StepContext.dense_clipped

    def dense_clipped(self, taps, deltas, factors):
        clipped = original(self, taps, deltas, factors)
        raw = original(self, taps, deltas, self.tf.ones_like(factors))
        biases = {layer.bias.ref() for _, _, layer in taps}
        return [r if v.ref() in biases else c for v, c, r in zip(self.variables, clipped, raw, strict=True)]

    monkeypatch.setattr(StepContext, "dense_clipped", dense_clipped)
    info = _train(tmp_path, dp_implementation="masked_ghost_clipping")
    assert _clip_failures(info) and all(f["variable"].endswith("bias:0") for f in _clip_failures(info))


def _batch_record(x_all, y_all, drawn, fed_x, fed_y, drop_remainder=None):
    """A monitor over a one-layer net that hears one draw and checks the step fed (fed_x, fed_y)."""
    net = _net(d=x_all.shape[1])
    monitor = ClipMonitor([v.name for v in net.trainable_variables], steps=1, seed=0, clip_norm=1e6,
                          rows=(x_all, y_all), drop_remainder=drop_remainder)
    monitor.drew(drawn)

    @tf.function(autograph=False)
    def step(x, y):
        with tf.GradientTape(persistent=True) as tape:
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, net(x, training=True))
            total = tf.reduce_sum(losses)
        grads = tape.gradient(total, net.trainable_variables)
        jac = tape.jacobian(losses, net.trainable_variables)
        norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(j, [tf.shape(j)[0], -1]) ** 2, 1) for j in jac]))
        # a scale that clips nobody, so the clipped sum is the plain gradient: only the rows are at stake
        monitor.observe(tape, x, y, losses, norms, grads, net.trainable_variables)

    step(tf.constant(fed_x), tf.constant(fed_y))
    monitor.executed()
    return monitor.finish()


def test_the_batch_is_checked_against_the_rows_drawn():
    rng = np.random.default_rng(3)
    x_all = rng.normal(size=(50, 5)).astype(np.float32)
    y_all = rng.integers(0, 3, 50)
    drawn = np.array([2, 7, 11, 30, 41])
    record = _batch_record(x_all, y_all, drawn, x_all[drawn[::-1]], y_all[drawn[::-1]])  # order does not matter
    assert record["passed"] and record["batch_rows_checked"] == 1 and record["largest_batch_gap"] < 1e-15
    # oracle of what is compared: the three power sums of x·r + y·r_y (numpy, float64) over the rows drawn
    # against the step's; another row, a row twice, a label changed, mixup's blend (same Σx) all fail
    mixed = (0.8 * x_all[drawn] + 0.2 * x_all[np.roll(drawn, 1)]).astype(np.float32)
    for fed_x, fed_y in ((x_all[[2, 7, 11, 30, 42]], y_all[[2, 7, 11, 30, 42]]),
                         (x_all[[2, 7, 11, 30, 41, 41]], y_all[[2, 7, 11, 30, 41, 41]]),
                         (x_all[drawn], (y_all[drawn] + 1) % 3), (mixed, y_all[drawn])):
        record = _batch_record(x_all, y_all, drawn, fed_x, fed_y)
        assert [f["test"] for f in record["failures"]] == ["batch_rows"], record
    # a twin's shared gradient canaries are positions past the data rows; with microbatches under
    # shuffling the loop drops the last |b| mod k rows drawn
    assert _batch_record(x_all, y_all, np.array([*drawn, 50, 53]), x_all[drawn], y_all[drawn])["passed"]
    assert _batch_record(x_all, y_all, drawn, x_all[drawn[:4]], y_all[drawn[:4]], drop_remainder=2)["passed"]
    assert not _batch_record(x_all, y_all, drawn, x_all[drawn[:4]], y_all[drawn[:4]])["passed"]


def _fed(monkeypatch, change):
    """The loop's batch changed on its way to the real step (the sampler and its ledger drew right)."""
    from dpaudit.training import train as train_module

    build = train_module.build_train_step

    def built(*args, **kwargs):
        step, noise_step, opt = build(*args, **kwargs)
        return (lambda x, y, *extra: step(*change(x, y), *extra)), noise_step, opt

    monkeypatch.setattr(train_module, "build_train_step", built)


@pytest.mark.parametrize("bug", ["duplicate_row", "mixup"])
def test_a_batch_that_is_not_the_rows_drawn_fails_the_noise_check(monkeypatch, tmp_path, bug):
    if bug == "duplicate_row":
        _fed(monkeypatch, lambda x, y: (tf.concat([x, x[:1]], 0), tf.concat([y, y[:1]], 0)))
    else:
        _fed(monkeypatch, lambda x, y: (0.8 * x + 0.2 * tf.roll(x, 1, 0), y))
    info = _train(tmp_path)
    assert info["sampler_check"]["passed"]  # the sampler drew right: only the batch check sees it
    assert [f["test"] for f in info["noise_check"]["failures"]] == ["batch_rows"]
    assert info["noise_check"]["privacy_failure"]


# ------------------------------------------------------------------ validity


PATHS = [("fast_gradient_clipping", {}), ("masked_ghost_clipping", {"dropout": 0.3}),
         ("microbatch_group_gradients", {"microbatches": 4}), ("layerwise_clipping", {}),
         ("vectorized_optimizer", {})]
RULES = {"sgd": {"optimizer": "sgd", "momentum": 0.0}, "momentum": {"optimizer": "sgd", "momentum": 0.9},
         "adam": {"optimizer": "adam", "momentum": 0.0, "learning_rate": 0.01}}


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize(("implementation", "extra"), PATHS, ids=[p[0] for p in PATHS])
def test_the_correct_mechanism_passes_on_every_path_and_optimizer(implementation, extra, rule, tmp_path):
    for eps in (1.0, 4.0):
        overrides = {"dp_implementation": "auto" if "microbatches" in extra else implementation, **extra,
                     **RULES[rule], "target_epsilon": eps}
        info = _train(tmp_path, **overrides)
        assert info["dp_implementation"] == implementation
        clipping = info["noise_check"]["clipping"]
        # measured: < 1 rounding unit and norm gaps < 2e-7 on every path (bench/bench_planted_bugs.py)
        assert clipping["passed"] and clipping["checked_steps"] == 16, clipping
        assert clipping["largest_deviation"] < TOLERANCE / 8 and clipping["largest_norm_gap"] < NORM_RTOL / 100
        assert clipping["batch_rows_checked"] == 16 and clipping["largest_batch_gap"] < 1e-14


def embedding_model(input_shape, n_classes, params, seed):
    """A user model (``keras:`` spec) with Embedding and LayerNormalization: IndexedSlices gradients."""
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input(input_shape), keras.layers.Embedding(10, 4), keras.layers.Flatten(),
                             keras.layers.LayerNormalization(), keras.layers.Dense(n_classes)])


def test_the_correct_mechanism_passes_on_a_model_with_embedding_and_layer_normalization(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, size=(300, 6)).astype(np.float32)
    y = (x[:, 0] > 4).astype(np.int64)
    frame = pd.DataFrame({"example_id": np.arange(300), "split": ["train"] * 200 + ["test"] * 100, "label": y,
                          "x": list(x)})
    params = {"mechanism": "dpsgd", "model": "keras:tests.unit.test_clip_certificate:embedding_model", "epochs": 2,
              "batch_size": 20, "clip_norm": 1.0, "learning_rate": 0.1, "target_epsilon": 4.0, "delta": 1e-4,
              "seed": 0, "n_classes": 2}
    info = train_model(frame, SPLITS, params, tmp_path / "m.keras", threads=1, log=LOG, observer=MechanismObserver())
    clipping = info["noise_check"]["clipping"]
    assert info["dp_implementation"] == "layerwise_clipping" and clipping["passed"] and clipping["checked_steps"] == 16
    # measured 0.32 rounding units, norm gap 1e-7
    assert clipping["largest_deviation"] < TOLERANCE / 8 and clipping["largest_norm_gap"] < NORM_RTOL / 100


def test_the_check_branch_stays_a_function_call_and_computes_either_branch():
    """``_tf.functional_cond`` (the clipping check's gate): the traced If op is marked not to be lowered
    to Switch/Merge (the lowered branch cost every unchecked step 13 %), and the result is tf.cond's."""
    from dpaudit import _tf

    @tf.function(input_signature=[tf.TensorSpec([], tf.bool), tf.TensorSpec([3], tf.float32)], autograph=False)
    def gated(pred, v):
        return _tf.functional_cond(pred, lambda: tf.reduce_sum(v * v), lambda: tf.constant(-1.0))

    graph = gated.get_concrete_function().graph
    ifs = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    assert len(ifs) == 1 and ifs[0].get_attr("_lower_using_switch_merge") is False
    v = tf.constant([1.0, 2.0, 3.0])
    assert float(gated(tf.constant(True), v)) == 14.0 and float(gated(tf.constant(False), v)) == -1.0
