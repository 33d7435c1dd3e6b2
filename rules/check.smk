# A complete, consistent results/ (issues 19 and 26), included last: it reads every rule.
#
# Snakemake does not rebuild a missing intermediate while the files made from it are
# present, so the default target names every file of every job (a deleted one is rebuilt,
# and everything downstream follows by modification time). Each family registers its
# per-run and per-dataset files (@intermediates, rules/common.smk); the other outputs of
# any job whose file is listed (PDFs beside PNGs, tables beside figures) are added from
# the rules' own output patterns. tests/workflow/test_complete_targets.py fails when a
# job's output is missing.
#
# Final outputs are checked: no job reads a final table or figure, so a file damaged
# after it was written would go unnoticed. check_results reads each one's Parquet footer,
# PNG/PDF header and trailer or closing </html> (dpaudit.checks); it reruns whenever one
# is newer than its record (a truncated file is) and fails naming it.
from snakemake.io import apply_wildcards


_LITERAL_SIBLINGS = {}


def _sibling_outputs(path):
    """Every output of the job that writes ``path`` (itself included). The batched rules (issue 36)
    have literal outputs: a dict finds them; only rules with wildcards are matched as patterns."""
    if not _LITERAL_SIBLINGS:
        for candidate in workflow.rules:
            if not candidate.has_wildcards():
                outputs = [str(output) for output in candidate.output]
                _LITERAL_SIBLINGS.update(dict.fromkeys(outputs, outputs))
    if path in _LITERAL_SIBLINGS:
        return _LITERAL_SIBLINGS[path]
    for candidate in workflow.rules:
        if not candidate.has_wildcards():
            continue
        for pattern in candidate.output:
            match = pattern.match(path)
            if match:
                return [apply_wildcards(other, match.groupdict()) for other in candidate.output]
    return [path]


def _with_siblings(paths):
    files = {}
    for path in paths:
        if path not in files:
            files.update(dict.fromkeys(_sibling_outputs(path)))
    return list(files)


def intermediate_files():
    return [path for family_files in INTERMEDIATES for path in family_files()]


def final_outputs(wildcards=None):
    """The default target's named files and every other output of their jobs (tables, figures,
    pages with their PDFs and data), without intermediates: what check_results reads."""
    return _with_siblings(f for f in workflow.get_rule("all").input if isinstance(f, str) and f != P.RESULTS_CHECK)


def complete_results(wildcards):
    """The default target's named files with every intermediate and every job's other outputs."""
    return _with_siblings([*intermediate_files(), *(f for f in workflow.get_rule("all").input if isinstance(f, str))])


rule check_results:
    input:
        final_outputs,
    output:
        P.RESULTS_CHECK,
    params:
        code=CODE["check_results"],
    localrule: True
    log:
        P.log("check_results"),
    script:
        "../scripts/check_results.py"
