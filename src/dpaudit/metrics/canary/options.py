"""Which ``metrics.canary`` options each canary job reads (issue 47): its params hold these only,
so a changed option reruns only the jobs whose outputs it changes.

``tests/unit/test_job_options.py`` reads the options each job's code subscripts and holds these
lists to them.
"""

from __future__ import annotations

# The DP-SGD audit twin (dpaudit.training.canary.canary_scores): the canaries it plants and how.
TWIN_OPTIONS = ("gradient_canaries", "input_canaries", "gradient_norm_factor", "seed", "confidence")
# A linear run's releases and the detectable noise factor they simulate (dpaudit.training.canary_linear).
LINEAR_OPTIONS = ("linear_releases", "seed", "confidence", "gdp_thresholds_per_tail")
# The canary rows of an audited run (dpaudit.metrics.canary.rows.run_canary_metrics); a run without
# an audit reads none.
ROW_OPTIONS = ("guess_counts", "confidence", "gdp_thresholds_per_tail", "seed")


def subset(options, keys) -> dict:
    """``options`` restricted to ``keys`` (in the order of ``keys``)."""
    return {key: options[key] for key in keys}
