"""Epsilon* (Negoescu et al., arXiv 2307.11280v3): empirical privacy of one model instance.

The family is split along its parts; every public name is re-exported here, so
``from dpaudit.metrics.epsilon_star import X`` keeps working:

* ``estimators``: rates, eq. 7, the empirical and parametric estimators, their
  ceilings, and the true-CDF version used by the simulations;
* ``bootstrap``: the percentile bootstrap interval over examples (an extension);
* ``permutation``: the empirical ε*'s label-permutation null, its noise floor (an extension);
* ``goodness_of_fit``: the GMM/KS check of App. B.2 (Fig. 6) and its per-model form;
* ``mechanism``: the mechanism-level bound ε̄ (Theorems 2 and 4);
* ``run``: the long-format rows of one model, as the workflow writes them;
* ``strategies``: per-strategy aggregation over seeds (Figs 1-2) and ε̄ per strategy.
"""

from dpaudit.metrics.epsilon_star.bootstrap import (
    BootstrapInterval,
    bootstrap_epsilon_star,
    normal_epsilon_star_values,
    resample_indices,
)
from dpaudit.metrics.epsilon_star.estimators import (
    EMPIRICAL_FILTER,
    GRID_SIZE,
    TERMS,
    EpsilonStarResult,
    NormalFit,
    Rates,
    distribution_epsilon_star,
    distribution_rates,
    empirical_ceiling,
    empirical_epsilon_star,
    empirical_rates,
    epsilon_star_from_rates,
    epsilon_star_terms,
    fit_normals,
    normal_epsilon_star,
    normal_rates,
    parametric_ceiling,
    parametric_epsilon_star,
    quantile_levels,
    transform_losses,
)
from dpaudit.metrics.epsilon_star.goodness_of_fit import (
    NormalFitCheck,
    gmm_ks_goodness_of_fit,
    normal_fit_check,
)
from dpaudit.metrics.epsilon_star.mechanism import (
    MechanismBound,
    log_mean_exp,
    mechanism_epsilon_bar,
)
from dpaudit.metrics.epsilon_star.permutation import PermutationNull, permutation_null
from dpaudit.metrics.epsilon_star.run import (
    LOSS_VARIANTS,
    PARAMETRIC_CEILING_TOLERANCE,
    epsilon_star_metrics,
    epsilon_star_run_metrics,
)
from dpaudit.metrics.epsilon_star.strategies import aggregate_strategies, strategy_epsilon_bar

__all__ = [
    "EMPIRICAL_FILTER",
    "GRID_SIZE",
    "LOSS_VARIANTS",
    "PARAMETRIC_CEILING_TOLERANCE",
    "TERMS",
    "BootstrapInterval",
    "EpsilonStarResult",
    "MechanismBound",
    "NormalFit",
    "NormalFitCheck",
    "PermutationNull",
    "Rates",
    "aggregate_strategies",
    "bootstrap_epsilon_star",
    "distribution_epsilon_star",
    "distribution_rates",
    "empirical_ceiling",
    "empirical_epsilon_star",
    "empirical_rates",
    "epsilon_star_from_rates",
    "epsilon_star_metrics",
    "epsilon_star_run_metrics",
    "epsilon_star_terms",
    "fit_normals",
    "gmm_ks_goodness_of_fit",
    "log_mean_exp",
    "mechanism_epsilon_bar",
    "normal_epsilon_star",
    "normal_epsilon_star_values",
    "normal_fit_check",
    "normal_rates",
    "permutation_null",
    "parametric_ceiling",
    "parametric_epsilon_star",
    "quantile_levels",
    "resample_indices",
    "strategy_epsilon_bar",
    "transform_losses",
]
