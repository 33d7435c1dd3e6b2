"""The benches' one timing helper (run as scripts: ``python bench/<name>.py`` puts bench/ on the path)."""

import time


def best_of(repeats, function):
    """The best wall time of ``repeats`` calls of ``function`` (the least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)
