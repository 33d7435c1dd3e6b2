"""Issue 19: rule all names every file any job of the DAG writes under results/.

Snakemake does not rebuild a missing intermediate while the files made from it are
present; only a target is always rebuilt. So a deleted model, per-example table,
metric file or side output (a figure's PDF or table) is rebuilt, with everything made
from it, only if rule all names it. A new rule whose outputs are not reachable this
way fails here: list them in the family's ``@intermediates`` function (its rule file;
rules/check.smk collects them) or name one of the job's outputs in rule all (its other
outputs follow).
"""

import re

import pytest

from tests.workflow.helpers import ROOT, SHIPPED_CONFIGS, shipped_dry_run, snakemake

# Together these configs enable every rule (every family, simulation, the audit and the profile).
CONFIGS = ["config/config.yaml", "config/paper/epsilon_star_lite.yaml", "config/paper/pmp_lite.yaml",
           "config/paper/identifiability_lite.yaml", "config/paper/privacy_profile_lite.yaml",
           "config/trained_elsewhere.yaml"]


def _outputs_and_targets(dry_run: str) -> tuple[dict[str, str], set[str]]:
    outputs, targets, rule = {}, set(), None
    for line in dry_run.splitlines():
        match = re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line.strip())
        if match:
            rule = match.group(1)
            continue
        stripped = line.strip()
        for key in ("input:", "output:"):
            if stripped.startswith(key):
                files = {f.strip() for f in stripped[len(key):].split(",") if f.strip()}
                if rule == "all" and key == "input:":
                    targets |= files
                elif rule != "all" and key == "output:":
                    outputs.update(dict.fromkeys(files, rule))
    return outputs, targets


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
@pytest.mark.parametrize("config", CONFIGS)
def test_rule_all_names_every_result_of_every_job(config):
    result = shipped_dry_run(config)  # in an empty work directory: every job, as with --forceall
    outputs, targets = _outputs_and_targets(result.stdout)
    assert len(outputs) > 50 and targets, result.stdout[-3000:]
    missing = sorted(f"{rule}: {path}" for path, rule in outputs.items()
                     if path.startswith("results/") and path not in targets)
    assert not missing, "outputs rule all does not name (never rebuilt once deleted):\n" + "\n".join(missing[:40])


def test_rule_all_names_every_result_with_the_attacks_on(tmp_path):
    # issue 24: no config file enables metrics.attacks yet; its pools, scores, figures and the
    # exposed-rows pages must be targets too
    import yaml

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["metrics"]["attacks"] = {"enabled": True, "reference_models": 16}
    path = tmp_path / "attacks.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--forceall", "--configfile", str(path))
    outputs, targets = _outputs_and_targets(result.stdout)
    assert "results/exposed/digits.html" in outputs and "results/exposed/digits.png" in targets
    missing = sorted(f"{rule}: {p}" for p, rule in outputs.items() if p.startswith("results/") and p not in targets)
    assert not missing, "\n".join(missing[:40])
