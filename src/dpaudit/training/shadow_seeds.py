"""Training seeds of the Recipe C shadow models (Lowy et al. 2024).

Read at Snakefile parse time (``PMP_SHADOWS`` in ``rules/common.smk``) and kept
out of ``dpaudit.training.shadows``: ``train_model`` hashes that module, and an
edit here must not retrain every model of the grid.
"""

from __future__ import annotations

import numpy as np

__all__ = ["shadow_seed"]

# Keeps shadow seeds apart from the other SeedSequence([seed, ...]) streams of the project.
_SHADOW_SEED_TAG = 3003


def shadow_seed(run_seed: int, index: int) -> int:
    """Training seed (31 bits) of shadow model ``index`` of a run trained with ``run_seed``.

    Recipe C's Clopper–Pearson bound lower-bounds the mechanism whose coins the
    shadow models draw: shadows sharing the target's seed (same initialisation,
    batch sampling and DP noise) would audit a fixed-coins mechanism, not DP-SGD.
    Each shadow gets SeedSequence([run seed, tag, index]), deterministic in
    (run seed, index); a value equal to the run seed is refused, never used.
    """
    seed = int(np.random.SeedSequence([int(run_seed), _SHADOW_SEED_TAG, int(index)]).generate_state(1)[0])
    seed &= 0x7FFFFFFF
    if seed == int(run_seed):
        raise ValueError(f"shadow model {index} of the run with seed {run_seed} derived the run's own seed")
    return seed
