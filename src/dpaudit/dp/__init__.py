"""dpaudit.dp: differential-privacy primitives and reporting (Geambasu's DP lecture).

Modules (import them directly; this package imports nothing so that light users
do not pay for dp_accounting or matplotlib):

- ``mechanisms``: Laplace, Gaussian (classical, refused for ε > 1, and analytic),
  exponential, randomized response; bounded sum/mean, approximate bounds.
- ``sensitivity``: analytic sensitivities and a brute-force checker over small
  domains (add/remove and replace-one relations).
- ``composition``: basic, advanced, crossover, budget splitting, amplification by
  Poisson sampling, group privacy, parallel composition, RDP and its conversion.
- ``hypothesis``: the (ε, δ) trade-off curve, attack accuracy/advantage bounds,
  TPR bounds, Clopper–Pearson, empirical ε lower bound, ROC-in-DP-region check,
  ε rules of thumb.
- ``checker``: exact and empirical (ε, δ)-DP checks of a mechanism.
- ``ledger``: the per-dataset budget ledger from train-info dicts.
- ``card``: the per-model privacy card.
"""
