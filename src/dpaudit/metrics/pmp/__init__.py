"""Practical membership privacy (Lowy et al., "Why does differential privacy with large ε
defend against practical membership inference attacks?", 2024).

``bounds``: MIA success bounds, the per-target profile solver, CHOOSE-EPS.
``expmech``: exact (enumeration) and Monte Carlo PMP of the exponential mechanism.
``gaussian``: the Prop. 12 upper bound of the Gaussian mechanism.
``dpsgd``: per-model PMP of DP-SGD runs (Recipes A, B, C).
``pool``: Recipe C's membership game from the run's recipe reference pool.
``run``: the long-format ``pmp`` rows of one run.
"""

from dpaudit.metrics.pmp.bounds import (
    choose_epsilon,
    mia_success_bound,
    mia_success_bound_delta,
    mip_eta,
    pmp_advantage_bound,
    profile_epsilon_per_row,
    target_pmp_epsilon,
)
from dpaudit.metrics.pmp.expmech import (
    expmech_pmp_exact,
    expmech_pmp_monte_carlo,
)
from dpaudit.metrics.pmp.gaussian import gaussian_pmp

__all__ = [
    "choose_epsilon",
    "expmech_pmp_exact",
    "expmech_pmp_monte_carlo",
    "gaussian_pmp",
    "mia_success_bound",
    "mia_success_bound_delta",
    "mip_eta",
    "pmp_advantage_bound",
    "profile_epsilon_per_row",
    "target_pmp_epsilon",
]
