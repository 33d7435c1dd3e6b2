"""Speed of practical membership privacy (Lowy et al. 2024): issue 10's targets.

Exact exponential-mechanism PMP (n = 6, m = 32, d = 5) ≤ 0.2 s per trial; Gaussian
Prop. 12 bound for n = 100 (d = 20) ≤ 0.1 s per trial; Recipe B for 1,000 members
(2,000 parent points) with 256 partners each ≤ 30 s. Best of several runs.
"""


import numpy as np
from timing import best_of  # bench/timing.py (a script's folder is on its path)

from dpaudit.dp import mechanisms
from dpaudit.metrics.pmp import dpsgd, expmech, gaussian
from dpaudit.simulations import pmp as sim


def main() -> None:
    rng = np.random.default_rng(0)
    masks = expmech.subset_masks(12, 6)

    def expmech_trial():
        sim._expmech_trial(rng, d=5, n=6, m=32, clip_C=50.0, data_std=1.0, eps_X=10.0, n_outliers=2,
                           outlier_scale=100.0, masks=masks, mc_subsets=0)

    print(f"pmp_expmech_exact n=6 m=32 d=5 (with eps_X_exact) seconds_per_trial={best_of(5, expmech_trial):.3f} "
          "(target <= 0.2)")

    x = rng.standard_normal((200, 20))
    sigma = mechanisms.gaussian_sigma_analytic(2 * 50.0 / 100, 10.0, 1e-2)
    seconds = best_of(5, lambda: gaussian.gaussian_pmp(x / 100, sigma, 1e-2, sensitivity_global=1.0))
    print(f"pmp_gaussian_prop12 n=100 d=20 seconds_per_trial={seconds:.3f} (target <= 0.1)")

    checkpoints = [{"steps": 300, "clipped": dpsgd.clip_rows(rng.standard_normal((2000, 2000)) * 0.05, 1.0)[0]}
                   for _ in range(5)]

    def recipe_b():
        dpsgd.recipe_b_trajectory(checkpoints, sampling_rate=64 / 1000, noise_multiplier=1.1, clip=1.0,
                                  delta=1e-5, n_partners=256, seed=0)

    print(f"pmp_recipe_b members=1000 partners=256 checkpoints=5 params=2000 seconds={best_of(2, recipe_b):.2f} "
          "(target <= 30)")


if __name__ == "__main__":
    main()
