"""The audit twin's norm check decides on what DP needs (issue 45, ``dpaudit.training.norm_check``).

A kink crossing built on purpose: a tiny ReLU MLP whose first hidden unit has pre-activation
exactly 0 for example 0 in the batch (0.5·1 − 0.5, exact in float32), where TensorFlow's ReLU
gradient is 0; the one-tape-alone computation sees that example's first input 1 ulp larger (as
another kernel's summation order would round it), so the unit is on there (pre-activation 2⁻²⁴)
and its whole gradient path switches on. Both gradients are the example's own, the logits differ
by ~1e-8; the summed gradient was clipped at its own norm. The old rule (fast vs alone, 1e-3)
stops this correct run; the new one records a kink and goes on. A 1 % norm bug on the same batch
still stops it, and so does a forward pass that depends on the batch (the alone input 1 % off).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.training import gradient_paths
from dpaudit.training.models import build_mlp, logits_model
from dpaudit.training.norm_check import NormCheck
from dpaudit.training.steps import NORM_CHECK_RTOL, MechanismPolicy, build_train_step

tf = _tf.tf
ULP = 2.0 ** -23


def _kinked_net():
    net = logits_model(build_mlp(3, {"hidden_units": [4], "n_classes": 2, "activation": "relu"}, seed=0))
    kernel, bias, out_kernel, out_bias = (v.numpy() for v in net.trainable_variables)
    kernel[:, 0] = [0.5, 0.0, 0.0]
    bias[0] = -0.5  # example 0 (first input 1): pre-activation 0.5 − 0.5 = 0 exactly
    out_kernel[0] = [1.5, -1.5]  # the unit matters to the logits' gradient
    for v, w in zip(net.trainable_variables, (kernel, bias, out_kernel, out_bias), strict=True):
        v.assign(w)
    return net


def _batch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 3)).astype(np.float32)
    x[0] = [1.0, 0.7, -0.4]
    y = np.array([0, 1, 1, 0, 1, 0], np.int64)
    return tf.constant(x), tf.constant(y)


def _nudged(monkeypatch, factor):
    """The tape-alone computations see each example's first input multiplied by ``factor``."""
    nudge = tf.constant([factor, 1.0, 1.0], tf.float32)
    slow, slow_group = gradient_paths.StepContext.slow_norms, gradient_paths.StepContext.slow_group_norms
    monkeypatch.setattr(gradient_paths.StepContext, "slow_norms",
                        lambda self, x, *a, **k: slow(self, x * nudge, *a, **k))
    monkeypatch.setattr(gradient_paths.StepContext, "slow_group_norms",
                        lambda self, x, *a, **k: slow_group(self, x * nudge, *a, **k))


PATHS = [("fast_gradient_clipping", None), ("masked_ghost_clipping", None), ("layerwise_clipping", None),
         ("microbatch_group_gradients", 3)]


def _check(implementation, microbatches, policy=None):
    _tf.configure(2, 0)
    net = _kinked_net()
    step, _, _ = build_train_step(net, mechanism="dpsgd", optimizer="sgd", learning_rate=0.1, clip_norm=10.0,
                                  noise_multiplier=1.0, expected_batch_size=6.0, implementation=implementation,
                                  microbatches=microbatches, check_norms=True, policy=policy or MechanismPolicy())
    x, y = _batch()
    fast, batched, alone, gap = (t.numpy() for t in step(x, y, tf.constant([0], tf.int32))[3:])
    check = NormCheck(NORM_CHECK_RTOL, "kink", implementation, np.arange(6) + 100, 6)
    return check, (fast, batched, alone, gap)


@pytest.mark.parametrize(("implementation", "microbatches"), PATHS, ids=[p[0] for p in PATHS])
def test_a_rounding_difference_across_a_relu_kink_does_not_stop_a_correct_run(monkeypatch, implementation,
                                                                            microbatches):
    _nudged(monkeypatch, 1.0 + ULP)
    check, (fast, batched, alone, gap) = _check(implementation, microbatches)
    # the kink is crossed: alone, the unit is on and the norm differs well beyond the old 1e-3 rule
    assert abs(alone[0] - fast[0]) > 10 * NORM_CHECK_RTOL * alone[0]
    assert abs(fast[0] - batched[0]) < 1e-5 * batched[0] and gap[0] < 1e-6
    groups = np.array([0]) if microbatches else None
    check(fast, batched, alone, gap, step=1, rows=None if microbatches else np.array([0]), groups=groups)
    assert check.record()["norm_check_kinks"] == 1 and check.largest_kink > 10 * NORM_CHECK_RTOL


@pytest.mark.parametrize(("implementation", "microbatches"), PATHS, ids=[p[0] for p in PATHS])
def test_a_real_norm_bug_still_stops_the_run_at_the_kink(monkeypatch, implementation, microbatches):
    _nudged(monkeypatch, 1.0 + ULP)
    check, values = _check(implementation, microbatches, MechanismPolicy(norm_factor=1.01))
    unit = "microbatch group 0" if microbatches else "example_id 100"
    with pytest.raises(RuntimeError, match=f"norm of {unit} at step 1 .* but the gradient it summed has norm"):
        check(*values, step=1, rows=None if microbatches else np.array([0]),
              groups=np.array([0]) if microbatches else None)


@pytest.mark.parametrize(("implementation", "microbatches"), PATHS, ids=[p[0] for p in PATHS])
def test_a_forward_pass_that_depends_on_the_batch_stops_the_run(monkeypatch, implementation, microbatches):
    _nudged(monkeypatch, 1.01)  # alone, the example's values differ by 1 %: not rounding
    check, values = _check(implementation, microbatches)
    with pytest.raises(RuntimeError, match="is not its own: .* logits differ"):
        check(*values, step=1, rows=None if microbatches else np.array([0]),
              groups=np.array([0]) if microbatches else None)
