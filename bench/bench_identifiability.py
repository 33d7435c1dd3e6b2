"""Speed of one DI audit run (Bernau et al. 2021): k = 30 full-batch DP-Adam steps with the
adversary's log-likelihood ratio, on data shaped like Adult (n = 1,000, p = 703 here: the
project's Adult encoding has 108 features, the paper's 104 gives p = 679) and Purchase-100
(n = 1,000, 600 → 128 → 100, p = 89,828), plus how the cost grows with n and p. Test set
2,000 rows evaluated every step (the audit's default test_size). Best of 3."""

import time

import numpy as np

from dpaudit.metrics import identifiability as idf
from dpaudit.metrics.identifiability_audit import AuditSetup, audit_run


def best_of(repeats, function):
    """Best wall time and best CPU time (process_time: less sensitive to other load)."""
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return f"{min(walls):.3f} cpu_seconds={min(cpus):.3f}"


def setup(n, d, hidden, classes, output, mode="ls", test=2000, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.random((n + 1 + test, d)) < 0.2).astype(float)
    y = rng.integers(classes, size=n + 1 + test)
    z = idf.noise_multiplier_for_rho_beta(0.9, 30, 1e-3)
    return AuditSetup(x=x[:n], y=y[:n], x_alt=x[n], y_alt=int(y[n]), star=0, x_test=x[n + 1:], y_test=y[n + 1:],
                      classes=classes, neighbourhood="bounded", mode=mode, noise_multiplier=z,
                      hidden=hidden, output=output, learning_rate=0.01)


def main() -> None:
    adult = setup(1000, 108, (6, 6), 2, "sigmoid")
    purchase = setup(1000, 600, (128,), 100, "softmax")
    for name, s in (("adult", adult), ("purchase100", purchase)):
        run, _, _ = audit_run(s, 0, 0)
        seconds = best_of(3, lambda s=s: audit_run(s, 0, 0))
        target = 1 if name == "adult" else 10
        print(f"audit_run dataset={name} n=1000 p={run['n_params']} k=30 seconds={seconds} (target <= {target} s)")
    for n in (250, 500, 1000, 2000, 4000):
        s = setup(n, 600, (128,), 100, "softmax", test=2000)
        print(f"audit_run growth_n n={n} p=89828 seconds={best_of(3, lambda s=s: audit_run(s, 0, 0))}")
    for width in (32, 64, 128, 256, 512):
        s = setup(1000, 600, (width,), 100, "softmax")
        p = 600 * width + width + width * 100 + 100
        print(f"audit_run growth_p n=1000 p={p} seconds={best_of(3, lambda s=s: audit_run(s, 0, 0))}")
    seconds = best_of(3, lambda: [idf.noise_multiplier_for_rho_beta(r, 30, 1e-3) for r in (0.53, 0.75, 0.9, 0.99)])
    print(f"noise_multiplier_for_rho_beta conversion=legacy targets=4 seconds={seconds}")


if __name__ == "__main__":
    main()
