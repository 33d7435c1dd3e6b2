"""Speed of the loss-threshold attack metrics on 10⁶ + 10⁶ losses (best of 3)."""


import numpy as np
from timing import best_of  # bench/timing.py (a script's folder is on its path)

from dpaudit.metrics import mia


def main() -> None:
    rng = np.random.default_rng(0)
    members, nonmembers = rng.normal(size=1_000_000), rng.normal(0.1, size=1_000_000)

    def roc_family():
        roc = mia.roc_curve(members, nonmembers)
        mia.roc_auc(roc)
        mia.roc_max_advantage(roc)
        mia.tpr_at_fpr(roc)

    print(f"mia_roc_family n=1e6+1e6 seconds={best_of(3, roc_family):.3f}")
    for method in ("split", "bonferroni"):
        seconds = best_of(3, lambda m=method: mia.epsilon_lower_bound(
            members, nonmembers, delta=1e-6, seed=0, method=m))
        print(f"mia_epsilon_lower_bound method={method} n=1e6+1e6 seconds={seconds:.3f}")


if __name__ == "__main__":
    main()
