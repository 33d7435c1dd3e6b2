"""Privacy profile of a linear model (LeBlond et al. 2023, AISec '23).

Split by concern: ``model`` (the exact L2-regularized logistic regression),
``neighbours`` (Okumura sphere, worst-case neighbour points, exact retraining),
``mechanisms`` (output and objective perturbation), ``profiles`` (coverage,
privacy loss, single and typical profiles, thresholds) and ``data`` (the numeric
views of Adult and of offline datasets the paper's setting needs).
"""
