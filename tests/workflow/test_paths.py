"""Every artifact path is declared once, in dpaudit.contract.paths; jobs never parse paths for keys."""

import re

import pytest

from dpaudit.contract import paths as P
from tests.workflow.helpers import ROOT

WORKFLOW_FILES = sorted((ROOT / "rules").glob("*.smk")) + [ROOT / "Snakefile"]
# A string literal (plain or f-string) that starts with a workflow folder.
PATH_LITERAL = re.compile(r"""[fFrRbB]*(["'])(results|resources|logs|benchmarks)/""")


def _code_lines(path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        yield number, code


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_rule_files_write_no_path_literal(path):
    found = [f"{path.name}:{n}: {line.strip()}" for n, line in _code_lines(path) if PATH_LITERAL.search(line)]
    assert not found, "declare the pattern in src/dpaudit/contract/paths.py and use P.<NAME>:\n" + "\n".join(found)


def test_rule_files_have_the_paths_module():
    common = (ROOT / "rules" / "common.smk").read_text()
    assert "from dpaudit.contract import paths as P" in common


def test_the_check_finds_literals():
    assert PATH_LITERAL.search('    "results/models/{dataset}/{run}/train.json",')
    assert PATH_LITERAL.search("        f'results/figures/{name}.png'")
    assert not PATH_LITERAL.search("    P.TRAIN_INFO,")


# Folder-name parsing in a job adapter or the library: keys come from params or wildcards.
PARSING = re.compile(r"\.parent\.name|\.parents\[|\.parts\b|\.split\([\"']/[\"']\)")


def test_adapters_take_keys_from_params_not_from_paths():
    files = sorted((ROOT / "scripts").glob("*.py")) + [ROOT / "src" / "dpaudit" / "aggregate.py"]
    found = [f"{path.name}:{n}: {line.strip()}" for path in files for n, line in _code_lines(path)
             if PARSING.search(line)]
    assert not found, "pass dataset, run and grid values as params:\n" + "\n".join(found)


def test_fill_keeps_the_other_wildcards():
    assert P.metric("mia") == "results/metrics/mia/{dataset}/{run}.parquet"
    assert P.fill(P.METRIC, family="mia") == P.metric("mia")
    assert P.METRIC.format(family="pmp", dataset="toy", run="r") == "results/metrics/pmp/toy/r.parquet"
    assert P.wildcards(P.AUDIT_BLOCK) == ["dataset", "audit_config", "block", "kind"]
    with pytest.raises(KeyError, match="no wildcard"):
        P.fill(P.TRAIN_INFO, family="mia")


def test_beside_swaps_the_extension_only():
    assert P.beside(P.LANDSCAPE_FIGURE, "pdf") == "results/figures/epsilon_star_landscape_{dataset}.pdf"
    assert P.beside(P.PROFILE_FIGURE, "pdf") == "results/figures/profile/{view}/fig{k}.pdf"
    with pytest.raises(ValueError):
        P.beside(P.RAW_FILE, "pdf")


def test_logs_and_benchmarks():
    assert P.log("train_model", P.RUN_KEY) == "logs/train_model/{dataset}/{run}.log"
    assert P.log("aggregate_metrics") == "logs/aggregate_metrics.log"
    assert P.benchmark("prepare_dataset", P.DATASET_KEY) == "benchmarks/prepare_dataset/{dataset}.tsv"


def test_every_pattern_is_declared_once():
    patterns = {name: value for name, value in vars(P).items()
                if name.isupper() and isinstance(value, str) and "/" in value and not name.endswith("_KEY")}
    by_value = {}
    for name, value in patterns.items():
        by_value.setdefault(value, []).append(name)
    assert not {v: n for v, n in by_value.items() if len(n) > 1}
    assert all(value.startswith(("results/", "resources/")) for value in patterns.values())


def _matches(pattern, path):
    """Whether ``path`` is an instance of ``pattern`` with Snakemake's unconstrained wildcards (.+)."""
    regex = re.escape(pattern)
    for name in P.wildcards(pattern):
        regex = regex.replace(re.escape("{" + name + "}"), ".+", 1)
    return re.fullmatch(regex, path) is not None


@pytest.mark.parametrize("run", ["guidance", "mechanism~dpsgd_seed~0", "a/b"])
def test_dossier_and_guidance_patterns_do_not_collide(run):
    # Issue 23: a model's dossier is never taken for its dataset's guidance page or the other way
    # round, whatever the run is called, so no ruleorder and no negative-lookahead wildcard is needed.
    for dataset in ("toy", "guidance", "dossiers"):
        dossier, guidance = P.DOSSIER.format(dataset=dataset, run=run), P.GUIDANCE.format(dataset=dataset)
        assert not _matches(P.GUIDANCE, dossier) and not _matches(P.DOSSIER, guidance)
        for page in (P.beside(guidance, "png"), P.beside(guidance, "pdf")):
            assert not _matches(P.DOSSIER, page)
    assert _matches(P.DOSSIER, P.DOSSIER.format(dataset="toy", run=run))  # the oracle matches its own


@pytest.mark.parametrize("dataset", ["toy", "guidance", "exposed", "dossiers", "a_exposed"])
def test_exposed_rows_page_collides_with_no_other_page(dataset):
    # Issue 24: the per-dataset exposed-rows page has a folder of its own, like the guidance page.
    exposed = P.EXPOSED_ROWS.format(dataset=dataset)
    for page in (exposed, P.beside(exposed, "png"), P.beside(exposed, "pdf")):
        assert not _matches(P.GUIDANCE, page) and not _matches(P.DOSSIER, page)
        assert not _matches(P.beside(P.GUIDANCE, "png"), page)
    for other in (P.GUIDANCE.format(dataset=dataset), P.DOSSIER.format(dataset=dataset, run="r")):
        assert not _matches(P.EXPOSED_ROWS, other)


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_no_rule_order_or_lookahead_wildcard(path):
    text = path.read_text()
    assert "ruleorder" not in text and "(?!" not in text, path.name
