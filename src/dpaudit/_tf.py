"""The one place that imports TensorFlow, tf_keras and tensorflow_privacy.

tensorflow-privacy's optimizers need the Keras 2 API (tf_keras), which TensorFlow
only uses when ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow is first
imported; its package ``__init__`` imports ``tf.estimator`` (removed in TF 2.16),
so it is skipped and the needed submodules are imported directly (DESIGN §9).
"""

from __future__ import annotations

import logging
import os
import sys

# Must precede the first TensorFlow import anywhere in the process.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.skip_tf_privacy_import = True

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tensorflow_privacy.privacy.fast_gradient_clipping import (  # noqa: E402
    clip_grads,
    gradient_clipping_utils,
)
from tensorflow_privacy.privacy.fast_gradient_clipping import (  # noqa: E402
    layer_registry as tfp_layer_registry,
)
from tensorflow_privacy.privacy.optimizers.dp_optimizer_keras_vectorized import (  # noqa: E402
    VectorizedDPKerasAdamOptimizer,
    VectorizedDPKerasSGDOptimizer,
)

if not tf.keras.__name__.startswith("tf_keras"):
    # tf.keras resolves lazily; if something set TF_USE_LEGACY_KERAS=0 first, the DP
    # optimizers would run on Keras 3 and fail, so stop here with the reason.
    raise ImportError(
        f"tf.keras is {tf.keras.__name__}, not tf_keras; dpaudit needs TF_USE_LEGACY_KERAS=1"
    )

__all__ = [
    "tf",
    "keras",
    "clip_grads",
    "gradient_clipping_utils",
    "tfp_layer_registry",
    "VectorizedDPKerasAdamOptimizer",
    "VectorizedDPKerasSGDOptimizer",
    "configure",
    "functional_cond",
    "versions",
]

_configured_threads: int | None = None
_LOG = logging.getLogger("dpaudit.tf")


def configure(threads: int, seed: int) -> int:
    """Start a run: TF thread pools, Keras' per-process state reset, python/numpy/TF seeded,
    TF ops deterministic; returns the thread count the process's pools use.

    Called at the start of every training run (``train_model``, the audit twin, a reference
    pool, extraction), so a run in a warm process, after other runs, starts from the state
    a fresh process starts from (issue 36): ``clear_session`` resets Keras' layer-name
    counters (a builder that names no layer would otherwise save ``conv2d_1`` where a fresh
    process saves ``conv2d``, in the model's config and the noise certificate's variable
    names) and the kernel cache of eager random ops; ``set_random_seed`` resets python's
    random, numpy's global generator, TF's global seed and its op-seed counter.

    Thread pools can only be set before TensorFlow's runtime starts. The first call sets
    them; a later call with the same count is a no-op; a later call with another count
    cannot change them, so it logs a warning and the returned (recorded) count is the
    pools' real one (the unit tests mix counts in one process; a workflow job passes its
    one ``threads`` to every run it trains).
    """
    global _configured_threads
    threads = max(1, int(threads))
    if _configured_threads is None:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
            _configured_threads = threads
        except RuntimeError:
            # the runtime was started by TF code that ran before the first run: its pools stay
            # (0 is TF's default, one thread per CPU the process may use)
            _configured_threads = (tf.config.threading.get_intra_op_parallelism_threads()
                                   or len(os.sched_getaffinity(0)))
    if threads != _configured_threads:
        _LOG.warning("this process's TensorFlow thread pools were set to %d threads by its first run and cannot "
                     "change; this run asked for %d and runs on %d (train each thread count in its own process)",
                     _configured_threads, threads, _configured_threads)
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    return _configured_threads


def functional_cond(pred, true_fn, false_fn):
    """``tf.cond`` whose ``If`` op stays a function call instead of being lowered to Switch/Merge.

    Lowered (TensorFlow's default inside a tf.function), the branch not taken is part of the caller's
    graph and the executor carries its dead tensors through every node of it on every call: a rarely
    taken branch with backward passes in it (the clipping certificate's, ``audit.clip_monitor``) cost
    every training step 13 % (the default MLP) and 6 % (config/cnn.yaml's CNN). As a function call the
    untaken branch costs one dispatch (4 % on both) and the first call is ~50 ms cheaper
    (``bench/bench_noise_check.py``). Raises if TensorFlow built no ``If`` op behind the output."""
    from tensorflow.python.ops import control_flow_util_v2

    out = tf.cond(pred, true_fn, false_fn)
    op = tf.nest.flatten(out)[0].op
    while op.type not in ("If", "StatelessIf"):
        if not op.inputs:
            raise RuntimeError(f"functional_cond: no If op behind {out!r}")
        op = op.inputs[0].op
    control_flow_util_v2.maybe_set_lowering_attr(op, lower_using_switch_merge=False)
    return out


def versions() -> dict[str, str]:
    """Versions of the numerical libraries that produced a result."""
    from importlib.metadata import version

    import dp_accounting

    return {
        "tensorflow": tf.__version__,
        "tf_keras": keras.__version__,
        "tensorflow_privacy": version("tensorflow-privacy"),
        "dp_accounting": getattr(dp_accounting, "__version__", None) or version("dp-accounting"),
        "numpy": np.__version__,
    }
