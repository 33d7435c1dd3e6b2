"""The TensorFlow import boundary (dpaudit._tf)."""

import os
import subprocess
import sys
import textwrap


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_light_modules_do_not_import_tensorflow():
    code = """
        import sys
        import dpaudit.losses, dpaudit.dp.accounting, dpaudit.training.sampling, dpaudit.metrics
        heavy = [m for m in ("tensorflow", "tf_keras", "keras", "tensorflow_privacy") if m in sys.modules]
        print("HEAVY", heavy)
    """
    proc = _run(code, dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout


def test_dp_step_trains_without_legacy_keras_env():
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    code = """
        import os
        assert "TF_USE_LEGACY_KERAS" not in os.environ
        import numpy as np
        from dpaudit import _tf
        from dpaudit.training.models import build_mlp, logits_model
        from dpaudit.training.train import build_train_step
        _tf.configure(1, 0)
        model = build_mlp(3, {"hidden_units": [4], "n_classes": 2}, seed=0)
        net = logits_model(model)
        for impl in ("fast_gradient_clipping", "vectorized_optimizer"):
            step, _, opt = build_train_step(net, mechanism="dpsgd", optimizer="sgd", learning_rate=0.1,
                                            clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4,
                                            implementation=impl)
            before = [w.copy() for w in net.get_weights()]
            x = np.ones((4, 3), np.float32); y = np.array([0, 1, 0, 1], np.int64)
            step(_tf.tf.constant(x), _tf.tf.constant(y))
            assert any(not np.array_equal(a, b) for a, b in zip(before, net.get_weights()))
        print("KERAS", _tf.tf.keras.__name__, type(opt).__mro__[1].__module__)
    """
    proc = _run(code, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "KERAS tf_keras" in proc.stdout
