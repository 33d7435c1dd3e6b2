"""The one place that imports TensorFlow, tf_keras and tensorflow_privacy.

tensorflow-privacy's optimizers need the Keras 2 API (tf_keras), which TensorFlow
only uses when ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow is first
imported; its package ``__init__`` imports ``tf.estimator`` (removed in TF 2.16),
so it is skipped and the needed submodules are imported directly (DESIGN §9).
"""

from __future__ import annotations

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
    "versions",
]

_configured_threads: int | None = None


def configure(threads: int, seed: int) -> None:
    """Set TF thread pools, seed python/numpy/TF and make TF ops deterministic.

    Thread pools can only be set before TensorFlow's runtime starts; a later call
    with a different count keeps the first setting (a process runs one job).
    """
    global _configured_threads
    threads = max(1, int(threads))
    if _configured_threads is None:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:
            pass  # runtime already initialized by an earlier TF call in this process
        _configured_threads = threads
    # Seeds python's random, numpy's global RNG and TF's global seed in one call.
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


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
