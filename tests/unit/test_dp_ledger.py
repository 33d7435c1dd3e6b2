"""Budget ledger on hand-made train-info dicts (Geambasu's DP lecture: every release spends budget; baselines are ε = ∞).

Oracles: sums written out by hand for basic composition; for RDP composition,
dp_accounting's RdpAccountant composing the same events directly plus the
pure-DP RDP bound min(ε, αε²/2) written here, converted by dp_accounting's
compute_epsilon. Tolerances: 1e-9 relative (same arithmetic, different code).
"""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

from dpaudit.dp.composition import LEDGER_RDP_ORDERS, dpsgd_epsilon
from dpaudit.dp.ledger import build_ledger
from dpaudit.io import read_json, write_json

Q = 256 / 60_000
T = 14_063


def dpsgd(run, sigma=1.12, eps=2.52, dataset="adult", **extra):
    info = {"dataset": dataset, "run": run, "mechanism": "dpsgd", "epsilon": eps, "delta": 1e-5,
            "accountant": "rdp", "neighbouring_relation": "add_remove", "sampling": "poisson",
            "noise_multiplier": sigma, "sampling_probability": Q, "steps": T}
    info.update(extra)
    return info


def grid():
    return [
        {"dataset": "adult", "run": "base", "mechanism": "baseline", "epsilon": "inf"},
        {"dataset": "adult", "run": "base2", "mechanism": "baseline"},
        dpsgd("dp1"),
        dpsgd("dp2", sigma=2.0, eps=1.1),
        {"dataset": "adult", "run": "outpert", "mechanism": "output_perturbation",
         "epsilon": 1.0, "delta": 0.0, "neighbouring_relation": "replace_one"},
        {"dataset": "adult", "run": "objpert", "mechanism": "objective_perturbation",
         "epsilon": 0.5, "delta": 1e-6},
        dpsgd("m1", dataset="mnist"),
        dpsgd("m2", dataset="mnist", sampling="shuffle", unit_of_protection="user"),
    ]


def test_run_table_theory_and_nonprivate_inf():
    led = build_ledger(grid())
    runs = led.runs.set_index("run")
    assert len(runs) == 8
    for r in ("base", "base2"):
        assert runs.loc[r, "epsilon"] == math.inf  # never 0 or NaN (pitfall 8)
        assert not runs.loc[r, "private"]
        assert runs.loc[r, "max_attack_accuracy"] == 1.0
        assert runs.loc[r, "exp_epsilon"] == math.inf
    assert runs.loc["outpert", "exp_epsilon"] == pytest.approx(math.e)
    assert runs.loc["outpert", "max_attack_accuracy"] == pytest.approx(math.e / (1 + math.e))
    assert runs.loc["outpert", "tpr_bound_at_fpr_0_01"] == pytest.approx(0.01 * math.e)
    assert runs.loc["dp1", "rdp_composition"] == "subsampled_gaussian"
    assert runs.loc["outpert", "rdp_composition"] == "pure_dp"
    assert runs.loc["objpert", "rdp_composition"] == "basic_fallback"
    assert "Poisson" in runs.loc["m2", "notes"] and "group privacy" in runs.loc["m2", "notes"]
    assert runs.loc["dp1", "unit_of_protection"] == "example"


def test_totals_basic_and_rdp_against_direct_oracle():
    led = build_ledger(grid())
    tot = led.totals.set_index("dataset")
    adult = tot.loc["adult"]
    assert adult["n_runs"] == 6 and adult["n_private"] == 4 and adult["n_nonprivate"] == 2
    assert adult["basic_epsilon"] == pytest.approx(2.52 + 1.1 + 1.0 + 0.5, rel=1e-12)
    assert adult["basic_delta"] == pytest.approx(1e-5 + 1e-5 + 0 + 1e-6, rel=1e-12)
    assert adult["max_run_epsilon"] == 2.52
    # Oracle for RDP: the two DP-SGD runs through dp_accounting, the pure-DP run via
    # min(ε, αε²/2), converted at δ = max run δ = 1e-5; the (0.5, 1e-6) run is added
    # by basic composition.
    orders = LEDGER_RDP_ORDERS
    acc = rdp_acc.RdpAccountant(list(orders))
    for sigma in (1.12, 2.0):
        acc.compose(dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(sigma)), T)
    curve = acc.rdp + np.minimum(1.0, orders * 0.5)
    eps_rdp, _ = rdp_acc.compute_epsilon(orders, curve, 1e-5)
    assert adult["rdp_epsilon"] == pytest.approx(eps_rdp + 0.5, rel=1e-9)
    assert adult["rdp_delta"] == pytest.approx(1e-5 + 1e-6, rel=1e-12)
    assert adult["n_rdp_composed"] == 3 and adult["n_basic_fallback"] == 1
    assert adult["rdp_epsilon"] < adult["basic_epsilon"]
    # Non-private runs in the grid make the release cost infinite.
    assert adult["release_all_epsilon"] == math.inf
    assert "non-private" in adult["notes"]
    assert "different neighbouring relations" in adult["notes"]


def test_grid_without_baselines_release_cost_is_min_of_totals():
    led = build_ledger([dpsgd(f"r{i}") for i in range(4)])
    tot = led.totals.iloc[0]
    assert tot["basic_epsilon"] == pytest.approx(4 * 2.52)
    # Four identical runs: RDP total = the run's own curve × 4.
    four, _ = dpsgd_epsilon(Q, 1.12, 4 * T, 1e-5, orders=LEDGER_RDP_ORDERS)
    assert tot["rdp_epsilon"] == pytest.approx(four, rel=1e-9)
    assert tot["rdp_epsilon"] < tot["basic_epsilon"]
    assert tot["release_all_epsilon"] == tot["rdp_epsilon"]
    assert tot["release_all_delta"] == pytest.approx(1e-5)


def test_single_run_ledger_is_consistent_with_its_accountant():
    # Integer ledger orders give a valid upper bound ≥ the fractional-order value 2.5187.
    led = build_ledger([dpsgd("only")])
    tot = led.totals.iloc[0]
    assert 2.5187 <= tot["rdp_epsilon"] <= 2.53
    assert tot["release_all_epsilon"] == pytest.approx(2.52)  # basic (= the run) wins


def test_ledger_reads_dicts_round_tripped_through_dpaudit_io(tmp_path):
    path = tmp_path / "train.json"
    write_json(path, {"dataset": "d", "run": "b", "mechanism": "baseline", "epsilon": math.inf})
    info = read_json(path)
    assert info["epsilon"] == "inf"
    led = build_ledger([info, dpsgd("x", dataset="d")])
    assert led.runs.set_index("run").loc["b", "epsilon"] == math.inf


def test_ledger_refuses_incomplete_private_runs():
    with pytest.raises(ValueError, match="no epsilon"):
        build_ledger([{"run": "x", "mechanism": "dpsgd", "delta": 1e-5}])
    with pytest.raises(ValueError, match="without delta"):
        build_ledger([{"run": "x", "mechanism": "dpsgd", "epsilon": 1.0}])
    with pytest.raises(ValueError, match="relation"):
        build_ledger([dpsgd("x", neighbouring_relation="hamming")])


def test_replace_one_dpsgd_falls_back_to_basic_and_dataset_override():
    led = build_ledger([dpsgd("x", neighbouring_relation="replace_one"), dpsgd("y")],
                       dataset="override", conversion="classic")
    runs = led.runs.set_index("run")
    assert runs.loc["x", "rdp_composition"] == "basic_fallback"
    assert set(led.runs["dataset"]) == {"override"}
    tot = led.totals.iloc[0]
    assert tot["n_basic_fallback"] == 1
    single, _ = dpsgd_epsilon(Q, 1.12, T, 1e-5, conversion="classic", orders=LEDGER_RDP_ORDERS)
    assert tot["rdp_epsilon"] == pytest.approx(2.52 + single, rel=1e-9)


def test_empty_ledger():
    led = build_ledger([])
    assert led.runs.empty and led.totals.empty


def test_bench_script_runs_on_a_small_grid(capsys):
    # Keeps bench/bench_ledger.py working; the timing itself is reported, not asserted.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "bench_ledger.py"
    spec = importlib.util.spec_from_file_location("bench_ledger", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(30)
    assert result["n_runs"] == 30 and result["ledger_s"] >= 0
    assert "cards_with_figure_s" in capsys.readouterr().out


def test_entries_auditing_one_model_are_composed_once_at_their_larger_epsilon():
    """An external model audited twice (its model file and its outputs, ``same_model_as``) is one release:
    the totals equal those of the larger-ε entry alone (oracle: the ledger of that one row); both rows listed."""
    external = {"dataset": "bc", "mechanism": "external", "delta": 1e-5, "sampling": "poisson", "accountant": "rdp",
                "noise_multiplier": 1.3, "sampling_probability": 32 / 284, "steps": 134}
    model_file = {**external, "run": "keras_file", "epsilon": 6.466}
    outputs = {"dataset": "bc", "run": "outputs", "mechanism": "external", "epsilon": 6.5, "delta": 1e-5,
               "same_model_as": "keras_file"}
    ledger = build_ledger([model_file, outputs])
    alone = build_ledger([outputs]).totals.iloc[0]
    totals = ledger.totals.iloc[0]
    runs = ledger.runs.set_index("run")
    assert runs.loc["keras_file", "counted_in_totals"] == False  # noqa: E712 (numpy bool)
    assert runs.loc["outputs", "counted_in_totals"] == True  # noqa: E712
    assert "same trained model as 'outputs'" in runs.loc["keras_file", "notes"]
    for column in ("basic_epsilon", "rdp_epsilon", "release_all_epsilon", "release_all_delta", "n_private"):
        assert totals[column] == pytest.approx(alone[column], rel=1e-12), column
    assert totals["release_all_epsilon"] == pytest.approx(6.5, rel=1e-12)
    assert "composed once" in totals["notes"]
    # without the key the two are two releases: basic composition adds them
    apart = build_ledger([model_file, {**outputs, "same_model_as": None}]).totals.iloc[0]
    assert apart["basic_epsilon"] == pytest.approx(6.466 + 6.5, rel=1e-12)
