"""Which options of a family each per-run job reads (issue 47): the rules give a job these only, so a
changed option reruns only the jobs whose outputs it changes.

``tests/unit/test_job_options.py`` reads the option keys each job's code subscripts and holds these
lists to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# metrics.canary: the DP-SGD audit twin (dpaudit.audit.twin.canary_scores), the canaries it
# plants and how;
CANARY_TWIN = ("gradient_canaries", "input_canaries", "gradient_norm_factor", "seed", "confidence")
# a linear run's releases and the detectable noise factor they simulate (dpaudit.audit.linear_audit);
CANARY_LINEAR = ("linear_releases", "seed", "confidence", "gdp_thresholds_per_tail")
# the canary rows of an audited run (dpaudit.metrics.canary.rows.run_canary_metrics); a run without an
# audit reads none.
CANARY_ROWS = ("guess_counts", "confidence", "gdp_thresholds_per_tail", "seed")

# metrics.pmp: the parent set and Recipe B's partner draw of the pmp pairs (dpaudit.extract.extract);
PMP_PAIRS = ("parent_seed", "nonmember_pool", "partners_relative_standard_error", "partners_max", "seed")
# the rows of a run the recipes apply to (dpaudit.metrics.pmp.run.pmp_run_metrics), and of one they do
# not apply to (the parent set's columns of its not-applicable rows).
PMP_ROWS = ("parent_seed", "nonmember_pool", "partners_relative_standard_error", "partners_max",
            "recipe_a_exact_max", "recipe_c", "alpha", "seed")
PMP_NOT_APPLICABLE_ROWS = ("parent_seed", "nonmember_pool")


def subset(options: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``options`` restricted to ``keys``, in their order."""
    return {key: options[key] for key in keys}
