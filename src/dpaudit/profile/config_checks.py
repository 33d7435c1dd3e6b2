"""Parse-time checks of the config's ``profile`` block (``dpaudit.config.validate_config`` calls them)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PROFILE_ADULT_NUMERIC_COLUMNS", "PROFILE_SOURCE_COLUMNS", "profile_problems"]

# Raw columns of the privacy-profile sources (profile.views.<name>.columns index them)
# and, for adult, the numeric ones a view can use (the others are categorical text).
PROFILE_SOURCE_COLUMNS = {"adult": 15, "breast_cancer": 30}
PROFILE_ADULT_NUMERIC_COLUMNS = (0, 2, 4, 10, 11, 12)


def profile_problems(profile: Mapping) -> list[str]:
    """What the schema cannot say about the profile block: an increasing ε grid, two-feature figure views."""
    problems = []
    grid = profile["log10_epsilons"]
    unordered = [index for index in range(1, len(grid)) if not grid[index] > grid[index - 1]]
    if unordered:
        problems.append(f"config.profile.log10_epsilons: must be strictly increasing; position(s) {unordered} "
                        f"({[grid[i] for i in unordered]}) are not above the value before")
    views = profile["views"]
    for name, view in views.items():
        width = PROFILE_SOURCE_COLUMNS[view["source"]]
        for position, column in enumerate(view["columns"]):
            if column >= width:
                problems.append(f"config.profile.views.{name}.columns[{position}]: column {column} does not exist "
                                f"in source {view['source']} ({width} columns); write a column in 0..{width - 1}")
            elif view["source"] == "adult" and column not in PROFILE_ADULT_NUMERIC_COLUMNS:
                problems.append(f"config.profile.views.{name}.columns[{position}]: adult column {column} is not "
                                f"numeric; write one of {list(PROFILE_ADULT_NUMERIC_COLUMNS)}")
        if view["figures"] and len(view["columns"]) != 2:
            problems.append(f"config.profile.views.{name}.figures: Figs 2-7 plot two parameter coordinates and this "
                            f"view has {len(view['columns'])} columns; set figures: false (its thresholds and exact "
                            "retraining still run)")
    for position, name in enumerate(profile["samples"]["views"]):
        if name not in views:
            problems.append(f"config.profile.samples.views[{position}]: {name!r} is not among profile.views "
                            f"{sorted(views)}")
        elif len(views[name]["columns"]) != 2:
            problems.append(f"config.profile.samples.views[{position}]: Figs 1 and 8 plot two parameter coordinates "
                            f"and view {name!r} has {len(views[name]['columns'])} columns")
    return problems
